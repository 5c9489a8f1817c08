/**
 * User-written observability extensions (index.ts knows nothing but the `ObservabilityExtension`
 * shape): how the interceptors of the `metrics` and `tracing` extensions are stacked around a
 * handler run, what `createObservability` refuses at setup, and the messages `batchMetrics` and
 * `otelTracing` give for a mistyped or non-object options argument, and where the default logger writes.
 */
import { describe, expect, it, vi } from "vitest";
import { InvalidOptionError } from "../../src/errors.js";
import type { RunInfo, RunInterceptor } from "../../src/events.js";
import { type BatchExtension, createObservability, type ObservabilityExtension } from "../../src/observability/index.js";
import { type MetricsOptions, batchMetrics } from "../../src/observability/metrics.js";
import { type TracingOptions, otelTracing } from "../../src/observability/tracing.js";
import { caught, thrownBy } from "../support/caught.js";
import { fakeOtel } from "./fake-otel.js";
import { result } from "./harness.js";

/** An extension for `option` whose batch part is `part`. */
function extension(option: "metrics" | "tracing", part: BatchExtension): ObservabilityExtension {
  return { extends: option, batch: () => part };
}

/** An interceptor that records, under `name`, when it enters and leaves and what it was told. */
function recordingInterceptor(name: string, trail: string[], infos: RunInfo[]): RunInterceptor {
  return async (run, info) => {
    trail.push(`${name} in`);
    infos.push(info);
    await run();
    trail.push(`${name} out`);
  };
}

const INFO: RunInfo = { index: 3, key: "order-7", attempts: 2, messageId: "m-3" };

describe("an extension that cannot start a batch", () => {
  it("sits that batch out (its batch throws or gives nothing); the other extension and the work go on", async () => {
    for (const broken of [
      () => {
        throw new Error("exporter not ready");
      },
      () => undefined as unknown as BatchExtension,
      () => null as unknown as BatchExtension,
    ]) {
      const trail: string[] = [];
      const seen: string[] = [];
      const observation = createObservability(
        {
          logger: false,
          metrics: { extends: "metrics", batch: broken },
          tracing: extension("tracing", {
            observe: (event) => void seen.push(event.type),
            run: async (work) => {
              trail.push("tracing run");
              return work();
            },
          }),
        },
        { system: "cloudflare_queues" },
      ).batch({ queue: "orders", size: 1 });
      const value = await observation.run(async () => {
        trail.push("work");
        return 42;
      });
      observation.observe(result(0, "duplicate"));
      expect(value).toBe(42);
      expect(trail).toStrictEqual(["tracing run", "work"]);
      expect(seen).toStrictEqual(["result"]);
    }
  });
});

describe("interceptors of two extensions", () => {
  it("both wrap the handler run, the metrics one outside the tracing one, each told the run's info once", async () => {
    const trail: string[] = [];
    const infos: RunInfo[] = [];
    const observation = createObservability(
      {
        logger: false,
        metrics: extension("metrics", { intercept: recordingInterceptor("metrics", trail, infos) }),
        tracing: extension("tracing", { intercept: recordingInterceptor("tracing", trail, infos) }),
      },
      { system: "aws_sqs" },
    ).batch({ queue: "orders", size: 1 });
    const intercept = observation.intercept;
    expect(intercept).toBeTypeOf("function");
    await intercept?.(async () => {
      trail.push("handler");
    }, INFO);
    expect(trail).toStrictEqual(["metrics in", "tracing in", "handler", "tracing out", "metrics out"]);
    expect(infos).toStrictEqual([INFO, INFO]);
  });

  it("a handler's throw goes out through both", async () => {
    const trail: string[] = [];
    const observation = createObservability(
      {
        logger: false,
        metrics: extension("metrics", { intercept: recordingInterceptor("metrics", trail, []) }),
        tracing: extension("tracing", { intercept: recordingInterceptor("tracing", trail, []) }),
      },
      { system: "aws_sqs" },
    ).batch();
    const failure = new Error("handler failed");
    await expect(
      observation.intercept?.(async () => {
        throw failure;
      }, INFO),
    ).rejects.toBe(failure);
    expect(trail).toStrictEqual(["metrics in", "tracing in"]);
  });

  it("when only one extension intercepts, its interceptor alone wraps the run, whichever option it is", async () => {
    for (const [intercepting, other] of [
      ["metrics", "tracing"],
      ["tracing", "metrics"],
    ] as const) {
      const trail: string[] = [];
      const observation = createObservability(
        {
          logger: false,
          [intercepting]: extension(intercepting, { intercept: recordingInterceptor(intercepting, trail, []) }),
          [other]: extension(other, { observe: () => undefined }),
        },
        { system: "aws_sqs" },
      ).batch();
      await observation.intercept?.(async () => {
        trail.push("handler");
      }, INFO);
      expect(trail, intercepting).toStrictEqual([`${intercepting} in`, "handler", `${intercepting} out`]);
    }
  });
});

describe("what createObservability refuses at setup", () => {
  it("an object that names its option but has no batch function", () => {
    for (const option of ["metrics", "tracing"] as const) {
      for (const batch of [undefined, "batch", { observe: () => undefined }]) {
        const error = thrownBy(() => createObservability({ [option]: { extends: option, ...(batch === undefined ? {} : { batch }) } } as never, { system: "aws_sqs" }));
        expect(error, `${option} ${JSON.stringify(batch)}`).toBeInstanceOf(InvalidOptionError);
        expect((error as InvalidOptionError).option).toBe(option);
      }
    }
  });
});

describe("the options arguments of batchMetrics and otelTracing", () => {
  it("an unknown key is refused with a message that names whose option it is not", () => {
    const { api } = fakeOtel();
    const metrics = caught(() => batchMetrics({ namspace: "orders" } as MetricsOptions));
    expect(metrics).toBeInstanceOf(InvalidOptionError);
    expect((metrics as Error).message).toBe('option "namspace" is not an option of metrics (did you mean "namespace"?)');
    const tracing = caught(() => otelTracing({ api, tracr: undefined } as unknown as TracingOptions));
    expect(tracing).toBeInstanceOf(InvalidOptionError);
    expect((tracing as Error).message).toBe('option "tracr" is not an option of tracing (did you mean "tracer"?)');
  });

  it("otelTracing of something that is not an options object says it needs { api } with the OpenTelemetry module", () => {
    const expected =
      'option "tracing" must be false or { api } with the "@opentelemetry/api" module (tracing.api must be the "@opentelemetry/api" module (import * as otel from "@opentelemetry/api"))';
    for (const options of [null, undefined, "@opentelemetry/api", 5]) {
      const error = caught(() => otelTracing(options as unknown as TracingOptions));
      expect(error, String(options)).toBeInstanceOf(InvalidOptionError);
      expect((error as InvalidOptionError).option).toBe("tracing");
      expect((error as Error).message).toBe(expected);
    }
  });
});

describe("the default logger", () => {
  it("with no logger option the outcome lines go to stdout as JSON, made once for every batch", () => {
    const writes: string[] = [];
    const spy = vi.spyOn(process.stdout, "write").mockImplementation((chunk) => {
      writes.push(String(chunk));
      return true;
    });
    try {
      const observability = createObservability({}, { system: "aws_sqs" });
      observability.batch({ queue: "orders" }).observe(result(0, "duplicate", { key: "order-7" }));
      observability.batch({ queue: "orders" }).observe(result(1, "ran"));
    } finally {
      spy.mockRestore();
    }
    expect(writes).toHaveLength(1);
    const line = JSON.parse(writes[0] as string) as Record<string, unknown>;
    expect(line).toMatchObject({ level: "INFO", status: "duplicate", key: "order-7", queue: "orders", logger: "babelqueue-serverless" });
  });
});
