/**
 * One batch's bookkeeping (src/engine/batch.ts) seen from outside: the fate of each delivery in the
 * corners whole-batch tests left loose — a FIFO group around messages the gate or the parser already
 * decided, copies of an id in FIFO groups (a copy holds its own group until its first copy is final),
 * copies of an id when the deadline leaves no time to claim, the count of messages still to
 * start that decides whether a finished success lingers for company, `onResult` exactly once per
 * delivery even when a handler finishes after the answer, an asynchronous fingerprint function, and
 * the time of a handler that throws synchronously.
 * On InMemoryStore (and a thin view of it that records the commit steps).
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import type { ClaimingStore, FencedClaim, TransactionalStore } from "../../src/contract.js";
import type { MessageResult } from "../../src/decision.js";
import { BatchEngine } from "../../src/engine/index.js";
import type { EngineOptions, Handler } from "../../src/engine/types.js";
import type { Envelope } from "../../src/envelope.js";
import { DeadlineExceededError, GroupBlockedError, type InvalidMessageError, PartialStepError, PayloadConflictError, StoreUnavailableError } from "../../src/errors.js";
import type { EngineEvent } from "../../src/events.js";
import { InMemoryStore } from "../../src/memory-store.js";
import { envelopeBody } from "../support/envelopes.js";
import { claimingView, recordingCommits } from "../support/store-views.js";

const body = (id: string | undefined, data: Record<string, unknown> = { id }) => envelopeBody(id, { job: "urn:babel:fates", data });
const delivery = (id: string | undefined, extra: Record<string, unknown> = {}) => ({ body: body(id), context: {}, ...extra });

/**
 * The smallest TransactionalStore in memory: the handler's work, then the fence (the claim's token
 * must still own the id) and the commit. (batch-run.test.ts has a fuller one that journals writes.)
 */
class FencedMemoryStore extends InMemoryStore implements TransactionalStore<string[]> {
  async transact(claim: FencedClaim, work: (tx: string[]) => Promise<void>): Promise<void> {
    await work([]);
    if (!(await this.release(claim.id, claim.token))) throw new Error(`fence lost for ${claim.id}`);
    await this.remember(claim.id, claim.fingerprint);
  }
}

afterEach(() => {
  vi.useRealTimers();
});

describe("FIFO groups around messages decided before they run", () => {
  it("a duplicate after a failure in its group is blocked with the rest, not acknowledged as a duplicate", async () => {
    const store = new InMemoryStore();
    await store.remember("D");
    const runs: string[] = [];
    const engine = new BatchEngine(store, (_m, ctx) => {
      runs.push(ctx.key as string);
      throw new Error("not done");
    });
    const results = await engine.process([delivery("F", { group: "g" }), delivery("D", { group: "g" })]);
    expect(results.map((r) => [r.status, r.ack, r.handlerRan])).toEqual([
      ["failed", false, true],
      ["failed", false, false],
    ]);
    expect(results[1]?.error).toBeInstanceOf(GroupBlockedError);
    expect(runs).toEqual(["F"]);
  });

  it("an invalid body that is dropped (onInvalid: drop) is acknowledged, and its group goes on", async () => {
    const runs: string[] = [];
    const engine = new BatchEngine(new InMemoryStore(), (_m, ctx) => void runs.push(ctx.key as string), { onInvalid: "drop" });
    const results = await engine.process([{ body: "{bad", context: {}, group: "g" }, delivery("G1", { group: "g" }), delivery("G2", { group: "g" })]);
    expect(results.map((r) => [r.status, r.ack])).toEqual([
      ["invalid", true],
      ["ran", true],
      ["ran", true],
    ]);
    expect(runs).toEqual(["G1", "G2"]);
  });
});

describe("FIFO: a copy of an id keeps its place in its own group", () => {
  const grouped = (id: string, group: string, data?: Record<string, unknown>) => ({ body: body(id, data ?? { id }), context: {}, group });
  /** Every result reported once, by index. */
  const reported = (): { onResult: (index: number, result: MessageResult) => void; indexes: number[] } => {
    const indexes: number[] = [];
    return { indexes, onResult: (index) => void indexes.push(index) };
  };

  it("a copy in another group whose first copy is in flight elsewhere blocks the rest of its own group", async () => {
    const store = new InMemoryStore();
    await store.claim("X", 60_000); // another consumer holds X
    const runs: string[] = [];
    const engine = new BatchEngine(store, (_m, ctx) => void runs.push(ctx.key as string));
    const { onResult, indexes } = reported();
    const results = await engine.process([grouped("X", "G"), grouped("X", "H"), grouped("Y", "H")], { onResult });
    expect(results.map((r) => [r.status, r.ack, r.handlerRan])).toEqual([
      ["in-flight", false, false],
      ["in-flight", false, false],
      ["failed", false, false],
    ]);
    expect(results[2]?.error).toBeInstanceOf(GroupBlockedError);
    expect(runs).toEqual([]);
    expect(indexes.sort()).toEqual([0, 1, 2]);
    // Y's claim was released: its redelivery runs at once.
    expect(await store.inspect("Y")).toBeNull();
  });

  it("a copy in another group whose first copy's handler throws blocks the rest of its own group", async () => {
    const store = new InMemoryStore();
    const runs: string[] = [];
    const engine = new BatchEngine(store, (_m, ctx) => {
      runs.push(ctx.key as string);
      if (ctx.key === "X") throw new Error("not done");
    });
    const results = await engine.process([grouped("X", "G"), grouped("X", "H"), grouped("Y", "H")]);
    expect(results.map((r) => [r.status, r.ack])).toEqual([
      ["failed", false],
      ["in-flight", false],
      ["failed", false],
    ]);
    expect(results[2]?.error).toBeInstanceOf(GroupBlockedError);
    expect(runs).toEqual(["X"]);
    expect(await store.inspect("X")).toBeNull();
    expect(await store.inspect("Y")).toBeNull();
  });

  it("a copy whose first copy is blocked in its own group later blocks the copy's group too", async () => {
    const store = new InMemoryStore();
    const runs: string[] = [];
    const engine = new BatchEngine(store, (_m, ctx) => {
      runs.push(ctx.key as string);
      if (ctx.key === "F") throw new Error("not done");
    });
    const results = await engine.process([grouped("F", "G"), grouped("X", "G"), grouped("X", "H"), grouped("Y", "H")]);
    expect(results.map((r) => [r.status, r.ack])).toEqual([
      ["failed", false],
      ["failed", false],
      ["in-flight", false],
      ["failed", false],
    ]);
    expect(runs).toEqual(["F"]);
    expect(await store.inspect("Y")).toBeNull();
  });

  it("a copy whose first copy is acknowledged lets its group go on, after the first copy's handler", async () => {
    const store = new InMemoryStore();
    await store.remember("D");
    const runs: string[] = [];
    const engine = new BatchEngine(store, async (_m, ctx) => {
      if (ctx.key === "A") await new Promise((resolve) => setTimeout(resolve, 20));
      runs.push(ctx.key as string);
    });
    // X waits behind the slow A in G; its copy in H holds Y until X ran. D is a duplicate at the gate.
    const results = await engine.process([grouped("A", "G"), grouped("X", "G"), grouped("D", "G"), grouped("X", "H"), grouped("D", "H"), grouped("Y", "H")]);
    expect(results.map((r) => [r.status, r.ack])).toEqual([
      ["ran", true],
      ["ran", true],
      ["duplicate", true],
      ["duplicate", true],
      ["duplicate", true],
      ["ran", true],
    ]);
    expect(runs).toEqual(["A", "X", "Y"]);
    expect((await store.inspect("Y"))?.status).toBe("done");
  });

  it("copies in two groups waiting on one first copy both go on once it ran", async () => {
    const runs: string[] = [];
    const engine = new BatchEngine(new InMemoryStore(), async (_m, ctx) => {
      if (ctx.key === "X") await new Promise((resolve) => setTimeout(resolve, 20));
      runs.push(ctx.key as string);
    });
    const results = await engine.process([grouped("X", "G"), grouped("X", "H"), grouped("Y", "H"), grouped("X", "K"), grouped("Z", "K")]);
    expect(results.map((r) => [r.status, r.ack])).toEqual([
      ["ran", true],
      ["duplicate", true],
      ["ran", true],
      ["duplicate", true],
      ["ran", true],
    ]);
    expect(runs[0]).toBe("X");
    expect(runs.slice(1).sort()).toEqual(["Y", "Z"]);
  });

  it("a commit step that failed for some ids only (PartialStepError): only those are retried and commit-failed", async () => {
    const steps: string[][] = [];
    class OneShardDown extends InMemoryStore {
      override async rememberMany(ids: readonly string[], fingerprints?: readonly (string | undefined)[]): Promise<void> {
        steps.push([...ids]);
        const written = ids.filter((id) => id !== "B");
        await super.rememberMany(written, fingerprints?.filter((_, i) => ids[i] !== "B"));
        if (written.length === ids.length) return;
        const down = new StoreUnavailableError("OneShardDown", "remember", "shard 1 down");
        if (written.length === 0) throw down;
        throw new PartialStepError("OneShardDown", "remember", ids.map((id) => (id === "B" ? down : undefined)));
      }
    }
    const store = new OneShardDown();
    const engine = new BatchEngine(store, () => undefined, { commitLingerMs: 0 });
    const results = await engine.process([delivery("A"), delivery("B"), delivery("C")]);
    expect(results.map((r) => [r.key, r.status, r.ack])).toEqual([
      ["A", "ran", true],
      ["B", "commit-failed", true],
      ["C", "ran", true],
    ]);
    expect(results[1]?.error).toMatchObject({ name: "StoreUnavailableError", message: "OneShardDown.remember failed: shard 1 down" });
    expect(steps).toEqual([["A", "B", "C"], ["B"], ["B"]]);
    expect([(await store.inspect("A"))?.status, (await store.inspect("B"))?.status, (await store.inspect("C"))?.status]).toEqual(["done", "in-flight", "done"]);

    // A PartialStepError without one entry per id cannot say which failed: every id of the step has.
    class Garbled extends InMemoryStore {
      override async rememberMany(): Promise<void> {
        throw new PartialStepError("Garbled", "remember", [new StoreUnavailableError("Garbled", "remember", "x")]);
      }
    }
    const garbled = await new BatchEngine(new Garbled(), () => undefined, { commitLingerMs: 0, commitRetries: 0 }).process([delivery("D"), delivery("E")]);
    expect(garbled.map((r) => r.status)).toEqual(["commit-failed", "commit-failed"]);
    expect(garbled[0]?.error).toBeInstanceOf(PartialStepError);
  });

  it("with one place to run, a lane parked on a commit still in flight is taken up again once it lands", async () => {
    class SlowCommits extends InMemoryStore {
      override async rememberMany(...args: Parameters<InMemoryStore["rememberMany"]>): Promise<void> {
        await new Promise((resolve) => setTimeout(resolve, 20));
        return super.rememberMany(...args);
      }
    }
    const store = new SlowCommits();
    const runs: string[] = [];
    const engine = new BatchEngine(store, (_m, ctx) => void runs.push(ctx.key as string), { concurrency: 1 });
    // X's lane ends before its commit lands; the only worker then finds G parked on it and nothing else to do.
    const results = await engine.process([grouped("X", "H"), grouped("X", "G"), grouped("Y", "G")]);
    expect(results.map((r) => [r.status, r.ack])).toEqual([
      ["ran", true],
      ["duplicate", true],
      ["ran", true],
    ]);
    expect(runs).toEqual(["X", "Y"]);
    expect((await store.inspect("Y"))?.status).toBe("done");
  });

  it("a copy behind a failure in its group is blocked, though its first copy ran: FIFO answers the group's whole tail", async () => {
    const runs: string[] = [];
    const engine = new BatchEngine(new InMemoryStore(), (_m, ctx) => {
      runs.push(ctx.key as string);
      if (ctx.key === "F") throw new Error("not done");
    });
    const results = await engine.process([grouped("X", "H"), grouped("F", "G"), grouped("X", "G"), grouped("B", "G")]);
    expect(results.map((r) => [r.status, r.ack])).toEqual([
      ["ran", true],
      ["failed", false],
      ["failed", false],
      ["failed", false],
    ]);
    // Not a duplicate to delete ahead of F's redelivery: SQS FIFO asks for everything after a failure.
    expect(results[2]?.error).toBeInstanceOf(GroupBlockedError);
    expect(results[2]?.handlerRan).toBe(false);
    expect(results[3]?.error).toBeInstanceOf(GroupBlockedError);
    expect(runs.sort()).toEqual(["F", "X"]);
  });

  it("a conflicting copy later in the same group blocks the rest of the group", async () => {
    const store = new InMemoryStore();
    const runs: string[] = [];
    const engine = new BatchEngine(store, (_m, ctx) => void runs.push(ctx.key as string));
    const results = await engine.process([grouped("X", "G", { v: 1 }), grouped("X", "G", { v: 2 }), grouped("Y", "G")]);
    expect(results.map((r) => [r.status, r.ack])).toEqual([
      ["ran", true],
      ["conflict", false],
      ["failed", false],
    ]);
    expect(results[1]?.error).toBeInstanceOf(PayloadConflictError);
    expect(results[2]?.error).toBeInstanceOf(GroupBlockedError);
    expect(runs).toEqual(["X"]);
    expect(await store.inspect("Y")).toBeNull();
  });

  it("a copy alone in its group waits for its first copy in another group: one run, the copy a duplicate (no crash)", async () => {
    const runs: string[] = [];
    const engine = new BatchEngine(new InMemoryStore(), async (_m, ctx) => {
      runs.push(ctx.key as string);
      await new Promise((resolve) => setTimeout(resolve, 20));
    });
    const results = await engine.process([grouped("A", "G1"), grouped("A", "G2")]);
    expect(results.map((r) => [r.status, r.ack])).toEqual([
      ["ran", true],
      ["duplicate", true],
    ]);
    expect(runs).toEqual(["A"]);
    // And when the first copy fails, the lone copy is not acknowledged.
    const failing = new BatchEngine(new InMemoryStore(), async () => {
      await new Promise((resolve) => setTimeout(resolve, 20));
      throw new Error("not done");
    });
    const failed = await failing.process([grouped("B", "G1"), grouped("B", "G2"), grouped("C", "G3")]);
    expect(failed.map((r) => [r.status, r.ack])).toEqual([
      ["failed", false],
      ["in-flight", false],
      ["failed", false],
    ]);
  });

  it("a copy whose first copy never started at the deadline still settles: not started, and its group stops", async () => {
    const runs: string[] = [];
    const engine = new BatchEngine(new InMemoryStore(), async (_m, ctx) => {
      runs.push(ctx.key as string);
      if (ctx.key === "A") await new Promise((resolve) => setTimeout(resolve, 300));
    });
    const { onResult, indexes } = reported();
    // The answer point is 100 ms away: A is still running then, X behind it never starts.
    const results = await engine.process([grouped("A", "G"), grouped("X", "G"), grouped("X", "H"), grouped("Y", "H")], { deadline: Date.now() + 1_100, onResult });
    expect(results.map((r) => [r.status, r.ack, r.handlerRan])).toEqual([
      ["in-flight", false, true],
      ["failed", false, false],
      ["failed", false, false],
      ["failed", false, false],
    ]);
    expect(results[2]?.error).toBeInstanceOf(DeadlineExceededError);
    expect(runs).toEqual(["A"]);
    expect(indexes.sort()).toEqual([0, 1, 2, 3]);
  });

  it("lanes that wait on each other's copies all finish with one place to run, one handler at a time", async () => {
    const runs: string[] = [];
    let running = 0;
    let most = 0;
    const engine = new BatchEngine(
      new InMemoryStore(),
      async (_m, ctx) => {
        running += 1;
        most = Math.max(most, running);
        await new Promise((resolve) => setTimeout(resolve, 2));
        runs.push(ctx.key as string);
        running -= 1;
      },
      { concurrency: 1 },
    );
    // G waits on H's X, H waits on G's A: each lane needs the other to go on.
    const { onResult, indexes } = reported();
    const results = await engine.process([grouped("A", "G"), grouped("X", "H"), grouped("X", "G"), grouped("A", "H"), grouped("B", "G"), grouped("C", "H")], { onResult });
    expect(results.map((r) => r.status)).toEqual(["ran", "ran", "duplicate", "duplicate", "ran", "ran"]);
    expect(runs.slice(0, 2)).toEqual(["A", "X"]);
    expect(runs.slice(2).sort()).toEqual(["B", "C"]);
    expect(most).toBe(1);
    expect(indexes.sort()).toEqual([0, 1, 2, 3, 4, 5]);
  });
});

describe("a delivery the transport already rejected", () => {
  it("is invalid with the transport's reason: its body is never parsed, nothing is claimed, the handler never runs", async () => {
    const store = new InMemoryStore();
    let parsed = 0;
    let runs = 0;
    const engine = new BatchEngine(store, () => void (runs += 1), {
      parse: (raw) => {
        parsed += 1;
        return JSON.parse(raw as string) as Record<string, unknown>;
      },
      key: (message) => (message.meta as { id: string }).id,
    });
    const [result] = await engine.process([{ ...delivery("r"), rejected: "bq-schema-version 9 is not accepted" }]);
    expect(result).toMatchObject({ status: "invalid", ack: false, handlerRan: false, dedupe: "none" });
    expect((result?.error as InvalidMessageError).reason).toBe("bq-schema-version 9 is not accepted");
    expect([parsed, runs]).toEqual([0, 0]);
    expect(await store.inspect("r")).toBeNull();
  });
});

describe("no time left to claim", () => {
  it("copies of an id share the fate of their first copy: not started, not acknowledged, nothing claimed", async () => {
    const store = new InMemoryStore();
    let runs = 0;
    const results = await new BatchEngine(store, () => void (runs += 1)).process([delivery("a"), delivery("a"), delivery("b")], {
      deadline: Date.now() + 500,
    });
    expect(results.map((r) => [r.status, r.ack, r.handlerRan, r.key])).toEqual([
      ["failed", false, false, "a"],
      ["in-flight", false, false, "a"],
      ["failed", false, false, "b"],
    ]);
    expect(runs).toBe(0);
    expect(await store.inspect("a")).toBeNull();
  });
  it("a claim step that ends past the answer point starts no handler: every claim is released, nothing is acknowledged", async () => {
    // Default margin 1 s: the answer point is 100 ms away, the claim step (throttled, retried) takes 300.
    class SlowClaims extends InMemoryStore {
      override async claimMany(...args: Parameters<InMemoryStore["claimMany"]>) {
        await new Promise((resolve) => setTimeout(resolve, 300));
        return super.claimMany(...args);
      }
    }
    const store = new SlowClaims();
    const runs: string[] = [];
    const results = await new BatchEngine(store, (_m, ctx) => void runs.push(ctx.key as string)).process([delivery("a"), delivery("b")], {
      deadline: Date.now() + 1_100,
    });
    expect(runs).toEqual([]);
    expect(results.map((r) => [r.status, r.ack, r.handlerRan, (r.error as Error | undefined)?.message])).toEqual([
      ["failed", false, false, expect.stringContaining("not started")],
      ["failed", false, false, expect.stringContaining("not started")],
    ]);
    // Released, not held for the lease: a redelivery may claim at once.
    expect([await store.inspect("a"), await store.inspect("b")]).toEqual([null, null]);
  });
});

describe("a finished success lingers only while another message may still start", () => {
  // One message at a time, a 1 s linger: the commit waits for every message still to start, and
  // goes the moment the last one finished. A miscount either way splits the commit.
  const oneAtATime = (store: ReturnType<typeof recordingCommits>["store"], handle: (key: string | undefined) => void = () => undefined) =>
    new BatchEngine(store, (_m, ctx) => handle(ctx.key), { concurrency: 1, commitLingerMs: 1_000 });

  it("a message that failed before them does not count as one still to start, nor twice as started", async () => {
    const { store, commits } = recordingCommits();
    const engine = oneAtATime(store, (key) => {
      if (key === undefined) throw new Error("not done");
    });
    const results = await engine.process([delivery(undefined, { n: 1 }), delivery("a"), delivery("b"), delivery("c")]);
    expect(results.map((r) => r.status)).toEqual(["failed", "ran", "ran", "ran"]);
    expect(commits).toEqual([["a", "b", "c"]]);
  });

  it("copies of a duplicate never start: the duplicate counts once, its copies not at all", async () => {
    const { inner, store, commits } = recordingCommits();
    await inner.remember("x");
    const results = await oneAtATime(store).process([delivery("x"), delivery("x"), delivery("x"), delivery("a"), delivery("b"), delivery("c")]);
    expect(results.map((r) => r.status)).toEqual(["duplicate", "duplicate", "duplicate", "ran", "ran", "ran"]);
    expect(commits).toEqual([["a", "b", "c"]]);
  });
});

describe("the answer at the deadline", () => {
  /** "f" fails, "slow" outlives the answer, anything else succeeds. */
  const aFailsSlowHangs: Handler<Envelope, object> = (_m, ctx) => {
    if (ctx.key === "f") throw new Error("not done");
    return ctx.key === "slow" ? new Promise((resolve) => setTimeout(resolve, 10_000)) : undefined;
  };
  const RAN_FAILED_IN_FLIGHT = [
    ["ran", true],
    ["failed", false],
    ["in-flight", false],
  ];

  /** Runs a, f and slow on `store` with a deadline 1.5 s away (the answer due at 500 ms), `advanceMs` of fake time; each result's status and ack. */
  async function answerAtDeadline(store: ClaimingStore, options: EngineOptions, advanceMs: number) {
    const engine = new BatchEngine(store, aFailsSlowHangs, { deadlineMarginMs: 1_000, ...options });
    const answer = engine.process([delivery("a"), delivery("f"), delivery("slow")], { deadline: Date.now() + 1_500 });
    await vi.advanceTimersByTimeAsync(advanceMs);
    return (await answer).map((r) => [r.status, r.ack]);
  }

  it("a success and a failure's release still lingering for company both land before the answer", async () => {
    vi.useFakeTimers();
    const store = new InMemoryStore();
    // The answer is due at 500 ms, long before the 1 s linger would end.
    expect(await answerAtDeadline(store, { commitLingerMs: 1_000 }, 600)).toEqual(RAN_FAILED_IN_FLIGHT);
    expect((await store.inspect("a"))?.status).toBe("done");
    // f's claim was released: its redelivery may claim it at once.
    expect((await store.claim("f")).status).toBe("claimed");
  });

  it("a commit and a release still in flight at the answer are waited for (until just before the deadline)", async () => {
    vi.useFakeTimers();
    const inner = new InMemoryStore();
    const slowly = <T>(work: () => Promise<T>) => new Promise<T>((resolve) => setTimeout(() => resolve(work()), 700));
    const store = claimingView({
      inner,
      batch: true,
      overrides: {
        rememberMany: (ids, fps) => slowly(() => inner.rememberMany(ids, fps)),
        releaseMany: (claims) => slowly(() => inner.releaseMany(claims)),
      },
    });
    // Answer due at 500 ms; both steps started at once and land at 700, before 1_500 - 1_000 / 4.
    expect(await answerAtDeadline(store, { commitLingerMs: 0 }, 800)).toEqual(RAN_FAILED_IN_FLIGHT);
  });

  it("transactional mode: a batch whose transactions all ended has no handler pending", async () => {
    const events: EngineEvent[] = [];
    const engine = new BatchEngine(new FencedMemoryStore(), () => undefined, { transactional: true, observe: (event) => void events.push(event) });
    const results = await engine.process([delivery("a"), delivery("b")]);
    expect(results.map((r) => r.status)).toEqual(["ran", "ran"]);
    expect(events.at(-1)).toMatchObject({ type: "batch-end", size: 2, pending: 0 });
  });
});

describe("transactional mode: did the handler run", () => {
  it("a transaction that fails before calling the handler says handlerRan false; one failing after it, true", async () => {
    class BeginFails extends FencedMemoryStore {
      override async transact(claim: FencedClaim, work: (tx: string[]) => Promise<void>): Promise<void> {
        if (claim.id === "down") throw new Error("BEGIN failed: connection refused");
        await super.transact(claim, work);
      }
    }
    const store = new BeginFails();
    const runs: string[] = [];
    const engine = new BatchEngine(
      store,
      (_m, ctx) => {
        runs.push(ctx.key as string);
        if (ctx.key === "throws") throw new Error("declined");
      },
      { transactional: true },
    );
    const results = await engine.process([delivery("down"), delivery("throws"), delivery("ok")]);
    expect(results.map((r) => [r.status, r.ack, r.handlerRan])).toEqual([
      ["failed", false, false],
      ["failed", false, true],
      ["ran", true, true],
    ]);
    expect(runs.sort()).toEqual(["ok", "throws"]);
    // Both failures released their claims: a redelivery claims at once.
    expect(await store.inspect("down")).toBeNull();
    expect(await store.inspect("throws")).toBeNull();
  });
});

describe("onResult", () => {
  it("is called once per delivery, before the answer, even when a handler finishes (and commits) after it", async () => {
    vi.useFakeTimers();
    const store = new InMemoryStore();
    const calls: [number, string][] = [];
    const late: EngineEvent[] = [];
    const engine = new BatchEngine(store, (_m, ctx) => (ctx.key === "slow" ? new Promise((resolve) => setTimeout(resolve, 5_000)) : undefined), {
      deadlineMarginMs: 1_000,
      observe: (event) => {
        if (event.type === "result" && event.late === true) late.push(event);
      },
    });
    const answer = engine.process([delivery("a"), delivery("slow")], {
      deadline: Date.now() + 2_000,
      onResult: (index: number, result: MessageResult) => void calls.push([index, result.status]),
    });
    await vi.advanceTimersByTimeAsync(1_500);
    const results = await answer;
    expect(results.map((r) => [r.status, r.ack])).toEqual([
      ["ran", true],
      ["in-flight", false],
    ]);
    expect(calls).toEqual([
      [0, "ran"],
      [1, "in-flight"],
    ]);
    // The slow handler finishes after the answer: its commit still lands, reported as a late event only.
    await vi.advanceTimersByTimeAsync(5_000);
    expect((await store.inspect("slow"))?.status).toBe("done");
    expect(late).toHaveLength(1);
    expect(late[0]).toMatchObject({ index: 1, result: { status: "ran", ack: true } });
    expect(calls).toHaveLength(2);
  });
});

describe("fingerprints and handler time", () => {
  it("an asynchronous fingerprint function is awaited before the claim: the record carries it, a reuse is a conflict", async () => {
    const inner = new InMemoryStore();
    const claimed: (string | undefined)[][] = [];
    const store = claimingView({
      inner,
      batch: true,
      overrides: {
        claimMany: (ids, lease, fps) => {
          claimed.push([...(fps ?? [])]);
          return inner.claimMany(ids, lease, fps);
        },
      },
    });
    const engine = new BatchEngine(store, () => undefined, {
      fingerprint: async (message) => `fp-${String((message.data as { v: number }).v)}`,
    });
    const [first] = await engine.process([{ body: envelopeBody("a", { data: { v: 1 } }), context: {} }]);
    expect(first?.status).toBe("ran");
    // The claim itself carries it: a concurrent delivery with another payload is a conflict in flight too.
    expect(claimed).toEqual([["fp-1"]]);
    expect((await inner.inspect("a"))?.fingerprint).toBe("fp-1");
    const [again] = await engine.process([{ body: envelopeBody("a", { data: { v: 2 } }), context: {} }]);
    expect(again?.status).toBe("conflict");
    expect(again?.error).toBeInstanceOf(PayloadConflictError);
  });

  it("a handler that throws synchronously is timed like any other", async () => {
    const events: EngineEvent[] = [];
    const [result] = await new BatchEngine(
      new InMemoryStore(),
      () => {
        throw new Error("at once");
      },
      { observe: (event) => void events.push(event) },
    ).process([delivery("a")]);
    expect(result?.status).toBe("failed");
    const event = events.find((e) => e.type === "result");
    expect(event?.type === "result" ? event.handlerMs : undefined).toBeGreaterThanOrEqual(0);
    expect(event?.type === "result" ? event.handlerMs : undefined).toBeLessThan(10_000);
  });
});
