/**
 * `KVStore`: the seen-set `Store` (`seen` / `remember` / `forget`, plus `seenMany`, `recallMany`,
 * `rememberMany` and `inspect`) over Cloudflare Workers KV.
 *
 * Why it has no `claim`: Workers KV is eventually consistent — a write can take about 60 seconds
 * (longer under caching) to be visible from other locations — and it has no atomic
 * compare-and-set. So two deliveries of one message can both read "not seen" and both run: any
 * two whose runs overlap, even in one location (nothing makes the second wait: there is no claim),
 * and one that reads within about 60 s of a commit made in another location. So this store is a
 * `Store`, never a `ClaimingStore`: the batch engine uses it in seen-set mode (skip what is
 * committed, run the rest, `remember` on success), and the types keep it out of claim mode. Use
 * `DurableObjectStore` when two runs must never overlap.
 *
 * Each committed id is one KV key (`{namespace}:{id}`, hashed past 512 bytes by `storeKey`) whose
 * value is its retention deadline (epoch ms), followed by `:` and the payload fingerprint when the
 * commit had one (`1767225600000:sha256-…`; a value without the `:` part — every value written
 * before fingerprints existed — simply has none). `seen` checks that deadline itself, so retention
 * is exact; KV's `expirationTtl` (never below KV's 60-second minimum) only reclaims the space.
 * `recallMany` answers seen + fingerprint from the same one bulk read `seenMany` makes.
 *
 * Clock: the retention deadline is written from the committing Worker's `Date.now()` and checked
 * against the reading Worker's; KV's own clock only applies `expirationTtl`. There is no lease to
 * break (no claim), and a Worker whose clock is off by s only moves the end of a retention by s.
 *
 * What this is *not*: a lock, a claim, or read-your-writes across locations.
 */
import type { IdRecord, Recall, Store, StoreWindows } from "../src/contract.js";
import { InvalidOptionError } from "../src/errors.js";
import { storeFailure } from "../src/store-kit/failures.js";
import { checkOptions, optionKeys } from "../src/store-kit/options.js";
import { checkNamespace, storeKey } from "../src/store-kit/keys.js";
import { checkFingerprint, checkFingerprints, withFingerprint } from "../src/store-kit/fingerprints.js";
import { resolveWindows } from "../src/store-kit/windows.js";

const STORE_NAME = "KVStore";
/** KV's key limit (bytes). */
const MAX_KEY_BYTES = 512;
/** KV's smallest `expirationTtl` (seconds). */
const MIN_TTL_SECONDS = 60;
/**
 * The longest `expirationTtl` KV takes (a 32-bit integer of seconds, about 68 years): a longer retention
 * ("for good") writes no TTL, and the stored deadline alone ends it.
 */
const MAX_TTL_SECONDS = 2_147_483_647;
/** Most keys one bulk `get` may ask for. */
const BULK_GET_LIMIT = 100;

/** What the store needs of a KV namespace binding. `env.MY_KV` (a `KVNamespace`) satisfies it. */
export interface SeenSetKV {
  get(key: string, type: "text"): Promise<string | null>;
  get(keys: string[], type: "text"): Promise<Map<string, string | null>>;
  put(key: string, value: string, options?: { expirationTtl?: number }): Promise<void>;
  delete(key: string): Promise<void>;
}

/** Options of `KVStore`. */
export interface KVStoreOptions extends Pick<StoreWindows, "retentionMs"> {
  /**
   * Key prefix separating consumers that must each run their effect once. Default `""`.
   * 0-200 characters of `A-Z a-z 0-9 _ . - /`.
   */
  namespace?: string;
  /**
   * How long a committed id is remembered (ms). Should cover the queue's redelivery window
   * (Cloudflare Queues keep messages 4 days by default). Default 4 days. `seen` honours it to
   * the millisecond; the key's KV `expirationTtl` is the same window rounded up, at least 60 s.
   */
  retentionMs?: number;
  /**
   * Use KV's bulk `get` (up to 100 keys a call) for `seenMany` / `recallMany`. Default true; set
   * false for a binding that predates bulk reads (April 2025): they then read key by key.
   */
  bulkGet?: boolean;
}

/** A committed id's value, read back: its retention deadline and fingerprint (see the header). */
interface Committed {
  readonly deadline: number;
  readonly fingerprint: string | undefined;
}

/** Parses a value (null for an absent or unreadable one). */
function parseValue(value: string | null | undefined): Committed | null {
  if (value === null || value === undefined) return null;
  const colon = value.indexOf(":");
  const deadline = Number(colon < 0 ? value : value.slice(0, colon));
  if (!Number.isFinite(deadline)) return null;
  return { deadline, fingerprint: colon < 0 ? undefined : value.slice(colon + 1) || undefined };
}

const KV_OPTION_KEYS = optionKeys<KVStoreOptions>({ namespace: true, retentionMs: true, bulkGet: true });

/**
 * A seen-set store on Workers KV (`seen` / `remember` / `forget`, no claim: KV is eventually
 * consistent and has no compare-and-set). Two deliveries whose runs overlap (in any location), or
 * that come within about 60 s of a commit made elsewhere, can both run; use `DurableObjectStore` or
 * `D1Store` when that must never happen.
 *
 * @example
 * ```ts
 * import { KVStore, queueHandler } from "babelqueue-serverless/cloudflare";
 *
 * // wrangler.toml: [[kv_namespaces]] binding = "SEEN"
 * export default {
 *   queue: queueHandler<Env>({
 *     store: (env) => new KVStore(env.SEEN, { namespace: "orders", retentionMs: 4 * 24 * 60 * 60 * 1000 }),
 *     handle: async (envelope) => sendReceipt(envelope.data),
 *   }),
 * };
 * ```
 */
export class KVStore implements Store {
  readonly namespace: string;
  readonly retentionMs: number;
  readonly #kv: SeenSetKV;
  readonly #bulkGet: boolean;

  constructor(kv: SeenSetKV, options: KVStoreOptions = {}) {
    checkOptions(options, KV_OPTION_KEYS, STORE_NAME);
    if (typeof kv?.get !== "function" || typeof kv.put !== "function" || typeof kv.delete !== "function") {
      throw new InvalidOptionError("kv", "must be a Workers KV namespace binding");
    }
    this.#kv = kv;
    this.namespace = checkNamespace(options.namespace ?? "");
    this.retentionMs = resolveWindows({ retentionMs: options.retentionMs }).retentionMs;
    this.#bulkGet = options.bulkGet ?? true;
  }

  #key(id: string): Promise<string> {
    return storeKey(this.namespace, id, MAX_KEY_BYTES);
  }

  async #call<T>(operation: string, work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (error) {
      // KV's messages may quote a key: the error's name only.
      throw storeFailure(STORE_NAME, operation, error, { prefix: "the KV call failed", message: false, cause: "original" });
    }
  }

  /** The committed record of a value when its retention is still running, else null. */
  static #live(value: string | null | undefined, now: number): Committed | null {
    const committed = parseValue(value);
    return committed !== null && committed.deadline > now ? committed : null;
  }

  async seen(id: string): Promise<boolean> {
    const key = await this.#key(id);
    const value = await this.#call("seen", () => this.#kv.get(key, "text"));
    return KVStore.#live(value, Date.now()) !== null;
  }

  async seenMany(ids: readonly string[]): Promise<boolean[]> {
    return (await this.#recall("seen", ids)).map((recall) => recall.seen);
  }

  /** `seenMany` plus each committed id's fingerprint, from the same one (bulk) read. */
  async recallMany(ids: readonly string[]): Promise<Recall[]> {
    return this.#recall("recall", ids);
  }

  /** What KV holds for one id (for operators): done with its retention left and fingerprint, or null. One read. */
  async inspect(id: string): Promise<IdRecord | null> {
    const key = await this.#key(id);
    const now = Date.now();
    const live = KVStore.#live(await this.#call("inspect", () => this.#kv.get(key, "text")), now);
    return live === null ? null : { status: "done", retentionLeftMs: live.deadline - now, ...withFingerprint(live.fingerprint) };
  }

  async #recall(operation: string, ids: readonly string[]): Promise<Recall[]> {
    if (ids.length === 0) return [];
    const keys = await Promise.all(ids.map((id) => this.#key(id)));
    const values = await this.#call(operation, async () => {
      const found = new Map<string, string | null>();
      if (!this.#bulkGet) {
        await Promise.all(keys.map(async (key) => found.set(key, await this.#kv.get(key, "text"))));
        return found;
      }
      const unique = [...new Set(keys)];
      const chunks: string[][] = [];
      for (let i = 0; i < unique.length; i += BULK_GET_LIMIT) chunks.push(unique.slice(i, i + BULK_GET_LIMIT));
      for (const answer of await Promise.all(chunks.map((chunk) => this.#kv.get(chunk, "text")))) {
        for (const [key, value] of answer) found.set(key, value);
      }
      return found;
    });
    const now = Date.now();
    return keys.map((key): Recall => {
      const live = KVStore.#live(values.get(key), now);
      return live === null ? { seen: false } : { seen: true, ...withFingerprint(live.fingerprint) };
    });
  }

  async remember(id: string, fingerprint?: string): Promise<void> {
    await this.rememberMany([id], [checkFingerprint(fingerprint)]);
  }

  /**
   * One `put` per id, in parallel: Workers have no bulk write. Each value is written whole (there
   * is no claim whose fingerprint a commit could keep): an id given none is stored without one.
   */
  async rememberMany(ids: readonly string[], fingerprints?: readonly (string | undefined)[]): Promise<void> {
    const checked = checkFingerprints(fingerprints, ids.length);
    if (ids.length === 0) return;
    const keys = await Promise.all(ids.map((id) => this.#key(id)));
    const deadline = Date.now() + this.retentionMs;
    const ttlSeconds = Math.max(MIN_TTL_SECONDS, Math.ceil(this.retentionMs / 1000));
    const put = ttlSeconds > MAX_TTL_SECONDS ? {} : { expirationTtl: ttlSeconds };
    // One value per key; an id repeated in the batch is written once, with its last fingerprint.
    const values = new Map<string, string>();
    keys.forEach((key, i) => {
      const fingerprint = checked[i];
      values.set(key, fingerprint === undefined ? String(deadline) : `${deadline}:${fingerprint}`);
    });
    await this.#call("remember", () => Promise.all([...values].map(([key, value]) => this.#kv.put(key, value, put))));
  }

  async forget(id: string): Promise<void> {
    const key = await this.#key(id);
    await this.#call("forget", () => this.#kv.delete(key));
  }
}
