/**
 * The adaptive commit linger inside a batch (src/engine/batch.ts feeding src/engine/commit.ts and
 * linger.ts), on vitest's fake clock so every wait is exact to the millisecond: the store's pace
 * is learned from its claim and commit steps (and from nothing when a batch asked the store
 * nothing), and a queued success or release waits for the finish it expects — asked again at
 * every handler finish, failures included, and again when its wait ends.
 *
 * The store answers a claim step in CLAIM_MS (so one round trip, the linger's budget, is CLAIM_MS)
 * and a commit or release step at once. Handlers finish at fixed times after the claim step:
 * `finishMs` in the body, `fail` to throw. Keyless messages fail without a claim to release, so a
 * test can add finishes without adding store steps.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { BatchEngine } from "../../src/engine/index.js";
import { InMemoryStore } from "../../src/memory-store.js";
import { envelopeBody } from "../support/envelopes.js";
import { claimingView } from "../support/store-views.js";

const CLAIM_MS = 30;
const START = 1_000_000;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

interface Plan {
  readonly id?: string;
  readonly finishMs: number;
  readonly fail?: boolean;
}

const deliveries = (plans: readonly Plan[]) =>
  plans.map((plan, n) => ({ body: envelopeBody(plan.id, { job: "urn:babel:timeline", data: { n, finishMs: plan.finishMs, fail: plan.fail === true } }), context: {} }));

/** An engine over a store that takes CLAIM_MS per claim step; when each commit and release step came (ms after the batch's claim step). */
function timeline(claimMs = CLAIM_MS) {
  const inner = new InMemoryStore();
  let claimedAt = 0;
  const commits: [string[], number][] = [];
  const releases: [string[], number][] = [];
  const store = claimingView({
    inner,
    batch: true,
    overrides: {
      claimMany: async (ids, lease, fps) => {
        await sleep(claimMs);
        claimedAt = Date.now();
        return inner.claimMany(ids, lease, fps);
      },
      rememberMany: async (ids, fps) => {
        commits.push([[...ids], Date.now() - claimedAt]);
        await inner.rememberMany(ids, fps);
      },
      releaseMany: async (claims) => {
        releases.push([claims.map((c) => c.id), Date.now() - claimedAt]);
        await inner.releaseMany(claims);
      },
    },
  });
  const engine = new BatchEngine(store, async (message) => {
    const data = message.data as { finishMs: number; fail: boolean };
    await sleep(data.finishMs);
    if (data.fail) throw new Error("not done");
  });
  /** Runs one batch to its end on the fake clock. */
  const run = async (plans: readonly Plan[]) => {
    const done = engine.process(deliveries(plans));
    await vi.advanceTimersByTimeAsync(10_000);
    return done;
  };
  return { run, commits, releases };
}

/** The commits of a batch whose successes are "a" and then "x", the last handler (committed at once). */
const aThenX = (aAt: number, xAt: number) => [
  [["a"], aAt],
  [["x"], xAt],
];

beforeEach(() => {
  vi.useFakeTimers({ now: START, toFake: ["setTimeout", "clearTimeout", "Date", "performance"] });
  // A process that has been up a while: the monotonic clock reads far from 0.
  vi.advanceTimersByTime(1_000);
});
afterEach(() => {
  vi.useRealTimers();
});

describe("the adaptive linger, millisecond by millisecond", () => {
  it("a failure's finish shortens the wait: the next finish is expected sooner, and when it does not come the commit goes", async () => {
    const { run, commits } = timeline();
    const results = await run([
      { finishMs: 1, fail: true },
      { id: "a", finishMs: 10 },
      { finishMs: 12, fail: true },
      { id: "x", finishMs: 100 },
    ]);
    expect(results.map((r) => r.status)).toEqual(["failed", "ran", "failed", "ran"]);
    // At 10 the next finish is expected 9 ms on (at 20); the failure at 12 makes it 12 + 2 + 1 = 15.
    // x, the last handler, commits at once: nobody is left to wait for.
    expect(commits).toEqual(aThenX(15, 100));
  });

  it("a success's finish shortens the wait of a queued release the same way", async () => {
    const { run, commits, releases } = timeline();
    await run([
      { finishMs: 1, fail: true },
      { id: "p", finishMs: 10, fail: true },
      { id: "a", finishMs: 11 },
      { id: "x", finishMs: 100 },
    ]);
    // p's release first expects the next finish at 20; a's success at 11 makes it 11 + 1 + 1 = 13.
    expect(releases).toEqual([[["p"], 13]]);
    expect(commits).toEqual(aThenX(13, 100));
  });

  it.each<[string, Plan[], number, number]>([
    [
      // Expected at 20; the failure at 19 moves the expectation to 19 + 9 + 1 = 29 (still inside a's budget, 10 + 30).
      "when the wait ends it is asked again: a finish expected later than first thought extends it, within the budget",
      [
        { finishMs: 1, fail: true },
        { id: "a", finishMs: 10 },
        { finishMs: 19, fail: true },
        { id: "x", finishMs: 100 },
      ],
      29,
      100,
    ],
    [
      // Expected at 36 + 35 + 1 = 72, past 36 + 30: a commits at once.
      "the budget is one measured round trip: a finish expected past it is not waited for",
      [
        { finishMs: 1, fail: true },
        { id: "a", finishMs: 36 },
        { id: "x", finishMs: 200 },
      ],
      36,
      200,
    ],
  ])("%s", async (_, plan, aAt, xAt) => {
    const { run, commits } = timeline();
    await run(plan);
    expect(commits).toEqual(aThenX(aAt, xAt));
  });

  it("a batch that asked the store nothing teaches the engine nothing about its pace", async () => {
    const { run, commits } = timeline();
    const first = await run([{ finishMs: 1 }, { finishMs: 2, fail: true }]);
    expect(first.map((r) => r.status)).toEqual(["ran", "failed"]);
    expect(commits).toEqual([]);
    await run([
      { finishMs: 1, fail: true },
      { id: "a", finishMs: 10 },
      { finishMs: 12, fail: true },
      { id: "x", finishMs: 100 },
    ]);
    expect(commits).toEqual(aThenX(15, 100));
  });

  it("commit steps are round trips too: a store that commits at once gets no linger in the next batch", async () => {
    const { run, commits } = timeline();
    const plan = [
      { finishMs: 1, fail: true },
      { id: "a", finishMs: 10 },
      { id: "x", finishMs: 100 },
    ];
    await run(plan);
    // First batch: only the claim step's 30 ms is known, so a waits for the finish expected at 20.
    expect(commits).toEqual(aThenX(20, 100));
    commits.length = 0;
    await run(plan.map((p) => (p.id === undefined ? p : { ...p, id: `${p.id}2` })));
    // The commit steps answered in 0 ms: the fastest round trip is 0, nothing to save by waiting.
    expect(commits).toEqual([
      [["a2"], 10],
      [["x2"], 100],
    ]);
  });
});
