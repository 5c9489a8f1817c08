/**
 * The batch engine (DESIGN §4): the one piece every runtime adapter is a thin translation over.
 *
 * For a batch of deliveries it runs three phases:
 *  1. gate (engine/gate.ts): decode and fingerprint every body, ask the store about every usable
 *     id in ONE step (`claimMany`, or `recallMany` / `seenMany` for a seen-set store);
 *  2. run (engine/run.ts): the handlers, with bounded concurrency, FIFO groups in order;
 *  3. commit (engine/commit.ts): each success committed as soon as its handler returns, in group
 *     steps (successes that finish together share one `rememberMany`), failures released the
 *     same way. The window between an effect and its commit is a couple of store round trips,
 *     whatever the other handlers of the batch do.
 * A runtime that knows its deadline passes it: the engine stops starting handlers
 * `deadlineMarginMs` before it, flushes the commits of what finished, releases the claims of what
 * never started, and answers; a handler still running keeps its claim and is committed if it
 * finishes later. Every delivery gets one `MessageResult`, in order, and each is reported
 * (`onResult`, the `result` event) as soon as it is final.
 *
 * The verdicts come from decision.ts; this file only sequences them.
 *
 * What this is *not*: a runtime adapter. It knows nothing of SQS records, Workers messages,
 * acks or retries — it says `ack: true | false` and the adapter maps that.
 */
import { type Store, isClaimingStore, isTransactionalStore } from "./contract.js";
import type { DecisionPolicy, MessageResult } from "./decision.js";
import { BatchRun } from "./engine/batch.js";
import { type PhaseDeps, defaultKey, defaultParse } from "./engine/gate.js";
import type { Delivery, EngineOptions, Handler, ProcessOptions } from "./engine/types.js";
import type { Envelope } from "./envelope.js";
import { InvalidOptionError } from "./errors.js";
import type { EngineEvent, RunInterceptor } from "./events.js";
import { type Fingerprinter, defaultFingerprint } from "./fingerprint.js";
import { checkMs } from "./windows.js";

export type { EngineEvent, RunInfo, RunInterceptor, StoreStep } from "./events.js";
export type { Delivery, EngineOptions, Handler, HandlerContext, ProcessOptions } from "./engine/types.js";

const DEFAULT_CONCURRENCY = 10;
const DEFAULT_COMMIT_RETRIES = 2;
const DEFAULT_COMMIT_LINGER_MS = 5;
const DEFAULT_DEADLINE_MARGIN_MS = 1_000;

function integerOption(name: string, value: number, min: number, max: number): number {
  if (!Number.isSafeInteger(value) || value < min || value > max) throw new InvalidOptionError(name, `must be an integer from ${min} to ${max}`);
  return value;
}

function oneOf<T extends string>(name: string, value: T, allowed: readonly T[]): T {
  if (!allowed.includes(value)) throw new InvalidOptionError(name, `must be ${allowed.map((v) => `"${v}"`).join(" or ")}`);
  return value;
}

/** Two interceptors as one: the engine's around the batch's. */
function nest(outer: RunInterceptor | undefined, inner: RunInterceptor | undefined): RunInterceptor | undefined {
  if (outer === undefined) return inner;
  if (inner === undefined) return outer;
  return (run, info) => outer(() => inner(run, info), info);
}

export class BatchEngine<Message = Envelope, RuntimeContext = object> {
  readonly #store: Store;
  readonly #handle: Handler<Message, RuntimeContext>;
  readonly #policy: DecisionPolicy;
  readonly #concurrency: number;
  readonly #leaseMs: number | undefined;
  readonly #commitRetries: number;
  readonly #lingerMs: number;
  readonly #marginMs: number;
  readonly #transactional: boolean;
  readonly #deps: PhaseDeps<Message>;
  readonly #options: EngineOptions<Message>;

  constructor(store: Store, handle: Handler<Message, RuntimeContext>, options: EngineOptions<Message> = {}) {
    if (typeof store?.seen !== "function" || typeof store.remember !== "function" || typeof store.forget !== "function") {
      throw new InvalidOptionError("store", "must implement seen, remember and forget");
    }
    if (typeof handle !== "function") throw new InvalidOptionError("handle", "must be a function");
    this.#concurrency = integerOption("concurrency", options.concurrency ?? DEFAULT_CONCURRENCY, 1, Number.MAX_SAFE_INTEGER);
    if (options.leaseMs !== undefined) checkMs("leaseMs", options.leaseMs);
    this.#commitRetries = integerOption("commitRetries", options.commitRetries ?? DEFAULT_COMMIT_RETRIES, 0, 10);
    this.#lingerMs = integerOption("commitLingerMs", options.commitLingerMs ?? DEFAULT_COMMIT_LINGER_MS, 0, 1_000);
    this.#marginMs = integerOption("deadlineMarginMs", options.deadlineMarginMs ?? DEFAULT_DEADLINE_MARGIN_MS, 0, 60_000);
    this.#policy = {
      onStoreError: oneOf("onStoreError", options.onStoreError ?? "retry", ["retry", "run"]),
      onInvalid: oneOf("onInvalid", options.onInvalid ?? "retry", ["retry", "drop"]),
      onConflict: oneOf("onConflict", options.onConflict ?? "retry", ["retry", "drop"]),
    };
    const fingerprint = options.fingerprint;
    if (fingerprint !== undefined && fingerprint !== false && typeof fingerprint !== "function") {
      throw new InvalidOptionError("fingerprint", "must be a function of the message, or false");
    }
    this.#transactional = options.transactional === true;
    if (this.#transactional && !isTransactionalStore(store)) {
      throw new InvalidOptionError("transactional", "needs a store with transact() (DynamoDBStore, PostgresStore, D1Store)");
    }
    this.#store = store;
    this.#handle = handle;
    this.#leaseMs = options.leaseMs;
    this.#options = options;
    this.#deps = {
      store,
      policy: this.#policy,
      emit: (event) => this.#emit(event),
      parse: options.parse ?? (defaultParse as (body: unknown) => Message),
      key: options.key ?? defaultKey,
      fingerprint: fingerprint === false ? undefined : ((fingerprint ?? defaultFingerprint) as Fingerprinter<Message>),
    };
  }

  /** True when the store claims atomically (claim mode); false for a seen-set store. */
  get claimMode(): boolean {
    return isClaimingStore(this.#store);
  }

  /** Processes one batch. Never throws for a message's sake; one result per delivery, in order. */
  async process(deliveries: readonly Delivery<RuntimeContext>[], run: ProcessOptions = {}): Promise<MessageResult[]> {
    if (run.leaseMs !== undefined) checkMs("leaseMs", run.leaseMs);
    if (run.deadline !== undefined && !Number.isFinite(run.deadline)) throw new InvalidOptionError("deadline", "must be an epoch time in ms");
    const started = Date.now();
    const emit = run.observe === undefined ? (event: EngineEvent) => this.#emit(event) : (event: EngineEvent) => {
      this.#emit(event);
      try {
        (run.observe as (event: EngineEvent) => void)(event);
      } catch {
        // An observer must never change an outcome.
      }
    };
    emit({ type: "batch-start", size: deliveries.length });
    const batch = new BatchRun<Message, RuntimeContext>(
      {
        store: this.#store,
        handle: this.#handle,
        policy: this.#policy,
        concurrency: this.#concurrency,
        leaseMs: this.#leaseMs,
        commitRetries: this.#commitRetries,
        lingerMs: this.#lingerMs,
        marginMs: this.#marginMs,
        transactional: this.#transactional,
        deps: run.observe === undefined ? this.#deps : { ...this.#deps, emit },
        intercept: nest(this.#options.intercept, run.intercept),
      },
      deliveries,
      run,
    );
    const results = await batch.process();
    emit({ type: "batch-end", size: deliveries.length, durationMs: Date.now() - started, pending: batch.pending });
    return results;
  }

  #emit(event: EngineEvent): void {
    const observe = this.#options.observe;
    if (observe === undefined) return;
    try {
      observe(event);
    } catch {
      // An observer must never change an outcome.
    }
  }
}

