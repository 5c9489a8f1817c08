/**
 * Observability of a queue consumer, put together from the handler options `logger`, `metrics`
 * and `tracing`: what a runtime adapter (`sqsHandler`, `queueHandler`) calls once per batch.
 *
 *   const observability = createObservability(options, { system: "aws_sqs" });      // at setup
 *   const batch = observability.batch({ queue, size: records.length });              // per batch
 *   const results = await batch.run(() =>
 *     engine.process(deliveries, { leaseMs, observe: batch.observe, intercept: batch.intercept }));
 *
 * Defaults: outcome logs on (JSON lines), metrics off (opt-in: custom metrics are billed), tracing
 * off (opt-in: it needs the user's `@opentelemetry/api`).
 *
 * What this is *not*: a place where an outcome changes. Every observer is fenced: one that throws
 * is ignored, and the engine's result is returned untouched.
 */
import type { EngineEvent, RunInterceptor } from "../events.js";
import { InvalidOptionError } from "../errors.js";
import { type OptionKeys, checkOptions, optionKeys } from "../store-kit/options.js";
import { type LoggerLike, isLoggerLike, outcomeLogger } from "./log.js";
import { BatchMetrics, type MetricsOptions, type MetricsSinks, metricsSinks } from "./metrics.js";
import { BatchTracing, type MessagingSystem, type TracingOptions, checkTracingOptions } from "./tracing.js";

export { type ErrorFacts, errorFacts } from "./error-facts.js";
export {
  type LineWriter,
  type LogLevel,
  type LoggerLike,
  type OutcomeFields,
  type OutcomeLine,
  type OutcomeStatus,
  jsonLogger,
  outcomeLogger,
  resultLine,
  storeErrorLine,
} from "./log.js";
export {
  ANALYTICS_DOUBLES,
  type AnalyticsEngineLike,
  BatchMetrics,
  type BatchTally,
  type MetricsOptions,
  type PowertoolsMetricsLike,
  STATUS_METRICS,
  STEP_METRICS,
  analyticsDataPoint,
  emfDocuments,
} from "./metrics.js";
export type { OtelApi, OtelContext, OtelSpan, OtelSpanContext, OtelTraceState, OtelTracer } from "./otel-api.js";
export { isReplay, parseTraceparent, spanIdOf, otelTraceId } from "./trace-context.js";
export { BatchTracing, type MessagingSystem, type TracingOptions } from "./tracing.js";

/** The observability options every runtime handler takes. */
export interface ObservabilityOptions<Env = unknown> {
  /**
   * Outcome logs: one line per delivery that was not a plain `ran`, and per store error. Default:
   * JSON lines on stdout/stderr. Give a Powertools `Logger`, pino or `console` to route them
   * (called as `logger.warn(message, fields)`), or `false` to silence them.
   */
  logger?: LoggerLike | false;
  /**
   * Metrics per batch: `true` for CloudWatch EMF on stdout with the defaults, or options (a
   * Powertools `Metrics` instance, a Workers Analytics Engine dataset, namespace, service).
   * Default: off.
   */
  metrics?: boolean | MetricsOptions<Env>;
  /** OpenTelemetry spans per batch and per message: `{ api }` with the `@opentelemetry/api` module. Default: off. */
  tracing?: TracingOptions | false;
}

/** What the adapter knows about one batch. */
export interface BatchFacts<Env = unknown> {
  /** The queue's name (SQS: the last part of `eventSourceARN`; Workers: `batch.queue`). */
  queue?: string;
  /** The number of deliveries. */
  size?: number;
  /** The Worker's `env`, for a metrics option that reads a binding from it. */
  env?: Env;
}

/** The observers of one batch, for `engine.process`. */
export interface BatchObservation {
  /** Pass as the batch's `observe`. */
  readonly observe: (event: EngineEvent) => void;
  /** Pass as the batch's `intercept` (undefined when tracing is off). */
  readonly intercept: RunInterceptor | undefined;
  /** Runs the batch (the engine call) inside the batch span, and writes what is left after it. */
  run<T>(work: () => Promise<T>): Promise<T>;
}

/**
 * The observers a runtime handler builds once (`createObservability`) and asks for per batch: logs,
 * metrics and traces of the engine's events.
 */
export interface Observability<Env = unknown> {
  /** The observers of one batch. Cheap; call it once per batch. */
  batch(facts?: BatchFacts<Env>): BatchObservation;
}

/** Checks the three options now (at handler setup, not per batch) and returns the per-batch factory. */
export function createObservability<Env = unknown>(
  options: ObservabilityOptions<Env>,
  runtime: { system: MessagingSystem },
): Observability<Env> {
  const { logger, metrics, tracing } = options;
  if (logger !== undefined && logger !== false && !isLoggerLike(logger)) {
    throw new InvalidOptionError("logger", "must be false or an object with info, warn and error methods (console, a Powertools Logger, pino)");
  }
  const sinks = checkMetrics(metrics);
  if (tracing !== undefined && tracing !== false) {
    if (typeof tracing === "object" && tracing !== null) checkOptions(tracing, TRACING_OPTION_KEYS, "tracing");
    try {
      checkTracingOptions(tracing);
    } catch (error) {
      throw new InvalidOptionError("tracing", `must be false or { api } with the "@opentelemetry/api" module (${(error as Error).message})`);
    }
  }
  return {
    batch(facts: BatchFacts<Env> = {}): BatchObservation {
      const log = outcomeLogger(logger, facts.queue);
      const batchMetrics = sinks === undefined ? undefined : new BatchMetrics(sinks, facts);
      const traces =
        tracing === undefined || tracing === false
          ? undefined
          : new BatchTracing(tracing, {
              system: runtime.system,
              ...(facts.queue === undefined ? {} : { queue: facts.queue }),
              ...(facts.size === undefined ? {} : { size: facts.size }),
            });
      const observers = [log, batchMetrics && ((event: EngineEvent) => batchMetrics.observe(event)), traces && ((event: EngineEvent) => traces.observe(event))].filter(
        (observer): observer is (event: EngineEvent) => void => observer !== undefined,
      );
      const observe = (event: EngineEvent) => {
        for (const observer of observers) {
          try {
            observer(event);
          } catch {
            // An observer must never change an outcome.
          }
        }
      };
      return {
        observe,
        intercept: traces?.intercept,
        async run<T>(work: () => Promise<T>): Promise<T> {
          try {
            return traces === undefined ? await work() : await traces.run(work);
          } finally {
            try {
              batchMetrics?.finish();
            } catch {
              // as above
            }
          }
        },
      };
    },
  };
}

/** The keys of `ObservabilityOptions`, for the handlers' own option checks. */
export const OBSERVABILITY_OPTION_KEYS: OptionKeys<ObservabilityOptions> = optionKeys<ObservabilityOptions>({ logger: true, metrics: true, tracing: true });
const METRICS_OPTION_KEYS = optionKeys<MetricsOptions>({ namespace: true, service: true, powertools: true, analytics: true, emf: true, write: true });
const TRACING_OPTION_KEYS = optionKeys<TracingOptions>({ api: true, tracer: true });

function checkMetrics<Env>(metrics: ObservabilityOptions<Env>["metrics"]): MetricsSinks<Env> | undefined {
  if (metrics === undefined || typeof metrics === "boolean") return metricsSinks(metrics);
  if (typeof metrics !== "object" || metrics === null) throw new InvalidOptionError("metrics", "must be a boolean or an options object");
  checkOptions(metrics, METRICS_OPTION_KEYS as OptionKeys<MetricsOptions<Env>>, "metrics");
  if (metrics.powertools !== undefined && typeof metrics.powertools?.addMetric !== "function") {
    throw new InvalidOptionError("metrics.powertools", "must be a Powertools Metrics instance (with addMetric)");
  }
  const analytics = metrics.analytics;
  if (analytics !== undefined && typeof analytics !== "function" && typeof analytics?.writeDataPoint !== "function") {
    throw new InvalidOptionError("metrics.analytics", "must be an Analytics Engine dataset or (env) => dataset");
  }
  for (const field of ["namespace", "service"] as const) {
    const value = metrics[field];
    if (value !== undefined && (typeof value !== "string" || value === "" || value.length > 255)) {
      throw new InvalidOptionError(`metrics.${field}`, "must be a string of 1 to 255 characters");
    }
  }
  if (metrics.write !== undefined && typeof metrics.write !== "function") throw new InvalidOptionError("metrics.write", "must be a function");
  return metricsSinks(metrics);
}

/** The queue name of an SQS `eventSourceARN` (`arn:aws:sqs:region:account:name`), else undefined. */
export function queueNameFromArn(arn: unknown): string | undefined {
  if (typeof arn !== "string") return undefined;
  const parts = arn.split(":");
  const name = parts.length >= 6 ? parts[parts.length - 1] : undefined;
  return name === undefined || name === "" ? undefined : name;
}
