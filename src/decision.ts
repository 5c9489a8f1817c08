/**
 * The decision for one delivery, written once (DESIGN §3). Every wrapper — `wrap`, the batch
 * engine, and through it the Lambda and Cloudflare handlers — reaches its verdicts here.
 *
 * Each function maps what just happened to one message (decoded, gated by the store, run,
 * committed) to what happens next: go on, or stop with a final `MessageResult`. The functions
 * are pure; the engine performs the store calls and the handler run between them, batched.
 *
 * What this is *not*: the place that talks to a store or a runtime.
 */
import type { Claim } from "./contract.js";
import { InvalidMessageError } from "./errors.js";

/** The six outcomes of one delivery. */
export type ResultStatus = "ran" | "duplicate" | "in-flight" | "failed" | "invalid" | "commit-failed";

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
  /** The handler's error (`failed`), the store's (`failed` on a store outage, `commit-failed`), or an `InvalidMessageError`. */
  readonly error?: unknown;
}

/** Policies that change a verdict. */
export interface DecisionPolicy {
  /** Store unreachable when deciding: `"retry"` (default, fail-closed) or `"run"` without dedupe. */
  readonly onStoreError: "retry" | "run";
  /** A body that is not an accepted message: `"retry"` (default; the queue's DLQ takes it) or `"drop"` (ack). */
  readonly onInvalid: "retry" | "drop";
}

export const DEFAULT_POLICY: DecisionPolicy = { onStoreError: "retry", onInvalid: "retry" };

/** What the store said at the gate (before the handler). */
export type GateOutcome =
  | { readonly kind: "claim"; readonly claim: Claim }
  | { readonly kind: "seen"; readonly seen: boolean }
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
    ...(key === undefined ? {} : { key }),
  };
}

/** The gate's verdict: run, or stop as duplicate / in-flight / store failure. */
export function afterGate(gate: GateOutcome, policy: DecisionPolicy, key: string | undefined): Step {
  const keyed = key === undefined ? {} : { key };
  switch (gate.kind) {
    case "no-key":
      return { next: "run", dedupe: "none" };
    case "store-error":
      if (policy.onStoreError === "run") return { next: "run", dedupe: "none" };
      return { next: "stop", result: { status: "failed", ack: false, dedupe: gate.mode, handlerRan: false, error: gate.error, ...keyed } };
    case "seen":
      if (gate.seen) return { next: "stop", result: { status: "duplicate", ack: true, dedupe: "seen-set", handlerRan: false, ...keyed } };
      return { next: "run", dedupe: "seen-set" };
    case "claim": {
      const claim = gate.claim;
      switch (claim.status) {
        case "claimed":
          return { next: "run", dedupe: "claim", token: claim.token };
        case "done":
          return { next: "stop", result: { status: "duplicate", ack: true, dedupe: "claim", handlerRan: false, ...keyed } };
        case "in-flight":
          return {
            next: "stop",
            result: {
              status: "in-flight",
              ack: false,
              dedupe: "claim",
              handlerRan: false,
              retryAfterMs: Math.max(0, Math.ceil(claim.retryAfterMs)),
              ...keyed,
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

export function afterRun(
  outcome: { readonly ok: true } | { readonly ok: false; readonly error: unknown },
  dedupe: DedupeMode,
  key: string | undefined,
  holdsClaim: boolean,
): AfterRun {
  const keyed = key === undefined ? {} : { key };
  if (outcome.ok) {
    if (key === undefined) return { next: "stop", result: { status: "ran", ack: true, dedupe, handlerRan: true } };
    return { next: "commit" };
  }
  const result: MessageResult = { status: "failed", ack: false, dedupe, handlerRan: true, error: outcome.error, ...keyed };
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
 * retried otherwise.
 */
export function copyOf(first: MessageResult): MessageResult {
  const base = { dedupe: first.dedupe, handlerRan: false, ...(first.key === undefined ? {} : { key: first.key }) };
  if (first.ack && first.status !== "invalid") return { status: "duplicate", ack: true, ...base };
  return { status: "in-flight", ack: false, retryAfterMs: first.retryAfterMs ?? 0, ...base };
}

/** A FIFO message not run because an earlier message of its group was not acknowledged. */
export function blocked(error: unknown, dedupe: DedupeMode, key: string | undefined): MessageResult {
  return { status: "failed", ack: false, dedupe, handlerRan: false, error, ...(key === undefined ? {} : { key }) };
}
