/**
 * Phase 3, group commit: each success is committed as soon as its handler returns, not at the
 * end of the batch, so a crash or a hung neighbour costs at most the effects whose commit was in
 * flight — never the whole batch.
 *
 * A `StepQueue` runs one store step at a time. Entries that arrive while a step is in flight
 * share the next step, so handlers that finish together still cost one `rememberMany` (Redis,
 * Durable Object: one request; DynamoDB: one BatchWriteItem per 25). The first entry after an
 * idle spell may wait for company while other handlers are still running: a fixed `lingerMs`, or,
 * when `lingerFor` is given, as long as it says (the adaptive linger, linger.ts); when no handler
 * runs any more, or when the deadline comes, it goes at once. A failed step is retried for the
 * entries it failed, `retries` times, 25 ms then 50 ms … apart (the "commit-failed" path) — unless
 * the store said it is overloaded (`StoreUnavailableError.overloaded`): that error is final at once,
 * as Cloudflare asks of a Durable Object's overload, since a retry only adds to it.
 *
 * Hot path: an entry is settled through the callback it was queued with (`enqueue`), so a commit
 * costs no promise and no closure of its own; `add` is the promise form.
 *
 * What this is *not*: a background job that outlives the caller's interest. `drain()` resolves
 * when every entry queued so far has its answer; entries queued later (a handler that finished
 * past the deadline) are still committed, by the same queue, whenever they come.
 */
import { StoreUnavailableError } from "../errors.js";
import type { EngineEvent, StoreStep } from "../events.js";

export const COMMIT_RETRY_BASE_MS = 25;

interface Entry<T> {
  readonly value: T;
  /** When it was queued (epoch ms): the adaptive linger's budget runs from the oldest entry's. */
  readonly queuedAt: number;
  tries: number;
  notBefore: number;
  readonly settle: (value: T, error: unknown) => void;
}

export interface StepQueueOptions<T> {
  readonly step: StoreStep;
  /**
   * One store step: the error of each value (undefined where it succeeded), or undefined when
   * every value succeeded. Never throws (a throw fails every value of the step).
   */
  readonly run: (values: readonly T[]) => Promise<readonly unknown[] | undefined>;
  /** Extra tries of a failed entry before its error is final. */
  readonly retries: number;
  /** The fixed linger (ms), when `lingerFor` is not given. */
  readonly lingerMs: number;
  /**
   * The adaptive linger: how much longer (ms) the entries may wait for company, given when the
   * oldest of them was queued; 0 goes now. Asked again each time its wait ends.
   */
  readonly lingerFor?: ((oldestQueuedAt: number) => number) | undefined;
  /** Whether other handlers of the batch are still running, or still to start (worth lingering for). */
  readonly othersRunning: () => boolean;
  /** Where the step's events go; none when nothing listens. */
  readonly emit?: ((event: EngineEvent) => void) | undefined;
  /** Told every step's duration (ms, sub-millisecond: `performance.now`), for the round-trip estimate. */
  readonly timed?: (durationMs: number) => void;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export class StepQueue<T> {
  readonly #options: StepQueueOptions<T>;
  #queue: Entry<T>[] = [];
  #inFlight: Promise<void> | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** When the armed timer fires (epoch ms). */
  #timerDue = 0;
  #hurry = false;
  /** Steps made so far (for tests and the benchmark's request counts). */
  steps = 0;

  constructor(options: StepQueueOptions<T>) {
    this.#options = options;
  }

  /** Queues a value; `settle` is called once with its final error, or undefined once its step succeeded. It must not throw. */
  enqueue(value: T, settle: (value: T, error: unknown) => void): void {
    this.#queue.push({ value, queuedAt: Date.now(), tries: 0, notBefore: 0, settle });
    this.#schedule();
  }

  /** Queues a value; resolves with its final error, or undefined once its step succeeded. */
  add(value: T): Promise<unknown> {
    return new Promise((resolve) => this.enqueue(value, (_value, error) => resolve(error)));
  }

  /** No more lingering: the next step starts as soon as the one in flight (if any) is done. */
  hurry(): void {
    this.#hurry = true;
    this.#schedule();
  }

  /**
   * Tells the queue that a handler finished: when none runs any more, lingering is pointless; and
   * the adaptive linger may now expect the next finish sooner (or not at all).
   */
  nudge(): void {
    if (this.#timer !== undefined && (this.#options.lingerFor !== undefined || !this.#options.othersRunning())) this.#schedule();
  }

  /** Nothing queued and no step in flight. */
  get idle(): boolean {
    return this.#queue.length === 0 && this.#inFlight === undefined;
  }

  /** Resolves when every entry queued so far has its final answer. */
  async drain(): Promise<void> {
    while (this.#queue.length > 0 || this.#inFlight !== undefined) {
      this.hurry();
      await (this.#inFlight ?? sleep(1));
    }
  }

  #schedule(): void {
    if (this.#inFlight !== undefined || this.#queue.length === 0) return;
    const now = Date.now();
    let oldest = Number.POSITIVE_INFINITY;
    let retryAt = Number.POSITIVE_INFINITY;
    for (const entry of this.#queue) {
      if (entry.notBefore > now) retryAt = Math.min(retryAt, entry.notBefore);
      else oldest = Math.min(oldest, entry.queuedAt);
    }
    if (oldest === Number.POSITIVE_INFINITY) {
      // Only entries waiting for a retry: wake up when the first may go.
      this.#armAt(retryAt, now);
      return;
    }
    if (!this.#hurry && this.#options.othersRunning()) {
      const lingerFor = this.#options.lingerFor;
      // The fixed linger runs from the first entry after an idle spell (a later entry does not extend
      // it); the adaptive one is asked again at every entry and finish, and may end sooner.
      const linger = lingerFor === undefined ? this.#options.lingerMs : lingerFor(oldest);
      if (linger > 0) {
        this.#armAt(now + linger, now);
        return;
      }
    }
    this.#disarm();
    // A microtask's delay lets entries queued in the same turn of the event loop join this step.
    this.#inFlight = Promise.resolve().then(() => this.#stepOnce());
  }

  /** Arms the timer for `due`, unless it is armed for earlier already (then the earlier one stands). */
  #armAt(due: number, now: number): void {
    if (this.#timer !== undefined) {
      if (this.#timerDue <= due) return;
      clearTimeout(this.#timer);
    }
    this.#timerDue = due;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      // The fixed linger ends when its timer does; the adaptive one is asked again (it says 0 once its budget is spent).
      const fixed = this.#options.lingerFor === undefined;
      if (fixed) this.#hurry = true;
      this.#schedule();
      if (fixed) this.#hurry = false;
    }, Math.max(0, due - now));
  }

  #disarm(): void {
    if (this.#timer === undefined) return;
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  async #stepOnce(): Promise<void> {
    const now = Date.now();
    const batch: Entry<T>[] = [];
    const later: Entry<T>[] = [];
    for (const entry of this.#queue) (entry.notBefore <= now ? batch : later).push(entry);
    this.#queue = later;
    const values = batch.map((entry) => entry.value);
    const { run, emit, step, retries, timed } = this.#options;
    const started = Date.now();
    const startedPrecisely = performance.now();
    this.steps += 1;
    let errors: readonly unknown[] | undefined;
    try {
      errors = await run(values);
    } catch (error) {
      errors = batch.map(() => error);
    }
    timed?.(performance.now() - startedPrecisely);
    const durationMs = Date.now() - started;
    let failed = 0;
    let firstError: unknown;
    if (errors !== undefined) {
      for (let i = 0; i < batch.length; i += 1) {
        if (errors[i] === undefined) continue;
        if (failed === 0) firstError = errors[i];
        failed += 1;
      }
    }
    if (emit !== undefined) {
      emit({ type: "store-step", step, ids: batch.length, durationMs, ok: failed === 0 });
      if (failed > 0) emit({ type: "store-error", step, ids: failed, error: firstError });
    }
    for (let i = 0; i < batch.length; i += 1) {
      const entry = batch[i] as Entry<T>;
      const error = errors?.[i];
      if (error === undefined || entry.tries >= retries || (error instanceof StoreUnavailableError && error.overloaded)) {
        try {
          entry.settle(entry.value, error);
        } catch {
          // A settle callback must not throw; if one does, the queue goes on regardless.
        }
        continue;
      }
      entry.notBefore = Date.now() + COMMIT_RETRY_BASE_MS * 2 ** entry.tries;
      entry.tries += 1;
      this.#queue.push(entry);
    }
    this.#inFlight = undefined;
    this.#schedule();
  }
}
