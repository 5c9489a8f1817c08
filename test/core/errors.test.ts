/**
 * The typed errors: each one's `code` (what a program switches on), `name`, its fields, and the
 * message a person reads in a log — which names keys and fingerprints but never a payload.
 */
import { describe, expect, it } from "vitest";
import * as errors from "../../src/errors.js";

describe("typed errors", () => {
  it("each has its class name, its code and the base class", () => {
    const cases: [errors.BabelQueueServerlessError, string, string][] = [
      [new errors.InvalidOptionError("leaseMs", "must be positive"), "InvalidOptionError", "INVALID_OPTION"],
      [new errors.StoreUnavailableError("dynamodb", "claimMany", "throttled"), "StoreUnavailableError", "STORE_UNAVAILABLE"],
      [new errors.InvalidMessageError("body is empty"), "InvalidMessageError", "INVALID_MESSAGE"],
      [new errors.GroupBlockedError("g"), "GroupBlockedError", "GROUP_BLOCKED"],
      [new errors.InFlightError("k", 10), "InFlightError", "IN_FLIGHT"],
      [new errors.PayloadConflictError("k", "done", "a", "b"), "PayloadConflictError", "PAYLOAD_CONFLICT"],
      [new errors.FenceLostError("k"), "FenceLostError", "FENCE_LOST"],
      [new errors.TransactionConditionError("stock below zero"), "TransactionConditionError", "TRANSACTION_CONDITION"],
      [new errors.DeadlineExceededError("not started"), "DeadlineExceededError", "DEADLINE_EXCEEDED"],
      // A StoreUnavailableError (its code), for the ids of a step that failed alone.
      [new errors.PartialStepError("s", "remember", [undefined]), "PartialStepError", "STORE_UNAVAILABLE"],
    ];
    // One case per error class the module exports (a new class needs its case here).
    const classes = Object.values(errors).filter((value) => value !== errors.BabelQueueServerlessError);
    expect(new Set(cases.map(([error]) => error.constructor))).toEqual(new Set(classes));
    for (const [error, name, code] of cases) {
      expect([error.name, error.code]).toEqual([name, code]);
      expect(error).toBeInstanceOf(errors.BabelQueueServerlessError);
      expect(error).toBeInstanceOf(Error);
    }
  });

  it("messages say what happened and what was kept, with their fields", () => {
    const option = new errors.InvalidOptionError("leaseMs", "must be a positive integer");
    expect([option.message, option.option]).toEqual(['option "leaseMs" must be a positive integer', "leaseMs"]);

    const cause = new Error("socket hang up");
    const store = new errors.StoreUnavailableError("upstash", "rememberMany", "timed out", { cause });
    expect([store.message, store.store, store.operation, store.cause]).toEqual(["upstash.rememberMany failed: timed out", "upstash", "rememberMany", cause]);

    const down = new errors.StoreUnavailableError("DurableObjectStore", "remember", "the Durable Object call failed: Error", { overloaded: true });
    const partial = new errors.PartialStepError("DurableObjectStore", "remember", [undefined, down, undefined]);
    expect([partial.message, partial.errors, partial.cause, partial.overloaded, partial.operation]).toEqual([
      "DurableObjectStore.remember failed: 1 of 3 ids (the others were written); the first: DurableObjectStore.remember failed: the Durable Object call failed: Error",
      [undefined, down, undefined],
      down,
      true,
      "remember",
    ]);
    expect(partial).toBeInstanceOf(errors.StoreUnavailableError);
    expect(new errors.PartialStepError("s", "remember", [new errors.InvalidOptionError("x", "bad")]).overloaded).toBe(false);
    expect(new errors.PartialStepError("s", "remember", [undefined]).message).toBe("s.remember failed: 0 of 1 ids (the others were written); the first: none");

    const invalid = new errors.InvalidMessageError("'meta' must be an object");
    expect([invalid.message, invalid.reason]).toEqual(["message rejected: 'meta' must be an object", "'meta' must be an object"]);

    const blocked = new errors.GroupBlockedError("tenant-7");
    expect([blocked.message, blocked.group]).toEqual(['not run: an earlier message of FIFO group "tenant-7" was not acknowledged', "tenant-7"]);

    const inFlight = new errors.InFlightError("order-1", 2_500);
    expect([inFlight.message, inFlight.key, inFlight.retryAfterMs]).toEqual([
      "not run: another delivery of this id holds its claim (retry after 2500 ms)",
      "order-1",
      2_500,
    ]);

    const fence = new errors.FenceLostError("order-2");
    expect([fence.message, fence.key]).toEqual(["transaction not committed: this delivery no longer owns the id's claim; nothing was written", "order-2"]);

    const condition = new errors.TransactionConditionError("stock below zero", [1, 3], { cause });
    expect([condition.message, condition.failed, condition.cause]).toEqual(["transaction not committed: stock below zero", [1, 3], cause]);
    expect(new errors.TransactionConditionError("x").failed).toEqual([]);
  });

  it("a payload conflict names the key and both fingerprints, says committed or claimed, and shortens a long key", () => {
    const done = new errors.PayloadConflictError("order-1", "done", "h1:aaa", "h1:bbb");
    expect(done.message).toBe('id "order-1" was committed with another payload (fingerprint h1:aaa, this message h1:bbb)');
    expect([done.key, done.state, done.stored, done.received]).toEqual(["order-1", "done", "h1:aaa", "h1:bbb"]);
    expect(new errors.PayloadConflictError("k", "in-flight", "a", "b").message).toBe('id "k" was claimed with another payload (fingerprint a, this message b)');
    const longKey = "x".repeat(250);
    const long = new errors.PayloadConflictError(longKey, "done", "a", "b");
    expect(long.message).toContain(`"${"x".repeat(200)}…"`);
    expect(long.message).not.toContain("x".repeat(201));
    expect(long.key).toBe(longKey);
    // At exactly 200 characters nothing is cut.
    expect(new errors.PayloadConflictError("y".repeat(200), "done", "a", "b").message).toContain(`"${"y".repeat(200)}"`);
  });

  it("a deadline error says which side of the start it was", () => {
    const notStarted = new errors.DeadlineExceededError("not started");
    expect([notStarted.phase, notStarted.message]).toEqual(["not started", "not run: the invocation's deadline was near, so the handler was not started"]);
    const running = new errors.DeadlineExceededError("still running");
    expect([running.phase, running.message]).toEqual([
      "still running",
      "not acknowledged: the handler was still running at the invocation's deadline (its claim is kept)",
    ]);
  });
});
