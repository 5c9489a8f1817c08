/**
 * The engine's safety guards, pinned one by one (mutation testing found them unpinned): store
 * answers of the wrong length or shape, option bounds at their edges, the result's key and
 * dedupe mode, the hints and fingerprints the gate passes to the store, and the interceptors.
 * On InMemoryStore behind thin overrides: InMemoryStore itself never answers wrongly.
 */
import { describe, expect, it } from "vitest";
import type { Claim, ClaimHints, ClaimingStore } from "../../src/contract.js";
import { BatchEngine } from "../../src/engine/index.js";
import { InvalidOptionError, StoreUnavailableError } from "../../src/errors.js";
import type { EngineEvent, RunInfo } from "../../src/events.js";
import { InMemoryStore } from "../../src/memory-store.js";
import { claimingView } from "../support/store-views.js";
import { envelopeBody } from "../support/envelopes.js";

const claimingWith = (overrides: Partial<ClaimingStore>, inner?: InMemoryStore) => claimingView({ inner, batch: true, overrides });

const envelope = (id: string, attempts = 0, data: Record<string, unknown> = {}) => envelopeBody(id, { job: "urn:babel:guards", data, attempts });
const batch = (ids: string[], attempts = 0) => ids.map((id) => ({ body: envelope(id, attempts), context: {}, messageId: `m-${id}` }));

describe("store answers the engine refuses", () => {
  it("a claimMany answer of the wrong length fails every id of the step, runs nothing", async () => {
    let runs = 0;
    const store = claimingWith({ claimMany: async () => [{ status: "claimed", token: "t" }] as Claim[] });
    const results = await new BatchEngine(store, () => void (runs += 1)).process(batch(["a", "b"]));
    expect(results.map((r) => [r.status, r.ack, r.key, r.dedupe])).toEqual([
      ["failed", false, "a", "claim"],
      ["failed", false, "b", "claim"],
    ]);
    expect(results[0]?.error).toBeInstanceOf(StoreUnavailableError);
    expect((results[0]?.error as Error).message).toMatch(/claimMany.*wrong shape/);
    expect(runs).toBe(0);
  });

  it("a claimed answer without a token, an in-flight one without retryAfterMs, or a non-string fingerprint is a store error", async () => {
    const answers: unknown[][] = [
      [{ status: "claimed" }],
      [{ status: "claimed", token: "" }],
      [{ status: "in-flight" }],
      [{ status: "in-flight", retryAfterMs: Number.NaN }],
      [{ status: "done", fingerprint: 42 }],
      [null],
      ["claimed"],
    ];
    for (const answer of answers) {
      let runs = 0;
      const store = claimingWith({ claimMany: async () => answer as Claim[] });
      const [result] = await new BatchEngine(store, () => void (runs += 1)).process(batch(["x"]));
      expect(result, JSON.stringify(answer)).toMatchObject({ status: "failed", ack: false, handlerRan: false, key: "x" });
      expect(runs).toBe(0);
    }
  });

  it("a seen-set answer that is not a boolean is a store error; recallMany's shape is checked too", async () => {
    const inner = new InMemoryStore();
    const base = { seen: (id: string) => inner.seen(id), remember: (id: string) => inner.remember(id), forget: (id: string) => inner.forget(id) };
    const wrongSeen = { ...base, seenMany: async () => ["yes"] as unknown as boolean[] };
    expect((await new BatchEngine(wrongSeen, () => undefined).process(batch(["s"])))[0]).toMatchObject({ status: "failed", dedupe: "seen-set" });
    const wrongRecall = { ...base, recallMany: async () => [{ seen: true, fingerprint: 7 }] as never };
    expect((await new BatchEngine(wrongRecall, () => undefined).process(batch(["r"])))[0]).toMatchObject({ status: "failed", dedupe: "seen-set" });
    const rightRecall = { ...base, recallMany: async () => [{ seen: true }] };
    expect((await new BatchEngine(rightRecall, () => undefined).process(batch(["r"])))[0]).toMatchObject({ status: "duplicate", ack: true, key: "r" });
  });
});

describe("what the gate passes to the store", () => {
  it("hands claimMany the fingerprints in order and the redelivery hints (receive count or body attempts)", async () => {
    const seen: { fingerprints?: readonly (string | undefined)[]; hints?: ClaimHints } = {};
    const inner = new InMemoryStore();
    const store = claimingWith({
      claimMany: (ids, lease, fingerprints, hints) => {
        seen.fingerprints = fingerprints;
        seen.hints = hints;
        return inner.claimMany(ids, lease, fingerprints);
      },
    }, inner);
    await new BatchEngine(store, () => undefined).process([
      { body: envelope("first", 0, { v: 1 }), context: {} },
      { body: envelope("body-attempts", 2, { v: 2 }), context: {} },
      { body: envelope("receive-count", 0, { v: 3 }), context: {}, redeliveries: 1 },
    ]);
    expect(seen.hints).toEqual({ redelivered: [false, true, true] });
    expect(seen.fingerprints).toHaveLength(3);
    expect(new Set(seen.fingerprints).size).toBe(3);
    for (const fp of seen.fingerprints ?? []) expect(fp).toMatch(/^h1:/);
  });

  it("passes the lease of the call, else of the options, to the claim", async () => {
    const leases: (number | undefined)[] = [];
    const inner = new InMemoryStore();
    const store = claimingWith({ claimMany: (ids, lease, fps) => (leases.push(lease), inner.claimMany(ids, lease, fps)) }, inner);
    const engine = new BatchEngine(store, () => undefined, { leaseMs: 7_000 });
    await engine.process(batch(["l1"]));
    await engine.process(batch(["l2"]), { leaseMs: 9_000 });
    expect(leases).toEqual([7_000, 9_000]);
  });
});

describe("option bounds, at their edges", () => {
  const store = new InMemoryStore();
  const make = (options: ConstructorParameters<typeof BatchEngine>[2]) => () => new BatchEngine(store, () => undefined, options);
  it("accepts the edges and refuses one past them", () => {
    for (const ok of [
      { concurrency: 1 },
      { commitRetries: 0 },
      { commitRetries: 10 },
      { commitLingerMs: 0 },
      { commitLingerMs: 1_000 },
      { deadlineMarginMs: 0 },
      { deadlineMarginMs: 60_000 },
      { onConflict: "drop" as const },
      { onStoreError: "run" as const },
      { fingerprint: false as const },
    ]) {
      expect(make(ok), JSON.stringify(ok)).not.toThrow();
    }
    for (const [bad, name] of [
      [{ concurrency: 0 }, "concurrency"],
      [{ concurrency: 1.5 }, "concurrency"],
      [{ commitRetries: 11 }, "commitRetries"],
      [{ commitRetries: -1 }, "commitRetries"],
      [{ commitLingerMs: -1 }, "commitLingerMs"],
      [{ deadlineMarginMs: 60_001 }, "deadlineMarginMs"],
      [{ onConflict: "ack" }, "onConflict"],
      [{ onStoreError: "skip" }, "onStoreError"],
      [{ fingerprint: "yes" }, "fingerprint"],
      [{ transactional: true }, "transactional"],
    ] as const) {
      const thrown = (() => {
        try {
          make(bad as never)();
        } catch (error) {
          return error;
        }
        return undefined;
      })();
      expect(thrown, JSON.stringify(bad)).toBeInstanceOf(InvalidOptionError);
      expect((thrown as InvalidOptionError).option).toBe(name);
    }
  });

  it("refuses a per-call lease or deadline that is not a time", async () => {
    const engine = new BatchEngine(store, () => undefined);
    await expect(engine.process(batch(["o"]), { leaseMs: 0 })).rejects.toThrow(/leaseMs/);
    await expect(engine.process(batch(["o"]), { deadline: Number.NaN })).rejects.toThrow(/deadline/);
  });
});

describe("interceptors and observers", () => {
  it("runs the engine's interceptor around the batch's, with the run's facts, once per handler run", async () => {
    const order: string[] = [];
    const infos: RunInfo[] = [];
    const engine = new BatchEngine(new InMemoryStore(), () => void order.push("handler"), {
      intercept: async (run, info) => {
        order.push("engine:before");
        infos.push(info);
        await run();
        order.push("engine:after");
      },
    });
    await engine.process([{ body: envelope("i1", 1), context: {}, messageId: "m-i1", headers: { traceparent: "tp" } }], {
      intercept: async (run) => {
        order.push("batch:before");
        await run();
        order.push("batch:after");
      },
    });
    expect(order).toEqual(["engine:before", "batch:before", "handler", "batch:after", "engine:after"]);
    expect(infos).toEqual([{ index: 0, key: "i1", attempts: 1, messageId: "m-i1", headers: { traceparent: "tp" }, traceId: "trace-i1" }]);
  });

  it("the batch's observer sees what the engine's sees, and neither can change an outcome", async () => {
    const engineEvents: EngineEvent[] = [];
    const batchEvents: EngineEvent[] = [];
    const engine = new BatchEngine(new InMemoryStore(), () => undefined, {
      observe: (e) => {
        engineEvents.push(e);
        throw new Error("observer bug");
      },
    });
    const results = await engine.process(batch(["e1", "e2"]), {
      observe: (e) => {
        batchEvents.push(e);
        throw new Error("observer bug");
      },
      onResult: () => {
        throw new Error("callback bug");
      },
    });
    expect(results.map((r) => r.status)).toEqual(["ran", "ran"]);
    expect(batchEvents.map((e) => e.type)).toEqual(engineEvents.map((e) => e.type));
    const resultEvents = batchEvents.filter((e) => e.type === "result");
    expect(resultEvents.map((e) => e.type === "result" && [e.index, e.messageId, e.attempts, e.result.key])).toEqual([
      [0, "m-e1", 0, "e1"],
      [1, "m-e2", 0, "e2"],
    ]);
    expect(batchEvents[0]).toEqual({ type: "batch-start", size: 2 });
    expect(batchEvents.at(-1)).toMatchObject({ type: "batch-end", size: 2, pending: 0 });
  });
});
