/**
 * BENCH — per-message overhead without a network: the same batches of 10 new messages through
 *   - a bare hand-written handler (no idempotency): the floor;
 *   - ours: `sqsHandler` + `InMemoryStore`;
 *   - Powertools: `BatchProcessor` + `makeIdempotent` over an in-memory persistence layer
 *     (`MemoryPersistenceLayer`, the DynamoDB layer's rules in a Map — Powertools ships none);
 *   - Powertools' `BatchProcessor` alone, to show how its cost splits;
 *   - `kafkaHandler` + `InMemoryStore` on the same messages as an Amazon MSK event (10 records over
 *     2 partitions, each run in offset order), beside `sqsHandler`: the Kafka adapter's own cost
 *     (base64 values, header bytes, partitions as ordered lanes, the Kafka partial response).
 * Each round pushes `batches` × 10 messages through every kit (interleaved, rotating order). The time
 * per message is the median over rounds; the overhead is paired: each round's time minus the bare
 * handler's in the same round, the median over rounds, with the middle half of the rounds (the
 * interquartile range) as its spread — a slow minute of the machine slows both sides of a pair.
 *
 * What this is *not*: a store comparison (both stores are maps); it is the libraries' own CPU cost.
 */
import type { Context, MSKEvent, SQSEvent } from "aws-lambda";
import { kafkaHandler } from "../handlers/lambda-kafka.js";
import { InMemoryStore } from "../src/memory-store.js";
import { kafkaRecord, mskEvent } from "../scripts/lambda-events.js";
import { batchMetrics } from "../src/observability/metrics.js";
import { envelopeBody, lambdaContext, newIds, sqsEvent } from "./fixtures/sqs.js";
import { Effect, type Kit } from "./kit.js";
import { bareKit, oursKit } from "./ours.js";
import { MemoryPersistenceLayer, powertoolsBatchOnlyKit, powertoolsKit } from "./powertools.js";
import { median, quantile, rotate } from "./stats.js";

export interface OverheadFigure {
  readonly kit: string;
  readonly description: string;
  /** Median time per message, microseconds. */
  readonly usPerMessage: number;
  /** Median over rounds of this kit's time per message minus the bare handler's in the same round. */
  readonly overheadUs: number;
  /** The interquartile range of those per-round differences: [25th, 75th percentile]. */
  readonly overheadRangeUs: readonly [number, number];
}

export interface OverheadFigures {
  readonly batchSize: number;
  readonly messagesPerRound: number;
  readonly rounds: number;
  readonly figures: readonly OverheadFigure[];
}

const BATCH_SIZE = 10;
const KAFKA_PARTITIONS = 2;

/** A kit as this bench times it: its event built before the clock starts, then handled. */
interface TimedKit {
  readonly name: string;
  readonly description: string;
  readonly effect: Effect;
  event(ids: readonly string[]): unknown;
  handle(event: unknown, context: Context): Promise<unknown>;
}

function sqsTimed(kit: Kit): TimedKit {
  return { ...kit, event: (ids) => sqsEvent(ids), handle: (event, context) => kit.handler(event as SQSEvent, context) };
}

/** Ours on Kafka: the same envelopes as MSK records over KAFKA_PARTITIONS partitions, with BabelQueue's headers. */
function kafkaTimed(): TimedKit {
  const effect = new Effect();
  const handler = kafkaHandler({ store: new InMemoryStore(), logger: false, handle: async (_envelope, context) => effect.run(context.key ?? "") });
  let offset = 0;
  return {
    name: "ours (kafkaHandler)",
    description: `kafkaHandler + InMemoryStore: the same 10 messages as an MSK event over ${KAFKA_PARTITIONS} partitions, bq-* headers on each record`,
    effect,
    event: (ids) =>
      mskEvent(
        ids.map((id, i) =>
          kafkaRecord(envelopeBody(id), {
            partition: i % KAFKA_PARTITIONS,
            offset: (offset += 1),
            headers: { "bq-message-id": id, "bq-schema-version": "1", "bq-attempts": "0", "bq-job": "orders.charge" },
          }),
        ),
      ),
    handle: (event, context) => handler(event as MSKEvent, context),
  };
}

export function overheadKits(): TimedKit[] {
  const none = { count: 0, reset: () => undefined };
  return [
    sqsTimed(bareKit()),
    // The default options: payload fingerprint and outcome logs on (a new message logs nothing), metrics off.
    sqsTimed(oursKit("ours", "sqsHandler + InMemoryStore, default options (fingerprint and logs on)", new InMemoryStore(), none, { logger: undefined })),
    sqsTimed(oursKit("ours (fingerprint off)", "the same with `fingerprint: false`: the payload check's own cost is the difference", new InMemoryStore(), none, { logger: undefined, fingerprint: false })),
    sqsTimed(
      oursKit(
        "ours + metrics",
        "the same with `metrics: batchMetrics()`: one EMF document built per batch (written to a no-op sink here, stdout in Lambda)",
        new InMemoryStore(),
        none,
        { logger: undefined, metrics: batchMetrics({ write: () => undefined }) },
      ),
    ),
    kafkaTimed(),
    sqsTimed(powertoolsKit("Powertools", "BatchProcessor + makeIdempotent + in-memory persistence layer", new MemoryPersistenceLayer(), none)),
    sqsTimed(powertoolsBatchOnlyKit()),
  ];
}

async function timeRound(kit: TimedKit, batches: number): Promise<number> {
  const events = Array.from({ length: batches }, () => kit.event(newIds(BATCH_SIZE, "cpu")));
  const context = lambdaContext();
  const before = kit.effect.runs;
  const started = performance.now();
  for (const event of events) await kit.handle(event, context);
  const elapsed = performance.now() - started;
  const ran = kit.effect.runs - before;
  if (ran !== batches * BATCH_SIZE) throw new Error(`${kit.name}: ${ran} effects for ${batches * BATCH_SIZE} new messages`);
  return (elapsed * 1000) / (batches * BATCH_SIZE);
}

export async function measureOverhead(rounds: number, batches: number): Promise<OverheadFigures> {
  const kits = overheadKits();
  const samples = new Map<string, number[]>(kits.map((kit) => [kit.name, []]));
  for (let round = -2; round < rounds; round++) {
    for (const kit of rotate(kits, round + 2)) {
      const us = await timeRound(kit, batches);
      if (round >= 0) (samples.get(kit.name) as number[]).push(us);
    }
  }
  const bare = samples.get("bare") as number[];
  return {
    batchSize: BATCH_SIZE,
    messagesPerRound: batches * BATCH_SIZE,
    rounds,
    figures: kits.map((kit) => {
      const own = samples.get(kit.name) as number[];
      const differences = own.map((us, round) => us - (bare[round] as number));
      return {
        kit: kit.name,
        description: kit.description,
        usPerMessage: median(own),
        overheadUs: median(differences),
        overheadRangeUs: [quantile(differences, 0.25), quantile(differences, 0.75)],
      };
    }),
  };
}
