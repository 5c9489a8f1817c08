/**
 * One batch's orchestration (src/engine/batch.ts), the parts whole-batch tests left loose:
 * transactional mode's phase without a backend, the stored payload a copy is compared with when
 * its first copy was a conflict, what group commit waits for, the per-id commit and release
 * fallbacks, one result event per delivery with its fields, and no timer left behind.
 *
 * Transactional mode runs here on `JournalStore`, a reference TransactionalStore in memory: an
 * InMemoryStore whose transaction stages the handler's writes and applies them with the commit
 * only while the claim's token still owns the id. The real ones (DynamoDB Local, PostgreSQL, D1)
 * are run through the engine in test/engine/transactional.test.ts; this one exists so that the
 * backend-free suite (and mutation testing, which runs it) sees the engine's side of the phase.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import type { ClaimRef, ClaimingStore, FencedClaim, TransactionalStore } from "../../src/contract.js";
import { BatchEngine } from "../../src/engine/index.js";
import { FenceLostError, GroupBlockedError, type PayloadConflictError, StoreUnavailableError } from "../../src/errors.js";
import type { EngineEvent } from "../../src/events.js";
import { InMemoryStore } from "../../src/memory-store.js";
import { claimingView, recordingCommits, seenSetView } from "../support/store-views.js";
import { envelopeBody } from "../support/envelopes.js";
import { deferred } from "../support/deferred.js";

const body = (id: string, data: Record<string, unknown> = { id }) => envelopeBody(id, { job: "urn:babel:batch", data });
const deliveries = (ids: string[], extra: Record<string, unknown> = {}) => ids.map((id) => ({ body: body(id), context: {}, messageId: `m-${id}`, ...extra }));

type Journal = string[];

class JournalStore extends InMemoryStore implements TransactionalStore<Journal> {
  readonly committed: string[] = [];
  readonly claims: FencedClaim[] = [];
  async transact(claim: FencedClaim, work: (tx: Journal) => Promise<void>): Promise<void> {
    this.claims.push(claim);
    const staged: Journal = [];
    await work(staged);
    // The fence: release succeeds only for the token that owns the claim; the commit follows at once.
    if (!(await this.release(claim.id, claim.token))) throw new FenceLostError(claim.id);
    await this.remember(claim.id, claim.fingerprint);
    this.committed.push(...staged);
  }
}

function observed() {
  const events: EngineEvent[] = [];
  return { events, observe: (event: EngineEvent) => void events.push(event) };
}

const steps = (events: EngineEvent[]) => events.filter((e) => e.type === "store-step").map((e) => (e.type === "store-step" ? `${e.step}:${e.ids}:${e.ok}` : ""));

describe("transactional mode, the engine's side", () => {
  it("the handler writes through ctx.tx; the writes and the id commit together; no separate commit step", async () => {
    const store = new JournalStore({ token: () => "tok" });
    const { events, observe } = observed();
    const contexts: unknown[] = [];
    const engine = new BatchEngine(store, (message, context) => {
      contexts.push(context.tx);
      (context.tx as Journal).push(`write ${message.meta.id}`);
    }, { transactional: true, observe });
    const results = await engine.process(deliveries(["a", "b"]));
    expect(results).toEqual([
      { status: "ran", ack: true, dedupe: "claim", handlerRan: true, key: "a" },
      { status: "ran", ack: true, dedupe: "claim", handlerRan: true, key: "b" },
    ]);
    expect(store.committed.sort()).toEqual(["write a", "write b"]);
    expect(contexts.every((tx) => Array.isArray(tx))).toBe(true);
    expect(store.claims.map((claim) => [claim.id, claim.token, typeof claim.fingerprint])).toEqual([
      ["a", "tok", "string"],
      ["b", "tok", "string"],
    ]);
    expect((await store.inspect("a"))?.status).toBe("done");
    expect(steps(events)).toEqual(["claim:2:true", "transact:1:true", "transact:1:true"]);
    const transact = events.find((e) => e.type === "store-step" && e.step === "transact") as Extract<EngineEvent, { type: "store-step" }>;
    expect(transact.durationMs).toBeGreaterThanOrEqual(0);
    expect(transact.durationMs).toBeLessThan(60_000);
  });

  it("without a fingerprint the fenced claim has no fingerprint field", async () => {
    const store = new JournalStore({ token: () => "tok" });
    await new BatchEngine(store, () => {}, { transactional: true, fingerprint: false }).process(deliveries(["a"]));
    expect(store.claims).toStrictEqual([{ id: "a", token: "tok" }]);
  });

  it("a handler that throws: nothing written, the claim released, failed and retried; the step is not ok", async () => {
    const store = new JournalStore();
    const { events, observe } = observed();
    const declined = new Error("declined");
    const engine = new BatchEngine(store, (_m, context) => {
      (context.tx as Journal).push("write");
      throw declined;
    }, { transactional: true, observe });
    const [result] = await engine.process(deliveries(["a"]));
    expect(result).toEqual({ status: "failed", ack: false, dedupe: "claim", handlerRan: true, key: "a", error: declined });
    expect(store.committed).toEqual([]);
    // Released at once: the redelivery need not wait for the lease.
    expect(await store.inspect("a")).toBeNull();
    expect(steps(events)).toEqual(["claim:1:true", "transact:1:false", "release:1:true"]);
    // The handler's own failure is not the store's: no store-error.
    expect(events.filter((e) => e.type === "store-error")).toEqual([]);
  });

  it("a store that cannot run the transaction: a store-error for the transact step (logged at error, counted); a lost fence is none", async () => {
    const down = new StoreUnavailableError("JournalStore", "transact", "connection refused");
    const broken = new JournalStore();
    broken.transact = async () => {
      throw down;
    };
    const { events, observe } = observed();
    const [result] = await new BatchEngine(broken, () => {}, { transactional: true, observe }).process(deliveries(["a"]));
    expect(result).toMatchObject({ status: "failed", ack: false, error: down });
    expect(events.filter((e) => e.type === "store-error")).toEqual([{ type: "store-error", step: "transact", ids: 1, error: down }]);

    const fenced = new JournalStore();
    fenced.transact = async (claim) => {
      throw new FenceLostError(claim.id);
    };
    const lost = observed();
    await new BatchEngine(fenced, () => {}, { transactional: true, observe: lost.observe }).process(deliveries(["b"]));
    expect(lost.events.filter((e) => e.type === "store-error")).toEqual([]);
  });

  it("a lost fence: failed, not acked, and no release (the claim is someone else's)", async () => {
    const store = new JournalStore();
    const { events, observe } = observed();
    const engine = new BatchEngine(store, async (_m, context) => {
      (context.tx as Journal).push("write");
      await store.forget("a");
      await store.claim("a", 60_000);
    }, { transactional: true, observe });
    const [result] = await engine.process(deliveries(["a"]));
    expect(result).toMatchObject({ status: "failed", ack: false, handlerRan: true, key: "a" });
    expect(result?.error).toBeInstanceOf(FenceLostError);
    expect(store.committed).toEqual([]);
    expect((await store.inspect("a"))?.status).toBe("in-flight");
    expect(steps(events)).toEqual(["claim:1:true", "transact:1:false"]);
  });

  it("a FIFO lane goes on after a committed transaction and stops at a failed one", async () => {
    const store = new JournalStore();
    const ran: string[] = [];
    const engine = new BatchEngine(store, (message) => {
      ran.push(String(message.meta.id));
      if (message.meta.id === "b") throw new Error("no");
    }, { transactional: true });
    const results = await engine.process(deliveries(["a", "b", "c"], { group: "g" }));
    expect(ran).toEqual(["a", "b"]);
    expect(results.map((r) => [r.status, r.ack])).toEqual([["ran", true], ["failed", false], ["failed", false]]);
    expect(results[2]?.error).toBeInstanceOf(GroupBlockedError);
  });

  it("a message without a key runs outside any transaction, with no ctx.tx", async () => {
    const store = new JournalStore();
    const txs: unknown[] = [];
    const engine = new BatchEngine(store, (_m, context) => void txs.push(context.tx), { transactional: true, key: () => undefined });
    const [result] = await engine.process(deliveries(["a"]));
    expect(result).toEqual({ status: "ran", ack: true, dedupe: "none", handlerRan: true });
    expect(txs).toEqual([undefined]);
    expect(store.claims).toEqual([]);
  });
});

describe("a copy after a conflicting first copy is judged by the stored payload", () => {
  const seenOnly = (inner: InMemoryStore) => seenSetView(inner, { recallMany: (ids) => inner.recallMany(ids) });

  for (const mode of ["claim", "seen-set"] as const) {
    it(`${mode}: a copy with a third payload is a conflict against the record, not a duplicate`, async () => {
      const inner = new InMemoryStore();
      const store = mode === "claim" ? inner : seenOnly(inner);
      // Store the record of payload A under id x.
      await new BatchEngine(store, () => {}).process([{ body: body("x", { v: "A" }), context: {} }]);
      let runs = 0;
      const results = await new BatchEngine(store, () => void (runs += 1)).process([
        { body: body("x", { v: "B" }), context: {} },
        { body: body("x", { v: "C" }), context: {} },
        { body: body("x", { v: "A" }), context: {} },
      ]);
      expect(runs).toBe(0);
      expect(results.map((r) => [r.status, r.ack, r.dedupe])).toEqual([
        ["conflict", false, mode],
        ["conflict", false, mode],
        ["duplicate", true, mode],
      ]);
      const [first, copy] = [results[0]?.error, results[1]?.error] as PayloadConflictError[];
      // The copy's conflict names the stored payload's fingerprint, the same one the first copy's names.
      expect(copy?.stored).toBe(first?.stored);
      expect(copy?.received).not.toBe(first?.received);
      expect(copy?.state).toBe("done");
    });
  }
});

describe("group commit waits only for handlers that may still finish", () => {
  /** An engine running one message at a time with a 1 s linger; when each commit step came (ms after this call). */
  function lingeringOneAtATime(store: ClaimingStore) {
    const started = Date.now();
    const commitTimes: number[] = [];
    const engine = new BatchEngine(store, async () => {}, {
      concurrency: 1,
      commitLingerMs: 1_000,
      observe: (event) => {
        if (event.type === "store-step" && event.step === "commit") commitTimes.push(Date.now() - started);
      },
    });
    return { engine, commitTimes };
  }

  it("one at a time: the first success lingers for the messages still waiting, and all share one commit", async () => {
    const { store, commits } = recordingCommits();
    const results = await new BatchEngine(store, async () => {}, { concurrency: 1, commitLingerMs: 1_000 }).process(deliveries(["a", "b", "c"]));
    expect(results.map((r) => r.status)).toEqual(["ran", "ran", "ran"]);
    expect(commits).toEqual([["a", "b", "c"]]);
  });

  it("a later copy of a key is not worth waiting for: it never runs", async () => {
    const { store, commits } = recordingCommits();
    const { engine, commitTimes } = lingeringOneAtATime(store);
    // The copy's result waits for the first copy's commit, so an `onResult` sees when that came.
    const results = await engine.process(deliveries(["a", "a"]));
    expect(results.map((r) => r.status)).toEqual(["ran", "duplicate"]);
    expect(commits).toEqual([["a"]]);
    // A linger would have held the commit for the full second.
    expect(commitTimes[0]).toBeLessThan(500);
  });

  it("a message already decided (a duplicate) is not worth waiting for either", async () => {
    const { store, commits } = recordingCommits();
    await store.remember("done", undefined);
    const { engine, commitTimes } = lingeringOneAtATime(store);
    const results = await engine.process(deliveries(["a", "done"]));
    expect(results.map((r) => r.status)).toEqual(["ran", "duplicate"]);
    expect(commits).toEqual([["a"]]);
    expect(commitTimes[0]).toBeLessThan(500);
  });
});

describe("per-id fallbacks of stores without batch forms", () => {
  function plain(overrides: Partial<ClaimingStore> = {}) {
    const inner = new InMemoryStore();
    return { inner, store: claimingView({ inner, batch: false, overrides }) };
  }

  it("remember per id: a failure of one id is that id's commit-failed, the other's commit stands", async () => {
    const down = new Error("down");
    const { inner, store } = plain({});
    const flaky: ClaimingStore = { ...store, remember: async (id, fp) => { if (id === "b") throw down; await inner.remember(id, fp); } };
    const results = await new BatchEngine(flaky, () => {}, { commitRetries: 0 }).process(deliveries(["a", "b"]));
    expect(results).toEqual([
      { status: "ran", ack: true, dedupe: "claim", handlerRan: true, key: "a" },
      { status: "commit-failed", ack: true, dedupe: "claim", handlerRan: true, key: "b", error: down },
    ]);
    expect((await inner.inspect("a"))?.status).toBe("done");
  });

  it("release per id: a failed handler's claim is released; a failed release is reported, not retried", async () => {
    const released: ClaimRef[] = [];
    const { inner, store } = plain();
    const tracking: ClaimingStore = { ...store, release: async (id, token) => { released.push({ id, token }); return inner.release(id, token); } };
    const { events, observe } = observed();
    await new BatchEngine(tracking, () => { throw new Error("no"); }, { observe }).process(deliveries(["a", "b"]));
    expect(released.map((claim) => claim.id).sort()).toEqual(["a", "b"]);
    expect(await inner.inspect("a")).toBeNull();
    expect(steps(events)).toContain("release:2:true");

    const down = new Error("release down");
    const failing: ClaimingStore = { ...store, release: async () => { throw down; } };
    const failed = observed();
    await new BatchEngine(failing, () => { throw new Error("no"); }, { observe: failed.observe }).process(deliveries(["c"]));
    expect(failed.events.filter((e) => e.type === "store-error")).toEqual([{ type: "store-error", step: "release", ids: 1, error: down }]);
    expect(steps(failed.events)).toEqual(["claim:1:true", "release:1:false"]);
  });
});

describe("result events", () => {
  it("exactly one per delivery, with the queue's message id when there is one and the handler's time when it ran", async () => {
    const store = new InMemoryStore();
    await store.remember("done");
    const { events, observe } = observed();
    const seen: number[] = [];
    await new BatchEngine(store, async () => {}, { observe }).process(
      [
        { body: body("a"), context: {}, messageId: "m-a" },
        { body: body("done"), context: {}, messageId: "m-done" },
        { body: body("b"), context: {} },
        { body: "not json", context: {}, messageId: "m-bad" },
      ],
      { onResult: (index) => void seen.push(index) },
    );
    const results = events.filter((e) => e.type === "result") as Extract<EngineEvent, { type: "result" }>[];
    expect(results.map((e) => e.index).sort()).toEqual([0, 1, 2, 3]);
    expect(seen.sort()).toEqual([0, 1, 2, 3]);
    const byIndex = new Map(results.map((e) => [e.index, e]));
    expect(Object.keys(byIndex.get(0) ?? {}).sort()).toEqual(["attempts", "handlerMs", "index", "messageId", "result", "type"]);
    expect(Object.keys(byIndex.get(1) ?? {}).sort()).toEqual(["attempts", "index", "messageId", "result", "type"]);
    expect(Object.keys(byIndex.get(2) ?? {}).sort()).toEqual(["attempts", "handlerMs", "index", "result", "type"]);
    expect(Object.keys(byIndex.get(3) ?? {}).sort()).toEqual(["attempts", "index", "messageId", "result", "type"]);
    expect(byIndex.get(0)?.messageId).toBe("m-a");
    expect(byIndex.get(0)?.handlerMs).toBeLessThan(10_000);
  });
});

describe("timers", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("a batch answered before its deadline leaves no timer behind", async () => {
    vi.useFakeTimers({ shouldAdvanceTime: true });
    const results = await new BatchEngine(new InMemoryStore(), async () => {}).process(deliveries(["a", "b"]), { deadline: Date.now() + 600_000 });
    expect(results.map((r) => r.status)).toEqual(["ran", "ran"]);
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe("when results are final", () => {
  it("a message the gate already decided is final before any handler runs (Cloudflare acks it at once)", async () => {
    const store = new InMemoryStore();
    await store.remember("done");
    const order: string[] = [];
    const results = await new BatchEngine(store, async () => {
      order.push("handler");
      await new Promise((r) => setTimeout(r, 5));
    }, { concurrency: 1 }).process(deliveries(["new", "done"]), { onResult: (index, result) => void order.push(`${index}:${result.status}`) });
    expect(results.map((r) => r.status)).toEqual(["ran", "duplicate"]);
    expect(order).toEqual(["1:duplicate", "handler", "0:ran"]);
  });

  it("a commit that hangs does not hold the answer past the deadline: the success is acknowledged (its effect happened)", async () => {
    const never = () => new Promise<void>(() => {});
    const hungCommit = claimingView({ batch: true, overrides: { remember: never, rememberMany: never } });
    const started = Date.now();
    const deadline = started + 400;
    const [result] = await new BatchEngine(hungCommit, () => {}, { deadlineMarginMs: 200 }).process(deliveries(["a"]), { deadline });
    const answeredAt = Date.now();
    expect(result).toMatchObject({ status: "ran", ack: true, handlerRan: true, key: "a" });
    expect(result?.error).toBeUndefined();
    // The flush may take until a quarter of the margin before the deadline, not beyond it.
    expect(answeredAt).toBeLessThan(deadline);
    expect(answeredAt - started).toBeGreaterThanOrEqual(300);
  });
});

describe("the answer at the deadline (found by fuzzing the engine)", () => {
  const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
  const marks = (events: EngineEvent[]) =>
    events.flatMap((e) => (e.type === "result" ? [`${e.index}:${e.late === true ? "late:" : ""}${e.result.status}`] : e.type === "batch-end" ? [`end(${e.pending})`] : []));

  it("a success whose commit then fails is acknowledged at the answer: the redelivery that would repeat its effect never comes", async () => {
    const inner = new InMemoryStore();
    const store = claimingView({
      inner,
      batch: false,
      overrides: {
        remember: async () => {
          await sleep(40);
          throw new StoreUnavailableError("scripted", "remember", "throttled");
        },
      },
    });
    let effects = 0;
    const { events, observe } = observed();
    const [result] = await new BatchEngine(store, () => void (effects += 1), { deadlineMarginMs: 0, commitRetries: 0 }).process(deliveries(["A"]), {
      deadline: Date.now() + 20,
      observe,
    });
    expect(result).toMatchObject({ status: "ran", ack: true, handlerRan: true, key: "A" });
    await sleep(60);
    expect(effects).toBe(1);
    // No late result for it (it was answered for good); the failed commit is a store error.
    expect(marks(events)).toEqual(["0:ran", "end(0)"]);
    expect(events.filter((e) => e.type === "store-error").map((e) => (e.type === "store-error" ? e.step : ""))).toEqual(["commit"]);
  });

  it("batch-end comes before any late result, and counts the late results that follow", async () => {
    const inner = new InMemoryStore();
    const commitLanded = deferred();
    const store = claimingView({
      inner,
      batch: false,
      overrides: {
        remember: async (id, fingerprint) => {
          await sleep(60);
          await inner.remember(id, fingerprint);
          commitLanded.resolve();
        },
      },
    });
    for (const ticks of [0, 1, 2, 3, 5, 9, 15, 30]) {
      const { events, observe } = observed();
      const engine = new BatchEngine(
        store,
        async (message: { meta: { id: string } }) => {
          if (message.meta.id !== `slow-${ticks}`) return;
          await commitLanded.promise;
          for (let i = 0; i < ticks; i += 1) await null;
          throw new Error("the slow one fails");
        },
        { deadlineMarginMs: 60, commitLingerMs: 0 },
      );
      await engine.process(deliveries([`fast-${ticks}`, `slow-${ticks}`]), { deadline: Date.now() + 100, observe });
      await sleep(100);
      // The slow handler fails a few microtasks after the commit lands: before the answer, or after it.
      const order = marks(events);
      const end = order.findIndex((mark) => mark.startsWith("end("));
      expect(end, order.join(" ")).toBeGreaterThan(-1);
      expect(order.slice(0, end).filter((mark) => mark.includes("late:")), order.join(" ")).toEqual([]);
      expect(order.filter((mark) => mark.includes("late:")).length, order.join(" ")).toBe(Number(order[end]?.slice(4, -1)));
      expect(order.filter((mark) => mark.startsWith("1:"))).toContain(order.includes("end(1)") ? "1:late:failed" : "1:failed");
    }
  });

  it("transactional mode: a transaction the store opens only after the answer never starts the handler, and gives its claim back", async () => {
    class SlowStart extends JournalStore {
      override async transact(claim: FencedClaim, work: (tx: Journal) => Promise<void>): Promise<void> {
        await sleep(80); // a pool wait, a slow BEGIN
        await super.transact(claim, work);
      }
    }
    const store = new SlowStart();
    let invoked = 0;
    const { events, observe } = observed();
    const [result] = await new BatchEngine(store, () => void (invoked += 1), { transactional: true, deadlineMarginMs: 0 }).process(deliveries(["T"]), {
      deadline: Date.now() + 30,
      observe,
    });
    expect(result).toMatchObject({ status: "in-flight", ack: false });
    await sleep(120);
    expect(invoked).toBe(0);
    expect(store.committed).toEqual([]);
    expect(await store.inspect("T")).toBeNull();
    expect(marks(events)).toEqual(["0:in-flight", "end(1)", "0:late:failed"]);
  });
});
