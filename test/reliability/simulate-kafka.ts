/**
 * The reliability suite's simulated broker in Kafka mode: a seeded topic of partitions with offsets,
 * consumed the way Lambda's Kafka event source mapping consumes it, through `kafkaHandler` itself
 * (the partial batch response included) over a real store.
 *
 * The broker:
 * - a topic of `partitions` partitions; each message is produced to the partition its id hashes to
 *   (a keyed producer), 1..maxCopies times (producer retries), copies at later offsets;
 * - a committed offset per partition (the consumer group's); pollers take batches of up to
 *   `batchSize` records from partitions nobody else holds, from each one's committed offset, and
 *   hand them to `kafkaHandler` as an Amazon MSK event;
 * - the answer moves each partition's committed offset: to its LOWEST failed offset when the
 *   partial batch response lists any (Lambda resumes a partition from its first failed record —
 *   the later ones are replayed), else past the batch's last record; a partition that failed waits
 *   `retryDelayMs` before its next batch (Lambda's retry backoff);
 * - a rebalance (probability `rebalance` per batch; every batch until the first): the partitions
 *   are revoked after the answer and before the offsets are committed, so the next owner replays
 *   the whole batch;
 * - crashes at three points (before the effect, after the effect and before its commit, after
 *   the commit and before the answer), a kill at a random moment mid-batch, handler failures and
 *   store faults, as in SQS mode (simulate.ts). A crashed or killed invocation is gone at once: no
 *   handler starts and no store call is sent after that moment, no offset is committed, and its
 *   partitions are retried after `retryDelayMs`; claims it held park the replay until their lease
 *   (the invocation's remaining time + the lease margin) ends. Effects done whose commit had not
 *   landed at that moment are the window, counted as such.
 *
 * Verdict per run: no id lost; an id's effect repeated ONLY in the window no store closes (a crash
 * or kill after the effect and before its commit, a commit that failed, or a commit still in flight
 * when the invocation answered that landed only after the claim's lease ended) — rebalance replays and
 * resumes from a failed offset repeat nothing; within a partition, the first effects of its ids run
 * in offset order; every partial batch response lists, per partition, a suffix of that partition's
 * records in the batch (after its first unacknowledged record, nothing of the partition acked).
 */
import type { MSKRecord } from "aws-lambda";
import type { Store } from "../../src/contract.js";
import type { EngineEvent } from "../../src/engine/index.js";
import { StoreUnavailableError } from "../../src/errors.js";
import { type KafkaBatchResponse, kafkaHandler } from "../../handlers/lambda-kafka.js";
import { kafkaRecord, lambdaContext, mskEvent } from "../../scripts/lambda-events.js";
import { type CrashRates, commonReport, countEffects, countKill, crashPoint, drawFault, emptyWindow, envelope, killable, never, runDeadlineMs, shuffle, sleep } from "./broker-parts.js";
import type { FaultSwitch } from "./faults.js";
import type { SimulationReport } from "./simulate.js";

export interface KafkaSimulationOptions {
  store: string;
  faultMix: string;
  /** The store under test, already wrapped with faults when the mix asks for them. */
  backend: Store;
  faults?: FaultSwitch;
  random: () => number;
  messages: number;
  partitions?: number;
  /** Each message is produced 1..maxCopies times to its partition. */
  maxCopies?: number;
  /** Records per invocation, over one or more partitions. */
  batchSize?: number;
  /** Concurrent pollers (invocations). */
  consumers?: number;
  /** The invocation's remaining time when it starts (ms): the deadline; the lease is this + `leaseMarginMs`. */
  invocationMs?: number;
  leaseMarginMs?: number;
  deadlineMarginMs?: number;
  /** Per batch: probability of each crash point. */
  crash?: CrashRates;
  /** Per handler run: probability that it throws. */
  handlerFailure?: number;
  /** Per batch: probability that a rebalance revokes its partitions before the offsets are committed (every batch until the first). */
  rebalance?: number;
  /** Per batch: probability that the invocation is killed at a random moment within `killWithinMs` of its start (every batch until the first kill). */
  kill?: number;
  killWithinMs?: number;
  /** Each handler run takes a random time in [min, max] ms before its effect. */
  handlerMs?: readonly [number, number];
  /** How long a partition that failed waits before its next batch. */
  retryDelayMs?: number;
  /** Give up (and report lost ids) after this long (default: runDeadlineMs). */
  deadlineMs?: number;
}

/** What Kafka mode adds to a run's report. */
export interface KafkaFigures {
  partitions: number;
  rebalances: number;
  /** Records delivered again because a rebalance revoked their partition before the commit. */
  replayedByRebalance: number;
  /** Partition resumes from a failed offset (a partial batch response listing that partition). */
  resumes: number;
  /** First effects of an id that ran before an earlier offset's first effect in the same partition (must be 0). */
  outOfOrder: number;
  /** Partial batch responses that list, for a partition, anything but a suffix of its records in the batch (must be 0). */
  badResponses: number;
  /** Effects whose commit was still in flight when the invocation answered (the deadline guard answered first). */
  answeredBeforeCommit: number;
  /** Effects repeated because such a commit landed only after the claim's lease had ended (the window, under a slow store). */
  lateCommitRepeats: number;
}

export interface KafkaSimulationReport extends SimulationReport {
  kafka: KafkaFigures;
}

interface LogRecord {
  readonly id: string;
  readonly partition: number;
  readonly offset: number;
  readonly body: string;
}

const TOPIC = "orders";
export async function simulateKafka(options: KafkaSimulationOptions): Promise<KafkaSimulationReport> {
  const random = options.random;
  const partitions = options.partitions ?? 4;
  const batchSize = options.batchSize ?? 10;
  const consumers = options.consumers ?? 3;
  const invocationMs = options.invocationMs ?? 1_500;
  const retryDelayMs = options.retryDelayMs ?? 50;
  const handlerFailure = options.handlerFailure ?? 0;
  const deadline = Date.now() + runDeadlineMs(options.messages, options.deadlineMs);

  // The topic: each id keyed to one partition, copies appended later in the same partition.
  const tag = random().toString(36).slice(2, 8);
  const ids: string[] = [];
  const produce: { id: string; n: number; partition: number }[] = [];
  for (let n = 0; n < options.messages; n += 1) {
    const id = `kafka-${tag}-${n}`;
    ids.push(id);
    const partition = Math.floor(random() * partitions);
    const copies = 1 + Math.floor(random() * (options.maxCopies ?? 2));
    for (let c = 0; c < copies; c += 1) produce.push({ id, n, partition });
  }
  shuffle(random, produce);
  const logs: LogRecord[][] = Array.from({ length: partitions }, () => []);
  for (const { id, n, partition } of produce) {
    const log = logs[partition] as LogRecord[];
    log.push({ id, partition, offset: log.length, body: envelope(id, n, TOPIC) });
  }

  const committed = Array.from({ length: partitions }, () => 0);
  const busy = Array.from({ length: partitions }, () => false);
  const notBefore = Array.from({ length: partitions }, () => 0);

  const effects = new Map<string, number>();
  const crashWindow = new Set<string>();
  const killWindow = new Set<string>();
  const commitFailed = new Set<string>();
  const lateCommit = new Set<string>();
  /** Per partition, the highest offset whose id's first effect ran. */
  const firstEffectHigh = Array.from({ length: partitions }, () => -1);
  const figures: KafkaFigures = { partitions, rebalances: 0, replayedByRebalance: 0, resumes: 0, outOfOrder: 0, badResponses: 0, answeredBeforeCommit: 0, lateCommitRepeats: 0 };
  const window = emptyWindow();
  let deliveries = 0;
  let crashes = 0;
  let storeUnavailable = 0;

  const done = () => logs.every((log, p) => committed[p] === log.length);

  /** Up to batchSize records from free partitions, grouped by partition, each from its committed offset. */
  const take = (): LogRecord[] => {
    const now = Date.now();
    const free = logs.map((_, p) => p).filter((p) => !busy[p] && (notBefore[p] as number) <= now && (committed[p] as number) < (logs[p] as LogRecord[]).length);
    shuffle(random, free);
    const batch: LogRecord[] = [];
    for (const p of free) {
      if (batch.length >= batchSize) break;
      // Lambda's pollers fill a batch from several partitions; cap each so that others get a share.
      const share = Math.max(1, Math.ceil(batchSize / 2));
      const records = (logs[p] as LogRecord[]).slice(committed[p], (committed[p] as number) + Math.min(share, batchSize - batch.length));
      if (records.length === 0) continue;
      busy[p] = true;
      batch.push(...records);
    }
    return batch;
  };

  const consumer = async () => {
    while (Date.now() < deadline && !done()) {
      const batch = take();
      if (batch.length === 0) {
        await sleep(5);
        continue;
      }
      deliveries += batch.length;
      const held = [...new Set(batch.map((record) => record.partition))];
      const point = crashPoint(random, options.crash);
      const running = new Set<string>();
      const committing = new Set<string>();
      // The process is gone at this moment: effects whose commit had not landed are the window.
      let dead = false;
      let died: () => void = () => {};
      const death = new Promise<"died">((resolve) => {
        died = () => {
          if (dead) return;
          dead = true;
          for (const id of committing) crashWindow.add(id);
          resolve("died");
        };
      });
      const killAt = drawFault(random, options.kill, window.kills) ? random() * (options.killWithinMs ?? 50) : undefined;
      const [minMs, maxMs] = options.handlerMs ?? [0, 0];
      const backend = killable(options.backend, () => dead);
      const handler = kafkaHandler({
        store: backend,
        logger: false,
        leaseMarginMs: options.leaseMarginMs ?? 300,
        deadlineMarginMs: options.deadlineMarginMs ?? 400,
        observe: (event: EngineEvent) => {
          if (event.type !== "result") return;
          const record = batch[event.index] as LogRecord;
          if (event.result.status === "ran" || event.result.status === "commit-failed") committing.delete(record.id);
          if (event.result.status === "commit-failed") commitFailed.add(record.id);
          if (event.result.status === "failed" && event.result.error instanceof StoreUnavailableError) storeUnavailable += 1;
        },
        handle: async (_message, ctx) => {
          const id = ctx.key as string;
          if (dead) return never;
          if (point === "before-effect") {
            died();
            return never;
          }
          running.add(id);
          const ms = minMs + random() * (maxMs - minMs);
          if (ms > 0) await sleep(ms);
          if (dead) return never;
          running.delete(id);
          if (random() < handlerFailure) throw new Error("handler failed (scripted)");
          const first = !effects.has(id);
          effects.set(id, (effects.get(id) ?? 0) + 1);
          const p = ctx.record.partition;
          if (first) {
            if (ctx.record.offset < (firstEffectHigh[p] as number)) figures.outOfOrder += 1;
            firstEffectHigh[p] = Math.max(firstEffectHigh[p] as number, ctx.record.offset);
          }
          committing.add(id);
          if (point === "after-effect") {
            died();
            return never;
          }
          return undefined;
        },
      });
      // The batch is already grouped by partition in offset order: kafkaHandler's deliveries follow it, so a result's index is the batch's.
      const records: MSKRecord[] = batch.map((record) => kafkaRecord(record.body, { topic: TOPIC, partition: record.partition, offset: record.offset, headers: { "bq-attempts": "0" } }));
      const run = handler(mskEvent(records), lambdaContext(invocationMs));
      let killTimer: ReturnType<typeof setTimeout> | undefined;
      if (killAt !== undefined) {
        killTimer = setTimeout(() => {
          if (dead) return;
          countKill(window, { running, committing, batchSize: batch.length }, killWindow);
          died();
        }, killAt);
      }
      const limit = sleep(invocationMs).then(() => "died" as const);
      const outcome = await Promise.race([run, death, limit]);
      clearTimeout(killTimer);

      if (outcome === "died" || point === "after-commit") {
        died();
        // A failed invocation: no offset is committed; Lambda retries the batch after its backoff.
        crashes += 1;
        for (const p of held) {
          notBefore[p] = Date.now() + retryDelayMs;
          busy[p] = false;
        }
        continue;
      }
      const response: KafkaBatchResponse = outcome;
      // Effects whose commit had not landed when the invocation answered (the deadline guard answered
      // first): their records go back unacknowledged and the claim holds them for the rest of its
      // lease; if the commit lands later than the lease ends (a slow store), the replay runs them again.
      for (const id of committing) lateCommit.add(id);
      figures.answeredBeforeCommit += committing.size;
      const rebalanced = drawFault(random, options.rebalance, figures.rebalances);
      if (rebalanced) {
        figures.rebalances += 1;
        figures.replayedByRebalance += batch.length;
      }
      for (const p of held) {
        const inBatch = batch.filter((record) => record.partition === p);
        const listed = response.batchItemFailures.filter((f) => f.itemIdentifier.partition === `${TOPIC}-${p}`).map((f) => f.itemIdentifier.offset);
        const lowest = listed.length === 0 ? undefined : Math.min(...listed);
        const suffix = lowest === undefined ? [] : inBatch.filter((record) => record.offset >= lowest).map((record) => record.offset);
        if (listed.length !== suffix.length || listed.some((offset) => !suffix.includes(offset))) figures.badResponses += 1;
        if (!rebalanced) committed[p] = lowest ?? (inBatch[inBatch.length - 1] as LogRecord).offset + 1;
        if (lowest !== undefined) {
          figures.resumes += 1;
          notBefore[p] = Date.now() + retryDelayMs;
        }
        busy[p] = false;
      }
    }
  };

  const started = Date.now();
  await Promise.all(Array.from({ length: consumers }, consumer));

  const duplicates = { crashWindow: 0, commitFailed: 0, unexplained: 0 };
  const counted = countEffects(ids, effects, (id, repeats) => {
    if (killWindow.has(id)) {
      duplicates.crashWindow += repeats;
      window.killRepeats += repeats;
    } else if (crashWindow.has(id)) duplicates.crashWindow += repeats;
    else if (lateCommit.has(id)) {
      duplicates.crashWindow += repeats;
      figures.lateCommitRepeats += repeats;
    } else if (commitFailed.has(id)) duplicates.commitFailed += repeats;
    else duplicates.unexplained += repeats;
  });
  return {
    ...commonReport(options, counted, { deliveries, crashes, storeUnavailable, window }, started),
    duplicates,
    ackedDuringOutage: 0,
    kafka: figures,
  };
}

/** Kafka mode's own figures, one row per run. */
export function formatKafkaTable(reports: readonly KafkaSimulationReport[]): string {
  const header =
    "| store | fault mix | messages | records delivered | effects | lost | repeated (crash window / commit failed / unexplained) | of which: commit landed after the lease | rebalances (records replayed) | resumes from a failed offset | out of order | bad responses | s |";
  const rule = "|:--|:--|--:|--:|--:|--:|:--|--:|--:|--:|--:|--:|--:|";
  const rows = reports.map((r) => {
    const k = r.kafka;
    return `| ${r.store} | ${r.faultMix} | ${r.messages} | ${r.deliveries} | ${r.effects} | ${r.lost} | ${r.duplicates.crashWindow} / ${r.duplicates.commitFailed} / ${r.duplicates.unexplained} | ${k.lateCommitRepeats} | ${k.rebalances} (${k.replayedByRebalance}) | ${k.resumes} | ${k.outOfOrder} | ${k.badResponses} | ${(r.elapsedMs / 1000).toFixed(1)} |`;
  });
  return [header, rule, ...rows].join("\n");
}
