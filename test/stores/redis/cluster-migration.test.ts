/**
 * Slots moving under load: four consumers (each its own ioredis `Cluster`, as four Lambdas would
 * be) process overlapping batches of redeliveries through `RedisStore` with `buckets: 64` while
 * `redis-cli --cluster reshard ... --cluster-yes` moves the slots of several of the namespace's
 * buckets from one master to another and back. The cluster is this file's own (3 masters, started
 * here with test/support/redis-nodes.ts), so the reshards disturb no other test file.
 *
 * Asserted: no id's effect ran twice (no double claim), every id reported `ran` is committed
 * afterwards (no lost commit), nothing was reported `commit-failed`, a final redelivery of every id
 * runs nothing, and the masters answered our scripts with MOVED / ASK / TRYAGAIN during the moves
 * (INFO errorstats), so the redirections were really exercised.
 */
import { spawn } from "node:child_process";
import { Cluster, Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisStore, ioredisScriptClient } from "../../../entry/redis.js";
import { bucketHead, bucketOf } from "../../../stores/redis/buckets.js";
import { slotOf } from "../../../stores/redis/pipeline.js";
import type { MessageResult } from "../../../src/decision.js";
import { CountingConsumer, idRange, seededRandom, statusCounts } from "../../support/redis-batches.js";
import { type ClusterNodeInfo, type RedisCluster, clusterNodes, startRedisCluster } from "../../support/redis-nodes.js";

const BUCKETS = 64;
/** Slots moved per reshard: the lowest ones of the source master. */
const MOVED_SLOTS = 400;

let redisCluster: RedisCluster;
beforeAll(async () => {
  redisCluster = await startRedisCluster({ masters: 3 });
}, 60_000);
afterAll(() => redisCluster?.stop());

function reshard(seedPort: number, from: string, to: string, slots: number): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(
      "redis-cli",
      ["--cluster", "reshard", `127.0.0.1:${seedPort}`, "--cluster-from", from, "--cluster-to", to, "--cluster-slots", String(slots), "--cluster-yes", "--cluster-pipeline", "10"],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => {
      output = (output + chunk.toString("utf8")).slice(-2000);
    });
    child.stderr.on("data", (chunk: Buffer) => {
      output = (output + chunk.toString("utf8")).slice(-2000);
    });
    child.on("exit", (code) => resolve({ code, output }));
  });
}

function firstSlot(node: ClusterNodeInfo): number {
  return Math.min(...node.slots.map((range) => Number(range.split("-")[0])));
}

/** Redirection errors a master has answered so far (INFO errorstats). */
async function redirections(port: number): Promise<number> {
  const redis = new Redis({ host: "127.0.0.1", port });
  const text = await redis.info("errorstats");
  redis.disconnect();
  let total = 0;
  for (const match of text.matchAll(/errorstat_(ASK|MOVED|TRYAGAIN):count=(\d+)/g)) total += Number(match[2]);
  return total;
}

describe("a slot migration while batches run", () => {
  it("moves the slots of busy buckets there and back: no double claim, no lost commit", { timeout: 180_000 }, async () => {
    const port = redisCluster.nodes[0]?.port as number;
    const masters = (await clusterNodes(port)).filter((node) => node.role === "master").sort((a, b) => firstSlot(a) - firstSlot(b));
    const [source, target] = masters as [ClusterNodeInfo, ClusterNodeInfo];
    const low = firstSlot(source);
    // A namespace with several buckets among the source's lowest slots: the ones the reshard moves.
    let namespace = "";
    let moving: number[] = [];
    for (let n = 0; moving.length < 4; n += 1) {
      namespace = `mig-${n}`;
      moving = Array.from({ length: BUCKETS }, (_, b) => b).filter((b) => {
        const slot = slotOf(`${bucketHead("bq:", namespace, b)}:x`);
        return slot >= low && slot < low + MOVED_SLOTS;
      });
    }
    // Fresh ids keep coming (half of them in the moving buckets), each batch mixed with
    // redeliveries of ids already issued (some still in flight elsewhere).
    const inMoving = idRange("m", 400_000).filter((id) => moving.includes(bucketOf(id, BUCKETS)));
    const anywhere = idRange("o", inMoving.length);
    const fresh = inMoving.flatMap((id, i) => [id, anywhere[i] as string]);
    const issued: string[] = [];

    const effects = new Map<string, number>();
    const clients: Cluster[] = [];
    const consumers = Array.from({ length: 4 }, () => {
      const client = new Cluster([{ host: "127.0.0.1", port }]);
      client.on("error", () => {});
      clients.push(client);
      return new CountingConsumer(new RedisStore({ client: ioredisScriptClient(client), namespace, buckets: BUCKETS }), effects, { handlerMs: 2 });
    });
    const results: MessageResult[] = [];
    const random = seededRandom(20);
    let running = true;
    const load = consumers.map(async (consumer) => {
      while (running && issued.length < fresh.length - 10) {
        const redelivered = Array.from({ length: 10 }, () => issued[Math.floor(random() * issued.length)]).filter((id) => id !== undefined);
        const batch = fresh.slice(issued.length, issued.length + 10);
        issued.push(...batch);
        results.push(...(await consumer.process([...new Set([...batch, ...redelivered])])));
      }
    });

    const redirectedBefore = (await Promise.all(masters.map((m) => redirections(m.port)))).reduce((a, b) => a + b, 0);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const away = await reshard(port, source.id, target.id, MOVED_SLOTS);
    expect(away.code, away.output).toBe(0);
    const movedAway = (await clusterNodes(port)).find((node) => node.id === target.id) as ClusterNodeInfo;
    expect(movedAway.slots.some((range) => range.startsWith(`${low}-`))).toBe(true);
    const back = await reshard(port, target.id, source.id, MOVED_SLOTS);
    expect(back.code, back.output).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 300));
    running = false;
    await Promise.all(load);
    const redirected = (await Promise.all(masters.map((m) => redirections(m.port)))).reduce((a, b) => a + b, 0) - redirectedBefore;

    const statuses = statusCounts(results);
    const firstError = results.find((r) => r.error !== undefined)?.error;
    if (firstError !== undefined) console.info("first error:", String(firstError));
    const doubled = [...effects].filter(([, n]) => n > 1);
    const ran = [...new Set(results.filter((r) => r.status === "ran").map((r) => r.key as string))];
    const checker = new RedisStore({ client: ioredisScriptClient(clients[0] as Cluster), namespace, buckets: BUCKETS });
    const committed = await checker.seenMany(ran);
    const lost = ran.filter((_, i) => !committed[i]);
    const again = new Map<string, number>();
    await new CountingConsumer(checker, again).process(ran);
    for (const client of clients) client.disconnect();
    console.info(
      `[redis-cluster migration] ${results.length} deliveries of ${issued.length} ids while ${MOVED_SLOTS} slots (${moving.length} of the ` +
        `${BUCKETS} buckets) moved away and back: ${JSON.stringify(statuses)}; effects twice: ${doubled.length}; lost commits: ${lost.length}; ` +
        `redirections answered by the masters: ${redirected}`,
    );
    expect(doubled).toEqual([]);
    expect(lost).toEqual([]);
    expect(statuses["commit-failed"] ?? 0).toBe(0);
    expect(ran.length).toBe(issued.length);
    expect([...again.values()].reduce((a, b) => a + b, 0)).toBe(0);
    expect(redirected).toBeGreaterThan(0);
  });
});

/** Script calls (EVALSHA and EVAL) a node has run since its stats were reset (INFO commandstats). */
async function scriptCalls(port: number): Promise<number> {
  const redis = new Redis({ host: "127.0.0.1", port });
  const text = await redis.info("commandstats");
  redis.disconnect();
  let total = 0;
  for (const match of text.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g)) total += Number(match[1]);
  return total;
}

/** Moves one empty slot from a master to another the documented way (IMPORTING, MIGRATING, NODE on both). */
async function moveEmptySlot(slot: number, from: ClusterNodeInfo, to: ClusterNodeInfo): Promise<void> {
  const source = new Redis({ host: "127.0.0.1", port: from.port });
  const target = new Redis({ host: "127.0.0.1", port: to.port });
  try {
    await target.call("CLUSTER", "SETSLOT", String(slot), "IMPORTING", from.id);
    await source.call("CLUSTER", "SETSLOT", String(slot), "MIGRATING", to.id);
    await target.call("CLUSTER", "SETSLOT", String(slot), "NODE", to.id);
    await source.call("CLUSTER", "SETSLOT", String(slot), "NODE", to.id);
  } finally {
    source.disconnect();
    target.disconnect();
  }
}

describe("a claim step that timed out while its slot moved", () => {
  it("is not sent again after the timeout: the redirected claim never reaches the new owner", { timeout: 30_000 }, async () => {
    const masters = (await clusterNodes(redisCluster.masterPorts[0] as number)).filter((node) => node.role === "master");
    const client = new Cluster([{ host: "127.0.0.1", port: redisCluster.masterPorts[0] as number }]);
    client.on("error", () => {});
    try {
      // A namespace whose one slot is empty (a slot holding keys cannot be handed over).
      let namespace = "";
      let slot = -1;
      let from: ClusterNodeInfo | undefined;
      for (let n = 0; from === undefined; n += 1) {
        namespace = `late-claim-${n}`;
        const probe = new RedisStore({ client: ioredisScriptClient(client), namespace, hashTag: true });
        slot = slotOf(await probe.key("order-1"));
        const owner = masters.find((node) => node.slots.some((range) => {
          const [low, high] = range.split("-").map(Number) as [number, number | undefined];
          return slot >= low && slot <= (high ?? low);
        }));
        const admin = new Redis({ host: "127.0.0.1", port: owner?.port as number });
        const keys = Number(await admin.call("CLUSTER", "COUNTKEYSINSLOT", String(slot)));
        admin.disconnect();
        if (keys === 0) from = owner;
      }
      const to = masters.find((node) => node.id !== from.id) as ClusterNodeInfo;
      const store = new RedisStore({ client: ioredisScriptClient(client), namespace, hashTag: true, timeoutMs: 100 });
      // The client learns today's slot map and every master loads the scripts (no NOSCRIPT round later).
      for (const n of [0, 1, 2, 3, 4, 5, 6, 7]) {
        const warm = new RedisStore({ client: ioredisScriptClient(client), namespace: `late-warm-${n}`, hashTag: true });
        const [claim] = await warm.claimMany(["w"]);
        await warm.releaseMany([{ id: "w", token: (claim as { token: string }).token }]);
      }
      await moveEmptySlot(slot, from, to);
      // The client's map still names the old owner. Keep that owner busy for 600 ms (a script
      // spinning on its clock blocks the node): the claim waits in its socket and times out at 100 ms.
      const busy = new Redis({ host: "127.0.0.1", port: from.port });
      const target = new Redis({ host: "127.0.0.1", port: to.port });
      await target.config("RESETSTAT");
      const spin = busy.eval("local t = redis.call('TIME') local e = t[1] * 1000000 + t[2] + 600000 while true do t = redis.call('TIME') if t[1] * 1000000 + t[2] >= e then break end end return 1", 0);
      await new Promise((resolve) => setTimeout(resolve, 20));
      const failed = await store.claimMany(["order-1"]).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect((failed as Error | undefined)?.name).toBe("StoreUnavailableError");
      await spin;
      // The old owner now answers MOVED to both the claim and the release sent behind it: the
      // release goes on to the new owner (it must, to undo a claim that did land); the claim must not.
      const deadline = Date.now() + 5_000;
      while ((await scriptCalls(to.port)) < 1 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 25));
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(await scriptCalls(to.port)).toBe(1);
      expect(await target.exists(await store.key("order-1"))).toBe(0);
      busy.disconnect();
      target.disconnect();
    } finally {
      client.disconnect();
    }
  });
});
