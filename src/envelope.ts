/**
 * Decoding the BabelQueue wire envelope (schema_version 1) from an untrusted queue body.
 *
 * Accepts a JSON string, UTF-8 bytes, or an already-parsed object (Cloudflare Queues'
 * `contentType: "json"`), and accepts or rejects as BabelQueue's Node and Go consumers do:
 * `job` (or `urn` as an inbound alias, read when `job` is missing, null or empty) a non-empty
 * string; `trace_id` a non-blank string; `data` an object; `meta` an object with
 * `schema_version === 1`; `attempts` an integer (a negative one counts as 0 when attempts are
 * reconciled).
 * Unknown fields are kept (the envelope is additive, e.g. `dead_letter`).
 *
 * Decoding never throws and never mutates its input: every rejection is a `reason` a person
 * can act on. Untrusted objects are read only through own data properties, so a `__proto__`
 * key stays an ordinary key and a hostile getter or proxy is a rejection, not a crash. A body
 * that arrives as text is parsed here, and `JSON.parse` makes nothing but own data properties:
 * that object is read directly (no property descriptor per field) and becomes the envelope itself
 * (no copy: nobody else holds it). The hot path of every SQS message.
 *
 * What this is *not*: JSON Schema validation of `meta`'s descriptive fields (`queue`, `lang`,
 * `created_at`) or of `data`. Consumers tolerate those; so do we.
 */

/** The envelope's immutable, producer-set metadata. */
export interface EnvelopeMeta {
  /** Unique id of this message: the dedupe key. */
  readonly id?: string;
  readonly queue?: string;
  readonly lang?: string;
  readonly schema_version: 1;
  readonly created_at?: number;
  readonly [field: string]: unknown;
}

/** A decoded BabelQueue envelope. `job` is always set (copied from `urn` when only the alias came). */
export interface Envelope<Data extends Record<string, unknown> = Record<string, unknown>> {
  readonly job: string;
  readonly trace_id: string;
  readonly data: Data;
  readonly meta: EnvelopeMeta;
  /** The body's own transport retry counter. Handlers see the reconciled count in their context. */
  readonly attempts: number;
  readonly [field: string]: unknown;
}

/** The outcome of decoding one body. */
export type Decoded<Message> =
  | { readonly ok: true; readonly message: Message }
  | { readonly ok: false; readonly reason: string };

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Reads an own data property only: never a getter, never the prototype chain. */
function ownData(record: Record<string, unknown>, field: string): unknown {
  const descriptor = Object.getOwnPropertyDescriptor(record, field);
  return descriptor && "value" in descriptor ? descriptor.value : undefined;
}

/** `own` for what `JSON.parse` made, where every own property is a data property: no descriptor needed. */
function parsedOwn(record: Record<string, unknown>, field: string): unknown {
  return Object.hasOwn(record, field) ? record[field] : undefined;
}

/** Turns a queue body (string, bytes or parsed JSON) into a JSON value, or a reason why not. */
export function parseBody(body: unknown): Decoded<unknown> {
  let text: string;
  if (typeof body === "string") {
    text = body;
  } else if (body instanceof ArrayBuffer || ArrayBuffer.isView(body)) {
    const bytes =
      body instanceof ArrayBuffer ? new Uint8Array(body) : new Uint8Array(body.buffer, body.byteOffset, body.byteLength);
    try {
      text = utf8.decode(bytes);
    } catch {
      return { ok: false, reason: "body bytes are not valid UTF-8" };
    }
  } else if (body === undefined || body === null) {
    return { ok: false, reason: "body is empty" };
  } else {
    return { ok: true, message: body };
  }
  if (text.trim() === "") return { ok: false, reason: "body is empty" };
  try {
    return { ok: true, message: JSON.parse(text) as unknown };
  } catch (error) {
    const detail = error instanceof RangeError ? "nested too deeply" : "not valid JSON";
    return { ok: false, reason: `body is ${detail}` };
  }
}

/** Text parsed here (`JSON.parse`), rather than an object the runtime handed over. */
function parsedHere(body: unknown): boolean {
  return typeof body === "string" || body instanceof ArrayBuffer || ArrayBuffer.isView(body);
}

function checkEnvelope(value: unknown, parsed: boolean): Decoded<Envelope> {
  if (!isRecord(value)) return { ok: false, reason: "body is not a JSON object" };
  const own = parsed ? parsedOwn : ownData;
  const job = own(value, "job");
  const urn = own(value, "urn");
  let identity: string;
  // The alias stands in for a job that is missing, null or empty (Node: `!envelope.job`; Go: `Job == ""`).
  const noJob = job === undefined || job === null || job === "";
  if (typeof job === "string" && job !== "") identity = job;
  else if (noJob && typeof urn === "string" && urn !== "") identity = urn;
  else if (job !== undefined) return { ok: false, reason: "'job' must be a non-empty string" };
  else return { ok: false, reason: "no 'job' or 'urn': the message has no identity" };

  const meta = own(value, "meta");
  if (!isRecord(meta)) return { ok: false, reason: "'meta' must be an object" };
  const version = own(meta, "schema_version");
  if (version !== 1) {
    return {
      ok: false,
      reason: `meta.schema_version ${version === undefined ? "is missing" : `is ${safeShow(version)}`}; only 1 is supported`,
    };
  }
  const traceId = own(value, "trace_id");
  if (typeof traceId !== "string" || traceId.trim() === "") {
    return { ok: false, reason: "'trace_id' must be a non-blank string" };
  }
  const data = own(value, "data");
  if (!isRecord(data)) return { ok: false, reason: "'data' must be an object" };
  const attempts = own(value, "attempts");
  if (typeof attempts !== "number" || !Number.isSafeInteger(attempts)) {
    return { ok: false, reason: "'attempts' must be an integer" };
  }
  if (parsed) {
    // Ours alone (parsed from the text just now): it is the envelope, with `job` filled in from `urn`
    // when only the alias came. An own "__proto__" key that JSON.parse made stays an ordinary key.
    if (noJob) value.job = identity;
    return { ok: true, message: value as Envelope };
  }
  // A shallow copy: the caller's object is never mutated, and spreading defines "__proto__"
  // as an own property rather than setting a prototype.
  const envelope: Envelope = { ...value, job: identity, trace_id: traceId, data, meta: meta as EnvelopeMeta, attempts };
  return { ok: true, message: envelope };
}

/** A short, payload-free rendering of a scalar for a rejection reason. */
function safeShow(value: unknown): string {
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  if (value === null) return "null";
  return `a ${Array.isArray(value) ? "array" : typeof value}`;
}

/** Decodes a queue body into a BabelQueue envelope. Never throws. */
export function decodeEnvelope(body: unknown): Decoded<Envelope> {
  try {
    const parsed = parseBody(body);
    return parsed.ok ? checkEnvelope(parsed.message, parsedHere(body)) : parsed;
  } catch {
    // A hostile proxy or getter threw while we looked at it.
    return { ok: false, reason: "body could not be read as an object" };
  }
}

/**
 * The dedupe key of an envelope: `meta.id` verbatim, only when it is a non-empty string.
 * Anything else means "no usable id" and the message runs without dedupe (fail-open) — also a
 * message that is not an envelope at all (the default `key` under a custom `parse`), or has no `meta`.
 */
export function messageId(envelope: Envelope): string | undefined {
  const message: unknown = envelope;
  if (typeof message !== "object" || message === null) return undefined;
  // A plain read: a custom message's `meta` may be a getter or inherited (a class instance from `parse`).
  const meta = (message as { meta?: unknown }).meta;
  if (typeof meta !== "object" || meta === null) return undefined;
  const id = ownData(meta as Record<string, unknown>, "id");
  return typeof id === "string" && id !== "" ? id : undefined;
}

/**
 * A message's own non-blank string `trace_id` (a BabelQueue envelope's, or a custom message's), as
 * `{ traceId }` for a tracer's fallback parent; `{}` when it has none.
 */
export function messageTraceId(message: unknown): { traceId?: string } {
  if (typeof message !== "object" || message === null) return {};
  const value = ownData(message as Record<string, unknown>, "trace_id");
  return typeof value === "string" && value.trim() !== "" ? { traceId: value } : {};
}

/**
 * Attempts as the handler should see them: the larger of the body's counter and the runtime's
 * native redelivery count (0-based). A body counter that is not a safe integer above 0 counts as
 * none; a missing or garbage native count is ignored; the body's count is never lowered.
 * (Manifest block `sqs.attempts_reconciliation`.)
 */
export function reconcileAttempts(bodyAttempts: unknown, nativeRetries: number | undefined): number {
  const body = Number.isSafeInteger(bodyAttempts) && (bodyAttempts as number) > 0 ? (bodyAttempts as number) : 0;
  // A negative native count can never win against the body's (>= 0), so it needs no check of its own.
  return Number.isSafeInteger(nativeRetries) ? Math.max(body, nativeRetries as number) : body;
}
