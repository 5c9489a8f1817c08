/**
 * `IdempotencyObject`: the Durable Object class behind `DurableObjectStore` (store.ts). It
 * imports `cloudflare:workers`, so it lives apart from the store: a program that only calls the store
 * never loads the Workers runtime module.
 *
 * One SQLite row per store key — status (`in-flight` | `done`), fencing token, lease deadline,
 * retention deadline, payload fingerprint — and every RPC method takes a whole batch and runs it as
 * one synchronous SQLite transaction, so of any number of concurrent callers exactly one gets
 * `claimed`, and a claim's fingerprint is written in the same transaction as the claim. Expiry is
 * decided on every call (an expired lease can be re-claimed, an expired retention is not "done");
 * an alarm deletes expired rows and re-arms for the next deadline.
 *
 * Tables created before fingerprints existed get the `fingerprint` column on the object's first
 * call (`ALTER TABLE ... ADD COLUMN`, a metadata-only change in SQLite); their rows read as having none.
 *
 * What this is *not*: callable with raw ids. Its methods take store keys built by
 * `DurableObjectStore`, and are meant to be called only through it.
 *
 * Types: this file is also compiled with the package's Node program (where `cloudflare:workers` is
 * untyped), so it describes the few runtime members it touches structurally (the `...Like`
 * interfaces below). The real `DurableObjectState` satisfies them.
 */
// @ts-ignore -- "cloudflare:workers" exists only in workerd (and in programs typed with @cloudflare/workers-types).
import { DurableObject } from "cloudflare:workers";
import { checkFingerprints, withFingerprint } from "../../src/store-kit/fingerprints.js";
import { checkMs } from "../../src/store-kit/windows.js";
import type { ShardClaim, ShardClaimRef, ShardRecord } from "./store.js";

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
  /** NULL for none (and for every row written before the column existed). */
  fingerprint: string | null;
}

const SCHEMA = [
  `CREATE TABLE IF NOT EXISTS entries (
     key TEXT PRIMARY KEY,
     status TEXT NOT NULL CHECK (status IN ('in-flight', 'done')),
     token TEXT,
     lease_until INTEGER,
     retain_until INTEGER,
     fingerprint TEXT
   )`,
  // The row's one live deadline: the lease while in flight, the retention once done.
  `CREATE INDEX IF NOT EXISTS entries_by_deadline ON entries (COALESCE(retain_until, lease_until))`,
];
const DEADLINE = "COALESCE(retain_until, lease_until)";
/** Added to tables created before fingerprints existed. */
const ADD_FINGERPRINT = "ALTER TABLE entries ADD COLUMN fingerprint TEXT";

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
      try {
        storage.sql.exec("SELECT fingerprint FROM entries LIMIT 0");
      } catch {
        storage.sql.exec(ADD_FINGERPRINT);
      }
      this.#schemaReady = true;
    }
    return storage.sql.exec<Row>(query, ...bindings);
  }

  #row(key: string): EntryRow | undefined {
    return this.#sql<EntryRow>("SELECT status, token, lease_until, retain_until, fingerprint FROM entries WHERE key = ?", key).toArray()[0];
  }

  /** Makes sure an alarm fires no later than `deadline` (only ever moves it earlier). */
  async #armAlarm(deadline: number): Promise<void> {
    const storage = this.#state.storage;
    if (this.#alarmAt === undefined) this.#alarmAt = await storage.getAlarm();
    if (this.#alarmAt !== null && this.#alarmAt <= deadline) return;
    this.#alarmAt = deadline;
    await storage.setAlarm(deadline);
  }

  /**
   * Claims every key in one transaction, storing each claim's fingerprint with it; answers in order
   * (a key repeated in the batch is in-flight the second time), `done` / `in-flight` with the stored fingerprint.
   */
  async claim(keys: string[], leaseMs: number, fingerprints?: (string | null)[]): Promise<ShardClaim[]> {
    checkKeys(keys);
    checkMs("leaseMs", leaseMs);
    const stored = checkFingerprints(fingerprints, keys.length);
    const now = Date.now();
    const leaseUntil = now + leaseMs;
    let claimedAny = false;
    const answers = this.#state.storage.transactionSync(() =>
      keys.map((key, i): ShardClaim => {
        const row = this.#row(key);
        if (row?.status === "done" && (row.retain_until ?? 0) > now) return { status: "done", ...withFingerprint(row.fingerprint) };
        if (row?.status === "in-flight" && (row.lease_until ?? 0) > now) {
          return { status: "in-flight", retryAfterMs: (row.lease_until as number) - now, ...withFingerprint(row.fingerprint) };
        }
        const token = crypto.randomUUID();
        this.#sql(
          "INSERT OR REPLACE INTO entries (key, status, token, lease_until, retain_until, fingerprint) VALUES (?, 'in-flight', ?, ?, NULL, ?)",
          key,
          token,
          leaseUntil,
          stored[i] ?? null,
        );
        claimedAny = true;
        return { status: "claimed", token };
      }),
    );
    if (claimedAny) await this.#armAlarm(leaseUntil);
    return answers;
  }

  /**
   * Commits every key: done, token cleared, retained for `retentionMs` from now, whatever the lease
   * state. A key given no fingerprint keeps the one its live row holds (the claim's).
   */
  async remember(keys: string[], retentionMs: number, fingerprints?: (string | null)[]): Promise<void> {
    checkKeys(keys);
    checkMs("retentionMs", retentionMs);
    const given = checkFingerprints(fingerprints, keys.length);
    if (keys.length === 0) return;
    const now = Date.now();
    const retainUntil = now + retentionMs;
    this.#state.storage.transactionSync(() => {
      keys.forEach((key, i) => {
        this.#sql(
          `INSERT INTO entries (key, status, token, lease_until, retain_until, fingerprint) VALUES (?, 'done', NULL, NULL, ?, ?)
           ON CONFLICT (key) DO UPDATE SET status = 'done', token = NULL, lease_until = NULL, retain_until = excluded.retain_until,
             fingerprint = COALESCE(excluded.fingerprint, CASE WHEN COALESCE(entries.retain_until, entries.lease_until) > ? THEN entries.fingerprint END)`,
          key,
          retainUntil,
          given[i] ?? null,
          now,
        );
      });
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

  /** What each key holds: state, the live window's remaining ms, fingerprint; null when nothing live. */
  inspect(keys: string[]): ShardRecord[] {
    checkKeys(keys);
    const now = Date.now();
    return keys.map((key): ShardRecord => {
      const row = this.#row(key);
      if (row?.status === "done" && (row.retain_until ?? 0) > now) {
        return { status: "done", retentionLeftMs: (row.retain_until as number) - now, ...withFingerprint(row.fingerprint) };
      }
      if (row?.status === "in-flight" && (row.lease_until ?? 0) > now) {
        return { status: "in-flight", leaseLeftMs: (row.lease_until as number) - now, ...withFingerprint(row.fingerprint) };
      }
      return null;
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
