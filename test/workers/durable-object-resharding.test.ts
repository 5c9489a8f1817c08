/**
 * Changing a DurableObjectStore's shard count on a live deployment (stores/durable-object/placement.ts),
 * inside workerd: 10,000 ids remembered under the old count and redelivered under the new one run
 * no effect again inside the migration window (and the same redelivery without the window is shown
 * running many of them again); claims made while adjacent configurations run side by side never have
 * two winners; what the window commits is found by the configuration after it.
 *
 * Effects are counted by the engine's handler, per id, in this test's memory.
 */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { BatchClaim } from "../../src/contract.js";
import { BatchEngine } from "../../src/engine/index.js";
import { storeKey } from "../../src/store-kit/keys.js";
import { DurableObjectStore, type DurableObjectStoreOptions } from "../../stores/durable-object/store.js";

const IDS = 10_000;
const BATCH = 100;

const envelope = (id: string) => JSON.stringify({ job: "urn:test:job", trace_id: "t", data: { id }, meta: { id, schema_version: 1 }, attempts: 0 });

/** Runs `ids` through the engine in batches of 100 (redeliveries when `redelivered`), counting effects per id. */
async function deliver(store: DurableObjectStore, ids: readonly string[], effects: Map<string, number>, redelivered = false) {
  const engine = new BatchEngine(store, (_message: unknown, ctx: { key?: string }) => {
    const id = ctx.key ?? "";
    effects.set(id, (effects.get(id) ?? 0) + 1);
  });
  const statuses = new Map<string, number>();
  for (let i = 0; i < ids.length; i += BATCH) {
    const batch = ids.slice(i, i + BATCH);
    const results = await engine.process(batch.map((id) => ({ body: envelope(id), redeliveries: redelivered ? 1 : 0, context: {} })));
    for (const result of results) statuses.set(result.status, (statuses.get(result.status) ?? 0) + 1);
  }
  return Object.fromEntries(statuses);
}

const total = (effects: Map<string, number>) => [...effects.values()].reduce((a, b) => a + b, 0);

/** How many of `ids` change object between the two counts. */
async function movedCount(store: DurableObjectStore, ids: readonly string[]): Promise<number> {
  const keys = await Promise.all(ids.map((id) => storeKey(store.namespace, id, 512)));
  return keys.filter((key) => store.placementOf(key).previous !== undefined).length;
}

describe("DurableObjectStore: changing the shard count", () => {
  it(
    "10,000 ids remembered under 4 shards and redelivered under 6: none runs again inside the window, thousands do without it",
    async () => {
      const objectName = `reshard-${Date.now()}`;
      const ids = Array.from({ length: IDS }, (_, i) => `order-${i}`);
      const inFlight = Array.from({ length: 200 }, (_, i) => `held-${i}`);
      const base: DurableObjectStoreOptions = { objectName, leaseMs: 10 * 60_000 };
      const old = new DurableObjectStore(env.IDEMPOTENCY, { ...base, namespace: "grow", shards: 4 });
      const effects = new Map<string, number>();
      expect(await deliver(old, ids, effects)).toEqual({ ran: IDS });
      // 200 more are claimed under the old count and still running (their lease is live) when the count changes.
      const held = await old.claimMany(inFlight);
      expect(held.every((claim) => claim.status === "claimed")).toBe(true);

      const window = new DurableObjectStore(env.IDEMPOTENCY, { ...base, namespace: "grow", shards: 6, previousShards: 4 });
      const moved = await movedCount(window, ids);
      const redelivered = await deliver(window, ids, effects, true);
      expect(redelivered).toEqual({ duplicate: IDS });
      expect(total(effects)).toBe(IDS);
      // The ids still running under the old count are parked, not run.
      const heldAgain = await window.claimMany(inFlight);
      expect(heldAgain.map((claim) => claim.status)).toEqual(inFlight.map(() => "in-flight"));

      // The same history without the window (shards changed in place): every moved id runs again.
      const controlOld = new DurableObjectStore(env.IDEMPOTENCY, { ...base, namespace: "grow-control", shards: 4 });
      const controlEffects = new Map<string, number>();
      await deliver(controlOld, ids, controlEffects);
      const controlNew = new DurableObjectStore(env.IDEMPOTENCY, { ...base, namespace: "grow-control", shards: 6 });
      const controlMoved = await movedCount(new DurableObjectStore(env.IDEMPOTENCY, { ...base, namespace: "grow-control", shards: 6, previousShards: 4 }), ids);
      const control = await deliver(controlNew, ids, controlEffects, true);
      const ranAgain = total(controlEffects) - IDS;
      expect(ranAgain).toBe(controlMoved);
      expect(control.ran).toBe(controlMoved);
      console.log(
        `[do-reshard] 4 → 6 shards, ${IDS} remembered ids redelivered: with previousShards ${total(effects) - IDS} ran again (${moved} moved ids, 200 in flight parked); without it ${ranAgain} ran again`,
      );
    },
    180_000,
  );

  it("shrinking 6 → 3: remembered ids stay done, and what the window commits is found by the configuration after it", async () => {
    const objectName = `shrink-${Date.now()}`;
    const base: DurableObjectStoreOptions = { objectName, namespace: "shrink" };
    const ids = Array.from({ length: 1_000 }, (_, i) => `s-${i}`);
    const effects = new Map<string, number>();
    await deliver(new DurableObjectStore(env.IDEMPOTENCY, { ...base, shards: 6 }), ids, effects);
    const window = new DurableObjectStore(env.IDEMPOTENCY, { ...base, shards: 3, previousShards: 6 });
    expect(await movedCount(window, ids)).toBeGreaterThan(300);
    expect(await deliver(window, ids, effects, true)).toEqual({ duplicate: 1_000 });
    // New ids committed inside the window: both the old and the new configuration find them done.
    const fresh = Array.from({ length: 500 }, (_, i) => `w-${i}`);
    expect(await deliver(window, fresh, effects)).toEqual({ ran: 500 });
    expect(await deliver(new DurableObjectStore(env.IDEMPOTENCY, { ...base, shards: 6 }), fresh, effects, true)).toEqual({ duplicate: 500 });
    expect(await deliver(new DurableObjectStore(env.IDEMPOTENCY, { ...base, shards: 3 }), fresh, effects, true)).toEqual({ duplicate: 500 });
    expect(total(effects)).toBe(1_500);
    expect([...effects.values()].every((n) => n === 1)).toBe(true);
  }, 120_000);

  /**
   * `stores` claim every id at once (each store one claimMany of all ids, all in flight together);
   * answers how many ids got 0, 1 and more than 1 `claimed`.
   */
  async function race(stores: DurableObjectStore[], ids: string[]) {
    const answers: BatchClaim[][] = await Promise.all(stores.map((store) => store.claimMany(ids)));
    const winners = ids.map((_, i) => answers.filter((claims) => claims[i]?.status === "claimed").length);
    return { none: winners.filter((n) => n === 0).length, one: winners.filter((n) => n === 1).length, two: winners.filter((n) => n > 1).length };
  }

  it("claims while adjacent configurations run side by side never have two winners; the forbidden jump does", async () => {
    const objectName = `race-${Date.now()}`;
    const make = (namespace: string, shards: number, previousShards?: number) =>
      new DurableObjectStore(env.IDEMPOTENCY, {
        objectName,
        namespace,
        shards,
        ...(previousShards === undefined ? {} : { previousShards }),
      });
    const ids = Array.from({ length: 300 }, (_, i) => `r-${i}`);
    const rounds: Record<string, { none: number; one: number; two: number }> = {};
    // OLD + WINDOW (the start of a change), 3 callers each.
    rounds.oldWithWindow = await race([make("a", 4), make("a", 6, 4), make("a", 4), make("a", 6, 4), make("a", 4), make("a", 6, 4)], ids);
    // WINDOW + NEW (its end).
    rounds.windowWithNew = await race([make("b", 6, 4), make("b", 6), make("b", 6, 4), make("b", 6), make("b", 6, 4), make("b", 6)], ids);
    // Shrinking: OLD + WINDOW and WINDOW + NEW.
    rounds.shrinkStart = await race([make("c", 8), make("c", 3, 8), make("c", 8), make("c", 3, 8)], ids);
    rounds.shrinkEnd = await race([make("d", 3, 8), make("d", 3), make("d", 3, 8), make("d", 3)], ids);
    for (const [name, result] of Object.entries(rounds)) expect({ name, ...result }).toEqual({ name, none: 0, one: ids.length, two: 0 });
    // OLD next to NEW — skipping the window — is exactly what the window exists for: moved ids get two winners.
    const jump = await race([make("e", 4), make("e", 6)], ids);
    const movedIds = await movedCount(make("e", 6, 4), ids);
    expect(jump.two).toBe(movedIds);
    console.log(
      `[do-reshard] ${ids.length} ids claimed at once: ${Object.entries(rounds)
        .map(([name, r]) => `${name} ${r.one} one winner / ${r.two} two`)
        .join(", ")}; old next to new without the window: ${jump.two} ids with two winners`,
    );
  }, 60_000);

  it("a claim made inside the window is held, released and committed in both objects", async () => {
    const objectName = `pair-${Date.now()}`;
    const window = new DurableObjectStore(env.IDEMPOTENCY, { objectName, namespace: "pair", shards: 6, previousShards: 4 });
    const old = new DurableObjectStore(env.IDEMPOTENCY, { objectName, namespace: "pair", shards: 4 });
    const next = new DurableObjectStore(env.IDEMPOTENCY, { objectName, namespace: "pair", shards: 6 });
    const ids = Array.from({ length: 60 }, (_, i) => `p-${i}`);
    const keys = await Promise.all(ids.map((id) => storeKey("pair", id, 512)));
    const moved = ids.filter((_, i) => window.placementOf(keys[i] as string).previous !== undefined);
    expect(moved.length).toBeGreaterThan(10);
    const claims = await window.claimMany(moved);
    expect(claims.every((claim) => claim.status === "claimed")).toBe(true);
    // Held in both: neither the configuration before nor the one after can claim them.
    expect((await old.claimMany(moved)).map((c) => c.status)).toEqual(moved.map(() => "in-flight"));
    expect((await next.claimMany(moved)).map((c) => c.status)).toEqual(moved.map(() => "in-flight"));
    // A wrong token releases nothing; the pair token releases both halves.
    const [first, ...rest] = moved;
    const firstToken = (claims[0] as { token: string }).token;
    expect(firstToken.split(" ")).toHaveLength(2);
    expect(await window.release(first as string, "not-the-token")).toBe(false);
    expect((await old.claim(first as string)).status).toBe("in-flight");
    expect(await window.release(first as string, firstToken)).toBe(true);
    expect((await next.claim(first as string)).status).toBe("claimed");
    expect((await old.claim(first as string)).status).toBe("claimed");
    // Committed inside the window: done for the old and the new configuration.
    await window.rememberMany(rest);
    expect(await old.seenMany(rest)).toEqual(rest.map(() => true));
    expect(await next.seenMany(rest)).toEqual(rest.map(() => true));
    expect(await next.inspect(rest[0] as string)).toMatchObject({ status: "done" });
    await window.forget(rest[0] as string);
    expect(await old.seen(rest[0] as string)).toBe(false);
    expect(await next.seen(rest[0] as string)).toBe(false);
  });
});
