/**
 * The window (issue 9): group commit as each handler finishes, the deadline guard, FIFO order
 * with commits in flight, and results reported the moment they are final — on InMemoryStore,
 * with a thin wrapper that delays or records store steps (InMemoryStore answers at once, and a
 * round trip is what these tests are about).
 */
import { describe, expect, it, vi } from "vitest";
import type { Claim, ClaimRef, ClaimingStore } from "../../src/contract.js";
import type { MessageResult } from "../../src/decision.js";
import { BatchEngine, type Delivery, type EngineEvent } from "../../src/engine/index.js";
import { type DeadlineExceededError, GroupBlockedError, StoreUnavailableError } from "../../src/errors.js";
import { InMemoryStore } from "../../src/memory-store.js";
import { envelopeBody } from "../support/envelopes.js";
import { seenSetView } from "../support/store-views.js";

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function envelope(id: string): string {
  return envelopeBody(id, { job: "urn:babel:test:window", traceId: `t-${id}` });
}
const batchOf = (ids: string[], group?: (i: number) => string | undefined): Delivery<object>[] =>
  ids.map((id, i) => ({ body: envelope(id), context: {}, messageId: `m-${id}`, ...(group?.(i) === undefined ? {} : { group: group(i) as string }) }));

/** A deferred promise: a handler that finishes when the test says so. */
function gate(): { promise: Promise<void>; open: () => void; fail: (error: unknown) => void } {
  let open!: () => void;
  let fail!: (error: unknown) => void;
  const promise = new Promise<void>((resolve, reject) => {
    open = resolve;
    fail = reject;
  });
  return { promise, open, fail };
}

interface Step {
  readonly method: string;
  readonly ids: string[];
  readonly at: number;
  landed?: number;
}

/** InMemoryStore behind a store that takes `latencyMs` per call and records every batch step. */
function recorded(latencyMs = 0, failRemember = 0) {
  const inner = new InMemoryStore();
  const steps: Step[] = [];
  let rememberFailures = failRemember;
  const step = async <T>(method: string, ids: string[], call: () => Promise<T>): Promise<T> => {
    const entry: Step = { method, ids, at: Date.now() };
    steps.push(entry);
    if (latencyMs > 0) await sleep(latencyMs);
    if (method === "rememberMany" && rememberFailures > 0) {
      rememberFailures -= 1;
      throw new StoreUnavailableError("test", "rememberMany", "simulated outage");
    }
    const value = await call();
    entry.landed = Date.now();
    return value;
  };
  const store: ClaimingStore = {
    seen: (id) => inner.seen(id),
    remember: (id) => step("remember", [id], () => inner.remember(id)),
    forget: (id) => inner.forget(id),
    claim: (id, lease) => step("claim", [id], () => inner.claim(id, lease)),
    release: (id, token) => step("release", [id], () => inner.release(id, token)),
    claimMany: (ids, lease): Promise<Claim[]> => step("claimMany", [...ids], () => inner.claimMany(ids, lease)),
    rememberMany: (ids) => step("rememberMany", [...ids], () => inner.rememberMany(ids)),
    releaseMany: (claims: readonly ClaimRef[]) => step("releaseMany", claims.map((c) => c.id), () => inner.releaseMany(claims)),
  };
  const of = (method: string) => steps.filter((s) => s.method === method);
  return { inner, store, steps, of };
}

async function until(condition: () => boolean | Promise<boolean>, timeoutMs = 2_000): Promise<void> {
  const start = Date.now();
  while (!(await condition())) {
    if (Date.now() - start > timeoutMs) throw new Error("condition not met in time");
    await sleep(2);
  }
}

describe("group commit", () => {
  it("commits each success while a neighbour of the batch still hangs", async () => {
    const { inner, store } = recorded();
    const hang = gate();
    const engine = new BatchEngine(store, (_m, ctx) => (ctx.key === "hung" ? hang.promise : undefined));
    const ids = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "hung"];
    const done = engine.process(batchOf(ids));
    // Nine effects are committed although the batch is not over: a kill now repeats none of them.
    await until(async () => (await inner.seenMany(ids.slice(0, 9))).every(Boolean));
    expect(await inner.seen("hung")).toBe(false);
    hang.open();
    const results = await done;
    expect(results.map((r) => r.status)).toEqual(Array(10).fill("ran"));
    expect(await inner.seen("hung")).toBe(true);
  });

  it("handlers that finish together share one commit step", async () => {
    const { of, store } = recorded(5);
    const together = gate();
    const engine = new BatchEngine(store, () => together.promise);
    const done = engine.process(batchOf(["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]));
    await until(() => of("claimMany").length === 1 && of("claimMany")[0]?.landed !== undefined);
    await sleep(10);
    together.open();
    const results = await done;
    expect(results.every((r) => r.status === "ran" && r.ack)).toBe(true);
    expect(of("rememberMany").map((s) => s.ids.length)).toEqual([10]);
    expect(of("claimMany")).toHaveLength(1);
  });

  it("successes that finish while a commit step is in flight share the next step", async () => {
    const { of, store } = recorded(60);
    const finishAt: Record<string, number> = { a: 0, b: 15, c: 30, d: 45 };
    const engine = new BatchEngine(store, async (_m, ctx) => sleep(finishAt[ctx.key as string] ?? 0), { commitLingerMs: 0 });
    const results = await engine.process(batchOf(["a", "b", "c", "d"]));
    expect(results.map((r) => r.status)).toEqual(["ran", "ran", "ran", "ran"]);
    // a goes alone at once; b, c and d finish while a's step is in flight and go together next.
    expect(of("rememberMany").map((s) => s.ids)).toEqual([["a"], ["b", "c", "d"]]);
  });

  it("lingers for company only while other handlers run, and never past commitLingerMs", async () => {
    const { of, store } = recorded(0);
    const finishAt: Record<string, number> = { a: 0, b: 10, c: 200 };
    const engine = new BatchEngine(store, async (_m, ctx) => sleep(finishAt[ctx.key as string] ?? 0), { commitLingerMs: 40 });
    await engine.process(batchOf(["a", "b", "c"]));
    // a waits up to 40 ms and b joins it; c finishes last, alone, and goes at once (nobody left to wait for).
    const commits = of("rememberMany");
    expect(commits.map((s) => s.ids)).toEqual([["a", "b"], ["c"]]);
    expect((commits[1] as Step).at - (commits[0] as Step).at).toBeGreaterThan(100);
  });

  it("retries a failed commit step for its entries, then reports commit-failed only after the retries", async () => {
    const flaky = recorded(0, 1);
    const ok = await new BatchEngine(flaky.store, () => undefined).process(batchOf(["r1", "r2"]));
    expect(ok.map((r) => r.status)).toEqual(["ran", "ran"]);
    expect(flaky.of("rememberMany").map((s) => s.ids)).toEqual([["r1", "r2"], ["r1", "r2"]]);
    const down = recorded(0, 10);
    const events: EngineEvent[] = [];
    const failed = await new BatchEngine(down.store, () => undefined, { commitRetries: 2, observe: (e) => events.push(e) }).process(batchOf(["x"]));
    expect(failed[0]).toMatchObject({ status: "commit-failed", ack: true, key: "x" });
    expect(down.of("rememberMany")).toHaveLength(3);
    const gaps = down.of("rememberMany").map((s, i, all) => (i === 0 ? 0 : s.at - (all[i - 1] as Step).at));
    expect(gaps[1]).toBeGreaterThanOrEqual(20);
    expect(gaps[2]).toBeGreaterThanOrEqual(45);
    expect(events.filter((e) => e.type === "store-error" && e.step === "commit")).toHaveLength(3);
  });

  it("releases failures in steps too, without waiting for the rest of the batch", async () => {
    const { inner, of, store } = recorded();
    const hang = gate();
    const engine = new BatchEngine(store, (_m, ctx) => {
      if (ctx.key === "hung") return hang.promise;
      throw new Error("failed");
    });
    const done = engine.process(batchOf(["f1", "f2", "hung"]));
    await until(() => of("releaseMany").length > 0);
    // Released: a redelivery of f1 could claim it now, while the batch is still running.
    expect((await inner.claim("f1")).status).toBe("claimed");
    hang.open();
    expect((await done).map((r) => r.status)).toEqual(["failed", "failed", "ran"]);
  });

  it("reports each result the moment it is final, before the batch is over", async () => {
    const { store } = recorded();
    const hang = gate();
    const seen: [number, string][] = [];
    const engine = new BatchEngine(store, (_m, ctx) => (ctx.key === "slow" ? hang.promise : undefined));
    await engine.process(batchOf(["x"]));
    const done = engine.process(batchOf(["slow", "x", "fresh"]), { onResult: (i, r) => seen.push([i, r.status]) });
    await until(() => seen.length === 2);
    expect(seen.sort()).toEqual([
      [1, "duplicate"],
      [2, "ran"],
    ]);
    hang.open();
    await done;
    expect(seen).toContainEqual([0, "ran"]);
  });
});

describe("FIFO groups with commits in flight", () => {
  it("starts a group's next message once the previous finished, before its commit landed", async () => {
    const { of, store } = recorded(80);
    const started: Record<string, number> = {};
    const order: string[] = [];
    const engine = new BatchEngine(store, (_m, ctx) => {
      started[ctx.key as string] = Date.now();
      order.push(ctx.key as string);
    });
    const results = await engine.process(batchOf(["g1", "g2", "g3"], () => "g"));
    expect(results.map((r) => r.status)).toEqual(["ran", "ran", "ran"]);
    const first = of("rememberMany")[0] as Step;
    expect(first.ids).toContain("g1");
    expect(started.g2 as number).toBeLessThan(first.landed as number);
    expect(order).toEqual(["g1", "g2", "g3"]);
  });

  it("still stops a group at its first failure, and releases the claims of the rest", async () => {
    const { inner, store } = recorded();
    const order: string[] = [];
    const engine = new BatchEngine(store, (_m, ctx) => {
      order.push(ctx.key as string);
      if (ctx.key === "b2") throw new Error("b2 failed");
    });
    const results = await engine.process(batchOf(["a1", "b1", "b2", "b3", "a2"], (i) => (i === 0 || i === 4 ? "a" : "b")));
    expect(results.map((r) => r.status)).toEqual(["ran", "ran", "failed", "failed", "ran"]);
    expect(results[3]?.error).toBeInstanceOf(GroupBlockedError);
    expect(order.filter((k) => k.startsWith("b"))).toEqual(["b1", "b2"]);
    expect((await inner.claim("b3")).status).toBe("claimed");
  });
});

describe("the deadline guard", () => {
  it("answers before the deadline: finished work committed, unstarted claims released, a running handler keeps its claim", async () => {
    const { inner, store } = recorded(2);
    const hang = gate();
    const events: EngineEvent[] = [];
    const engine = new BatchEngine(store, (_m, ctx) => (ctx.key === "hung" ? hang.promise : sleep(5)), {
      concurrency: 2,
      deadlineMarginMs: 100,
      leaseMs: 60_000,
      observe: (e) => events.push(e),
    });
    const ids = ["hung", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "s"];
    const slowIds = ids.slice(1);
    // Each ordinary handler takes ~5 ms on one free slot: not all 19 can run before the deadline.
    const started = Date.now();
    const results = await engine.process(batchOf(ids), { deadline: started + 150 });
    const elapsed = Date.now() - started;
    expect(elapsed).toBeLessThan(150);
    expect(elapsed).toBeGreaterThanOrEqual(45);
    const hung = results[0] as MessageResult;
    expect(hung).toMatchObject({ status: "in-flight", ack: false, handlerRan: true, key: "hung" });
    expect((hung.error as DeadlineExceededError).phase).toBe("still running");
    // What is left of the lease since the claim (at most the batch's 150 ms gone), not the lease plus that.
    expect(hung.retryAfterMs).toBeLessThanOrEqual(60_000);
    expect(hung.retryAfterMs).toBeGreaterThan(60_000 - 1_000);
    const ran = slowIds.filter((_, i) => results[i + 1]?.status === "ran");
    const notStarted = slowIds.filter((_, i) => results[i + 1]?.status === "failed");
    expect(ran.length).toBeGreaterThan(3);
    expect(notStarted.length).toBeGreaterThan(0);
    // The one slot may have been mid-handler at the deadline: that one is held like "hung".
    const running = slowIds.filter((_, i) => results[i + 1]?.status === "in-flight");
    expect(running.length).toBeLessThanOrEqual(1);
    expect(ran.length + notStarted.length + running.length).toBe(19);
    for (const [i, id] of slowIds.entries()) {
      const result = results[i + 1] as MessageResult;
      if (result.status === "failed") {
        expect(result).toMatchObject({ ack: false, handlerRan: false, key: id });
        expect((result.error as DeadlineExceededError).phase).toBe("not started");
      }
    }
    // Every finished effect is committed (one whose commit was in flight at the answer, just after it);
    // every unstarted claim was released; the running one is held.
    await vi.waitFor(async () => expect((await inner.seenMany(ran)).every(Boolean)).toBe(true));
    expect((await inner.claimMany(notStarted)).every((c) => c.status === "claimed")).toBe(true);
    expect((await inner.claim("hung")).status).toBe("in-flight");
    // The hung handler finishes after the answer (Lambda thaws the environment): its commit is still made.
    hang.open();
    await until(() => inner.seen("hung"));
    const late = events.filter((e) => e.type === "result" && e.index === 0);
    expect(late.map((e) => e.type === "result" && [e.result.status, e.late === true])).toEqual([
      ["in-flight", false],
      ["ran", true],
    ]);
    // "hung", plus at most the one ordinary handler that may have been mid-run at the deadline (an
    // "in-flight" result may also be a finished handler whose commit was still in flight: not pending).
    const end = events.find((e) => e.type === "batch-end") as Extract<EngineEvent, { type: "batch-end" }>;
    expect(end.pending).toBeGreaterThanOrEqual(1);
    expect(end.pending).toBeLessThanOrEqual(1 + running.length);
  });

  it("on a seen-set store (no claim, no lease), a handler still running at the deadline is retried with no wait", async () => {
    const inner = new InMemoryStore();
    const hang = gate();
    const engine = new BatchEngine(seenSetView(inner), () => hang.promise, { deadlineMarginMs: 100 });
    const [result] = await engine.process(batchOf(["slow"]), { deadline: Date.now() + 150 });
    expect(result).toMatchObject({ status: "in-flight", ack: false, handlerRan: true, dedupe: "seen-set", key: "slow", retryAfterMs: 0 });
    expect((result?.error as DeadlineExceededError).phase).toBe("still running");
    hang.open();
    await until(() => inner.seen("slow"));
  });

  it("claims nothing and runs nothing when the deadline is already within the margin", async () => {
    const { steps, store } = recorded();
    let runs = 0;
    const engine = new BatchEngine(store, () => void (runs += 1), { deadlineMarginMs: 1_000 });
    const results = await engine.process(batchOf(["a", "b"]), { deadline: Date.now() + 500 });
    expect(results.map((r) => [r.status, r.ack, (r.error as DeadlineExceededError).phase])).toEqual([
      ["failed", false, "not started"],
      ["failed", false, "not started"],
    ]);
    expect(runs).toBe(0);
    expect(steps).toHaveLength(0);
  });

  it("has no effect without a deadline, and validates the margin", async () => {
    const { store } = recorded();
    expect(() => new BatchEngine(store, () => undefined, { deadlineMarginMs: -1 })).toThrow(/deadlineMarginMs/);
    expect(() => new BatchEngine(store, () => undefined, { commitLingerMs: 1.5 })).toThrow(/commitLingerMs/);
    expect(() => new BatchEngine(store, () => undefined, { commitLingerMs: 1_001 })).toThrow(/commitLingerMs/);
    const results = await new BatchEngine(store, () => sleep(30), { deadlineMarginMs: 0 }).process(batchOf(["z"]));
    expect(results[0]?.status).toBe("ran");
  });
});
