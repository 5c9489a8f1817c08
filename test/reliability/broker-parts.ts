/**
 * What the reliability suite's two simulated brokers share (simulate.ts: SQS mode, over the batch
 * engine; simulate-kafka.ts: Kafka mode, through `kafkaHandler`): the message body, the seeded
 * shuffle, the crash point a batch draws, the store as a killed process sees it, and the window
 * faults' counts with what a kill adds to them.
 *
 * What this is *not*: a broker. Each mode keeps its own delivery model (visibility timeout or
 * partitions and offsets) and its own verdicts.
 */
import type { Store } from "../../src/contract.js";
import type { FaultSwitch } from "./faults.js";

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
/** What a dead process's calls return: nothing, ever. */
export const never = new Promise<never>(() => {});

/**
 * When a run gives up (ms from its start) unless told: ids not done by then are reported lost. It
 * grows with the run — half a second a message, at least four minutes — because a full-size run's
 * kills and crashes return whole batches to the queue many times over, and a fixed limit would cut
 * it short and count the undelivered rest as lost.
 */
export function runDeadlineMs(messages: number, deadlineMs?: number): number {
  return deadlineMs ?? Math.max(240_000, messages * 500);
}

/** The body of message `n` (id `id`) on queue or topic `queue`: a BabelQueue envelope. */
export function envelope(id: string, n: number, queue: string): string {
  return JSON.stringify({
    job: "urn:babel:reliability:effect",
    trace_id: `trace-${n}`,
    data: { n },
    meta: { id, queue, lang: "node", schema_version: 1, created_at: n },
    attempts: 0,
  });
}

/** Fisher–Yates, in place, with the run's seeded `random`. */
export function shuffle<T>(random: () => number, list: T[]): void {
  for (let i = list.length - 1; i > 0; i -= 1) {
    const j = Math.floor(random() * (i + 1));
    [list[i], list[j]] = [list[j] as T, list[i] as T];
  }
}

/** Per batch: the probability of each crash point. */
export interface CrashRates {
  beforeEffect?: number;
  afterEffectBeforeCommit?: number;
  afterCommitBeforeAck?: number;
}

export type CrashPoint = "before-effect" | "after-effect" | "after-commit" | "none";

/** Where this batch crashes, if anywhere: one draw of `random` against the rates (absent = 0). */
export function crashPoint(random: () => number, rates: CrashRates = {}): CrashPoint {
  const crash = { beforeEffect: 0, afterEffectBeforeCommit: 0, afterCommitBeforeAck: 0, ...rates };
  const roll = random();
  return roll < crash.beforeEffect
    ? "before-effect"
    : roll < crash.beforeEffect + crash.afterEffectBeforeCommit
      ? "after-effect"
      : roll < crash.beforeEffect + crash.afterEffectBeforeCommit + crash.afterCommitBeforeAck
        ? "after-commit"
        : "none";
}

/**
 * `store`, with every method call going through `around(method, args, call)`: `call()` makes the
 * real call (on the store itself, so its private fields work). Other properties read through.
 */
export function aroundCalls<S extends Store>(store: S, around: (method: string | symbol, args: unknown[], call: () => unknown) => unknown): S {
  return new Proxy(store, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown;
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => around(property, args, () => (value as (...a: unknown[]) => unknown).apply(target, args));
    },
  });
}

/** The store as a killed process sees it: once `dead()` is true, no call reaches the backend and none answers. */
export function killable<S extends Store>(store: S, dead: () => boolean): S {
  return aroundCalls(store, (_method, _args, call) => (dead() ? never : call()));
}

/**
 * The effect counts of a run over `ids`: effects in all, ids whose effect never ran (`lost`), and
 * for each id whose effect ran more than once, `onRepeated(id, repeats)` (the effects past its first).
 */
export function countEffects(
  ids: readonly string[],
  effects: ReadonlyMap<string, number>,
  onRepeated: (id: string, repeats: number) => void,
): { messages: number; effects: number; lost: number } {
  let lost = 0;
  let total = 0;
  for (const id of ids) {
    const count = effects.get(id) ?? 0;
    total += count;
    if (count === 0) lost += 1;
    if (count > 1) onRepeated(id, count - 1);
  }
  return { messages: ids.length, effects: total, lost };
}

/** The fields of a run's report that both modes fill alike: its names, its counts, the faults the switch injected, its duration since `startedAt`. */
export function commonReport(
  options: { readonly store: string; readonly faultMix: string; readonly faults?: FaultSwitch | undefined },
  counted: { messages: number; effects: number; lost: number },
  counts: { deliveries: number; crashes: number; storeUnavailable: number; window: WindowReport },
  startedAt: number,
) {
  return { store: options.store, faultMix: options.faultMix, ...counted, ...counts, storeFaults: { ...(options.faults?.injected ?? {}) }, elapsedMs: Date.now() - startedAt };
}

/** The window faults' counts. */
export interface WindowReport {
  kills: number;
  /** Effects repeated because an invocation was killed after them and before their commit landed. */
  killRepeats: number;
  /** Handlers running (started, not finished) at the kill moments, summed. */
  runningAtKill: number;
  /** Effects done whose commit had not landed at the kill moments, summed (the bound on killRepeats). */
  committingAtKill: number;
  /** Deliveries in the killed batches, summed (what the old end-of-batch commit exposed). */
  batchAtKill: number;
  hangs: number;
  /**
   * Records of batches with a hung handler that the hang sent back to the queue: the whole batch when
   * the invocation died, else the results the deadline decided (`DeadlineExceededError`: the hung
   * record, and any not started). A park or a failure in the same batch is not the hang's doing.
   */
  returnedByHang: number;
  /**
   * Of `hangs`, those whose batch could not keep to the guard's promise for a reason that is not the
   * engine's: the store answered the claim step too late for the handlers to finish before the answer
   * point, a commit or release was still unanswered when the batch answered (or died), or the process
   * itself stalled longer than the engine's flush allowance. Such a batch returns its whole unfinished
   * part, which is right; `returnedByLateHangs` counts those records (they are in `returnedByHang` too).
   */
  lateHangs: number;
  returnedByLateHangs: number;
  /** Effects repeated in ids of batches with a hung handler. */
  hangRepeats: number;
}

export function emptyWindow(): WindowReport {
  return { kills: 0, killRepeats: 0, runningAtKill: 0, committingAtKill: 0, batchAtKill: 0, hangs: 0, returnedByHang: 0, lateHangs: 0, returnedByLateHangs: 0, hangRepeats: 0 };
}

/**
 * Whether a batch gets a fault drawn with `probability`: by the draw, or because the fault has not
 * happened yet (`happened` 0) — a mix that asks for a fault always has it, whatever batches the
 * timing made (a seeded 15% per batch once missed every batch of a short CI-size run). The draw is
 * made either way, so the random stream stays as it was.
 */
export function drawFault(random: () => number, probability: number | undefined, happened: number): boolean {
  const p = probability ?? 0;
  const drawn = random() < p;
  return drawn || (p > 0 && happened === 0);
}

/**
 * A kill at this moment: counts it with the handlers running, the effects committing and the batch's
 * size, and marks the committing ids as exposed (`exposed`: their repeats are the kill's).
 */
export function countKill(window: WindowReport, at: { running: ReadonlySet<string>; committing: ReadonlySet<string>; batchSize: number }, exposed: Set<string>): void {
  window.kills += 1;
  window.runningAtKill += at.running.size;
  window.committingAtKill += at.committing.size;
  window.batchAtKill += at.batchSize;
  for (const id of at.committing) exposed.add(id);
}
