/**
 * Where a message span's parent comes from, as BabelQueue's own OpenTelemetry helper decides it
 * (`@babelqueue/core/otel`, ADR-0025 and ADR-0028):
 *
 * 1. the W3C `traceparent` (and `tracestate`) transport header beside the envelope, when it is
 *    present and valid: the consumer span is a true child of the producer's span;
 * 2. else the envelope's `trace_id`, mapped to a 32-hex trace id — a UUID maps to its own hex
 *    digits, any other string to the first 16 bytes of its SHA-256 — with a deterministic span id
 *    (the first 8 bytes of SHA-256("babelqueue-span:" + trace_id)), sampled: every hop of one
 *    `trace_id` lands in one trace, whichever SDK consumed it.
 *
 * Also: `isReplay(headers)`, BabelQueue's replay-bypass marker (`bq-replay-bypass`, ADR-0027).
 *
 * What this is *not*: a propagator registry. It parses the frozen W3C format itself, so it needs
 * neither `@opentelemetry/core` nor a registered global propagator. Hashing uses Web Crypto, so it
 * runs the same on Node and in workerd.
 */
import type { OtelSpanContext } from "./otel-api.js";
import { TRACE_FLAGS_SAMPLED } from "./otel-api.js";

export const HEADER_TRACEPARENT = "traceparent";
export const HEADER_TRACESTATE = "tracestate";
export const HEADER_REPLAY_BYPASS = "bq-replay-bypass";

const INVALID_TRACE_ID = "0".repeat(32);
const INVALID_SPAN_ID = "0".repeat(16);
// version-traceid-parentid-flags; version ff is forbidden; a future version may append fields.
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

const encoder = new TextEncoder();

async function sha256Hex(text: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(text)));
  let hex = "";
  for (const byte of digest) hex += byte.toString(16).padStart(2, "0");
  return hex;
}

/** A header by its name, case-insensitively (SQS attribute names keep the producer's case). */
export function header(headers: Readonly<Record<string, string>> | undefined, name: string): string | undefined {
  if (headers === undefined) return undefined;
  const exact = Object.hasOwn(headers, name) ? headers[name] : undefined;
  if (typeof exact === "string") return exact;
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() === name && typeof value === "string") return value;
  }
  return undefined;
}

/** The remote span context of a W3C `traceparent`, or undefined when it is absent or malformed. */
export function parseTraceparent(traceparent: string | undefined): Omit<OtelSpanContext, "traceState"> | undefined {
  if (traceparent === undefined) return undefined;
  const match = TRACEPARENT.exec(traceparent.trim());
  if (match === null) return undefined;
  const [, version, traceId, spanId, flags, rest] = match as unknown as [string, string, string, string, string, string | undefined];
  if (version === "ff" || traceId === INVALID_TRACE_ID || spanId === INVALID_SPAN_ID) return undefined;
  if (version === "00" && rest !== undefined) return undefined;
  return { traceId, spanId, traceFlags: Number.parseInt(flags, 16), isRemote: true };
}

/** BabelQueue's mapping of an envelope `trace_id` to a 32-hex OpenTelemetry trace id. */
export async function otelTraceId(traceId: string): Promise<string> {
  const hex = traceId.replace(/-/g, "").toLowerCase();
  if (/^[0-9a-f]{32}$/.test(hex) && hex !== INVALID_TRACE_ID) return hex;
  return (await sha256Hex(traceId)).slice(0, 32);
}

/** BabelQueue's deterministic, non-zero parent span id for a `trace_id`. */
export async function spanIdOf(traceId: string): Promise<string> {
  const id = (await sha256Hex(`babelqueue-span:${traceId}`)).slice(0, 16);
  return id === INVALID_SPAN_ID ? "0000000000000001" : id;
}

/** The remote parent of a `trace_id` (sampled), as BabelQueue's other SDKs derive it. */
export async function traceIdParent(traceId: string): Promise<OtelSpanContext> {
  return { traceId: await otelTraceId(traceId), spanId: await spanIdOf(traceId), traceFlags: TRACE_FLAGS_SAMPLED, isRemote: true };
}

/** True when the delivery carries BabelQueue's replay-bypass marker (a deliberate DLQ replay). */
export function isReplay(headers: Readonly<Record<string, string>> | undefined): boolean {
  const marker = header(headers, HEADER_REPLAY_BYPASS);
  return marker !== undefined && marker !== "";
}
