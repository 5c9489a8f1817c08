/**
 * The decision for one delivery, written once (docs/ARCHITECTURE.md, "One message, decided once"). Every wrapper — `wrap`, the batch
 * engine, and through it the Lambda and Cloudflare handlers — reaches its verdicts here.
 *
 * Each function maps what just happened to one message (decoded, gated by the store, run,
 * committed) to what happens next: go on, or stop with a final `MessageResult`. The functions
 * are pure; the engine performs the store calls and the handler run between them, batched.
 *
 * What this is *not*: the place that talks to a store or a runtime.
 */
import type { Claim } from "./contract.js";
import {
  DeadlineExceededError,
  FenceLostError,
  InvalidMessageError,
  PayloadConflictError,
  StoreUnavailableError,
} from "./errors.js";
import { fingerprintsDiffer } from "./fingerprint.js";

/** The seven outcomes of one delivery. */
export type ResultStatus = "ran" | "duplicate" | "in-flight" | "failed" | "invalid" | "conflict" | "commit-failed";

/** How the id was guarded: an atomic claim, a seen-set check, or not at all (no usable id, or store down with `onStoreError: "run"`). */
export type DedupeMode = "claim" | "seen-set" | "none";

/** The final word on one delivery. */
export interface MessageResult {
  readonly status: ResultStatus;
  /** Whether the runtime should acknowledge (delete) the delivery. Everything else is retried. */
  readonly ack: boolean;
  /** The dedupe key, when the message had a usable one. */
  readonly key?: string;
  readonly dedupe: DedupeMode;
  /** Whether the user's handler was invoked for this delivery. */
  readonly handlerRan: boolean;
  /** For `in-flight`: how long until the other delivery's lease ends (ms). */
  readonly retryAfterMs?: number;
  /**
   * Why, where there is a why: the handler's error (`failed`), the store's (`failed` on a store
   * outage, `commit-failed`), an `InvalidMessageError`, a `PayloadConflictError` (`conflict`), a
   * `DeadlineExceededError` (not started, or still running, when the runtime's deadline came), or a
   * `FenceLostError` (transactional mode).
   */
  readonly error?: unknown;
}

/** Policies that change a verdict. */
export interface DecisionPolicy {
  /** Store unreachable when deciding: `"retry"` (default, fail-closed) or `"run"` without dedupe. */
  readonly onStoreError: "retry" | "run";
  /** A body that is not an accepted message: `"retry"` (default; the queue's DLQ takes it) or `"drop"` (ack). */
  readonly onInvalid: "retry" | "drop";
  /** A reused id with another payload: `"retry"` (default; not acked, so the DLQ takes it where a person can look) or `"drop"` (ack). */
  readonly onConflict: "retry" | "drop";
}

export const DEFAULT_POLICY: DecisionPolicy = { onStoreError: "retry", onInvalid: "retry", onConflict: "retry" };

/** `{ key }`, or `{}` without one: how a result carries its key. */
function keyed(key: string | undefined): { key?: string } {
  return key === undefined ? {} : { key };
}

/** What the store said at the gate (before the handler). */
export type GateOutcome =
  | { readonly kind: "claim"; readonly claim: Claim }
  | { readonly kind: "seen"; readonly seen: boolean; readonly fingerprint?: string }
  | { readonly kind: "store-error"; readonly mode: "claim" | "seen-set"; readonly error: unknown }
  | { readonly kind: "no-key" };

/** Go on and run the handler (holding `token` when a claim was won), or stop here. */
export type Step =
  | { readonly next: "run"; readonly dedupe: DedupeMode; readonly token?: string }
  | { readonly next: "stop"; readonly result: MessageResult };

/** A body that did not decode. */
export function invalid(reason: string, policy: DecisionPolicy, key?: string): MessageResult {
  return {
    status: "invalid",
    ack: policy.onInvalid === "drop",
    dedupe: "none",
    handlerRan: false,
    error: new InvalidMessageError(reason),
    ...keyed(key),
  };
}

/** A store's failure as the typed `StoreUnavailableError` (a user's store may throw anything), the original as `cause`. */
export function asStoreError(error: unknown, mode: "claim" | "seen-set"): unknown {
  if (error instanceof StoreUnavailableError) return error;
  const kind = error instanceof Error ? error.name : typeof error;
  return new StoreUnavailableError("store", mode === "claim" ? "claim" : "seen", `threw ${kind}`, { cause: error });
}

/** A reused id whose stored fingerprint is not this message's: not run; acked only with `onConflict: "drop"`. */
export function conflict(
  policy: DecisionPolicy,
  dedupe: DedupeMode,
  key: string,
  state: "done" | "in-flight",
  stored: string,
  received: string,
): MessageResult {
  return {
    status: "conflict",
    ack: policy.onConflict === "drop",
    dedupe,
    handlerRan: false,
    key,
    error: new PayloadConflictError(key, state, stored, received),
  };
}

/**
 * The gate's verdict: run, or stop as duplicate / in-flight / conflict / store failure.
 * `fingerprint` is this message's; a stored one that differs makes a `conflict`.
 */
/** The runs that hold no claim: one object each, shared (a verdict is never mutated). */
const RUN_UNGUARDED: Step = Object.freeze({ next: "run", dedupe: "none" });
const RUN_SEEN_SET: Step = Object.freeze({ next: "run", dedupe: "seen-set" });

export function afterGate(gate: GateOutcome, policy: DecisionPolicy, key: string | undefined, fingerprint?: string): Step {
  switch (gate.kind) {
    case "no-key":
      return RUN_UNGUARDED;
    case "store-error":
      if (policy.onStoreError === "run") return RUN_UNGUARDED;
      return { next: "stop", result: { status: "failed", ack: false, dedupe: gate.mode, handlerRan: false, error: asStoreError(gate.error, gate.mode), ...keyed(key) } };
    case "seen":
      if (gate.seen) {
        if (key !== undefined && fingerprintsDiffer(gate.fingerprint, fingerprint)) {
          return { next: "stop", result: conflict(policy, "seen-set", key, "done", gate.fingerprint as string, fingerprint as string) };
        }
        return { next: "stop", result: { status: "duplicate", ack: true, dedupe: "seen-set", handlerRan: false, ...keyed(key) } };
      }
      return RUN_SEEN_SET;
    case "claim": {
      const claim = gate.claim;
      if (claim.status !== "claimed" && key !== undefined && fingerprintsDiffer(claim.fingerprint, fingerprint)) {
        return { next: "stop", result: conflict(policy, "claim", key, claim.status, claim.fingerprint as string, fingerprint as string) };
      }
      switch (claim.status) {
        case "claimed":
          return { next: "run", dedupe: "claim", token: claim.token };
        case "done":
          return { next: "stop", result: { status: "duplicate", ack: true, dedupe: "claim", handlerRan: false, ...keyed(key) } };
        case "in-flight":
          return {
            next: "stop",
            result: {
              status: "in-flight",
              ack: false,
              dedupe: "claim",
              handlerRan: false,
              retryAfterMs: Math.max(0, Math.ceil(claim.retryAfterMs)),
              ...keyed(key),
            },
          };
      }
    }
  }
}

/** After the handler: what the store must do next. Commit only what ran without dedupe *and* has a key (store-down `"run"`), best effort. */
export type AfterRun =
  | { readonly next: "commit" }
  | { readonly next: "release"; readonly result: MessageResult }
  | { readonly next: "stop"; readonly result: MessageResult };

const COMMIT: AfterRun = Object.freeze({ next: "commit" });

export function afterRun(
  outcome: { readonly ok: true } | { readonly ok: false; readonly error: unknown },
  dedupe: DedupeMode,
  key: string | undefined,
  holdsClaim: boolean,
): AfterRun {
  if (outcome.ok) {
    if (key === undefined) return { next: "stop", result: { status: "ran", ack: true, dedupe, handlerRan: true } };
    return COMMIT;
  }
  const result: MessageResult = { status: "failed", ack: false, dedupe, handlerRan: true, error: outcome.error, ...keyed(key) };
  // A throw leaves the id unmarked so a redelivery runs it again; a held claim is released
  // so that redelivery does not have to wait for the lease.
  return holdsClaim ? { next: "release", result } : { next: "stop", result };
}

/**
 * After the commit. A failed commit is still acknowledged: the effect has happened, and a
 * retry would certainly repeat it. It is reported as `commit-failed` so the user can see it.
 */
export function afterCommit(error: unknown, dedupe: DedupeMode, key: string): MessageResult {
  if (error === undefined) return { status: "ran", ack: true, dedupe, handlerRan: true, key };
  return { status: "commit-failed", ack: true, dedupe, handlerRan: true, key, error };
}

/**
 * A second copy of a message inside the same batch (same key). It never runs: it shares its
 * first copy's fate — acknowledged when the first copy's effect happened or was already done,
 * retried otherwise — unless its fingerprint differs from the payload the id belongs to: then it
 * is a `conflict` like any reused id. That payload is the first copy's, or, when the first copy was
 * itself a conflict, the stored record's (`fingerprints.stored`): a copy that matches the record is
 * then an ordinary duplicate (or in-flight park).
 */
export function copyOf(
  first: MessageResult,
  policy: DecisionPolicy,
  fingerprints: { readonly first?: string; readonly copy?: string; readonly stored?: string } = {},
): MessageResult {
  const base = { dedupe: first.dedupe, handlerRan: false, ...keyed(first.key) };
  if (first.status === "conflict" && first.key !== undefined) {
    const conflictState = first.error instanceof PayloadConflictError ? first.error.state : "done";
    if (fingerprintsDiffer(fingerprints.stored, fingerprints.copy)) {
      return conflict(policy, first.dedupe, first.key, conflictState, fingerprints.stored as string, fingerprints.copy as string);
    }
    if (conflictState === "done") return { status: "duplicate", ack: true, ...base };
    return { status: "in-flight", ack: false, retryAfterMs: first.retryAfterMs ?? 0, ...base };
  }
  if (first.key !== undefined && fingerprintsDiffer(fingerprints.first, fingerprints.copy)) {
    const state = first.ack && first.status !== "invalid" ? "done" : "in-flight";
    return conflict(policy, first.dedupe, first.key, state, fingerprints.first as string, fingerprints.copy as string);
  }
  if (first.ack && first.status !== "invalid") return { status: "duplicate", ack: true, ...base };
  return { status: "in-flight", ack: false, retryAfterMs: first.retryAfterMs ?? 0, ...base };
}

/**
 * The runtime's deadline came before this message's handler started: not run, not acked (its
 * claim, if any, is released so the redelivery need not wait for the lease).
 */
export function notStarted(dedupe: DedupeMode, key: string | undefined): MessageResult {
  return {
    status: "failed",
    ack: false,
    dedupe,
    handlerRan: false,
    error: new DeadlineExceededError("not started"),
    ...keyed(key),
  };
}

/**
 * The runtime's deadline came while this message's handler was still running: not acked, and the
 * claim is KEPT (the handler may still be running when the redelivery comes; it is committed if it
 * finishes). Reported as `in-flight`, like any delivery whose id another run holds.
 */
export function stillRunning(dedupe: DedupeMode, key: string | undefined, retryAfterMs: number): MessageResult {
  return {
    status: "in-flight",
    ack: false,
    dedupe,
    handlerRan: true,
    retryAfterMs: Math.max(0, Math.ceil(retryAfterMs)),
    error: new DeadlineExceededError("still running"),
    ...keyed(key),
  };
}

/**
 * The runtime's deadline came while this message's commit was still in flight (its handler had
 * succeeded): acknowledged, as after a failed commit (`afterCommit`), because the effect has happened
 * and a redelivery would repeat it should the commit then fail. Whether the commit lands is not
 * known yet; if it fails, the commit step reports a store error.
 */
export function commitPending(dedupe: DedupeMode, key: string | undefined): MessageResult {
  return { status: "ran", ack: true, dedupe, handlerRan: true, ...keyed(key) };
}

/**
 * Transactional mode, after `store.transact`: committed (writes and the id together) → ack; the
 * fence lost → nothing was written, not acked, and the claim is not ours to release; anything else
 * (the handler threw, its own condition failed, transient failures outlasted the retries) →
 * nothing was written, not acked, the claim is released.
 */
export function afterTransaction(
  outcome: { readonly ok: true } | { readonly ok: false; readonly error: unknown },
  key: string,
  handlerRan = true,
): { readonly next: "stop" | "release"; readonly result: MessageResult } {
  // An outcome, not "error === undefined": a handler may reject with undefined (a bare `reject()`),
  // and its rolled-back transaction must not be acknowledged as committed.
  if (outcome.ok) return { next: "stop", result: { status: "ran", ack: true, dedupe: "claim", handlerRan: true, key } };
  const error = outcome.error;
  // `handlerRan` false: the transaction failed before the handler was called (BEGIN, the connection).
  const result: MessageResult = { status: "failed", ack: false, dedupe: "claim", handlerRan, key, error };
  return error instanceof FenceLostError ? { next: "stop", result } : { next: "release", result };
}

/** A FIFO message not run because an earlier message of its group was not acknowledged. */
export function blocked(error: unknown, dedupe: DedupeMode, key: string | undefined): MessageResult {
  return { status: "failed", ack: false, dedupe, handlerRan: false, error, ...keyed(key) };
}
