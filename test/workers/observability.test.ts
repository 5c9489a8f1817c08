/**
 * The observability modules inside workerd: outcome lines go to `console` (no Node streams), the
 * trace_id mapping hashes with Web Crypto, and metrics reach an Analytics Engine dataset (a
 * recording one: workerd's binding is write-only, nothing could be read back).
 */
import { describe, expect, it, vi } from "vitest";
import { createObservability } from "../../src/observability/index.js";
import { batchMetrics } from "../../src/observability/metrics.js";
import { otelTraceId } from "../../src/observability/trace-context.js";

describe("observability in workerd", () => {
  it("writes outcome lines as JSON through console, and one Analytics Engine point per batch", async () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => undefined);
    const info = vi.spyOn(console, "info").mockImplementation(() => undefined);
    const points: { indexes: string[]; blobs: string[]; doubles: number[] }[] = [];
    const observation = createObservability<{ METRICS: { writeDataPoint(p: (typeof points)[number]): void } }>(
      { metrics: batchMetrics<{ METRICS: { writeDataPoint(p: (typeof points)[number]): void } }>({ service: "jobs-consumer", analytics: (env) => env.METRICS }) },
      { system: "cloudflare_queues" },
    ).batch({ queue: "jobs", size: 2, env: { METRICS: { writeDataPoint: (point) => void points.push(point) } } });
    await observation.run(async () => {
      observation.observe({ type: "batch-start", size: 2 });
      observation.observe({ type: "result", index: 0, attempts: 1, messageId: "m0", result: { status: "duplicate", ack: true, dedupe: "claim", handlerRan: false, key: "a" } });
      observation.observe({ type: "result", index: 1, attempts: 0, messageId: "m1", result: { status: "failed", ack: false, dedupe: "claim", handlerRan: true, key: "b", error: new Error("secret") } });
      observation.observe({ type: "batch-end", size: 2, durationMs: 12, pending: 0 });
    });
    expect(info).toHaveBeenCalledTimes(1);
    expect(warn).toHaveBeenCalledTimes(1);
    expect(JSON.parse(String(info.mock.calls[0]?.[0]))).toMatchObject({ level: "INFO", status: "duplicate", key: "a", messageId: "m0", queue: "jobs" });
    expect(String(warn.mock.calls[0]?.[0])).not.toContain("secret");
    expect(points).toHaveLength(1);
    expect(points[0]?.blobs).toEqual(["jobs-consumer", "jobs"]);
    expect(points[0]?.doubles.slice(0, 5)).toEqual([2, 0, 1, 0, 1]);
    vi.restoreAllMocks();
  });

  it("maps trace_id with Web Crypto, as on Node", async () => {
    expect(await otelTraceId("7b3f9c2a-e41d-4f88-9b2a-1c0d5e6f7a8b")).toBe("7b3f9c2ae41d4f889b2a1c0d5e6f7a8b");
    expect(await otelTraceId("order-flow-42")).toBe("5adef4992a1e30a9b23254f9309e7041"); // sha256("order-flow-42"), as node:crypto gives it
  });
});
