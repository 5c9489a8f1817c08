/**
 * `DurableObjectStore` + `IdempotencyObject`: a `ClaimingStore` on Cloudflare Durable Objects.
 *
 * A Durable Object runs one request at a time, and its SQLite storage answers synchronously, so
 * a whole batch step (claim 100 ids, say) runs inside one object as one atomic transaction: of
 * any number of concurrent callers exactly one gets `claimed`. Ids are spread over `shards`
 * objects by a hash of their key, and every batch step makes ONE RPC call per shard that holds
 * at least one of the batch's ids.
 *
 * `IdempotencyObject` keeps one row per key — status (`in-flight` | `done`), fencing token, lease
 * deadline, retention deadline — and decides expiry itself on every call (an expired lease can be
 * re-claimed, an expired retention is not "done"). An alarm deletes expired rows and re-arms for
 * the next deadline, so storage stays bounded without any external job.
 *
 * What this is *not*: a cross-shard transaction (a batch step is atomic per shard, which is all
 * the contract asks: every id is decided in exactly one object), nor free to re-shard: changing
 * `shards` or `objectName` moves ids to other objects, so ids in flight or remembered under the
 * old layout are not seen under the new one until their retention has passed.
 *
 * Types: the Workers runtime types (`@cloudflare/workers-types`) declare globals that clash with
 * Node's, and this file is also compiled with the package's Node program, so it describes the few
 * runtime members it touches structurally (the `...Like` interfaces below). The real
 * `DurableObjectNamespace<IdempotencyObject>` and `DurableObjectState` satisfy them.
 */
// @ts-ignore -- "cloudflare:workers" exists only in workerd (and in programs typed with @cloudflare/workers-types).
import { DurableObject } from "cloudflare:workers";
import type { Claim, ClaimRef, ClaimingStore, StoreWindows } from "../src/contract.js";
import { InvalidOptionError, StoreUnavailableError } from "../src/errors.js";
import { checkNamespace, storeKey } from "../src/keys.js";
import { checkMs, resolveWindows } from "../src/windows.js";

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

/** The RPC surface of one `IdempotencyObject`, as a stub exposes it. Every method takes a batch. */
export interface IdempotencyShard {
  claim(keys: string[], leaseMs: number): Promise<ShardClaim[]>;
  remember(keys: string[], retentionMs: number): Promise<void>;
  release(claims: ShardClaimRef[]): Promise<boolean[]>;
  seen(keys: string[]): Promise<boolean[]>;
  forget(keys: string[]): Promise<void>;
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

/** A short description of a failure that never carries a key, token or payload. */
function describe(error: unknown): string {
  if (error instanceof Error) {
    const retryable = (error as { retryable?: unknown }).retryable === true ? " (retryable)" : "";
    return `the Durable Object call failed: ${error.name}${retryable}`;
  }
  return "the Durable Object call failed";
}

export class DurableObjectStore implements ClaimingStore {
  readonly namespace: string;
  readonly shards: number;
  readonly objectName: string;
  readonly leaseMs: number;
  readonly retentionMs: number;
  readonly #binding: IdempotencyNamespace;

  constructor(binding: IdempotencyNamespace, options: DurableObjectStoreOptions = {}) {
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

  async #keys(ids: readonly string[]): Promise<string[]> {
    return Promise.all(
      ids.map((id) => {
        if (typeof id !== "string") throw new InvalidOptionError("id", "must be a string");
        return storeKey(this.namespace, id, MAX_KEY_BYTES);
      }),
    );
  }

  /**
   * Runs one batch step: groups `items` by shard, makes one call per shard (in parallel), and
   * puts the answers back in the order of `items`.
   */
  async #step<Item, Answer>(
    operation: string,
    items: readonly Item[],
    keyOf: (item: Item) => string,
    call: (shard: IdempotencyShard, items: Item[]) => Promise<Answer[] | void>,
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
          const result = await call(this.#stub(shard), group.items);
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
      if (error instanceof StoreUnavailableError) throw error;
      throw new StoreUnavailableError(STORE_NAME, operation, describe(error), { cause: error });
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

  async remember(id: string): Promise<void> {
    await this.rememberMany([id]);
  }

  async rememberMany(ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    const keys = await this.#keys(ids);
    await this.#step("remember", keys, (key) => key, (shard, batch) => shard.remember(batch, this.retentionMs));
  }

  async forget(id: string): Promise<void> {
    const keys = await this.#keys([id]);
    await this.#step("forget", keys, (key) => key, (shard, batch) => shard.forget(batch));
  }

  async claim(id: string, leaseMs?: number): Promise<Claim> {
    return (await this.claimMany([id], leaseMs))[0] as Claim;
  }

  async claimMany(ids: readonly string[], leaseMs?: number): Promise<Claim[]> {
    const lease = checkMs("leaseMs", leaseMs ?? this.leaseMs);
    if (ids.length === 0) return [];
    const keys = await this.#keys(ids);
    return this.#step("claim", keys, (key) => key, (shard, batch) => shard.claim(batch, lease));
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

// ---------------------------------------------------------------------------------------------
// The Durable Object.

/** The SQLite cursor members the object uses. */
interface SqlCursorLike<Row> {
  toArray(): Row[];
  one(): Row;
}

/** The slice of `DurableObjectState` the object uses. */
export interface IdempotencyObjectState {
  readonly storage: {
    readonly sql: { exec<Row = Record<string, string | number | null>>(query: string, ...bindings: unknown[]): SqlCursorLike<Row> };
    transactionSync<T>(closure: () => T): T;
    getAlarm(): Promise<number | null>;
    setAlarm(scheduledTime: number | Date): Promise<void>;
  };
}

interface EntryRow {
  status: "in-flight" | "done";
  token: string | null;
  lease_until: number | null;
  retain_until: number | null;
}

const SCHEMA = [
  `CREATE TABLE IF NOT EXISTS entries (
     key TEXT PRIMARY KEY,
     status TEXT NOT NULL CHECK (status IN ('in-flight', 'done')),
     token TEXT,
     lease_until INTEGER,
     retain_until INTEGER
   )`,
  // The row's one live deadline: the lease while in flight, the retention once done.
  `CREATE INDEX IF NOT EXISTS entries_by_deadline ON entries (COALESCE(retain_until, lease_until))`,
];
const DEADLINE = "COALESCE(retain_until, lease_until)";

function checkKeys(keys: unknown): string[] {
  if (!Array.isArray(keys) || !keys.every((key) => typeof key === "string")) {
    throw new TypeError("keys must be an array of strings");
  }
  return keys as string[];
}

/**
 * The Durable Object class. Re-export it from your Worker and bind it with a SQLite migration:
 *
 * ```toml
 * [[durable_objects.bindings]]
 * name = "IDEMPOTENCY"
 * class_name = "IdempotencyObject"
 * [[migrations]]
 * tag = "v1"
 * new_sqlite_classes = ["IdempotencyObject"]
 * ```
 *
 * Its RPC methods take store keys (built by `DurableObjectStore`), never raw ids, and are
 * meant to be called only through `DurableObjectStore`.
 */
export class IdempotencyObject extends DurableObject {
  #schemaReady = false;
  /** The alarm we know is scheduled: a time, null for none, undefined before we asked. */
  #alarmAt: number | null | undefined = undefined;

  get #state(): IdempotencyObjectState {
    return (this as unknown as { ctx: IdempotencyObjectState }).ctx;
  }

  #sql<Row>(query: string, ...bindings: unknown[]): SqlCursorLike<Row> {
    const storage = this.#state.storage;
    if (!this.#schemaReady) {
      for (const statement of SCHEMA) storage.sql.exec(statement);
      this.#schemaReady = true;
    }
    return storage.sql.exec<Row>(query, ...bindings);
  }

  #row(key: string): EntryRow | undefined {
    return this.#sql<EntryRow>("SELECT status, token, lease_until, retain_until FROM entries WHERE key = ?", key).toArray()[0];
  }

  /** Makes sure an alarm fires no later than `deadline` (only ever moves it earlier). */
  async #armAlarm(deadline: number): Promise<void> {
    const storage = this.#state.storage;
    if (this.#alarmAt === undefined) this.#alarmAt = await storage.getAlarm();
    if (this.#alarmAt !== null && this.#alarmAt <= deadline) return;
    this.#alarmAt = deadline;
    await storage.setAlarm(deadline);
  }

  /** Claims every key in one transaction; answers in order (a key repeated in the batch is in-flight the second time). */
  async claim(keys: string[], leaseMs: number): Promise<ShardClaim[]> {
    checkKeys(keys);
    checkMs("leaseMs", leaseMs);
    const now = Date.now();
    const leaseUntil = now + leaseMs;
    let claimedAny = false;
    const answers = this.#state.storage.transactionSync(() =>
      keys.map((key): ShardClaim => {
        const row = this.#row(key);
        if (row?.status === "done" && (row.retain_until ?? 0) > now) return { status: "done" };
        if (row?.status === "in-flight" && (row.lease_until ?? 0) > now) {
          return { status: "in-flight", retryAfterMs: (row.lease_until as number) - now };
        }
        const token = crypto.randomUUID();
        this.#sql(
          "INSERT OR REPLACE INTO entries (key, status, token, lease_until, retain_until) VALUES (?, 'in-flight', ?, ?, NULL)",
          key,
          token,
          leaseUntil,
        );
        claimedAny = true;
        return { status: "claimed", token };
      }),
    );
    if (claimedAny) await this.#armAlarm(leaseUntil);
    return answers;
  }

  /** Commits every key: done, token cleared, retained for `retentionMs` from now, whatever the lease state. */
  async remember(keys: string[], retentionMs: number): Promise<void> {
    checkKeys(keys);
    checkMs("retentionMs", retentionMs);
    if (keys.length === 0) return;
    const retainUntil = Date.now() + retentionMs;
    this.#state.storage.transactionSync(() => {
      for (const key of keys) {
        this.#sql(
          "INSERT OR REPLACE INTO entries (key, status, token, lease_until, retain_until) VALUES (?, 'done', NULL, NULL, ?)",
          key,
          retainUntil,
        );
      }
    });
    await this.#armAlarm(retainUntil);
  }

  /**
   * Drops each claim only while it is in flight, live, and owned by its token; answers whether
   * each call removed it. An expired lease is deleted too (it is dead either way) but answers false.
   */
  release(claims: ShardClaimRef[]): boolean[] {
    if (!Array.isArray(claims)) throw new TypeError("claims must be an array");
    const now = Date.now();
    return this.#state.storage.transactionSync(() =>
      claims.map((claim) => {
        const key = String(claim?.key);
        const row = this.#row(key);
        if (row === undefined || row.status !== "in-flight") return false;
        const live = (row.lease_until ?? 0) > now;
        if (live && row.token !== String(claim.token)) return false;
        this.#sql("DELETE FROM entries WHERE key = ?", key);
        return live;
      }),
    );
  }

  /** Whether each key is committed and within retention. */
  seen(keys: string[]): boolean[] {
    checkKeys(keys);
    const now = Date.now();
    return keys.map((key) => {
      const row = this.#row(key);
      return row?.status === "done" && (row.retain_until ?? 0) > now;
    });
  }

  /** Deletes every key, whatever its state. */
  forget(keys: string[]): void {
    checkKeys(keys);
    this.#state.storage.transactionSync(() => {
      for (const key of keys) this.#sql("DELETE FROM entries WHERE key = ?", key);
    });
  }

  /** Live rows (in flight or done, deadline still ahead), for tests and metrics. */
  size(): number {
    return Number(this.#sql<{ n: number }>(`SELECT COUNT(*) AS n FROM entries WHERE ${DEADLINE} > ?`, Date.now()).one().n);
  }

  /** Every stored row, expired ones included (what the alarm has not swept yet), for tests. */
  storedRows(): number {
    return Number(this.#sql<{ n: number }>("SELECT COUNT(*) AS n FROM entries").one().n);
  }

  /** The sweep: deletes rows whose deadline has passed, then re-arms for the next deadline. */
  // @ts-ignore -- `override` is required where "cloudflare:workers" is typed, and an error where it is not (the Node build).
  override async alarm(): Promise<void> {
    const now = Date.now();
    this.#sql(`DELETE FROM entries WHERE ${DEADLINE} <= ?`, now);
    const next = this.#sql<{ next: number | null }>(`SELECT MIN(${DEADLINE}) AS next FROM entries`).one().next;
    this.#alarmAt = null;
    if (next !== null) {
      this.#alarmAt = next;
      await this.#state.storage.setAlarm(next);
    }
  }
}
