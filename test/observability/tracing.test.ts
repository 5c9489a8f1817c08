/**
 * OpenTelemetry tracing, recorded with @opentelemetry/sdk-trace-base's InMemorySpanExporter: one
 * span per batch and per message (messaging semantic conventions), the producer's trace continued
 * from `traceparent` or from the envelope's `trace_id` exactly as BabelQueue's own SDK maps it,
 * through the batch engine on InMemoryStore and from synthetic event sequences.
 *
 * The context manager below is a 15-line AsyncLocalStorage one (what
 * @opentelemetry/context-async-hooks provides), so the handler's active span can be observed.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { createHash } from "node:crypto";
import * as otel from "@opentelemetry/api";
import { BasicTracerProvider, InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor, type SpanProcessor } from "@opentelemetry/sdk-trace-base";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { sqsHandler } from "../../handlers/lambda-sqs.js";
import { lambdaContext, sqsRecord } from "../../scripts/lambda-events.js";
import { InMemoryStore } from "../../src/memory-store.js";
import { createObservability } from "../../src/observability/index.js";
import type { OtelApi } from "../../src/observability/otel-api.js";
import { BatchTracing, otelTracing } from "../../src/observability/tracing.js";
import { otelTraceId, parseTraceparent, spanIdOf } from "../../src/observability/trace-context.js";
import { body, result, runBatch, runEngineThatThrows } from "./harness.js";
import { deferred } from "../support/deferred.js";

class AsyncLocalContextManager implements otel.ContextManager {
  readonly #storage = new AsyncLocalStorage<otel.Context>();
  active(): otel.Context {
    return this.#storage.getStore() ?? otel.ROOT_CONTEXT;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(context: otel.Context, fn: F, thisArg?: ThisParameterType<F>, ...args: A): ReturnType<F> {
    return this.#storage.run(context, () => fn.apply(thisArg, args));
  }
  bind<T>(_context: otel.Context, target: T): T {
    return target;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    this.#storage.disable();
    return this;
  }
}

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const tracer = provider.getTracer("test");
// The real module fits the structural type the package declares (a compile-time check).
const api: OtelApi = otel;

beforeAll(() => {
  otel.context.setGlobalContextManager(new AsyncLocalContextManager());
});
afterAll(() => {
  otel.context.disable();
});
beforeEach(() => exporter.reset());

const spans = () => exporter.getFinishedSpans();
const byKey = (key: string) => spans().find((span) => span.attributes["babelqueue.key"] === key) as ReadableSpan;
const hex = (text: string) => createHash("sha256").update(text).digest("hex");
const UUID_TRACE = "7b3f9c2a-e41d-4f88-9b2a-1c0d5e6f7a8b";

describe("BabelQueue's trace_id mapping", () => {
  it("maps a UUID to its hex digits and anything else to SHA-256, with the same parent span id as @babelqueue/core/otel", async () => {
    expect(await otelTraceId(UUID_TRACE)).toBe("7b3f9c2ae41d4f889b2a1c0d5e6f7a8b");
    expect(await otelTraceId(UUID_TRACE.toUpperCase())).toBe("7b3f9c2ae41d4f889b2a1c0d5e6f7a8b");
    expect(await otelTraceId("order-flow-42")).toBe(hex("order-flow-42").slice(0, 32));
    expect(await otelTraceId("00000000-0000-0000-0000-000000000000")).toBe(hex("00000000-0000-0000-0000-000000000000").slice(0, 32));
    expect(await otelTraceId("z".repeat(32))).toBe(hex("z".repeat(32)).slice(0, 32));
    expect(await spanIdOf("order-flow-42")).toBe(hex("babelqueue-span:order-flow-42").slice(0, 16));
  });

  it("accepts a W3C traceparent only in its exact form", () => {
    const valid = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    expect(parseTraceparent(valid)).toEqual({ traceId: "0af7651916cd43dd8448eb211c80319c", spanId: "b7ad6b7169203331", traceFlags: 1, isRemote: true });
    expect(parseTraceparent(` ${valid} `)?.spanId).toBe("b7ad6b7169203331");
    expect(parseTraceparent("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-future")?.traceId).toBe("0af7651916cd43dd8448eb211c80319c");
    for (const bad of [
      undefined,
      "",
      "garbage",
      `${valid}-extra`, // version 00 has no more fields
      "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
      "00-00000000000000000000000000000000-b7ad6b7169203331-01",
      "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
      "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
    ]) {
      expect(parseTraceparent(bad), String(bad)).toBeUndefined();
    }
  });
});

describe("spans through the batch engine", () => {
  it("one batch span and one span per message; producer traces continued; the handler runs inside its span", async () => {
    const store = new InMemoryStore({ namespace: "trace" });
    await store.remember("done-before");
    const producer = tracer.startSpan("publish orders", { kind: otel.SpanKind.PRODUCER });
    producer.end();
    const producerContext = producer.spanContext();
    const traceparent = `00-${producerContext.traceId}-${producerContext.spanId}-01`;

    const invocation = tracer.startSpan("lambda invocation");
    const activeInHandler = new Map<string, string | undefined>();
    const observation = createObservability({ logger: false, tracing: otelTracing({ api, tracer }) }, { system: "aws_sqs" }).batch({ queue: "orders", size: 7 });
    const results = await otel.context.with(otel.trace.setSpan(otel.context.active(), invocation), () =>
      runBatch(
        store,
        async (message, context) => {
          activeInHandler.set(context.key ?? "", otel.trace.getActiveSpan()?.spanContext().spanId);
          await new Promise((resolve) => setTimeout(resolve, 2)); // across an await, still the same span
          if (otel.trace.getActiveSpan()?.spanContext().spanId !== activeInHandler.get(context.key ?? "")) throw new Error("context lost");
          if (message.data.mode === "throw") throw new TypeError("declined card 4111");
        },
        [
          { body: body("with-traceparent"), messageId: "m0", headers: { traceparent, tracestate: "vendor=1" } },
          { body: body("with-uuid-trace", {}, UUID_TRACE), messageId: "m1" },
          { body: body("with-other-trace", {}, "order-flow-42"), messageId: "m2", headers: { "bq-replay-bypass": "1", traceparent: "garbage" } },
          { body: body("done-before"), messageId: "m3" },
          { body: body("throws", { mode: "throw" }, "trace-throws"), messageId: "m4", redeliveries: 3 },
          { body: "not json", messageId: "m5" },
          { body: body("with-uuid-trace", {}, UUID_TRACE), messageId: "m6" }, // a copy in the same batch
        ],
        observation,
        { batchEvents: true },
      ),
    );
    invocation.end();
    expect(results.map((r) => r.status)).toEqual(["ran", "ran", "ran", "duplicate", "failed", "invalid", "duplicate"]);

    const all = spans();
    const batch = all.find((span) => span.attributes["messaging.batch.message_count"] !== undefined) as ReadableSpan;
    expect(all).toHaveLength(1 + 1 + 1 + 7); // producer, invocation, batch, 7 messages
    expect(batch.name).toBe("process orders");
    expect(batch.kind).toBe(otel.SpanKind.CONSUMER);
    expect(batch.parentSpanContext?.spanId).toBe(invocation.spanContext().spanId);
    expect(batch.attributes).toMatchObject({
      "messaging.system": "aws_sqs",
      "messaging.operation.type": "process",
      "messaging.operation.name": "process",
      "messaging.destination.name": "orders",
      "messaging.batch.message_count": 7,
      "babelqueue.outcome.ran": 3,
      "babelqueue.outcome.duplicate": 2,
      "babelqueue.outcome.failed": 1,
      "babelqueue.outcome.invalid": 1,
    });
    // The batch links to every producer context it continued.
    expect(batch.links.map((link) => link.context.traceId).sort()).toEqual(
      [producerContext.traceId, "7b3f9c2ae41d4f889b2a1c0d5e6f7a8b", hex("order-flow-42").slice(0, 32), hex("trace-throws").slice(0, 32)].sort(),
    );

    // traceparent: a child of the producer span, tracestate kept, linked to the batch.
    const first = byKey("with-traceparent");
    expect(first.spanContext().traceId).toBe(producerContext.traceId);
    expect(first.parentSpanContext?.spanId).toBe(producerContext.spanId);
    expect(first.parentSpanContext?.isRemote).toBe(true);
    expect(first.parentSpanContext?.traceState?.get("vendor")).toBe("1");
    expect(first.links.map((link) => link.context.spanId)).toEqual([batch.spanContext().spanId]);
    expect(first.kind).toBe(otel.SpanKind.CONSUMER);
    expect(first.attributes).toMatchObject({
      "messaging.system": "aws_sqs",
      "messaging.operation.type": "process",
      "messaging.destination.name": "orders",
      "messaging.message.id": "m0",
      "babelqueue.outcome": "ran",
      "babelqueue.ack": true,
      "babelqueue.dedupe": "claim",
    });
    expect(activeInHandler.get("with-traceparent")).toBe(first.spanContext().spanId);

    // trace_id fallbacks, exactly as BabelQueue maps them; a malformed traceparent never wins.
    const uuid = spans().find((span) => span.attributes["messaging.message.id"] === "m1") as ReadableSpan;
    expect(uuid.spanContext().traceId).toBe("7b3f9c2ae41d4f889b2a1c0d5e6f7a8b");
    expect(uuid.parentSpanContext?.spanId).toBe(hex(`babelqueue-span:${UUID_TRACE}`).slice(0, 16));
    expect(uuid.attributes["messaging.message.conversation_id"]).toBe(UUID_TRACE);
    const other = byKey("with-other-trace");
    expect(other.spanContext().traceId).toBe(hex("order-flow-42").slice(0, 32));
    expect(other.attributes["babelqueue.replay"]).toBe(true);
    expect(uuid.attributes["babelqueue.replay"]).toBeUndefined();

    // A handler that threw: ERROR, the exception recorded by name only, attempts kept.
    const failed = byKey("throws");
    expect(failed.status.code).toBe(otel.SpanStatusCode.ERROR);
    expect(failed.attributes).toMatchObject({ "babelqueue.outcome": "failed", "babelqueue.attempts": 3, "error.type": "TypeError" });
    expect(failed.events.map((event) => [event.name, event.attributes?.["exception.type"]])).toEqual([["exception", "TypeError"]]);
    expect(JSON.stringify(failed.events)).not.toContain("4111");

    // Messages that never ran: short spans under the batch span.
    const duplicate = byKey("done-before");
    expect(duplicate.parentSpanContext?.spanId).toBe(batch.spanContext().spanId);
    expect(duplicate.attributes).toMatchObject({ "babelqueue.outcome": "duplicate", "messaging.message.id": "m3" });
    expect(duplicate.status.code).toBe(otel.SpanStatusCode.UNSET);
    const copy = spans().find((span) => span.attributes["messaging.message.id"] === "m6") as ReadableSpan;
    expect(copy.attributes["babelqueue.outcome"]).toBe("duplicate");
    const invalid = spans().find((span) => span.attributes["messaging.message.id"] === "m5") as ReadableSpan;
    expect(invalid.attributes).toMatchObject({ "babelqueue.outcome": "invalid", "error.type": "INVALID_MESSAGE" });
    expect(invalid.status.code).toBe(otel.SpanStatusCode.ERROR);
    expect(invalid.parentSpanContext?.spanId).toBe(batch.spanContext().spanId);
  });

  it("a message without a trace_id or traceparent is a child of the batch span", async () => {
    const observation = createObservability({ logger: false, tracing: otelTracing({ api, tracer }) }, { system: "cloudflare_queues" }).batch({ queue: "jobs" });
    const custom = JSON.stringify({ id: "c1", payload: 1 });
    const results = await runBatch(new InMemoryStore(), () => undefined, [{ body: custom }], observation, {
      parse: (raw: unknown) => JSON.parse(String(raw)) as unknown,
      key: (message: unknown) => (message as { id: string }).id,
    } as never);
    expect(results[0]?.status).toBe("ran");
    const batch = spans().find((span) => span.name === "process jobs" && span.attributes["babelqueue.key"] === undefined) as ReadableSpan;
    const message = byKey("c1");
    expect(message.parentSpanContext?.spanId).toBe(batch.spanContext().spanId);
    expect(message.links).toEqual([]);
    expect(message.attributes["messaging.system"]).toBe("cloudflare_queues");
  });
});

describe("spans of a handler the engine answers for early, or runs again", () => {
  it("a handler still running at the deadline: one span, answered in-flight, ended by its late result under the producer", async () => {
    const store = new InMemoryStore({ namespace: "trace-deadline" });
    const gate = deferred();
    const slowDone = deferred();
    const handler = sqsHandler({
      store,
      logger: false,
      deadlineMarginMs: 200,
      tracing: otelTracing({ api, tracer }),
      handle: async (message) => {
        if (message.data.slow === true) {
          await gate.promise;
          slowDone.resolve();
        }
      },
    });
    const response = await handler(
      { Records: [sqsRecord(body("fast"), { messageId: "m-fast" }), sqsRecord(body("slow", { slow: true }, UUID_TRACE), { messageId: "m-slow" })] },
      lambdaContext(400),
    );
    expect(response.batchItemFailures).toEqual([{ itemIdentifier: "m-slow" }]);
    // At the answer the slow message's span is still open: only the batch and the fast span ended.
    expect(spans().map((span) => span.attributes["babelqueue.key"] ?? "batch").sort()).toEqual(["batch", "fast"]);
    gate.resolve();
    await slowDone.promise;
    await new Promise((resolve) => setTimeout(resolve, 20)); // its commit
    const slow = spans().filter((span) => span.attributes["babelqueue.key"] === "slow");
    expect(slow).toHaveLength(1);
    expect(slow[0]?.attributes["babelqueue.answer"]).toBe("in-flight");
    expect(slow[0]?.attributes["babelqueue.outcome"]).toBe("ran");
    expect(slow[0]?.spanContext().traceId).toBe(UUID_TRACE.replaceAll("-", ""));
    expect(await store.seen("slow")).toBe(true);
    const batch = spans().find((span) => span.attributes["babelqueue.key"] === undefined) as ReadableSpan;
    expect(batch.attributes["babelqueue.outcome.in-flight"]).toBe(1);
    expect(batch.attributes["babelqueue.outcome.ran"]).toBe(1);
  });

  it("a transaction run again (PostgreSQL's retry on 40001): the first attempt's span ends as retried, the producer is linked once", async () => {
    // Scripted: the store runs `work` twice, as PostgresStore does when COMMIT fails with 40001.
    class RetryingStore extends InMemoryStore {
      async transact(claim: { id: string; token: string; fingerprint?: string }, work: (tx: string[]) => Promise<void>): Promise<void> {
        await work([]);
        await work([]);
        if (!(await this.release(claim.id, claim.token))) throw new Error("fence lost");
        await this.remember(claim.id, claim.fingerprint);
      }
    }
    const store = new RetryingStore({ namespace: "trace-retry" });
    let runs = 0;
    const handler = sqsHandler({
      store,
      transactional: true,
      logger: false,
      tracing: otelTracing({ api, tracer }),
      handle: async () => {
        runs += 1;
      },
    });
    const response = await handler({ Records: [sqsRecord(body("retried", {}, UUID_TRACE))] }, lambdaContext());
    expect(response.batchItemFailures).toEqual([]);
    expect(runs).toBe(2);
    const attempts = spans().filter((span) => span.attributes["babelqueue.key"] === "retried");
    expect(attempts.map((span) => span.attributes["babelqueue.outcome"])).toEqual(["retried", "ran"]);
    const batch = spans().find((span) => span.attributes["babelqueue.key"] === undefined) as ReadableSpan;
    expect(batch.links).toHaveLength(1);
  });
});

describe("spans from synthetic event sequences", () => {
  it("a handler still running past batch-end keeps its span open until its late result", async () => {
    const traces = new BatchTracing({ api, tracer }, { system: "aws_sqs", queue: "orders" });
    let release: () => void = () => undefined;
    const stillRunning = new Promise<void>((resolve) => {
      release = resolve;
    });
    let late: Promise<void> = Promise.resolve();
    await traces.run(async () => {
      traces.observe({ type: "batch-start", size: 2 });
      late = traces.intercept(() => stillRunning, { index: 0, key: "slow", attempts: 0, traceId: UUID_TRACE });
      await traces.intercept(async () => undefined, { index: 1, key: "fast", attempts: 0 });
      traces.observe(result(1, "ran", { key: "fast" }));
      traces.observe({ type: "batch-end", size: 2, durationMs: 10, pending: 1 });
    });
    expect(spans().map((span) => span.attributes["babelqueue.key"] ?? "batch").sort()).toEqual(["batch", "fast"]);
    release();
    await late;
    traces.observe(result(0, "ran", { key: "slow" }));
    expect(byKey("slow").attributes["babelqueue.outcome"]).toBe("ran");
  });

  it("an engine that throws: the batch span is ERROR, open message spans end as unknown, the error goes on", async () => {
    const traces = new BatchTracing({ api, tracer }, { system: "aws_sqs" });
    await runEngineThatThrows(traces, "orphan");
    const batch = spans().find((span) => span.name === "process" && span.attributes["babelqueue.key"] === undefined) as ReadableSpan;
    expect(batch.status.code).toBe(otel.SpanStatusCode.ERROR);
    expect(batch.events[0]?.attributes?.["exception.type"]).toBe("RangeError");
    expect(byKey("orphan").attributes["babelqueue.outcome"]).toBe("unknown");
  });

  it("commit-failed and conflict are ERROR with the store's error recorded; in-flight carries its retry delay", async () => {
    const traces = new BatchTracing({ api, tracer }, { system: "aws_sqs" });
    await traces.run(async () => {
      await traces.intercept(async () => undefined, { index: 0, key: "cf", attempts: 0 });
      traces.observe(result(0, "commit-failed", { key: "cf", error: Object.assign(new Error("timeout"), { name: "TimeoutError", code: "ETIMEDOUT" }) }));
      traces.observe(result(1, "conflict", { key: "cx", handlerRan: false, error: Object.assign(new Error("x"), { code: "PAYLOAD_CONFLICT" }) }));
      traces.observe(result(2, "in-flight", { key: "if", retryAfterMs: 1234 }));
    });
    expect(byKey("cf").status.code).toBe(otel.SpanStatusCode.ERROR);
    expect(byKey("cf").events.map((event) => event.attributes?.["exception.type"])).toEqual(["ETIMEDOUT"]);
    expect(byKey("cx").attributes["error.type"]).toBe("PAYLOAD_CONFLICT");
    expect(byKey("if").attributes["babelqueue.retry_after_ms"]).toBe(1234);
    expect(byKey("if").status.code).toBe(otel.SpanStatusCode.UNSET);
  });

  it("is off by default (no interceptor), and a tracing option without the API is rejected at setup", () => {
    expect(createObservability({ logger: false }, { system: "aws_sqs" }).batch().intercept).toBeUndefined();
    expect(() => createObservability({ tracing: otelTracing({ api: {} as OtelApi }) }, { system: "aws_sqs" })).toThrow(/option "tracing"/);
  });
});

/** A span processor (the SDK's own extension point) that throws where `where` says, as a buggy one does. */
function throwingProcessor(where: "onStart" | "onEnd"): SpanProcessor {
  const fail = () => {
    throw new TypeError("span processor bug");
  };
  return {
    onStart: where === "onStart" ? fail : () => undefined,
    onEnd: where === "onEnd" ? fail : () => undefined,
    forceFlush: async () => undefined,
    shutdown: async () => undefined,
  };
}

describe("a tracer that throws never changes an outcome", () => {
  // The real SDK calls a span processor's onStart from startSpan and its onEnd from span.end(),
  // without a catch: a processor's bug surfaces as a throw from those calls.
  for (const where of ["onStart", "onEnd"] as const) {
    it(`a span processor throwing in ${where}: every handler runs once, the batch is answered, the ids are done`, async () => {
      const broken = new BasicTracerProvider({ spanProcessors: [throwingProcessor(where)] });
      const store = new InMemoryStore({ namespace: `trace-${where}` });
      const ran: string[] = [];
      const handler = sqsHandler({
        store,
        logger: false,
        tracing: otelTracing({ api, tracer: broken.getTracer("broken") }),
        handle: (_message, context) => void ran.push(context.key ?? ""),
      });
      const response = await handler({ Records: [sqsRecord(body("t-1")), sqsRecord(body("t-2"))] }, lambdaContext());
      expect(response.batchItemFailures).toEqual([]);
      expect(ran.sort()).toEqual(["t-1", "t-2"]);
      expect([await store.seen("t-1"), await store.seen("t-2")]).toEqual([true, true]);
    });
  }
});
