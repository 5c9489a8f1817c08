/**
 * One `process` call: the three phases over one batch, with the state they share — the items,
 * the commit and release queues, the running count, the deadline.
 *
 * Hot path, per message: one item, one handler context, one result, and the result event only
 * when something listens. Everything else is per batch: the queues and their callbacks are made
 * once here, and a finished success goes into the commit queue as it is (the item), settled
 * through a callback rather than a promise of its own. "Is anything still to run?" is a counter,
 * not a scan of the batch.
 *
 * What this is *not*: option validation (settings.ts) or a verdict (../decision.ts).
 */
import type { ClaimRef, ClaimingStore, TransactionalStore } from "../contract.js";
import {
  type MessageResult,
  afterCommit,
  afterGate,
  afterRun,
  afterTransaction,
  blocked,
  commitPending,
  copyOf,
  notStarted,
  stillRunning,
} from "../decision.js";
import { DeadlineExceededError, GroupBlockedError, StoreUnavailableError } from "../errors.js";
import type { EngineEvent, RunInterceptor } from "../events.js";
import { StepQueue } from "./commit.js";
import { decode, fingerprintAll, gate, markCopiesAndBlocked } from "./gate.js";
import { type RoundTrips, lingerMs } from "./linger.js";
import { type RunOutcome, invoke, lanesOf, runLanes } from "./run.js";
import type { EngineSettings } from "./settings.js";
import { voidStep } from "./store-step.js";
import type { Delivery, Item, ProcessOptions } from "./types.js";

/** The fingerprint the store answered the gate with (a done / in-flight record's), if any. */
function storedFingerprint<Message, RC>(item: Item<Message, RC>): string | undefined {
  const gate = item.gate;
  if (gate?.kind === "claim" && gate.claim.status !== "claimed") return gate.claim.fingerprint;
  if (gate?.kind === "seen") return gate.fingerprint;
  return undefined;
}

/** Waits for `work` or `ms`, whichever comes first, and never leaves the timer behind (it would keep a process alive). */
async function raceTimer(work: Promise<unknown>, ms: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    await Promise.race([work, new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(0, ms))))]);
  } finally {
    clearTimeout(timer);
  }
}

const noop = (): void => undefined;

/** What one batch adds to the engine's settings: where its events go, its handlers' interceptor, the store's pace. */
export interface BatchScope {
  /** Where the batch's events go; undefined when nothing listens (no event is even made then). */
  readonly emit: ((event: EngineEvent) => void) | undefined;
  readonly intercept: RunInterceptor | undefined;
  /** The engine's store round-trip estimate: the adaptive linger's budget, fed by this batch's steps. */
  readonly roundTrips: RoundTrips;
  /** When `process` was called (epoch ms): `batch-end`'s duration. */
  readonly startedAt: number;
}

/** The state of one `process` call. */
export class BatchRun<Message, RC> {
  readonly #settings: EngineSettings<Message, RC>;
  readonly #scope: BatchScope;
  readonly #run: ProcessOptions;
  readonly #items: Item<Message, RC>[];
  #copies: Map<number, Item<Message, RC>[]> | undefined;
  /** Lanes waiting on a first copy's final result, by its index. */
  #waits: Map<number, { readonly promise: Promise<void>; readonly wake: () => void }> | undefined;
  readonly #commits: StepQueue<Item<Message, RC>>;
  readonly #releases: StepQueue<ClaimRef>;
  readonly #leaseMs: number | undefined;
  #running = 0;
  /** Items a lane may still start: not final, not running, not a copy. */
  #unstarted = 0;
  #stopped = false;
  #answered = false;
  #claimedAt = 0;
  /** Handler finishes so far, for the adaptive linger. */
  #finishes = { count: 0, last: 0, previous: 0 };

  constructor(settings: EngineSettings<Message, RC>, scope: BatchScope, deliveries: readonly Delivery<RC>[], run: ProcessOptions) {
    this.#settings = settings;
    this.#scope = scope;
    this.#run = run;
    this.#leaseMs = run.leaseMs ?? settings.leaseMs;
    this.#items = deliveries.map((delivery, index) => decode(settings, delivery, index));
    const store = settings.store;
    const roundTrips = scope.roundTrips;
    // What the commit and release queues share: the linger (adaptive, or the fixed option), the batch's pace and events.
    const shared = {
      lingerMs: settings.commitLingerMs ?? 0,
      lingerFor: settings.commitLingerMs === undefined ? (oldestAt: number) => lingerMs(Date.now(), oldestAt, roundTrips.estimateMs, this.#finishes) : undefined,
      othersRunning: () => this.#running > 0 || (!this.#stopped && this.#unstarted > 0),
      emit: scope.emit,
      timed: (ms: number) => roundTrips.add(ms),
    };
    this.#commits = new StepQueue<Item<Message, RC>>({
      ...shared,
      step: "commit",
      retries: settings.commitRetries,
      run: (items) => {
        const keys = items.map((item) => item.key as string);
        const fingerprints = items.map((item) => item.fingerprint);
        const many = store.rememberMany === undefined ? undefined : () => (store.rememberMany as NonNullable<typeof store.rememberMany>).call(store, keys, fingerprints);
        return voidStep(keys.length, many, (i) => store.remember(keys[i] as string, fingerprints[i]));
      },
    });
    this.#releases = new StepQueue<ClaimRef>({
      ...shared,
      step: "release",
      // A failed release only means the redelivery waits for the lease to end: reported, not retried.
      retries: 0,
      run: (claims) => {
        const claiming = store as ClaimingStore;
        const many = claiming.releaseMany === undefined ? undefined : () => (claiming.releaseMany as NonNullable<ClaimingStore["releaseMany"]>).call(claiming, claims);
        return voidStep(claims.length, many, (i) => claiming.release((claims[i] as ClaimRef).id, (claims[i] as ClaimRef).token));
      },
    });
  }

  async process(): Promise<MessageResult[]> {
    const settings = this.#settings;
    const items = this.#items;
    const answerAt = this.#run.deadline === undefined ? undefined : this.#run.deadline - settings.deadlineMarginMs;
    // Only a user's asynchronous fingerprint function is awaited; the default is synchronous.
    const fingerprinting = fingerprintAll(settings, items);
    if (fingerprinting !== undefined) await fingerprinting;
    const gated = markCopiesAndBlocked(items);
    let groupedCopies = false;
    for (const item of items) {
      if (item.firstCopy !== undefined) {
        this.#copiesOf(item.firstCopy).push(item);
        if (item.delivery.group !== undefined) groupedCopies = true;
      } else this.#unstarted += 1;
    }
    for (const item of items) if (item.result !== undefined) this.#finish(item, item.result);

    if (answerAt !== undefined && Date.now() >= answerAt) {
      // No time to claim and run anything: every delivery goes back to the queue untouched.
      this.#stopped = true;
    } else {
      const asked = performance.now();
      await gate(settings, this.#scope.emit ?? noop, gated, this.#leaseMs);
      this.#claimedAt = Date.now();
      if (gated.length > 0) this.#scope.roundTrips.add(performance.now() - asked);
      // Messages outside FIFO groups that the gate already decided are final now.
      for (const item of gated) if (item.delivery.group === undefined) this.#decideAtGate(item);
      // The answer point is checked before every start, not only before the claim step: a slow
      // claim step (throttling, the SDK's retries) must not be followed by handler starts past it.
      const stopped = (): boolean => {
        if (!this.#stopped && answerAt !== undefined && Date.now() >= answerAt) this.#stopped = true;
        return this.#stopped;
      };
      const lanes = runLanes(
        lanesOf(items),
        settings.concurrency,
        stopped,
        (item) => this.#step(item),
        (rest) => this.#block(rest),
        groupedCopies ? (item) => this.#park(item) : undefined,
      );
      if (answerAt === undefined) await lanes;
      else await raceTimer(lanes, answerAt - Date.now());
    }
    this.#stopped = true;
    // Not started: the runnable items a lane never reached, grouped copies included.
    for (const item of items) {
      if (!item.reported && item.stage === "waiting" && (item.firstCopy === undefined || item.delivery.group !== undefined)) this.#notStarted(item);
    }

    // Commits and releases still queued or in flight: wait for them (until just before the deadline).
    if (!this.#commits.idle || !this.#releases.idle) {
      const flushed = Promise.all([this.#commits.drain(), this.#releases.drain()]);
      if (this.#run.deadline === undefined) await flushed;
      else await raceTimer(flushed, this.#run.deadline - settings.deadlineMarginMs / 4 - Date.now());
    }

    this.#answered = true;
    const results = new Array<MessageResult>(items.length);
    let pending = 0;
    for (let i = 0; i < items.length; i += 1) {
      const item = items[i] as Item<Message, RC>;
      if (!item.reported) {
        if (item.stage === "finished") {
          // Its handler succeeded and its commit is still in flight: acknowledged (commitPending).
          this.#finish(item, commitPending(item.dedupe, item.key));
          item.settledEarly = true;
        } else {
          // Still running at the deadline: keep the claim, do not ack; its real outcome follows, late.
          const leaseLeft = this.#leaseMs === undefined ? 0 : this.#leaseMs - (Date.now() - this.#claimedAt);
          this.#finish(item, stillRunning(item.dedupe, item.key, leaseLeft));
          pending += 1;
        }
      }
      results[i] = item.result as MessageResult;
    }
    // Said here, synchronously: no late result can be reported before it.
    this.#scope.emit?.({ type: "batch-end", size: items.length, durationMs: Date.now() - this.#scope.startedAt, pending });
    return results;
  }

  #copiesOf(index: number): Item<Message, RC>[] {
    this.#copies ??= new Map();
    let copies = this.#copies.get(index);
    if (copies === undefined) {
      copies = [];
      this.#copies.set(index, copies);
    }
    return copies;
  }

  /**
   * A grouped copy holds its lane until its first copy (an earlier item: in another lane, earlier
   * in this one, or decided at the gate) is final: the copy's own result (`copyOf`, given when its
   * lane steps it) says whether the lane goes on. Not sooner, as a lane goes on past its own item
   * whose commit is in flight: a copy whose payload differs is a conflict even when its first copy
   * ran. Undefined: step it now.
   */
  #park(item: Item<Message, RC>): Promise<void> | undefined {
    if (item.firstCopy === undefined || item.reported || this.#items[item.firstCopy]?.reported) return undefined;
    this.#waits ??= new Map();
    let wait = this.#waits.get(item.firstCopy);
    if (wait === undefined) {
      let wake = noop;
      const promise = new Promise<void>((resolve) => (wake = resolve));
      wait = { promise, wake };
      this.#waits.set(item.firstCopy, wait);
    }
    return wait.promise;
  }

  /** `item` is final: the lanes parked on its grouped copies go on (each copy is decided when its lane steps it). */
  #wake(item: Item<Message, RC>): void {
    this.#waits?.get(item.index)?.wake();
  }

  /** Applies the gate's verdict when it is a stop; true when the item is final. */
  #decideAtGate(item: Item<Message, RC>): boolean {
    if (item.reported) return true;
    if (item.gate === undefined) return false;
    const step = afterGate(item.gate, this.#settings.policy, item.key, item.fingerprint);
    if (step.next === "stop") {
      item.dedupe = step.result.dedupe;
      this.#finish(item, step.result);
      return true;
    }
    item.dedupe = step.dedupe;
    return false;
  }

  /**
   * One lane step: decide, run, and queue the commit or release. True when the lane may go on —
   * at once when the gate decided it, else once the handler returned (no async frame of its own:
   * the handler's run continues straight into `#afterRun`).
   */
  #step(item: Item<Message, RC>): boolean | Promise<boolean> {
    if (item.firstCopy !== undefined) return this.#stepCopy(item, this.#items[item.firstCopy] as Item<Message, RC>);
    if (this.#decideAtGate(item)) return (item.result as MessageResult).ack;
    if (item.gate === undefined) return false;
    item.stage = "running";
    this.#running += 1;
    this.#unstarted -= 1;
    if (this.#settings.transactional && item.token !== undefined) return this.#transact(item);
    return invoke(this.#settings.handle, this.#scope.intercept, item).then((outcome) => this.#afterRun(item, outcome));
  }

  /** A grouped copy, reached in its lane once its first copy is final: it takes that fate (`copyOf`). */
  #stepCopy(copy: Item<Message, RC>, first: Item<Message, RC>): boolean {
    if (!copy.reported) this.#finish(copy, this.#copyResult(first, copy));
    return (copy.result as MessageResult).ack;
  }

  #copyResult(first: Item<Message, RC>, copy: Item<Message, RC>): MessageResult {
    return copyOf(first.result as MessageResult, this.#settings.policy, { first: first.fingerprint, copy: copy.fingerprint, stored: storedFingerprint(first) });
  }

  /** The handler returned (or threw): queue the commit, or the release and the final result. */
  #afterRun(item: Item<Message, RC>, outcome: RunOutcome): boolean {
    this.#ran(item);
    const next = afterRun(outcome, item.dedupe, item.key, item.token !== undefined);
    if (next.next === "commit") {
      this.#commits.enqueue(item, this.#committed);
      this.#nudge();
      return true;
    }
    if (next.next === "release") this.#release(item);
    this.#nudge();
    this.#finish(item, next.result, this.#answered);
    return false;
  }

  /** A commit step answered for `item`: its result is final. */
  readonly #committed = (item: Item<Message, RC>, error: unknown): void => {
    this.#finish(item, afterCommit(error, item.dedupe, item.key as string), this.#answered);
  };

  /** A handler returned (or threw): one fewer running, and its finish time for the linger. */
  #ran(item: Item<Message, RC>): void {
    this.#running -= 1;
    item.stage = "finished";
    const finishes = this.#finishes;
    finishes.count += 1;
    finishes.previous = finishes.last;
    finishes.last = Date.now();
  }

  #nudge(): void {
    this.#commits.nudge();
    this.#releases.nudge();
  }

  /** Transactional mode: the handler's writes and the fenced commit, one transaction. */
  async #transact(item: Item<Message, RC>): Promise<boolean> {
    const store = this.#settings.store as TransactionalStore<unknown>;
    const { handle } = this.#settings;
    const { intercept, emit } = this.#scope;
    const key = item.key as string;
    const started = Date.now();
    let outcome: RunOutcome = { ok: true };
    let handlerRan = false;
    try {
      await store.transact({ id: key, token: item.token as string, ...(item.fingerprint === undefined ? {} : { fingerprint: item.fingerprint }) }, async (tx) => {
        // The store took until after the answer to open the transaction (a pool wait, a slow BEGIN):
        // too late to start the handler; the transaction rolls back and the claim is released.
        if (this.#answered) throw new DeadlineExceededError("not started");
        handlerRan = true;
        const run = await invoke(handle, intercept, item, { tx });
        if (!run.ok) throw run.error;
      });
    } catch (thrown) {
      outcome = { ok: false, error: thrown };
    }
    emit?.({ type: "store-step", step: "transact", ids: 1, durationMs: Date.now() - started, ok: outcome.ok });
    // The store could not run or end the transaction (not the handler's failure, nor a lost fence): logged at error, counted in StoreErrors.
    if (!outcome.ok && outcome.error instanceof StoreUnavailableError) emit?.({ type: "store-error", step: "transact", ids: 1, error: outcome.error });
    this.#ran(item);
    const next = afterTransaction(outcome, key, handlerRan);
    if (next.next === "release") this.#release(item);
    this.#nudge();
    this.#finish(item, next.result, this.#answered);
    return next.result.ack;
  }

  #release(item: Item<Message, RC>): void {
    if (item.token === undefined) return;
    this.#releases.enqueue({ id: item.key as string, token: item.token }, noop);
  }

  #block(rest: readonly Item<Message, RC>[]): void {
    for (const item of rest) {
      // A copy in the group's tail is blocked too, whatever its first copy's fate: FIFO answers
      // everything after a group's first failure as not done (SQS asks for it; a copy holds no claim).
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
    if (item.reported && (!late || item.settledEarly === true)) return;
    if (late && !item.reported) late = false;
    if (!item.reported && item.stage === "waiting" && item.firstCopy === undefined) this.#unstarted -= 1;
    item.reported = true;
    item.result = result;
    item.stage = "finished";
    this.#wake(item);
    const emit = this.#scope.emit;
    if (emit !== undefined) {
      const event: { -readonly [K in keyof ResultEvent]: ResultEvent[K] } = { type: "result", index: item.index, result, attempts: item.attempts };
      if (item.delivery.messageId !== undefined) event.messageId = item.delivery.messageId;
      if (item.handlerMs !== undefined) event.handlerMs = item.handlerMs;
      if (late) event.late = true;
      emit(event);
    }
    if (late) return;
    const onResult = this.#run.onResult;
    if (onResult !== undefined) {
      try {
        onResult(item.index, result);
      } catch {
        // The adapter's callback must never change an outcome.
      }
    }
    // Ungrouped copies are in no lane: final with their first copy. Grouped ones wait for their lane.
    const copies = this.#copies?.get(item.index);
    if (copies === undefined) return;
    for (const copy of copies) if (copy.delivery.group === undefined) this.#finish(copy, this.#copyResult(item, copy));
  }
}

type ResultEvent = Extract<EngineEvent, { type: "result" }>;
