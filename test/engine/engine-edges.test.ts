/**
 * Small engine rules pinned at their edges, as units: the round-trip estimate's window (exactly
 * the last 8 steps; a 0 ms step is a real one), the adaptive linger's switch from the first probe
 * to the expected finish at the second finish, the commit queue's timer (a fixed linger starts
 * afresh after each idle spell; a step that starts early leaves no timer armed to cut the next
 * linger short), the first error of a failed step, and the engine's name in the error for an
 * option it does not have.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { StepQueue, type StepQueueOptions } from "../../src/engine/commit.js";
import type { EngineEvent } from "../../src/events.js";
import { BatchEngine } from "../../src/engine/index.js";
import { FIRST_PROBE_MS, RoundTrips, lingerMs } from "../../src/engine/linger.js";
import { InvalidOptionError } from "../../src/errors.js";
import { InMemoryStore } from "../../src/memory-store.js";
import { caught } from "../support/caught.js";

describe("RoundTrips, at its edges", () => {
  it("keeps exactly the last 8 steps: the 9th pushes out the first", () => {
    const trips = new RoundTrips();
    trips.add(1);
    for (let i = 0; i < 7; i += 1) trips.add(10);
    expect(trips.estimateMs).toBe(1);
    trips.add(10);
    expect(trips.estimateMs).toBe(10);
  });

  it("a step that took 0 ms (a store in memory) is a sample: nothing to save by lingering", () => {
    const trips = new RoundTrips();
    trips.add(5);
    trips.add(0);
    expect(trips.estimateMs).toBe(0);
  });
});

describe("lingerMs at the second finish", () => {
  it("two finishes are enough to expect the next one (no more probing)", () => {
    // Finishes 2 ms apart: the next is expected at 1_000 + 2 + 1, later than the probe would end.
    expect(lingerMs(1_000, 1_000, 12, { count: 2, last: 1_000, previous: 998 })).toBe(3);
    expect(lingerMs(1_000, 1_000, 12, { count: 1, last: 1_000, previous: 0 })).toBe(FIRST_PROBE_MS);
    // And a next finish expected past the budget means now, where a probe would still wait.
    expect(lingerMs(1_000, 1_000, 12, { count: 2, last: 1_000, previous: 980 })).toBe(0);
  });
});

describe("the commit queue's timer, spell after spell", () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: 1_000_000 });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  /** A queue with a fixed 100 ms linger; each step's values and when it came (ms after the start). */
  function lingering(running: { value: boolean }, over: Partial<StepQueueOptions<string>> = {}) {
    const steps: [string[], number][] = [];
    const queue = new StepQueue<string>({
      step: "commit",
      retries: 0,
      lingerMs: 100,
      othersRunning: () => running.value,
      run: async (values) => {
        steps.push([[...values], Date.now() - 1_000_000]);
        return undefined;
      },
      ...over,
    });
    return { queue, steps };
  }

  /** Adds `value` now and checks its step comes at `at`, its full 100 ms linger later: not 1 ms sooner. */
  async function expectFullLinger(queue: StepQueue<string>, steps: [string[], number][], value: string, at: number) {
    const before = [...steps];
    void queue.add(value);
    await vi.advanceTimersByTimeAsync(99);
    expect(steps).toEqual(before);
    await vi.advanceTimersByTimeAsync(1);
    expect(steps).toEqual([...before, [[value], at]]);
  }

  it("a step started early by a nudge leaves no timer armed: the next entry lingers its own full time", async () => {
    const running = { value: true };
    const { queue, steps } = lingering(running);
    void queue.add("a");
    await vi.advanceTimersByTimeAsync(10);
    running.value = false;
    queue.nudge();
    await vi.advanceTimersByTimeAsync(0);
    expect(steps).toEqual([[["a"], 10]]);
    running.value = true;
    await vi.advanceTimersByTimeAsync(40);
    // a's linger would have ended at 100; b's own runs to 150.
    await expectFullLinger(queue, steps, "b", 150);
  });

  it("a failed step reports its first error, and how many of its entries failed", async () => {
    const events: EngineEvent[] = [];
    const first = new Error("first");
    const { queue } = lingering(
      { value: false },
      { emit: (event) => void events.push(event), run: async () => [undefined, first, new Error("second")] },
    );
    const errors = Promise.all(["a", "b", "c"].map((value) => queue.add(value)));
    await vi.advanceTimersByTimeAsync(0);
    expect((await errors).map((error) => (error as Error | undefined)?.message)).toEqual([undefined, "first", "second"]);
    expect(events.filter((e) => e.type === "store-error")).toEqual([{ type: "store-error", step: "commit", ids: 2, error: first }]);
  });

  it("the first entry after an idle spell lingers the full time again: the end of one linger is no lasting hurry", async () => {
    const { queue, steps } = lingering({ value: true });
    void queue.add("a");
    await vi.advanceTimersByTimeAsync(150);
    expect(steps).toEqual([[["a"], 100]]);
    await expectFullLinger(queue, steps, "b", 250);
  });
});

describe("the engine's own options", () => {
  it("an unknown option is refused in BatchEngine's name, with the option it probably meant", () => {
    const error = caught(() => new BatchEngine(new InMemoryStore(), () => undefined, { concurency: 2 } as never));
    expect(error).toBeInstanceOf(InvalidOptionError);
    expect((error as InvalidOptionError).option).toBe("concurency");
    expect((error as Error).message).toBe('option "concurency" is not an option of BatchEngine (did you mean "concurrency"?)');
  });
});
