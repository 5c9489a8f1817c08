/**
 * The SQLite layout of one `IdempotencyObject` and every statement the object runs on it.
 *
 * One table, `records`, `WITHOUT ROWID`, keyed by the store key: the primary key IS the table, so a
 * row costs one b-tree entry and there is no secondary index to keep. Columns: status
 * (`in-flight` | `done`), fencing token (NULL once done), ONE deadline (the lease while in flight,
 * the retention once done) and the payload fingerprint. What Cloudflare bills as rows written
 * (workerd's `cursor.rowsWritten`, measured in test/workers/durable-object-rows.test.ts):
 *   - a claim of a new key: 1 (an INSERT; the old layout wrote 3: the row, its primary-key index, the
 *     deadline index);
 *   - the commit: 1 (an in-place UPDATE through the upsert; the old layout wrote 2);
 *   - the sweep's delete of an expired row: 1;
 *   - a duplicate (a committed key asked again): 0, and 1 row read.
 * Nothing indexes the deadline: the sweep (sweep.ts) finds expired rows by walking the primary key in
 * bounded chunks, which costs rows READ ($0.001 a million) instead of index rows WRITTEN on every
 * claim and commit ($1.00 a million).
 *
 * The old layout (`entries`: a rowid table with a `key` primary key, `lease_until` / `retain_until`
 * and an index on `COALESCE(retain_until, lease_until)`) is read, never written: an object created by
 * an earlier version keeps answering from it until its rows expire. Reads look in `records` first
 * and fall back to `entries`; every new write goes to `records`; a release or forget deletes where
 * the row is. The sweep deletes expired `entries` rows through their index and drops the table once
 * it is empty, so an upgraded object ends up with the new layout alone, within one retention window,
 * without a bulk copy that could outrun a request's CPU limit.
 *
 * What this is *not*: a decision maker. It reads and writes rows; object.ts decides what a row
 * means (live or expired, whose token) and answers the RPC.
 */

/** The members of a SQLite cursor the object uses (workerd's `SqlStorageCursor` has them). */
export interface SqlCursorLike<Row> extends Iterable<Row> {
  toArray(): Row[];
  one(): Row;
}

/** `ctx.storage.sql`, as far as the object uses it. */
export interface SqlLike {
  exec<Row = Record<string, string | number | null>>(query: string, ...bindings: unknown[]): SqlCursorLike<Row>;
}

/** Where a row was found: the current table, or the table of a version before `WITHOUT ROWID`. */
export type RowSource = "records" | "entries";

/** One key's row, whichever table holds it. `deadline` is the lease (in flight) or the retention (done). */
export interface StoredRow {
  readonly status: "in-flight" | "done";
  readonly token: string | null;
  readonly deadline: number;
  /** NULL for none (and for every row an older version wrote before fingerprints existed). */
  readonly fingerprint: string | null;
  readonly source: RowSource;
}

/** The current table. */
export const RECORDS_SQL = `CREATE TABLE IF NOT EXISTS records (
  key TEXT NOT NULL PRIMARY KEY,
  status TEXT NOT NULL CHECK (status IN ('in-flight', 'done')),
  token TEXT,
  deadline INTEGER NOT NULL,
  fingerprint TEXT
) WITHOUT ROWID`;

/** The legacy table's one live deadline (its index's expression, so the sweep's delete uses the index). */
const LEGACY_DEADLINE = "COALESCE(retain_until, lease_until)";

/** The rows of one object: the current table, plus the legacy one while it still exists. */
export class RecordTable {
  readonly #sql: () => SqlLike;
  #ready = false;
  #legacy = false;

  /** `sql` is read on every statement (a metering wrapper may replace the object's storage after construction). */
  constructor(sql: () => SqlLike) {
    this.#sql = sql;
  }

  /** Creates the current table if needed and looks for the legacy one: once per object instance. */
  #prepare(sql: SqlLike): void {
    if (!this.#ready) {
      sql.exec(RECORDS_SQL);
      this.#legacy = sql.exec("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'entries'").toArray().length > 0;
      if (this.#legacy) {
        // Tables created before fingerprints existed get the column (a metadata-only change in SQLite).
        try {
          sql.exec("SELECT fingerprint FROM entries LIMIT 0");
        } catch {
          sql.exec("ALTER TABLE entries ADD COLUMN fingerprint TEXT");
        }
      }
      this.#ready = true;
    }
  }

  #exec<Row>(query: string, ...bindings: unknown[]): SqlCursorLike<Row> {
    const sql = this.#sql();
    this.#prepare(sql);
    return sql.exec<Row>(query, ...bindings);
  }

  /** Whether the legacy table still exists. */
  get hasLegacy(): boolean {
    this.#prepare(this.#sql());
    return this.#legacy;
  }

  /** The key's row: the current table's, else the legacy table's; undefined when neither has one. */
  read(key: string): StoredRow | undefined {
    const row = this.#exec<Omit<StoredRow, "source">>("SELECT status, token, deadline, fingerprint FROM records WHERE key = ?", key).toArray()[0];
    if (row !== undefined) return { ...row, source: "records" };
    if (!this.#legacy) return undefined;
    const old = this.#exec<Omit<StoredRow, "source">>(
      `SELECT status, token, ${LEGACY_DEADLINE} AS deadline, fingerprint FROM entries WHERE key = ?`,
      key,
    ).toArray()[0];
    return old === undefined || old.deadline === null ? undefined : { ...old, source: "entries" };
  }

  /** Writes a claim: in flight under `token` until `deadline`, replacing an expired row of the key in place. */
  claim(key: string, token: string, deadline: number, fingerprint: string | null): void {
    this.#exec(
      `INSERT INTO records (key, status, token, deadline, fingerprint) VALUES (?, 'in-flight', ?, ?, ?)
       ON CONFLICT (key) DO UPDATE SET status = 'in-flight', token = excluded.token, deadline = excluded.deadline, fingerprint = excluded.fingerprint`,
      key,
      token,
      deadline,
      fingerprint,
    );
  }

  /**
   * Commits a key: done, token cleared, retained until `deadline`, whatever its state. With no
   * `fingerprint`, it keeps the one its live row holds: the current table's, else
   * `legacyFingerprint` (the live legacy row's, which the caller reads), else none.
   */
  commit(key: string, deadline: number, fingerprint: string | null, now: number, legacyFingerprint: string | null): void {
    this.#exec(
      `INSERT INTO records (key, status, token, deadline, fingerprint) VALUES (?1, 'done', NULL, ?2, COALESCE(?3, ?5))
       ON CONFLICT (key) DO UPDATE SET status = 'done', token = NULL, deadline = excluded.deadline,
         fingerprint = COALESCE(?3, CASE WHEN records.deadline > ?4 THEN records.fingerprint END, ?5)`,
      key,
      deadline,
      fingerprint,
      now,
      legacyFingerprint,
    );
  }

  /** Deletes the key's row from the table it was read from. */
  delete(key: string, source: RowSource): void {
    this.#exec(source === "records" ? "DELETE FROM records WHERE key = ?" : "DELETE FROM entries WHERE key = ?", key);
  }

  /** Deletes the key's row wherever it is. */
  deleteEverywhere(key: string): void {
    this.#exec("DELETE FROM records WHERE key = ?", key);
    if (this.#legacy) this.#exec("DELETE FROM entries WHERE key = ?", key);
  }

  /** Up to `limit` rows of the current table after `after` (null: from the first), in key order: the sweep's chunk. */
  scan(after: string | null, limit: number): SqlCursorLike<{ key: string; deadline: number }> {
    return after === null
      ? this.#exec("SELECT key, deadline FROM records ORDER BY key LIMIT ?", limit)
      : this.#exec("SELECT key, deadline FROM records WHERE key > ? ORDER BY key LIMIT ?", after, limit);
  }

  /** Deletes a key of the current table if its deadline has passed (the sweep; the check guards a row rewritten meanwhile). */
  deleteExpired(key: string, now: number): void {
    this.#exec("DELETE FROM records WHERE key = ? AND deadline <= ?", key, now);
  }

  /** Whether the current table has any row at all (one row read at most). */
  anyRecord(): boolean {
    return this.#exec("SELECT 1 AS one FROM records LIMIT 1").toArray().length > 0;
  }

  /**
   * The legacy table's sweep: deletes its expired rows (through its deadline index) and drops the
   * table once it is empty. Answers its next deadline, or null once it is gone.
   */
  sweepLegacy(now: number): number | null {
    if (!this.hasLegacy) return null;
    this.#exec(`DELETE FROM entries WHERE ${LEGACY_DEADLINE} <= ?`, now);
    const next = this.#exec<{ next: number | null }>(`SELECT MIN(${LEGACY_DEADLINE}) AS next FROM entries`).one().next;
    if (next !== null) return next;
    // Empty (a row without any deadline never existed: every write set one). Its index goes with it.
    this.#exec("DROP TABLE entries");
    this.#legacy = false;
    return null;
  }

  /** Rows whose deadline is still ahead, in both tables (tests and metrics; a full scan). */
  live(now: number): number {
    let n = Number(this.#exec<{ n: number }>("SELECT COUNT(*) AS n FROM records WHERE deadline > ?", now).one().n);
    if (this.#legacy) n += Number(this.#exec<{ n: number }>(`SELECT COUNT(*) AS n FROM entries WHERE ${LEGACY_DEADLINE} > ?`, now).one().n);
    return n;
  }

  /** Every stored row, expired ones included, in both tables (tests). */
  stored(): number {
    let n = Number(this.#exec<{ n: number }>("SELECT COUNT(*) AS n FROM records").one().n);
    if (this.#legacy) n += Number(this.#exec<{ n: number }>("SELECT COUNT(*) AS n FROM entries").one().n);
    return n;
  }
}
