/**
 * One `process` call: the three phases over one batch, with the state they share — the items,
 * the commit and release queues, the running count, the deadline.
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
  copyOf,
  notStarted,
  stillRunning,
} from "../decision.js";
import { GroupBlockedError } from "../errors.js";
import type { EngineEvent, RunInterceptor } from "../events.js";
import { StepQueue } from "./commit.js";
import { decode, fingerprintAll, gate, markCopiesAndBlocked } from "./gate.js";
import { invoke, lanesOf, runLanes } from "./run.js";
import type { EngineSettings } from "./settings.js";
import { batchOrEach, errorsOf, voidMany } from "./store-step.js";
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

interface CommitEntry {
  readonly key: string;
  readonly fingerprint: string | undefined;
}

/** What one batch adds to the engine's settings: where its events go, and its handlers' interceptor. */
export interface BatchScope {
  readonly emit: (event: EngineEvent) => void;
  readonly intercept: RunInterceptor | undefined;
}

/** The state of one `process` call. */
export class BatchRun<Message, RC> {
  readonly #settings: EngineSettings<Message, RC>;
  readonly #scope: BatchScope;
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

  constructor(settings: EngineSettings<Message, RC>, scope: BatchScope, deliveries: readonly Delivery<RC>[], run: ProcessOptions) {
    this.#settings = settings;
    this.#scope = scope;
    this.#run = run;
    this.#leaseMs = run.leaseMs ?? settings.leaseMs;
    this.#items = deliveries.map((delivery, index) => decode(settings, delivery, index));
    const store = settings.store;
    // Worth lingering for: handlers running, or still to start (a pool slot frees up in a moment).
    const othersRunning = () =>
      this.#running > 0 || (!this.#stopped && this.#items.some((item) => item.stage === "waiting" && !item.reported && item.firstCopy === undefined));
    this.#commits = new StepQueue<CommitEntry>({
      step: "commit",
      retries: settings.commitRetries,
      lingerMs: settings.commitLingerMs,
      othersRunning,
      emit: scope.emit,
      run: async (entries) => {
        const keys = entries.map((entry) => entry.key);
        const fingerprints = entries.map((entry) => entry.fingerprint);
        const many = voidMany(keys.length, store.rememberMany === undefined ? undefined : () => (store.rememberMany as NonNullable<typeof store.rememberMany>).call(store, keys, fingerprints));
        return errorsOf(await batchOrEach("rememberMany", keys.length, many, (i) => store.remember(keys[i] as string, fingerprints[i])));
      },
    });
    this.#releases = new StepQueue<ClaimRef>({
      step: "release",
      // A failed release only means the redelivery waits for the lease to end: reported, not retried.
      retries: 0,
      lingerMs: settings.commitLingerMs,
      othersRunning,
      emit: scope.emit,
      run: async (claims) => {
        const claiming = store as ClaimingStore;
        const many = voidMany(claims.length, claiming.releaseMany === undefined ? undefined : () => (claiming.releaseMany as NonNullable<ClaimingStore["releaseMany"]>).call(claiming, claims));
        return errorsOf(await batchOrEach("releaseMany", claims.length, many, (i) => claiming.release((claims[i] as ClaimRef).id, (claims[i] as ClaimRef).token)));
      },
    });
  }

  /** Handlers still running when the batch was answered. */
  get pending(): number {
    return this.#running;
  }

  async process(): Promise<MessageResult[]> {
    const settings = this.#settings;
    const answerAt = this.#run.deadline === undefined ? undefined : this.#run.deadline - settings.deadlineMarginMs;
    await fingerprintAll(settings, this.#items);
    const gated = markCopiesAndBlocked(this.#items);
    for (const item of this.#items) if (item.firstCopy !== undefined) this.#copiesOf(item.firstCopy).push(item);
    for (const item of this.#items) if (item.result !== undefined) this.#finish(item, item.result);

    if (answerAt !== undefined && Date.now() >= answerAt) {
      // No time to claim and run anything: every delivery goes back to the queue untouched.
      this.#stopped = true;
    } else {
      await gate(settings, this.#scope.emit, gated, this.#leaseMs);
      this.#claimedAt = Date.now();
      // Messages outside FIFO groups that the gate already decided are final now.
      for (const item of gated) if (item.delivery.group === undefined) this.#decideAtGate(item);
      const lanes = runLanes(
        lanesOf(this.#items),
        settings.concurrency,
        () => this.#stopped,
        (item) => this.#step(item),
        (rest) => this.#block(rest),
      );
      if (answerAt === undefined) await lanes;
      else await raceTimer(lanes, answerAt - Date.now());
    }
    this.#stopped = true;
    for (const item of this.#items) if (!item.reported && item.stage === "waiting" && item.firstCopy === undefined) this.#notStarted(item);

    const flushed = Promise.all([this.#commits.drain(), this.#releases.drain()]);
    if (this.#run.deadline === undefined) await flushed;
    else await raceTimer(flushed, this.#run.deadline - settings.deadlineMarginMs / 4 - Date.now());

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
    const step = afterGate(item.gate, this.#settings.policy, item.key, item.fingerprint);
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
    if (this.#settings.transactional && item.token !== undefined) return this.#transact(item);
    const outcome = await invoke(this.#settings.handle, this.#scope.intercept, item);
    this.#running -= 1;
    item.stage = "finished";
    const next = afterRun(outcome, item.dedupe, item.key, item.token !== undefined);
    if (next.next === "commit") {
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
    const store = this.#settings.store as TransactionalStore<unknown>;
    const { handle } = this.#settings;
    const { intercept, emit } = this.#scope;
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
    emit({ type: "store-step", step: "transact", ids: 1, durationMs: Date.now() - started, ok: error === undefined });
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
    this.#scope.emit({
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
      this.#finish(copy, copyOf(result, this.#settings.policy, { first: item.fingerprint, copy: copy.fingerprint, stored: storedFingerprint(item) }));
    }
  }
}
