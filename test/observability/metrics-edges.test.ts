/**
 * Batch metrics, exactly: the whole EMF document of a tally, what counts and what is skipped (a
 * non-finite duration, an unknown status), when a batch with only a store error, a step or a
 * batch duration is still written, EMF's 100-value limit at its edge, the Analytics Engine index
 * limit, the option defaults, and when `BatchMetrics` writes around a `batch-end` with late results.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import type { EngineEvent } from "../../src/events.js";
import {
  type AnalyticsEngineLike,
  analyticsDataPoint,
  BatchMetrics,
  batchMetrics,
  type BatchTally,
  count,
  emfDocuments,
  emptyTally,
  type MetricsOptions,
  metricsSinks,
  STATUS_METRICS,
  STEP_METRICS,
} from "../../src/observability/metrics.js";
import { emfViolations } from "./emf-spec.js";
import { sqsHandler } from "../../handlers/lambda-sqs.js";
import { lambdaContext, sqsRecord } from "../../scripts/lambda-events.js";
import { InMemoryStore } from "../../src/memory-store.js";
import { deferred } from "../support/deferred.js";
import { body, result, step, withGlobal } from "./harness.js";

afterEach(() => {
  vi.restoreAllMocks();
  vi.unstubAllEnvs();
  vi.useRealTimers();
});

const NOW = 1_700_000_000_000;

function tallyOf(events: EngineEvent[]): BatchTally {
  const tally = emptyTally();
  for (const event of events) count(tally, event);
  return tally;
}

/** A doc's metric values: everything but `_aws` and `service`. */
function valuesOf(doc: Record<string, unknown> | undefined): Record<string, unknown> {
  const { _aws, service, ...values } = doc ?? {};
  return values;
}

const ZERO_COUNTS = { Messages: 0, Ran: 0, Duplicate: 0, InFlight: 0, Failed: 0, Invalid: 0, Conflict: 0, CommitFailed: 0, StoreErrors: 0 };

function collector(options: Partial<MetricsOptions> = {}) {
  const lines: string[] = [];
  const sinks = metricsSinks({ namespace: "Tests", service: "orders", write: (line) => lines.push(line), ...options });
  if (sinks === undefined) throw new Error("metrics on");
  const docs = () => lines.map((line) => JSON.parse(line) as Record<string, unknown>);
  return { lines, sinks, docs, values: () => docs().map(valuesOf) };
}

describe("names", () => {
  it("one metric name per status and per store step", () => {
    expect(STATUS_METRICS).toStrictEqual({
      ran: "Ran",
      duplicate: "Duplicate",
      "in-flight": "InFlight",
      failed: "Failed",
      invalid: "Invalid",
      conflict: "Conflict",
      "commit-failed": "CommitFailed",
    });
    expect(STEP_METRICS).toStrictEqual({ claim: "StoreClaimMs", seen: "StoreSeenMs", commit: "StoreCommitMs", release: "StoreReleaseMs", transact: "StoreTransactMs" });
  });
});

describe("emfDocuments", () => {
  it("the whole document: every count, each step's and the handler's observations, the batch duration", () => {
    vi.useFakeTimers();
    vi.setSystemTime(NOW);
    const tally = tallyOf([
      { type: "batch-start", size: 3 },
      step("claim", 1.234),
      step("seen", 2),
      step("commit", 3),
      step("release", 4),
      step("transact", 5),
      step("transact", 6.005),
      result(0, "ran", { handlerMs: 10.126 }),
      result(1, "commit-failed", { handlerMs: 11 }),
      result(2, "invalid"),
      { type: "store-error", step: "commit", ids: 1, error: new Error("x") },
      { type: "batch-end", size: 3, durationMs: 99.999, pending: 0 },
    ]);
    const docs = emfDocuments(tally, { namespace: "NS", service: "svc" });
    const metric = (Name: string, Unit: string) => ({ Name, Unit });
    expect(docs).toStrictEqual([
      {
        _aws: {
          Timestamp: NOW,
          CloudWatchMetrics: [
            {
              Namespace: "NS",
              Dimensions: [["service"]],
              Metrics: [
                metric("Messages", "Count"),
                metric("Ran", "Count"),
                metric("Duplicate", "Count"),
                metric("InFlight", "Count"),
                metric("Failed", "Count"),
                metric("Invalid", "Count"),
                metric("Conflict", "Count"),
                metric("CommitFailed", "Count"),
                metric("StoreErrors", "Count"),
                metric("StoreClaimMs", "Milliseconds"),
                metric("StoreSeenMs", "Milliseconds"),
                metric("StoreCommitMs", "Milliseconds"),
                metric("StoreReleaseMs", "Milliseconds"),
                metric("StoreTransactMs", "Milliseconds"),
                metric("HandlerMs", "Milliseconds"),
                metric("BatchMs", "Milliseconds"),
              ],
            },
          ],
        },
        service: "svc",
        Messages: 3,
        Ran: 1,
        Duplicate: 0,
        InFlight: 0,
        Failed: 0,
        Invalid: 1,
        Conflict: 0,
        CommitFailed: 1,
        StoreErrors: 1,
        StoreClaimMs: [1.23],
        StoreSeenMs: [2],
        StoreCommitMs: [3],
        StoreReleaseMs: [4],
        StoreTransactMs: [5, 6.01],
        HandlerMs: [10.13, 11],
        BatchMs: 100,
      },
    ]);
    expect(emfViolations(JSON.stringify(docs[0]))).toStrictEqual([]);
    expect(emfDocuments(tally, { namespace: "NS", service: "svc", timestamp: 5 })[0]?._aws).toMatchObject({ Timestamp: 5 });
  });

  it("exactly 100 observations fit in one document; 101 take a second", () => {
    const hundred = tallyOf(Array.from({ length: 100 }, (_, i) => result(i, "ran", { handlerMs: i })));
    expect(emfDocuments(hundred, { namespace: "NS", service: "svc" })).toHaveLength(1);
    const more = tallyOf(Array.from({ length: 101 }, (_, i) => result(i, "ran", { handlerMs: i })));
    const docs = emfDocuments(more, { namespace: "NS", service: "svc" });
    expect(docs.map(valuesOf)[1]).toStrictEqual({ HandlerMs: [100] });
    expect(docs[1]?._aws).toMatchObject({ CloudWatchMetrics: [{ Metrics: [{ Name: "HandlerMs", Unit: "Milliseconds" }] }] });
  });
});

describe("count", () => {
  it("skips a non-finite or absent duration and an unknown status (still a message)", () => {
    const tally = tallyOf([
      result(0, "ran"),
      result(1, "ran", { handlerMs: Number.NaN }),
      result(2, "ran", { handlerMs: Number.POSITIVE_INFINITY }),
      result(3, "weird"),
      step("claim", Number.NaN),
      { type: "batch-end", size: 4, durationMs: Number.NaN, pending: 0 },
    ]);
    expect(tally).toStrictEqual({
      messages: 4,
      statuses: { ran: 3, duplicate: 0, "in-flight": 0, failed: 0, invalid: 0, conflict: 0, "commit-failed": 0 },
      storeErrors: 0,
      steps: {},
      handlerMs: [],
    });
    expect(emfDocuments(tally, { namespace: "NS", service: "svc" }).map(valuesOf)).toStrictEqual([{ ...ZERO_COUNTS, Messages: 4, Ran: 3 }]);
  });
});

describe("analyticsDataPoint", () => {
  it("the service is the index up to 96 bytes, else its first 32 characters; no queue is an empty blob", () => {
    const at = (service: string) => analyticsDataPoint(emptyTally(), { service });
    const ascii96 = "s".repeat(96);
    expect(at(ascii96)).toStrictEqual({ indexes: [ascii96], blobs: [ascii96, ""], doubles: new Array(16).fill(0) });
    expect(at("s".repeat(97)).indexes).toStrictEqual(["s".repeat(32)]);
    expect(at("é".repeat(48)).indexes).toStrictEqual(["é".repeat(48)]); // 96 bytes
    expect(at("é".repeat(49)).indexes).toStrictEqual(["é".repeat(32)]); // 98 bytes
    expect(analyticsDataPoint(emptyTally(), { service: "svc", queue: "jobs" }).blobs).toStrictEqual(["svc", "jobs"]);
  });
});

describe("metricsSinks", () => {
  const clearEnv = () => {
    vi.stubEnv("POWERTOOLS_METRICS_NAMESPACE", "");
    vi.stubEnv("POWERTOOLS_SERVICE_NAME", "");
    vi.stubEnv("AWS_LAMBDA_FUNCTION_NAME", "");
  };

  it("off for undefined and false; true is EMF with the defaults", () => {
    clearEnv();
    expect(metricsSinks(undefined)).toBeUndefined();
    expect(metricsSinks(false)).toBeUndefined();
    expect(metricsSinks(true)).toStrictEqual({ namespace: "BabelQueue", service: "babelqueue-serverless", emf: true, write: expect.any(Function) });
    expect(metricsSinks({})).toStrictEqual({ namespace: "BabelQueue", service: "babelqueue-serverless", emf: true, write: expect.any(Function) });
  });

  it("the service from POWERTOOLS_SERVICE_NAME, else AWS_LAMBDA_FUNCTION_NAME; an option wins", () => {
    clearEnv();
    vi.stubEnv("AWS_LAMBDA_FUNCTION_NAME", "fn");
    expect(metricsSinks(true)?.service).toBe("fn");
    vi.stubEnv("POWERTOOLS_SERVICE_NAME", "svc");
    vi.stubEnv("POWERTOOLS_METRICS_NAMESPACE", "Shop");
    expect(metricsSinks(true)).toMatchObject({ namespace: "Shop", service: "svc" });
    expect(metricsSinks({ namespace: "N", service: "S" })).toMatchObject({ namespace: "N", service: "S" });
  });

  it("the defaults where there is no process or no process.env (workerd)", () => {
    const defaults = { namespace: "BabelQueue", service: "babelqueue-serverless", emf: true, write: expect.any(Function) };
    expect(withGlobal("process", undefined, () => metricsSinks(true))).toStrictEqual(defaults);
    expect(withGlobal("process", {}, () => metricsSinks(true))).toStrictEqual(defaults);
  });

  it("a Powertools instance or an Analytics Engine dataset turns EMF off unless asked for", () => {
    clearEnv();
    const powertools = { addMetric: () => undefined };
    const analytics: AnalyticsEngineLike = { writeDataPoint: () => undefined };
    expect(metricsSinks({ powertools })).toStrictEqual({ namespace: "BabelQueue", service: "babelqueue-serverless", emf: false, write: expect.any(Function), powertools });
    expect(metricsSinks({ analytics })).toStrictEqual({ namespace: "BabelQueue", service: "babelqueue-serverless", emf: false, write: expect.any(Function), analytics });
    expect(metricsSinks({ analytics, emf: true })?.emf).toBe(true);
    expect(metricsSinks({ emf: false })?.emf).toBe(false);
  });

  it("the default writer prints one line to stdout", () => {
    const out = vi.spyOn(process.stdout, "write").mockImplementation(() => true);
    metricsSinks(true)?.write("{}");
    expect(out.mock.calls).toStrictEqual([["{}\n"]]);
  });
});

describe("BatchMetrics: what is worth a document", () => {
  it("a batch with only a store error, only a store step, or only a batch duration is written", () => {
    const { sinks, values } = collector();
    const only = (event: EngineEvent) => {
      const metrics = new BatchMetrics(sinks, {});
      metrics.observe(event);
      metrics.finish();
    };
    only({ type: "store-error", step: "claim", ids: 1, error: new Error("x") });
    only(step("seen", 4));
    only({ type: "batch-end", size: 0, durationMs: 7, pending: 0 });
    only({ type: "batch-start", size: 0 });
    expect(values()).toStrictEqual([
      { ...ZERO_COUNTS, StoreErrors: 1 },
      { ...ZERO_COUNTS, StoreSeenMs: [4] },
      { ...ZERO_COUNTS, BatchMs: 7 },
    ]);
  });

  it("writes one data point to an Analytics Engine dataset given as an object", () => {
    const points: unknown[] = [];
    const sinks = metricsSinks({ service: "svc", analytics: { writeDataPoint: (point) => void points.push(point) } });
    const metrics = new BatchMetrics(sinks as NonNullable<typeof sinks>, { queue: "jobs" });
    metrics.observe(result(0, "duplicate"));
    metrics.finish();
    expect(points).toStrictEqual([{ indexes: ["svc"], blobs: ["svc", "jobs"], doubles: [1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0] }]);
  });
  it("an analytics function that throws is no dataset: the other sinks still get the batch", () => {
    const added: unknown[][] = [];
    const sinks = metricsSinks({
      powertools: { addMetric: (...args: unknown[]) => void added.push(args) },
      analytics: () => {
        throw new Error("no binding");
      },
    });
    const metrics = new BatchMetrics(sinks as NonNullable<typeof sinks>, {});
    metrics.observe(result(0, "ran"));
    expect(() => metrics.finish()).not.toThrow();
    expect(added.slice(0, 3)).toStrictEqual([
      ["Messages", "Count", 1],
      ["Ran", "Count", 1],
      ["Duplicate", "Count", 0],
    ]);
  });
});

describe("BatchMetrics: writing around batch-end", () => {
  it("an engine that never says batch-end: finish() writes, even with fewer results than the size", () => {
    const { values } = ((c) => {
      const metrics = new BatchMetrics(c.sinks, {});
      metrics.observe(result(0, "ran"));
      metrics.finish();
      return c;
    })(collector());
    expect(values()).toStrictEqual([{ ...ZERO_COUNTS, Messages: 1, Ran: 1 }]);
  });

  // The engine's order at a deadline: each handler still running is reported in-flight before
  // batch-end (pending counts them), and its real outcome follows, marked late.
  const late = (index: number, status: string): EngineEvent => ({ ...(result(index, status) as Extract<EngineEvent, { type: "result" }>), late: true });

  it("late results: written once the last expected one is in, not before, with their statuses and no second Messages count", () => {
    const { lines, sinks, values } = collector();
    const metrics = new BatchMetrics(sinks, {});
    metrics.observe({ type: "batch-start", size: 3 });
    metrics.observe(result(0, "ran"));
    metrics.observe(result(1, "in-flight"));
    metrics.observe(result(2, "in-flight"));
    metrics.observe({ type: "batch-end", size: 3, durationMs: 5, pending: 2 });
    expect(lines).toHaveLength(1);
    metrics.observe(step("release", 2)); // not a result: no write
    metrics.finish(); // two late results still expected
    metrics.observe(late(1, "ran"));
    expect(lines).toHaveLength(1);
    metrics.observe(late(2, "commit-failed"));
    expect(values()).toStrictEqual([
      { ...ZERO_COUNTS, Messages: 3, Ran: 1, InFlight: 2, BatchMs: 5 },
      { ...ZERO_COUNTS, Ran: 1, CommitFailed: 1, StoreReleaseMs: [2] },
    ]);
  });

  it("after the last late result, a late store step waits for finish()", () => {
    const { lines, sinks, values } = collector();
    const metrics = new BatchMetrics(sinks, {});
    metrics.observe(result(0, "ran"));
    metrics.observe(result(1, "in-flight"));
    metrics.observe({ type: "batch-end", size: 2, durationMs: 5, pending: 1 });
    metrics.observe(late(1, "ran"));
    expect(lines).toHaveLength(2);
    metrics.observe(step("commit", 3));
    expect(lines).toHaveLength(2);
    metrics.finish();
    expect(values()).toStrictEqual([
      { ...ZERO_COUNTS, Messages: 2, Ran: 1, InFlight: 1, BatchMs: 5 },
      { ...ZERO_COUNTS, Ran: 1 },
      { ...ZERO_COUNTS, StoreCommitMs: [3] },
    ]);
  });

  it("through sqsHandler: a handler past the deadline is InFlight in the batch's document, its late Ran in one more, counted once", async () => {
    const lines: string[] = [];
    const gate = deferred();
    const store = new InMemoryStore({ namespace: "metrics-late" });
    const handler = sqsHandler({
      store,
      logger: false,
      deadlineMarginMs: 200,
      metrics: batchMetrics({ namespace: "Tests", service: "orders", write: (line) => lines.push(line) }),
      handle: async (message) => {
        if (message.data.slow === true) await gate.promise;
      },
    });
    const response = await handler({ Records: [sqsRecord(body("fast")), sqsRecord(body("slow", { slow: true }), { messageId: "m-slow" })] }, lambdaContext(400));
    expect(response.batchItemFailures).toEqual([{ itemIdentifier: "m-slow" }]);
    expect(lines).toHaveLength(1);
    gate.resolve();
    await vi.waitFor(() => expect(lines).toHaveLength(2));
    expect(await store.seen("slow")).toBe(true);
    const [batch, late] = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect([batch?.Messages, batch?.Ran, batch?.InFlight]).toStrictEqual([2, 1, 1]);
    expect([late?.Messages, late?.Ran, late?.InFlight]).toStrictEqual([0, 1, 0]);
  });

  it("a batch of one: a store step after batch-end is written at finish(), not at once", () => {
    const { lines, sinks, values } = collector();
    const metrics = new BatchMetrics(sinks, {});
    metrics.observe(result(0, "ran"));
    metrics.observe({ type: "batch-end", size: 1, durationMs: 5, pending: 0 });
    metrics.observe(step("release", 1));
    expect(lines).toHaveLength(1);
    metrics.finish();
    expect(values()).toStrictEqual([
      { ...ZERO_COUNTS, Messages: 1, Ran: 1, BatchMs: 5 },
      { ...ZERO_COUNTS, StoreReleaseMs: [1] },
    ]);
  });
});
