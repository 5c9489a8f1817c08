/**
 * `PostgresStore`: a `ClaimingStore` and `TransactionalStore` on one PostgreSQL table
 * (export `babelqueue-serverless/postgres`), over `pg` or any client with `query(text, values)`.
 *
 * Layouts (layouts.ts): this package's own table (the default; sql.ts), or the table of a BabelQueue
 * SDK the store shares with a PHP or Go fleet (`layout: "babelqueue-php"`, sql-php.ts;
 * `"babelqueue-go"`, sql-go.ts). Every statement below has one form per layout, with the same
 * parameters and the same answer, so this file never asks which layout it runs.
 *
 * Contract (the store contract of docs/ARCHITECTURE.md, the same as every store), table and statements in sql.ts:
 *   - `claim` / `claimMany`: ONE `INSERT … ON CONFLICT DO UPDATE … WHERE expired RETURNING` for the
 *     whole batch; it answers claimed / done / in-flight (+ the lease's remaining ms and the stored
 *     fingerprint). Only when a concurrent writer committed the blocking row after the statement
 *     began (its snapshot cannot see it) is a second, read-only statement made for those keys. In
 *     the Go layout a claim that won anything is followed by `settle` (sql-go.ts): a win over a commit
 *     that landed while the claim ran gives its lease back and answers done. A step that fails after
 *     a claim statement committed wins releases them (fenced) before it rejects: nothing stays held.
 *   - `remember(Many)`, `release(Many)`, `seen(Many)` / `recallMany`: ONE statement per batch.
 *   - a batch step of more than `POSTGRES_MAX_IDS_PER_STATEMENT` (10,000) ids is sent as one
 *     statement per 10,000, one after another.
 *   - lease and retention are decided by the DATABASE's clock (`clock_timestamp()`), never the caller's.
 *   - keys are `{namespace}:{id}` (`storeKey`); ids longer than 1024 bytes, starting with `#`, with a
 *     lone surrogate or with NUL (which `text` cannot hold) are hashed to `#` + SHA-256.
 *   - `transact(claim, work)`: BEGIN, `work(tx)` on the transaction's own connection, the fenced
 *     commit (`UPDATE … WHERE token = mine AND in-flight AND lease live`; 0 rows → ROLLBACK and
 *     `FenceLostError`), COMMIT. Any throw → ROLLBACK. Serialization failures and deadlocks
 *     (SQLSTATE 40001 / 40P01) re-run the WHOLE transaction — `work` included, it was rolled back —
 *     up to `maxTransactionRetries` times, then `StoreUnavailableError`. What `work` throws is
 *     rethrown as it is (a unique violation the handler let through is the handler's failure); an
 *     integrity error raised by COMMIT itself (a deferred constraint of the handler's writes) is a
 *     `TransactionConditionError`, and so is a handler that swallowed a failed statement (25P02).
 *
 * Connections: give a `pool` (pg.Pool, recommended: each call takes a connection, a transaction
 * holds one) or one `client` (pg.Client, a Hyperdrive client): then every call and transaction takes
 * its turn on it, so that no store statement ever lands inside another message's transaction.
 *
 * What this is *not*: a connection manager or a timeout. You create, configure (a role's
 * `statement_timeout`, pg's `query_timeout`) and close the pool; the store never logs. The database
 * must be UTF8.
 */
import type { Claim, ClaimRef, FencedClaim, IdRecord, Recall, StoreWindows, TransactionalStore } from "../../src/contract.js";
import { FenceLostError, InvalidOptionError, StoreUnavailableError, TransactionConditionError } from "../../src/errors.js";
import { answerPerKey } from "../../src/store-kit/copies.js";
import { describeFailure, scrubbedError, storeFailure } from "../../src/store-kit/failures.js";
import { checkFingerprint, checkFingerprints } from "../../src/store-kit/fingerprints.js";
import { checkNamespace, storeKey } from "../../src/store-kit/keys.js";
import { checkOptions, optionKeys } from "../../src/store-kit/options.js";
import { fenceToken, heldClaims, isToken, tokenSource } from "../../src/store-kit/tokens.js";
import { checkMs, resolveWindows } from "../../src/store-kit/windows.js";
import { isRetryable, sqlState, unavailable } from "./errors.js";
import { DEFAULT_POSTGRES_TABLES, type PostgresLayout, checkLayout, isSdkLayout, layoutStatements, layoutTable, layoutTableSql, sdkRowKey } from "./layouts.js";
import type { PostgresStatements } from "./sql.js";
import { FORMER_DEFAULT_POSTGRES_TABLE } from "./sql.js";
import { SHAPE_SQLSTATES, diagnoseTable, explainShape, tableShape } from "./table-shape.js";


/** Longest key the store writes, namespace included (UTF-8 bytes); btree entries must stay well under 2.7 KB. */
export const POSTGRES_MAX_KEY_BYTES = 1024;

/**
 * Ids per statement of a batch step. A whole SQS batch (10,000 records with a batching window) is
 * one statement — its ids travel as one `text[]` parameter, so no parameter-count cap applies, and
 * PostgreSQL takes a parameter of up to 1 GB. A larger step is split into statements of this many,
 * sent one after another, so that no single statement holds its rows' locks, or the server's
 * memory, for a 100,000-id step (measured: ~7 s for 100,000 claims in one statement here).
 */
export const POSTGRES_MAX_IDS_PER_STATEMENT = 10_000;
const STORE_NAME = "PostgresStore";

/** What the store reads from a query's answer (a `pg` QueryResult has it). */
export interface PgResult {
  rows: Record<string, unknown>[];
  rowCount: number | null;
}

/** Anything that runs one parameterized statement: pg.Client, pg.PoolClient, pg.Pool, a Hyperdrive client. */
export interface PgQueryable {
  query(text: string, values?: unknown[]): Promise<PgResult>;
}

/** A pool: `pg.Pool`. `connect()` lends one connection, given back with `release()`. */
export interface PgPoolLike<Tx extends PgQueryable = PgQueryable> extends PgQueryable {
  connect(): Promise<PgPooledClient<Tx>>;
}

/** A connection lent by a pool: given back with `release()`, or dropped with `release(error)`. */
export type PgPooledClient<Tx extends PgQueryable = PgQueryable> = Tx & { release(error?: Error | boolean): void };

/** Isolation level of transactional mode's transactions. */
export type PostgresIsolation = "read committed" | "repeatable read" | "serializable";

/** A pg.Pool (or one shaped like it): it checks connections out and counts them, where a pg.Client is one. */
function isPool(value: unknown): boolean {
  const fields = value as { connect?: unknown; totalCount?: unknown; idleCount?: unknown };
  return typeof fields.connect === "function" && typeof fields.totalCount === "number" && typeof fields.idleCount === "number";
}

/** Options of `PostgresStore`: a `pool` or one `client`, the table, the namespace, transactional mode's settings. */
export interface PostgresStoreOptions<Tx extends PgQueryable = PgQueryable> extends StoreWindows {
  /**
   * A pool (`new pg.Pool(...)`): every call borrows a connection; `transact` holds one for its transaction.
   * Give this or `client`. Add `pool.on("error", …)` as pg asks: an idle connection's error is otherwise fatal.
   */
  pool?: PgPoolLike<Tx>;
  /**
   * One connection (`new pg.Client(...)`, connected; a Hyperdrive client). Calls and transactions then take
   * turns on it, so inside `transact`'s work use `tx`, never the store. Give this or `pool`.
   */
  client?: Tx;
  /**
   * Whose rows the store reads and writes. Default `"babelqueue-serverless"`, this package's own table.
   * `"babelqueue-php"` / `"babelqueue-go"`: the table of BabelQueue's PHP SDK (`PdoStore`) or Go SDK
   * (`idempotency-postgres`), shared with that fleet — an id either side committed is done for both.
   * In these layouts `namespace` must stay "" (the SDKs separate consumers by table), the PHP layout
   * keeps seen ids forever (no `retentionMs`, or `Infinity`), and the Go layout takes
   * `retentionMs: Infinity` for the Go SDK's default (rows that never expire).
   */
  layout?: PostgresLayout;
  /**
   * The table (`name` or `schema.name`), created with `createIdempotencyTable`. Default: the layout's
   * (`DEFAULT_POSTGRES_TABLES`): "babelqueue_serverless_idempotency", "bq_idempotency" (PHP) or
   * "babelqueue_idempotency" (Go).
   */
  table?: string;
  /** Key prefix separating consumers that must each run their effect once. Default "". Only "" in a BabelQueue layout. */
  namespace?: string;
  /** Isolation level of `transact`'s transactions. Default: the server's (READ COMMITTED unless configured). */
  isolation?: PostgresIsolation;
  /** How many times `transact` re-runs a transaction after a serialization failure or deadlock. Default 3. */
  maxTransactionRetries?: number;
  /** Fencing-token generator. Default `crypto.randomUUID`. */
  token?: () => string;
}

/** Options of `createIdempotencyTable`. */
export interface CreateIdempotencyTableOptions {
  /** The layout whose table(s) to create. Default `"babelqueue-serverless"`. */
  layout?: PostgresLayout;
  /** The table (`name` or `schema.name`). Default: the layout's (`DEFAULT_POSTGRES_TABLES`). */
  table?: string;
}

const CREATE_OPTION_KEYS = optionKeys<CreateIdempotencyTableOptions>({ layout: true, table: true });

/**
 * Creates a layout's table(s) (`idempotencyTableSql`) on a client or pool. Idempotent. It reads the
 * table first and writes no DDL — throwing `InvalidOptionError` naming the fix — when the table is
 * of another layout (e.g. the BabelQueue Go SDK's `babelqueue_idempotency` under this package's own
 * layout), or when this package's former default table `babelqueue_idempotency` holds this layout's
 * rows and the new default does not exist yet (rename it; creating an empty table would forget
 * every id it remembers).
 *
 * @example
 * ```ts
 * import pg from "pg";
 * import { createIdempotencyTable } from "babelqueue-serverless/postgres";
 *
 * const pool = new pg.Pool();
 * pool.on("error", () => {}); // an idle connection the server dropped (restart, failover) must not end the process
 * await createIdempotencyTable(pool); // this package's own table
 * await createIdempotencyTable(pool, { layout: "babelqueue-go" }); // beside a Go fleet's babelqueue_idempotency
 * ```
 */
export async function createIdempotencyTable(client: PgQueryable, options?: CreateIdempotencyTableOptions): Promise<void>;
/** @deprecated Pass `{ table }` instead of the table's name. Removed in 0.3.0. */
export async function createIdempotencyTable(client: PgQueryable, table: string): Promise<void>;
export async function createIdempotencyTable(client: PgQueryable, options: CreateIdempotencyTableOptions | string = {}): Promise<void> {
  const given = typeof options === "string" ? { table: options } : options;
  checkOptions(given, CREATE_OPTION_KEYS, "createIdempotencyTable");
  const layout = checkLayout(given.layout);
  const table = layoutTable(layout, given.table ?? DEFAULT_POSTGRES_TABLES[layout]);
  const ddl = layoutTableSql(layout, table); // checks the name before anything is read
  const shape = await tableShape(client, table);
  if (shape.kind === "missing" && layout === "babelqueue-serverless" && table === DEFAULT_POSTGRES_TABLES[layout]) {
    const former = await tableShape(client, FORMER_DEFAULT_POSTGRES_TABLE);
    if (former.kind === layout) throw new InvalidOptionError("table", explainShape(layout, table, shape, former) as string);
  }
  if (shape.kind !== "missing" && shape.kind !== layout) throw new InvalidOptionError("table", explainShape(layout, table, shape) as string);
  // A shared SDK table that already has this store's part is left alone (no ALTER TABLE lock on a busy table).
  if (isSdkLayout(layout) && shape.kind === layout && shape.complete) return;
  await client.query(ddl);
}

/** A plain FIFO lock, for a store that shares one connection. */
class TurnTaking {
  #tail: Promise<unknown> = Promise.resolve();
  run<T>(task: () => Promise<T>): Promise<T> {
    const result = this.#tail.then(task, task);
    this.#tail = result.catch(() => undefined);
    return result;
  }
}

/** Thrown inside `transact` by the store's own statements, to tell them from the handler's. */
class OwnStatementFailed {
  constructor(
    readonly step: string,
    readonly error: unknown,
  ) {}
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const POSTGRES_OPTION_KEYS = optionKeys<PostgresStoreOptions>({
  pool: true,
  client: true,
  layout: true,
  table: true,
  namespace: true,
  isolation: true,
  maxTransactionRetries: true,
  token: true,
  leaseMs: true,
  retentionMs: true,
});

/**
 * A claiming and transactional store on one PostgreSQL table, over `pg` or any client with
 * `query(text, values)` (RDS, Aurora, RDS Proxy, Hyperdrive). One statement per batch step; every
 * time is the database's clock.
 *
 * @example
 * ```ts
 * import pg from "pg";
 * import { PostgresStore, createIdempotencyTable } from "babelqueue-serverless/postgres";
 *
 * const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 10 });
 * pool.on("error", () => {}); // an idle connection's error must not crash the process
 * await createIdempotencyTable(pool); // or paste idempotencyTableSql() into your migrations
 * const store = new PostgresStore({ pool, namespace: "orders" });
 * await store.purgeExpired(); // from a schedule: deletes rows past their lease or retention
 * ```
 */
export class PostgresStore<Tx extends PgQueryable = PgQueryable> implements TransactionalStore<Tx> {
  readonly layout: PostgresLayout;
  /** The table its statements name (in a BabelQueue SDK's layout, folded to lower case as PostgreSQL folds the SDK's). */
  readonly table: string;
  readonly namespace: string;
  readonly leaseMs: number;
  readonly retentionMs: number;
  readonly isolation: PostgresIsolation | undefined;
  readonly maxTransactionRetries: number;
  readonly #sql: PostgresStatements;
  readonly #pool: PgPoolLike<Tx> | undefined;
  readonly #client: Tx | undefined;
  readonly #turns = new TurnTaking();
  /** The one client's BEGIN failed on our side and its ROLLBACK did not go out either: sent before anything else. */
  #rollbackOwed = false;
  readonly #token: () => string;

  constructor(options: PostgresStoreOptions<Tx>) {
    checkOptions(options, POSTGRES_OPTION_KEYS, STORE_NAME);
    const { pool, client } = options ?? {};
    if ((pool === undefined) === (client === undefined)) throw new InvalidOptionError("pool", "or `client` is required (exactly one of them)");
    if (pool !== undefined && (typeof pool.query !== "function" || typeof pool.connect !== "function")) {
      throw new InvalidOptionError("pool", "must have query(text, values) and connect() (a pg.Pool)");
    }
    if (client !== undefined && typeof client.query !== "function") throw new InvalidOptionError("client", "must have query(text, values)");
    // A pool given as the one `client` would send a transaction's BEGIN, the handler's writes, the fence
    // and COMMIT over different connections: the effect would commit outside the fenced transaction.
    if (client !== undefined && isPool(client)) {
      throw new InvalidOptionError("client", "is a pool: give it as `pool` (a `client` must be one session, e.g. a connected pg.Client)");
    }
    this.#pool = pool;
    this.#client = client;
    this.layout = checkLayout(options.layout);
    this.table = layoutTable(this.layout, options.table ?? DEFAULT_POSTGRES_TABLES[this.layout]);
    this.#sql = layoutStatements(this.layout, this.table);
    this.namespace = checkNamespace(options.namespace ?? "");
    if (isSdkLayout(this.layout) && this.namespace !== "") {
      throw new InvalidOptionError("namespace", `must be "" in the "${this.layout}" layout: the BabelQueue SDKs key a row by meta.id alone and separate consumers by table (use \`table\`)`);
    }
    const forever = options.retentionMs === Number.POSITIVE_INFINITY;
    if (forever && this.layout === "babelqueue-serverless") throw new InvalidOptionError("retentionMs", "must be a positive number of milliseconds (Infinity only in a BabelQueue layout)");
    if (this.layout === "babelqueue-php" && options.retentionMs !== undefined && !forever) {
      throw new InvalidOptionError("retentionMs", 'is not available in the "babelqueue-php" layout: the PHP SDK keeps a seen id forever (omit it, or pass Infinity)');
    }
    const windows = resolveWindows({ ...options, retentionMs: forever ? undefined : options.retentionMs });
    this.leaseMs = windows.leaseMs;
    // A BabelQueue layout keeps a committed id for good unless told otherwise, as its SDK does (PHP
    // always; Go without WithTTL): a row that expired here would run again on an SDK worker.
    const sdkDefault = isSdkLayout(this.layout) && options.retentionMs === undefined;
    this.retentionMs = forever || sdkDefault || this.layout === "babelqueue-php" ? Number.POSITIVE_INFINITY : windows.retentionMs;
    const isolation = options.isolation;
    if (isolation !== undefined && !["read committed", "repeatable read", "serializable"].includes(isolation)) {
      throw new InvalidOptionError("isolation", 'must be "read committed", "repeatable read" or "serializable"');
    }
    this.isolation = isolation;
    const retries = options.maxTransactionRetries ?? 3;
    if (!Number.isSafeInteger(retries) || retries < 0) throw new InvalidOptionError("maxTransactionRetries", "must be an integer >= 0");
    this.maxTransactionRetries = retries;
    this.#token = tokenSource(options.token, () => globalThis.crypto.randomUUID());
  }

  /** The row key of an id (for operators and tests): `{namespace}:{id}`, or in a BabelQueue layout `meta.id` itself. */
  key(id: string): Promise<string> {
    if (this.layout !== "babelqueue-serverless") return sdkRowKey(this.layout, id);
    // text cannot hold NUL: such an id is hashed (never a collision: raw ids starting with `#` are hashed too).
    return storeKey(this.namespace, id, POSTGRES_MAX_KEY_BYTES, "", { hashNul: true });
  }

  /** The retention as a statement parameter: ms, or NULL for "never expires". */
  #retention(): number | null {
    return Number.isFinite(this.retentionMs) ? Math.ceil(this.retentionMs) : null;
  }

  async claim(id: string, leaseMs?: number, fingerprint?: string): Promise<Claim> {
    return (await this.#claim("claim", [id], leaseMs, [checkFingerprint(fingerprint)]))[0] as Claim;
  }

  async claimMany(ids: readonly string[], leaseMs?: number, fingerprints?: readonly (string | undefined)[]): Promise<Claim[]> {
    return this.#claim("claimMany", ids, leaseMs, checkFingerprints(fingerprints, ids.length));
  }

  async release(id: string, token: string): Promise<boolean> {
    if (!isToken(token)) return false;
    return (await this.#release("release", [{ id, token }])) === 1;
  }

  async releaseMany(claims: readonly ClaimRef[]): Promise<void> {
    await this.#release("releaseMany", heldClaims(claims));
  }

  async remember(id: string, fingerprint?: string): Promise<void> {
    await this.#remember("remember", [id], [checkFingerprint(fingerprint)]);
  }

  async rememberMany(ids: readonly string[], fingerprints?: readonly (string | undefined)[]): Promise<void> {
    await this.#remember("rememberMany", ids, checkFingerprints(fingerprints, ids.length));
  }

  async seen(id: string): Promise<boolean> {
    return (await this.#recall("seen", [id]))[0]?.seen === true;
  }

  async seenMany(ids: readonly string[]): Promise<boolean[]> {
    return (await this.#recall("seenMany", ids)).map((recall) => recall.seen);
  }

  async recallMany(ids: readonly string[]): Promise<Recall[]> {
    return this.#recall("recallMany", ids);
  }

  async forget(id: string): Promise<void> {
    const key = await this.key(id);
    await this.#query("forget", this.#sql.forget, [key]);
  }

  async inspect(id: string): Promise<IdRecord | null> {
    const key = await this.key(id);
    const { rows } = await this.#query("inspect", this.#sql.read, [[key]]);
    const row = rows[0];
    if (row === undefined) return null;
    const left = row.left_ms === null || row.left_ms === undefined ? Number.POSITIVE_INFINITY : Number(row.left_ms);
    const fingerprint = optionalString(row.fingerprint);
    const base = row.status === "done" ? { status: "done" as const, retentionLeftMs: left } : { status: "in-flight" as const, leaseLeftMs: left };
    return fingerprint === undefined ? base : { ...base, fingerprint };
  }

  /** Deletes up to `limit` expired rows (one statement); resolves to how many. Run it from a schedule. */
  async purgeExpired(limit = 10_000): Promise<number> {
    if (!Number.isSafeInteger(limit) || limit < 1) throw new InvalidOptionError("limit", "must be a positive integer");
    return (await this.#query("purgeExpired", this.#sql.purge, [limit])).rowCount ?? 0;
  }

  async #claim(operation: string, ids: readonly string[], leaseMs: number | undefined, fingerprints?: readonly (string | undefined)[]): Promise<Claim[]> {
    const lease = Math.max(1, Math.ceil(checkMs("leaseMs", leaseMs ?? this.leaseMs)));
    if (ids.length === 0) return [];
    const keys = await this.#keys(ids);
    // One statement may not touch a row twice: claim each key once; its copies answer in-flight.
    const unique = [...new Set(keys)];
    const tokens = new Map(unique.map((key) => [key, this.#token()]));
    const fingerprintOf = new Map<string, string | null>();
    keys.forEach((key, i) => {
      if (!fingerprintOf.has(key)) fingerprintOf.set(key, fingerprints?.[i] ?? null);
    });
    try {
      return answerPerKey(keys, await this.#decide(operation, unique, tokens, fingerprintOf, lease), lease);
    } catch (error) {
      // A claim statement may have committed wins (an earlier chunk, or this one before a follow-up
      // failed) whose tokens the caller never gets: give them back, or those ids stay in flight for the
      // whole lease. Every token is new and ours, so releasing them all drops exactly what we won.
      await this.#releaseQuietly(unique.map((key) => ({ key, token: tokens.get(key) as string })));
      throw error;
    }
  }

  /** The statements of a claim step: claim (per chunk), settle what it won, re-read what it could not see. */
  async #decide(operation: string, unique: string[], tokens: Map<string, string>, fingerprintOf: Map<string, string | null>, lease: number): Promise<Map<string, Claim>> {
    const answers = new Map<string, Claim>();
    let pending = unique;
    for (let attempt = 0; pending.length > 0; attempt += 1) {
      const columns = [pending, pending.map((key) => tokens.get(key)), pending.map((key) => fingerprintOf.get(key) ?? null)];
      const { rows } = await this.#chunked(operation, this.#sql.claim, columns, [lease]);
      if (rows.length !== pending.length) throw new StoreUnavailableError(STORE_NAME, operation, `unexpected answer (${rows.length} rows for ${pending.length} keys)`);
      const unseen: string[] = [];
      const won: string[] = [];
      pending.forEach((key, i) => {
        const row = rows[i] as Record<string, unknown>;
        if (row.won === true) {
          won.push(key);
          answers.set(key, { status: "claimed", token: tokens.get(key) as string });
        } else if (row.status === null) unseen.push(key);
        else answers.set(key, blocking(row));
      });
      if (this.#sql.settle !== undefined && won.length > 0) {
        // Wins over a commit that landed while the claim ran: done after all (sql-go.ts, `settle`).
        const { rows: done } = await this.#chunked(operation, this.#sql.settle, [won, won.map((key) => tokens.get(key))], []);
        for (const row of done) answers.set(row.key as string, blocking(row));
      }
      if (unseen.length === 0) break;
      // Rows committed by a concurrent writer after the statement began: read them now.
      const { rows: fresh } = await this.#chunked(operation, this.#sql.read, [unseen], []);
      const byKey = new Map(fresh.map((row) => [row.key as string, row]));
      pending = [];
      for (const key of unseen) {
        const row = byKey.get(key);
        if (row !== undefined) answers.set(key, blocking(row));
        else if (attempt < 2) pending.push(key); // gone again (released, forgotten, expired): claim again
        else answers.set(key, { status: "in-flight", retryAfterMs: 0 });
      }
    }
    return answers;
  }

  /** Best-effort fenced release of claims nobody was told about; its own failure is dropped (the caller rethrows the first). */
  async #releaseQuietly(claims: readonly { key: string; token: string }[]): Promise<void> {
    const connection = this.#pool ?? (this.#client as Tx);
    for (let start = 0; start < claims.length; start += POSTGRES_MAX_IDS_PER_STATEMENT) {
      const slice = claims.slice(start, start + POSTGRES_MAX_IDS_PER_STATEMENT);
      const run = () => connection.query(this.#sql.release, [slice.map((claim) => claim.key), slice.map((claim) => claim.token)]);
      try {
        await (this.#pool === undefined ? this.#onClient(run) : run());
      } catch {
        return; // the database is unreachable: the leases end on their own
      }
    }
  }

  async #release(operation: string, claims: readonly ClaimRef[]): Promise<number> {
    if (claims.length === 0) return 0;
    const keys = await this.#keys(claims.map((claim) => claim.id));
    const { rowCount } = await this.#chunked(operation, this.#sql.release, [keys, claims.map((claim) => claim.token)], []);
    return rowCount ?? 0;
  }

  async #remember(operation: string, ids: readonly string[], fingerprints?: readonly (string | undefined)[]): Promise<void> {
    if (ids.length === 0) return;
    const keys = await this.#keys(ids);
    const fingerprintOf = new Map<string, string | null>();
    keys.forEach((key, i) => {
      const fingerprint = fingerprints?.[i];
      if (!fingerprintOf.has(key) || fingerprint !== undefined) fingerprintOf.set(key, fingerprint ?? fingerprintOf.get(key) ?? null);
    });
    const unique = [...fingerprintOf.keys()];
    await this.#chunked(operation, this.#sql.remember, [unique, unique.map((key) => fingerprintOf.get(key))], [this.#retention()]);
  }

  async #recall(operation: string, ids: readonly string[]): Promise<Recall[]> {
    if (ids.length === 0) return [];
    const { rows } = await this.#chunked(operation, this.#sql.recall, [await this.#keys(ids)], []);
    if (rows.length !== ids.length) throw new StoreUnavailableError(STORE_NAME, operation, `unexpected answer (${rows.length} rows for ${ids.length} ids)`);
    return rows.map((row) => {
      const fingerprint = optionalString(row.fingerprint);
      return row.seen === true ? (fingerprint === undefined ? { seen: true } : { seen: true, fingerprint }) : { seen: false };
    });
  }

  #keys(ids: readonly string[]): Promise<string[]> {
    return Promise.all(ids.map((id) => this.key(id)));
  }

  /**
   * A batch step: one statement for up to `POSTGRES_MAX_IDS_PER_STATEMENT` ids (`columns`: one array
   * per per-id parameter, `scalars` after them), else one statement per slice of that many, sent one
   * after another — rows concatenated in order, row counts summed.
   */
  async #chunked(operation: string, text: string, columns: readonly unknown[][], scalars: readonly unknown[]): Promise<PgResult> {
    const length = columns[0]?.length ?? 0;
    if (length <= POSTGRES_MAX_IDS_PER_STATEMENT) return this.#query(operation, text, [...columns, ...scalars]);
    const rows: Record<string, unknown>[] = [];
    let rowCount = 0;
    for (let start = 0; start < length; start += POSTGRES_MAX_IDS_PER_STATEMENT) {
      const slice = columns.map((column) => column.slice(start, start + POSTGRES_MAX_IDS_PER_STATEMENT));
      const result = await this.#query(operation, text, [...slice, ...scalars]);
      for (const row of result.rows) rows.push(row);
      rowCount += result.rowCount ?? 0;
    }
    return { rows, rowCount };
  }

  /** One statement outside any transaction; every failure becomes a `StoreUnavailableError`. */
  async #query(operation: string, text: string, values: unknown[]): Promise<PgResult> {
    const run = () => (this.#pool ?? (this.#client as Tx)).query(text, values);
    try {
      return await (this.#pool === undefined ? this.#onClient(run) : run());
    } catch (error) {
      throw await this.#failure(operation, error);
    }
  }

  /**
   * A driver failure as the store's typed error. When it is one a table of the wrong shape raises,
   * the table is read once more, and the error says what the table is and how to fix it.
   */
  async #failure(operation: string, failure: unknown): Promise<Error> {
    // An owed ROLLBACK that failed (`#onClient`) is the database's failure, as any statement's.
    const error = failure instanceof OwnStatementFailed ? failure.error : failure;
    const state = sqlState(error);
    if (state !== undefined && SHAPE_SQLSTATES.has(state)) {
      try {
        const connection = this.#pool ?? (this.#client as Tx);
        const diagnose = () => diagnoseTable(connection, this.layout, this.table);
        const reason = await (this.#pool === undefined ? this.#onClient(diagnose) : diagnose());
        if (reason !== undefined) return new StoreUnavailableError(STORE_NAME, operation, `${reason} (${state})`, { cause: scrubbedError(error) });
      } catch {
        // the table could not be read either: report the first failure as it is
      }
    }
    return unavailable(operation, error);
  }

  /**
   * Transactional mode: `work` runs inside BEGIN … COMMIT on the transaction's own connection, and
   * the COMMIT carries the fenced commit of `claim.id`. See the file header for every outcome.
   */
  async transact(claim: FencedClaim, work: (tx: Tx) => Promise<void>): Promise<void> {
    if (typeof work !== "function") throw new InvalidOptionError("work", "must be a function");
    const token = fenceToken(claim);
    const key = await this.key(claim.id);
    const values = [key, token, claim.fingerprint ?? null, this.#retention()];
    for (let attempt = 0; ; attempt += 1) {
      try {
        await (this.#pool === undefined ? this.#onClient(() => this.#once(this.#client as Tx, claim.id, values, work)) : this.#pooled(claim.id, values, work));
        return;
      } catch (error) {
        const own = error instanceof OwnStatementFailed;
        const cause = own ? error.error : error;
        // The handler's error (thrown by it, or its statement's when the connection died under it) is
        // user content: it is named, never quoted ("debit for alice@… failed" wrapping a 40001).
        const wording = !own || error.step === "work" ? { message: false } : {};
        if (isRetryable(cause)) {
          if (attempt < this.maxTransactionRetries) {
            await sleep(Math.floor(10 * 2 ** attempt * (0.5 + Math.random())));
            continue;
          }
          throw new StoreUnavailableError(STORE_NAME, "transact", `${describeFailure(cause, wording)} on every one of ${attempt + 1} attempts`, {
            cause: scrubbedError(cause, wording),
          });
        }
        if (!own) throw error;
        if (error.step === "work") throw storeFailure(STORE_NAME, "transact", cause, wording);
        if (sqlState(cause) === "25P02") throw new TransactionConditionError("a statement of the handler failed and the handler went on; the transaction was aborted", [], { cause: scrubbedError(cause) });
        if (error.step === "COMMIT" && sqlState(cause)?.startsWith("23")) throw new TransactionConditionError(`a deferred constraint of the handler's writes failed at COMMIT (${describeFailure(cause)})`, [], { cause: scrubbedError(cause) });
        throw await this.#failure("transact", cause);
      }
    }
  }

  /**
   * A turn on the one client. A ROLLBACK still owed goes first: a BEGIN that failed on our side may
   * land on the server later, and everything after it on this connection would run inside it.
   */
  #onClient<T>(run: () => Promise<T>): Promise<T> {
    return this.#turns.run(async () => {
      if (this.#rollbackOwed) {
        try {
          await (this.#client as Tx).query("ROLLBACK");
        } catch (error) {
          throw new OwnStatementFailed("ROLLBACK", error);
        }
        this.#rollbackOwed = false;
      }
      return run();
    });
  }

  async #pooled(id: string, values: unknown[], work: (tx: Tx) => Promise<void>): Promise<void> {
    let connection: PgPooledClient<Tx>;
    try {
      connection = await (this.#pool as PgPoolLike<Tx>).connect();
    } catch (error) {
      throw new OwnStatementFailed("connect", error);
    }
    const state = { broken: false };
    // A connection that dies while lent (server restart, killed session) emits "error"; pg only
    // listens while it is idle, and an unheard "error" ends the process. The failed query reports it.
    const events = connection as unknown as { on?: (event: "error", listener: () => void) => void; off?: (event: "error", listener: () => void) => void };
    const onError = () => {
      state.broken = true;
    };
    events.on?.("error", onError);
    try {
      await this.#once(connection, id, values, work, state);
    } finally {
      events.off?.("error", onError);
      // A connection whose ROLLBACK failed is in an unknown state: the pool must drop it.
      if (state.broken) connection.release(new Error("PostgresStore: ROLLBACK failed; connection dropped"));
      else connection.release();
    }
  }

  /** One attempt: BEGIN, work, fenced commit, COMMIT — or ROLLBACK and the reason. */
  async #once(tx: Tx, id: string, values: unknown[], work: (tx: Tx) => Promise<void>, state = { broken: false }): Promise<void> {
    const own = async (step: string, text: string, params?: unknown[]): Promise<PgResult> => {
      try {
        return await tx.query(text, params);
      } catch (error) {
        throw new OwnStatementFailed(step, error);
      }
    };
    try {
      await own("BEGIN", this.isolation === undefined ? "BEGIN" : `BEGIN ISOLATION LEVEL ${this.isolation.toUpperCase()}`);
    } catch (error) {
      // A BEGIN that failed on our side (pg's query_timeout) may still open a transaction on the
      // server: the connection must not serve the next caller inside it. From a pool it is dropped;
      // the one client gets a ROLLBACK (queued behind the BEGIN), owed to its next turn if this one
      // does not go out (pg drops a query that times out while still queued).
      state.broken = true;
      try {
        await tx.query("ROLLBACK");
      } catch {
        if (this.#pool === undefined) this.#rollbackOwed = true;
      }
      throw error;
    }
    const lent = lend(tx);
    try {
      try {
        await work(lent.view);
      } finally {
        lent.end();
      }
      const fenced = await own("fenced commit", this.#sql.fencedCommit, values);
      if (fenced.rowCount !== 1) throw new FenceLostError(id);
      await own("COMMIT", "COMMIT");
    } catch (error) {
      // After a failed COMMIT the server has already ended the transaction; ROLLBACK is then a no-op.
      try {
        await tx.query("ROLLBACK");
      } catch {
        state.broken = true;
      }
      // The connection died under the handler (a restart, a killed session: the handler's statement
      // failed, and the ROLLBACK could not be sent either). Nothing was committed, and the failure is
      // the database's, not the handler's: it is answered as the store's, StoreUnavailableError.
      if (state.broken && !(error instanceof OwnStatementFailed)) throw new OwnStatementFailed("work", error);
      throw error;
    }
  }
}

/**
 * The handler's view of the connection for one attempt: the client itself (every method, `instanceof`
 * intact), except that `release` is refused — the store returns the connection once the transaction has
 * ended; released mid-transaction it would serve another message inside this one — and that any call
 * after the handler returned throws: a write it did not await would land outside the transaction, or
 * inside the next message's.
 */
function lend<Tx extends object>(tx: Tx): { view: Tx; end(): void } {
  let ended = false;
  const view = new Proxy(tx, {
    get(target, property) {
      const value = Reflect.get(target, property, target) as unknown;
      if (typeof value !== "function") return value;
      if (property === "release") {
        return () => {
          throw new InvalidOptionError("tx", "must not be released by the handler: the store releases the connection when the transaction has ended");
        };
      }
      return (...args: unknown[]) => {
        if (ended) throw new InvalidOptionError("tx", "used after the handler returned; its transaction has ended: await every query before returning");
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return {
    view,
    end() {
      ended = true;
    },
  };
}

/** A loser's answer from the row that blocked it. */
function blocking(row: Record<string, unknown>): Claim {
  const fingerprint = optionalString(row.fingerprint);
  if (row.status === "done") return fingerprint === undefined ? { status: "done" } : { status: "done", fingerprint };
  const retryAfterMs = Math.max(0, Number(row.left_ms) || 0);
  return fingerprint === undefined ? { status: "in-flight", retryAfterMs } : { status: "in-flight", retryAfterMs, fingerprint };
}

function optionalString(value: unknown): string | undefined {
  return typeof value === "string" ? value : undefined;
}
