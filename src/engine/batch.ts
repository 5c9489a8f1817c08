/**
 * One `process` call: the three phases over one batch, with the state they share — the items,
 * the commit and release queues, the running count, the deadline.
 *
 * What this is *not*: option validation (../engine.ts) or a verdict (../decision.ts).
 */
import type { ClaimRef, ClaimingStore, Store, TransactionalStore } from "../contract.js";
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
} from "../decision.js";
import { GroupBlockedError } from "../errors.js";
import type { RunInterceptor } from "../events.js";
import { StepQueue } from "./commit.js";
import { type PhaseDeps, decode, fingerprintAll, gate, markCopiesAndBlocked, settleEach } from "./gate.js";
import { invoke, lanesOf, runLanes } from "./run.js";
import type { Delivery, Handler, Item, ProcessOptions } from "./types.js";

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

/** What a `BatchRun` needs of its engine: the validated options. */
export interface EngineConfig<Message, RC> {
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
export class BatchRun<Message, RC> {
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
    // Worth lingering for: handlers running, or still to start (a pool slot frees up in a moment).
    const othersRunning = () =>
      this.#running > 0 || (!this.#stopped && this.#items.some((item) => item.stage === "waiting" && !item.reported && item.firstCopy === undefined));
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
      else await raceTimer(lanes, answerAt - Date.now());
    }
    this.#stopped = true;
    for (const item of this.#items) if (!item.reported && item.stage === "waiting" && item.firstCopy === undefined) this.#notStarted(item);

    const flushed = Promise.all([this.#commits.drain(), this.#releases.drain()]);
    if (this.#run.deadline === undefined) await flushed;
    else await raceTimer(flushed, this.#run.deadline - this.#engine.marginMs / 4 - Date.now());

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
      this.#finish(copy, copyOf(result, this.#engine.policy, { first: item.fingerprint, copy: copy.fingerprint, stored: storedFingerprint(item) }));
    }
  }
}
