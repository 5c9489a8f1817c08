/**
 * OpenTelemetry tracing of a batch: one span for the batch and one per message, following the
 * messaging semantic conventions (`messaging.system`, `messaging.operation.type = process`,
 * `messaging.destination.name`, `messaging.batch.message_count`, `messaging.message.id`), with
 * the outcome as `babelqueue.outcome`.
 *
 * - The batch span is a child of whatever is active when the batch starts (e.g. the Lambda
 *   instrumentation's invocation span) and is active while the engine works, so instrumented store
 *   clients (AWS SDK, fetch) nest under it.
 * - A message whose handler runs gets its span when the run starts; the span is the active
 *   context inside the user's handler, and ends when the message's fate is final (after its
 *   commit; a handler still running at the deadline keeps its span open, with the answer as
 *   `babelqueue.answer`, until its late result). Its parent is the producer's: the `traceparent` header, else the envelope's `trace_id`
 *   (trace-context.ts), else the batch span; it links to the batch span (and the batch span to it).
 * - A message that never runs (duplicate, in-flight, invalid, conflict, a copy, FIFO-blocked) gets
 *   a short span under the batch span when its result arrives.
 * - Error outcomes (failed, invalid, conflict, commit-failed) set the span status to ERROR. An
 *   exception is recorded with its name and code only, never its message (error-facts.ts).
 *
 * `otelTracing(options)` makes the `tracing` option of `sqsHandler` / `queueHandler` (export
 * `babelqueue-serverless/tracing`): this module is bundled only where an application imports it.
 *
 * What this is *not*: a dependency. The user hands over the `@opentelemetry/api` module (otel-api.ts);
 * without a registered tracer provider every span is a no-op, as OpenTelemetry intends.
 */
import type { MessageResult } from "../decision.js";
import { DeadlineExceededError, InvalidOptionError } from "../errors.js";
import type { EngineEvent, RunInfo, RunInterceptor } from "../events.js";
import { checkOptions, optionKeys } from "../store-kit/options.js";
import { errorFacts } from "./error-facts.js";
import type { MessagingSystem, ObservabilityExtension } from "./index.js";
import type { OutcomeStatus } from "./log.js";
import {
  type OtelApi,
  type OtelAttributeValue,
  type OtelContext,
  type OtelSpan,
  type OtelSpanContext,
  type OtelTracer,
  SPAN_KIND_CONSUMER,
  SPAN_STATUS_ERROR,
} from "./otel-api.js";
import { HEADER_TRACEPARENT, HEADER_TRACESTATE, header, isReplay, parseTraceparent, traceIdParent } from "./trace-context.js";

/** Options of the `tracing` option. */
export interface TracingOptions {
  /** The OpenTelemetry API module: `import * as otel from "@opentelemetry/api"` → `tracing: otelTracing({ api: otel })`. */
  api: OtelApi;
  /** The tracer. Default: `api.trace.getTracer("babelqueue-serverless")`. */
  tracer?: OtelTracer;
}

export type { MessagingSystem } from "./index.js";

const ERROR_OUTCOMES: ReadonlySet<string> = new Set<OutcomeStatus>(["failed", "invalid", "conflict", "commit-failed"]);
const MAX_KEY = 256;

/** Checks a `tracing` option; throws a TypeError naming what is missing. */
export function checkTracingOptions(options: TracingOptions): void {
  const api = options?.api as Partial<OtelApi> | undefined;
  if (
    typeof api?.trace?.getTracer !== "function" ||
    typeof api.trace.setSpan !== "function" ||
    typeof api.trace.setSpanContext !== "function" ||
    typeof api.context?.active !== "function" ||
    typeof api.context.with !== "function"
  ) {
    throw new TypeError('tracing.api must be the "@opentelemetry/api" module (import * as otel from "@opentelemetry/api")');
  }
}

/** The tracing of one batch. */
export class BatchTracing {
  readonly #api: OtelApi;
  readonly #tracer: OtelTracer;
  readonly #system: string;
  readonly #queue: string | undefined;
  #size: number | undefined;
  #batch: OtelSpan | undefined;
  #batchContext: OtelContext | undefined;
  readonly #open = new Map<number, OtelSpan>();
  readonly #outcomes = new Map<string, number>();
  #ended = false;

  constructor(options: TracingOptions, batch: { system: MessagingSystem; queue?: string; size?: number }) {
    this.#api = options.api;
    this.#tracer = options.tracer ?? options.api.trace.getTracer("babelqueue-serverless");
    this.#system = batch.system;
    this.#queue = batch.queue;
    this.#size = batch.size;
  }

  get #name(): string {
    return this.#queue === undefined ? "process" : `process ${this.#queue}`;
  }

  #common(): Record<string, OtelAttributeValue> {
    return {
      "messaging.system": this.#system,
      "messaging.operation.type": "process",
      "messaging.operation.name": "process",
      ...(this.#queue === undefined ? {} : { "messaging.destination.name": this.#queue }),
    };
  }

  /** Runs the batch's work with the batch span active; ends it (and any span left open) after. */
  async run<T>(work: () => Promise<T>): Promise<T> {
    const api = this.#api;
    const parent = api.context.active();
    const batch = this.#tracer.startSpan(
      this.#name,
      {
        kind: SPAN_KIND_CONSUMER,
        attributes: { ...this.#common(), ...(this.#size === undefined ? {} : { "messaging.batch.message_count": this.#size }) },
      },
      parent,
    );
    this.#batch = batch;
    this.#batchContext = api.trace.setSpan(parent, batch);
    try {
      return await api.context.with(this.#batchContext, work);
    } catch (error) {
      batch.recordException(exceptionOf(error));
      batch.setStatus({ code: SPAN_STATUS_ERROR, message: "batch failed before a decision" });
      this.#closeOpen("unknown");
      throw error;
    } finally {
      for (const [status, n] of this.#outcomes) batch.setAttribute(`babelqueue.outcome.${status}`, n);
      // An engine that never says batch-end: nothing is still running once `work` settled.
      if (!this.#ended) this.#closeOpen("unknown");
      batch.end();
    }
  }

  /** The interceptor around each handler run: opens the message span and makes it active. */
  readonly intercept: RunInterceptor = async (run, info) => {
    const api = this.#api;
    const batchContext = this.#batchContext ?? api.context.active();
    const producer = await this.#producerOf(info);
    const parent = producer === undefined ? batchContext : api.trace.setSpanContext(batchContext, producer);
    const batchSpan = this.#batch?.spanContext();
    const span = this.#tracer.startSpan(
      this.#name,
      {
        kind: SPAN_KIND_CONSUMER,
        attributes: this.#messageAttributes(info),
        ...(producer === undefined || batchSpan === undefined ? {} : { links: [{ context: batchSpan }] }),
      },
      parent,
    );
    // A transactional store that retries its transaction (PostgreSQL on 40001 / 40P01) runs the
    // handler again: the earlier attempt's span ends here, and the batch links the producer once.
    const earlier = this.#open.get(info.index);
    if (earlier !== undefined) {
      earlier.setAttribute("babelqueue.outcome", "retried");
      earlier.end();
    } else if (producer !== undefined) this.#batch?.addLink?.({ context: producer });
    this.#open.set(info.index, span);
    try {
      await api.context.with(api.trace.setSpan(parent, span), run);
    } catch (error) {
      span.recordException(exceptionOf(error));
      throw error;
    }
  };

  observe(event: EngineEvent): void {
    if (event.type === "batch-start") {
      this.#size = event.size;
      this.#batch?.setAttribute("messaging.batch.message_count", event.size);
    } else if (event.type === "result") {
      this.#onResult(event);
    } else if (event.type === "batch-end") {
      this.#ended = true;
      // Spans of handlers still running past the deadline end with their (later) results.
      if (event.pending === 0) this.#closeOpen("unknown");
    }
  }

  #onResult(event: Extract<EngineEvent, { type: "result" }>): void {
    const result = event.result;
    let span = this.#open.get(event.index);
    if (event.late !== true) this.#outcomes.set(result.status, (this.#outcomes.get(result.status) ?? 0) + 1);
    if (span !== undefined && stillRunning(result)) {
      // Answered in-flight while its handler runs on: the span stays open for the late result.
      span.setAttribute("babelqueue.answer", result.status);
      return;
    }
    this.#open.delete(event.index);
    if (span === undefined) {
      span = this.#tracer.startSpan(
        this.#name,
        {
          kind: SPAN_KIND_CONSUMER,
          attributes: {
            ...this.#common(),
            ...(typeof event.messageId === "string" ? { "messaging.message.id": event.messageId } : {}),
            ...(result.key === undefined ? {} : { "babelqueue.key": cut(result.key) }),
            ...(typeof event.attempts === "number" ? { "babelqueue.attempts": event.attempts } : {}),
          },
        },
        this.#batchContext ?? this.#api.context.active(),
      );
    }
    finish(span, result);
  }

  #closeOpen(outcome: string): void {
    for (const span of this.#open.values()) {
      span.setAttribute("babelqueue.outcome", outcome);
      span.end();
    }
    this.#open.clear();
  }

  #messageAttributes(info: RunInfo): Record<string, OtelAttributeValue> {
    return {
      ...this.#common(),
      ...(info.messageId === undefined ? {} : { "messaging.message.id": info.messageId }),
      ...(info.key === undefined ? {} : { "babelqueue.key": cut(info.key) }),
      "babelqueue.attempts": info.attempts,
      ...(info.traceId === undefined ? {} : { "messaging.message.conversation_id": cut(info.traceId) }),
      ...(isReplay(info.headers) ? { "babelqueue.replay": true } : {}),
    };
  }

  async #producerOf(info: RunInfo): Promise<OtelSpanContext | undefined> {
    const remote = parseTraceparent(header(info.headers, HEADER_TRACEPARENT));
    if (remote !== undefined) {
      const state = header(info.headers, HEADER_TRACESTATE);
      const traceState = state === undefined || this.#api.createTraceState === undefined ? undefined : this.#api.createTraceState(state);
      return traceState === undefined ? remote : { ...remote, traceState };
    }
    if (typeof info.traceId === "string" && info.traceId.trim() !== "") return traceIdParent(info.traceId);
    return undefined;
  }
}

/** A result the deadline gave to a delivery whose handler (or its commit) is still under way. */
function stillRunning(result: MessageResult): boolean {
  return result.error instanceof DeadlineExceededError && result.error.phase === "still running";
}

function cut(key: string): string {
  return key.length > MAX_KEY ? `${key.slice(0, MAX_KEY)}…` : key;
}

function exceptionOf(error: unknown): { name: string; code?: string } {
  const facts = errorFacts(error);
  return facts.code === undefined ? { name: facts.name } : { name: facts.name, code: facts.code };
}

function finish(span: OtelSpan, result: MessageResult): void {
  span.setAttribute("babelqueue.outcome", result.status);
  span.setAttribute("babelqueue.ack", result.ack);
  span.setAttribute("babelqueue.dedupe", result.dedupe);
  if (result.retryAfterMs !== undefined) span.setAttribute("babelqueue.retry_after_ms", result.retryAfterMs);
  if (ERROR_OUTCOMES.has(result.status)) {
    // A handler's own throw was recorded by the interceptor when it happened.
    const handlerThrow = result.status === "failed" && result.handlerRan;
    if (result.error !== undefined && !handlerThrow) span.recordException(exceptionOf(result.error));
    if (result.error !== undefined) {
      const facts = errorFacts(result.error);
      span.setAttribute("error.type", facts.code ?? facts.name);
    }
    span.setStatus({ code: SPAN_STATUS_ERROR, message: result.status });
  }
  span.end();
}

// Stryker disable next-line BooleanLiteral: optionKeys reads only the keys; each `true` lets the compiler check the list against the options type
const TRACING_OPTION_KEYS = optionKeys<TracingOptions>({ api: true, tracer: true });

/**
 * OpenTelemetry tracing, as the `tracing` option of `sqsHandler` / `queueHandler` (or
 * `createObservability`): a span per batch and per message, parented on the producer's trace.
 * Throws `InvalidOptionError` when `api` is not the `@opentelemetry/api` module.
 *
 * @example
 * ```ts
 * import * as otel from "@opentelemetry/api";
 * import { InMemoryStore } from "babelqueue-serverless";
 * import { sqsHandler } from "babelqueue-serverless/lambda";
 * import { otelTracing } from "babelqueue-serverless/tracing";
 *
 * export const handler = sqsHandler({
 *   store: new InMemoryStore(),
 *   handle: async (envelope) => sendReceipt(envelope.data),
 *   tracing: otelTracing({ api: otel }),
 * });
 * ```
 */
export function otelTracing<Env = unknown>(options: TracingOptions): ObservabilityExtension<Env> {
  if (typeof options === "object" && options !== null) checkOptions(options, TRACING_OPTION_KEYS, "tracing");
  try {
    checkTracingOptions(options);
  } catch (error) {
    throw new InvalidOptionError("tracing", `must be false or { api } with the "@opentelemetry/api" module (${(error as Error).message})`);
  }
  return {
    extends: "tracing",
    batch(facts, runtime) {
      const tracing = new BatchTracing(options, {
        system: runtime.system,
        ...(facts.queue === undefined ? {} : { queue: facts.queue }),
        ...(facts.size === undefined ? {} : { size: facts.size }),
      });
      return { observe: (event) => tracing.observe(event), intercept: tracing.intercept, run: (work) => tracing.run(work) };
    },
  };
}
