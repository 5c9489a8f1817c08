/**
 * The adaptive commit linger (src/engine/linger.ts), the default of `commitLingerMs`: the round-trip
 * estimate (median of the last 8 steps), the wait it allows (never past one round trip after the
 * oldest queued success, and only for a finish it expects), and what a batch does with it on a
 * store that takes a known time per step — the window stays within about two round trips.
 */
import { describe, expect, it, vi } from "vitest";
import type { Claim, ClaimingStore } from "../../src/contract.js";
import { BatchEngine, type EngineEvent } from "../../src/engine/index.js";
import { FIRST_PROBE_MS, MAX_LINGER_MS, RoundTrips, lingerMs } from "../../src/engine/linger.js";
import { InMemoryStore } from "../../src/memory-store.js";
import { claimingView } from "../support/store-views.js";

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

describe("RoundTrips", () => {
  it("is the fastest of the last 8 steps (a parallel or stalled step does not grow it), 0 before any, and ignores nonsense", () => {
    const trips = new RoundTrips();
    expect(trips.estimateMs).toBe(0);
    trips.add(70);
    expect(trips.estimateMs).toBe(70);
    trips.add(15);
    expect(trips.estimateMs).toBe(15);
    trips.add(Number.NaN);
    trips.add(-1);
    trips.add(400);
    expect(trips.estimateMs).toBe(15);
    for (const ms of [20, 21, 22, 23, 24]) trips.add(ms);
    // 70 15 400 20 21 22 23 24: still 15.
    expect(trips.estimateMs).toBe(15);
    // Two more: 70 and then 15 give way to the newest (8 samples kept).
    trips.add(30);
    expect(trips.estimateMs).toBe(15);
    trips.add(30);
    expect(trips.estimateMs).toBe(20);
  });
});

describe("lingerMs", () => {
  const none = { count: 0, last: 0, previous: 0 };
  const one = (at: number) => ({ count: 1, last: at, previous: 0 });

  it("no budget (a store that answers within a millisecond): never waits", () => {
    expect(lingerMs(1_000, 1_000, 0, none)).toBe(0);
    expect(lingerMs(1_000, 1_000, 0.4, one(1_000))).toBe(0);
  });

  it("never more than MAX_LINGER_MS, however slow the steps were (a cold connection, a stall)", () => {
    expect(MAX_LINGER_MS).toBe(50);
    expect(lingerMs(1_000, 1_000, 400, { count: 3, last: 1_000, previous: 960 })).toBe(41);
    expect(lingerMs(1_000, 1_000, 400, { count: 3, last: 1_000, previous: 900 })).toBe(0);
    expect(lingerMs(1_040, 1_000, 400, { count: 3, last: 1_040, previous: 1_030 })).toBe(0);
  });

  it("before two handlers have finished: a short probe (FIRST_PROBE_MS), within the budget, from the oldest queued success", () => {
    expect(FIRST_PROBE_MS).toBe(2);
    expect(lingerMs(1_000, 1_000, 12, one(1_000))).toBe(2);
    expect(lingerMs(1_001, 1_000, 12, one(1_000))).toBe(1);
    expect(lingerMs(1_002, 1_000, 12, one(1_000))).toBe(0);
    expect(lingerMs(1_000, 1_000, 1.5, none)).toBe(2);
    expect(lingerMs(1_000, 1_000, 0.5, none)).toBe(0);
  });

  it("after that: waits for the finish it expects (the last gap again, plus a tick), if that is within the budget", () => {
    // Handlers 2 ms apart, budget 12: the next is expected at 1_000 + 2 + 1.
    expect(lingerMs(1_000, 1_000, 12, { count: 3, last: 1_000, previous: 998 })).toBe(3);
    // Expected past the budget (50 ms apart): commit now.
    expect(lingerMs(1_000, 1_000, 12, { count: 3, last: 1_000, previous: 950 })).toBe(0);
    // Expected, but already overdue: commit now.
    expect(lingerMs(1_010, 1_000, 12, { count: 3, last: 1_000, previous: 998 })).toBe(0);
    // Never past the oldest success's budget, however close the next finish is expected.
    expect(lingerMs(1_000, 990, 12, { count: 3, last: 1_000, previous: 998 })).toBe(0);
    expect(lingerMs(1_000, 990, 12, { count: 3, last: 1_000, previous: 999 })).toBe(2);
  });
});

/** `inner` behind a store whose only batch steps are the given claimMany and rememberMany. */
const withBatchSteps = (inner: InMemoryStore, steps: Pick<ClaimingStore, "claimMany" | "rememberMany">) =>
  claimingView({ inner, batch: false, overrides: steps });

/** InMemoryStore behind a store whose batch steps take `latencyMs`; records the commit steps. */
function slowStore(latencyMs: number) {
  const inner = new InMemoryStore();
  const commits: string[][] = [];
  const store = withBatchSteps(inner, {
    claimMany: async (ids, lease): Promise<Claim[]> => {
      await sleep(latencyMs);
      return inner.claimMany(ids, lease);
    },
    rememberMany: async (ids) => {
      commits.push([...ids]);
      await sleep(latencyMs);
      await inner.rememberMany(ids);
    },
  });
  return { store, commits };
}

const body = (id: string) => JSON.stringify({ job: "urn:babel:linger", trace_id: `t-${id}`, data: { id }, meta: { id, schema_version: 1 }, attempts: 0 });
const batch = (ids: readonly string[]) => ids.map((id) => ({ body: body(id), context: {} }));

/** Runs one batch; the commit lag of each success (ms): from its effect's end (`ended`, set by the handler) to its result. */
async function run(engine: BatchEngine, ids: string[], ended: Map<string, number>) {
  const landed = new Map<string, number>();
  await engine.process(batch(ids), {
    observe: (event: EngineEvent) => {
      if (event.type === "result" && event.result.status === "ran") landed.set(event.result.key as string, performance.now());
    },
  });
  return ids.map((id) => (landed.get(id) as number) - (ended.get(id) as number));
}

describe("the adaptive linger in a batch", () => {
  it("a wait gets shorter as handlers finish: a hung neighbour does not hold the others' commit for the whole budget", async () => {
    // A cold first claim step (300 ms): the budget starts at its cap, 50 ms. The first success
    // waits for company; the next ones finish right after it, so the expected gap is ~0 and the
    // commit goes at once when the next expected finish does not come — long before the budget.
    const inner = new InMemoryStore();
    const commits: number[] = [];
    let first = true;
    const store = withBatchSteps(inner, {
      claimMany: async (ids, lease): Promise<Claim[]> => {
        if (first) await sleep(300);
        first = false;
        return inner.claimMany(ids, lease);
      },
      rememberMany: async (ids) => {
        commits.push(performance.now());
        await inner.rememberMany(ids);
      },
    });
    let finished = 0;
    const never = new Promise<void>(() => undefined);
    const engine = new BatchEngine(store, async (_m, ctx) => {
      if (ctx.key === "hung") return never;
      await sleep(5);
      finished = performance.now();
    });
    void engine.process(batch(["h0", "h1", "h2", "h3", "hung"]));
    const waited = Date.now();
    while (commits.length === 0 && Date.now() - waited < 5_000) await sleep(2);
    expect(commits.length).toBeGreaterThan(0);
    // Well inside the 50 ms cap (a generous bound for a loaded machine), and nowhere near the 300 ms step.
    expect((commits[0] as number) - finished).toBeLessThan(45);
  });

  it("handlers far apart: each success commits at once, its commit landing about one round trip after its effect", async () => {
    const { store, commits } = slowStore(30);
    const ended = new Map<string, number>();
    const ids = ["a0", "a1", "a2", "a3"];
    const engine = new BatchEngine(store, async (_m, ctx) => {
      await sleep(Number((ctx.key as string).slice(1)) * 150);
      ended.set(ctx.key as string, performance.now());
    });
    const lags = await run(engine, ids, ended);
    expect(commits).toEqual([["a0"], ["a1"], ["a2"], ["a3"]]);
    // a1…a3 finish 150 ms after the one before: no finish is expected within a round trip, so no linger.
    // The first waits a short probe only (nothing known yet). Generous bounds: a loaded machine.
    for (const lag of lags.slice(1)) expect(lag).toBeLessThan(30 + 60);
    expect(lags[0]).toBeLessThan(2 * 30 + 60);
  });

  it("handlers that finish close together share a step", async () => {
    const { store, commits } = slowStore(40);
    const engine = new BatchEngine(store, async (_m, ctx) => sleep(Number((ctx.key as string).slice(1)) * 2));
    await engine.process(batch(["b0", "b1", "b2", "b3", "b4"]));
    // All five finish within ~10 ms, well inside one 40 ms round trip: one or two steps, never five.
    expect(commits.length).toBeLessThanOrEqual(2);
    expect(commits.flat().sort()).toEqual(["b0", "b1", "b2", "b3", "b4"]);

  });

  it("a store that answers within a millisecond (in memory) gets no linger: a success commits while its neighbour still runs", async () => {
    vi.useFakeTimers();
    try {
      let open!: () => void;
      const hold = new Promise<void>((resolve) => (open = resolve));
      const seen: string[] = [];
      const done = new BatchEngine(new InMemoryStore(), (_m, ctx) => (ctx.key === "m1" ? hold : undefined)).process(batch(["m0", "m1"]), {
        onResult: (index, result) => seen.push(`${index}:${result.status}`),
      });
      // Microtasks only, no clock: a linger of even 1 ms would hold m0's commit here.
      await vi.advanceTimersByTimeAsync(0);
      expect(seen).toEqual(["0:ran"]);
      open();
      await done;
      expect(seen).toEqual(["0:ran", "1:ran"]);
    } finally {
      vi.useRealTimers();
    }
  });

  it("a fixed commitLingerMs still works as before (the adaptive one is only the default)", async () => {
    const { store, commits } = slowStore(0);
    const engine = new BatchEngine(store, async (_m, ctx) => sleep(ctx.key === "c0" ? 0 : 15), { commitLingerMs: 200 });
    await engine.process(batch(["c0", "c1"]));
    // c0 waits up to 200 ms for company while c1 runs; c1 joins it.
    expect(commits).toEqual([["c0", "c1"]]);
  });
});
