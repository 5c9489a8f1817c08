/**
 * The part of the OpenTelemetry API (`@opentelemetry/api` 1.x) the tracing integration uses, as
 * structural types. The user passes the real module (`import * as otel from "@opentelemetry/api"`,
 * then `tracing: otelTracing({ api: otel })`), which fits these shapes, so this package neither depends on
 * `@opentelemetry/api` nor imports it — not even its types: a consumer without OpenTelemetry
 * installed type-checks and bundles unchanged.
 *
 * What this is *not*: an OpenTelemetry implementation, or a copy of its types. Only the members
 * called here are declared; the numeric constants below are the API's stable enum values.
 */

/** `SpanKind.CONSUMER`. */
export const SPAN_KIND_CONSUMER = 4;
/** `SpanStatusCode.ERROR`. */
export const SPAN_STATUS_ERROR = 2;
/** `TraceFlags.SAMPLED`. */
export const TRACE_FLAGS_SAMPLED = 1;

/** An OpenTelemetry `Context` (opaque here). */
export interface OtelContext {
  getValue(key: symbol): unknown;
}

/** An OpenTelemetry `TraceState` (the W3C `tracestate` entries). */
export interface OtelTraceState {
  set(key: string, value: string): OtelTraceState;
  unset(key: string): OtelTraceState;
  get(key: string): string | undefined;
  serialize(): string;
}

/** An OpenTelemetry `SpanContext`. */
export interface OtelSpanContext {
  traceId: string;
  spanId: string;
  traceFlags: number;
  isRemote?: boolean;
  traceState?: OtelTraceState;
}

export type OtelAttributeValue = string | number | boolean;

/** An OpenTelemetry `Link`. */
export interface OtelLink {
  context: OtelSpanContext;
}

/** The members of an OpenTelemetry `Span` used here. */
export interface OtelSpan {
  spanContext(): OtelSpanContext;
  setAttribute(key: string, value: OtelAttributeValue): unknown;
  setStatus(status: { code: number; message?: string }): unknown;
  recordException(exception: { name: string; code?: string; message?: string }): unknown;
  /** API ≥ 1.9; used when present to link a batch span to its messages' producers. */
  addLink?(link: OtelLink): unknown;
  end(): unknown;
}

/** The members of an OpenTelemetry `Tracer` used here. */
export interface OtelTracer {
  startSpan(
    name: string,
    options?: { kind?: number; attributes?: Record<string, OtelAttributeValue>; links?: OtelLink[] },
    context?: OtelContext,
  ): OtelSpan;
}

/** The members of the `@opentelemetry/api` module used here. */
export interface OtelApi {
  trace: {
    getTracer(name: string, version?: string): OtelTracer;
    setSpan(context: OtelContext, span: OtelSpan): OtelContext;
    setSpanContext(context: OtelContext, spanContext: OtelSpanContext): OtelContext;
  };
  context: {
    active(): OtelContext;
    with<T>(context: OtelContext, fn: () => T): T;
  };
  /** Used when present to carry a producer's `tracestate`. */
  createTraceState?(raw?: string): OtelTraceState;
}
