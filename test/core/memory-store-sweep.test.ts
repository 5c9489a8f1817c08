/**
 * src/memory-store.ts, the sweep's bound: after a sweep, the store remembers the earliest end of what
 * it kept (not the last one it looked at), so the next sweep after that end frees the entry.
 */
import { describe, expect, it } from "vitest";
import { InMemoryStore } from "../../src/memory-store.js";

describe("InMemoryStore sweep", () => {
  it("keeps the earliest end among the entries a sweep leaves, whatever their order", async () => {
    let clock = 0;
    const store = new InMemoryStore({ now: () => clock });
    await store.claim("ends-at-10", 10);
    await store.claim("ends-at-50", 50);
    await store.claim("ends-at-100", 100);
    await store.claim("ends-at-70", 70);
    clock = 20;
    // This sweep frees the first lease and keeps three, the earliest of which ends at 50.
    expect(store.size).toBe(3);
    clock = 60;
    expect(store.size).toBe(2);
    expect(store.held).toBe(2);
    clock = 80;
    expect(store.size).toBe(1);
    expect(await store.inspect("ends-at-100")).toMatchObject({ status: "in-flight", leaseLeftMs: 20 });
  });
});
