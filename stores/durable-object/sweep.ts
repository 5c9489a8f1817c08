/**
 * The alarm's sweep: what keeps one `IdempotencyObject`'s storage bounded, without an index.
 *
 * Every read already treats a row past its deadline as absent, so the sweep is about storage only,
 * never about correctness: it may run late, and rows may outlive their deadline by up to one gap.
 * That is what lets it skip the deadline index the old layout kept (one index row written on every
 * claim and two on every commit): instead, one sweep walks the table in primary-key order, in chunks
 * of `chunkRows` rows (one chunk per alarm invocation, so a table of millions of rows never outruns
 * a request's CPU limit), deletes the rows whose deadline has passed, and learns on the way how many
 * rows are live and the earliest deadline among them.
 *
 * When the walk is complete, the next sweep is due at the later of
 *   - the earliest live deadline (nothing can expire sooner), and
 *   - now + a gap that grows with the table: 10 ms per live row, at least 1 s, at most 1 hour.
 * The gap bounds what sweeping costs in rows READ: a walk reads every row once, so an object sweeps
 * at most ~100 rows a second on average (≈ 8.6 M rows read a day, $0.009 at $0.001 a million) until
 * its table passes 360,000 rows, and from there on once an hour (24 reads a day per row). A row costs
 * 1 row written to delete, and nothing in between.
 *
 * The walk's position lives in memory: an object evicted mid-walk starts the next walk from the
 * first key (more reads, nothing lost).
 *
 * What this is *not*: a timer. The object arms the alarm (object.ts); this module only says what
 * one alarm invocation does and when the next one is due.
 */
import type { RecordTable } from "./table.js";

/** Rows one alarm invocation walks at most. */
export const SWEEP_CHUNK_ROWS = 20_000;
/** How much each live row stretches the gap between two sweeps (ms). */
export const SWEEP_MS_PER_LIVE_ROW = 10;
/** Shortest gap between two sweeps (ms). */
export const SWEEP_MIN_GAP_MS = 1_000;
/** Longest gap between two sweeps (ms): how long an expired row may stay stored at most, past its deadline. */
export const SWEEP_MAX_GAP_MS = 60 * 60 * 1000;

/** One walk over the table, in progress. */
interface Walk {
  /** The last key walked; null before the first chunk. */
  after: string | null;
  /** Live rows seen so far. */
  live: number;
  /** Earliest live deadline seen so far. */
  next: number | null;
}

/** What one sweep invocation did. */
export interface SweepResult {
  /** Rows deleted from the current table. */
  readonly deleted: number;
  /** Rows walked. */
  readonly walked: number;
  /** When the next alarm should fire: right away while a walk is unfinished; null when the object holds nothing. */
  readonly nextAt: number | null;
}

/** The gap after a complete walk that found `live` live rows. */
export function sweepGapMs(live: number): number {
  return Math.min(SWEEP_MAX_GAP_MS, Math.max(SWEEP_MIN_GAP_MS, live * SWEEP_MS_PER_LIVE_ROW));
}

export class Sweeper {
  readonly #table: RecordTable;
  readonly #chunkRows: number;
  #walk: Walk | undefined;

  constructor(table: RecordTable, chunkRows = SWEEP_CHUNK_ROWS) {
    this.#table = table;
    this.#chunkRows = chunkRows;
  }

  /**
   * One alarm's worth of sweeping at `now`: the next chunk of the walk (its deletes in one
   * `transact`ion), and, when the walk is complete, the legacy table's sweep.
   */
  run(now: number, transact: <T>(work: () => T) => T): SweepResult {
    const walk = this.#walk ?? { after: null, live: 0, next: null };
    const expired: string[] = [];
    let walked = 0;
    for (const row of this.#table.scan(walk.after, this.#chunkRows)) {
      walked += 1;
      walk.after = row.key;
      const deadline = Number(row.deadline);
      if (deadline <= now) expired.push(row.key);
      else {
        walk.live += 1;
        if (walk.next === null || deadline < walk.next) walk.next = deadline;
      }
    }
    if (expired.length > 0) {
      transact(() => {
        for (const key of expired) this.#table.deleteExpired(key, now);
      });
    }
    if (walked === this.#chunkRows) {
      this.#walk = walk;
      return { deleted: expired.length, walked, nextAt: now };
    }
    this.#walk = undefined;
    const legacyNext = this.#table.sweepLegacy(now);
    let next = walk.next;
    if (legacyNext !== null && (next === null || legacyNext < next)) next = legacyNext;
    // Rows written behind the walk while it went on (between chunks) were not seen: keep an alarm for them.
    if (next === null && this.#table.anyRecord()) next = now;
    return { deleted: expired.length, walked, nextAt: next === null ? null : Math.max(next, now + sweepGapMs(walk.live)) };
  }
}
