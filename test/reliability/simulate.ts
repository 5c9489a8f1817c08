/**
 * A seeded, simulated at-least-once broker for the reliability suite.
 *
 * Messages (each produced 1..maxCopies times) sit in a queue with a visibility timeout.
 * Consumers take batches and run them through the batch engine over a real store. Batches
 * can crash at three points — before the effect, after the effect but before the commit,
 * after the commit but before the ack — handlers can fail, the store can fail (see faults.ts)
 * or go down entirely for a while. Unacknowledged deliveries reappear when their visibility
 * timeout ends, as SQS does.
 *
 * Two faults of the window (issue 9): the invocation KILLED at a random moment mid-batch (no
 * answer comes back, nothing of the batch is acked, every delivery reappears after the visibility
 * timeout; store calls not yet sent never happen), and one handler that HANGS past the
 * invocation's deadline (the engine gets the deadline, as `sqsHandler` passes it; the hung handler
 * never finishes — Lambda freezes or kills it). For kills, the report counts the effects repeated
 * per kill next to the handlers that were running, and the effects whose commit was in flight,
 * at the kill moment; for hangs, the effects repeated and the records returned to the queue.
 *
 * Real faults of a backend (a restart, a failover) ride the outage hook: `outage.begin` / `end`
 * take the backend down and bring it back, `outage.prelude` runs before it goes down (e.g. cutting a
 * replica's link so that the next commits reach the primary alone). Consumers can each have their
 * own store (`backends`, round robin): one store per consumer clock, on one shared table.
 *
 * Verdict per run: no id is lost (every id's effect ran), and an id's effect runs more than
 * once ONLY in the window no store can close — a crash after the effect and before the commit,
 * or a commit that failed after the effect — and those are counted, never hidden. A fault that
 * loses what the store acknowledged (an asynchronous replica promoted without the primary's last
 * claims and commits) names those ids (`explainedRepeats`): their repeats are counted under the
 * fault's own labels, never hidden among the others.
 */
import type { Store } from "../../src/contract.js";
import type { MessageResult } from "../../src/decision.js";
import { BatchEngine } from "../../src/engine/index.js";
import { DEFAULT_DEADLINE_MARGIN_MS } from "../../src/engine/settings.js";
import { DeadlineExceededError, StoreUnavailableError } from "../../src/errors.js";
import { type CrashRates, type WindowReport, aroundCalls, commonReport, countEffects, countKill, crashPoint, drawFault, emptyWindow, envelope, killable, never, runDeadlineMs, shuffle, sleep } from "./broker-parts.js";
import type { FaultSwitch } from "./faults.js";

export type { WindowReport } from "./broker-parts.js";

export interface SimulationOptions {
  store: string;
  faultMix: string;
  /** The store under test, already wrapped with faults when the mix asks for them. */
  backend: Store;
  /**
   * One store per consumer, used round robin (consumer i takes `backends[i % length]`) in place of
   * `backend`: e.g. consumers whose clocks differ, each with its own store on one shared table.
   */
  backends?: readonly Store[];
  faults?: FaultSwitch;
  random: () => number;
  messages: number;
  /** Each message is produced 1..maxCopies times. */
  maxCopies?: number;
  batchSize?: number;
  consumers?: number;
  /** Lease per batch. Must outlast a batch, as the runtime wrappers make it. */
  leaseMs?: number;
  /** When an unacknowledged delivery reappears. */
  visibilityMs?: number;
  /** Per batch: probability of each crash point. */
  crash?: CrashRates;
  /** Per handler run: probability that it throws. */
  handlerFailure?: number;
  /**
   * Take the store down when this fraction of ids has taken effect, for `durationMs`: through the
   * fault switch, or for real through `begin` / `end` (e.g. cutting the network to the backend,
   * stopping and restarting the server). The store counts as down from the moment `begin` resolved
   * until `end` is called; `prelude` (optional) runs first, while the store is still up.
   * `holdDeliveries`: consumers take no new batch from the fault's start until the store is down, so
   * a fast run cannot finish its work on a backend that is still shutting down (work remains for the
   * outage and for the recovery after it).
   */
  outage?: {
    atFraction: number;
    durationMs: number;
    holdDeliveries?: boolean;
    prelude?: () => void | Promise<void>;
    begin?: () => void | Promise<void>;
    end?: () => void | Promise<void>;
  };
  /**
   * A fault of part of the backend (e.g. one master of a cluster killed and failed over), run once
   * this fraction of ids has taken effect. Not counted as the store being down: the test judges what
   * was acknowledged meanwhile (`onResult` has each batch's start). Its error fails the run.
   */
  midRun?: { atFraction: number; fault: () => Promise<void> };
  /**
   * Called with every answered delivery's id, result, batch (a sequence number) and the time its
   * batch started; not for batches whose invocation died.
   */
  onResult?: (id: string, result: MessageResult, batch: number, startedAt: number) => void;
  /**
   * Ids whose repeats a fault of the run explains (e.g. commits acknowledged by a primary and lost
   * when its replica was promoted), each set under its label, read once the run is over; an id's
   * repeats go to the first set that has it, counted in `duplicates.byFault`.
   */
  explainedRepeats?: readonly { label: string; ids(): ReadonlySet<string> | Promise<ReadonlySet<string>> }[];
  /** Give up (and report lost ids) after this long (default: runDeadlineMs). */
  deadlineMs?: number;
  /** Per batch: probability that the invocation is killed at a random moment within `killWithinMs` of its start (every batch until the first kill). */
  kill?: number;
  killWithinMs?: number;
  /** Per batch: probability that one of its handlers hangs past the invocation's deadline (every batch until the first hang). */
  hang?: number;
  /** The invocation's time limit (ms): the deadline the engine gets. Default: none. */
  invocationMs?: number;
  /** Whether the engine is told the deadline (default true); false shows what happens without the guard. */
  deadlineGuard?: boolean;
  /** Margin before the deadline at which the engine answers. Default: the engine's. */
  deadlineMarginMs?: number;
  /** Each handler run takes a random time in [min, max] ms before its effect. Default [0, 0]. */
  handlerMs?: readonly [number, number];
  /**
   * Transactional mode: the effect is a row the handler writes through `ctx.tx`, committed with the
   * id in one transaction, and effects are COUNTED FROM THE DATABASE at the end. A crash after the
   * effect is the handler dying inside the open transaction (it throws, so the store rolls back, as
   * a killed connection would).
   */
  transactional?: {
    write(id: string, tx: unknown): Promise<void>;
    count(ids: readonly string[]): Promise<Map<string, number>>;
  };
}

export interface SimulationReport {
  store: string;
  faultMix: string;
  messages: number;
  deliveries: number;
  effects: number;
  lost: number;
  /** Extra effects beyond one per id, by cause (`byFault`: per label, ids the run's `explainedRepeats` named). */
  duplicates: {
    crashWindow: number;
    commitFailed: number;
    byFault?: Record<string, number>;
    /**
     * Repeats of ids a run of which outlived its claim: its effect ran, or its commit answered, more
     * than `leaseMs` after the claim was sent (a stalled run: here the test process's event loop held
     * up, in Lambda a frozen environment resumed), so the lease could end first and a redelivery claim
     * the id again. A lease shorter than a run is the documented limit of a lease, not a fault of the kit.
     */
    leaseOutlived?: number;
    unexplained: number;
    /** For each id repeated without a known cause, what happened to it (claims, effects, results, with times). */
    unexplainedIds?: Record<string, string[]>;
  };
  crashes: number;
  /**
   * Deliveries acknowledged as `ran` or `duplicate` by a batch that began and ended while the store
   * was down (must be 0: either needs the store's answer). A `commit-failed` ack is allowed.
   */
  ackedDuringOutage: number;
  window: WindowReport;
  storeFaults: Record<string, number>;
  /** Deliveries the engine reported as not run because the store could not answer. */
  storeUnavailable: number;
  /**
   * With an outage: from its end (the store back) to the first delivery acknowledged as `ran` by a
   * batch that started after it — the recovery, as the consumers saw it.
   */
  recoveryMs?: number;
  elapsedMs: number;
}

interface QueuedDelivery {
  id: string;
  body: string;
  receiveCount: number;
  visibleAt: number;
}

export async function simulate(options: SimulationOptions): Promise<SimulationReport> {
  const random = options.random;
  const batchSize = options.batchSize ?? 10;
  const consumers = options.consumers ?? 4;
  const leaseMs = options.leaseMs ?? 2_000;
  const visibilityMs = options.visibilityMs ?? Math.round(leaseMs * 1.25);
  const handlerFailure = options.handlerFailure ?? 0;
  const deadline = Date.now() + runDeadlineMs(options.messages, options.deadlineMs);

  const ids: string[] = [];
  const queue: QueuedDelivery[] = [];
  const tag = random().toString(36).slice(2, 8);
  for (let n = 0; n < options.messages; n += 1) {
    const id = `rel-${tag}-${n}`;
    ids.push(id);
    const copies = 1 + Math.floor(random() * (options.maxCopies ?? 3));
    for (let c = 0; c < copies; c += 1) queue.push({ id, body: envelope(id, n, "reliability"), receiveCount: 1, visibleAt: 0 });
  }
  shuffle(random, queue);

  const effects = new Map<string, number>();
  /** Ids whose handler did its effect at least once (in transactional mode: wrote it; the database has the truth). */
  const progressed = new Set<string>();
  /** Ids whose effect ran and whose commit never happened: a crash between the two. */
  const crashWindow = new Set<string>();
  /** Ids acknowledged as commit-failed: the effect ran, the commit did not land. */
  const commitFailed = new Set<string>();
  const window = emptyWindow();
  /** Ids exposed by a kill (effect done, commit not landed at the kill) and ids of hung batches. */
  const killWindow = new Set<string>();
  const hungBatchIds = new Set<string>();
  /** Per id: when each claim of it was sent, its effects and its results (for a repeat nothing explains). */
  const history = new Map<string, string[]>();
  const note = (id: string, event: string) => {
    const events = history.get(id);
    if (events === undefined) history.set(id, [event]);
    else events.push(event);
  };
  /** Per id: the batch of its first effect and when that batch sent the claim it ran under. */
  const firstRun = new Map<string, { batch: number; claimSentAt: number }>();
  /** Ids a run of which had its effect, or its first run's commit answered, more than `leaseMs` after its claim was sent. */
  const leaseOutlived = new Set<string>();
  let deliveries = 0;
  let batches = 0;
  let crashes = 0;
  let ackedDuringOutage = 0;
  let storeUnavailable = 0;
  let outageDone = options.outage === undefined;
  let outageEndedAt: number | undefined;
  let recoveryMs: number | undefined;

  const take = (): QueuedDelivery[] => {
    const now = Date.now();
    const batch: QueuedDelivery[] = [];
    for (let i = 0; i < queue.length && batch.length < batchSize; ) {
      if ((queue[i] as QueuedDelivery).visibleAt <= now) batch.push(...queue.splice(i, 1));
      else i += 1;
    }
    return batch;
  };
  const giveBack = (delivery: QueuedDelivery) => {
    queue.push({ ...delivery, receiveCount: delivery.receiveCount + 1, visibleAt: Date.now() + visibilityMs });
  };

  let outageActive = false;
  /** From the fault's start until the store is down, with `outage.holdDeliveries`: no new batch is taken. */
  let outageHolding = false;
  const maybeOutage = async () => {
    const outage = options.outage;
    if (outageDone || outage === undefined) return;
    if (progressed.size < outage.atFraction * ids.length) return;
    outageDone = true;
    outageHolding = outage.holdDeliveries === true;
    if (outage.prelude) await outage.prelude();
    // Marked down once the backend is down for sure (a stopping server may still answer meanwhile).
    if (outage.begin) await outage.begin();
    else if (options.faults) options.faults.down = true;
    outageActive = true;
    outageHolding = false;
    await sleep(outage.durationMs);
    // Marked over before the store comes back, so no answer of the healed store counts as "while down".
    outageActive = false;
    if (outage.end) await outage.end();
    else if (options.faults) options.faults.down = false;
    outageEndedAt = Date.now();
  };

  let midRunDone = options.midRun === undefined;
  /** The mid-run fault, settled to its error (or undefined), so that it never rejects unheard. */
  let midRunFault: Promise<unknown> | undefined;
  const maybeMidRun = () => {
    const midRun = options.midRun;
    if (midRunDone || midRun === undefined || progressed.size < midRun.atFraction * ids.length) return;
    midRunDone = true;
    midRunFault = midRun.fault().then(
      () => undefined,
      (error: unknown) => error ?? new Error("the mid-run fault failed"),
    );
  };

  const consumer = async (index: number) => {
    const ownBackend = options.backends === undefined || options.backends.length === 0 ? options.backend : (options.backends[index % options.backends.length] as Store);
    while (Date.now() < deadline) {
      void maybeOutage();
      maybeMidRun();
      if (outageHolding) {
        await sleep(5);
        continue;
      }
      const batch = take();
      if (batch.length === 0) {
        if (queue.length === 0) return;
        await sleep(5);
        continue;
      }
      deliveries += batch.length;
      batches += 1;
      const batchNumber = batches;
      const startedDown = outageActive;
      const startedAt = Date.now();
      const point = crashPoint(random, options.crash);
      let died: () => void = () => {};
      const death = new Promise<"died">((resolve) => {
        died = () => resolve("died");
      });
      // The kill fault: at a random moment the process is gone — no more effects, no more store calls.
      let killed = false;
      const killAt = drawFault(random, options.kill, window.kills) ? random() * (options.killWithinMs ?? 50) : undefined;
      const hangIndex = drawFault(random, options.hang, window.hangs) ? Math.floor(random() * batch.length) : undefined;
      const running = new Set<string>();
      let hungStarted = false;
      const committing = new Set<string>();
      const [minMs, maxMs] = options.handlerMs ?? [0, 0];
      const claimSentAt = new Map<string, number>();
      const steps: StepTimes = { pending: 0 };
      const stall = hangIndex === undefined ? undefined : watchStalls();
      const sendsClaims = (ids: readonly string[]) => {
        const at = Date.now();
        for (const id of ids) {
          claimSentAt.set(id, at);
          note(id, `t=${at - started} batch ${batchNumber} (consumer ${index}) claims`);
        }
      };
      // Killable when the process can die mid-batch: a kill fault, or the invocation's limit.
      const backend = withStepsSeen(killAt === undefined && options.invocationMs === undefined ? ownBackend : killable(ownBackend, () => killed), sendsClaims, steps);
      const tx = options.transactional;
      const engine = new BatchEngine(backend, async (_message, context) => {
        const id = context.key as string;
        if (point === "before-effect") {
          died();
          // In transactional mode the handler holds an open transaction (a pooled connection): a dead
          // process's connection closes and the database rolls it back, so end it here too, or the
          // abandoned transactions of a long run would drain the pool.
          if (tx) throw new Error("crashed (simulated) before the effect: the transaction dies with the process");
          return never;
        }
        running.add(id);
        if (hangIndex !== undefined && batch[hangIndex]?.id === id) {
          hungStarted = true;
          // In transactional mode the hung handler holds an open transaction (a connection): the
          // kill at the invocation's limit ends it, and the database rolls it back.
          if (tx && options.invocationMs !== undefined) {
            await sleep(options.invocationMs);
            throw new Error("hung handler killed with its invocation (simulated): its transaction rolls back");
          }
          return never;
        }
        const ms = minMs + random() * (maxMs - minMs);
        if (ms > 0) await sleep(ms);
        if (killed) {
          // A killed process never returns; in transactional mode its open transaction dies with it.
          if (tx) throw new Error("killed (simulated): the transaction dies with the process");
          return never;
        }
        running.delete(id);
        if (random() < handlerFailure) throw new Error("handler failed (scripted)");
        if (tx) await tx.write(id, context.tx);
        else effects.set(id, (effects.get(id) ?? 0) + 1);
        const claimedAt = claimSentAt.get(id) ?? startedAt;
        if (!firstRun.has(id)) firstRun.set(id, { batch: batchNumber, claimSentAt: claimedAt });
        // An effect after its claim's lease ended: the run outlived the lease (a fresh-clone run saw the
        // whole process stall ~2 s: 20 ms handlers' effects landed 2.16 s after their 1.5 s leases were taken).
        if (Date.now() - claimedAt > leaseMs) leaseOutlived.add(id);
        note(id, `t=${Date.now() - started} batch ${batchNumber} effect`);
        progressed.add(id);
        committing.add(id);
        if (point === "after-effect") {
          crashWindow.add(id);
          died();
          if (tx) throw new Error("crashed (simulated) after the effect, before the commit");
          return never;
        }
        return undefined;
      }, { ...(options.deadlineMarginMs === undefined ? {} : { deadlineMarginMs: options.deadlineMarginMs }), ...(tx ? { transactional: true } : {}) });
      const run = engine.process(batch.map((d) => ({ body: d.body, redeliveries: d.receiveCount - 1, context: {} })), {
        leaseMs,
        ...(options.invocationMs === undefined || options.deadlineGuard === false ? {} : { deadline: Date.now() + options.invocationMs }),
        onResult: (i, result) => {
          const id = (batch[i] as QueuedDelivery).id;
          note(id, `t=${Date.now() - started} batch ${batchNumber} ${result.status}${killed ? " (after the kill)" : ""}`);
          const first = firstRun.get(id);
          if (result.status === "ran" && first?.batch === batchNumber && Date.now() - first.claimSentAt > leaseMs) leaseOutlived.add(id);
          if (result.status === "ran" || result.status === "commit-failed") committing.delete(id);
        },
      });
      let killTimer: ReturnType<typeof setTimeout> | undefined;
      if (killAt !== undefined) {
        killTimer = setTimeout(() => {
          killed = true;
          countKill(window, { running, committing, batchSize: batch.length }, killWindow);
          died();
        }, killAt);
      }
      // The invocation's hard limit: with a hung handler and no answer by then, Lambda kills it.
      const limit = options.invocationMs === undefined ? never : sleep(options.invocationMs).then(() => "limit" as const);
      const outcome = await Promise.race([run, death, limit]);
      clearTimeout(killTimer);
      const stalledMs = stall?.stop() ?? 0;
      if (outcome === "limit") {
        // Killed at the limit, as the Kafka simulator's invocations are: the process is gone, so the
        // abandoned engine runs no more effects and sends no more store calls (before, it went on in
        // this process, and under a stall its late effects ran again after their lease), and effects
        // whose commit had not landed are the crash window.
        killed = true;
        for (const id of committing) crashWindow.add(id);
      }
      // A hang counts only where the hung handler really started (a copy already done never runs).
      const hung = hangIndex !== undefined && hungStarted;
      const late = hung && options.invocationMs !== undefined && storeOrProcessLate(steps, stalledMs, { startedAt, invocationMs: options.invocationMs, marginMs: options.deadlineMarginMs ?? DEFAULT_DEADLINE_MARGIN_MS, handlerMs: maxMs });
      if (hung) {
        window.hangs += 1;
        if (late) window.lateHangs += 1;
        for (const d of batch) hungBatchIds.add(d.id);
      }
      if (outcome === "died" || outcome === "limit" || point === "after-commit") {
        // The process is gone: nothing in this batch is acknowledged. (A dead engine's pending
        // promise is simply abandoned, as a killed process abandons its work.)
        crashes += 1;
        if (hung) window.returnedByHang += batch.length;
        if (late) window.returnedByLateHangs += batch.length;
        batch.forEach(giveBack);
        continue;
      }
      const results: MessageResult[] = outcome;
      if (hung) {
        const returned = results.filter((r) => !r.ack && r.error instanceof DeadlineExceededError).length;
        window.returnedByHang += returned;
        if (late) window.returnedByLateHangs += returned;
      }
      results.forEach((result, i) => {
        const delivery = batch[i] as QueuedDelivery;
        options.onResult?.(delivery.id, result, batchNumber, startedAt);
        if (recoveryMs === undefined && outageEndedAt !== undefined && startedAt >= outageEndedAt && result.status === "ran") recoveryMs = Date.now() - outageEndedAt;
        if (result.status === "commit-failed") commitFailed.add(delivery.id);
        if (result.status === "failed" && result.error instanceof StoreUnavailableError) storeUnavailable += 1;
        if (result.ack) {
          if (startedDown && outageActive && (result.status === "ran" || result.status === "duplicate")) ackedDuringOutage += 1;
          return;
        }
        giveBack(delivery);
      });
    }
  };

  const started = Date.now();
  await Promise.all(Array.from({ length: consumers }, (_, index) => consumer(index)));
  // A fault that outlived the queue still ends inside the run; its error fails the run.
  const midRunError = await midRunFault;
  if (midRunError !== undefined) throw midRunError;

  if (options.transactional) {
    // The truth is in the database: the rows the handlers' committed transactions wrote.
    effects.clear();
    for (const [id, n] of await options.transactional.count(ids)) effects.set(id, n);
    crashWindow.clear();
    killWindow.clear();
  }
  const explained = await Promise.all((options.explainedRepeats ?? []).map(async ({ label, ids: named }) => ({ label, ids: await named() })));
  const byFault: Record<string, number> = Object.fromEntries(explained.map(({ label }) => [label, 0]));
  const duplicates: SimulationReport["duplicates"] = { crashWindow: 0, commitFailed: 0, ...(explained.length === 0 ? {} : { byFault }), unexplained: 0 };
  const unexplainedIds: Record<string, string[]> = {};
  const counted = countEffects(ids, effects, (id, repeats) => {
    // A repeat of a run that outlived its lease is the lease's limit (counted below), not the hang's.
    if (hungBatchIds.has(id) && !leaseOutlived.has(id)) window.hangRepeats += repeats;
    if (crashWindow.has(id)) duplicates.crashWindow += repeats;
    else if (killWindow.has(id)) {
      duplicates.crashWindow += repeats;
      window.killRepeats += repeats;
    } else if (commitFailed.has(id)) duplicates.commitFailed += repeats;
    else if (leaseOutlived.has(id)) duplicates.leaseOutlived = (duplicates.leaseOutlived ?? 0) + repeats;
    else {
      const fault = explained.find((set) => set.ids.has(id));
      if (fault === undefined) {
        duplicates.unexplained += repeats;
        unexplainedIds[id] = history.get(id) ?? [];
      } else byFault[fault.label] = (byFault[fault.label] ?? 0) + repeats;
    }
  });
  if (duplicates.unexplained > 0) duplicates.unexplainedIds = unexplainedIds;
  return {
    ...commonReport(options, counted, { deliveries, crashes, storeUnavailable, window }, started),
    duplicates,
    ackedDuringOutage,
    ...(recoveryMs === undefined ? {} : { recoveryMs }),
  };
}

/**
 * The window faults' verdicts: a kill repeats at most the effects whose commit was in flight at
 * the kill moment (never the batch), and a hung handler past the deadline repeats nothing and
 * returns (about) only itself to the queue when the engine knows the deadline.
 */
export function windowProblems(report: SimulationReport, guarded = true): string[] {
  const w = report.window;
  const problems: string[] = [];
  if (w.killRepeats > w.committingAtKill) problems.push(`kills repeated ${w.killRepeats} effects, more than the ${w.committingAtKill} committing at the kill moments`);
  if (w.kills > 0 && w.killRepeats >= w.batchAtKill / 2) problems.push(`kills repeated ${w.killRepeats} effects: about the batch (${w.batchAtKill})`);
  if (w.hangRepeats > 0) problems.push(`hangs repeated ${w.hangRepeats} effects`);
  // Judged on the hangs whose store and process kept time: a late claim step or a stalled process
  // returns the batch's unfinished part, which is right (see WindowReport.lateHangs).
  const timely = w.hangs - w.lateHangs;
  const returned = w.returnedByHang - w.returnedByLateHangs;
  if (guarded && timely > 0 && returned > timely * 2) problems.push(`hangs returned ${returned} records for ${timely} hangs (besides ${w.lateHangs} with the store or the process late)`);
  return problems;
}

/** The window faults, one row per run that had any. */
export function formatWindowTable(reports: readonly SimulationReport[]): string {
  const header =
    "| store | fault | batches hit | effects repeated | per hit | handlers running at the kill (mean) | effects committing at the kill (mean) | batch size at the kill (mean) | records returned per hang |";
  const rule = "|:--|:--|--:|--:|--:|--:|--:|--:|--:|";
  const rows = reports
    .filter((r) => r.window.kills > 0 || r.window.hangs > 0)
    .map((r) => {
      const w = r.window;
      const mean = (n: number, d: number) => (d === 0 ? "-" : (n / d).toFixed(2));
      if (w.kills > 0) {
        return `| ${r.store} | ${r.faultMix} | ${w.kills} kills | ${w.killRepeats} | ${mean(w.killRepeats, w.kills)} | ${mean(w.runningAtKill, w.kills)} | ${mean(w.committingAtKill, w.kills)} | ${mean(w.batchAtKill, w.kills)} | - |`;
      }
      const late = w.lateHangs === 0 ? "" : ` (${w.lateHangs} with the store or the process late: ${mean(w.returnedByLateHangs, w.lateHangs)}; the others: ${mean(w.returnedByHang - w.returnedByLateHangs, w.hangs - w.lateHangs)})`;
      return `| ${r.store} | ${r.faultMix} | ${w.hangs} hangs | ${w.hangRepeats} | ${mean(w.hangRepeats, w.hangs)} | - | - | - | ${mean(w.returnedByHang, w.hangs)}${late} |`;
    });
  return [header, rule, ...rows].join("\n");
}

export function formatSimulationTable(reports: readonly SimulationReport[]): string {
  const header = "| store | fault mix | messages | deliveries | effects | lost | duplicates (why) | crashes | store faults | acked while down | s |";
  const rule = "|:--|:--|--:|--:|--:|--:|:--|--:|:--|--:|--:|";
  const rows = reports.map((r) => {
    const byFault = Object.entries(r.duplicates.byFault ?? {});
    const dupes = r.duplicates.crashWindow + r.duplicates.commitFailed + (r.duplicates.leaseOutlived ?? 0) + byFault.reduce((sum, [, n]) => sum + n, 0) + r.duplicates.unexplained;
    const why =
      dupes === 0
        ? "0"
        : `${dupes} (${[
            r.duplicates.crashWindow ? `${r.duplicates.crashWindow} crash after effect, before commit` : "",
            r.duplicates.commitFailed ? `${r.duplicates.commitFailed} commit failed` : "",
            r.duplicates.leaseOutlived ? `${r.duplicates.leaseOutlived} lease outlived by a stalled run` : "",
            ...byFault.map(([label, n]) => (n ? `${n} ${label}` : "")),
            r.duplicates.unexplained ? `${r.duplicates.unexplained} UNEXPLAINED` : "",
          ]
            .filter(Boolean)
            .join("; ")})`;
    const faults =
      Object.entries(r.storeFaults)
        .map(([kind, n]) => `${kind} ${n}`)
        .join(", ") || (r.storeUnavailable > 0 ? `${r.storeUnavailable} deliveries refused: store unreachable` : "-");
    return `| ${r.store} | ${r.faultMix} | ${r.messages} | ${r.deliveries} | ${r.effects} | ${r.lost} | ${why} | ${r.crashes} | ${faults} | ${r.ackedDuringOutage} | ${(r.elapsedMs / 1000).toFixed(1)} |`;
  });
  return [header, rule, ...rows].join("\n");
}

/** What a batch's store calls did, for the hang's verdict (`storeOrProcessLate`). */
interface StepTimes {
  /** When the last answer of the gate (claim, claimMany, seen, seenMany, recallMany) came; unset while none has. */
  gateAnsweredAt?: number;
  /** The gate's and the batch steps' calls sent and not answered yet (a transactional handler's `transact` is the handler, not a step). */
  pending: number;
}

const GATE_CALLS = new Set<string | symbol>(["claim", "claimMany", "seen", "seenMany", "recallMany"]);
const STEP_CALLS = new Set<string | symbol>(["remember", "rememberMany", "release", "releaseMany"]);

/**
 * `store`, with `sent(ids)` called as each claim is sent (`claim`, `claimMany`): when a lease began,
 * at the earliest; and the gate's answer time and the calls in flight kept in `times`. Every call
 * goes through as it was.
 */
function withStepsSeen<S extends Store>(store: S, sent: (ids: readonly string[]) => void, times: StepTimes): S {
  return aroundCalls(store, (method, args, call) => {
    if (method === "claim") sent([args[0] as string]);
    else if (method === "claimMany") sent(args[0] as readonly string[]);
    const gate = GATE_CALLS.has(method);
    if (!gate && !STEP_CALLS.has(method)) return call();
    const answered = () => {
      if (gate) times.gateAnsweredAt = Date.now();
    };
    const result = call();
    if (!(result instanceof Promise)) {
      answered();
      return result;
    }
    times.pending += 1;
    return result.finally(() => {
      times.pending -= 1;
      answered();
    });
  });
}

/**
 * The longest the event loop went without running a 10 ms tick, from now until `stop()`: a stall of
 * the whole process (here a loaded CI machine; in Lambda a frozen environment), which no engine timer
 * can answer through.
 */
function watchStalls(): { stop(): number } {
  let last = Date.now();
  let longest = 0;
  const tick = setInterval(() => {
    const now = Date.now();
    longest = Math.max(longest, now - last);
    last = now;
  }, 10);
  return {
    stop() {
      clearInterval(tick);
      return Math.max(longest, Date.now() - last);
    },
  };
}

/**
 * Whether a hung batch's outcome was set by something other than the engine's guard: the claim step
 * answered after `answer point − longest handler` (or never), so the handlers could not all finish
 * before the answer point; a call was still in flight when the batch answered or died, so a commit or
 * release did not land within the flush allowance; or the process stalled longer than that allowance
 * (`marginMs / 4`: the engine flushes until `deadline − marginMs / 4`). The engine then rightly
 * returns the batch's unfinished part; a guard that fails with the store and the process on time is
 * still caught (windowProblems).
 */
function storeOrProcessLate(times: StepTimes, stalledMs: number, at: { startedAt: number; invocationMs: number; marginMs: number; handlerMs: number }): boolean {
  const answerAt = at.startedAt + at.invocationMs - at.marginMs;
  if (times.gateAnsweredAt === undefined || times.gateAnsweredAt > answerAt - at.handlerMs) return true;
  return times.pending > 0 || stalledMs > at.marginMs / 4;
}
