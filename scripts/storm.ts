/**
 * A seeded, in-process at-least-once broker for the demo: a redelivery storm.
 *
 * Every message is produced 1–`maxCopies` times (producer retries, operator replays), the copies
 * are shuffled into one queue, and `consumers` simulated consumers take batches of `batchSize`
 * concurrently. A delivery the consumer does not acknowledge goes back to the queue (a
 * visibility-timeout redelivery) with its receive count raised. The storm ends when the queue is
 * empty, then checks the verdict: every id's effect ran (nothing lost), and ran once.
 *
 * The runtime under test (the batch engine, a Lambda handler, …) sits behind `consume`; the
 * handler reports its effects through `tools.effect`, and draws its scripted failures from
 * `tools.shouldFail` so a run is reproducible from its seed.
 */
import type { EngineEvent, MessageResult } from "../entry/index.js";
import type { DemoReport } from "./demo-report.js";

export interface StormOptions {
  scenario: string;
  /** Distinct meta.ids. Default 10,000. */
  messages?: number;
  /** Each message is produced 1..maxCopies times. Default 5. */
  maxCopies?: number;
  /** Deliveries per batch. Default 10 (SQS's maximum without a batching window). */
  batchSize?: number;
  /** Consumers taking batches concurrently. Default 8. */
  consumers?: number;
  /** Probability that one handler run throws. Default 0.05. */
  failureRate?: number;
  seed?: number;
}

/** One delivery of one copy of a message. */
export interface StormDelivery {
  /** meta.id */
  readonly id: string;
  /** A broker id unique to this copy (SQS messageId). */
  readonly deliveryId: string;
  readonly body: string;
  /** 1 on the first delivery of this copy, then 2, 3, … (SQS ApproximateReceiveCount). */
  readonly receiveCount: number;
}

export interface StormTools {
  /** Call from the handler when the side effect happens. */
  effect(id: string): void;
  /** Whether this handler run should fail (scripted, seeded). */
  shouldFail(): boolean;
  /** Wire into the engine's `observe` option to count parks and suppressed duplicates. */
  observe(event: EngineEvent): void;
  /** Or count results directly when the runtime returns them. */
  record(result: MessageResult): void;
}

/** Acknowledgement per delivery, in order. */
export type StormConsumer = (batch: readonly StormDelivery[]) => Promise<boolean[]>;

/** mulberry32: small, fast, seedable. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function stormEnvelope(id: string, n: number): string {
  return JSON.stringify({
    job: "urn:babel:demo:payment.captured",
    trace_id: `trace-${n}`,
    data: { payment: n, amount_cents: 100 + (n % 900) },
    meta: { id, queue: "payments", lang: "node", schema_version: 1, created_at: 1_760_000_000_000 + n },
    attempts: 0,
  });
}

export async function runStorm(options: StormOptions, build: (tools: StormTools) => StormConsumer | Promise<StormConsumer>): Promise<DemoReport> {
  const messages = options.messages ?? 10_000;
  const maxCopies = options.maxCopies ?? 5;
  const batchSize = options.batchSize ?? 10;
  const consumers = options.consumers ?? 8;
  const failureRate = options.failureRate ?? 0.05;
  const random = seededRandom(options.seed ?? 20261202);

  const effects = new Map<string, number>();
  let duplicatesSuppressed = 0;
  let inFlightParks = 0;
  const record = (result: MessageResult) => {
    if (result.status === "duplicate") duplicatesSuppressed += 1;
    if (result.status === "in-flight") inFlightParks += 1;
  };
  const tools: StormTools = {
    effect: (id) => effects.set(id, (effects.get(id) ?? 0) + 1),
    shouldFail: () => random() < failureRate,
    observe: (event) => {
      if (event.type === "result") record(event.result);
    },
    record,
  };
  const consume = await build(tools);

  const queue: StormDelivery[] = [];
  const ids: string[] = [];
  for (let n = 0; n < messages; n += 1) {
    const id = `pay-${n.toString(36)}-${Math.floor(random() * 1e9).toString(36)}`;
    ids.push(id);
    const body = stormEnvelope(id, n);
    const copies = 1 + Math.floor(random() * maxCopies);
    for (let c = 0; c < copies; c += 1) queue.push({ id, deliveryId: `${id}#${c}`, body, receiveCount: 1 });
  }
  for (let i = queue.length - 1; i > 0; i -= 1) {
    const j = Math.floor(random() * (i + 1));
    [queue[i], queue[j]] = [queue[j] as StormDelivery, queue[i] as StormDelivery];
  }

  let deliveries = 0;
  let retries = 0;
  let inProgress = 0;
  const started = Date.now();
  const consumer = async () => {
    for (;;) {
      const batch = queue.splice(0, batchSize);
      if (batch.length === 0) {
        // Others may still hand deliveries back; wait for them before giving up.
        if (inProgress === 0) return;
        await new Promise((resolve) => setTimeout(resolve, 1));
        continue;
      }
      inProgress += 1;
      deliveries += batch.length;
      let acks: boolean[];
      try {
        acks = await consume(batch);
      } catch {
        acks = batch.map(() => false);
      }
      batch.forEach((delivery, i) => {
        if (acks[i] === true) return;
        retries += 1;
        // Visibility timeout over: back into the queue, somewhere ahead, received once more.
        const at = Math.floor(random() * (queue.length + 1));
        queue.splice(at, 0, { ...delivery, receiveCount: delivery.receiveCount + 1 });
      });
      inProgress -= 1;
    }
  };
  await Promise.all(Array.from({ length: consumers }, consumer));

  let lost = 0;
  let duplicateEffects = 0;
  for (const id of ids) {
    const count = effects.get(id) ?? 0;
    if (count === 0) lost += 1;
    if (count > 1) duplicateEffects += count - 1;
  }
  let total = 0;
  for (const count of effects.values()) total += count;
  return {
    scenario: options.scenario,
    deliveries,
    uniqueIds: ids.length,
    effects: total,
    duplicatesSuppressed,
    inFlightParks,
    retries,
    lost,
    duplicateEffects,
    elapsedMs: Date.now() - started,
  };
}
