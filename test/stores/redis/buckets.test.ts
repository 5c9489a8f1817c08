/**
 * Growing a namespace's bucket count without a double effect (stores/redis/buckets.ts, window.ts),
 * on the real Redis Cluster of test/setup/redis-cluster.ts:
 *   - the bucket function: jump consistent hash's published test vectors, an even spread, and the
 *     fewest ids moved when the count grows (none between two old buckets);
 *   - 10,000 ids remembered under 4 buckets (and under `hashTag: true`), the count changed to 16
 *     with `previousBuckets`, every id redelivered: 0 effects run again — where a plain change of
 *     the count would have run about three quarters of them again;
 *   - ids in flight under the old count stay in flight under the new one, then done;
 *   - claims racing across the change (old-count consumers against window consumers, window
 *     consumers against new-count ones): never two winners for one id — where old against new
 *     without a window does give two;
 *   - ids committed during the window are found after it.
 */
import { Cluster } from "ioredis";
import { afterAll, describe, expect, inject, it } from "vitest";
import type { BatchClaim, ClaimingStore } from "../../../src/contract.js";
import { RedisStore, ioredisScriptClient } from "../../../entry/redis.js";
import { fnv1a32 } from "../../../stores/fnv1a.js";
import { bucketOf, jumpHash } from "../../../stores/redis/buckets.js";
import { CountingConsumer, idRange, seededRandom, statusCounts } from "../../support/redis-batches.js";

const cluster = new Cluster(inject("redisClusterPorts").map((port) => ({ host: "127.0.0.1", port })));
cluster.on("error", () => {});
afterAll(() => cluster.disconnect());
const client = ioredisScriptClient(cluster);

let run = 0;
function namespace(name: string): string {
  run += 1;
  return `${name}-${Date.now().toString(36)}-${run}`;
}

describe("the bucket of an id", () => {
  it("is jump consistent hash over FNV-1a: the published test vectors, and a stable FNV-1a", () => {
    expect([jumpHash(1, 1), jumpHash(42, 57), jumpHash(0xdead10cc, 1), jumpHash(0xdead10cc, 666), jumpHash(256, 1024)]).toEqual([0, 43, 0, 361, 520]);
    expect(fnv1a32("")).toBe(0x811c9dc5);
    expect(fnv1a32("a")).toBe(0xe40c292c);
    expect(bucketOf("anything", 1)).toBe(0);
  });

  it("spreads ids evenly and, growing from n to m, moves only (m - n) / m of them, each into a new bucket", () => {
    const ids = idRange("msg", 20_000);
    const counts = new Array<number>(16).fill(0);
    for (const id of ids) counts[bucketOf(id, 16)] = (counts[bucketOf(id, 16)] as number) + 1;
    expect(Math.min(...counts)).toBeGreaterThan(20_000 / 16 - 150);
    expect(Math.max(...counts)).toBeLessThan(20_000 / 16 + 150);
    for (const [from, to] of [
      [4, 16],
      [1, 16],
      [16, 64],
      [3, 4],
    ] as const) {
      let moved = 0;
      for (const id of ids) {
        const before = bucketOf(id, from);
        const after = bucketOf(id, to);
        if (before !== after) {
          moved += 1;
          expect(after, `${id}: ${from} -> ${to}`).toBeGreaterThanOrEqual(from);
        }
      }
      expect(Math.abs(moved / ids.length - (to - from) / to), `${from} -> ${to}`).toBeLessThan(0.02);
    }
  });
});

describe("changing the bucket count with remembered ids", () => {
  const changes: { label: string; before: { buckets: number } | { hashTag: true }; previousBuckets: number }[] = [
    { label: "4 buckets", before: { buckets: 4 }, previousBuckets: 4 },
    { label: "hashTag: true", before: { hashTag: true }, previousBuckets: 1 },
  ];
  for (const { label, before, previousBuckets } of changes) {
    it(`remembers 10,000 ids under ${label}, changes to 16 buckets: redelivering all runs 0 effects again`, { timeout: 120_000 }, async () => {
      const ns = namespace("grow");
      const ids = idRange("order", 10_000);
      const effects = new Map<string, number>();
      const old = new CountingConsumer(new RedisStore({ client, namespace: ns, ...before }), effects);
      for (let i = 0; i < ids.length; i += 100) {
        const results = await old.process(ids.slice(i, i + 100));
        expect(results.every((result) => result.status === "ran")).toBe(true);
      }
      expect(effects.size).toBe(10_000);

      // What changing the count WITHOUT a window would do: every moved id claimable again.
      const naive = new RedisStore({ client, namespace: ns, buckets: 16 });
      const naiveClaims = await naive.claimMany(ids);
      const wouldRunAgain = naiveClaims.filter((claim) => claim.status === "claimed").length;
      await naive.releaseMany(naiveClaims.flatMap((claim, i) => (claim.status === "claimed" ? [{ id: ids[i] as string, token: claim.token }] : [])));

      const again = new Map<string, number>();
      const windowed = new CountingConsumer(new RedisStore({ client, namespace: ns, buckets: 16, previousBuckets }), again);
      const statuses: Record<string, number> = {};
      const started = Date.now();
      for (let i = 0; i < ids.length; i += 100) {
        for (const [status, n] of Object.entries(statusCounts(await windowed.process(ids.slice(i, i + 100))))) statuses[status] = (statuses[status] ?? 0) + n;
      }
      const redeliveryMs = Date.now() - started;
      const moved = ids.filter((id) => bucketOf(id, previousBuckets) !== bucketOf(id, 16)).length;
      console.info(
        `[redis buckets] ${label} -> 16 buckets: ${moved} of 10,000 ids have a new key; a plain change would run ${wouldRunAgain} again; ` +
          `with previousBuckets: ${[...again.values()].reduce((a, b) => a + b, 0)} effects, ${JSON.stringify(statuses)}, ${redeliveryMs} ms for 100 batches of 100`,
      );
      expect(wouldRunAgain).toBe(moved);
      expect(wouldRunAgain).toBeGreaterThan(7_000);
      expect([...again.values()].reduce((a, b) => a + b, 0)).toBe(0);
      expect(statuses).toEqual({ duplicate: 10_000 });
    });
  }

  it("keeps ids in flight under the old count in flight under the new one, then done once committed", async () => {
    const ns = namespace("inflight");
    const ids = idRange("held", 1_000);
    const old = new RedisStore({ client, namespace: ns, buckets: 4 });
    const windowed = new RedisStore({ client, namespace: ns, buckets: 16, previousBuckets: 4 });
    const held = await old.claimMany(ids, 60_000);
    expect(held.every((claim) => claim.status === "claimed")).toBe(true);
    const during = await windowed.claimMany(ids);
    expect(during.filter((claim) => claim.status === "in-flight")).toHaveLength(1_000);
    expect((await windowed.seenMany(ids)).some(Boolean)).toBe(false);
    expect((await windowed.inspect(ids[0] as string))?.status).toBe("in-flight");
    await old.rememberMany(ids);
    expect((await windowed.claimMany(ids)).every((claim) => claim.status === "done")).toBe(true);
    expect((await windowed.seenMany(ids)).every(Boolean)).toBe(true);
  });

  it("finds after the window every id committed during it", async () => {
    const ns = namespace("after");
    const ids = idRange("w", 2_000);
    const windowed = new RedisStore({ client, namespace: ns, buckets: 16, previousBuckets: 4 });
    const claims = await windowed.claimMany(ids);
    expect(claims.every((claim) => claim.status === "claimed")).toBe(true);
    await windowed.rememberMany(ids);
    const after = new RedisStore({ client, namespace: ns, buckets: 16 });
    expect((await after.claimMany(ids)).every((claim) => claim.status === "done")).toBe(true);
    // …and so does a consumer still on the old count, during the changeover.
    const old = new RedisStore({ client, namespace: ns, buckets: 4 });
    expect((await old.seenMany(ids)).every(Boolean)).toBe(true);
    // An in-flight window claim released by its token frees both keys.
    const ns2 = namespace("release");
    const w2 = new RedisStore({ client, namespace: ns2, buckets: 16, previousBuckets: 4 });
    const claimed = await w2.claimMany(ids.slice(0, 100));
    await w2.releaseMany(claimed.flatMap((claim, i) => (claim.status === "claimed" ? [{ id: ids[i] as string, token: claim.token }] : [])));
    expect((await new RedisStore({ client, namespace: ns2, buckets: 4 }).claimMany(ids.slice(0, 100))).every((c) => c.status === "claimed")).toBe(true);
  });
});

describe("claims racing across the change", () => {
  /** Every claimer claims every id, in its own shuffled batches of 50, all at once. Claimed answers per id. */
  async function race(stores: readonly ClaimingStore[], ids: readonly string[], seed: number): Promise<Map<string, number>> {
    const random = seededRandom(seed);
    const winners = new Map<string, number>();
    await Promise.all(
      stores.map(async (store) => {
        const order = [...ids].sort(() => random() - 0.5);
        const batches: string[][] = [];
        for (let i = 0; i < order.length; i += 50) batches.push(order.slice(i, i + 50));
        await Promise.all(
          batches.map(async (batch) => {
            const claims: BatchClaim[] = store.claimMany ? await store.claimMany(batch, 60_000) : [];
            claims.forEach((claim, i) => {
              if (claim.status === "claimed") winners.set(batch[i] as string, (winners.get(batch[i] as string) ?? 0) + 1);
            });
          }),
        );
      }),
    );
    return winners;
  }

  const kinds = {
    old: (ns: string) => new RedisStore({ client, namespace: ns, buckets: 4 }),
    window: (ns: string) => new RedisStore({ client, namespace: ns, buckets: 16, previousBuckets: 4 }),
    new: (ns: string) => new RedisStore({ client, namespace: ns, buckets: 16 }),
  };

  for (const [a, b] of [
    ["old", "window"],
    ["window", "new"],
    ["window", "window"],
  ] as const) {
    it(`${a}-count consumers against ${b}-count consumers: exactly one winner per id`, { timeout: 60_000 }, async () => {
      const ns = namespace(`race-${a}-${b}`);
      const ids = idRange("r", 2_000);
      const stores = [kinds[a](ns), kinds[a](ns), kinds[a](ns), kinds[b](ns), kinds[b](ns), kinds[b](ns)];
      const winners = await race(stores, ids, 7);
      expect(ids.filter((id) => winners.get(id) !== 1)).toEqual([]);
    });
  }

  it("old against new WITHOUT the window gives two winners for the moved ids (what the window prevents)", async () => {
    const ns = namespace("race-naive");
    const ids = idRange("r", 2_000);
    const winners = await race([kinds.old(ns), kinds.new(ns)], ids, 9);
    const twice = ids.filter((id) => winners.get(id) === 2).length;
    expect(twice).toBe(ids.filter((id) => bucketOf(id, 4) !== bucketOf(id, 16)).length);
  });
});
