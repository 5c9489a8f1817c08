import { describe, expect, it } from "vitest";
import { InMemoryStore } from "../../src/memory-store.js";
import { InvalidOptionError } from "../../src/errors.js";
import { testStore } from "./contract.js";

let now = 1_700_000_000_000;

testStore("InMemoryStore (fake clock)", {
  claims: true,
  clock: "fake",
  make: (options) => new InMemoryStore({ ...options, now: () => now }),
  advance: (ms) => {
    now += ms;
  },
});

testStore("InMemoryStore (real clock)", {
  claims: true,
  clock: "real",
  make: (options) => new InMemoryStore(options),
});

describe("InMemoryStore specifics", () => {
  it("rejects bad options with a typed error", () => {
    expect(() => new InMemoryStore({ namespace: "a:b" })).toThrow(InvalidOptionError);
    expect(() => new InMemoryStore({ leaseMs: 0 })).toThrow(/leaseMs/);
    expect(() => new InMemoryStore({ retentionMs: Number.NaN })).toThrow(/retentionMs/);
  });

  it("sweeps expired entries so memory is bounded by the live ids", async () => {
    let clock = 0;
    const store = new InMemoryStore({ now: () => clock, retentionMs: 1_000, leaseMs: 1_000 });
    for (let i = 0; i < 5_000; i += 1) {
      await store.claim(`id-${i}`);
      if (i % 2 === 0) await store.remember(`id-${i}`);
      clock += 1;
    }
    clock += 2_000;
    expect(store.size).toBe(0);
  });

  it("sweeps on every 1,024th write, not before: expired entries stay held until then, live ones survive it", async () => {
    let clock = 0;
    const store = new InMemoryStore({ now: () => clock, leaseMs: 10, retentionMs: 1_000 });
    for (let i = 0; i < 1_000; i += 1) await store.claim(`old-${i}`);
    clock += 100;
    // All 1,000 leases ended, but nothing swept them yet (reads of other ids do not either).
    expect(await store.seen("absent")).toBe(false);
    expect(store.held).toBe(1_000);
    for (let i = 0; i < 23; i += 1) await store.remember(`new-${i}`);
    expect(store.held).toBe(1_023);
    // The 1,024th write sweeps: only the 24 live entries are left.
    await store.claim("new-23");
    expect(store.held).toBe(24);
    expect(await store.seen("new-0")).toBe(true);
    expect((await store.inspect("new-23"))?.status).toBe("in-flight");
    // Expiry is exact: an entry whose end is now is gone, one a millisecond short of it is not.
    clock += 9;
    expect(await store.inspect("new-23")).toMatchObject({ status: "in-flight", leaseLeftMs: 1 });
    clock += 1;
    expect(await store.inspect("new-23")).toBeNull();
    expect(store.size).toBe(23);
    expect(store.held).toBe(23);
  });

  it("a sweep still finds an entry that ends before everything it saw last time (the earliest end is kept per write)", async () => {
    let clock = 0;
    const store = new InMemoryStore({ now: () => clock, leaseMs: 10, retentionMs: 1_000_000 });
    // 1,024 long-lived writes: the sweep at the 1,024th finds nothing expired, and learns the earliest end is far off.
    for (let i = 0; i < 1_024; i += 1) await store.remember(`long-${i}`);
    expect(store.held).toBe(1_024);
    // A short lease written after that sweep ends first; once it has ended, the next sweep must find it.
    await store.claim("short");
    clock += 10;
    for (let i = 0; i < 1_022; i += 1) await store.remember(`long-${i}`);
    expect(store.held).toBe(1_025);
    await store.remember("long-0");
    expect(store.held).toBe(1_024);
    expect(await store.inspect("short")).toBeNull();
    // Nothing expired: a sweep changes nothing, and every id is still there.
    expect(store.size).toBe(1_024);
  });

  it("rejects a fingerprint that is not a string of 1-64 characters, and a fingerprint list of the wrong length", async () => {
    const store = new InMemoryStore();
    await expect(store.claim("a", undefined, "f".repeat(65))).rejects.toThrow(InvalidOptionError);
    await expect(store.claim("a", undefined, "")).rejects.toThrow(/fingerprint/);
    await expect(store.remember("a", 42 as unknown as string)).rejects.toThrow(/fingerprint/);
    await expect(store.claimMany(["a", "b"], undefined, ["x"])).rejects.toThrow(/fingerprints/);
    await expect(store.rememberMany(["a"], ["x", "y"])).rejects.toThrow(/fingerprints/);
    // Nothing was written by the rejected calls.
    expect(await store.inspect("a")).toBeNull();
    expect(await store.claim("a", undefined, "f".repeat(64))).toMatchObject({ status: "claimed" });
  });

  it("defaults to a 60 s lease and a 4-day retention", () => {
    const store = new InMemoryStore();
    expect(store.leaseMs).toBe(60_000);
    expect(store.retentionMs).toBe(4 * 24 * 3600 * 1000);
  });
});
