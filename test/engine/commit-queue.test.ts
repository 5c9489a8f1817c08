/**
 * The group-commit queue (src/engine/commit.ts) as a unit, on vitest's fake clock so each wait is
 * exact: entries of one turn share a step; the first entry lingers `lingerMs` only while others
 * run; `nudge` ends the linger when nobody runs; `hurry`/`drain` end it at once; a failed entry is
 * retried alone, 25 ms then 50 ms later, and its error is final after `retries`; a step that
 * throws fails all its entries. Steps are counted as the benchmark counts requests.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { COMMIT_RETRY_BASE_MS, StepQueue } from "../../src/engine/commit.js";
import { StoreUnavailableError } from "../../src/errors.js";
import type { EngineEvent } from "../../src/events.js";

interface Harness {
  queue: StepQueue<string>;
  steps: string[][];
  events: EngineEvent[];
  running: { value: boolean };
  /** Per value: how many more steps it fails in. */
  failures: Map<string, number>;
  settled: Map<string, unknown>;
  add(value: string): void;
}

function harness(options: { lingerMs?: number; retries?: number; run?: (values: readonly string[]) => Promise<unknown[]> } = {}): Harness {
  const steps: string[][] = [];
  const events: EngineEvent[] = [];
  const running = { value: false };
  const failures = new Map<string, number>();
  const settled = new Map<string, unknown>();
  const queue = new StepQueue<string>({
    step: "commit",
    retries: options.retries ?? 2,
    lingerMs: options.lingerMs ?? 0,
    othersRunning: () => running.value,
    emit: (event) => events.push(event),
    run:
      options.run ??
      (async (values) => {
        steps.push([...values]);
        return values.map((value) => {
          const left = failures.get(value) ?? 0;
          if (left === 0) return undefined;
          failures.set(value, left - 1);
          return new Error(`fail ${value}`);
        });
      }),
  });
  return {
    queue,
    steps,
    events,
    running,
    failures,
    settled,
    add: (value) => void queue.add(value).then((error) => settled.set(value, error)),
  };
}

beforeEach(() => {
  vi.useFakeTimers({ now: 1_000_000 });
});
afterEach(() => {
  vi.useRealTimers();
});

describe("StepQueue", () => {
  it("entries queued in one turn share one step; the next turn's entries the next step", async () => {
    const h = harness();
    h.add("a");
    h.add("b");
    await vi.advanceTimersByTimeAsync(0);
    h.add("c");
    await vi.advanceTimersByTimeAsync(0);
    expect(h.steps).toEqual([["a", "b"], ["c"]]);
    expect(h.queue.steps).toBe(2);
    expect([...h.settled]).toEqual([["a", undefined], ["b", undefined], ["c", undefined]]);
    expect(h.events).toEqual([
      { type: "store-step", step: "commit", ids: 2, durationMs: 0, ok: true },
      { type: "store-step", step: "commit", ids: 1, durationMs: 0, ok: true },
    ]);
  });

  it("lingers exactly lingerMs for company while others run, and takes all who came meanwhile", async () => {
    const h = harness({ lingerMs: 100 });
    h.running.value = true;
    h.add("a");
    await vi.advanceTimersByTimeAsync(60);
    h.add("b");
    await vi.advanceTimersByTimeAsync(39);
    expect(h.steps).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(h.steps).toEqual([["a", "b"]]);
  });

  it("does not linger when nobody else runs", async () => {
    const h = harness({ lingerMs: 100 });
    h.add("a");
    await vi.advanceTimersByTimeAsync(0);
    expect(h.steps).toEqual([["a"]]);
  });

  it("nudge ends the linger once nobody runs any more, and not before", async () => {
    const h = harness({ lingerMs: 100 });
    h.running.value = true;
    h.add("a");
    await vi.advanceTimersByTimeAsync(10);
    h.queue.nudge();
    await vi.advanceTimersByTimeAsync(0);
    expect(h.steps).toEqual([]);
    h.running.value = false;
    h.queue.nudge();
    await vi.advanceTimersByTimeAsync(0);
    expect(h.steps).toEqual([["a"]]);
    // The linger timer was disarmed: nothing more happens when it would have fired.
    await vi.advanceTimersByTimeAsync(200);
    expect(h.steps).toEqual([["a"]]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("hurry and drain end the linger at once", async () => {
    const h = harness({ lingerMs: 1_000 });
    h.running.value = true;
    h.add("a");
    h.queue.hurry();
    await vi.advanceTimersByTimeAsync(0);
    expect(h.steps).toEqual([["a"]]);

    const d = harness({ lingerMs: 1_000 });
    d.running.value = true;
    d.add("x");
    let drained = false;
    void d.queue.drain().then(() => (drained = true));
    await vi.advanceTimersByTimeAsync(2);
    expect([d.steps, drained, [...d.settled]]).toEqual([[["x"]], true, [["x", undefined]]]);
  });

  it("a failed entry is retried alone, 25 ms then 50 ms later; its error is final after `retries`", async () => {
    const h = harness({ retries: 2 });
    h.failures.set("bad", 5);
    h.add("good");
    h.add("bad");
    await vi.advanceTimersByTimeAsync(0);
    expect(h.steps).toEqual([["good", "bad"]]);
    expect(h.settled.get("good")).toBeUndefined();
    expect(h.settled.has("good")).toBe(true);
    await vi.advanceTimersByTimeAsync(COMMIT_RETRY_BASE_MS - 1);
    expect(h.steps).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(h.steps).toEqual([["good", "bad"], ["bad"]]);
    await vi.advanceTimersByTimeAsync(2 * COMMIT_RETRY_BASE_MS - 1);
    expect(h.steps).toHaveLength(2);
    expect(h.settled.has("bad")).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(h.steps).toEqual([["good", "bad"], ["bad"], ["bad"]]);
    expect((h.settled.get("bad") as Error).message).toBe("fail bad");
    await vi.advanceTimersByTimeAsync(1_000);
    expect(h.steps).toHaveLength(3);
    expect(h.events.map((e) => (e.type === "store-step" ? `step ${e.ids} ${e.ok}` : `error ${e.type === "store-error" ? e.ids : ""}`))).toEqual([
      "step 2 false",
      "error 1",
      "step 1 false",
      "error 1",
      "step 1 false",
      "error 1",
    ]);
    const firstError = h.events[1] as Extract<EngineEvent, { type: "store-error" }>;
    expect([firstError.step, (firstError.error as Error).message]).toEqual(["commit", "fail bad"]);
  });

  it("a retry that succeeds resolves without error; with no retries the first error is final", async () => {
    const h = harness({ retries: 2 });
    h.failures.set("flaky", 1);
    h.add("flaky");
    await vi.advanceTimersByTimeAsync(COMMIT_RETRY_BASE_MS);
    expect(h.steps).toEqual([["flaky"], ["flaky"]]);
    expect([...h.settled]).toEqual([["flaky", undefined]]);

    const none = harness({ retries: 0 });
    none.failures.set("bad", 1);
    none.add("bad");
    await vi.advanceTimersByTimeAsync(0);
    expect((none.settled.get("bad") as Error).message).toBe("fail bad");
    expect(none.steps).toEqual([["bad"]]);
  });

  it("an entry whose error says the store is overloaded is final at once: no retry adds to the overload", async () => {
    const overloaded = new StoreUnavailableError("DurableObjectStore", "commit", "Error (overloaded)", { overloaded: true });
    const busy = new StoreUnavailableError("DurableObjectStore", "commit", "Error");
    const steps: string[][] = [];
    const h = harness({
      retries: 2,
      run: async (values) => {
        steps.push([...values]);
        return values.map((value) => (value === "hot" ? overloaded : value === "busy" ? busy : undefined));
      },
    });
    h.add("hot");
    h.add("busy");
    h.add("fine");
    await vi.advanceTimersByTimeAsync(1_000);
    expect(steps).toEqual([["hot", "busy", "fine"], ["busy"], ["busy"]]);
    expect(h.settled.get("hot")).toBe(overloaded);
    expect(h.settled.get("busy")).toBe(busy);
    expect(h.settled.has("fine")).toBe(true);
    expect(h.settled.get("fine")).toBeUndefined();
  });

  it("an entry that arrives while another waits for its retry goes at once, without it", async () => {
    const h = harness({ retries: 1 });
    h.failures.set("bad", 1);
    h.add("bad");
    await vi.advanceTimersByTimeAsync(10);
    h.add("new");
    await vi.advanceTimersByTimeAsync(0);
    expect(h.steps).toEqual([["bad"], ["new"]]);
    await vi.advanceTimersByTimeAsync(COMMIT_RETRY_BASE_MS - 10);
    expect(h.steps).toEqual([["bad"], ["new"], ["bad"]]);
  });

  it("entries waiting for retries wake at the earliest one's time", async () => {
    const h = harness({ retries: 3 });
    h.failures.set("a", 2);
    h.add("a");
    await vi.advanceTimersByTimeAsync(0);
    await vi.advanceTimersByTimeAsync(COMMIT_RETRY_BASE_MS);
    // a waits 50 ms now (its second retry); b fails once at t=25 and waits 25 ms, until t=50.
    h.failures.set("b", 1);
    h.add("b");
    await vi.advanceTimersByTimeAsync(0);
    expect(h.steps).toEqual([["a"], ["a"], ["b"]]);
    await vi.advanceTimersByTimeAsync(COMMIT_RETRY_BASE_MS);
    expect(h.steps).toEqual([["a"], ["a"], ["b"], ["b"]]);
    await vi.advanceTimersByTimeAsync(COMMIT_RETRY_BASE_MS);
    expect(h.steps).toEqual([["a"], ["a"], ["b"], ["b"], ["a"]]);
    expect([...h.settled]).toEqual([["b", undefined], ["a", undefined]]);
  });

  it("a step that throws fails every entry in it with that error", async () => {
    const boom = new Error("down");
    const h = harness({ retries: 0, run: async () => { throw boom; } });
    h.add("a");
    h.add("b");
    await vi.advanceTimersByTimeAsync(0);
    expect([...h.settled]).toEqual([["a", boom], ["b", boom]]);
    expect(h.events).toEqual([
      { type: "store-step", step: "commit", ids: 2, durationMs: 0, ok: false },
      { type: "store-error", step: "commit", ids: 2, error: boom },
    ]);
  });

  it("measures the step's duration", async () => {
    const h = harness({ run: async (values) => { await new Promise((r) => setTimeout(r, 30)); return values.map(() => undefined); } });
    h.add("a");
    await vi.advanceTimersByTimeAsync(30);
    expect(h.events).toEqual([{ type: "store-step", step: "commit", ids: 1, durationMs: 30, ok: true }]);
  });

  it("drain waits for entries still to be retried, and resolves at once when there is nothing", async () => {
    const h = harness({ retries: 1 });
    let empty = false;
    void h.queue.drain().then(() => (empty = true));
    await vi.advanceTimersByTimeAsync(0);
    expect(empty).toBe(true);
    h.failures.set("a", 1);
    h.add("a");
    let drained = false;
    void h.queue.drain().then(() => (drained = true));
    await vi.advanceTimersByTimeAsync(COMMIT_RETRY_BASE_MS - 1);
    expect(drained).toBe(false);
    await vi.advanceTimersByTimeAsync(2);
    expect([drained, [...h.settled]]).toEqual([true, [["a", undefined]]]);
  });
});
