/**
 * What may be said about an error in a log line, a span or a CLI message: its name, its code, and
 * the payload-free details this package's own errors carry by construction.
 *
 * An error *message* is never copied: a handler's message is user content (it may quote the
 * payload: "card 4111… declined for alice@example.com"), and a backend's message may quote a key,
 * a URL or a credential. A `StoreUnavailableError`'s message includes its backend's, so for it,
 * too, only the store, the operation and the cause's name and code are kept.
 *
 * What this is *not*: a serializer. The result is small, flat and safe to print; the full error
 * stays with whoever threw it.
 */

/** The printable facts of one error. */
export interface ErrorFacts {
  /** `error.name` (e.g. "TypeError", "StoreUnavailableError"); `typeof` for a thrown non-Error. */
  readonly name: string;
  /** `error.code` when it is a short identifier (e.g. "STORE_UNAVAILABLE", "ECONNREFUSED"). */
  readonly code?: string;
  /** InvalidMessageError: why the body was rejected (payload-free by construction). */
  readonly reason?: string;
  /** StoreUnavailableError: which store and which operation. */
  readonly store?: string;
  readonly operation?: string;
  /** GroupBlockedError: the FIFO message group. */
  readonly group?: string;
  /** PayloadConflictError: whether the id was committed or claimed, and both fingerprints. */
  readonly state?: string;
  readonly storedFingerprint?: string;
  readonly receivedFingerprint?: string;
  /** InFlightError: when to retry (ms). */
  readonly retryAfterMs?: number;
  /** HTTP status of an AWS SDK error (`$metadata.httpStatusCode`). */
  readonly httpStatusCode?: number;
  /** The cause's name and code (one level), e.g. the backend error a StoreUnavailableError wraps. */
  readonly cause?: { readonly name: string; readonly code?: string };
}

const IDENTIFIER = /^[A-Za-z0-9_.:-]{1,64}$/;
const MAX_DETAIL = 200;

/** An own data property, never a getter, never the prototype chain (a hostile error cannot run code here). */
function own(value: object, field: string): unknown {
  try {
    const descriptor = Object.getOwnPropertyDescriptor(value, field);
    return descriptor && "value" in descriptor ? descriptor.value : undefined;
  } catch {
    return undefined;
  }
}

function identifier(value: unknown): string | undefined {
  if (typeof value === "number" && Number.isFinite(value)) return String(value);
  return typeof value === "string" && IDENTIFIER.test(value) ? value : undefined;
}

function short(value: unknown): string | undefined {
  if (typeof value !== "string" || value === "") return undefined;
  return value.length > MAX_DETAIL ? `${value.slice(0, MAX_DETAIL)}…` : value;
}

function nameOf(error: object): string {
  // `name` usually sits on the prototype (Error.prototype.name), so read it through the chain,
  // but only accept a short identifier.
  let name: unknown;
  try {
    name = (error as { name?: unknown }).name;
  } catch {
    name = undefined;
  }
  return identifier(name) ?? "Error";
}

function causeOf(error: object): ErrorFacts["cause"] {
  const cause = own(error, "cause");
  if (typeof cause !== "object" || cause === null) return undefined;
  const code = identifier(own(cause, "code"));
  return { name: nameOf(cause), ...(code === undefined ? {} : { code }) };
}

/** The printable facts of `error` (anything that was thrown). Never throws. */
export function errorFacts(error: unknown): ErrorFacts {
  if (typeof error !== "object" || error === null) return { name: error === null ? "null" : typeof error };
  const facts: { -readonly [K in keyof ErrorFacts]: ErrorFacts[K] } = { name: nameOf(error) };
  const code = identifier(own(error, "code"));
  if (code !== undefined) facts.code = code;
  switch (code) {
    case "INVALID_MESSAGE": {
      const reason = short(own(error, "reason"));
      if (reason !== undefined) facts.reason = reason;
      break;
    }
    case "STORE_UNAVAILABLE": {
      const store = identifier(own(error, "store"));
      const operation = identifier(own(error, "operation"));
      if (store !== undefined) facts.store = store;
      if (operation !== undefined) facts.operation = operation;
      break;
    }
    case "GROUP_BLOCKED": {
      const group = short(own(error, "group"));
      if (group !== undefined) facts.group = group;
      break;
    }
    case "PAYLOAD_CONFLICT": {
      const state = identifier(own(error, "state"));
      const stored = short(own(error, "stored"));
      const received = short(own(error, "received"));
      if (state !== undefined) facts.state = state;
      if (stored !== undefined) facts.storedFingerprint = stored;
      if (received !== undefined) facts.receivedFingerprint = received;
      break;
    }
    case "IN_FLIGHT": {
      const retryAfterMs = own(error, "retryAfterMs");
      if (typeof retryAfterMs === "number" && Number.isFinite(retryAfterMs)) facts.retryAfterMs = retryAfterMs;
      break;
    }
  }
  const metadata = own(error, "$metadata");
  if (typeof metadata === "object" && metadata !== null) {
    const status = own(metadata, "httpStatusCode");
    if (typeof status === "number" && Number.isInteger(status)) facts.httpStatusCode = status;
  }
  const cause = causeOf(error);
  if (cause !== undefined) facts.cause = cause;
  return facts;
}
