/**
 * src/decision.ts, the edges the decision-table tests leave out: the default policy's values, a
 * `seen` gate or a first copy's conflict without a key (nothing to name in a conflict), and a copy
 * with another payload than an invalid first copy that `onInvalid: "drop"` acknowledged.
 */
import { describe, expect, it } from "vitest";
import { DEFAULT_POLICY, type DecisionPolicy, type MessageResult, afterGate, copyOf } from "../../src/decision.js";
import type { PayloadConflictError } from "../../src/errors.js";

const DROP_INVALID: DecisionPolicy = { ...DEFAULT_POLICY, onInvalid: "drop" };

describe("decision edges", () => {
  it("retries by default: on a store error, an invalid body and a conflict", () => {
    expect(DEFAULT_POLICY).toEqual({ onStoreError: "retry", onInvalid: "retry", onConflict: "retry" });
  });

  it("seen-set: without a key, a seen record is a duplicate whatever the fingerprints", () => {
    expect(afterGate({ kind: "seen", seen: true, fingerprint: "a" }, DEFAULT_POLICY, undefined, "b")).toEqual({
      next: "stop",
      result: { status: "duplicate", ack: true, dedupe: "seen-set", handlerRan: false },
    });
  });

  it("a copy of a keyless conflict shares its fate, without comparing fingerprints", () => {
    const keyless: MessageResult = { status: "conflict", ack: false, dedupe: "seen-set", handlerRan: false };
    expect(copyOf(keyless, DEFAULT_POLICY, { first: "f", copy: "x", stored: "y" })).toEqual({
      status: "in-flight",
      ack: false,
      retryAfterMs: 0,
      dedupe: "seen-set",
      handlerRan: false,
    });
  });

  it("a copy with another payload than a dropped invalid first copy conflicts with an in-flight record, not a done one", () => {
    const droppedInvalid: MessageResult = { status: "invalid", ack: true, dedupe: "claim", handlerRan: false, key: "k" };
    const result = copyOf(droppedInvalid, DROP_INVALID, { first: "a", copy: "b" });
    expect(result.status).toBe("conflict");
    expect(result.ack).toBe(false);
    expect((result.error as PayloadConflictError).state).toBe("in-flight");
    expect((result.error as PayloadConflictError).message).toBe('id "k" was claimed with another payload (fingerprint a, this message b)');
  });
});
