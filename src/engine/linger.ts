/**
 * The adaptive commit linger — what `commitLingerMs` does by default: how long a finished success
 * may wait for other handlers of its batch to finish so that they share one commit step, sized
 * from what the engine observed, and never so long that the commit lands later than about two
 * store round trips after the effect.
 *
 * - The budget is one store round trip: the fastest of the engine's last store steps (`RoundTrips`;
 *   the gate's claim step gives the first sample of every batch), and never more than `MAX_LINGER_MS`. The oldest queued success waits at most that long, and its step takes about
 *   one more, so its commit lands within two round trips of its effect. A store that answers within
 *   a millisecond (in memory) gets no linger at all: there is nothing to save.
 * - Inside the budget, the queue waits only for a finish it expects: the next handler is expected
 *   to finish as far after the last one as the last one did after the one before. Expected past the
 *   budget → commit now (handlers spread far apart each commit at once, in the shortest window);
 *   expected within it → wait until then. The queue asks again at every finish and when the wait
 *   ends, so a wait only ever gets shorter. Before two handlers have finished there is no gap to go
 *   by: the first waits a short probe (`FIRST_PROBE_MS`), enough for handlers that finish together
 *   to show it (they then share one step), too short to widen a lone success's window.
 *
 * What this is *not*: the queue (commit.ts), or a promise about requests. Handlers that finish
 * further apart than a round trip commit one step each; `commitLingerMs: N` trades a wider window
 * for fewer steps when that is the better deal.
 */

/** How many recent store steps the round-trip estimate looks at. */
const SAMPLES = 8;

/**
 * The engine's estimate of one store round trip: the fastest of its last 8 steps (ms,
 * `performance.now` precision). The fastest, not a typical one: a claim step of many ids in
 * parallel, or a step that stalled, takes longer than one round trip, and the budget must not grow
 * with them — an underestimate only makes the linger shorter.
 */
export class RoundTrips {
  readonly #samples: number[] = [];
  #next = 0;
  #fastest = 0;

  /** Records one store step's duration (ms). */
  add(durationMs: number): void {
    if (!Number.isFinite(durationMs) || durationMs < 0) return;
    const samples = this.#samples;
    if (samples.length < SAMPLES) samples.push(durationMs);
    else samples[this.#next] = durationMs;
    this.#next = (this.#next + 1) % SAMPLES;
    this.#fastest = Math.min(...samples);
  }

  /** The fastest of the recent steps (ms); 0 before any. */
  get estimateMs(): number {
    return this.#fastest;
  }
}

/** When the batch's handlers finished so far: how many, the last and the one before (epoch ms). */
export interface Finishes {
  readonly count: number;
  readonly last: number;
  readonly previous: number;
}

/** Timers fire in whole milliseconds: a wait shorter than this is no wait. */
const TICK_MS = 1;

/**
 * The longest the adaptive linger ever waits, whatever the round trips say: a cold first step (a
 * connection being set up) or a stalled one must not hold a success back for long, and past this a
 * saved request is not worth the wider window.
 */
export const MAX_LINGER_MS = 50;

/** How long the first success of a batch waits to see whether others finish with it. */
export const FIRST_PROBE_MS = 2;

/**
 * How much longer (ms) the queued successes should wait for company: 0 to commit now. `oldestAt`
 * is when the oldest of them was queued, `budgetMs` one store round trip.
 */
export function lingerMs(now: number, oldestAt: number, budgetMs: number, finishes: Finishes): number {
  const deadline = oldestAt + Math.min(budgetMs, MAX_LINGER_MS);
  let until = Math.min(deadline, oldestAt + FIRST_PROBE_MS);
  if (finishes.count >= 2) {
    // One tick of slack: a finish expected at a fraction of a millisecond is caught by the next tick.
    const expected = finishes.last + (finishes.last - finishes.previous) + TICK_MS;
    if (expected > deadline) return 0;
    until = expected;
  }
  const wait = until - now;
  return wait < TICK_MS ? 0 : Math.ceil(wait);
}
