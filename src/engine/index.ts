/**
 * The batch engine: the one piece every runtime adapter is a thin translation over
 * (docs/ARCHITECTURE.md, "The batch engine").
 *
 * For a batch of deliveries it runs three phases:
 *  1. gate (gate.ts): decode and fingerprint every body, ask the store about every usable id in
 *     ONE step (`claimMany`, or `recallMany` / `seenMany` for a seen-set store);
 *  2. run (run.ts): the handlers, with bounded concurrency, FIFO groups in order;
 *  3. commit (commit.ts): each success committed as soon as its handler returns, in group steps
 *     (successes that finish together share one `rememberMany`), failures released the same way.
 *     The window between an effect and its commit is a couple of store round trips, whatever the
 *     other handlers of the batch do.
 * A runtime that knows its deadline passes it: the engine stops starting handlers
 * `deadlineMarginMs` before it, flushes the commits of what finished, releases the claims of what
 * never started, and answers; a handler still running keeps its claim and is committed if it
 * finishes later. Every delivery gets one `MessageResult`, in order, and each is reported
 * (`onResult`, the `result` event) as soon as it is final.
 *
 * Files: settings.ts (the options, validated once), batch.ts (one `process` call), gate.ts,
 * run.ts, commit.ts (the phases), store-step.ts (a store step: batch form, else per id), types.ts.
 * The verdicts come from ../decision.ts; this module only sequences them.
 *
 * What this is *not*: a runtime adapter. It knows nothing of SQS records, Workers messages,
 * acks or retries — it says `ack: true | false` and the adapter maps that.
 */
import { type Store, isClaimingStore } from "../contract.js";
import type { MessageResult } from "../decision.js";
import type { Envelope } from "../envelope.js";
import { InvalidOptionError } from "../errors.js";
import type { EngineEvent, RunInterceptor } from "../events.js";
import { checkMs } from "../store-kit/windows.js";
import { BatchRun } from "./batch.js";
import { RoundTrips } from "./linger.js";
import { type EngineSettings, engineSettings } from "./settings.js";
import type { Delivery, EngineOptions, Handler, ProcessOptions } from "./types.js";

export type { EngineEvent, RunInfo, RunInterceptor, StoreStep } from "../events.js";
export { ENGINE_OPTION_KEYS, type EngineSettings, engineSettings } from "./settings.js";
export type { Delivery, EngineOptions, Handler, HandlerContext, ProcessOptions } from "./types.js";

/** Two interceptors as one: the engine's around the batch's. */
function nest(outer: RunInterceptor | undefined, inner: RunInterceptor | undefined): RunInterceptor | undefined {
  if (outer === undefined) return inner;
  if (inner === undefined) return outer;
  return (run, info) => outer(() => inner(run, info), info);
}

/** Calls each observer, ignoring what one throws: an observer must never change an outcome. Undefined when there is none. */
function emitter(...observers: (((event: EngineEvent) => void) | undefined)[]): ((event: EngineEvent) => void) | undefined {
  const present = observers.filter((observe): observe is (event: EngineEvent) => void => observe !== undefined);
  if (present.length === 0) return undefined;
  return (event) => {
    for (const observe of present) {
      try {
        observe(event);
      } catch {
        // An observer must never change an outcome.
      }
    }
  };
}

/**
 * Processes batches of deliveries with one store and one handler: the decision table for every
 * message, the store asked once per step for the whole batch, one `MessageResult` per delivery.
 *
 * @example
 * ```ts
 * import { BatchEngine, InMemoryStore } from "babelqueue-serverless";
 *
 * const engine = new BatchEngine(new InMemoryStore(), async (envelope) => {
 *   await chargeCard(envelope.data);
 * });
 * const results = await engine.process([{ body: rawJson, context: {} }]);
 * if (!results[0]?.ack) console.log("retry later:", results[0]?.status);
 * ```
 */
export class BatchEngine<Message = Envelope, RuntimeContext = object> {
  readonly #settings: EngineSettings<Message, RuntimeContext>;
  readonly #emit: ((event: EngineEvent) => void) | undefined;
  /** The store's pace across batches: the adaptive commit linger's budget. */
  readonly #roundTrips = new RoundTrips();

  /** Throws `InvalidOptionError` for a wrong store, handler or option (unknown keys included). */
  constructor(store: Store, handle: Handler<Message, RuntimeContext>, options: EngineOptions<Message> = {}) {
    this.#settings = engineSettings(store, handle, options);
    this.#emit = emitter(this.#settings.observe);
  }

  /** True when the store claims atomically (claim mode); false for a seen-set store. */
  get claimMode(): boolean {
    return isClaimingStore(this.#settings.store);
  }

  /** Processes one batch. Never throws for a message's sake; one result per delivery, in order. */
  async process(deliveries: readonly Delivery<RuntimeContext>[], run: ProcessOptions = {}): Promise<MessageResult[]> {
    if (run.leaseMs !== undefined) checkMs("leaseMs", run.leaseMs);
    if (run.deadline !== undefined && !Number.isFinite(run.deadline)) throw new InvalidOptionError("deadline", "must be an epoch time in ms");
    const started = Date.now();
    const emit = run.observe === undefined ? this.#emit : emitter(this.#settings.observe, run.observe);
    emit?.({ type: "batch-start", size: deliveries.length });
    const scope = { emit, intercept: nest(this.#settings.intercept, run.intercept), roundTrips: this.#roundTrips, startedAt: started };
    // `batch-end` is emitted by the run itself, at the answer, before any late result.
    return new BatchRun<Message, RuntimeContext>(this.#settings, scope, deliveries, run).process();
  }
}
