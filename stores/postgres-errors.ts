/**
 * How `PostgresStore` reads a driver error: its SQLSTATE, whether a transaction may be re-run
 * (serialization failure 40001, deadlock 40P01 — on the error or, when a handler wrapped it, its
 * causes), and a description and copy that carry no statement values.
 *
 * What this is *not*: a general pg error mapper; it knows only what the store decides on.
 */
import { BabelQueueServerlessError, StoreUnavailableError } from "../src/errors.js";

const STORE_NAME = "PostgresStore";

/** SQLSTATEs a transaction is retried on: serialization failure, deadlock. */
export const RETRYABLE_SQLSTATES: ReadonlySet<string> = new Set(["40001", "40P01"]);

export function sqlState(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/** A serialization failure or deadlock, on the error or (a handler that wrapped it) its cause. */
export function isRetryable(error: unknown): boolean {
  for (let e = error, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth += 1) {
    const state = sqlState(e);
    if (state !== undefined && RETRYABLE_SQLSTATES.has(state)) return true;
  }
  return false;
}

const MAX_DETAIL = 200;

/** The error's name, message (truncated) and SQLSTATE or errno code — never the statement's values. */
export function describe(error: unknown): string {
  if (!(error instanceof Error)) return `failed with a non-error value (${typeof error})`;
  const message = error.message.length > MAX_DETAIL ? `${error.message.slice(0, MAX_DETAIL)}…` : error.message;
  const code = (error as { code?: unknown }).code;
  return `${error.name}: ${message}${typeof code === "string" && /^[A-Z0-9_]{2,40}$/.test(code) ? ` (${code})` : ""}`;
}

/** A copy of a driver error without `detail` / `where` / parameters, which can quote row values. */
export function scrubbed(error: unknown): Error {
  const copy = new Error(error instanceof Error ? error.message : String(error));
  copy.name = error instanceof Error ? error.name : "Error";
  const code = sqlState(error) ?? (error as { code?: unknown } | null)?.code;
  if (typeof code === "string") (copy as Error & { code?: string }).code = code;
  return copy;
}

export function unavailable(operation: string, error: unknown): BabelQueueServerlessError {
  if (error instanceof BabelQueueServerlessError) return error;
  return new StoreUnavailableError(STORE_NAME, operation, describe(error), { cause: scrubbed(error) });
}
