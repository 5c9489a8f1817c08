/**
 * BabelQueue's PHP and Go SDKs' PostgreSQL stores, as the statements they send — for the
 * cross-writer tests. Each method issues exactly the SDK's statement(s), in the SDK's order, with
 * the SDK's clock where it uses its own (PHP: `time()`; Go: `time.Now().Add(ttl)` for expires_at),
 * per the research notes on the SDK sources (/work/notes/babelqueue-layouts.md: PHP
 * `src/Idempotency/PdoStore.php` at 93a8c184, Go `idempotency-postgres/postgres.go` at 8f09695b).
 *
 * These are the SDKs' statements, not a model of them: nothing here decides anything the SDK does
 * not decide in SQL. The wrappers (`phpClaimingDispatch`, `goWrap`) follow the SDKs' wrapper order.
 *
 * What this is *not*: the SDKs' code (read, never copied), or a client for anything but the tests.
 */
import type pg from "pg";

type Queryable = Pick<pg.Pool, "query">;

/** PHP's `PdoStore::ddl($table)`: the one statement for every driver. */
export const phpDdl = (table: string) => `CREATE TABLE IF NOT EXISTS ${table} (
    message_id VARCHAR(255) NOT NULL,
    state      VARCHAR(16)  NOT NULL,
    expires_at BIGINT       NULL,
    PRIMARY KEY (message_id)
)`;

/** Go's `Migrate` (schema.sql) for `table`. */
export const goDdl = (table: string) => `CREATE TABLE IF NOT EXISTS ${table} (
    message_id  TEXT        NOT NULL PRIMARY KEY,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at  TIMESTAMPTZ NULL
);
CREATE INDEX IF NOT EXISTS ${table}_expires_at_idx ON ${table} (expires_at);`;

const integrityViolation = (error: unknown) => String((error as { code?: unknown })?.code ?? "").startsWith("23");

/** PHP `PdoStore` (implements `ClaimingStore`). `now` is PHP's `time()` (epoch seconds). */
export class PhpPdoStore {
  constructor(
    readonly db: Queryable,
    readonly table = "bq_idempotency",
    readonly now: () => number = () => Math.floor(Date.now() / 1000),
  ) {}

  async claim(messageId: string, ttlSeconds = 3600): Promise<boolean> {
    const ttl = ttlSeconds > 0 ? ttlSeconds : 3600;
    const now = this.now();
    const expiresAt = now + ttl;
    try {
      await this.db.query(`INSERT INTO ${this.table} (message_id, state, expires_at) VALUES ($1, $2, $3)`, [messageId, "claimed", expiresAt]);
      return true;
    } catch (error) {
      if (!integrityViolation(error)) throw error;
    }
    const stolen = await this.db.query(
      `UPDATE ${this.table} SET expires_at = $1 WHERE message_id = $2 AND state = $3 AND expires_at IS NOT NULL AND expires_at < $4`,
      [expiresAt, messageId, "claimed", now],
    );
    return stolen.rowCount === 1;
  }

  async seen(messageId: string): Promise<boolean> {
    const { rows } = await this.db.query(`SELECT state FROM ${this.table} WHERE message_id = $1`, [messageId]);
    return rows[0]?.state === "seen";
  }

  async remember(messageId: string): Promise<void> {
    const updated = await this.db.query(`UPDATE ${this.table} SET state = $1, expires_at = NULL WHERE message_id = $2`, ["seen", messageId]);
    if (updated.rowCount === 1) return;
    try {
      await this.db.query(`INSERT INTO ${this.table} (message_id, state, expires_at) VALUES ($1, $2, NULL)`, [messageId, "seen"]);
    } catch (error) {
      if (!integrityViolation(error)) throw error;
    }
  }

  async release(messageId: string): Promise<void> {
    await this.db.query(`DELETE FROM ${this.table} WHERE message_id = $1 AND state = $2`, [messageId, "claimed"]);
  }

  async forget(messageId: string): Promise<void> {
    await this.db.query(`DELETE FROM ${this.table} WHERE message_id = $1`, [messageId]);
  }
}

/** What PHP's `ClaimingDispatch::wrap` does with one delivery. */
export type PhpOutcome = "ran" | "skipped" | "parked" | "failed";

/** PHP's `ClaimingDispatch::wrap`: seen → claim (lost: seen? skip : park) → handler → remember, release on throw. */
export async function phpClaimingDispatch(store: PhpPdoStore, id: string, handler: () => Promise<void> | void, ttlSeconds = 3600): Promise<PhpOutcome> {
  if (await store.seen(id)) return "skipped";
  if (!(await store.claim(id, ttlSeconds))) return (await store.seen(id)) ? "skipped" : "parked";
  try {
    await handler();
  } catch {
    await store.release(id);
    return "failed";
  }
  await store.remember(id);
  return "ran";
}

/** Go `idempotency-postgres` Store. `ttlMs` 0 = never expires; expires_at from the Go host's clock. */
export class GoPostgresStore {
  constructor(
    readonly db: Queryable,
    readonly table = "babelqueue_idempotency",
    readonly ttlMs = 0,
    readonly clock: () => number = Date.now,
  ) {}

  /** `Claim` (and `Remember`, which discards its answer). */
  async claim(messageId: string): Promise<boolean> {
    const expiresAt = this.ttlMs > 0 ? new Date(this.clock() + this.ttlMs) : null;
    const { rows } = await this.db.query(
      `INSERT INTO ${this.table} (message_id, created_at, expires_at)
VALUES ($1, now(), $2)
ON CONFLICT (message_id) DO UPDATE
    SET created_at = now(),
        expires_at = EXCLUDED.expires_at
    WHERE ${this.table}.expires_at IS NOT NULL AND ${this.table}.expires_at <= now()
RETURNING message_id`,
      [messageId, expiresAt],
    );
    return rows.length === 1;
  }

  async remember(messageId: string): Promise<void> {
    await this.claim(messageId);
  }

  async seen(messageId: string): Promise<boolean> {
    const { rows } = await this.db.query(`SELECT 1 FROM ${this.table} WHERE message_id = $1 AND (expires_at IS NULL OR expires_at > now())`, [messageId]);
    return rows.length > 0;
  }

  async forget(messageId: string): Promise<void> {
    await this.db.query(`DELETE FROM ${this.table} WHERE message_id = $1`, [messageId]);
  }
}

/** Go's `idempotency.Wrap`: Seen → handler → Remember (its error ignored). */
export async function goWrap(store: GoPostgresStore, id: string, handler: () => Promise<void> | void): Promise<"ran" | "skipped" | "failed"> {
  if (await store.seen(id)) return "skipped";
  try {
    await handler();
  } catch {
    return "failed";
  }
  await store.remember(id).catch(() => undefined);
  return "ran";
}
