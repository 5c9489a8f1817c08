/**
 * The decision table (docs/ARCHITECTURE.md), one verdict function at a time: every branch of
 * src/decision.ts with the whole result it returns — status, ack, key, dedupe, handlerRan,
 * retryAfterMs and the typed error — under each policy. Pure functions, no store: the engine
 * tests show the verdicts reach the runtime; these pin each verdict exactly.
 */
import { describe, expect, it } from "vitest";
import {
  DEFAULT_POLICY,
  type DecisionPolicy,
  type MessageResult,
  afterCommit,
  afterGate,
  afterRun,
  afterTransaction,
  asStoreError,
  blocked,
  conflict,
  copyOf,
  invalid,
  notStarted,
  stillRunning,
} from "../../src/decision.js";
import {
  type DeadlineExceededError,
  FenceLostError,
  GroupBlockedError,
  type InvalidMessageError,
  type PayloadConflictError,
  StoreUnavailableError,
} from "../../src/errors.js";

const DROP: DecisionPolicy = { onStoreError: "retry", onInvalid: "drop", onConflict: "drop" };
const RUN_ON_STORE_ERROR: DecisionPolicy = { ...DEFAULT_POLICY, onStoreError: "run" };

/** The result without its error, for a whole-object comparison; the error is checked on its own. */
function shape(result: MessageResult): Omit<MessageResult, "error"> & { error?: string } {
  const { error, ...rest } = result;
  return error === undefined ? rest : { ...rest, error: (error as Error).constructor.name };
}

describe("invalid", () => {
  it("is retried by default and acked only when the policy drops invalid bodies", () => {
    const retried = invalid("body is empty", DEFAULT_POLICY);
    expect(shape(retried)).toEqual({ status: "invalid", ack: false, dedupe: "none", handlerRan: false, error: "InvalidMessageError" });
    expect((retried.error as InvalidMessageError).reason).toBe("body is empty");
    expect(shape(invalid("x", DROP, "k"))).toEqual({ status: "invalid", ack: true, dedupe: "none", handlerRan: false, key: "k", error: "InvalidMessageError" });
    // onConflict alone does not drop invalid bodies.
    expect(invalid("x", { ...DEFAULT_POLICY, onConflict: "drop" }).ack).toBe(false);
  });
});

describe("asStoreError", () => {
  it("keeps a StoreUnavailableError as it is", () => {
    const error = new StoreUnavailableError("dynamodb", "claimMany", "throttled");
    expect(asStoreError(error, "claim")).toBe(error);
  });

  it("wraps anything else, naming the step and the thrown kind, with the original as cause", () => {
    const original = new TypeError("boom with a payload");
    const claim = asStoreError(original, "claim") as StoreUnavailableError;
    expect(claim).toBeInstanceOf(StoreUnavailableError);
    expect(claim.message).toBe("store.claim failed: threw TypeError");
    expect([claim.store, claim.operation, claim.cause]).toEqual(["store", "claim", original]);
    const seen = asStoreError("down", "seen-set") as StoreUnavailableError;
    expect(seen.message).toBe("store.seen failed: threw string");
    expect([seen.operation, seen.cause]).toEqual(["seen", "down"]);
  });
});

describe("conflict", () => {
  it("names the key, the state and both fingerprints; acked only with onConflict drop", () => {
    const result = conflict(DEFAULT_POLICY, "claim", "order-1", "in-flight", "h1:stored", "h1:received");
    expect(shape(result)).toEqual({ status: "conflict", ack: false, dedupe: "claim", handlerRan: false, key: "order-1", error: "PayloadConflictError" });
    const error = result.error as PayloadConflictError;
    expect([error.key, error.state, error.stored, error.received]).toEqual(["order-1", "in-flight", "h1:stored", "h1:received"]);
    expect(conflict(DROP, "seen-set", "k", "done", "a", "b")).toMatchObject({ ack: true, dedupe: "seen-set" });
    expect(conflict({ ...DEFAULT_POLICY, onInvalid: "drop" }, "claim", "k", "done", "a", "b").ack).toBe(false);
  });
});

describe("afterGate", () => {
  it("runs a message without a key, undeduplicated", () => {
    expect(afterGate({ kind: "no-key" }, DEFAULT_POLICY, undefined)).toEqual({ next: "run", dedupe: "none" });
  });

  it("fails closed on a store error by default, keeping the mode and key; runs undeduplicated with onStoreError run", () => {
    const step = afterGate({ kind: "store-error", mode: "seen-set", error: new Error("x") }, DEFAULT_POLICY, "k");
    expect(step.next).toBe("stop");
    if (step.next !== "stop") return;
    expect(shape(step.result)).toEqual({ status: "failed", ack: false, dedupe: "seen-set", handlerRan: false, key: "k", error: "StoreUnavailableError" });
    expect((step.result.error as StoreUnavailableError).operation).toBe("seen");
    const noKey = afterGate({ kind: "store-error", mode: "claim", error: new Error("x") }, DEFAULT_POLICY, undefined);
    expect(noKey.next === "stop" && "key" in noKey.result).toBe(false);
    expect(afterGate({ kind: "store-error", mode: "claim", error: 1 }, RUN_ON_STORE_ERROR, "k")).toEqual({ next: "run", dedupe: "none" });
  });

  it("seen-set: unseen runs; seen is a duplicate, or a conflict when both fingerprints are known and differ", () => {
    expect(afterGate({ kind: "seen", seen: false, fingerprint: "a" }, DEFAULT_POLICY, "k", "b")).toEqual({ next: "run", dedupe: "seen-set" });
    const duplicate = { next: "stop", result: { status: "duplicate", ack: true, dedupe: "seen-set", handlerRan: false, key: "k" } };
    expect(afterGate({ kind: "seen", seen: true }, DEFAULT_POLICY, "k", "b")).toEqual(duplicate);
    expect(afterGate({ kind: "seen", seen: true, fingerprint: "a" }, DEFAULT_POLICY, "k")).toEqual(duplicate);
    expect(afterGate({ kind: "seen", seen: true, fingerprint: "a" }, DEFAULT_POLICY, "k", "a")).toEqual(duplicate);
    const step = afterGate({ kind: "seen", seen: true, fingerprint: "a" }, DROP, "k", "b");
    expect(step.next === "stop" && shape(step.result)).toEqual({ status: "conflict", ack: true, dedupe: "seen-set", handlerRan: false, key: "k", error: "PayloadConflictError" });
    expect(step.next === "stop" && (step.result.error as PayloadConflictError).state).toBe("done");
  });

  it("claim: claimed runs with the token; done is a duplicate; in-flight parks with a whole, non-negative retryAfterMs", () => {
    expect(afterGate({ kind: "claim", claim: { status: "claimed", token: "t1" } }, DEFAULT_POLICY, "k", "a")).toEqual({ next: "run", dedupe: "claim", token: "t1" });
    expect(afterGate({ kind: "claim", claim: { status: "done", fingerprint: "a" } }, DEFAULT_POLICY, "k", "a")).toEqual({
      next: "stop",
      result: { status: "duplicate", ack: true, dedupe: "claim", handlerRan: false, key: "k" },
    });
    expect(afterGate({ kind: "claim", claim: { status: "in-flight", retryAfterMs: 1_234.2 } }, DEFAULT_POLICY, "k")).toEqual({
      next: "stop",
      result: { status: "in-flight", ack: false, dedupe: "claim", handlerRan: false, retryAfterMs: 1_235, key: "k" },
    });
    const negative = afterGate({ kind: "claim", claim: { status: "in-flight", retryAfterMs: -50 } }, DEFAULT_POLICY, undefined);
    expect(negative).toEqual({ next: "stop", result: { status: "in-flight", ack: false, dedupe: "claim", handlerRan: false, retryAfterMs: 0 } });
  });

  it("claim: a done or in-flight record with another fingerprint is a conflict naming that state; a won claim never is", () => {
    for (const [claim, state] of [
      [{ status: "done", fingerprint: "a" }, "done"],
      [{ status: "in-flight", retryAfterMs: 10, fingerprint: "a" }, "in-flight"],
    ] as const) {
      const step = afterGate({ kind: "claim", claim }, DEFAULT_POLICY, "k", "b");
      expect(step.next === "stop" && shape(step.result)).toEqual({ status: "conflict", ack: false, dedupe: "claim", handlerRan: false, key: "k", error: "PayloadConflictError" });
      const error = step.next === "stop" ? (step.result.error as PayloadConflictError) : undefined;
      expect([error?.state, error?.stored, error?.received]).toEqual([state, "a", "b"]);
    }
    // A claim the store granted carries no stored fingerprint to compare: it runs, even if a store
    // (wrongly) attached one — the type has no such field, so the extra one is passed as a non-literal.
    const granted = { status: "claimed", token: "t", fingerprint: "a" } as const;
    expect(afterGate({ kind: "claim", claim: granted }, DEFAULT_POLICY, "k", "b")).toEqual({ next: "run", dedupe: "claim", token: "t" });
    // Without a key there is nothing to name in a conflict: the record's state decides.
    expect(afterGate({ kind: "claim", claim: { status: "done", fingerprint: "a" } }, DEFAULT_POLICY, undefined, "b")).toEqual({
      next: "stop",
      result: { status: "duplicate", ack: true, dedupe: "claim", handlerRan: false },
    });
  });
});

describe("afterRun", () => {
  it("commits a success with a key; a success without one is final and acked", () => {
    expect(afterRun({ ok: true }, "claim", "k", true)).toEqual({ next: "commit" });
    expect(afterRun({ ok: true }, "none", undefined, false)).toEqual({ next: "stop", result: { status: "ran", ack: true, dedupe: "none", handlerRan: true } });
  });

  it("a throw is failed and retried; the claim is released when one is held", () => {
    const error = new Error("card declined");
    expect(afterRun({ ok: false, error }, "claim", "k", true)).toEqual({
      next: "release",
      result: { status: "failed", ack: false, dedupe: "claim", handlerRan: true, error, key: "k" },
    });
    expect(afterRun({ ok: false, error }, "seen-set", undefined, false)).toEqual({
      next: "stop",
      result: { status: "failed", ack: false, dedupe: "seen-set", handlerRan: true, error },
    });
  });
});

describe("afterCommit", () => {
  it("ran when the commit landed; commit-failed but still acked when it did not", () => {
    expect(afterCommit(undefined, "claim", "k")).toEqual({ status: "ran", ack: true, dedupe: "claim", handlerRan: true, key: "k" });
    const error = new StoreUnavailableError("redis", "rememberMany", "timeout");
    expect(afterCommit(error, "seen-set", "k")).toEqual({ status: "commit-failed", ack: true, dedupe: "seen-set", handlerRan: true, key: "k", error });
  });
});

describe("copyOf", () => {
  const ran: MessageResult = { status: "ran", ack: true, dedupe: "claim", handlerRan: true, key: "k" };
  const failed: MessageResult = { status: "failed", ack: false, dedupe: "claim", handlerRan: true, key: "k", error: new Error("x") };

  it("shares an acked first copy's fate as a duplicate, and an unacked one's as in-flight", () => {
    expect(copyOf(ran, DEFAULT_POLICY)).toEqual({ status: "duplicate", ack: true, dedupe: "claim", handlerRan: false, key: "k" });
    expect(copyOf(failed, DEFAULT_POLICY)).toEqual({ status: "in-flight", ack: false, retryAfterMs: 0, dedupe: "claim", handlerRan: false, key: "k" });
    const parked: MessageResult = { status: "in-flight", ack: false, dedupe: "claim", handlerRan: false, key: "k", retryAfterMs: 900 };
    expect(copyOf(parked, DEFAULT_POLICY)).toMatchObject({ status: "in-flight", retryAfterMs: 900 });
    // An invalid first copy acked by onInvalid "drop" is no proof the effect happened.
    const droppedInvalid: MessageResult = { status: "invalid", ack: true, dedupe: "none", handlerRan: false, key: "k" };
    expect(copyOf(droppedInvalid, DEFAULT_POLICY)).toMatchObject({ status: "in-flight", ack: false });
  });

  it("a copy with another payload than its first copy is a conflict: done after an acked first copy, in-flight otherwise", () => {
    const done = copyOf(ran, DEFAULT_POLICY, { first: "a", copy: "b" });
    expect(shape(done)).toEqual({ status: "conflict", ack: false, dedupe: "claim", handlerRan: false, key: "k", error: "PayloadConflictError" });
    expect([(done.error as PayloadConflictError).state, (done.error as PayloadConflictError).stored, (done.error as PayloadConflictError).received]).toEqual(["done", "a", "b"]);
    expect((copyOf(failed, DROP, { first: "a", copy: "b" }).error as PayloadConflictError).state).toBe("in-flight");
    expect(copyOf(failed, DROP, { first: "a", copy: "b" }).ack).toBe(true);
    // Same payload, or one side unknown: no conflict.
    expect(copyOf(ran, DEFAULT_POLICY, { first: "a", copy: "a" }).status).toBe("duplicate");
    expect(copyOf(ran, DEFAULT_POLICY, { first: "a" }).status).toBe("duplicate");
  });

  it("after a conflicting first copy, the copy is compared with the stored record", () => {
    const firstConflict = conflict(DEFAULT_POLICY, "claim", "k", "done", "stored", "first");
    expect(copyOf(firstConflict, DEFAULT_POLICY, { first: "first", copy: "stored", stored: "stored" })).toEqual({
      status: "duplicate",
      ack: true,
      dedupe: "claim",
      handlerRan: false,
      key: "k",
    });
    const again = copyOf(firstConflict, DEFAULT_POLICY, { first: "first", copy: "first", stored: "stored" });
    expect(shape(again)).toEqual({ status: "conflict", ack: false, dedupe: "claim", handlerRan: false, key: "k", error: "PayloadConflictError" });
    expect([(again.error as PayloadConflictError).stored, (again.error as PayloadConflictError).received]).toEqual(["stored", "first"]);
    const inFlightConflict = conflict(DEFAULT_POLICY, "claim", "k", "in-flight", "stored", "first");
    expect(copyOf(inFlightConflict, DEFAULT_POLICY, { copy: "stored", stored: "stored" })).toEqual({
      status: "in-flight",
      ack: false,
      retryAfterMs: 0,
      dedupe: "claim",
      handlerRan: false,
      key: "k",
    });
    expect((copyOf(inFlightConflict, DEFAULT_POLICY, { copy: "other", stored: "stored" }).error as PayloadConflictError).state).toBe("in-flight");
    // A conflict without a PayloadConflictError (a user-built result) counts as a done record.
    const bare: MessageResult = { status: "conflict", ack: false, dedupe: "seen-set", handlerRan: false, key: "k" };
    expect(copyOf(bare, DEFAULT_POLICY, { copy: "x", stored: "x" }).status).toBe("duplicate");
  });

  it("keeps no key when the first copy had none", () => {
    const keyless: MessageResult = { status: "ran", ack: true, dedupe: "none", handlerRan: true };
    expect(copyOf(keyless, DEFAULT_POLICY, { first: "a", copy: "b" })).toEqual({ status: "duplicate", ack: true, dedupe: "none", handlerRan: false });
  });
});

describe("the deadline's verdicts", () => {
  it("not started: failed, not run, not acked, DeadlineExceededError('not started')", () => {
    const result = notStarted("claim", "k");
    expect(shape(result)).toEqual({ status: "failed", ack: false, dedupe: "claim", handlerRan: false, key: "k", error: "DeadlineExceededError" });
    expect((result.error as DeadlineExceededError).phase).toBe("not started");
    expect("key" in notStarted("none", undefined)).toBe(false);
  });

  it("still running: in-flight, ran, not acked, the lease left rounded up and never negative", () => {
    const result = stillRunning("claim", "k", 41_999.1);
    expect(shape(result)).toEqual({ status: "in-flight", ack: false, dedupe: "claim", handlerRan: true, retryAfterMs: 42_000, key: "k", error: "DeadlineExceededError" });
    expect((result.error as DeadlineExceededError).phase).toBe("still running");
    expect(stillRunning("seen-set", undefined, -5)).toMatchObject({ retryAfterMs: 0, dedupe: "seen-set" });
    expect("key" in stillRunning("none", undefined, 1)).toBe(false);
  });
});

describe("afterTransaction", () => {
  it("committed → ran and acked; fence lost → failed, claim not ours to release; else failed and released", () => {
    expect(afterTransaction({ ok: true }, "k")).toEqual({ next: "stop", result: { status: "ran", ack: true, dedupe: "claim", handlerRan: true, key: "k" } });
    const fence = new FenceLostError("k");
    expect(afterTransaction({ ok: false, error: fence }, "k")).toEqual({ next: "stop", result: { status: "failed", ack: false, dedupe: "claim", handlerRan: true, key: "k", error: fence } });
    const thrown = new Error("handler");
    expect(afterTransaction({ ok: false, error: thrown }, "k")).toEqual({ next: "release", result: { status: "failed", ack: false, dedupe: "claim", handlerRan: true, key: "k", error: thrown } });
    // A rejection with undefined (a bare `reject()`) is a failure too: the transaction rolled back.
    expect(afterTransaction({ ok: false, error: undefined }, "k")).toEqual({ next: "release", result: { status: "failed", ack: false, dedupe: "claim", handlerRan: true, key: "k", error: undefined } });
    // The transaction failed before the handler was called: released, and said so.
    const down = new Error("connection refused");
    expect(afterTransaction({ ok: false, error: down }, "k", false)).toEqual({ next: "release", result: { status: "failed", ack: false, dedupe: "claim", handlerRan: false, key: "k", error: down } });
  });
});

describe("blocked", () => {
  it("a FIFO message behind an unacked one: failed, not run, the group named", () => {
    const error = new GroupBlockedError("g1");
    expect(blocked(error, "claim", "k")).toEqual({ status: "failed", ack: false, dedupe: "claim", handlerRan: false, error, key: "k" });
    expect(blocked(error, "none", undefined)).toEqual({ status: "failed", ack: false, dedupe: "none", handlerRan: false, error });
  });
});
