/**
 * Batch metrics: EMF documents checked against the EMF specification (./emf-spec.ts), a real
 * Powertools `Metrics` instance, and Analytics Engine data points — from synthetic event sequences
 * and through the batch engine on InMemoryStore.
 */
import { Metrics } from "@aws-lambda-powertools/metrics";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { EngineEvent } from "../../src/events.js";
import { InMemoryStore } from "../../src/memory-store.js";
import { createObservability } from "../../src/observability/index.js";
import {
  ANALYTICS_DOUBLES,
  type AnalyticsEngineLike,
  BatchMetrics,
  type MetricsOptions,
  type PowertoolsMetricsLike,
  batchMetrics,
} from "../../src/observability/metrics.js";
import { metricsSinks } from "../../src/observability/metrics.js";
import { emfViolations } from "./emf-spec.js";
import { body, result, runBatch, step } from "./harness.js";

afterEach(() => {
  vi.restoreAllMocks();
  vi.unstubAllEnvs();
});

function collector(options: Partial<MetricsOptions> = {}) {
  const lines: string[] = [];
  const sinks = metricsSinks({ namespace: "Tests", service: "orders", write: (line) => lines.push(line), ...options });
  if (sinks === undefined) throw new Error("metrics on");
  return { lines, sinks, docs: () => lines.map((line) => JSON.parse(line) as Record<string, unknown>) };
}

describe("EMF from synthetic events", () => {
  it("writes one valid EMF document per batch, at batch-end: counts per status, store-step and handler latency", () => {
    const { lines, sinks, docs } = collector();
    const metrics = new BatchMetrics(sinks, { queue: "orders" });
    metrics.observe({ type: "batch-start", size: 6 });
    metrics.observe(step("claim", 12.3456, 6));
    metrics.observe(result(0, "ran", { key: "a", handlerMs: 5.5 }));
    metrics.observe(result(1, "duplicate", { key: "b" }));
    metrics.observe(result(2, "failed", { key: "c", handlerMs: 7 }));
    metrics.observe(result(3, "conflict", { key: "d" }));
    metrics.observe(step("commit", 8, 1));
    metrics.observe(step("release", 3, 1, false));
    metrics.observe({ type: "store-error", step: "release", ids: 1, error: new Error("x") });
    metrics.observe(result(4, "ran", { key: "e", handlerMs: 4 }));
    metrics.observe(result(5, "in-flight", { key: "f", retryAfterMs: 100 }));
    expect(lines).toHaveLength(0);
    metrics.observe({ type: "batch-end", size: 6, durationMs: 41.2, pending: 0 });
    expect(lines).toHaveLength(1);
    expect(emfViolations(lines[0] as string)).toEqual([]);
    const [doc] = docs();
    expect(doc).toMatchObject({
      service: "orders",
      Messages: 6,
      Ran: 2,
      Duplicate: 1,
      InFlight: 1,
      Failed: 1,
      Invalid: 0,
      Conflict: 1,
      CommitFailed: 0,
      StoreErrors: 1,
      StoreClaimMs: [12.35],
      StoreCommitMs: [8],
      StoreReleaseMs: [3],
      HandlerMs: [5.5, 7, 4],
      BatchMs: 41.2,
    });
    const aws = doc?._aws as { CloudWatchMetrics: { Namespace: string; Dimensions: string[][]; Metrics: { Name: string; Unit: string }[] }[] };
    expect(aws.CloudWatchMetrics[0]?.Namespace).toBe("Tests");
    // Bounded dimensions: service only. No key, id or message id anywhere in the document.
    expect(aws.CloudWatchMetrics[0]?.Dimensions).toEqual([["service"]]);
    expect(lines[0]).not.toMatch(/"[a-f]"/);
    expect(Object.keys(doc ?? {}).filter((key) => typeof doc?.[key] === "string")).toEqual(["service"]);
    const units = Object.fromEntries(aws.CloudWatchMetrics[0]?.Metrics.map((m) => [m.Name, m.Unit]) ?? []);
    expect(units).toMatchObject({ Ran: "Count", StoreClaimMs: "Milliseconds", HandlerMs: "Milliseconds", BatchMs: "Milliseconds" });
    expect(units.StoreSeenMs).toBeUndefined(); // a step that did not happen is not written
    // Nothing more at finish().
    metrics.finish();
    expect(lines).toHaveLength(1);
  });

  it("writes late results (handlers past the deadline) in a second document once the last one is in", () => {
    const { lines, sinks, docs } = collector();
    const metrics = new BatchMetrics(sinks, {});
    metrics.observe({ type: "batch-start", size: 3 });
    metrics.observe(result(0, "ran", { handlerMs: 1 }));
    metrics.observe(result(1, "duplicate"));
    metrics.observe(result(2, "in-flight")); // the engine's answer for a handler still running
    metrics.observe({ type: "batch-end", size: 3, durationMs: 900, pending: 1 });
    metrics.finish(); // the handler answered; the late result is still expected
    expect(docs().map((doc) => [doc.Messages, doc.InFlight])).toEqual([[3, 1]]);
    metrics.observe(step("commit", 6));
    metrics.observe({ ...(result(2, "ran", { handlerMs: 1200 }) as Extract<EngineEvent, { type: "result" }>), late: true });
    expect(lines).toHaveLength(2);
    // The delivery was counted in Messages at the answer: the late document adds its status only.
    expect(docs()[1]).toMatchObject({ Messages: 0, Ran: 1, Duplicate: 0, InFlight: 0, HandlerMs: [1200], StoreCommitMs: [6] });
    expect(docs()[1]?.BatchMs).toBeUndefined();
    for (const line of lines) expect(emfViolations(line)).toEqual([]);
  });

  it("splits more than 100 observations of one latency over extra documents (EMF's limit)", () => {
    const { lines, sinks, docs } = collector();
    const metrics = new BatchMetrics(sinks, {});
    for (let i = 0; i < 250; i += 1) metrics.observe(result(i, "ran", { handlerMs: i }));
    metrics.finish();
    expect(lines).toHaveLength(3);
    for (const line of lines) expect(emfViolations(line)).toEqual([]);
    expect(docs().map((doc) => (doc.HandlerMs as number[]).length)).toEqual([100, 100, 50]);
    expect(docs().map((doc) => doc.Ran)).toEqual([250, undefined, undefined]);
    expect(docs().flatMap((doc) => doc.HandlerMs as number[])).toEqual(Array.from({ length: 250 }, (_, i) => i));
  });

  it("writes nothing for an empty batch, and a throwing sink changes nothing", () => {
    const { lines, sinks } = collector();
    new BatchMetrics(sinks, {}).finish();
    expect(lines).toHaveLength(0);
    const broken = metricsSinks({
      write: () => {
        throw new Error("stdout closed");
      },
      analytics: {
        writeDataPoint: () => {
          throw new Error("binding gone");
        },
      },
      emf: true,
    });
    const metrics = new BatchMetrics(broken as NonNullable<typeof broken>, {});
    metrics.observe(result(0, "ran"));
    expect(() => metrics.finish()).not.toThrow();
  });
});

describe("defaults and options", () => {
  it("batchMetrics() prints EMF to stdout with the Powertools / Lambda environment's namespace and service", () => {
    vi.stubEnv("POWERTOOLS_METRICS_NAMESPACE", "Shop");
    vi.stubEnv("POWERTOOLS_SERVICE_NAME", "");
    vi.stubEnv("AWS_LAMBDA_FUNCTION_NAME", "orders-consumer");
    const out = vi.spyOn(process.stdout, "write").mockImplementation(() => true);
    const observation = createObservability({ metrics: batchMetrics(), logger: false }, { system: "aws_sqs" }).batch({ size: 1 });
    observation.observe(result(0, "ran"));
    observation.observe({ type: "batch-end", size: 1, durationMs: 3, pending: 0 });
    expect(out).toHaveBeenCalledTimes(1);
    const line = String(out.mock.calls[0]?.[0]);
    expect(line.endsWith("}\n")).toBe(true);
    expect(emfViolations(line.trim())).toEqual([]);
    const doc = JSON.parse(line) as { service: string; _aws: { CloudWatchMetrics: { Namespace: string }[] } };
    expect(doc.service).toBe("orders-consumer");
    expect(doc._aws.CloudWatchMetrics[0]?.Namespace).toBe("Shop");
  });

  it("is off by default, and rejects malformed options at setup", () => {
    const out = vi.spyOn(process.stdout, "write").mockImplementation(() => true);
    const observation = createObservability({ logger: false }, { system: "aws_sqs" }).batch();
    observation.observe(result(0, "ran"));
    observation.observe({ type: "batch-end", size: 1, durationMs: 3, pending: 0 });
    expect(out).not.toHaveBeenCalled();
    const make = (metrics: unknown) => () => createObservability({ metrics: batchMetrics(metrics as MetricsOptions) }, { system: "aws_sqs" });
    expect(make({ powertools: {} })).toThrow(/metrics.powertools/);
    expect(make({ analytics: 3 })).toThrow(/metrics.analytics/);
    expect(make({ namespace: "" })).toThrow(/metrics.namespace/);
    expect(make("yes")).toThrow(/option "metrics"/);
    expect(make({ analytics: () => undefined })).not.toThrow();
    // The option takes the extension, not its options: the message says where the extension comes from.
    const raw = (metrics: unknown) => () => createObservability({ metrics: metrics as false }, { system: "aws_sqs" });
    for (const metrics of [true, {}, { powertools: { addMetric: () => undefined } }, { extends: "tracing", batch: () => ({}) }]) {
      expect(raw(metrics)).toThrow('option "metrics" must be false or batchMetrics({ … }) from "babelqueue-serverless/metrics"');
    }
  });
});

describe("Powertools Metrics", () => {
  it("adds every count and latency to the user's Metrics instance; its own flush writes one valid EMF document", () => {
    const out: string[] = [];
    vi.spyOn(process.stdout, "write").mockImplementation((chunk) => {
      out.push(String(chunk));
      return true;
    });
    const powertools = new Metrics({ namespace: "Shop", serviceName: "orders" });
    const typed: PowertoolsMetricsLike = powertools; // the real class fits the structural type
    const observation = createObservability({ logger: false, metrics: batchMetrics({ powertools: typed }) }, { system: "aws_sqs" }).batch({ size: 3 });
    observation.observe({ type: "batch-start", size: 3 });
    observation.observe(step("claim", 10, 3));
    observation.observe(result(0, "ran", { handlerMs: 2 }));
    observation.observe(result(1, "ran", { handlerMs: 3 }));
    observation.observe(result(2, "commit-failed", { handlerMs: 4 }));
    observation.observe({ type: "batch-end", size: 3, durationMs: 20, pending: 0 });
    expect(out.join("")).toBe(""); // nothing printed by us: Powertools flushes
    powertools.publishStoredMetrics();
    const lines = out.join("").trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(emfViolations(lines[0] as string)).toEqual([]);
    expect(JSON.parse(lines[0] as string)).toMatchObject({ service: "orders", Messages: 3, Ran: 2, CommitFailed: 1, Failed: 0, StoreClaimMs: 10, HandlerMs: [2, 3, 4], BatchMs: 20 });
  });
});

describe("Workers Analytics Engine", () => {
  // A recording dataset: in Node there is no Analytics Engine binding to read back (workerd's is write-only).
  function dataset() {
    const points: { indexes: string[]; blobs: string[]; doubles: number[] }[] = [];
    const binding: AnalyticsEngineLike = { writeDataPoint: (point) => void points.push(point) };
    return { points, binding };
  }

  it("writes one data point per batch, from the binding in env, columns in ANALYTICS_DOUBLES order, and no EMF", () => {
    const { points, binding } = dataset();
    const out = vi.spyOn(process.stdout, "write").mockImplementation(() => true);
    const observation = createObservability<{ BQ_METRICS: AnalyticsEngineLike }>(
      { logger: false, metrics: batchMetrics<{ BQ_METRICS: AnalyticsEngineLike }>({ service: "orders-worker", analytics: (env) => env.BQ_METRICS }) },
      { system: "cloudflare_queues" },
    ).batch({ queue: "jobs", size: 4, env: { BQ_METRICS: binding } });
    observation.observe({ type: "batch-start", size: 4 });
    observation.observe(step("claim", 5));
    observation.observe(step("commit", 7));
    observation.observe(result(0, "ran", { handlerMs: 2 }));
    observation.observe(result(1, "ran", { handlerMs: 3 }));
    observation.observe(result(2, "duplicate"));
    observation.observe(result(3, "invalid"));
    observation.observe({ type: "store-error", step: "seen", ids: 1, error: new Error("x") });
    observation.observe({ type: "batch-end", size: 4, durationMs: 30, pending: 0 });
    expect(out).not.toHaveBeenCalled();
    expect(points).toHaveLength(1);
    const point = points[0] as (typeof points)[number];
    expect(point.indexes).toEqual(["orders-worker"]);
    expect(point.blobs).toEqual(["orders-worker", "jobs"]);
    expect(point.doubles).toHaveLength(ANALYTICS_DOUBLES.length);
    expect(point.doubles.length).toBeLessThanOrEqual(20);
    const columns = Object.fromEntries(ANALYTICS_DOUBLES.map((name, i) => [name, point.doubles[i]]));
    expect(columns).toEqual({
      messages: 4,
      ran: 2,
      duplicate: 1,
      in_flight: 0,
      failed: 0,
      invalid: 1,
      conflict: 0,
      commit_failed: 0,
      store_errors: 1,
      batch_ms: 30,
      handler_ms: 5,
      claim_ms: 5,
      seen_ms: 0,
      commit_ms: 7,
      release_ms: 0,
      transact_ms: 0,
    });
  });
});

describe("through the batch engine", () => {
  it("counts a real batch on InMemoryStore, with or without the engine's batch events", async () => {
    for (const batchEvents of [false, true]) {
      const store = new InMemoryStore({ namespace: `metrics-${batchEvents}` });
      await store.remember("seen-before");
      const lines: string[] = [];
      const observation = createObservability({ logger: false, metrics: batchMetrics({ service: "orders", write: (line) => lines.push(line) }) }, { system: "aws_sqs" }).batch({
        size: 5,
      });
      const results = await runBatch(
        store,
        (message) => {
          if (message.data.mode === "throw") throw new Error("no");
        },
        [{ body: body("m1") }, { body: body("m2") }, { body: body("seen-before") }, { body: body("m3", { mode: "throw" }) }, { body: "{" }],
        observation,
        { batchEvents },
      );
      expect(results.map((r) => r.status)).toEqual(["ran", "ran", "duplicate", "failed", "invalid"]);
      expect(lines).toHaveLength(1);
      expect(emfViolations(lines[0] as string)).toEqual([]);
      expect(JSON.parse(lines[0] as string)).toMatchObject({ Messages: 5, Ran: 2, Duplicate: 1, Failed: 1, Invalid: 0 + 1, StoreErrors: 0 });
      expect("BatchMs" in JSON.parse(lines[0] as string)).toBe(batchEvents);
    }
  });
});
