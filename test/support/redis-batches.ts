/**
 * Batches of BabelQueue deliveries for the Redis scale-out tests, and a consumer that counts every
 * effect per id: what "no double claim" and "no lost commit" are measured with.
 *
 * What this is *not*: a queue. Redeliveries are simply the same ids sent again.
 */
import type { ClaimingStore } from "../../src/contract.js";
import type { MessageResult } from "../../src/decision.js";
import { BatchEngine } from "../../src/engine/index.js";

/** A BabelQueue envelope (schema_version 1) with this meta.id. */
export function envelope(id: string): string {
  return JSON.stringify({
    job: "urn:babel:orders:created",
    trace_id: "7b3f9c2a-e41d-4f88-9b2a-1c0d5e6f7a8b",
    data: { order_id: id },
    meta: { id, schema_version: 1 },
    attempts: 0,
  });
}

export function deliveries(ids: readonly string[]) {
  return ids.map((id) => ({ body: envelope(id), context: {} }));
}

/** A consumer (one BatchEngine) that records each effect, into a map it may share with other consumers. */
export class CountingConsumer {
  readonly engine: BatchEngine;
  constructor(
    store: ClaimingStore,
    readonly effects: Map<string, number>,
    options: { handlerMs?: number; commitRetries?: number } = {},
  ) {
    this.engine = new BatchEngine(
      store,
      async (message) => {
        const id = (message as { meta: { id: string } }).meta.id;
        effects.set(id, (effects.get(id) ?? 0) + 1);
        if (options.handlerMs) await new Promise((resolve) => setTimeout(resolve, options.handlerMs));
      },
      options.commitRetries === undefined ? {} : { commitRetries: options.commitRetries },
    );
  }

  process(ids: readonly string[]): Promise<MessageResult[]> {
    return this.engine.process(deliveries(ids));
  }
}

/** `count` ids `prefix-0` … */
export function idRange(prefix: string, count: number, from = 0): string[] {
  return Array.from({ length: count }, (_, i) => `${prefix}-${from + i}`);
}

/** Counts of each status among results. */
export function statusCounts(results: readonly MessageResult[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const result of results) counts[result.status] = (counts[result.status] ?? 0) + 1;
  return counts;
}

/** The deterministic PRNG the scripts and tests share (scripts/storm.ts), so a load test's schedule repeats run to run. */
export { seededRandom } from "../../scripts/storm.js";
