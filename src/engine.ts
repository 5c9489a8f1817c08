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
import { type ClaimRef, type ClaimingStore, type Store, type TransactionalStore, isClaimingStore, isTransactionalStore } from "./contract.js";
import {
  type DecisionPolicy,
  type MessageResult,
  afterCommit,
  afterGate,
  afterRun,
  afterTransaction,
  blocked,
  copyOf,
  notStarted,
  stillRunning,
} from "./decision.js";
import type { Envelope } from "./envelope.js";
import { GroupBlockedError, InvalidOptionError } from "./errors.js";
import type { EngineEvent, RunInterceptor } from "./events.js";
import { type Fingerprinter, defaultFingerprint } from "./fingerprint.js";
import { StepQueue } from "./engine/commit.js";
import { type PhaseDeps, decode, defaultKey, defaultParse, fingerprintAll, gate, markCopiesAndBlocked, settleEach } from "./engine/gate.js";
import { invoke, lanesOf, runLanes } from "./engine/run.js";
import type { Delivery, EngineOptions, Handler, Item, ProcessOptions } from "./engine/types.js";
import { checkMs } from "./windows.js";

export type { EngineEvent, RunInfo, RunInterceptor, StoreStep } from "./events.js";
export type { Delivery, EngineOptions, Handler, HandlerContext, ProcessOptions } from "./engine/types.js";

const DEFAULT_CONCURRENCY = 10;
const DEFAULT_COMMIT_RETRIES = 2;
const DEFAULT_COMMIT_LINGER_MS = 5;
const DEFAULT_DEADLINE_MARGIN_MS = 1_000;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, ms)));

function integerOption(name: string, value: number, min: number, max: number): number {
  if (!Number.isSafeInteger(value) || value < min || value > max) throw new InvalidOptionError(name, `must be an integer from ${min} to ${max}`);
  return value;
}

function oneOf<T extends string>(name: string, value: T, allowed: readonly T[]): T {
  if (!allowed.includes(value)) throw new InvalidOptionError(name, `must be ${allowed.map((v) => `"${v}"`).join(" or ")}`);
  return value;
}

interface CommitEntry {
  readonly key: string;
  readonly fingerprint: string | undefined;
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
    this.#emit({ type: "batch-start", size: deliveries.length });
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
        deps: this.#deps,
        intercept: this.#options.intercept,
      },
      deliveries,
      run,
    );
    const results = await batch.process();
    this.#emit({ type: "batch-end", size: deliveries.length, durationMs: Date.now() - started, pending: batch.pending });
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

/** What a `BatchRun` needs of its engine: the validated options. */
interface EngineConfig<Message, RC> {
  readonly store: Store;
  readonly handle: Handler<Message, RC>;
  readonly policy: DecisionPolicy;
  readonly concurrency: number;
  readonly leaseMs: number | undefined;
  readonly commitRetries: number;
  readonly lingerMs: number;
  readonly marginMs: number;
  readonly transactional: boolean;
  readonly deps: PhaseDeps<Message>;
  readonly intercept: RunInterceptor | undefined;
}

/** The state of one `process` call. */
class BatchRun<Message, RC> {
  readonly #engine: EngineConfig<Message, RC>;
  readonly #run: ProcessOptions;
  readonly #items: Item<Message, RC>[];
  readonly #copies = new Map<number, Item<Message, RC>[]>();
  readonly #commits: StepQueue<CommitEntry>;
  readonly #releases: StepQueue<ClaimRef>;
  readonly #leaseMs: number | undefined;
  #running = 0;
  #stopped = false;
  #answered = false;
  #claimedAt = 0;

  constructor(engine: EngineConfig<Message, RC>, deliveries: readonly Delivery<RC>[], run: ProcessOptions) {
    this.#engine = engine;
    this.#run = run;
    this.#leaseMs = run.leaseMs ?? this.#engine.leaseMs;
    const { deps } = this.#engine;
    this.#items = deliveries.map((delivery, index) => decode(deps, delivery, index));
    const store = this.#engine.store;
    const othersRunning = () => this.#running > 0;
    this.#commits = new StepQueue<CommitEntry>({
      step: "commit",
      retries: this.#engine.commitRetries,
      lingerMs: this.#engine.lingerMs,
      othersRunning,
      emit: deps.emit,
      run: async (entries) => {
        const keys = entries.map((entry) => entry.key);
        const fingerprints = entries.map((entry) => entry.fingerprint);
        if (store.rememberMany !== undefined) {
          try {
            await store.rememberMany(keys, fingerprints);
            return keys.map(() => undefined);
          } catch (error) {
            return keys.map(() => error);
          }
        }
        return (await settleEach(keys.map((key, i) => () => store.remember(key, fingerprints[i])))).map((a) => (a.ok ? undefined : a.error));
      },
    });
    this.#releases = new StepQueue<ClaimRef>({
      step: "release",
      // A failed release only means the redelivery waits for the lease to end: reported, not retried.
      retries: 0,
      lingerMs: this.#engine.lingerMs,
      othersRunning,
      emit: deps.emit,
      run: async (claims) => {
        const claiming = store as ClaimingStore;
        if (claiming.releaseMany !== undefined) {
          try {
            await claiming.releaseMany(claims);
            return claims.map(() => undefined);
          } catch (error) {
            return claims.map(() => error);
          }
        }
        return (await settleEach(claims.map((claim) => () => claiming.release(claim.id, claim.token)))).map((a) => (a.ok ? undefined : a.error));
      },
    });
  }

  /** Handlers still running when the batch was answered. */
  get pending(): number {
    return this.#running;
  }

  async process(): Promise<MessageResult[]> {
    const { deps } = this.#engine;
    const answerAt = this.#run.deadline === undefined ? undefined : this.#run.deadline - this.#engine.marginMs;
    await fingerprintAll(deps, this.#items);
    const gated = markCopiesAndBlocked(this.#items);
    for (const item of this.#items) if (item.firstCopy !== undefined) this.#copiesOf(item.firstCopy).push(item);
    for (const item of this.#items) if (item.result !== undefined) this.#finish(item, item.result);

    if (answerAt !== undefined && Date.now() >= answerAt) {
      // No time to claim and run anything: every delivery goes back to the queue untouched.
      this.#stopped = true;
    } else {
      await gate(deps, gated, this.#leaseMs);
      this.#claimedAt = Date.now();
      // Messages outside FIFO groups that the gate already decided are final now.
      for (const item of gated) if (item.delivery.group === undefined) this.#decideAtGate(item);
      const lanes = runLanes(
        lanesOf(this.#items),
        this.#engine.concurrency,
        () => this.#stopped,
        (item) => this.#step(item),
        (rest) => this.#block(rest),
      );
      if (answerAt === undefined) await lanes;
      else {
        let timer: ReturnType<typeof setTimeout> | undefined;
        await Promise.race([lanes, new Promise<void>((resolve) => (timer = setTimeout(resolve, answerAt - Date.now())))]);
        clearTimeout(timer);
      }
    }
    this.#stopped = true;
    for (const item of this.#items) if (!item.reported && item.stage === "waiting" && item.firstCopy === undefined) this.#notStarted(item);

    const flushed = Promise.all([this.#commits.drain(), this.#releases.drain()]);
    if (this.#run.deadline === undefined) await flushed;
    else await Promise.race([flushed, sleep(this.#run.deadline - this.#engine.marginMs / 4 - Date.now())]);

    this.#answered = true;
    return this.#items.map((item) => {
      if (!item.reported) {
        // Still running (or its commit still in flight) at the deadline: keep the claim, do not ack.
        const leaseLeft = this.#leaseMs === undefined ? 0 : this.#leaseMs - (Date.now() - this.#claimedAt);
        this.#finish(item, stillRunning(item.dedupe, item.key, leaseLeft));
      }
      return item.result as MessageResult;
    });
  }

  #copiesOf(index: number): Item<Message, RC>[] {
    let copies = this.#copies.get(index);
    if (copies === undefined) {
      copies = [];
      this.#copies.set(index, copies);
    }
    return copies;
  }

  /** Applies the gate's verdict when it is a stop; true when the item is final. */
  #decideAtGate(item: Item<Message, RC>): boolean {
    if (item.reported) return true;
    if (item.gate === undefined) return false;
    const step = afterGate(item.gate, this.#engine.policy, item.key, item.fingerprint);
    if (step.next === "stop") {
      item.dedupe = step.result.dedupe;
      this.#finish(item, step.result);
      return true;
    }
    item.dedupe = step.dedupe;
    return false;
  }

  /** One lane step: decide, run, and queue the commit or release. True when the lane may go on. */
  async #step(item: Item<Message, RC>): Promise<boolean> {
    if (this.#decideAtGate(item)) return (item.result as MessageResult).ack;
    if (item.gate === undefined) return false;
    item.stage = "running";
    this.#running += 1;
    const { handle, intercept } = this.#engine;
    if (this.#engine.transactional && item.token !== undefined) return this.#transact(item);
    const outcome = await invoke(handle, intercept, item);
    this.#running -= 1;
    item.stage = "finished";
    const next = afterRun(outcome, item.dedupe, item.key, item.token !== undefined);
    if (next.next === "commit") {
      item.committing = true;
      void this.#commits.add({ key: item.key as string, fingerprint: item.fingerprint }).then((error) => {
        this.#finish(item, afterCommit(error, item.dedupe, item.key as string), this.#answered);
      });
      this.#commits.nudge();
      this.#releases.nudge();
      return true;
    }
    if (next.next === "release") this.#release(item);
    this.#commits.nudge();
    this.#releases.nudge();
    this.#finish(item, next.result, this.#answered);
    return false;
  }

  /** Transactional mode: the handler's writes and the fenced commit, one transaction. */
  async #transact(item: Item<Message, RC>): Promise<boolean> {
    const store = this.#engine.store as TransactionalStore<unknown>;
    const { handle, intercept, deps } = this.#engine;
    const key = item.key as string;
    const started = Date.now();
    let error: unknown;
    try {
      await store.transact({ id: key, token: item.token as string, ...(item.fingerprint === undefined ? {} : { fingerprint: item.fingerprint }) }, async (tx) => {
        const outcome = await invoke(handle, intercept, item, { tx });
        if (!outcome.ok) throw outcome.error;
      });
    } catch (thrown) {
      error = thrown;
    }
    deps.emit({ type: "store-step", step: "transact", ids: 1, durationMs: Date.now() - started, ok: error === undefined });
    this.#running -= 1;
    item.stage = "finished";
    const next = afterTransaction(error, key);
    if (next.next === "release") this.#release(item);
    this.#commits.nudge();
    this.#releases.nudge();
    this.#finish(item, next.result, this.#answered);
    return next.result.ack;
  }

  #release(item: Item<Message, RC>): void {
    if (item.token === undefined) return;
    void this.#releases.add({ id: item.key as string, token: item.token });
  }

  #block(rest: readonly Item<Message, RC>[]): void {
    for (const item of rest) {
      if (item.reported) continue;
      const group = item.delivery.group as string;
      this.#release(item);
      this.#finish(item, blocked(new GroupBlockedError(group), item.dedupe, item.key));
    }
  }

  #notStarted(item: Item<Message, RC>): void {
    this.#release(item);
    this.#finish(item, notStarted(item.dedupe, item.key));
  }

  /** Records a final result and reports it at once; copies of the item share its fate. `late`: after the answer. */
  #finish(item: Item<Message, RC>, result: MessageResult, late = false): void {
    if (item.reported && !late) return;
    if (late && !item.reported) late = false;
    item.reported = true;
    item.result = result;
    item.stage = "finished";
    this.#engine.deps.emit({
      type: "result",
      index: item.index,
      result,
      attempts: item.attempts,
      ...(item.delivery.messageId === undefined ? {} : { messageId: item.delivery.messageId }),
      ...(item.handlerMs === undefined ? {} : { handlerMs: item.handlerMs }),
      ...(late ? { late: true } : {}),
    });
    if (late) return;
    const onResult = this.#run.onResult;
    if (onResult !== undefined) {
      try {
        onResult(item.index, result);
      } catch {
        // The adapter's callback must never change an outcome.
      }
    }
    for (const copy of this.#copies.get(item.index) ?? []) {
      this.#finish(copy, copyOf(result, this.#engine.policy, { first: item.fingerprint, copy: copy.fingerprint }));
    }
  }
}
