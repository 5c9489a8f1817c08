/**
 * The Redis stores against a real redis-server (started by test/setup/redis.ts): the shared store
 * contract suite once over Upstash's REST protocol (the unmodified `@upstash/redis` client through
 * the test bridge) and once over TCP (ioredis through `ioredisScriptClient`), plus the 50-way claim
 * race over REST with more rounds than the suite's default.
 *
 * Faults, request counting and the NOSCRIPT fallback: faults.test.ts.
 * Inside workerd: workerd.test.ts.
 */
import { Redis as UpstashRedis } from "@upstash/redis";
import { Redis as IORedis } from "ioredis";
import { afterAll, describe, expect, inject, it } from "vitest";
import { RedisStore, UpstashRedisStore, ioredisScriptClient } from "../../../entry/upstash.js";
import { testStore } from "../contract.js";

const rest = new UpstashRedis({ url: inject("upstashUrl"), token: inject("upstashToken"), enableTelemetry: false });
const tcp = new IORedis({ host: "127.0.0.1", port: inject("redisPort"), lazyConnect: true });
afterAll(() => {
  tcp.disconnect();
});

testStore("UpstashRedisStore (REST, @upstash/redis)", {
  claims: true,
  clock: "real",
  raceRounds: 3,
  make: ({ namespace, leaseMs, retentionMs }) => new UpstashRedisStore({ client: rest, namespace, leaseMs, retentionMs }),
});

testStore("RedisStore (TCP, ioredis)", {
  claims: true,
  clock: "real",
  make: ({ namespace, leaseMs, retentionMs }) =>
    new RedisStore({ client: ioredisScriptClient(tcp), namespace, leaseMs, retentionMs }),
});

describe("UpstashRedisStore over REST", () => {
  it("gives exactly one claimed of 50 concurrent claims of one id, round after round", async () => {
    // 50 stores with their own client and no auto-pipelining: 50 separate HTTP requests, as 50
    // Lambda instances or Workers isolates would send them.
    const namespace = `race-${Date.now()}`;
    const stores = Array.from(
      { length: 50 },
      () =>
        new UpstashRedisStore({
          client: new UpstashRedis({ url: inject("upstashUrl"), token: inject("upstashToken"), enableTelemetry: false, enableAutoPipelining: false }),
          namespace,
        }),
    );
    for (let round = 0; round < 10; round += 1) {
      const claims = await Promise.all(stores.map((store) => store.claim(`id-${round}`)));
      expect(claims.filter((claim) => claim.status === "claimed")).toHaveLength(1);
      expect(claims.filter((claim) => claim.status === "in-flight")).toHaveLength(49);
    }
  });

  it("lays keys out as {prefix}{namespace}:{id}, hashing over-long ids to a fixed length", async () => {
    const store = new UpstashRedisStore({ client: rest, namespace: "orders" });
    expect(await store.key("m-1")).toBe("bq:orders:m-1");
    const long = await store.key("x".repeat(10_000));
    expect(long).toMatch(/^bq:orders:#[A-Za-z0-9_-]{43}$/);
    const custom = new RedisStore({ client: rest, namespace: "orders", prefix: "app:", hashTag: true });
    expect(await custom.key("m-1")).toBe("app:{orders}:m-1");
  });

  it("stores the lease and the retention as server-side PX expiries", async () => {
    const store = new UpstashRedisStore({ client: rest, namespace: `px-${Date.now()}`, retentionMs: 86_400_000 });
    await store.claim("a", 30_000);
    await store.remember("b");
    const leaseLeft = await rest.pttl(await store.key("a"));
    const retentionLeft = await rest.pttl(await store.key("b"));
    expect(leaseLeft).toBeGreaterThan(25_000);
    expect(leaseLeft).toBeLessThanOrEqual(30_000);
    expect(retentionLeft).toBeGreaterThan(86_000_000);
  });

  it("lays values out as i:<token>[:<fingerprint>] and d[:<fingerprint>]", async () => {
    const store = new UpstashRedisStore({ client: rest, namespace: `layout-${Date.now()}` });
    const raw = async (id: string) => tcp.get(await store.key(id));
    const claim = await store.claim("a", 30_000, "fp:with:colons");
    if (claim.status !== "claimed") throw new Error("expected claimed");
    expect(await raw("a")).toBe(`i:${claim.token}:fp:with:colons`);
    await store.remember("a");
    expect(await raw("a")).toBe("d:fp:with:colons");
    const plain = await store.claim("b");
    if (plain.status !== "claimed") throw new Error("expected claimed");
    expect(await raw("b")).toBe(`i:${plain.token}`);
    await store.remember("b");
    expect(await raw("b")).toBe("d");
    await store.remember("b", "fp-b");
    expect(await raw("b")).toBe("d:fp-b");
  });

  it("reads records written before fingerprints existed (d, i:<token>) as records without one", async () => {
    const store = new RedisStore({ client: ioredisScriptClient(tcp), namespace: `legacy-${Date.now()}` });
    const token = crypto.randomUUID();
    await tcp.set(await store.key("old-done"), "d", "PX", 60_000);
    await tcp.set(await store.key("old-held"), `i:${token}`, "PX", 30_000);
    expect(await store.claim("old-done", undefined, "fp-new")).toStrictEqual({ status: "done" });
    const held = await store.claim("old-held", undefined, "fp-new");
    expect(held.status).toBe("in-flight");
    expect(Object.keys(held).sort()).toEqual(["retryAfterMs", "status"]);
    expect(await store.seenMany(["old-done", "old-held"])).toEqual([true, false]);
    expect(await store.inspect("old-done")).toMatchObject({ status: "done", retentionLeftMs: expect.any(Number) });
    expect(await store.inspect("old-held")).toMatchObject({ status: "in-flight", leaseLeftMs: expect.any(Number) });
    expect(await store.release("old-held", "not-the-token")).toBe(false);
    expect(await store.release("old-held", token)).toBe(true);
    await tcp.set(await store.key("old-held"), `i:${token}`, "PX", 30_000);
    await store.remember("old-held");
    expect(await tcp.get(await store.key("old-held"))).toBe("d");
    expect(await store.claim("old-held")).toStrictEqual({ status: "done" });
  });

  it("answers inspect from one command with the server's own PTTL", async () => {
    const store = new UpstashRedisStore({ client: rest, namespace: `inspect-${Date.now()}`, retentionMs: 86_400_000 });
    await store.claim("held", 30_000, "fp-h");
    await store.remember("done");
    const held = await store.inspect("held");
    expect(held).toMatchObject({ status: "in-flight", fingerprint: "fp-h" });
    expect(held?.leaseLeftMs).toBeGreaterThan(25_000);
    expect(held?.leaseLeftMs).toBeLessThanOrEqual(30_000);
    expect((await store.inspect("done"))?.retentionLeftMs).toBeGreaterThan(86_000_000);
    expect(await store.inspect("absent")).toBeNull();
  });

  it("rejects bad options", () => {
    expect(() => new UpstashRedisStore({})).toThrow(/url/);
    expect(() => new UpstashRedisStore({ url: "http://127.0.0.1:1" })).toThrow(/token/);
    expect(() => new UpstashRedisStore({ client: rest, namespace: "a:b" })).toThrow(/namespace/);
    expect(() => new UpstashRedisStore({ client: rest, prefix: "{x}" })).toThrow(/prefix/);
    expect(() => new UpstashRedisStore({ client: rest, timeoutMs: 0 })).toThrow(/timeoutMs/);
    expect(() => new RedisStore({ client: rest, hashTag: true })).toThrow(/hashTag/);
  });
});

describe("the Upstash bridge (test tool) speaks the REST protocol @upstash/redis expects", () => {
  const ns = `bridge-${Date.now().toString(36)}`;
  it("round-trips unicode and binary-looking strings with and without base64 responses", async () => {
    const plain = new UpstashRedis({ url: inject("upstashUrl"), token: inject("upstashToken"), enableTelemetry: false, responseEncoding: false });
    const value = "ünïcødé ☕ \u0000 \"quoted\" OK";
    await rest.set(`${ns}:v`, value);
    expect(await rest.get(`${ns}:v`)).toBe(value);
    expect(await plain.get(`${ns}:v`)).toBe(value);
    expect(await rest.set(`${ns}:ok`, "x")).toBe("OK");
  });

  it("runs /pipeline (per-command errors) and /multi-exec (atomic)", async () => {
    const pipeline = rest.pipeline();
    pipeline.set(`${ns}:p`, "1");
    pipeline.incr(`${ns}:p`);
    pipeline.hget(`${ns}:p`, "field");
    const results = await pipeline.exec({ keepErrors: true });
    expect(results[0]).toEqual({ result: "OK", error: undefined });
    expect(results[1]).toEqual({ result: 2, error: undefined });
    expect(results[2]?.error).toMatch(/WRONGTYPE/);
    const tx = rest.multi();
    tx.set(`${ns}:m`, "a");
    tx.append(`${ns}:m`, "b");
    tx.get(`${ns}:m`);
    expect(await tx.exec()).toEqual(["OK", 2, "ab"]);
  });

  it("refuses a wrong token with 401 and Upstash's error shape", async () => {
    const response = await fetch(inject("upstashUrl"), { method: "POST", headers: { authorization: "Bearer nope" }, body: '["PING"]' });
    expect(response.status).toBe(401);
    expect(await response.json()).toEqual({ error: expect.any(String) });
  });
});
