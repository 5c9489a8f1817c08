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
 * Verdict per run: no id is lost (every id's effect ran), and an id's effect runs more than
 * once ONLY in the window no store can close — a crash after the effect and before the commit,
 * or a commit that failed after the effect — and those are counted, never hidden.
 */
import type { Store } from "../../src/contract.js";
import type { MessageResult } from "../../src/decision.js";
import { BatchEngine } from "../../src/engine.js";
import { StoreUnavailableError } from "../../src/errors.js";
import type { FaultSwitch } from "./faults.js";

export interface SimulationOptions {
  store: string;
  faultMix: string;
  /** The store under test, already wrapped with faults when the mix asks for them. */
  backend: Store;
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
  crash?: { beforeEffect?: number; afterEffectBeforeCommit?: number; afterCommitBeforeAck?: number };
  /** Per handler run: probability that it throws. */
  handlerFailure?: number;
  /**
   * Take the store down when this fraction of ids has taken effect, for `durationMs`: through the
   * fault switch, or for real through `begin` / `end` (e.g. cutting the network to the backend).
   */
  outage?: { atFraction: number; durationMs: number; begin?: () => void | Promise<void>; end?: () => void | Promise<void> };
  /** Give up (and report lost ids) after this long. */
  deadlineMs?: number;
}

export interface SimulationReport {
  store: string;
  faultMix: string;
  messages: number;
  deliveries: number;
  effects: number;
  lost: number;
  /** Extra effects beyond one per id, by cause. */
  duplicates: { crashWindow: number; commitFailed: number; unexplained: number };
  crashes: number;
  /**
   * Deliveries acknowledged as `ran` or `duplicate` by a batch that began and ended while the store
   * was down (must be 0: either needs the store's answer). A `commit-failed` ack is allowed.
   */
  ackedDuringOutage: number;
  storeFaults: Record<string, number>;
  /** Deliveries the engine reported as not run because the store could not answer. */
  storeUnavailable: number;
  elapsedMs: number;
}

interface QueuedDelivery {
  id: string;
  body: string;
  receiveCount: number;
  visibleAt: number;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const never = new Promise<never>(() => {});

function envelope(id: string, n: number): string {
  return JSON.stringify({
    job: "urn:babel:reliability:effect",
    trace_id: `trace-${n}`,
    data: { n },
    meta: { id, queue: "reliability", lang: "node", schema_version: 1, created_at: n },
    attempts: 0,
  });
}

export async function simulate(options: SimulationOptions): Promise<SimulationReport> {
  const random = options.random;
  const batchSize = options.batchSize ?? 10;
  const consumers = options.consumers ?? 4;
  const leaseMs = options.leaseMs ?? 2_000;
  const visibilityMs = options.visibilityMs ?? Math.round(leaseMs * 1.25);
  const crash = { beforeEffect: 0, afterEffectBeforeCommit: 0, afterCommitBeforeAck: 0, ...options.crash };
  const handlerFailure = options.handlerFailure ?? 0;
  const deadline = Date.now() + (options.deadlineMs ?? 240_000);

  const ids: string[] = [];
  const queue: QueuedDelivery[] = [];
  const tag = random().toString(36).slice(2, 8);
  for (let n = 0; n < options.messages; n += 1) {
    const id = `rel-${tag}-${n}`;
    ids.push(id);
    const copies = 1 + Math.floor(random() * (options.maxCopies ?? 3));
    for (let c = 0; c < copies; c += 1) queue.push({ id, body: envelope(id, n), receiveCount: 1, visibleAt: 0 });
  }
  for (let i = queue.length - 1; i > 0; i -= 1) {
    const j = Math.floor(random() * (i + 1));
    [queue[i], queue[j]] = [queue[j] as QueuedDelivery, queue[i] as QueuedDelivery];
  }

  const effects = new Map<string, number>();
  /** Ids whose effect ran and whose commit never happened: a crash between the two. */
  const crashWindow = new Set<string>();
  /** Ids acknowledged as commit-failed: the effect ran, the commit did not land. */
  const commitFailed = new Set<string>();
  let deliveries = 0;
  let crashes = 0;
  let ackedDuringOutage = 0;
  let storeUnavailable = 0;
  let outageDone = options.outage === undefined;

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
  const maybeOutage = async () => {
    const outage = options.outage;
    if (outageDone || outage === undefined) return;
    if (effects.size < outage.atFraction * ids.length) return;
    outageDone = true;
    outageActive = true;
    if (outage.begin) await outage.begin();
    else if (options.faults) options.faults.down = true;
    await sleep(outage.durationMs);
    // Marked over before the store comes back, so no answer of the healed store counts as "while down".
    outageActive = false;
    if (outage.end) await outage.end();
    else if (options.faults) options.faults.down = false;
  };

  const consumer = async () => {
    while (Date.now() < deadline) {
      void maybeOutage();
      const batch = take();
      if (batch.length === 0) {
        if (queue.length === 0) return;
        await sleep(5);
        continue;
      }
      deliveries += batch.length;
      const startedDown = outageActive;
      const roll = random();
      const point =
        roll < crash.beforeEffect
          ? "before-effect"
          : roll < crash.beforeEffect + crash.afterEffectBeforeCommit
            ? "after-effect"
            : roll < crash.beforeEffect + crash.afterEffectBeforeCommit + crash.afterCommitBeforeAck
              ? "after-commit"
              : "none";
      let died: () => void = () => {};
      const death = new Promise<"died">((resolve) => {
        died = () => resolve("died");
      });
      const engine = new BatchEngine(options.backend, async (_message, context) => {
        const id = context.key as string;
        if (point === "before-effect") {
          died();
          return never;
        }
        if (random() < handlerFailure) throw new Error("handler failed (scripted)");
        effects.set(id, (effects.get(id) ?? 0) + 1);
        if (point === "after-effect") {
          crashWindow.add(id);
          died();
          return never;
        }
        return undefined;
      });
      const outcome = await Promise.race([engine.process(batch.map((d) => ({ body: d.body, redeliveries: d.receiveCount - 1, context: {} })), { leaseMs }), death]);
      if (outcome === "died" || point === "after-commit") {
        // The process is gone: nothing in this batch is acknowledged. (A dead engine's pending
        // promise is simply abandoned, as a killed process abandons its work.)
        crashes += 1;
        batch.forEach(giveBack);
        continue;
      }
      const results: MessageResult[] = outcome;
      results.forEach((result, i) => {
        const delivery = batch[i] as QueuedDelivery;
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
  await Promise.all(Array.from({ length: consumers }, consumer));

  let lost = 0;
  let total = 0;
  const duplicates = { crashWindow: 0, commitFailed: 0, unexplained: 0 };
  for (const id of ids) {
    const count = effects.get(id) ?? 0;
    total += count;
    if (count === 0) lost += 1;
    if (count <= 1) continue;
    if (crashWindow.has(id)) duplicates.crashWindow += count - 1;
    else if (commitFailed.has(id)) duplicates.commitFailed += count - 1;
    else duplicates.unexplained += count - 1;
  }
  return {
    store: options.store,
    faultMix: options.faultMix,
    messages: ids.length,
    deliveries,
    effects: total,
    lost,
    duplicates,
    crashes,
    ackedDuringOutage,
    storeFaults: { ...(options.faults?.injected ?? {}) },
    storeUnavailable,
    elapsedMs: Date.now() - started,
  };
}

export function formatSimulationTable(reports: readonly SimulationReport[]): string {
  const header = "| store | fault mix | messages | deliveries | effects | lost | duplicates (why) | crashes | store faults | acked while down | s |";
  const rule = "|:--|:--|--:|--:|--:|--:|:--|--:|:--|--:|--:|";
  const rows = reports.map((r) => {
    const dupes = r.duplicates.crashWindow + r.duplicates.commitFailed + r.duplicates.unexplained;
    const why =
      dupes === 0
        ? "0"
        : `${dupes} (${[
            r.duplicates.crashWindow ? `${r.duplicates.crashWindow} crash after effect, before commit` : "",
            r.duplicates.commitFailed ? `${r.duplicates.commitFailed} commit failed` : "",
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
