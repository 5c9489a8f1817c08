/**
 * `IdempotencyObject`: the Durable Object class behind `DurableObjectStore` (store.ts). It
 * imports `cloudflare:workers`, so it lives apart from the store: a program that only calls the store
 * never loads the Workers runtime module.
 *
 * One SQLite row per store key (table.ts: a `WITHOUT ROWID` table with no secondary index — status,
 * fencing token, one deadline, payload fingerprint), and every RPC method takes a whole batch and
 * runs it as one synchronous SQLite transaction, so of any number of concurrent callers exactly one
 * gets `claimed`, and a claim's fingerprint is written in the same transaction as the claim. Expiry
 * is decided on every call (an expired lease can be re-claimed, an expired retention is not "done"),
 * by the object's own clock (`Date.now()` inside the object): callers pass durations, never
 * deadlines, so a caller's clock plays no part in any window. An alarm sweeps expired rows (sweep.ts):
 * armed by the first write when none is scheduled, then re-armed by each sweep while rows remain.
 *
 * Rows written (what Cloudflare bills, per workerd's `rowsWritten`): 1 per claim, 1 per commit, 1
 * per release, and 1 when the sweep deletes the row; a duplicate writes nothing. Objects created by
 * earlier versions keep their old table readable until it drains (table.ts).
 *
 * What this is *not*: callable with raw ids. Its methods take store keys built by
 * `DurableObjectStore`, and are meant to be called only through it.
 *
 * Types: this file is also compiled with the package's Node program (where `cloudflare:workers` is
 * untyped), so it describes the few runtime members it touches structurally (the `...Like`
 * interfaces). The real `DurableObjectState` satisfies them.
 */
// @ts-ignore -- "cloudflare:workers" exists only in workerd (and in programs typed with @cloudflare/workers-types).
import { DurableObject } from "cloudflare:workers";
import { checkFingerprints, withFingerprint } from "../../src/store-kit/fingerprints.js";
import { checkMs } from "../../src/store-kit/windows.js";
import type { ShardClaim, ShardClaimRef, ShardRecord } from "./store.js";
import { Sweeper } from "./sweep.js";
import { RecordTable, type SqlLike, type StoredRow } from "./table.js";

/**
 * The furthest ahead an alarm is set (about ten years). workerd refuses alarm times after 2189, and a
 * window of `Number.MAX_SAFE_INTEGER` ms ("for good") ends after that: its sweep comes early, finds
 * nothing expired and re-arms.
 */
const MAX_ALARM_AHEAD_MS = 315_360_000_000;

/** The slice of `DurableObjectState` the object uses. */
export interface IdempotencyObjectState {
  readonly storage: {
    readonly sql: SqlLike;
    transactionSync<T>(closure: () => T): T;
    getAlarm(): Promise<number | null>;
    setAlarm(scheduledTime: number | Date): Promise<void>;
  };
}

function checkKeys(keys: unknown): string[] {
  if (!Array.isArray(keys) || !keys.every((key) => typeof key === "string")) {
    throw new TypeError("keys must be an array of strings");
  }
  return keys as string[];
}

/** Caller-chosen fencing tokens: one per key, each 16-200 characters with no whitespace (a pair token's separator). */
function checkTokens(tokens: unknown, count: number): string[] | undefined {
  if (tokens === undefined || tokens === null) return undefined;
  if (
    !Array.isArray(tokens) ||
    tokens.length !== count ||
    !tokens.every((token) => typeof token === "string" && token.length >= 16 && token.length <= 200 && !/\s/.test(token))
  ) {
    throw new TypeError("tokens must be an array of one token (16-200 characters, no whitespace) per key");
  }
  return tokens as string[];
}

/** A row that still counts at `now`: its lease or retention has not passed. */
function live(row: StoredRow | undefined, now: number): row is StoredRow {
  return row !== undefined && Number(row.deadline) > now;
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
  readonly #table = new RecordTable(() => this.#state.storage.sql);
  readonly #sweeper = new Sweeper(this.#table);
  /** The alarm we know is scheduled: a time, null for none, undefined before we asked. */
  #alarmAt: number | null | undefined = undefined;

  get #state(): IdempotencyObjectState {
    return (this as unknown as { ctx: IdempotencyObjectState }).ctx;
  }

  /**
   * Makes sure an alarm is scheduled, at `deadline` when there is none. An alarm already scheduled
   * is left alone, even a later one: expired rows are absent to every read, so sweeping sooner
   * would buy nothing, and every `setAlarm` is a row written.
   */
  async #armAlarm(deadline: number): Promise<void> {
    if (this.#alarmAt === undefined) this.#alarmAt = await this.#state.storage.getAlarm();
    if (this.#alarmAt !== null) return;
    await this.#setAlarm(deadline);
  }

  /**
   * Schedules the alarm at `at`, or `MAX_ALARM_AHEAD_MS` from now when that is sooner. Noted before
   * the call, so that concurrent writes do not each write one; a call that fails leaves it unknown
   * again, never "scheduled" with none scheduled.
   */
  async #setAlarm(at: number): Promise<void> {
    const when = Math.min(at, Date.now() + MAX_ALARM_AHEAD_MS);
    this.#alarmAt = when;
    try {
      await this.#state.storage.setAlarm(when);
    } catch (error) {
      this.#alarmAt = undefined;
      throw error;
    }
  }

  /**
   * Claims every key in one transaction, storing each claim's fingerprint with it; answers in order
   * (a key repeated in the batch is in-flight the second time), `done` / `in-flight` with the stored fingerprint.
   * `tokens`, when passed, has one fencing token per key (the caller's, random): a claim is made under
   * it, so a caller whose call failed can still release what the call may have claimed. Without it,
   * the object draws each token.
   */
  async claim(keys: string[], leaseMs: number, fingerprints?: (string | null)[], tokens?: string[]): Promise<ShardClaim[]> {
    checkKeys(keys);
    checkMs("leaseMs", leaseMs);
    const stored = checkFingerprints(fingerprints, keys.length);
    const given = checkTokens(tokens, keys.length);
    const now = Date.now();
    const leaseUntil = now + leaseMs;
    let claimedAny = false;
    const answers = this.#state.storage.transactionSync(() =>
      keys.map((key, i): ShardClaim => {
        const row = this.#table.read(key);
        if (live(row, now)) {
          if (row.status === "done") return { status: "done", ...withFingerprint(row.fingerprint) };
          return { status: "in-flight", retryAfterMs: Number(row.deadline) - now, ...withFingerprint(row.fingerprint) };
        }
        const token = given?.[i] ?? crypto.randomUUID();
        this.#table.claim(key, token, leaseUntil, stored[i] ?? null);
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
      const legacy = this.#table.hasLegacy;
      keys.forEach((key, i) => {
        // A claim made before the upgrade lives in the legacy table: the commit moves it to the
        // current one, with its fingerprint, so the legacy table drains.
        let legacyFingerprint: string | null = null;
        if (legacy) {
          const row = this.#table.read(key);
          if (row?.source === "entries") {
            if (live(row, now)) legacyFingerprint = row.fingerprint;
            this.#table.delete(key, "entries");
          }
        }
        this.#table.commit(key, retainUntil, given[i] ?? null, now, legacyFingerprint);
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
        const row = this.#table.read(key);
        if (row === undefined || row.status !== "in-flight") return false;
        const held = live(row, now);
        if (held && row.token !== String(claim.token)) return false;
        this.#table.delete(key, row.source);
        return held;
      }),
    );
  }

  /** Whether each key is committed and within retention. */
  seen(keys: string[]): boolean[] {
    checkKeys(keys);
    const now = Date.now();
    return keys.map((key) => {
      const row = this.#table.read(key);
      return live(row, now) && row.status === "done";
    });
  }

  /** What each key holds: state, the live window's remaining ms, fingerprint; null when nothing live. */
  inspect(keys: string[]): ShardRecord[] {
    checkKeys(keys);
    const now = Date.now();
    return keys.map((key): ShardRecord => {
      const row = this.#table.read(key);
      if (!live(row, now)) return null;
      const left = Number(row.deadline) - now;
      return row.status === "done"
        ? { status: "done", retentionLeftMs: left, ...withFingerprint(row.fingerprint) }
        : { status: "in-flight", leaseLeftMs: left, ...withFingerprint(row.fingerprint) };
    });
  }

  /** Deletes every key, whatever its state. */
  forget(keys: string[]): void {
    checkKeys(keys);
    this.#state.storage.transactionSync(() => {
      for (const key of keys) this.#table.deleteEverywhere(key);
    });
  }

  /** Live rows (in flight or done, deadline still ahead), for tests and metrics. A full scan. */
  size(): number {
    return this.#table.live(Date.now());
  }

  /** Every stored row, expired ones included (what the sweep has not deleted yet), for tests. */
  storedRows(): number {
    return this.#table.stored();
  }

  /** The sweep (sweep.ts): one chunk of the walk, then the next alarm — right away, later, or none. */
  // @ts-ignore -- `override` is required where "cloudflare:workers" is typed, and an error where it is not (the Node build).
  override async alarm(): Promise<void> {
    const storage = this.#state.storage;
    this.#alarmAt = null;
    const { nextAt } = this.#sweeper.run(Date.now(), (work) => storage.transactionSync(work));
    if (nextAt !== null) await this.#setAlarm(nextAt);
  }
}
