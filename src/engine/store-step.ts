/**
 * One store step over many ids, written once for the three kinds of step the engine makes — the
 * gate (`claimMany` / `recallMany` / `seenMany`), the commit (`rememberMany`) and the release
 * (`releaseMany`): the store's batch form when it has one, else one call per id, in parallel.
 *
 * Every answer is settled into an `Answer` (a value or an error), so one failed id — or a batch
 * form that failed as a whole, or answered with the wrong number of entries — never throws past
 * the step: the engine decides per id what a failure means (decision.ts).
 *
 * What this is *not*: a retry loop (the commit queue retries, commit.ts) or a timer.
 */
import { PartialStepError, StoreUnavailableError } from "../errors.js";
import type { EngineEvent, StoreStep } from "../events.js";

/** One id's answer from a store step: its value, or the error the step failed with. */
export type Answer<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: unknown };

/** The error of a store answer of the wrong shape (a user's store may answer anything). */
export function malformed(operation: string): StoreUnavailableError {
  return new StoreUnavailableError("store", operation, "returned an answer of the wrong shape");
}

/**
 * A store call's failure as an error that is never `undefined`: a store may reject with no reason
 * (a bare `reject()`), and the commit and release steps read "no error" as success.
 */
function reasonOf(error: unknown): unknown {
  return error === undefined ? new StoreUnavailableError("store", "a step", "rejected without a reason") : error;
}

/** Settles every call into a value or an error (a synchronous throw included). */
export async function settleEach<T>(calls: readonly (() => T | Promise<T>)[]): Promise<Answer<T>[]> {
  return Promise.all(
    calls.map(async (call): Promise<Answer<T>> => {
      try {
        return { ok: true, value: await call() };
      } catch (error) {
        return { ok: false, error: reasonOf(error) };
      }
    }),
  );
}

/**
 * Reads a batch form's entry as one id's failure: the error, or undefined when the entry is a value.
 * (`claimMany` may answer `{ status: "failed", error }` for one id, contract.ts `ClaimFailure`.)
 */
export type FailureOf<T> = (value: T) => { readonly error: unknown } | undefined;

/**
 * Asks the store about `count` ids: `many()` when the store has a batch form (it must answer one
 * entry per id; a wrong length, or a throw, fails every id with that error), else `one(i)` for each
 * id in parallel. `operation` names the batch form in a wrong-shape error. `failureOf`, when given,
 * turns an entry of the batch form that reports that id's own failure into that id's error.
 */
export async function batchOrEach<T>(
  operation: string,
  count: number,
  many: (() => Promise<readonly T[]>) | undefined,
  one: (i: number) => T | Promise<T>,
  failureOf?: FailureOf<T>,
): Promise<Answer<T>[]> {
  if (many === undefined) return settleEach(Array.from({ length: count }, (_, i) => () => one(i)));
  let values: readonly T[];
  try {
    values = await many();
    if (!Array.isArray(values) || values.length !== count) throw malformed(operation);
  } catch (error) {
    const reason = reasonOf(error);
    return Array.from({ length: count }, () => ({ ok: false as const, error: reason }));
  }
  return values.map((value): Answer<T> => {
    const failed = failureOf?.(value);
    return failed === undefined ? { ok: true, value } : { ok: false, error: failed.error };
  });
}

/** The answers' errors, `undefined` where an id succeeded: what the commit queue wants of a step. */
export function errorsOf(answers: readonly Answer<unknown>[]): unknown[] {
  return answers.map((answer) => (answer.ok ? undefined : answer.error));
}

/**
 * A step whose batch form answers nothing (`rememberMany`, `releaseMany`): `many()` when the store
 * has it, else `one(i)` for each id in parallel. Answers the error of each id, or undefined when
 * every id succeeded (the commit queue's common case, with nothing allocated for it). A batch form
 * that rejects with a `PartialStepError` of one entry per id fails only the ids it names.
 */
export async function voidStep(count: number, many: (() => Promise<unknown>) | undefined, one: (i: number) => unknown): Promise<unknown[] | undefined> {
  if (many === undefined) {
    const errors = errorsOf(await settleEach(Array.from({ length: count }, (_, i) => () => one(i))));
    return errors.every((error) => error === undefined) ? undefined : errors;
  }
  try {
    await many();
    return undefined;
  } catch (error) {
    // A step that failed for some ids only names each id's error (one entry per id, or it is read as one error).
    if (error instanceof PartialStepError && error.errors.length === count) return [...error.errors];
    return new Array<unknown>(count).fill(reasonOf(error));
  }
}

/** `batchOrEach`, reported: the step's latency and outcome, and its first error, as engine events. */
export async function storeStep<T>(
  emit: (event: EngineEvent) => void,
  step: StoreStep,
  count: number,
  many: (() => Promise<readonly T[]>) | undefined,
  one: (i: number) => T | Promise<T>,
  failureOf?: FailureOf<T>,
): Promise<Answer<T>[]> {
  const started = Date.now();
  const answers = await batchOrEach(`${step}Many`, count, many, one, failureOf);
  const failed = answers.filter((answer): answer is { ok: false; error: unknown } => !answer.ok);
  emit({ type: "store-step", step, ids: count, durationMs: Date.now() - started, ok: failed.length === 0 });
  if (failed.length > 0) emit({ type: "store-error", step, ids: failed.length, error: (failed[0] as { error: unknown }).error });
  return answers;
}
