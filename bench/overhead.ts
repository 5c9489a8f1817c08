/**
 * BENCH — per-message overhead without a network: the same batches of 10 new messages through
 *   - a bare hand-written handler (no idempotency): the floor;
 *   - ours: `sqsHandler` + `InMemoryStore`;
 *   - Powertools: `BatchProcessor` + `makeIdempotent` over an in-memory persistence layer
 *     (`MemoryPersistenceLayer`, the DynamoDB layer's rules in a Map — Powertools ships none);
 *   - Powertools' `BatchProcessor` alone, to show how its cost splits.
 * Each round pushes `batches` × 10 messages through every kit (interleaved, rotating order); the
 * figure is the median over rounds of the time per message, and the overhead is that minus the
 * bare handler's.
 *
 * What this is *not*: a store comparison (both stores are maps); it is the libraries' own CPU cost.
 */
import { InMemoryStore } from "../src/memory-store.js";
import { batchMetrics } from "../src/observability/metrics.js";
import { lambdaContext, newIds, sqsEvent } from "./fixtures/sqs.js";
import type { Kit } from "./kit.js";
import { bareKit, oursKit } from "./ours.js";
import { MemoryPersistenceLayer, powertoolsBatchOnlyKit, powertoolsKit } from "./powertools.js";
import { median, rotate } from "./stats.js";

export interface OverheadFigure {
  readonly kit: string;
  readonly description: string;
  /** Median time per message, microseconds. */
  readonly usPerMessage: number;
  /** `usPerMessage` minus the bare handler's. */
  readonly overheadUs: number;
}

export interface OverheadFigures {
  readonly batchSize: number;
  readonly messagesPerRound: number;
  readonly rounds: number;
  readonly figures: readonly OverheadFigure[];
}

const BATCH_SIZE = 10;

export function overheadKits(): Kit[] {
  const none = { count: 0, reset: () => undefined };
  return [
    bareKit(),
    // The default options: payload fingerprint and outcome logs on (a new message logs nothing), metrics off.
    oursKit("ours", "sqsHandler + InMemoryStore, default options (fingerprint and logs on)", new InMemoryStore(), none, { logger: undefined }),
    oursKit("ours (fingerprint off)", "the same with `fingerprint: false`: the payload check's own cost is the difference", new InMemoryStore(), none, { logger: undefined, fingerprint: false }),
    oursKit(
      "ours + metrics",
      "the same with `metrics: batchMetrics()`: one EMF document built per batch (written to a no-op sink here, stdout in Lambda)",
      new InMemoryStore(),
      none,
      { logger: undefined, metrics: batchMetrics({ write: () => undefined }) },
    ),
    powertoolsKit("Powertools", "BatchProcessor + makeIdempotent + in-memory persistence layer", new MemoryPersistenceLayer(), none),
    powertoolsBatchOnlyKit(),
  ];
}

async function timeRound(kit: Kit, batches: number): Promise<number> {
  const events = Array.from({ length: batches }, () => sqsEvent(newIds(BATCH_SIZE, "cpu")));
  const context = lambdaContext();
  const before = kit.effect.runs;
  const started = performance.now();
  for (const event of events) await kit.handler(event, context);
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
  const bare = median(samples.get("bare") as number[]);
  return {
    batchSize: BATCH_SIZE,
    messagesPerRound: batches * BATCH_SIZE,
    rounds,
    figures: kits.map((kit) => {
      const us = median(samples.get(kit.name) as number[]);
      return { kit: kit.name, description: kit.description, usPerMessage: us, overheadUs: us - bare };
    }),
  };
}
