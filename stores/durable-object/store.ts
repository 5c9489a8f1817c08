/**
 * `DurableObjectStore`: a `ClaimingStore` on Cloudflare Durable Objects — the client half. The
 * object class it calls, `IdempotencyObject`, is in object.ts; this file never imports
 * `cloudflare:workers`, so importing the store (in a test, a bundle, a Node type check) does not pull
 * the Workers runtime in.
 *
 * A Durable Object runs one request at a time, and its SQLite storage answers synchronously, so
 * a whole batch step (claim 100 ids, say) runs inside one object as one atomic transaction: of
 * any number of concurrent callers exactly one gets `claimed`. Ids are spread over `shards`
 * objects by a hash of their key, and every batch step makes ONE RPC call per shard that holds
 * at least one of the batch's ids.
 *
 * `IdempotencyObject` keeps one row per key — status (`in-flight` | `done`), fencing token, lease
 * deadline, retention deadline, payload fingerprint — and decides expiry itself on every call (an
 * expired lease can be re-claimed, an expired retention is not "done"). A claim's fingerprint is
 * written in the same call (and SQLite transaction) as the claim; `done` / `in-flight` answers carry
 * the stored one. An alarm deletes expired rows and re-arms for the next deadline, so storage stays
 * bounded without any external job.
 *
 * What this is *not*: a cross-shard transaction (a batch step is atomic per shard, which is all
 * the contract asks: every id is decided in exactly one object), nor free to re-shard: changing
 * `shards` or `objectName` moves ids to other objects, so ids in flight or remembered under the
 * old layout are not seen under the new one until their retention has passed.
 *
 * Types: the Workers runtime types (`@cloudflare/workers-types`) declare globals that clash with
 * Node's, and this file is also compiled with the package's Node program, so it describes the
 * binding structurally (`IdempotencyNamespace`). The real `DurableObjectNamespace<IdempotencyObject>`
 * satisfies it.
 */
import type { Claim, ClaimRef, ClaimingStore, IdRecord, StoreWindows } from "../../src/contract.js";
import { InvalidOptionError, StoreUnavailableError } from "../../src/errors.js";
import { storeFailure } from "../../src/store-kit/failures.js";
import { checkNamespace, storeKey } from "../../src/store-kit/keys.js";
import { checkOptions, optionKeys } from "../../src/store-kit/options.js";
import { checkFingerprint, checkFingerprints } from "../../src/store-kit/fingerprints.js";
import { checkMs, resolveWindows } from "../../src/store-kit/windows.js";

const STORE_NAME = "DurableObjectStore";
/** Keys longer than this (UTF-8 bytes, namespace included) keep a SHA-256 of the id instead: rows stay small. */
const MAX_KEY_BYTES = 512;
/** Most objects one store spreads its ids over. */
const MAX_SHARDS = 1024;
const DEFAULT_OBJECT_NAME = "babelqueue-idempotency";

/** The answer of one claim inside the object (the public `Claim`, as plain data over RPC). */
export type ShardClaim = Claim;

/** One owned claim as the object takes it: a store key (not an id) and its fencing token. */
export interface ShardClaimRef {
  readonly key: string;
  readonly token: string;
}

/** What one object holds for one key (the public `IdRecord`, as plain data over RPC), or null. */
export type ShardRecord = IdRecord | null;

/**
 * The RPC surface of one `IdempotencyObject`, as a stub exposes it. Every method takes a batch.
 * `fingerprints`, when passed, has one entry per key (null where there is none).
 */
export interface IdempotencyShard {
  claim(keys: string[], leaseMs: number, fingerprints?: (string | null)[]): Promise<ShardClaim[]>;
  remember(keys: string[], retentionMs: number, fingerprints?: (string | null)[]): Promise<void>;
  release(claims: ShardClaimRef[]): Promise<boolean[]>;
  seen(keys: string[]): Promise<boolean[]>;
  forget(keys: string[]): Promise<void>;
  inspect(keys: string[]): Promise<ShardRecord[]>;
}

/**
 * What the store needs of a Durable Object namespace binding. `env.IDEMPOTENCY` typed
 * `DurableObjectNamespace<IdempotencyObject>` satisfies it.
 */
export interface IdempotencyNamespace<Id = unknown> {
  idFromName(name: string): Id;
  get(id: Id): IdempotencyShard;
}

/** Options of `DurableObjectStore`. */
export interface DurableObjectStoreOptions extends StoreWindows {
  /**
   * Key prefix separating consumers that must each run their effect once (two Workers
   * consuming the same message in different namespaces each run it). Default `""`.
   * 0-200 characters of `A-Z a-z 0-9 _ . - /`.
   */
  namespace?: string;
  /**
   * How many objects the ids are spread over (hash of namespace + id). One object serialises
   * its calls, and a call carries a whole batch step, so 1 serves most consumers; raise it when
   * one object's throughput (on the order of 1,000 calls a second) is not enough. A batch step
   * makes one call per shard that holds one of its ids. Keep it fixed for a deployment
   * (see the header). Default 1, at most 1024.
   */
  shards?: number;
  /**
   * Name prefix of the objects: shard `i` is `idFromName(\`${objectName}/shard-${i}\`)`. Two
   * stores with different names never share an object. Default `"babelqueue-idempotency"`.
   */
  objectName?: string;
  /**
   * Lease of an in-flight claim (ms) when `claim` is given none. Default 60 s; `queueHandler`
   * passes the consumer's wall-time limit (15 minutes) unless told otherwise.
   */
  leaseMs?: number;
  /**
   * How long a committed id is remembered (ms). Should cover the queue's redelivery window
   * (Cloudflare Queues keep messages 4 days by default). Default 4 days.
   */
  retentionMs?: number;
}

/** 32-bit FNV-1a over UTF-16 code units: stable across runtimes, enough to spread keys. */
function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i += 1) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

/**
 * One batch's fingerprints as the object takes them, in the order of `positions` (the batch
 * indexes one shard's call carries): undefined when the batch has none at all.
 */
function shardFingerprints(fingerprints: readonly (string | undefined)[] | undefined, positions: readonly number[]): (string | null)[] | undefined {
  if (fingerprints === undefined) return undefined;
  return positions.map((position) => fingerprints[position] ?? null);
}

const DURABLE_OBJECT_OPTION_KEYS = optionKeys<DurableObjectStoreOptions>({
  namespace: true,
  shards: true,
  objectName: true,
  leaseMs: true,
  retentionMs: true,
});

/**
 * A claiming store on Cloudflare Durable Objects: ids spread over `shards` objects of the
 * `IdempotencyObject` class, one RPC call per shard per batch step, each run as one SQLite
 * transaction inside the object. Keep `shards` and `objectName` fixed for a deployment.
 *
 * @example
 * ```ts
 * import { DurableObjectStore, queueHandler } from "babelqueue-serverless/cloudflare";
 * export { IdempotencyObject } from "babelqueue-serverless/cloudflare/durable-object";
 *
 * // wrangler.toml: [[durable_objects.bindings]] name = "IDEMPOTENCY", class_name = "IdempotencyObject"
 * export default {
 *   queue: queueHandler<Env>({
 *     store: (env) => new DurableObjectStore(env.IDEMPOTENCY, { namespace: "orders", shards: 4 }),
 *     handle: async (envelope) => sendReceipt(envelope.data),
 *   }),
 * };
 * ```
 */
export class DurableObjectStore implements ClaimingStore {
  readonly namespace: string;
  readonly shards: number;
  readonly objectName: string;
  readonly leaseMs: number;
  readonly retentionMs: number;
  readonly #binding: IdempotencyNamespace;

  constructor(binding: IdempotencyNamespace, options: DurableObjectStoreOptions = {}) {
    checkOptions(options, DURABLE_OBJECT_OPTION_KEYS, STORE_NAME);
    if (typeof binding?.idFromName !== "function" || typeof binding.get !== "function") {
      throw new InvalidOptionError("binding", "must be a Durable Object namespace bound to IdempotencyObject");
    }
    this.#binding = binding;
    this.namespace = checkNamespace(options.namespace ?? "");
    ({ leaseMs: this.leaseMs, retentionMs: this.retentionMs } = resolveWindows(options));
    const shards = options.shards ?? 1;
    if (!Number.isSafeInteger(shards) || shards < 1 || shards > MAX_SHARDS) {
      throw new InvalidOptionError("shards", `must be an integer from 1 to ${MAX_SHARDS}`);
    }
    this.shards = shards;
    const objectName = options.objectName ?? DEFAULT_OBJECT_NAME;
    if (typeof objectName !== "string" || objectName === "" || objectName.length > 200) {
      throw new InvalidOptionError("objectName", "must be a non-empty string of at most 200 characters");
    }
    this.objectName = objectName;
  }

  /** The shard that owns a store key. */
  shardOf(key: string): number {
    return this.shards === 1 ? 0 : fnv1a(key) % this.shards;
  }

  #stub(shard: number): IdempotencyShard {
    return this.#binding.get(this.#binding.idFromName(`${this.objectName}/shard-${shard}`));
  }

  #keys(ids: readonly string[]): Promise<string[]> {
    return Promise.all(ids.map((id) => storeKey(this.namespace, id, MAX_KEY_BYTES)));
  }

  /**
   * Runs one batch step: groups `items` by shard, makes one call per shard (in parallel), and
   * puts the answers back in the order of `items`.
   */
  async #step<Item, Answer>(
    operation: string,
    items: readonly Item[],
    keyOf: (item: Item) => string,
    call: (shard: IdempotencyShard, items: Item[], positions: number[]) => Promise<Answer[] | void>,
  ): Promise<Answer[]> {
    const groups = new Map<number, { items: Item[]; positions: number[] }>();
    items.forEach((item, position) => {
      const shard = this.shardOf(keyOf(item));
      let group = groups.get(shard);
      if (group === undefined) {
        group = { items: [], positions: [] };
        groups.set(shard, group);
      }
      group.items.push(item);
      group.positions.push(position);
    });
    const answers = new Array<Answer>(items.length);
    try {
      await Promise.all(
        [...groups].map(async ([shard, group]) => {
          const result = await call(this.#stub(shard), group.items, group.positions);
          if (result === undefined) return;
          if (!Array.isArray(result) || result.length !== group.items.length) {
            throw new StoreUnavailableError(STORE_NAME, operation, "the Durable Object returned an answer of the wrong shape");
          }
          group.positions.forEach((position, i) => {
            answers[position] = result[i] as Answer;
          });
        }),
      );
    } catch (error) {
      // The error's name only: a Durable Object's message may quote what it was called with.
      throw storeFailure(STORE_NAME, operation, error, { prefix: "the Durable Object call failed", message: false, cause: "original" });
    }
    return answers;
  }

  async seen(id: string): Promise<boolean> {
    return (await this.seenMany([id]))[0] === true;
  }

  async seenMany(ids: readonly string[]): Promise<boolean[]> {
    if (ids.length === 0) return [];
    const keys = await this.#keys(ids);
    return this.#step("seen", keys, (key) => key, (shard, batch) => shard.seen(batch));
  }

  async remember(id: string, fingerprint?: string): Promise<void> {
    await this.rememberMany([id], [checkFingerprint(fingerprint)]);
  }

  async rememberMany(ids: readonly string[], fingerprints?: readonly (string | undefined)[]): Promise<void> {
    const checked = present(checkFingerprints(fingerprints, ids.length));
    if (ids.length === 0) return;
    const keys = await this.#keys(ids);
    await this.#step("remember", keys, (key) => key, (shard, batch, positions) =>
      shard.remember(batch, this.retentionMs, shardFingerprints(checked, positions)),
    );
  }

  async forget(id: string): Promise<void> {
    const keys = await this.#keys([id]);
    await this.#step("forget", keys, (key) => key, (shard, batch) => shard.forget(batch));
  }

  /** What the object holds for one id (for operators): state, the window's remaining ms, fingerprint. One call. */
  async inspect(id: string): Promise<IdRecord | null> {
    const keys = await this.#keys([id]);
    const [record] = await this.#step<string, ShardRecord>("inspect", keys, (key) => key, (shard, batch) => shard.inspect(batch));
    return record ?? null;
  }

  async claim(id: string, leaseMs?: number, fingerprint?: string): Promise<Claim> {
    return (await this.claimMany([id], leaseMs, [checkFingerprint(fingerprint)]))[0] as Claim;
  }

  async claimMany(ids: readonly string[], leaseMs?: number, fingerprints?: readonly (string | undefined)[]): Promise<Claim[]> {
    const lease = checkMs("leaseMs", leaseMs ?? this.leaseMs);
    const checked = present(checkFingerprints(fingerprints, ids.length));
    if (ids.length === 0) return [];
    const keys = await this.#keys(ids);
    return this.#step("claim", keys, (key) => key, (shard, batch, positions) =>
      shard.claim(batch, lease, shardFingerprints(checked, positions)),
    );
  }

  async release(id: string, token: string): Promise<boolean> {
    const [key] = await this.#keys([id]);
    const [released] = await this.#step<ShardClaimRef, boolean>(
      "release",
      [{ key: key as string, token: String(token) }],
      (ref) => ref.key,
      (shard, batch) => shard.release(batch),
    );
    return released === true;
  }

  async releaseMany(claims: readonly ClaimRef[]): Promise<void> {
    if (claims.length === 0) return;
    const keys = await this.#keys(claims.map((claim) => claim.id));
    const refs = claims.map((claim, i): ShardClaimRef => ({ key: keys[i] as string, token: String(claim.token) }));
    await this.#step<ShardClaimRef, boolean>("release", refs, (ref) => ref.key, (shard, batch) => shard.release(batch));
  }
}

/** The fingerprints when at least one id has one, else undefined (the call then carries none). */
function present(fingerprints: (string | undefined)[]): (string | undefined)[] | undefined {
  return fingerprints.some((fingerprint) => fingerprint !== undefined) ? fingerprints : undefined;
}
