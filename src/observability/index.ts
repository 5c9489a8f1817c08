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
 * Metrics and tracing are *extensions*: `metrics: batchMetrics({ … })` from
 * `babelqueue-serverless/metrics`, `tracing: otelTracing({ api })` from `babelqueue-serverless/tracing`.
 * Their code lives in those modules, so it lands only in the bundles of applications that import
 * them; this module knows nothing but the `ObservabilityExtension` shape (a user may write their own).
 *
 * What this is *not*: a place where an outcome changes. Every observer is fenced: one that throws
 * is ignored (an extension whose `batch` throws sits that batch out), and the engine's result is
 * returned untouched; an extension's `run` or `intercept` that throws neither stops the work it
 * wraps nor replaces that work's outcome (`fencedAround`).
 */
import { InvalidOptionError } from "../errors.js";
import type { EngineEvent, RunInterceptor } from "../events.js";
import { type OptionKeys, optionKeys } from "../store-kit/options.js";
import { type LoggerLike, isLoggerLike, lineLogger, outcomeObserver } from "./log.js";

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

/** The `messaging.system` of each runtime: the semantic conventions' `aws_sqs` and `kafka`, and Cloudflare's queues. */
export type MessagingSystem = "aws_sqs" | "kafka" | "cloudflare_queues" | (string & {});

/** What the adapter knows about one batch. */
export interface BatchFacts<Env = unknown> {
  /** The queue's name (SQS: the last part of `eventSourceARN`; Workers: `batch.queue`). */
  queue?: string;
  /** The number of deliveries. */
  size?: number;
  /** The Worker's `env`, for a metrics option that reads a binding from it. */
  env?: Env;
}

/** What an extension adds to one batch. Every member is optional. */
export interface BatchExtension {
  /** Told every engine event of the batch. */
  readonly observe?: (event: EngineEvent) => void;
  /** Wraps each handler run (e.g. to make its span active). */
  readonly intercept?: RunInterceptor;
  /** Runs the batch (the engine call), e.g. inside its span. */
  readonly run?: <T>(work: () => Promise<T>) => Promise<T>;
  /** Called once the batch is answered, whatever happened (e.g. to write what is left). */
  readonly finish?: () => void;
}

/**
 * An observability extension: what the `metrics` and `tracing` options take. `batchMetrics()`
 * (`babelqueue-serverless/metrics`) and `otelTracing()` (`babelqueue-serverless/tracing`) make
 * one; so can you, for another backend.
 */
export interface ObservabilityExtension<Env = unknown> {
  /** Which option it belongs to. */
  readonly extends: "metrics" | "tracing";
  /** The extension's part in one batch. Called once per batch; cheap. */
  batch(facts: BatchFacts<Env>, runtime: { readonly system: MessagingSystem }): BatchExtension;
}

/** The observability options every runtime handler takes. */
export interface ObservabilityOptions<Env = unknown> {
  /**
   * Outcome logs: one line per delivery that was not a plain `ran`, and per store error. Default:
   * JSON lines on stdout/stderr. Give a Powertools `Logger`, pino or `console` to route them
   * (called as `logger.warn(message, fields)`; pino as `logger.warn(fields, message)`, its own
   * order), or `false` to silence them.
   */
  logger?: LoggerLike | false;
  /**
   * Metrics per batch: `batchMetrics()` (CloudWatch EMF on stdout) or `batchMetrics({ … })` (a
   * Powertools `Metrics` instance, a Workers Analytics Engine dataset, namespace, service), from
   * `babelqueue-serverless/metrics`. Default: off.
   */
  metrics?: ObservabilityExtension<Env> | false;
  /** OpenTelemetry spans per batch and per message: `otelTracing({ api })` from `babelqueue-serverless/tracing`. Default: off. */
  tracing?: ObservabilityExtension<Env> | false;
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

/** Where each extension comes from, for the message that refuses anything else. */
const EXTENSION_HINT = {
  metrics: 'batchMetrics({ … }) from "babelqueue-serverless/metrics"',
  tracing: 'otelTracing({ api }) from "babelqueue-serverless/tracing"',
} as const;

function checkExtension<Env>(option: "metrics" | "tracing", value: unknown): ObservabilityExtension<Env> | undefined {
  if (value === undefined || value === false) return undefined;
  const extension = value as Partial<ObservabilityExtension<Env>> | null;
  if (typeof extension !== "object" || extension === null || extension.extends !== option || typeof extension.batch !== "function") {
    throw new InvalidOptionError(option, `must be false or ${EXTENSION_HINT[option]}`);
  }
  return extension as ObservabilityExtension<Env>;
}

/** Runs `call`, ignoring what it throws: an observer must never change an outcome. */
function fenced(call: () => void): void {
  try {
    call();
  } catch {
    // ignored on purpose
  }
}

/**
 * `around(work)`, fenced: an extension that wraps work (a batch, a handler run) must not change what
 * the work does. The work runs exactly once — inside `around` when it gets that far, else after it —
 * and its own outcome is returned, whatever `around` throws (e.g. the OpenTelemetry SDK's span
 * processors run inside startSpan and span.end() without a catch: a buggy one throws from there).
 */
async function fencedAround<T>(around: (work: () => Promise<T>) => Promise<T>, work: () => Promise<T>): Promise<T> {
  let running: Promise<T> | undefined;
  const once = (): Promise<T> => {
    running ??= work();
    return running;
  };
  try {
    await around(once);
  } catch {
    // The extension's failure, not the work's: the work's own outcome follows.
  }
  return once();
}

const runAsIs = <T>(work: () => Promise<T>): Promise<T> => work();
const ignore = (): void => undefined;

/** Checks the three options now (at handler setup, not per batch) and returns the per-batch factory. */
export function createObservability<Env = unknown>(
  options: ObservabilityOptions<Env>,
  runtime: { system: MessagingSystem },
): Observability<Env> {
  const { logger } = options;
  if (logger !== undefined && logger !== false && !isLoggerLike(logger)) {
    throw new InvalidOptionError("logger", "must be false or an object with info, warn and error methods (console, a Powertools Logger, pino)");
  }
  // The logger (the default one made here) and its shape are read once, not per batch.
  const write = lineLogger(logger);
  const extensions = [checkExtension<Env>("metrics", options.metrics), checkExtension<Env>("tracing", options.tracing)].filter(
    (extension): extension is ObservabilityExtension<Env> => extension !== undefined,
  );
  return {
    batch(facts: BatchFacts<Env> = {}): BatchObservation {
      const log = write === undefined ? undefined : outcomeObserver(write, facts.queue);
      // The default (logs only): the logger's own observer, nothing wrapped around the batch.
      if (extensions.length === 0) return { observe: log ?? ignore, intercept: undefined, run: runAsIs };
      const parts: BatchExtension[] = [];
      for (const extension of extensions) {
        // An extension that cannot start a batch (it throws, or gives no object) observes nothing of it.
        let part: BatchExtension | undefined;
        fenced(() => {
          part = extension.batch(facts, runtime);
        });
        if (typeof part === "object" && part !== null) parts.push(part);
      }
      const observers = [log, ...parts.map((part) => part.observe)].filter((observe): observe is (event: EngineEvent) => void => observe !== undefined);
      let intercept: RunInterceptor | undefined;
      for (const part of parts) {
        const inner = part.intercept;
        if (inner === undefined) continue;
        const outer = intercept;
        const fencedInner: RunInterceptor = (run, info) => fencedAround((work) => inner(work, info), run);
        intercept = outer === undefined ? fencedInner : (run, info) => outer(() => fencedInner(run, info), info);
      }
      return {
        observe: (event) => {
          for (const observer of observers) fenced(() => observer(event));
        },
        intercept,
        async run<T>(work: () => Promise<T>): Promise<T> {
          let wrapped = work;
          for (const part of parts) {
            const around = part.run;
            if (around === undefined) continue;
            const inner = wrapped;
            wrapped = () => fencedAround(around, inner);
          }
          try {
            return await wrapped();
          } finally {
            for (const part of parts) if (part.finish !== undefined) fenced(part.finish);
          }
        },
      };
    },
  };
}

/**
 * The batch's `observe` and `intercept`, as the engine's options: each left out when nothing uses it
 * (no `observe` for `logger: false` without metrics or tracing, so the engine builds no events).
 */
export function engineHooks(observation: BatchObservation): { observe?: (event: EngineEvent) => void; intercept?: RunInterceptor } {
  const hooks: { observe?: (event: EngineEvent) => void; intercept?: RunInterceptor } = {};
  if (observation.observe !== ignore) hooks.observe = observation.observe;
  if (observation.intercept !== undefined) hooks.intercept = observation.intercept;
  return hooks;
}

/** The keys of `ObservabilityOptions`, for the handlers' own option checks. */
// Stryker disable next-line BooleanLiteral: optionKeys reads only the keys; each `true` lets the compiler check the list against the options type
export const OBSERVABILITY_OPTION_KEYS: OptionKeys<ObservabilityOptions> = optionKeys<ObservabilityOptions>({ logger: true, metrics: true, tracing: true });

/** The queue name of an SQS `eventSourceARN` (`arn:aws:sqs:region:account:name`), else undefined. */
export function queueNameFromArn(arn: unknown): string | undefined {
  if (typeof arn !== "string") return undefined;
  const parts = arn.split(":");
  const name = parts.length >= 6 ? parts[parts.length - 1] : undefined;
  return name === undefined || name === "" ? undefined : name;
}
