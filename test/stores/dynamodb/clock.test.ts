/**
 * The service-clock estimator of DynamoDBStore (stores/dynamodb/clock.ts), without a backend: a
 * simulated service whose `Date` header is its clock truncated to the second, reached over requests
 * of random latency from a local clock that is off by a known amount (0, ±30 s, ±10 min).
 * Properties: the true offset is always inside the bounds; the bounds narrow to about one round
 * trip once answers straddle a second boundary; they widen with the drift allowance while idle; a
 * step of either clock is survived (an empty intersection resets, a local step is seen through the
 * monotonic clock); answers without a usable Date teach nothing (and a store that never gets one
 * falls back to its local clock). The store's side (DynamoDB Local) is in skew.test.ts.
 */
import { describe, expect, it } from "vitest";
import { MAX_LEASE_EXCESS_MS, type Win, winCheck } from "../../../stores/dynamodb/claim.js";
import type { Item } from "../../../stores/dynamodb/items.js";
import {
  COLD_START_PAD_MS,
  CLOCK_STEP_TOLERANCE_MS,
  type CommandWithStack,
  DATE_RESOLUTION_MS,
  ServiceClock,
  parseHttpDate,
  sampledBy,
} from "../../../stores/dynamodb/clock.js";

/** A local clock and a monotonic clock that move together, unless a test steps the local one. */
class Clocks {
  local = 1_767_225_600_000 + 123;
  mono = 5_000;
  advance(ms: number): void {
    this.local += ms;
    this.mono += ms;
  }
}

/** Deterministic pseudo-random numbers (a test must be reproducible). */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state * 1_664_525 + 1_013_904_223) >>> 0;
    return state / 2 ** 32;
  };
}

const httpDate = (ms: number) => new Date(Math.floor(ms / DATE_RESOLUTION_MS) * DATE_RESOLUTION_MS).toUTCString();

/** One request: `up` ms to the service, which stamps its clock (local + offset), `down` ms back. */
function request(clock: ServiceClock, clocks: Clocks, offset: number, up: number, down: number): void {
  const sentAt = clocks.local;
  clocks.advance(up);
  const stamp = httpDate(clocks.local + offset);
  clocks.advance(down);
  clock.observe(sentAt, clocks.local, stamp);
}

/** `count` requests of 3 ms each way, `gapMs` apart, to a service whose clock agrees with the local one. */
function steadyRequests(clock: ServiceClock, clocks: Clocks, count: number, gapMs: number): void {
  for (let i = 0; i < count; i += 1) {
    request(clock, clocks, 0, 3, 3);
    clocks.advance(gapMs);
  }
}

function make(clocks: Clocks, driftPpm?: number): ServiceClock {
  return new ServiceClock({ now: () => clocks.local, monotonic: () => clocks.mono, ...(driftPpm === undefined ? {} : { driftPpm }) });
}

describe("ServiceClock", () => {
  it("knows nothing before the first answer: conditions see no lease as ended, deadlines are padded", () => {
    const clocks = new Clocks();
    const clock = make(clocks);
    expect(clock.offset()).toBeUndefined();
    expect(clock.conditionNow()).toBe(0);
    expect(clock.deadlineBase()).toBe(clocks.local + COLD_START_PAD_MS);
    expect(clock.earliest()).toBe(clocks.local);
    expect(clock.samples).toBe(0);
    expect(clock.generation).toBe(0);
  });

  it("bounds the offset by one answer: D − received ≤ offset < D + 1 s − sent", () => {
    const clocks = new Clocks();
    const clock = make(clocks);
    const sentAt = clocks.local;
    clocks.advance(4);
    const stamp = clocks.local + 30_000; // service 30 s ahead
    clocks.advance(6);
    clock.observe(sentAt, clocks.local, httpDate(stamp));
    const server = Math.floor(stamp / 1000) * 1000;
    expect(clock.offset(clocks.local)).toEqual({ min: server - clocks.local, max: server + 1000 - sentAt });
    expect(clock.conditionNow()).toBe(Math.floor(clocks.local + server - clocks.local));
    expect(clock.deadlineBase()).toBe(Math.ceil(clocks.local + server + 1000 - sentAt));
  });

  for (const skew of [0, 30_000, -30_000, 600_000, -600_000]) {
    it(`always holds the true offset, and narrows to about a round trip (local clock off by ${skew / 1000} s)`, () => {
      const clocks = new Clocks();
      const clock = make(clocks);
      const next = random(1000 + skew);
      const offset = -skew; // service − local
      let narrowest = Number.POSITIVE_INFINITY;
      for (let i = 0; i < 400; i += 1) {
        request(clock, clocks, offset, 1 + next() * 8, 1 + next() * 8);
        const bounds = clock.offset() as { min: number; max: number };
        expect(bounds.min, `sample ${i}`).toBeLessThanOrEqual(offset);
        expect(bounds.max, `sample ${i}`).toBeGreaterThanOrEqual(offset);
        narrowest = Math.min(narrowest, bounds.max - bounds.min);
        clocks.advance(next() * 40);
      }
      // 400 requests over ~12 s straddle many second boundaries: the width is about one round trip.
      expect(narrowest).toBeLessThan(20);
      const end = clock.offset() as { min: number; max: number };
      expect(end.max - end.min).toBeLessThan(30);
      // The conditions' `:now` is never ahead of the service; deadlines never start before it.
      expect(clock.conditionNow()).toBeLessThanOrEqual(clocks.local + offset);
      expect(clock.deadlineBase()).toBeGreaterThanOrEqual(clocks.local + offset);
    });
  }

  it("widens by the drift allowance while idle (200 ppm by default), both ways", () => {
    const clocks = new Clocks();
    const clock = make(clocks);
    const next = random(7);
    for (let i = 0; i < 200; i += 1) {
      request(clock, clocks, 0, 2 + next() * 3, 2 + next() * 3);
      clocks.advance(next() * 30);
    }
    const fresh = clock.offset() as { min: number; max: number };
    clocks.advance(3_600_000);
    const hourLater = clock.offset() as { min: number; max: number };
    expect(fresh.min - hourLater.min).toBeCloseTo(720, 0);
    expect(hourLater.max - fresh.max).toBeCloseTo(720, 0);
    const strict = make(clocks, 10);
    request(strict, clocks, 0, 3, 3);
    const before = strict.offset() as { min: number; max: number };
    const after = strict.offset(clocks.local + 1_000_000) as { min: number; max: number };
    expect(after.max - before.max).toBeCloseTo(10, 0);
  });

  it("survives a step of the service's clock: the contradicting answer resets the estimate to itself", () => {
    const clocks = new Clocks();
    const clock = make(clocks);
    steadyRequests(clock, clocks, 100, 37);
    // One start (the first answer); the 99 answers that agreed with it kept it.
    expect(clock.generation).toBe(1);
    request(clock, clocks, 5_000, 3, 3);
    expect(clock.generation).toBe(2);
    const bounds = clock.offset() as { min: number; max: number };
    expect(bounds.min).toBeLessThanOrEqual(5_000);
    expect(bounds.max).toBeGreaterThanOrEqual(5_000);
    expect(bounds.max - bounds.min).toBeLessThanOrEqual(DATE_RESOLUTION_MS + 6);
  });

  it("drops the estimate when the local clock steps (seen against the monotonic clock), and relearns", () => {
    const clocks = new Clocks();
    const clock = make(clocks);
    steadyRequests(clock, clocks, 60, 41);
    expect(clock.offset()).toBeDefined();
    clocks.local += CLOCK_STEP_TOLERANCE_MS - 10; // under the tolerance: kept
    expect(clock.offset()).toBeDefined();
    expect(clock.generation).toBe(1);
    clocks.local += 30_000; // NTP stepped the clock 30 s: the old offset is wrong by 30 s
    expect(clock.generation).toBe(2);
    expect(clock.offset()).toBeUndefined();
    expect(clock.conditionNow()).toBe(0);
    request(clock, clocks, -30_000 - (CLOCK_STEP_TOLERANCE_MS - 10), 3, 3);
    const bounds = clock.offset() as { min: number; max: number };
    expect(bounds.min).toBeLessThanOrEqual(-30_090);
    expect(bounds.max).toBeGreaterThanOrEqual(-30_090);
  });

  it("learns nothing from an answer without a usable Date, a cached one (Age), or a local clock gone back", () => {
    const clocks = new Clocks();
    const clock = make(clocks);
    clock.observe(clocks.local, clocks.local + 5, httpDate(clocks.local), "12");
    expect(clock.offset()).toBeUndefined();
    clock.observe(clocks.local, clocks.local - 5, httpDate(clocks.local));
    expect(clock.offset()).toBeUndefined();
    // No Date at all (an emulator that sends none): the local clock, offset 0, is all there is.
    clock.observe(clocks.local, clocks.local + 5, undefined);
    expect(clock.offset()).toEqual({ min: 0, max: 0 });
    expect(clock.samples).toBe(0);
    expect(clock.generation).toBe(1);
    clock.observe(clocks.local, clocks.local + 5, undefined);
    expect(clock.generation).toBe(1);
    // A Date later on is used.
    request(clock, clocks, 60_000, 3, 3);
    expect((clock.offset() as { min: number }).min).toBeGreaterThan(58_000);
    // Once known, a dateless answer changes nothing.
    const known = clock.offset();
    clock.observe(clocks.local, clocks.local + 5, "Thu, 03 Dec 2026 14:06:18 GMT, Thu, 03 Dec 2026 14:06:18 GMT");
    expect(clock.offset()).toEqual(known);
    expect(clock.generation).toBe(2);
    clock.reset();
    expect(clock.offset()).toBeUndefined();
    expect(clock.generation).toBe(3);
  });

  it("parses IMF-fixdate only", () => {
    expect(parseHttpDate("Thu, 03 Dec 2026 14:06:18 GMT")).toBe(Date.UTC(2026, 11, 3, 14, 6, 18));
    expect(parseHttpDate(" Thu, 03 Dec 2026 14:06:18 GMT ")).toBe(Date.UTC(2026, 11, 3, 14, 6, 18));
    for (const bad of [undefined, "", "yesterday", "2026-12-03T14:06:18Z", "Thu, 03 Dec 2026 14:06:18 GMT, Thu, 03 Dec 2026 14:06:18 GMT", "Thu, 31 Feb 2026 99:99:99 GMT"]) {
      expect(parseHttpDate(bad), String(bad)).toBeUndefined();
    }
  });
});

describe("winCheck: a won claim, checked against the estimate its answer refined", () => {
  const LEASE = 30_000;

  /** The put a claim builds now (claim.ts reads these three in its build), answered `roundTripMs` later. */
  function win(clock: ServiceClock, clocks: Clocks, offset: number, roundTripMs: number, replaced?: Item): Win {
    const sentAt = clocks.local;
    const built = { sentAt, leaseMs: LEASE, generation: clock.generation, leaseUntil: clock.deadlineBase() + LEASE, replaced };
    request(clock, clocks, offset, roundTripMs / 2, roundTripMs / 2);
    return built;
  }

  it("keeps every win of a standing estimate, however slow the answer (the corrections CI saw)", () => {
    const next = random(42);
    let trap = 0;
    for (let trial = 0; trial < 500; trial += 1) {
      const clocks = new Clocks();
      clocks.advance(Math.floor(next() * 100_000));
      const clock = make(clocks);
      steadyRequests(clock, clocks, 300, 7);
      clocks.advance(Math.floor(next() * 20_000));
      const roundTrip = 50 + Math.floor(next() * 3_000);
      const put = win(clock, clocks, 0, roundTrip);
      expect(clock.generation, `trial ${trial}`).toBe(put.generation);
      expect(winCheck(clock, put), `trial ${trial}: ${roundTrip} ms`).toEqual({ action: "keep" });
      // The lease is long enough: the true offset is 0, so DynamoDB read at most the answer's time when it decided.
      expect(put.leaseUntil).toBeGreaterThanOrEqual(put.sentAt + LEASE);
      // The trap: the refined bounds, read back at the send time, are widened for drift on both sides.
      const refined = clock.offset(put.sentAt) as { max: number };
      if (Math.ceil(put.sentAt + refined.max) + LEASE > put.leaseUntil) trap += 1;
    }
    // Re-checking against them (what claims did before) would have rewritten this many leases.
    expect(trap).toBeGreaterThan(100);
  });

  it("rewrites a lease written more than 2 s too long from a standing but wide estimate", () => {
    const clocks = new Clocks();
    const clock = make(clocks);
    // One slow first answer (4.4 s): the estimate is about 5.4 s wide, its latest reading more than 2.2 s out.
    request(clock, clocks, 0, 2_200, 2_200);
    // The next answers straddle a second boundary and narrow it to a few ms.
    clocks.advance(500);
    const put = win(clock, clocks, 0, 6);
    steadyRequests(clock, clocks, 300, 7);
    const check = winCheck(clock, put);
    expect(check.action).toBe("rewrite");
    if (check.action !== "rewrite") return;
    expect(put.leaseUntil - check.leaseUntil).toBeGreaterThan(MAX_LEASE_EXCESS_MS);
    expect(check.leaseUntil).toBeGreaterThanOrEqual(put.sentAt + LEASE);
    expect(check.leaseUntil).toBeLessThanOrEqual(put.sentAt + LEASE + 50);
  });

  it("checks a cold start's lease against the first answer: short on a host 30 s behind, rewritten; right on a synchronised one, kept", () => {
    const behind = new Clocks();
    const cold = make(behind);
    const put = win(cold, behind, 30_000, 10);
    expect(cold.generation).not.toBe(put.generation);
    const check = winCheck(cold, put);
    expect(check).toMatchObject({ action: "rewrite" });
    if (check.action === "rewrite") expect(check.leaseUntil).toBeGreaterThanOrEqual(put.sentAt + 30_000 + LEASE);
    const synced = new Clocks();
    const fresh = make(synced);
    expect(winCheck(fresh, win(fresh, synced, 0, 10))).toEqual({ action: "keep" });
  });

  it("gives back an item it replaced that was live by an estimate that started over during the flight (the service's clock stepped)", () => {
    const clocks = new Clocks();
    const clock = make(clocks);
    steadyRequests(clock, clocks, 300, 7);
    // Ended 1 s ago by the estimate the put was built from; live 59 s more by the service's clock, stepped back 60 s.
    const replaced: Item = { status: { S: "in-flight" }, leaseUntil: { N: String(clocks.local - 1_000) }, token: { S: "t-old" } };
    const put = win(clock, clocks, -60_000, 10, replaced);
    expect(clock.generation).not.toBe(put.generation);
    expect(winCheck(clock, put)).toEqual({ action: "give-back", replaced });
    // The same answer from a standing estimate: the put's own condition already showed the item ended.
    const steady = new Clocks();
    const calm = make(steady);
    steadyRequests(calm, steady, 300, 7);
    const ended: Item = { status: { S: "in-flight" }, leaseUntil: { N: String(steady.local - 1_000) }, token: { S: "t-old" } };
    expect(winCheck(calm, win(calm, steady, 0, 10, ended))).toEqual({ action: "keep" });
  });

  it("keeps a win over an item whose lease ended exactly at the put's own :now (the condition proved it), even answered in 3 s", () => {
    const clocks = new Clocks();
    const clock = make(clocks);
    steadyRequests(clock, clocks, 300, 7);
    // `#l <= :now` let the put replace it; read back at the send time, the refined bounds' earliest is
    // about 1.2 ms before that :now (drift counted twice over 3 s), so the item would look live there.
    const replaced: Item = { status: { S: "in-flight" }, leaseUntil: { N: String(clock.conditionNow()) }, token: { S: "t-old" } };
    const put = win(clock, clocks, 0, 3_000, replaced);
    expect(clock.generation).toBe(put.generation);
    expect(winCheck(clock, put)).toEqual({ action: "keep" });
  });

  it("after a start-over, gives back only what the new estimate shows live: a forward step of the service's clock rewrites instead", () => {
    const clocks = new Clocks();
    const clock = make(clocks);
    steadyRequests(clock, clocks, 300, 7);
    const replaced: Item = { status: { S: "in-flight" }, leaseUntil: { N: String(clocks.local - 1_000) }, token: { S: "t-old" } };
    // DynamoDB's clock stepped 60 s ahead: the item ended 61 s ago by it, but the lease written is 60 s short.
    const put = win(clock, clocks, 60_000, 10, replaced);
    const check = winCheck(clock, put);
    expect(check.action).toBe("rewrite");
    if (check.action === "rewrite") expect(check.leaseUntil).toBeGreaterThanOrEqual(put.sentAt + 60_000 + LEASE);
  });

  it("a local step after the answer on a host 30 s behind: the lease written on the estimate is kept, never cut to the local clock", () => {
    const clocks = new Clocks();
    const clock = make(clocks);
    for (let i = 0; i < 300; i += 1) {
      request(clock, clocks, 30_000, 3, 3);
      clocks.advance(7);
    }
    const put = win(clock, clocks, 30_000, 10);
    // Right by DynamoDB's clock: about 30 s past the local one.
    expect(put.leaseUntil).toBeGreaterThanOrEqual(put.sentAt + 30_000 + LEASE);
    clocks.local += 30_000; // NTP steps the host forward: the estimate is dropped
    expect(clock.offset()).toBeUndefined();
    expect(winCheck(clock, put)).toEqual({ action: "keep" });
    // An item it replaced is given back: whether it was live is unknown without the estimate.
    const replacedClocks = new Clocks();
    const other = make(replacedClocks);
    steadyRequests(other, replacedClocks, 300, 7);
    const replaced: Item = { status: { S: "in-flight" }, leaseUntil: { N: String(replacedClocks.local - 5_000) }, token: { S: "t-old" } };
    const over = win(other, replacedClocks, 0, 10, replaced);
    replacedClocks.local -= 30_000;
    expect(other.offset()).toBeUndefined();
    expect(winCheck(other, over)).toEqual({ action: "give-back", replaced });
  });

  it("a local step after the answer on a host 30 s ahead: a lease short by the local clock is lengthened to it", () => {
    const clocks = new Clocks();
    const clock = make(clocks);
    for (let i = 0; i < 300; i += 1) {
      request(clock, clocks, -30_000, 3, 3);
      clocks.advance(7);
    }
    const put = win(clock, clocks, -30_000, 10);
    clocks.local -= 30_000;
    expect(clock.offset()).toBeUndefined();
    expect(winCheck(clock, put)).toEqual({ action: "rewrite", leaseUntil: Math.ceil(put.sentAt) + LEASE });
  });

  it("a local step right after the answer drops the estimate: the lease is checked against the local clock, and kept", () => {
    const clocks = new Clocks();
    const clock = make(clocks);
    steadyRequests(clock, clocks, 300, 7);
    const put = win(clock, clocks, 0, 10);
    clocks.local += 30_000;
    expect(clock.offset()).toBeUndefined();
    expect(clock.generation).not.toBe(put.generation);
    expect(winCheck(clock, put)).toEqual({ action: "keep" });
  });

  it("keeps a lease at both edges of what the answer allows: exactly as long as needed, and exactly 2 s over", () => {
    // Without drift, every bound is a whole ms and the edges can be hit exactly.
    const cold = new Clocks();
    cold.advance(1_000 - (cold.local % 1_000) + 500); // the local clock at x.500 s
    const fresh = make(cold, 0);
    // Cold: written 1.5 s out. Stamped 600 ms later, at x+1.1 s, which its Date truncates to x+1 s, the answer shows a latest of exactly +1.5 s.
    const exact = win(fresh, cold, 0, 1_200);
    expect(fresh.offset(exact.sentAt)?.max).toBe(COLD_START_PAD_MS);
    expect(winCheck(fresh, exact)).toEqual({ action: "keep" });
    const wide = new Clocks();
    wide.advance(1_000 - (wide.local % 1_000)); // x.000 s
    const clock = make(wide, 0);
    request(clock, wide, 0, 2_500, 0); // latest: +3 s
    wide.advance(500); // x.000 s again
    const put = win(clock, wide, 0, 20); // stamped within the same second: latest +1 s
    expect(clock.generation).toBe(put.generation);
    expect(put.leaseUntil - (put.sentAt + 1_000 + LEASE)).toBe(MAX_LEASE_EXCESS_MS);
    expect(winCheck(clock, put)).toEqual({ action: "keep" });
  });
});

describe("sampledBy", () => {
  /** A command's middleware stack, as far as sampledBy touches it. */
  function fakeCommand() {
    const added: { middleware: Parameters<CommandWithStack["middlewareStack"]["add"]>[0]; options: unknown }[] = [];
    const command: CommandWithStack = { middlewareStack: { add: (middleware, options) => void added.push({ middleware, options }) } };
    return { command, added };
  }

  it("adds ONE middleware to the command, below the deserializer, that samples every attempt's raw answer", async () => {
    const clocks = new Clocks();
    const clock = make(clocks);
    const { command, added } = fakeCommand();
    sampledBy(command, clock);
    sampledBy(command, clock);
    expect(added).toHaveLength(1);
    expect(added[0]?.options).toEqual({ step: "deserialize", priority: "low", name: "babelqueueServiceClock" });
    const handler = added[0]?.middleware(async () => {
      clocks.advance(10);
      // A failed condition's raw answer (status 400) carries the Date too: the middleware sees it before the deserializer throws.
      return { response: { statusCode: 400, headers: { Date: httpDate(clocks.local + 120_000) } } };
    });
    await handler?.({});
    const bounds = clock.offset() as { min: number; max: number };
    expect(bounds.min).toBeGreaterThan(118_000);
    expect(bounds.max).toBeLessThanOrEqual(121_000);
    // An answer without headers (a transport that gives none) passes through untouched.
    const bare = fakeCommand();
    sampledBy(bare.command, clock);
    const result = await bare.added[0]?.middleware(async () => ({ response: undefined }))({});
    expect(result).toEqual({ response: undefined });
  });
});
