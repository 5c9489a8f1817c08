/**
 * A recording stand-in for the `@opentelemetry/api` module, for tests that pin exactly what the
 * tracing integration hands to OpenTelemetry: each span's name, its start options (kind,
 * attributes, links), its parent context, and every call on it in order. The real SDK drops or
 * rewrites some of these (an undefined attribute, a second `end()`, the `code` of an exception),
 * so it cannot tell them apart; this can.
 *
 * Contexts are plain labelled objects ("root", "span s1", "remote <spanId> in span s1"); the active
 * one is kept in an AsyncLocalStorage, as @opentelemetry/context-async-hooks does.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { OtelApi, OtelContext, OtelLink, OtelSpan, OtelSpanContext, OtelTracer, OtelTraceState } from "../../src/observability/otel-api.js";

export interface FakeContext extends OtelContext {
  readonly label: string;
  readonly remote?: OtelSpanContext;
}

export interface FakeSpan extends OtelSpan {
  readonly id: string;
  readonly name: string;
  readonly options: unknown;
  readonly parent: string | undefined;
  readonly calls: unknown[][];
}

/** A TraceState that remembers the raw header it was made from. */
export class FakeTraceState implements OtelTraceState {
  constructor(readonly raw: string | undefined) {}
  set(): OtelTraceState {
    return this;
  }
  unset(): OtelTraceState {
    return this;
  }
  get(): string | undefined {
    return undefined;
  }
  serialize(): string {
    return this.raw ?? "";
  }
}

export function fakeOtel(features: { addLink?: boolean; createTraceState?: boolean } = {}) {
  const { addLink = true, createTraceState = true } = features;
  const storage = new AsyncLocalStorage<FakeContext>();
  const root: FakeContext = { label: "root", getValue: () => undefined };
  const spans: FakeSpan[] = [];
  const tracerNames: string[] = [];
  const tracer: OtelTracer = {
    startSpan(name, options, context) {
      const id = `s${spans.length + 1}`;
      const calls: unknown[][] = [];
      const span: FakeSpan = {
        id,
        name,
        options,
        parent: (context as FakeContext | undefined)?.label,
        calls,
        spanContext: () => ({ traceId: `trace-${id}`, spanId: `span-${id}`, traceFlags: 1 }),
        setAttribute: (key, value) => void calls.push(["setAttribute", key, value]),
        setStatus: (status) => void calls.push(["setStatus", status]),
        recordException: (exception) => void calls.push(["recordException", exception]),
        end: () => void calls.push(["end"]),
        ...(addLink ? { addLink: (link: OtelLink) => void calls.push(["addLink", link]) } : {}),
      };
      spans.push(span);
      return span;
    },
  };
  const api: OtelApi = {
    trace: {
      getTracer: (name) => {
        tracerNames.push(name);
        return tracer;
      },
      setSpan: (context, span) => ({ label: `span ${(span as FakeSpan).id}`, getValue: () => context }),
      setSpanContext: (context, spanContext) => ({
        label: `remote ${spanContext.spanId} in ${(context as FakeContext).label}`,
        remote: spanContext,
        getValue: () => context,
      }),
    },
    context: {
      active: () => storage.getStore() ?? root,
      with: (context, fn) => storage.run(context as FakeContext, fn),
    },
    ...(createTraceState ? { createTraceState: (raw?: string) => new FakeTraceState(raw) } : {}),
  };
  return { api, tracer, spans, tracerNames, root, active: () => (api.context.active() as FakeContext).label };
}
