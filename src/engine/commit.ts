/**
 * Phase 3, group commit: each success is committed as soon as its handler returns, not at the
 * end of the batch, so a crash or a hung neighbour costs at most the effects whose commit was in
 * flight — never the whole batch.
 *
 * A `StepQueue` runs one store step at a time. Entries that arrive while a step is in flight
 * share the next step, so handlers that finish together still cost one `rememberMany` (Redis,
 * Durable Object: one request; DynamoDB: one BatchWriteItem per 25). The first entry after an
 * idle spell waits up to `lingerMs` for company while other handlers are still running; when
 * none are, or when the deadline comes, it goes at once. A failed step is retried for the
 * entries it failed, `retries` times, 25 ms then 50 ms … apart (the "commit-failed" path).
 *
 * What this is *not*: a background job that outlives the caller's interest. `drain()` resolves
 * when every entry queued so far has its answer; entries queued later (a handler that finished
 * past the deadline) are still committed, by the same queue, whenever they come.
 */
import type { EngineEvent, StoreStep } from "../events.js";

export const COMMIT_RETRY_BASE_MS = 25;

interface Entry<T> {
  readonly value: T;
  tries: number;
  notBefore: number;
  resolve(error: unknown): void;
}

export interface StepQueueOptions<T> {
  readonly step: StoreStep;
  /** One store step: the error of each value, undefined where it succeeded. Never throws. */
  readonly run: (values: readonly T[]) => Promise<unknown[]>;
  /** Extra tries of a failed entry before its error is final. */
  readonly retries: number;
  readonly lingerMs: number;
  /** Whether other handlers of the batch are still running (worth lingering for). */
  readonly othersRunning: () => boolean;
  readonly emit: (event: EngineEvent) => void;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export class StepQueue<T> {
  readonly #options: StepQueueOptions<T>;
  #queue: Entry<T>[] = [];
  #inFlight: Promise<void> | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #hurry = false;
  /** Steps made so far (for tests and the benchmark's request counts). */
  steps = 0;

  constructor(options: StepQueueOptions<T>) {
    this.#options = options;
  }

  /** Queues a value; resolves with its final error, or undefined once its step succeeded. */
  add(value: T): Promise<unknown> {
    return new Promise((resolve) => {
      this.#queue.push({ value, tries: 0, notBefore: 0, resolve });
      this.#schedule();
    });
  }

  /** No more lingering: the next step starts as soon as the one in flight (if any) is done. */
  hurry(): void {
    this.#hurry = true;
    this.#schedule();
  }

  /** Tells the queue that a handler finished: when none runs any more, lingering is pointless. */
  nudge(): void {
    if (this.#timer !== undefined && !this.#options.othersRunning()) this.#schedule();
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
    const ready = this.#queue.some((entry) => entry.notBefore <= now);
    if (!ready) {
      const wait = Math.min(...this.#queue.map((entry) => entry.notBefore)) - now;
      this.#arm(wait);
      return;
    }
    const linger = this.#hurry || !this.#options.othersRunning() ? 0 : this.#options.lingerMs;
    if (linger > 0) {
      if (this.#timer === undefined) this.#arm(linger);
      return;
    }
    this.#disarm();
    // A microtask's delay lets entries queued in the same turn of the event loop join this step.
    this.#inFlight = Promise.resolve().then(() => this.#stepOnce());
  }

  #arm(ms: number): void {
    if (this.#timer !== undefined) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#hurry = true;
      this.#schedule();
      this.#hurry = false;
    }, Math.max(0, ms));
  }

  #disarm(): void {
    if (this.#timer === undefined) return;
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  async #stepOnce(): Promise<void> {
    const now = Date.now();
    const batch = this.#queue.filter((entry) => entry.notBefore <= now);
    this.#queue = this.#queue.filter((entry) => entry.notBefore > now);
    const started = Date.now();
    this.steps += 1;
    let errors: unknown[];
    try {
      errors = await this.#options.run(batch.map((entry) => entry.value));
    } catch (error) {
      errors = batch.map(() => error);
    }
    const failed = batch.filter((_, i) => errors[i] !== undefined);
    this.#options.emit({ type: "store-step", step: this.#options.step, ids: batch.length, durationMs: Date.now() - started, ok: failed.length === 0 });
    if (failed.length > 0) {
      this.#options.emit({ type: "store-error", step: this.#options.step, ids: failed.length, error: errors[batch.indexOf(failed[0] as Entry<T>)] });
    }
    batch.forEach((entry, i) => {
      const error = errors[i];
      if (error === undefined || entry.tries >= this.#options.retries) {
        entry.resolve(error);
        return;
      }
      entry.notBefore = Date.now() + COMMIT_RETRY_BASE_MS * 2 ** entry.tries;
      entry.tries += 1;
      this.#queue.push(entry);
    });
    this.#inFlight = undefined;
    this.#schedule();
  }
}
