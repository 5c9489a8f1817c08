/**
 * Backend failures in words a person can act on, the same way in every store: the error's name, its
 * message where the backend's messages are safe to show (truncated, with known secrets scrubbed), and
 * whatever codes it carries (a driver code, an HTTP status, a retryable flag).
 *
 * `storeFailure` wraps a backend error in the `StoreUnavailableError` the engine and the user see; an
 * error this package already typed (an `InvalidOptionError`, a `StoreUnavailableError`) passes as it is.
 *
 * What this is *not*: a logger, or a place that reads a payload. Nothing here ever renders a message
 * body, a key's value, a fencing token or a credential, which is why a store whose backend messages
 * may quote a key or an item (DynamoDB, Durable Objects, KV) turns `message` off.
 */
import { BabelQueueServerlessError, PartialStepError, StoreUnavailableError } from "../errors.js";

/** Longest message text kept from a backend error (characters). */
export const MAX_FAILURE_DETAIL = 200;

/** How a store words its backend's failures. */
export interface FailureWording {
  /** Include the error's own message (truncated). Default true. Turn it off when the backend's messages can quote a key or an item. */
  readonly message?: boolean;
  /** Strings scrubbed from the message (a REST token, fencing tokens): each becomes `[redacted]`. */
  readonly secrets?: readonly string[];
  /** Markers after which a message is cut (e.g. `@upstash/redis`'s ", command was:", which quotes the command). */
  readonly cutAt?: readonly string[];
}

/** How a store keeps the original error. */
export interface FailureOptions extends FailureWording {
  /**
   * `"original"` keeps the backend's error as the `cause` (useful metadata, e.g. an AWS request id);
   * `"scrubbed"` keeps a copy with only its name, the worded message and its code, for backends whose
   * errors carry the statement's values or the command's arguments. Default `"scrubbed"`.
   */
  readonly cause?: "original" | "scrubbed";
  /** Put before the description (e.g. `the KV call failed`), joined with `: `. */
  readonly prefix?: string;
  /** Added after the description (e.g. `on table t`). */
  readonly suffix?: string;
}

/** A driver's code (`ECONNREFUSED`, a SQLSTATE, `NOSCRIPT`), when the error carries a plausible one. */
export function errorCode(error: unknown): string | undefined {
  if (typeof error !== "object" || error === null) return undefined;
  const code = (error as { code?: unknown }).code;
  return typeof code === "string" && /^[A-Z0-9_]{2,40}$/.test(code) ? code : undefined;
}

/** The HTTP status an AWS SDK error carries in `$metadata`, when there is one. */
export function httpStatus(error: unknown): number | undefined {
  const status = (error as { $metadata?: { httpStatusCode?: unknown } } | null)?.$metadata?.httpStatusCode;
  return typeof status === "number" ? status : undefined;
}

/** The message of an error, cut, scrubbed and truncated as `wording` says. */
function wordedMessage(error: Error, wording: FailureWording): string {
  let message = error.message;
  for (const marker of wording.cutAt ?? []) {
    const at = message.indexOf(marker);
    if (at >= 0) message = message.slice(0, at);
  }
  for (const secret of wording.secrets ?? []) if (secret !== "") message = message.split(secret).join("[redacted]");
  return message.length > MAX_FAILURE_DETAIL ? `${message.slice(0, MAX_FAILURE_DETAIL)}…` : message;
}

/** The backend says it is overloaded: Durable Objects set `.overloaded` on such errors and ask not to retry them. */
function isOverloaded(error: unknown): boolean {
  return (error as { overloaded?: unknown } | null)?.overloaded === true;
}

/** `Name[: message][ (CODE)][ (HTTP n)][ (retryable)][ (overloaded)]` — never a payload, token or credential. */
export function describeFailure(error: unknown, wording: FailureWording = {}): string {
  if (!(error instanceof Error)) return `failed with a non-error value (${typeof error})`;
  let text = error.name;
  if (wording.message !== false) text += `: ${wordedMessage(error, wording)}`;
  const code = errorCode(error) ?? errorCode(error.cause);
  if (code !== undefined) text += ` (${code})`;
  const status = httpStatus(error);
  if (status !== undefined) text += ` (HTTP ${status})`;
  if ((error as { retryable?: unknown }).retryable === true) text += " (retryable)";
  if (isOverloaded(error)) text += " (overloaded)";
  return text;
}

/**
 * A copy of a backend error that keeps only its name, its worded message (none with `message:
 * false`) and its code. A thrown value that is not an Error keeps only its type: it may be anything.
 */
export function scrubbedError(error: unknown, wording: FailureWording = {}): Error {
  const message = !(error instanceof Error) ? `a non-error value (${typeof error})` : wording.message === false ? "" : wordedMessage(error, wording);
  const copy = new Error(message);
  copy.name = error instanceof Error ? error.name : "Error";
  const code = errorCode(error) ?? (error as { code?: unknown } | null)?.code;
  if (typeof code === "string") (copy as Error & { code?: string }).code = code;
  return copy;
}

/**
 * The `StoreUnavailableError` a store throws for a backend failure of `operation`. An error this
 * package already typed passes through unchanged.
 */
export function storeFailure(store: string, operation: string, error: unknown, options: FailureOptions = {}): BabelQueueServerlessError {
  if (error instanceof BabelQueueServerlessError) return error;
  const described = describeFailure(error, options);
  const detail = `${options.prefix === undefined ? "" : `${options.prefix}: `}${described}${options.suffix === undefined ? "" : ` ${options.suffix}`}`;
  const cause = options.cause === "original" ? error : scrubbedError(error, options);
  return new StoreUnavailableError(store, operation, detail, { cause, overloaded: isOverloaded(error) });
}

/**
 * Ends a batch write step (`rememberMany`, `releaseMany`) from each id's error, undefined where the
 * id's write landed: returns when no id failed, throws the first error when every id did, else a
 * `PartialStepError` naming them — so the engine retries and reports only those (see the contract).
 */
export function throwStepFailures(store: string, operation: string, errors: readonly (Error | undefined)[]): void {
  let failed = 0;
  for (const error of errors) if (error !== undefined) failed += 1;
  if (failed === 0) return;
  if (failed === errors.length) throw errors[0];
  throw new PartialStepError(store, operation, errors);
}
