/**
 * Property test: random interleavings of concurrent deliveries, handler successes and failures,
 * crashes, lease expiries and `forget`s against InMemoryStore in claim mode, checked against a
 * simple model:
 *  - never two overlapping live runs of one id;
 *  - nothing acknowledged without a successful run or an earlier commit;
 *  - at most one successful effect per id between two `forget`s (a crash here dies before the effect);
 *  - when deliveries keep coming, every id eventually runs once.
 * Leases are assumed to outlast handlers (the wrappers size them so): the clock never jumps past
 * the lease of a live run. A crashed run is dead; its lease expires like any other.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { MessageResult } from "../../src/decision.js";
import { InMemoryStore } from "../../src/memory-store.js";
import { wrapResult } from "../../src/wrap.js";
import { envelopeBody } from "../support/envelopes.js";

const LEASE = 1_000;
const IDS = ["a", "b", "c"];

type Action =
  | { kind: "deliver"; id: number }
  | { kind: "finish"; run: number; ok: boolean }
  | { kind: "crash"; run: number }
  | { kind: "advance"; ms: number }
  | { kind: "forget"; id: number };

const action: fc.Arbitrary<Action> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant("deliver" as const), id: fc.nat(IDS.length - 1) }) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant("finish" as const), run: fc.nat(20), ok: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("crash" as const), run: fc.nat(20) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("advance" as const), ms: fc.integer({ min: 1, max: 3 * LEASE }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("forget" as const), id: fc.nat(IDS.length - 1) }) },
);

interface Run {
  id: string;
  startedAt: number;
  settle: (ok: boolean) => void;
  state: "live" | "crashed" | "done";
}

const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

function body(id: string): string {
  return envelopeBody(id, { job: "urn:babel:p:t", traceId: "t", data: {} });
}

async function check(actions: Action[]): Promise<void> {
  let now = 0;
  const store = new InMemoryStore({ now: () => now, leaseMs: LEASE });
  const runs: Run[] = [];
  const committed = new Set<string>();
  const effectsSinceForget = new Map<string, number>();
  const everRan = new Set<string>();

  const deliver = wrapResult(store, (_message, context) => {
    const id = context.key as string;
    const overlapping = runs.find((run) => run.id === id && run.state === "live");
    expect(overlapping, `two live runs of ${id}`).toBeUndefined();
    return new Promise<void>((resolve, reject) => {
      runs.push({
        id,
        startedAt: now,
        state: "live",
        settle: (ok) => (ok ? resolve() : reject(new Error("handler failed"))),
      });
    });
    // The interleavings are about claims; the async default fingerprint would only add event-loop turns.
  }, { fingerprint: false });

  const pending: Promise<void>[] = [];
  const onResult = (id: string, result: MessageResult) => {
    if (!result.ack) return;
    if (result.status === "duplicate") expect(committed.has(id), `${id} acked as duplicate before any commit`).toBe(true);
    else {
      expect(["ran", "commit-failed"]).toContain(result.status);
      expect(result.handlerRan).toBe(true);
    }
  };
  const start = async (id: string) => {
    pending.push(deliver(body(id), { leaseMs: LEASE }).then((result) => onResult(id, result)));
    await flush();
  };
  const liveRuns = () => runs.filter((run) => run.state === "live");
  const finish = async (run: Run, ok: boolean) => {
    run.state = "done";
    if (ok) {
      const effects = (effectsSinceForget.get(run.id) ?? 0) + 1;
      effectsSinceForget.set(run.id, effects);
      expect(effects, `${run.id} took effect twice without a forget`).toBe(1);
      committed.add(run.id);
      everRan.add(run.id);
    }
    run.settle(ok);
    await flush();
  };

  for (const step of actions) {
    switch (step.kind) {
      case "deliver":
        await start(IDS[step.id] as string);
        break;
      case "finish": {
        const run = liveRuns()[step.run % Math.max(1, liveRuns().length)];
        if (run) await finish(run, step.ok);
        break;
      }
      case "crash": {
        const run = liveRuns()[step.run % Math.max(1, liveRuns().length)];
        if (run) run.state = "crashed";
        break;
      }
      case "advance": {
        // The lease outlasts every live handler: never jump past a live run's lease.
        const limit = Math.min(...liveRuns().map((run) => run.startedAt + LEASE - 1 - now), Number.POSITIVE_INFINITY);
        now += Math.max(0, Math.min(step.ms, limit));
        break;
      }
      case "forget": {
        const id = IDS[step.id] as string;
        // A deliberate replay: the operator forgets only what is not being run right now.
        if (liveRuns().some((run) => run.id === id)) break;
        await store.forget(id);
        committed.delete(id);
        effectsSinceForget.delete(id);
        break;
      }
    }
  }

  // Deliveries keep coming: finish what runs, let crashed leases expire, redeliver until acked.
  for (const run of liveRuns()) await finish(run, true);
  now += LEASE + 1;
  for (const id of IDS) {
    let acked = false;
    for (let attempt = 0; attempt < 3 && !acked; attempt += 1) {
      const result = deliver(body(id), { leaseMs: LEASE });
      await flush();
      for (const run of liveRuns()) await finish(run, true);
      const outcome = await result;
      onResult(id, outcome);
      acked = outcome.ack;
    }
    expect(acked, `${id} never acknowledged`).toBe(true);
    expect(everRan.has(id), `${id} never ran`).toBe(true);
  }
  for (const run of runs.filter((r) => r.state === "crashed")) run.settle(false);
  await Promise.all(pending);
}

describe("claim mode under random interleavings (property)", () => {
  it("never overlaps runs, never acks without a run or commit, and runs every id once", async () => {
    await fc.assert(fc.asyncProperty(fc.array(action, { minLength: 1, maxLength: 60 }), check), { numRuns: 300 });
  });
});
