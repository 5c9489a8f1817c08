/**
 * src/wrap.ts, pinned exactly: the error each not-acknowledged result rejects with, and that every
 * field of a `WrapDelivery` reaches the engine (the handler's context, the interceptor's info, the
 * claim's lease, the deadline) — and that an absent one adds nothing.
 */
import { describe, expect, it } from "vitest";
import type { MessageResult } from "../../src/decision.js";
import { BabelQueueServerlessError, DeadlineExceededError, InFlightError, InvalidOptionError } from "../../src/errors.js";
import { InMemoryStore } from "../../src/memory-store.js";
import { rejectionOf, wrap, wrapResult } from "../../src/wrap.js";
import { envelope } from "../support/envelopes.js";

const body = (id: string) => envelope(id, { job: "j", traceId: "t-1", data: {} });

describe("rejectionOf", () => {
  it("is the result's own error when it has one", () => {
    const error = new Error("handler failed");
    expect(rejectionOf({ status: "failed", ack: false, dedupe: "claim", handlerRan: true, key: "k", error })).toBe(error);
    const inFlight = new InFlightError("k", 5);
    expect(rejectionOf({ status: "in-flight", ack: false, dedupe: "claim", handlerRan: false, key: "k", error: inFlight })).toBe(inFlight);
  });

  it("is an InFlightError with the key and retry time for an in-flight result without one", () => {
    const error = rejectionOf({ status: "in-flight", ack: false, dedupe: "claim", handlerRan: false, key: "k-1", retryAfterMs: 1234 });
    expect(error).toBeInstanceOf(InFlightError);
    expect(error).toMatchObject({ code: "IN_FLIGHT", key: "k-1", retryAfterMs: 1234 });
    // A non-package error on an in-flight result is replaced too.
    const replaced = rejectionOf({ status: "in-flight", ack: false, dedupe: "claim", handlerRan: false, error: new Error("x") });
    expect(replaced).toBeInstanceOf(InFlightError);
    expect(replaced).toMatchObject({ key: "", retryAfterMs: 0 });
    expect((replaced as Error).message).toBe("not run: another delivery of this id holds its claim (retry after 0 ms)");
  });

  it("is a NOT_ACKNOWLEDGED error naming the status for a result with no error", () => {
    const result: MessageResult = { status: "failed", ack: false, dedupe: "none", handlerRan: false };
    const error = rejectionOf(result);
    expect(error).toBeInstanceOf(BabelQueueServerlessError);
    expect(error).toMatchObject({ name: "BabelQueueServerlessError", code: "NOT_ACKNOWLEDGED", message: "not acknowledged (failed)" });
  });
});

describe("wrap", () => {
  it("resolves when the handler ran and rejects with the handler's own error when it threw", async () => {
    const store = new InMemoryStore();
    const failure = new Error("boom");
    let calls = 0;
    const handler = wrap(store, async () => {
      calls += 1;
      if (calls === 1) throw failure;
    });
    await expect(handler(body("m-1"))).rejects.toBe(failure);
    await expect(handler(body("m-1"))).resolves.toBeUndefined();
    await expect(handler(body("m-1"))).resolves.toBeUndefined();
    expect(calls).toBe(2);
    expect(await store.seen("m-1")).toBe(true);
  });
});

describe("wrap: the delivery argument", () => {
  it("takes null as no details; anything else that is not an object is an InvalidOptionError, and nothing runs", async () => {
    const store = new InMemoryStore();
    const runs: string[] = [];
    const handler = wrap(store, async (message) => void runs.push(message.meta.id as string));
    await expect(handler(body("m-null"), null as never)).resolves.toBeUndefined();
    for (const delivery of [3, "twice", true]) {
      const failure = await handler(body("m-bad"), delivery as never).catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(InvalidOptionError);
      expect((failure as InvalidOptionError).option).toBe("delivery");
      expect((failure as Error).message).toContain("must be an object");
    }
    expect(runs).toEqual(["m-null"]);
    expect(await store.seen("m-bad")).toBe(false);
  });
});

describe("wrapResult: the delivery's fields", () => {
  it("hands messageId, headers and redeliveries on to the handler and the interceptor", async () => {
    const store = new InMemoryStore();
    const seen: unknown[] = [];
    const handler = wrapResult(store, async (_message, context) => void seen.push({ context }), {
      intercept: async (run, info) => {
        seen.push({ info });
        await run();
      },
    });
    const result = await handler(body("m-1"), { messageId: "q-1", headers: { traceparent: "00-x" }, redeliveries: 3 });
    expect(result).toStrictEqual({ status: "ran", ack: true, dedupe: "claim", handlerRan: true, key: "m-1" });
    expect(seen).toStrictEqual([
      { info: { index: 0, key: "m-1", attempts: 3, messageId: "q-1", headers: { traceparent: "00-x" }, traceId: "t-1" } },
      { context: { key: "m-1", attempts: 3, dedupe: "claim" } },
    ]);
  });

  it("adds nothing for the fields a delivery leaves out", async () => {
    const store = new InMemoryStore();
    const seen: unknown[] = [];
    const handler = wrapResult(store, async () => {}, {
      intercept: async (run, info) => {
        seen.push(info);
        await run();
      },
    });
    await handler(body("m-1"));
    await handler(body("m-2"), {});
    expect(seen).toStrictEqual([
      { index: 0, key: "m-1", attempts: 0, traceId: "t-1" },
      { index: 0, key: "m-2", attempts: 0, traceId: "t-1" },
    ]);
  });

  it("claims for the delivery's leaseMs, else the engine's, else the store's", async () => {
    const now = 1_700_000_000_000;
    const store = new InMemoryStore({ now: () => now, leaseMs: 30_000 });
    const leases: unknown[] = [];
    const probe = async (message: { meta: { id: string } }) => {
      leases.push(await store.inspect(message.meta.id));
    };
    await wrapResult(store, probe as never)(body("a"), { leaseMs: 12_345 });
    await wrapResult(store, probe as never)(body("b"));
    await wrapResult(store, probe as never, { leaseMs: 20_000 })(body("c"));
    await wrapResult(store, probe as never, { leaseMs: 20_000 })(body("d"), { leaseMs: 5_000 });
    expect(leases).toEqual([
      { status: "in-flight", leaseLeftMs: 12_345, fingerprint: expect.any(String) },
      { status: "in-flight", leaseLeftMs: 30_000, fingerprint: expect.any(String) },
      { status: "in-flight", leaseLeftMs: 20_000, fingerprint: expect.any(String) },
      { status: "in-flight", leaseLeftMs: 5_000, fingerprint: expect.any(String) },
    ]);
  });

  it("honours the delivery's deadline: one already past starts nothing", async () => {
    const store = new InMemoryStore();
    let ran = false;
    const handler = wrapResult(store, async () => {
      ran = true;
    });
    const result = await handler(body("m-1"), { deadline: Date.now() - 1_000 });
    expect(result).toMatchObject({ status: "failed", ack: false, handlerRan: false, key: "m-1" });
    expect(result.error).toBeInstanceOf(DeadlineExceededError);
    expect(result.error).toMatchObject({ code: "DEADLINE_EXCEEDED", phase: "not started" });
    expect(ran).toBe(false);
    expect(await store.inspect("m-1")).toBeNull();
    // Far enough ahead, it runs.
    expect(await handler(body("m-2"), { deadline: Date.now() + 60_000 })).toMatchObject({ status: "ran", ack: true });
    expect(ran).toBe(true);
    await expect(wrap(store, async () => {})(body("m-3"), { deadline: Date.now() - 1_000 })).rejects.toBeInstanceOf(
      DeadlineExceededError,
    );
  });
});
