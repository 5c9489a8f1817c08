/**
 * `RedisStore` on a real Redis Cluster (3 masters + 3 replicas, test/setup/redis-cluster.ts) through
 * ioredis' `Cluster`:
 *   - the store contract suite with `buckets: 16`, and again inside a bucket-change window (4 → 16);
 *   - the scale-out figures: keys per master, scripts and round trips per batch step of 10 and 100
 *     ids, `hashTag: true` (one slot: the "before") against `buckets: 16` and `buckets: 64`, counted
 *     at the socket by a proxy in front of every node (test/support/resp-proxy.ts) and in the
 *     masters' own keyspace;
 *   - the slot of every key computed by the store is the one the server computes.
 *
 * Slot migrations while batches run: cluster-migration.test.ts. Bucket changes: buckets.test.ts.
 * Durable commits (`waitReplicas`) on this cluster: durability.test.ts.
 */
import { Cluster, Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { RedisStore, ioredisScriptClient } from "../../../entry/redis.js";
import { bucketOf } from "../../../stores/redis/buckets.js";
import { slotOf } from "../../../stores/redis/pipeline.js";
import { idRange } from "../../support/redis-batches.js";
import { clusterNodes } from "../../support/redis-nodes.js";
import { type RespProxy, startRespProxy } from "../../support/resp-proxy.js";
import { testStore } from "../contract.js";

const ports = inject("redisClusterPorts");
const seeds = ports.map((port) => ({ host: "127.0.0.1", port }));
const cluster = new Cluster(seeds);
cluster.on("error", () => {});
afterAll(() => cluster.disconnect());

testStore("RedisStore (Redis Cluster, ioredis Cluster, 16 buckets)", {
  claims: true,
  clock: "real",
  make: ({ namespace, leaseMs, retentionMs }) =>
    new RedisStore({ client: ioredisScriptClient(cluster), namespace, buckets: 16, leaseMs, retentionMs }),
});

testStore("RedisStore (Redis Cluster, changing from 4 to 16 buckets)", {
  claims: true,
  clock: "real",
  make: ({ namespace, leaseMs, retentionMs }) =>
    new RedisStore({ client: ioredisScriptClient(cluster), namespace, buckets: 16, previousBuckets: 4, leaseMs, retentionMs }),
});

/** The keys of a namespace (ids starting with `idPrefix`) held by each master, from the masters' own keyspace (SCAN). */
async function keysPerMaster(namespace: string, idPrefix: string): Promise<Map<number, number>> {
  const masters = (await clusterNodes(ports[0] as number)).filter((node) => node.role === "master");
  const counts = new Map<number, number>();
  for (const master of masters) {
    const redis = new Redis({ host: "127.0.0.1", port: master.port });
    let cursor = "0";
    let count = 0;
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", `bq:{${namespace}[:}]*:${idPrefix}*`, "COUNT", 1000);
      cursor = next;
      count += keys.length;
    } while (cursor !== "0");
    redis.disconnect();
    counts.set(master.port, count);
  }
  return counts;
}

describe("scale-out on a 3-master cluster: keys per master, scripts and round trips per step", () => {
  const proxies = new Map<number, RespProxy>();
  let counted: Cluster;
  const figures: string[] = [];

  beforeAll(async () => {
    for (const port of ports) proxies.set(port, await startRespProxy(port));
    const natMap = Object.fromEntries([...proxies].map(([port, proxy]) => [`127.0.0.1:${port}`, { host: "127.0.0.1", port: proxy.port }]));
    counted = new Cluster([{ host: "127.0.0.1", port: (proxies.get(ports[0] as number) as RespProxy).port }], { natMap });
    counted.on("error", () => {});
  });
  afterAll(async () => {
    counted.disconnect();
    for (const proxy of proxies.values()) await proxy.close();
    console.info(`[redis-cluster figures]\n${figures.join("\n")}`);
  });

  /** Loads every script the step uses on every master: 200 ids reach every bucket. */
  async function warmUp(store: RedisStore): Promise<void> {
    const warm = idRange(`warm-${Date.now().toString(36)}`, 200);
    await store.seenMany(warm);
    await store.claimMany(warm);
    await store.rememberMany(warm);
  }

  /** Per master (real port): chunks written (round trips), scripts, script keys, since the last reset. */
  async function perMaster() {
    const masters = (await clusterNodes(ports[0] as number)).filter((node) => node.role === "master");
    return masters.map((master) => {
      const counts = (proxies.get(master.port) as RespProxy).counts;
      const scripts = (counts.commands.get("EVALSHA") ?? 0) + (counts.commands.get("EVAL") ?? 0);
      return { port: master.port, roundTrips: counts.writes, scripts, scriptKeys: counts.scriptKeys };
    });
  }

  const layouts = [
    { name: "hashTag: true", options: { hashTag: true }, buckets: 1 },
    { name: "buckets: 16", options: { buckets: 16 }, buckets: 16 },
    { name: "buckets: 64", options: { buckets: 64 }, buckets: 64 },
  ] as const;

  for (const layout of layouts) {
    for (const size of [10, 100]) {
      it(`${layout.name}, a batch of ${size}: one script per bucket touched, one round trip per master`, async () => {
        // A fixed namespace: the slots its buckets hash to — and so the figures — repeat run to run.
        const namespace = `scale-${layout.buckets}-${size}`;
        const admin = new Cluster(seeds);
        admin.on("error", () => {});
        const store = new RedisStore({ client: ioredisScriptClient(counted), namespace, ...layout.options });
        const ids = idRange("order", size);
        await store.forget("warm-up");
        for (const id of ids) await admin.del(await store.key(id));
        // Load the scripts on every master first (a fresh node answers the first EVALSHA with NOSCRIPT).
        await warmUp(store);
        for (const proxy of proxies.values()) proxy.reset();

        const claims = await store.claimMany(ids);
        expect(claims.every((claim) => claim.status === "claimed")).toBe(true);
        const claimStep = await perMaster();
        for (const proxy of proxies.values()) proxy.reset();
        await store.rememberMany(ids);
        const commitStep = await perMaster();
        const stored = await keysPerMaster(namespace, "order-");
        admin.disconnect();

        // What the layout predicts: the buckets the ids fall in, and the masters owning their slots.
        const bucketSet = new Set(ids.map((id) => bucketOf(id, layout.buckets)));
        const slotOwner = new Map<number, number>();
        for (const master of (await clusterNodes(ports[0] as number)).filter((node) => node.role === "master")) {
          for (const range of master.slots) {
            const [from, to] = range.split("-").map(Number) as [number, number?];
            for (let slot = from; slot <= (to ?? from); slot += 1) slotOwner.set(slot, master.port);
          }
        }
        const mastersTouched = new Set(await Promise.all(ids.map(async (id) => slotOwner.get(slotOf(await store.key(id))))));

        for (const step of [claimStep, commitStep]) {
          expect(step.reduce((sum, master) => sum + master.scripts, 0), "scripts").toBe(bucketSet.size);
          expect(step.reduce((sum, master) => sum + master.scriptKeys, 0), "keys sent").toBe(size);
          expect(step.filter((master) => master.roundTrips > 0).length, "masters written").toBe(mastersTouched.size);
          for (const master of step) expect(master.roundTrips, `round trips to ${master.port}`).toBeLessThanOrEqual(1);
        }
        const keys = [...stored.values()];
        expect(keys.reduce((sum, n) => sum + n, 0)).toBe(size);
        if (layout.buckets === 1) expect(keys.filter((n) => n > 0)).toEqual([size]);
        else expect(keys.filter((n) => n > 0).length).toBe(mastersTouched.size);
        if (layout.buckets > 1) expect(mastersTouched.size, "a batch spreads over more than one master").toBeGreaterThan(1);
        if (layout.buckets > 1 && size === 100) expect(mastersTouched.size).toBe(3);

        figures.push(
          `${layout.name.padEnd(14)} batch ${String(size).padStart(3)}: scripts/step ${bucketSet.size}, ` +
            `round trips/step ${claimStep.filter((m) => m.roundTrips > 0).length} (one per master, in parallel), ` +
            `keys per master ${keys.join("/")}`,
        );
      });
    }
  }
  for (const size of [10, 100]) {
    it(`in a bucket-change window (4 -> 16), a batch of ${size} new ids: the claim takes two rounds, the commit one`, async () => {
      const namespace = `scale-window-${size}`;
      const store = new RedisStore({ client: ioredisScriptClient(counted), namespace, buckets: 16, previousBuckets: 4 });
      const ids = idRange("order", size);
      for (const id of ids) await store.forget(id);
      await warmUp(store);
      for (const proxy of proxies.values()) proxy.reset();
      expect((await store.claimMany(ids)).every((claim) => claim.status === "claimed")).toBe(true);
      const claimStep = await perMaster();
      for (const proxy of proxies.values()) proxy.reset();
      await store.rememberMany(ids);
      const commitStep = await perMaster();
      const moved = ids.filter((id) => bucketOf(id, 4) !== bucketOf(id, 16)).length;
      const sum = (step: typeof claimStep, field: "scripts" | "scriptKeys") => step.reduce((total, master) => total + master[field], 0);
      expect(sum(claimStep, "scriptKeys")).toBe(size + moved);
      expect(sum(commitStep, "scriptKeys")).toBe(size + moved);
      for (const master of claimStep) expect(master.roundTrips).toBeLessThanOrEqual(2);
      for (const master of commitStep) expect(master.roundTrips).toBeLessThanOrEqual(1);
      figures.push(
        `window 4 -> 16  batch ${String(size).padStart(3)}: ${moved} ids moved; claim ${sum(claimStep, "scripts")} scripts in 2 rounds ` +
          `(round trips per master ${claimStep.map((m) => m.roundTrips).join("/")}), commit ${sum(commitStep, "scripts")} scripts in 1 round ` +
          `(${commitStep.map((m) => m.roundTrips).join("/")})`,
      );
    });
  }
});

describe("a client still connecting", () => {
  for (const status of ["connecting", "connect"] as const) {
    it(`answers a step sent while the Cluster client is "${status}" (no wait for a ready it already passed)`, async () => {
      const fresh = new Cluster(seeds);
      fresh.on("error", () => {});
      const store = new RedisStore({ client: ioredisScriptClient(fresh), namespace: `fresh-${status}-${Date.now().toString(36)}`, buckets: 16, timeoutMs: 3_000 });
      await new Promise<void>((resolve) => {
        const check = () => (fresh.status === status ? resolve() : setImmediate(check));
        check();
      });
      const started = Date.now();
      const claims = await store.claimMany(idRange("c", 20));
      expect(claims.every((claim) => claim.status === "claimed")).toBe(true);
      expect(Date.now() - started).toBeLessThan(2_000);
      fresh.disconnect();
    });
  }
});

describe("slots", () => {
  it("computes every key's slot as the server does (hash tags included)", async () => {
    const store = new RedisStore({ client: ioredisScriptClient(cluster), namespace: "slots", buckets: 64 });
    const admin = new Redis({ host: "127.0.0.1", port: ports[0] as number });
    const keys = [
      ...(await Promise.all(idRange("id", 64).map((id) => store.key(id)))),
      "plain-key",
      "{}empty-tag",
      "a{b}c{d}",
      "{ünï}x",
      "no{close",
    ];
    for (const key of keys) expect(slotOf(key), key).toBe(Number(await admin.call("CLUSTER", "KEYSLOT", key)));
    admin.disconnect();
  });

  it("keeps each bucket in one slot: a batch of 500 ids in 64 buckets is 64 or fewer scripts, never CROSSSLOT", async () => {
    const store = new RedisStore({ client: ioredisScriptClient(cluster), namespace: `wide-${Date.now().toString(36)}`, buckets: 64 });
    const ids = idRange("w", 500);
    const claims = await store.claimMany(ids);
    expect(claims.filter((claim) => claim.status === "claimed")).toHaveLength(500);
    await store.rememberMany(ids);
    expect(await store.seenMany(ids)).toEqual(ids.map(() => true));
    expect((await store.claimMany(ids)).every((claim) => claim.status === "done")).toBe(true);
  });

  it("without hashTag or buckets, a batch across slots still fails as the store error it always was (CROSSSLOT)", async () => {
    const store = new RedisStore({ client: ioredisScriptClient(cluster), namespace: `plain-${Date.now().toString(36)}` });
    expect((await store.claim("single")).status).toBe("claimed");
    await expect(store.claimMany(idRange("p", 10))).rejects.toMatchObject({ name: "StoreUnavailableError", message: expect.stringMatching(/CROSSSLOT/) });
  });
});
