/**
 * How `PostgresStore` reads a driver error: its SQLSTATE, whether a transaction may be re-run
 * (serialization failure 40001, deadlock 40P01 — on the error or, when a handler wrapped it, its
 * causes), and its failure as the store's typed error.
 *
 * What this is *not*: a general pg error mapper; it knows only what the store decides on. The wording
 * itself is the store kit's (src/store-kit/failures.ts), the same for every store.
 */
import type { BabelQueueServerlessError } from "../../src/errors.js";
import { storeFailure } from "../../src/store-kit/failures.js";

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

/** A driver failure as the store's `StoreUnavailableError` (errors this package typed pass through). */
export function unavailable(operation: string, error: unknown): BabelQueueServerlessError {
  return storeFailure(STORE_NAME, operation, error);
}
