/**
 * `D1Store`: a `ClaimingStore` and `TransactionalStore` on Cloudflare D1 (export
 * `babelqueue-serverless/cloudflare`). Tables: migrations/0001_babelqueue_idempotency.sql
 * (= `d1IdempotencyTableSql()`), applied with `wrangler d1 migrations apply`.
 *
 * Contract (the store contract of docs/ARCHITECTURE.md, the same as every store):
 *   - ONE D1 request per batch step, whatever the batch size: ids travel as one JSON parameter
 *     (`json_each`), so D1's 100-parameter limit never bites. `claimMany` is a `db.batch()` of two
 *     statements (the `INSERT … ON CONFLICT DO UPDATE … WHERE expired` upsert, then the read of every
 *     key's row; a batch is one transaction, so the read sees exactly what the upsert decided);
 *     `rememberMany`, `releaseMany`, `seenMany` / `recallMany` are one statement each.
 *   - time is the DATABASE's clock (`julianday('now')`, in epoch ms): every caller asks the one
 *     primary that all writes go to, so leases never depend on a Worker's clock.
 *   - keys are `{namespace}:{id}` (`storeKey`); ids over 1024 bytes, starting with `#`, with a lone
 *     surrogate or with NUL are hashed to `#` + SHA-256.
 *   - `transact(claim, work)`: `work(tx)` ADDS prepared statements (`tx.add(tx.db.prepare(…).bind(…))`);
 *     nothing runs until the commit, which is ONE `db.batch([fence, ...handler's statements, commit])`.
 *     The fence goes first, so a lost claim is told as such before any statement of the handler can
 *     fail for its own reasons (a resend whose first send landed late meets its own rows). It
 *     rewrites a one-row guard table with `held = EXISTS(claim in flight under my token, lease live)`;
 *     its CHECK (`held = 1`, constraint `babelqueue_fence_lost`) fails when the claim is
 *     no longer held, which aborts the batch: D1 rolls every statement of it back → `FenceLostError`.
 *     SQLite refusing another statement (a handler's constraint, bad SQL) → `TransactionConditionError`.
 *     D1's transient errors (connection lost, object reset, overloaded) → the row is read back:
 *     committed under my token → done; still mine → the batch is sent again (bounded); then
 *     `StoreUnavailableError`. Any other error (D1's own, unexplained) is read back the same way but
 *     not resent: committed → done, else `StoreUnavailableError`. A resend whose fence fails reads the
 *     row once more: the lost send may have landed late (done under my token → done).
 *
 * What this is *not*: interactive transactions. The handler cannot read its own uncommitted writes
 * or branch on them: D1 has no BEGIN over the wire; statements that must see each other go in order
 * in the one batch. Expired rows stay until `purgeExpired()` runs (a Cron Trigger).
 */
import type { Claim, ClaimRef, FencedClaim, IdRecord, Recall, StoreWindows, TransactionalStore } from "../src/contract.js";
import { FenceLostError, InvalidOptionError, StoreUnavailableError, TransactionConditionError } from "../src/errors.js";
import { answerPerKey } from "../src/store-kit/copies.js";
import { describeFailure, storeFailure } from "../src/store-kit/failures.js";
import { checkFingerprint, checkFingerprints } from "../src/store-kit/fingerprints.js";
import { checkNamespace, storeKey } from "../src/store-kit/keys.js";
import { checkOptions, optionKeys } from "../src/store-kit/options.js";
import { fenceToken, heldClaims, isToken, tokenSource } from "../src/store-kit/tokens.js";
import { checkMs, resolveWindows } from "../src/store-kit/windows.js";

/** What the store reads from a D1 result (`D1Result` has it). */
export interface D1ResultLike {
  results?: unknown[];
  meta?: { changes?: number };
}

/** A D1 prepared statement (`D1PreparedStatement`), as far as the store uses it. */
export interface D1StatementLike {
  bind(...values: unknown[]): D1StatementLike;
  all(): Promise<D1ResultLike>;
  run(): Promise<D1ResultLike>;
}

/** A D1 database binding (`D1Database`), as far as the store uses it. */
export interface D1DatabaseLike {
  prepare(query: string): D1StatementLike;
  batch(statements: D1StatementLike[]): Promise<D1ResultLike[]>;
}

/** The handle `transact` gives the handler: prepare with `db`, queue with `add`; the commit runs them all. */
export interface D1Transaction<Db extends D1DatabaseLike = D1DatabaseLike> {
  /** The database, to prepare statements with. Do not run them yourself: `add` them. */
  readonly db: Db;
  /**
   * Queues prepared statements, in order, into the commit's batch. Throws `InvalidOptionError` for
   * anything that is not a prepared statement (`.run()`'s promise: that statement already ran, outside
   * the fence) and once the handler has returned (a write it did not await: the batch is already sent).
   */
  add(...statements: D1StatementLike[]): void;
  /** What was added so far. */
  readonly statements: readonly D1StatementLike[];
}

/** Options of `D1Store`. */
export interface D1StoreOptions extends StoreWindows {
  /** Key prefix separating consumers that must each run their effect once. Default "". */
  namespace?: string;
  /** The table; its guard table is `{table}_fence`. Default "babelqueue_idempotency" (the migration's). */
  table?: string;
  /** How many times `transact` resends its batch after a transient D1 error. Default 3. */
  maxTransactionRetries?: number;
  /** Fencing-token generator: a new random, non-empty string per call (two claims under one token cannot be told apart). Default `crypto.randomUUID`. */
  token?: () => string;
}

/** Longest key the store writes, namespace included (UTF-8 bytes). */
export const D1_MAX_KEY_BYTES = 1024;
/** The constraint whose failure means "fence lost". */
export const D1_FENCE_CONSTRAINT = "babelqueue_fence_lost";
const DEFAULT_TABLE = "babelqueue_idempotency";
const STORE_NAME = "D1Store";
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;
/** D1's transient errors (Cloudflare's "retry queries" guidance). */
const TRANSIENT = /Network connection lost|storage caused object to be reset|reset because its code was updated|overloaded|transient issue/i;
/** SQLite refusing a statement (a constraint, a missing table, bad SQL): the handler's batch cannot pass as it is. */
const STATEMENT_REFUSED = /SQLITE_(?:CONSTRAINT|ERROR|MISMATCH|RANGE|TOOBIG)\b|constraint failed|no such (?:table|column|function)|syntax error|datatype mismatch|too many SQL variables/i;
/** Epoch milliseconds on the database's clock. */
const NOW = "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)";

/** The DDL of the store's two tables (the migration file holds it for the default name). */
export function d1IdempotencyTableSql(table: string = DEFAULT_TABLE): string {
  checkTable(table);
  return `CREATE TABLE IF NOT EXISTS ${table} (
  key TEXT NOT NULL PRIMARY KEY,
  status TEXT NOT NULL CHECK (status IN ('in-flight', 'done')),
  token TEXT,
  fingerprint TEXT,
  expires_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS ${table}_expires_at_idx ON ${table} (expires_at);
CREATE TABLE IF NOT EXISTS ${table}_fence (
  id INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
  held INTEGER NOT NULL CONSTRAINT ${D1_FENCE_CONSTRAINT} CHECK (held = 1)
);`;
}

function checkTable(table: string): string {
  if (typeof table !== "string" || !IDENTIFIER.test(table)) throw new InvalidOptionError("table", "must be 1-63 characters of A-Z a-z 0-9 _ (not starting with a digit)");
  return table;
}

function statements(t: string) {
  const input = "json_each(?1) j";
  const k = "json_extract(j.value, '$[0]')";
  return {
    // ?1 JSON [[key, token, fingerprint], ...], ?2 lease ms
    claim: `INSERT INTO ${t} (key, status, token, fingerprint, expires_at)
SELECT ${k}, 'in-flight', json_extract(j.value, '$[1]'), json_extract(j.value, '$[2]'), ${NOW} + ?2 FROM ${input} WHERE true
ON CONFLICT (key) DO UPDATE SET status = 'in-flight', token = excluded.token, fingerprint = excluded.fingerprint, expires_at = excluded.expires_at
WHERE ${t}.expires_at <= ${NOW}`,
    // ?1 the same JSON: each key's row after the claim (expired rows only when they carry our token)
    claimed: `SELECT j.key AS i, t.status, t.token, t.fingerprint, t.expires_at - ${NOW} AS left_ms FROM ${input}
LEFT JOIN ${t} t ON t.key = ${k} AND (t.expires_at > ${NOW} OR t.token = json_extract(j.value, '$[1]')) ORDER BY j.key`,
    // ?1 JSON [[key, fingerprint|null], ...], ?2 retention ms
    remember: `INSERT INTO ${t} (key, status, token, fingerprint, expires_at)
SELECT ${k}, 'done', NULL, json_extract(j.value, '$[1]'), ${NOW} + ?2 FROM ${input} WHERE true
ON CONFLICT (key) DO UPDATE SET status = 'done', expires_at = excluded.expires_at,
  fingerprint = COALESCE(excluded.fingerprint, CASE WHEN ${t}.status = 'in-flight' OR ${t}.expires_at > ${NOW} THEN ${t}.fingerprint END)`,
    // ?1 JSON [[key, token], ...]
    release: `DELETE FROM ${t} WHERE status = 'in-flight' AND expires_at > ${NOW}
AND EXISTS (SELECT 1 FROM ${input} WHERE ${k} = ${t}.key AND json_extract(j.value, '$[1]') = ${t}.token)`,
    // ?1 JSON [key, ...]
    recall: `SELECT j.key AS i, t.key IS NOT NULL AS seen, t.fingerprint FROM ${input}
LEFT JOIN ${t} t ON t.key = j.value AND t.status = 'done' AND t.expires_at > ${NOW} ORDER BY j.key`,
    read: `SELECT status, token, fingerprint, expires_at - ${NOW} AS left_ms FROM ${t} WHERE key = ?1 AND expires_at > ${NOW}`,
    forget: `DELETE FROM ${t} WHERE key = ?1`,
    // ?1 key, ?2 token
    fence: `INSERT OR REPLACE INTO ${t}_fence (id, held)
SELECT 1, EXISTS (SELECT 1 FROM ${t} WHERE key = ?1 AND token = ?2 AND status = 'in-flight' AND expires_at > ${NOW})`,
    // ?1 key, ?2 token, ?3 fingerprint|null, ?4 retention ms (the token stays: a resent batch can tell it committed)
    commit: `UPDATE ${t} SET status = 'done', fingerprint = COALESCE(?3, fingerprint), expires_at = ${NOW} + ?4 WHERE key = ?1 AND token = ?2`,
    // ?1 limit
    purge: `DELETE FROM ${t} WHERE key IN (SELECT key FROM ${t} WHERE expires_at <= ${NOW} LIMIT ?1)`,
  };
}

type Row = Record<string, unknown>;
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const D1_OPTION_KEYS = optionKeys<D1StoreOptions>({
  namespace: true,
  table: true,
  maxTransactionRetries: true,
  token: true,
  leaseMs: true,
  retentionMs: true,
});

/**
 * A claiming and transactional store on Cloudflare D1: one D1 request per batch step, every time
 * the database's clock; in transactional mode the handler adds prepared statements and the commit
 * is one `db.batch` with the fence. Tables: `migrations/` (`d1IdempotencyTableSql()`).
 *
 * @example
 * ```ts
 * import { txOf } from "babelqueue-serverless";
 * import { D1Store, type D1Transaction, queueHandler } from "babelqueue-serverless/cloudflare";
 *
 * // wrangler.toml: [[d1_databases]] binding = "DB"; tables from `wrangler d1 migrations apply`
 * export default {
 *   queue: queueHandler<Env>({
 *     store: (env) => new D1Store(env.DB, { namespace: "orders" }),
 *     transactional: true,
 *     handle: async (envelope, ctx) => {
 *       const order = envelope.data as unknown as Order;
 *       const tx = txOf<D1Transaction>(ctx);
 *       // Runs in the commit's one db.batch, with the fence and the commit of the id.
 *       tx.add(tx.db.prepare("INSERT INTO orders (id, total) VALUES (?, ?)").bind(order.id, order.total));
 *     },
 *   }),
 * };
 * ```
 */
export class D1Store<Db extends D1DatabaseLike = D1DatabaseLike> implements TransactionalStore<D1Transaction<Db>> {
  readonly namespace: string;
  readonly table: string;
  readonly leaseMs: number;
  readonly retentionMs: number;
  readonly maxTransactionRetries: number;
  readonly #db: Db;
  readonly #sql: ReturnType<typeof statements>;
  readonly #token: () => string;

  constructor(db: Db, options: D1StoreOptions = {}) {
    checkOptions(options, D1_OPTION_KEYS, STORE_NAME);
    if (typeof db?.prepare !== "function" || typeof db.batch !== "function") throw new InvalidOptionError("db", "must be a D1 database binding");
    this.#db = db;
    this.namespace = checkNamespace(options.namespace ?? "");
    this.table = checkTable(options.table ?? DEFAULT_TABLE);
    this.#sql = statements(this.table);
    ({ leaseMs: this.leaseMs, retentionMs: this.retentionMs } = resolveWindows(options));
    const retries = options.maxTransactionRetries ?? 3;
    if (!Number.isSafeInteger(retries) || retries < 0) throw new InvalidOptionError("maxTransactionRetries", "must be an integer >= 0");
    this.maxTransactionRetries = retries;
    this.#token = tokenSource(options.token, () => crypto.randomUUID());
  }

  /** The row key of an id (for operators and tests). */
  key(id: string): Promise<string> {
    // SQLite text bound from Workers cannot carry NUL safely: such an id is hashed.
    return storeKey(this.namespace, id, D1_MAX_KEY_BYTES, "", { hashNul: true });
  }

  async claim(id: string, leaseMs?: number, fingerprint?: string): Promise<Claim> {
    return (await this.claimMany([id], leaseMs, [checkFingerprint(fingerprint)]))[0] as Claim;
  }

  async claimMany(ids: readonly string[], leaseMs?: number, fingerprints?: readonly (string | undefined)[]): Promise<Claim[]> {
    const lease = Math.max(1, Math.ceil(checkMs("leaseMs", leaseMs ?? this.leaseMs)));
    const prints = checkFingerprints(fingerprints, ids.length);
    if (ids.length === 0) return [];
    const keys = await this.#keys(ids);
    const input = new Map<string, [string, string, string | null]>();
    keys.forEach((key, i) => {
      if (!input.has(key)) input.set(key, [key, this.#token(), prints[i] ?? null]);
    });
    const json = JSON.stringify([...input.values()]);
    const [, read] = await this.#call("claimMany", () => this.#db.batch([this.#sql_(this.#sql.claim, json, lease), this.#sql_(this.#sql.claimed, json)]));
    const rows = (read?.results ?? []) as Row[];
    const answers = new Map<string, Claim>();
    [...input.values()].forEach(([key, token], i) => {
      const row = rows[i];
      if (row?.status === "in-flight" && row.token === token) answers.set(key, { status: "claimed", token });
      else answers.set(key, row === undefined || row.status === null ? { status: "in-flight", retryAfterMs: 0 } : verdict(row));
    });
    return answerPerKey(keys, answers, lease);
  }

  async release(id: string, token: string): Promise<boolean> {
    if (!isToken(token)) return false;
    return (await this.#release("release", [{ id, token }])) === 1;
  }

  async releaseMany(claims: readonly ClaimRef[]): Promise<void> {
    await this.#release("releaseMany", heldClaims(claims));
  }

  async remember(id: string, fingerprint?: string): Promise<void> {
    await this.rememberMany([id], [checkFingerprint(fingerprint)]);
  }

  async rememberMany(ids: readonly string[], fingerprints?: readonly (string | undefined)[]): Promise<void> {
    const prints = checkFingerprints(fingerprints, ids.length);
    if (ids.length === 0) return;
    const keys = await this.#keys(ids);
    const input = new Map<string, string | null>();
    keys.forEach((key, i) => {
      const fingerprint = prints[i];
      if (!input.has(key) || fingerprint !== undefined) input.set(key, fingerprint ?? input.get(key) ?? null);
    });
    const json = JSON.stringify([...input.entries()]);
    await this.#call("rememberMany", () => this.#sql_(this.#sql.remember, json, Math.ceil(this.retentionMs)).run());
  }

  async seen(id: string): Promise<boolean> {
    return (await this.recallMany([id]))[0]?.seen === true;
  }

  async seenMany(ids: readonly string[]): Promise<boolean[]> {
    return (await this.recallMany(ids)).map((recall) => recall.seen);
  }

  async recallMany(ids: readonly string[]): Promise<Recall[]> {
    if (ids.length === 0) return [];
    const json = JSON.stringify(await this.#keys(ids));
    const { results } = await this.#call("recallMany", () => this.#sql_(this.#sql.recall, json).all());
    const rows = (results ?? []) as Row[];
    if (rows.length !== ids.length) throw new StoreUnavailableError(STORE_NAME, "recallMany", `unexpected answer (${rows.length} rows for ${ids.length} ids)`);
    return rows.map((row) => (Number(row.seen) === 1 ? withFingerprint({ seen: true }, row.fingerprint) : { seen: false }));
  }

  async forget(id: string): Promise<void> {
    const key = await this.key(id);
    await this.#call("forget", () => this.#sql_(this.#sql.forget, key).run());
  }

  async inspect(id: string): Promise<IdRecord | null> {
    const row = await this.#read("inspect", await this.key(id));
    if (row === undefined) return null;
    const left = Number(row.left_ms);
    const record: IdRecord = row.status === "done" ? { status: "done", retentionLeftMs: left } : { status: "in-flight", leaseLeftMs: left };
    return withFingerprint(record, row.fingerprint);
  }

  /** Deletes up to `limit` expired rows (one statement); resolves to how many. Run it from a Cron Trigger. */
  async purgeExpired(limit = 10_000): Promise<number> {
    if (!Number.isSafeInteger(limit) || limit < 1) throw new InvalidOptionError("limit", "must be a positive integer");
    return (await this.#call("purgeExpired", () => this.#sql_(this.#sql.purge, limit).run())).meta?.changes ?? 0;
  }

  /**
   * Transactional mode: `work` adds statements; then ONE `db.batch([fence, ...statements, commit])`.
   * An empty `work` still commits the id (fenced). See the file header for every outcome.
   */
  async transact(claim: FencedClaim, work: (tx: D1Transaction<Db>) => Promise<void>): Promise<void> {
    if (typeof work !== "function") throw new InvalidOptionError("work", "must be a function");
    const token = fenceToken(claim);
    const key = await this.key(claim.id);
    const added: D1StatementLike[] = [];
    let sent = false;
    const add = (...statements: D1StatementLike[]): void => {
      if (sent) throw new InvalidOptionError("tx", "used after the handler returned; its batch was already sent: await every write before returning");
      for (const statement of statements) {
        if (typeof statement?.bind !== "function" || typeof (statement as { then?: unknown }).then === "function") {
          throw new InvalidOptionError("statement", "must be a prepared statement (tx.db.prepare(…).bind(…)), not what .run() or .all() returns");
        }
      }
      added.push(...statements);
    };
    try {
      await work({ db: this.#db, add, statements: added });
    } finally {
      sent = true;
    }
    const batch = [
      this.#sql_(this.#sql.fence, key, token),
      ...added,
      this.#sql_(this.#sql.commit, key, token, checkFingerprint(claim.fingerprint) ?? null, Math.ceil(this.retentionMs)),
    ];
    for (let attempt = 0; ; attempt += 1) {
      try {
        await this.#db.batch(batch);
        return;
      } catch (error) {
        const message = error instanceof Error ? `${error.message} ${error.cause instanceof Error ? error.cause.message : ""}` : "";
        if (message.includes(D1_FENCE_CONSTRAINT)) {
          // A resend's fence also fails when the earlier send, whose answer was lost, landed after the
          // read-back: then it committed, and the row (done under my token) says so.
          if (attempt > 0 && (await this.#committedBy(key, token))) return;
          throw new FenceLostError(claim.id);
        }
        const transient = TRANSIENT.test(message);
        if (!transient && STATEMENT_REFUSED.test(message)) {
          throw new TransactionConditionError(`a statement of the handler's batch failed (${describeFailure(error)})`, [], { cause: error });
        }
        // Ambiguous (transient, or an error D1 does not explain): did the batch commit? The row says.
        const row = await this.#read("transact", key);
        if (isCommittedBy(row, token)) return;
        if (row?.status !== "in-flight" || row.token !== token) throw new FenceLostError(claim.id);
        if (!transient) {
          // Not a refusal of the handler's statements, and not known to pass when sent again: D1's.
          throw new StoreUnavailableError(STORE_NAME, "transact", `${describeFailure(error)}, not committed; not resent (not a known transient error)`, { cause: error });
        }
        if (attempt >= this.maxTransactionRetries) {
          throw new StoreUnavailableError(STORE_NAME, "transact", `${describeFailure(error)} on every one of ${attempt + 1} attempts`, { cause: error });
        }
        await sleep(Math.floor(25 * 2 ** attempt * (0.5 + Math.random())));
      }
    }
  }

  async #release(operation: string, claims: readonly ClaimRef[]): Promise<number> {
    if (claims.length === 0) return 0;
    const keys = await this.#keys(claims.map((claim) => claim.id));
    const json = JSON.stringify(keys.map((key, i) => [key, (claims[i] as ClaimRef).token]));
    return (await this.#call(operation, () => this.#sql_(this.#sql.release, json).run())).meta?.changes ?? 0;
  }

  /** True when `key`'s row is done under `token`: this claim's transactional batch committed. */
  async #committedBy(key: string, token: string): Promise<boolean> {
    return isCommittedBy(await this.#read("transact", key), token);
  }

  async #read(operation: string, key: string): Promise<Row | undefined> {
    const { results } = await this.#call(operation, () => this.#sql_(this.#sql.read, key).all());
    return (results as Row[] | undefined)?.[0];
  }

  #sql_(text: string, ...values: unknown[]): D1StatementLike {
    return this.#db.prepare(text).bind(...values);
  }

  #keys(ids: readonly string[]): Promise<string[]> {
    return Promise.all(ids.map((id) => this.key(id)));
  }

  async #call<T>(operation: string, run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (error) {
      // D1's messages name the SQL error, never the bound values.
      throw storeFailure(STORE_NAME, operation, error, { cause: "original" });
    }
  }
}

/** The commit statement keeps the token on the done row, so that a resent batch can tell it committed. */
function isCommittedBy(row: Row | undefined, token: string): boolean {
  return row?.status === "done" && row.token === token;
}

function verdict(row: Row): Claim {
  if (row.status === "done") return withFingerprint({ status: "done" }, row.fingerprint);
  return withFingerprint({ status: "in-flight", retryAfterMs: Math.max(0, Number(row.left_ms) || 0) }, row.fingerprint);
}

function withFingerprint<T extends object>(value: T, fingerprint: unknown): T & { fingerprint?: string } {
  return typeof fingerprint === "string" ? { ...value, fingerprint } : value;
}
