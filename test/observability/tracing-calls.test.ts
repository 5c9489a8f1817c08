/**
 * Tracing, call by call, against a recording OpenTelemetry stand-in (./fake-otel.ts): each span's
 * name, start options and parent, and every attribute, status, exception, link and end in order —
 * for the batch span, a message span opened by the interceptor, a short span of a message that
 * never ran, the producer parent (traceparent / tracestate / trace_id), and the ends of a batch
 * (batch-end with or without pending handlers, no batch-end, an engine that throws).
 */
import { describe, expect, it } from "vitest";
import { GroupBlockedError, InvalidOptionError, PayloadConflictError, StoreUnavailableError } from "../../src/errors.js";
import type { EngineEvent } from "../../src/events.js";
import { createObservability } from "../../src/observability/index.js";
import { traceIdParent } from "../../src/observability/trace-context.js";
import { BatchTracing, type TracingOptions, checkTracingOptions, otelTracing } from "../../src/observability/tracing.js";
import { thrownBy } from "../support/caught.js";
import { FakeTraceState, fakeOtel } from "./fake-otel.js";
import { result, runEngineThatThrows } from "./harness.js";

const COMMON = { "messaging.system": "aws_sqs", "messaging.operation.type": "process", "messaging.operation.name": "process" } as const;
const QUEUE = { ...COMMON, "messaging.destination.name": "orders" } as const;
const TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
const REMOTE = { traceId: "0af7651916cd43dd8448eb211c80319c", spanId: "b7ad6b7169203331", traceFlags: 1, isRemote: true };

const outcome = (status: string, ack: boolean) => [
  ["setAttribute", "babelqueue.outcome", status],
  ["setAttribute", "babelqueue.ack", ack],
  ["setAttribute", "babelqueue.dedupe", "claim"],
];
const UNKNOWN = [["setAttribute", "babelqueue.outcome", "unknown"], ["end"]];

/** A result event with exactly the given fields. */
function bare(index: number, status: string, extra: Record<string, unknown> = {}): EngineEvent {
  return { type: "result", index, result: { status, ack: false, dedupe: "claim", handlerRan: false, ...extra } } as unknown as EngineEvent;
}

describe("the tracing option", () => {
  const message = (inner: string) => `option "tracing" must be false or { api } with the "@opentelemetry/api" module (${inner})`;
  const API_MESSAGE = 'tracing.api must be the "@opentelemetry/api" module (import * as otel from "@opentelemetry/api")';

  const thrown = (tracing: unknown) => thrownBy(() => createObservability({ tracing: otelTracing(tracing as TracingOptions) }, { system: "aws_sqs" }));

  it("needs trace.getTracer / setSpan / setSpanContext and context.active / with; says so exactly", () => {
    const { api } = fakeOtel();
    const without = (path: "getTracer" | "setSpan" | "setSpanContext" | "active" | "with") => {
      const trace = { ...api.trace } as Record<string, unknown>;
      const context = { ...api.context } as Record<string, unknown>;
      if (path === "active" || path === "with") delete context[path];
      else delete trace[path];
      return { api: { trace, context } };
    };
    for (const tracing of [{}, { api: {} }, { api: { trace: {} } }, { api: { trace: api.trace } }, without("getTracer"), without("setSpan"), without("setSpanContext"), without("active"), without("with")]) {
      const error = thrown(tracing);
      expect(error, JSON.stringify(Object.keys((tracing as { api?: object }).api ?? {}))).toBeInstanceOf(InvalidOptionError);
      expect((error as Error).message).toBe(message(API_MESSAGE));
    }
    expect(() => checkTracingOptions({ api })).not.toThrow();
    expect(() => checkTracingOptions(undefined as unknown as TracingOptions)).toThrow(new TypeError(API_MESSAGE));
  });

  it("false or absent is off: no interceptor, the work runs as is", async () => {
    for (const tracing of [false, undefined] as const) {
      const batch = createObservability({ logger: false, ...(tracing === undefined ? {} : { tracing }) }, { system: "aws_sqs" }).batch({ queue: "q", size: 1 });
      expect(batch.intercept).toBeUndefined();
      expect(await batch.run(async () => 7)).toBe(7);
    }
  });

  it("on: the batch span carries the queue and the size the adapter knows, from the default tracer", async () => {
    const otel = fakeOtel();
    const observability = createObservability({ logger: false, tracing: otelTracing({ api: otel.api }) }, { system: "aws_sqs" });
    await observability.batch({ queue: "orders", size: 3 }).run(async () => undefined);
    await observability.batch().run(async () => undefined);
    expect(otel.tracerNames).toStrictEqual(["babelqueue-serverless", "babelqueue-serverless"]);
    expect(otel.spans.map((span) => [span.name, span.options])).toStrictEqual([
      ["process orders", { kind: 4, attributes: { ...QUEUE, "messaging.batch.message_count": 3 } }],
      ["process", { kind: 4, attributes: COMMON }],
    ]);
  });
});

describe("a batch, span by span", () => {
  it("batch span, a message that ran inside its span, a message that never ran", async () => {
    const otel = fakeOtel();
    const traces = new BatchTracing({ api: otel.api }, { system: "aws_sqs", queue: "orders", size: 2 });
    let inside: string | undefined;
    await traces.run(async () => {
      traces.observe({ type: "batch-start", size: 2 });
      await traces.intercept(
        async () => {
          inside = otel.active();
        },
        { index: 0, key: "k0", attempts: 1, messageId: "m0", traceId: "   ", headers: {} },
      );
      traces.observe(result(0, "ran", { key: "k0", messageId: "m0", attempts: 1 }));
      traces.observe(result(1, "duplicate", { key: "k1" }));
      traces.observe({ type: "batch-end", size: 2, durationMs: 3, pending: 0 });
    });
    expect(otel.tracerNames).toStrictEqual(["babelqueue-serverless"]);
    expect(inside).toBe("span s2");
    const [batch, ran, duplicate] = otel.spans;
    expect(otel.spans).toHaveLength(3);
    expect([batch?.name, batch?.parent, batch?.options]).toStrictEqual(["process orders", "root", { kind: 4, attributes: { ...QUEUE, "messaging.batch.message_count": 2 } }]);
    expect(batch?.calls).toStrictEqual([
      ["setAttribute", "messaging.batch.message_count", 2],
      ["setAttribute", "babelqueue.outcome.ran", 1],
      ["setAttribute", "babelqueue.outcome.duplicate", 1],
      ["end"],
    ]);
    expect([ran?.name, ran?.parent, ran?.options]).toStrictEqual([
      "process orders",
      "span s1",
      { kind: 4, attributes: { ...QUEUE, "messaging.message.id": "m0", "babelqueue.key": "k0", "babelqueue.attempts": 1, "messaging.message.conversation_id": "   " } },
    ]);
    expect(ran?.calls).toStrictEqual([...outcome("ran", true), ["end"]]);
    expect([duplicate?.name, duplicate?.parent, duplicate?.options]).toStrictEqual([
      "process orders",
      "span s1",
      { kind: 4, attributes: { ...QUEUE, "babelqueue.key": "k1", "babelqueue.attempts": 0 } },
    ]);
    expect(duplicate?.calls).toStrictEqual([...outcome("duplicate", true), ["end"]]);
  });

  it("without queue or size; a message without key, message id, trace id or attempts gets none of those attributes", async () => {
    const otel = fakeOtel();
    const traces = new BatchTracing({ api: otel.api, tracer: otel.tracer }, { system: "aws_sqs" });
    traces.observe({ type: "batch-start", size: 5 }); // before run: remembered for the batch span
    await traces.run(async () => {
      await traces.intercept(async () => undefined, { index: 0, key: undefined, attempts: 0 });
      traces.observe(bare(0, "ran", { ack: true, handlerRan: true }));
      traces.observe(bare(1, "in-flight"));
      traces.observe(bare(2, "duplicate", { ack: true, key: "k" }));
      traces.observe({ ...(result(3, "duplicate") as Extract<EngineEvent, { type: "result" }>), attempts: 4 });
    });
    expect(otel.tracerNames).toStrictEqual([]);
    expect(otel.spans.map((span) => [span.name, span.options])).toStrictEqual([
      ["process", { kind: 4, attributes: { ...COMMON, "messaging.batch.message_count": 5 } }],
      ["process", { kind: 4, attributes: { ...COMMON, "babelqueue.attempts": 0 } }],
      ["process", { kind: 4, attributes: COMMON }],
      ["process", { kind: 4, attributes: { ...COMMON, "babelqueue.key": "k" } }],
      ["process", { kind: 4, attributes: { ...COMMON, "babelqueue.attempts": 4 } }],
    ]);
    // the result closed the message span: the end of the batch does not close it again
    expect(otel.spans[1]?.calls).toStrictEqual([...outcome("ran", true), ["end"]]);
    expect(otel.spans[2]?.calls).toStrictEqual([...outcome("in-flight", false), ["end"]]);
  });

  it("cuts a key longer than 256 characters, not one of 256", async () => {
    const otel = fakeOtel();
    const traces = new BatchTracing({ api: otel.api }, { system: "aws_sqs" });
    await traces.run(async () => {
      await traces.intercept(async () => undefined, { index: 0, key: "k".repeat(257), attempts: 0 });
      traces.observe(result(1, "duplicate", { key: "k".repeat(256) }));
      traces.observe(result(2, "duplicate", { key: "k".repeat(257) }));
    });
    expect(otel.spans.slice(1).map((span) => (span.options as { attributes: Record<string, unknown> }).attributes["babelqueue.key"])).toStrictEqual([
      `${"k".repeat(256)}…`,
      "k".repeat(256),
      `${"k".repeat(256)}…`,
    ]);
  });

  it("cuts a trace_id longer than 256 characters the same way (its conversation id)", async () => {
    const otel = fakeOtel();
    const traces = new BatchTracing({ api: otel.api }, { system: "aws_sqs" });
    await traces.run(async () => {
      await traces.intercept(async () => undefined, { index: 0, key: "a", attempts: 0, traceId: "t".repeat(257) });
      await traces.intercept(async () => undefined, { index: 1, key: "b", attempts: 0, traceId: "t".repeat(256) });
    });
    expect(otel.spans.slice(1).map((span) => (span.options as { attributes: Record<string, unknown> }).attributes["messaging.message.conversation_id"])).toStrictEqual([
      `${"t".repeat(256)}…`,
      "t".repeat(256),
    ]);
  });

  it("a message span and a result observed outside the batch's context are still under the batch span", async () => {
    const otel = fakeOtel();
    const traces = new BatchTracing({ api: otel.api }, { system: "aws_sqs" });
    let open: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const running = traces.run(() => gate);
    expect(otel.active()).toBe("root");
    await traces.intercept(async () => undefined, { index: 0, key: "a", attempts: 0 });
    traces.observe(result(0, "ran", { key: "a" }));
    traces.observe(result(1, "duplicate", { key: "b" }));
    open();
    await running;
    expect(otel.spans.map((span) => span.parent)).toStrictEqual(["root", "span s1", "span s1"]);
  });
});

describe("the producer parent", () => {
  async function traced(headers: Record<string, string> | undefined, traceId: string | undefined, features: Parameters<typeof fakeOtel>[0] = {}) {
    const otel = fakeOtel(features);
    const traces = new BatchTracing({ api: otel.api }, { system: "aws_sqs" });
    await traces.run(async () => {
      await traces.intercept(async () => undefined, { index: 0, key: "k", attempts: 0, ...(headers === undefined ? {} : { headers }), ...(traceId === undefined ? {} : { traceId }) });
    });
    const [batch, message] = otel.spans;
    return { batch, message, links: (message?.options as { links?: unknown }).links };
  }

  it("traceparent and tracestate: a child of the producer, linked both ways", async () => {
    const { batch, message, links } = await traced({ traceparent: TRACEPARENT, tracestate: "vendor=1" }, "ignored-trace");
    const producer = { ...REMOTE, traceState: new FakeTraceState("vendor=1") };
    expect(message?.parent).toBe("remote b7ad6b7169203331 in span s1");
    expect(links).toStrictEqual([{ context: { traceId: "trace-s1", spanId: "span-s1", traceFlags: 1 } }]);
    expect(batch?.calls).toStrictEqual([["addLink", { context: producer }], ["end"]]);
    expect((message?.options as { attributes: Record<string, unknown> }).attributes["messaging.message.conversation_id"]).toBe("ignored-trace");
  });

  it("no tracestate header, or an API without createTraceState: no trace state", async () => {
    expect((await traced({ traceparent: TRACEPARENT }, undefined)).batch?.calls).toStrictEqual([["addLink", { context: REMOTE }], ["end"]]);
    const old = await traced({ traceparent: TRACEPARENT, tracestate: "vendor=1" }, undefined, { createTraceState: false });
    expect(old.batch?.calls).toStrictEqual([["addLink", { context: REMOTE }], ["end"]]);
    expect(old.message?.parent).toBe("remote b7ad6b7169203331 in span s1");
  });

  it("else the envelope's trace_id; a blank one is no producer", async () => {
    const { batch, message } = await traced({ traceparent: "garbage" }, "order-flow-42");
    const parent = await traceIdParent("order-flow-42");
    expect(batch?.calls).toStrictEqual([["addLink", { context: parent }], ["end"]]);
    expect(message?.parent).toBe(`remote ${parent.spanId} in span s1`);
    for (const blank of ["", "   "]) {
      const none = await traced(undefined, blank);
      expect(none.batch?.calls).toStrictEqual([["end"]]);
      expect(none.message?.parent).toBe("span s1");
      expect(none.message?.options).toStrictEqual({ kind: 4, attributes: { ...COMMON, "babelqueue.key": "k", "babelqueue.attempts": 0, "messaging.message.conversation_id": blank } });
    }
  });

  it("a span without addLink (API before 1.9), and an interceptor called outside run(), still work", async () => {
    const { message } = await traced(undefined, "order-flow-42", { addLink: false });
    expect(message?.calls).toStrictEqual(UNKNOWN);
    const otel = fakeOtel();
    const traces = new BatchTracing({ api: otel.api }, { system: "aws_sqs" });
    let ran = false;
    await traces.intercept(
      async () => {
        ran = true;
      },
      { index: 0, key: "k", attempts: 0, traceId: "order-flow-42" },
    );
    expect(ran).toBe(true);
    const parent = await traceIdParent("order-flow-42");
    expect([otel.spans[0]?.parent, otel.spans[0]?.options]).toStrictEqual([
      `remote ${parent.spanId} in root`,
      { kind: 4, attributes: { ...COMMON, "babelqueue.key": "k", "babelqueue.attempts": 0, "messaging.message.conversation_id": "order-flow-42" } },
    ]);
  });

  it("marks a replay", async () => {
    const { message } = await traced({ "bq-replay-bypass": "1" }, undefined);
    expect((message?.options as { attributes: Record<string, unknown> }).attributes).toStrictEqual({ ...COMMON, "babelqueue.key": "k", "babelqueue.attempts": 0, "babelqueue.replay": true });
  });
});

describe("the end of a batch", () => {
  function gatedRun() {
    let release: () => void = () => undefined;
    const stillRunning = new Promise<void>((resolve) => {
      release = resolve;
    });
    let started: () => void = () => undefined;
    const hasStarted = new Promise<void>((resolve) => {
      started = resolve;
    });
    const run = async () => {
      started();
      await stillRunning;
    };
    return { run, release, hasStarted };
  }

  it("batch-end with nothing pending closes the open spans at once, as unknown", async () => {
    const otel = fakeOtel();
    const traces = new BatchTracing({ api: otel.api }, { system: "aws_sqs" });
    let atBatchEnd: unknown[][] = [];
    await traces.run(async () => {
      await traces.intercept(async () => undefined, { index: 0, key: "k", attempts: 0 });
      traces.observe({ type: "store-step", step: "commit", ids: 1, durationMs: 1, ok: true });
      expect(otel.spans[1]?.calls).toStrictEqual([]);
      traces.observe({ type: "batch-end", size: 1, durationMs: 1, pending: 0 });
      atBatchEnd = [...(otel.spans[1]?.calls ?? [])];
    });
    expect(atBatchEnd).toStrictEqual(UNKNOWN);
    expect(otel.spans[1]?.calls).toStrictEqual(UNKNOWN);
  });

  it("batch-end with a handler pending keeps its span open until its late result", async () => {
    const otel = fakeOtel();
    const traces = new BatchTracing({ api: otel.api }, { system: "aws_sqs" });
    const slow = gatedRun();
    let late: Promise<void> = Promise.resolve();
    await traces.run(async () => {
      late = traces.intercept(slow.run, { index: 0, key: "slow", attempts: 0 });
      await slow.hasStarted;
      traces.observe({ type: "batch-end", size: 1, durationMs: 1, pending: 1 });
    });
    expect(otel.spans[1]?.calls).toStrictEqual([]);
    slow.release();
    await late;
    traces.observe(result(0, "ran", { key: "slow" }));
    expect(otel.spans[1]?.calls).toStrictEqual([...outcome("ran", true), ["end"]]);
  });

  it("an engine that never says batch-end: spans still open end as unknown when the work settles", async () => {
    const otel = fakeOtel();
    const traces = new BatchTracing({ api: otel.api }, { system: "aws_sqs" });
    await traces.run(async () => {
      await traces.intercept(async () => undefined, { index: 0, key: "k", attempts: 0 });
      traces.observe({ type: "store-step", step: "commit", ids: 1, durationMs: 1, ok: true });
    });
    expect(otel.spans[1]?.calls).toStrictEqual(UNKNOWN);
    expect(otel.spans[0]?.calls).toStrictEqual([["end"]]);
  });

  it("an engine that throws: the batch span records it by name, ERROR; open spans end once, as unknown", async () => {
    const otel = fakeOtel();
    const traces = new BatchTracing({ api: otel.api }, { system: "aws_sqs" });
    await runEngineThatThrows(traces, "k");
    expect(otel.spans[0]?.calls).toStrictEqual([["recordException", { name: "RangeError" }], ["setStatus", { code: 2, message: "batch failed before a decision" }], ["end"]]);
    expect(otel.spans[1]?.calls).toStrictEqual(UNKNOWN);
  });
});

describe("a message's outcome on its span", () => {
  it("error outcomes: ERROR, error.type, and the exception once (a handler's own throw by the interceptor)", async () => {
    const otel = fakeOtel();
    const traces = new BatchTracing({ api: otel.api }, { system: "aws_sqs" });
    const handlerError = new TypeError("declined card 4111");
    await traces.run(async () => {
      await expect(
        traces.intercept(
          async () => {
            throw handlerError;
          },
          { index: 0, key: "a", attempts: 0 },
        ),
      ).rejects.toBe(handlerError);
      traces.observe(result(0, "failed", { key: "a", error: handlerError }));
      traces.observe(result(1, "failed", { key: "b" }));
      traces.observe(result(2, "failed", { key: "c", handlerRan: false, error: new StoreUnavailableError("s", "claim", "down") }));
      traces.observe(result(3, "conflict", { key: "d", error: new PayloadConflictError("d", "done", "x", "y") }));
      traces.observe(result(4, "failed", { key: "e", handlerRan: false, error: new GroupBlockedError("g") }));
      traces.observe(result(5, "in-flight", { key: "f", retryAfterMs: 250 }));
      traces.observe(result(6, "in-flight", { key: "g" }));
      traces.observe(result(7, "commit-failed", { key: "h" }));
    });
    const error = (status: string, type: string) => [["setAttribute", "error.type", type], ["setStatus", { code: 2, message: status }], ["end"]];
    expect(otel.spans.slice(1).map((span) => span.calls)).toStrictEqual([
      [["recordException", { name: "TypeError" }], ...outcome("failed", false), ...error("failed", "TypeError")],
      [...outcome("failed", false), ["setStatus", { code: 2, message: "failed" }], ["end"]],
      [...outcome("failed", false), ["recordException", { name: "StoreUnavailableError", code: "STORE_UNAVAILABLE" }], ...error("failed", "STORE_UNAVAILABLE")],
      [...outcome("conflict", false), ["recordException", { name: "PayloadConflictError", code: "PAYLOAD_CONFLICT" }], ...error("conflict", "PAYLOAD_CONFLICT")],
      [...outcome("failed", false), ["recordException", { name: "GroupBlockedError", code: "GROUP_BLOCKED" }], ...error("failed", "GROUP_BLOCKED")],
      [...outcome("in-flight", false), ["setAttribute", "babelqueue.retry_after_ms", 250], ["end"]],
      [...outcome("in-flight", false), ["end"]],
      [...outcome("commit-failed", true), ["setStatus", { code: 2, message: "commit-failed" }], ["end"]],
    ]);
  });
});
