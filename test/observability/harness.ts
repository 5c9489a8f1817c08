/**
 * Test harness for the observability modules: synthetic engine events, BabelQueue bodies, and a
 * driver that runs a batch through the *current* BatchEngine with a `BatchObservation` wired the
 * way the runtime handlers wire it.
 *
 * Until the engine emits the full event set of src/events.ts, the driver fills the gap the way the
 * new engine will: it adds `messageId` and `attempts` to each `result`, and it calls the
 * interceptor around the handler (the current engine takes no `intercept`). The harness owns
 * `batch-start` / `batch-end`: it emits them only when asked (`batchEvents: true`) and drops an
 * engine's own, so the "engine never says batch-end" path is exercised with either engine.
 */
import type { Store } from "../../src/contract.js";
import type { MessageResult } from "../../src/decision.js";
import { BatchEngine, type EngineOptions, type EngineEvent as CurrentEngineEvent } from "../../src/engine/index.js";
import type { Envelope } from "../../src/envelope.js";
import type { EngineEvent, RunInterceptor, StoreStep } from "../../src/events.js";
import type { BatchObservation } from "../../src/observability/index.js";
import type { BatchTracing } from "../../src/observability/tracing.js";
import { envelopeBody } from "../support/envelopes.js";
import { expect } from "vitest";

let counter = 0;

/** A BabelQueue envelope as JSON text. */
export function body(id: string | undefined, data: Record<string, unknown> = {}, traceId?: string): string {
  counter += 1;
  return envelopeBody(id, { job: "urn:babel:test:observed", traceId: traceId ?? `trace-${counter}`, data, meta: { queue: "orders", lang: "node", created_at: 0 } });
}

/** A synthetic `result` event. */
export function result(index: number, status: string, extra: Partial<MessageResult> & { messageId?: string; attempts?: number; handlerMs?: number } = {}): EngineEvent {
  const { messageId, attempts = 0, handlerMs, ...fields } = extra;
  const acked = status === "ran" || status === "duplicate" || status === "commit-failed";
  return {
    type: "result",
    index,
    result: {
      status: status as MessageResult["status"],
      ack: acked,
      dedupe: "claim",
      handlerRan: status === "ran" || status === "commit-failed" || status === "failed",
      ...fields,
    },
    attempts,
    ...(messageId === undefined ? {} : { messageId }),
    ...(handlerMs === undefined ? {} : { handlerMs }),
  };
}

export const step = (name: StoreStep, durationMs: number, ids = 1, ok = true): EngineEvent => ({ type: "store-step", step: name, ids, durationMs, ok });

/** One delivery for `runBatch`. */
export interface TestDelivery {
  body: unknown;
  messageId?: string;
  headers?: Record<string, string>;
  redeliveries?: number;
}

export interface RunBatchOptions extends Omit<EngineOptions<Envelope>, "observe"> {
  /** Emit batch-start / batch-end around `process`, as the new engine does. */
  batchEvents?: boolean;
}

/**
 * Runs one batch through the current BatchEngine, observed by `observation`; returns the results.
 * `handle` is the user's handler.
 */
export async function runBatch(
  store: Store,
  handle: (message: Envelope, context: { key: string | undefined; attempts: number }) => unknown,
  deliveries: readonly TestDelivery[],
  observation: BatchObservation,
  options: RunBatchOptions = {},
): Promise<MessageResult[]> {
  const { batchEvents = false, ...engineOptions } = options;
  const attemptsByIndex = new Map<number, number>();
  const intercept: RunInterceptor | undefined = observation.intercept;
  const engine = new BatchEngine<Envelope, { index: number; messageId?: string; headers?: Record<string, string> }>(
    store,
    async (message, context) => {
      attemptsByIndex.set(context.index, context.attempts);
      const run = async () => {
        await handle(message, context);
      };
      if (intercept === undefined) return run();
      return intercept(run, {
        index: context.index,
        key: context.key,
        attempts: context.attempts,
        ...(context.messageId === undefined ? {} : { messageId: context.messageId }),
        ...(context.headers === undefined ? {} : { headers: context.headers }),
        traceId: message.trace_id,
      });
    },
    {
      ...engineOptions,
      observe: (engineEvent: CurrentEngineEvent) => {
        const event = engineEvent as CurrentEngineEvent | EngineEvent;
        // The harness owns the batch events (`batchEvents`), whichever engine runs underneath.
        if (event.type === "batch-start" || event.type === "batch-end") return;
        if (event.type === "result") {
          const delivery = deliveries[event.index];
          observation.observe({
            ...event,
            // bodies here carry attempts 0, so the reconciled count is the redelivery count
            attempts: attemptsByIndex.get(event.index) ?? delivery?.redeliveries ?? 0,
            ...(delivery?.messageId === undefined ? {} : { messageId: delivery.messageId }),
          });
        } else observation.observe(event as EngineEvent);
      },
    },
  );
  const started = Date.now();
  return observation.run(async () => {
    if (batchEvents) observation.observe({ type: "batch-start", size: deliveries.length });
    const results = await engine.process(
      deliveries.map((delivery, index) => ({
        body: delivery.body,
        context: { index, ...(delivery.messageId === undefined ? {} : { messageId: delivery.messageId }), ...(delivery.headers === undefined ? {} : { headers: delivery.headers }) },
        ...(delivery.redeliveries === undefined ? {} : { redeliveries: delivery.redeliveries }),
      })),
    );
    if (batchEvents) observation.observe({ type: "batch-end", size: deliveries.length, durationMs: Date.now() - started, pending: 0 });
    return results;
  });
}

/** Collects what a logger is called with. */
export function recordingLogger() {
  const lines: { level: "info" | "warn" | "error"; message: string; fields: Record<string, unknown> }[] = [];
  const at = (level: "info" | "warn" | "error") => (message: string, fields?: unknown) => {
    lines.push({ level, message, fields: (fields ?? {}) as Record<string, unknown> });
  };
  return { lines, logger: { info: at("info"), warn: at("warn"), error: at("error") } };
}

/** Replaces a global for the length of a synchronous call. */
export function withGlobal<T>(name: string, value: unknown, fn: () => T): T {
  const saved = Object.getOwnPropertyDescriptor(globalThis, name);
  Object.defineProperty(globalThis, name, { value, configurable: true, writable: true, enumerable: false });
  try {
    return fn();
  } finally {
    if (saved === undefined) delete (globalThis as Record<string, unknown>)[name];
    else Object.defineProperty(globalThis, name, saved);
  }
}

/**
 * A batch through `traces` whose engine throws RangeError("engine bug") while message `key`'s span
 * is open (its handler has returned, no result came); checks that the error goes on out of `run`.
 */
export async function runEngineThatThrows(traces: BatchTracing, key: string): Promise<void> {
  const failure = new RangeError("engine bug");
  await expect(
    traces.run(async () => {
      await traces.intercept(async () => undefined, { index: 0, key, attempts: 0 });
      throw failure;
    }),
  ).rejects.toBe(failure);
}
