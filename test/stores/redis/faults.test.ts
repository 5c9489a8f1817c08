/**
 * The Redis stores' cost and failure behaviour, against a real redis-server and a bridge of this
 * file's own (so its counters and fault switches are not shared with other test files):
 *   - requests and Redis commands per batch through the BatchEngine (new / duplicates / failures);
 *   - scripts loaded once, and the NOSCRIPT fallback after SCRIPT FLUSH mid-run;
 *   - faults — the REST endpoint answering 500, hanging past the timeout, refusing the token, Redis
 *     itself stopped (REST and TCP) — each a StoreUnavailableError: the handler not run, nothing acked;
 *   - neither the REST token nor a fencing token in any error, cause or console line.
 */
import { inspect } from "node:util";
import { Redis as UpstashRedis } from "@upstash/redis";
import { Redis as IORedis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, inject, it, vi } from "vitest";
import { BatchEngine } from "../../../src/engine/index.js";
import { PartialStepError, StoreUnavailableError } from "../../../src/errors.js";
import { type RedisScriptClient, RedisStore, UpstashRedisStore, ioredisScriptClient } from "../../../entry/upstash.js";
import { type RedisServer, startRedisServer } from "../../setup/redis.js";
import { type UpstashBridge, startUpstashBridge } from "../../support/upstash-bridge.js";

const TOKEN = `rest-token-${crypto.randomUUID()}`;
let bridge: UpstashBridge;
let admin: IORedis;
let run = 0;

beforeAll(async () => {
  bridge = await startUpstashBridge({ redisPort: inject("redisPort"), token: TOKEN });
  admin = new IORedis({ host: "127.0.0.1", port: inject("redisPort") });
});
afterAll(async () => {
  await bridge.close();
  admin.disconnect();
});
afterEach(() => {
  bridge.fault = "none";
  bridge.faultIf = undefined;
  bridge.repeatIf = undefined;
  bridge.resetIf = undefined;
});

function restClient(token = TOKEN): UpstashRedis {
  // `retries: 0`: one attempt (`retry: false` still makes two in @upstash/redis).
  return new UpstashRedis({ url: bridge.url, token, enableTelemetry: false, retry: { retries: 0 } });
}

function namespace(): string {
  run += 1;
  return `faults-${Date.now().toString(36)}-${run}`;
}

function envelope(id: string): string {
  return JSON.stringify({
    job: "urn:babel:orders:created",
    trace_id: "7b3f9c2a-e41d-4f88-9b2a-1c0d5e6f7a8b",
    data: { order_id: 1 },
    meta: { id, schema_version: 1 },
    attempts: 0,
  });
}

function batch(prefix: string, n: number) {
  return Array.from({ length: n }, (_, i) => ({ body: envelope(`${prefix}-${i}`), context: {} }));
}

/** Everything an error could show a log or a person: message, stack, cause chain, own fields. */
function everythingIn(error: unknown): string {
  return `${String(error)}\n${inspect(error, { depth: 10, showHidden: true })}\n${JSON.stringify(error)}`;
}

describe("cost per batch (REST, through the BatchEngine)", () => {
  it("10 new messages: 2 requests of 10 plain SETs each; 10 unflagged duplicates: 2 requests (SETs held back, then the claim script reads them); 10 failures: 2", async () => {
    const store = new UpstashRedisStore({ client: restClient(), namespace: namespace() });
    // Warm the script cache (a fresh server answers the first EVALSHA of each script with NOSCRIPT).
    const warm = await store.claimMany(["warm"], undefined, undefined, { redelivered: [true] }); // the claim script, not the plain SET
    await store.releaseMany(warm.flatMap((claim) => (claim.status === "claimed" ? [{ id: "warm", token: claim.token }] : [])));
    await store.rememberMany(["warm"]);

    let effects = 0;
    const ok = new BatchEngine(store, () => {
      effects += 1;
    });
    bridge.reset();
    const fresh = await ok.process(batch("new", 10));
    expect(fresh.map((r) => r.status)).toEqual(Array(10).fill("ran"));
    expect(effects).toBe(10);
    const sets = Array(10).fill("SET");
    expect({ requests: bridge.requests, commands: bridge.commands, log: bridge.log }).toEqual({ requests: 2, commands: 20, log: [sets, sets] });

    bridge.reset();
    const again = await ok.process(batch("new", 10));
    expect(again.map((r) => r.status)).toEqual(Array(10).fill("duplicate"));
    expect(effects).toBe(10);
    expect({ requests: bridge.requests, commands: bridge.commands, log: bridge.log }).toEqual({ requests: 2, commands: 11, log: [sets, ["EVALSHA"]] });

    const failing = new BatchEngine(store, () => {
      throw new Error("handler failed (scripted)");
    });
    bridge.reset();
    const failed = await failing.process(batch("fails", 10));
    expect(failed.map((r) => r.status)).toEqual(Array(10).fill("failed"));
    expect({ requests: bridge.requests, commands: bridge.commands, log: bridge.log }).toEqual({ requests: 2, commands: 11, log: [Array(10).fill("SET"), ["EVALSHA"]] });
    // The releases happened: the next delivery claims again instead of parking as in-flight.
    expect((await store.claimMany(["fails-0", "fails-9"])).map((c) => c.status)).toEqual(["claimed", "claimed"]);
  });

  it("a first-delivery claim batch is one pipelined request of SETs; a commit without fingerprints one script; a re-claim of held ids one more; inspect one", async () => {
    const store = new UpstashRedisStore({ client: restClient(), namespace: namespace() });
    await store.claimMany(["warm"], undefined, ["fp"]);
    await store.rememberMany(["warm"], ["fp"]);
    await store.inspect("warm");
    bridge.reset();
    const ids = Array.from({ length: 10 }, (_, i) => `fp-${i}`);
    const fingerprints = ids.map((id, i) => (i % 3 === 0 ? undefined : `sha-${id}`));
    const claims = await store.claimMany(ids, undefined, fingerprints);
    expect(claims.every((claim) => claim.status === "claimed")).toBe(true);
    await store.rememberMany(ids);
    const again = await store.claimMany(ids);
    expect(again.map((claim) => (claim.status === "done" ? (claim.fingerprint ?? null) : claim.status))).toEqual(
      fingerprints.map((fingerprint) => fingerprint ?? null),
    );
    expect(await store.inspect("fp-1")).toMatchObject({ status: "done", fingerprint: "sha-fp-1" });
    const sets = Array(10).fill("SET");
    expect({ requests: bridge.requests, commands: bridge.commands, log: bridge.log }).toEqual({
      requests: 5,
      commands: 23,
      log: [sets, ["EVALSHA"], sets, ["EVALSHA"], ["EVALSHA"]],
    });
  });

  it("falls back to EVAL once after SCRIPT FLUSH mid-run, then uses EVALSHA again", async () => {
    const store = new UpstashRedisStore({ client: restClient(), namespace: namespace() });
    let effects = 0;
    // The script path: redeliveries (the claim script reads first) and no fingerprints (the commit script reads them).
    const engine = new BatchEngine(
      store,
      () => {
        effects += 1;
      },
      { fingerprint: false },
    );
    const redelivered = (label: string, n: number) => batch(label, n).map((delivery) => ({ ...delivery, redeliveries: 1 }));
    await engine.process(redelivered("before", 3));
    await admin.script("FLUSH");
    bridge.reset();
    const after = await engine.process(redelivered("after", 5));
    expect(after.map((r) => r.status)).toEqual(Array(5).fill("ran"));
    expect(bridge.log).toEqual([["EVALSHA"], ["EVAL"], ["EVALSHA"], ["EVAL"]]);
    bridge.reset();
    const next = await engine.process(redelivered("next", 5));
    expect(next.map((r) => r.status)).toEqual(Array(5).fill("ran"));
    expect(bridge.log).toEqual([["EVALSHA"], ["EVALSHA"]]);
    expect(effects).toBe(13);
  });

  it("falls back the same way over TCP (ioredis), and with hash-tagged keys", async () => {
    const tcp = new RedisStore({ client: ioredisScriptClient(admin), namespace: namespace(), hashTag: true });
    expect(await tcp.key("a")).toBe(`bq:{${tcp.namespace}}:a`);
    await admin.script("FLUSH");
    const claims = await tcp.claimMany(["a", "b"]);
    expect(claims.map((claim) => claim.status)).toEqual(["claimed", "claimed"]);
    await tcp.rememberMany(["a", "b"]);
    expect(await tcp.seenMany(["a", "b", "c"])).toEqual([true, true, false]);
    expect(await admin.get(await tcp.key("a"))).toBe("d");
  });
});

describe("billed commands per batch, as Upstash bills them (the EVALSHA + every command the script runs)", () => {
  // A redis-server of this test's own: INFO commandstats counts every command the server ran, inner
  // script commands included, and no other test file's commands may land in the counts.
  let own: RedisServer;
  let ownBridge: UpstashBridge;
  let ownAdmin: IORedis;
  beforeAll(async () => {
    own = await startRedisServer();
    ownBridge = await startUpstashBridge({ redisPort: own.port, token: TOKEN });
    ownAdmin = new IORedis({ host: "127.0.0.1", port: own.port });
  });
  afterAll(async () => {
    ownAdmin.disconnect();
    await ownBridge.close();
    await own.stop();
  });

  /** The commands the server ran while `work` ran, by name (INFO itself and CONFIG excluded). */
  async function billed(work: () => Promise<unknown>): Promise<Record<string, number>> {
    await ownAdmin.config("RESETSTAT");
    await work();
    const counts: Record<string, number> = {};
    for (const line of (await ownAdmin.info("commandstats")).split(/\r?\n/)) {
      const match = /^cmdstat_([^:]+):calls=(\d+)/.exec(line);
      if (match && !/^(info|config)/.test(match[1] as string)) counts[match[1] as string] = Number(match[2]);
    }
    return counts;
  }

  const deliveries = (prefix: string, n: number, redeliveries = 0) =>
    Array.from({ length: n }, (_, i) => ({ body: envelope(`${prefix}-${i}`), redeliveries, context: {} }));

  it("a claim whose EVALSHA answers NOSCRIPT after its step timed out is not sent again as EVAL: it never runs", async () => {
    const tcp = new IORedis({ host: "127.0.0.1", port: own.port });
    const store = new RedisStore({ client: ioredisScriptClient(tcp), namespace: namespace(), timeoutMs: 100 });
    try {
      await ownAdmin.script("FLUSH");
      const counts = await billed(async () => {
        // The server is kept busy for 600 ms (a script spinning on its clock): the claim's EVALSHA
        // waits in its socket, the step times out at 100 ms, and the release is sent behind it.
        const spin = ownAdmin.eval("local t = redis.call('TIME') local e = t[1] * 1000000 + t[2] + 600000 while true do t = redis.call('TIME') if t[1] * 1000000 + t[2] >= e then break end end return 1", 0);
        await new Promise((resolve) => setTimeout(resolve, 20));
        const failed = await store.claimMany(["late"]).then(
          () => undefined,
          (error: unknown) => error,
        );
        expect(failed).toBeInstanceOf(StoreUnavailableError);
        await spin;
        await new Promise((resolve) => setTimeout(resolve, 300));
      });
      // EVALSHA: the claim's and the release's, both NOSCRIPT. EVAL: the spin and the release only.
      // No SET: the claim script never ran (it would SET the fresh key).
      expect(counts).toMatchObject({ evalsha: 2, eval: 2 });
      expect(counts.set).toBeUndefined();
      expect(await ownAdmin.exists(await store.key("late"))).toBe(0);
    } finally {
      tcp.disconnect();
    }
  });

  it("new: N plain SETs to claim, N to commit; committed redeliveries: 1 + 1; failures: N, then 1 + 2 to release", async () => {
    const store = new UpstashRedisStore({
      client: new UpstashRedis({ url: ownBridge.url, token: TOKEN, enableTelemetry: false }),
      namespace: namespace(),
    });
    let fail = false;
    const engine = new BatchEngine(store, () => {
      if (fail) throw new Error("handler failed (scripted)");
    });
    await engine.process(deliveries("warm", 1, 1)); // loads the claim script (a redelivery reads first)
    fail = true;
    await engine.process(deliveries("warm-fail", 1)); // and the release script
    fail = false;

    expect(await billed(() => engine.process(deliveries("new", 10)))).toEqual({ set: 20 });
    expect(await billed(() => engine.process(deliveries("new", 10, 1)))).toEqual({ evalsha: 1, mget: 1 });
    // A redelivery the engine did not flag (a body with attempts 0, first receive): the SETs, held back, then the claim script's one MGET.
    expect(await billed(() => engine.process(deliveries("new", 10)))).toEqual({ evalsha: 1, set: 10, mget: 1 });
    fail = true;
    expect(await billed(() => engine.process(deliveries("fails", 10)))).toEqual({ evalsha: 1, set: 10, mget: 1, del: 1 });
    fail = false;
    // Released: the redeliveries find nothing and claim again, 1 MGET + 1 SET each; the commit as for new ones.
    expect(await billed(() => engine.process(deliveries("fails", 10, 1)))).toEqual({ evalsha: 1, mget: 1, set: 20 });
  });

  it("an in-flight answer adds one PTTL; a commit without a fingerprint reads the claim's with one MGET", async () => {
    const store = new RedisStore({ client: ioredisScriptClient(ownAdmin), namespace: namespace() });
    await store.claimMany(["w"], 60_000, ["fp"]);
    await store.rememberMany(["w"]);
    expect(await billed(() => store.claimMany(["a", "b", "c"], 60_000, ["fp-a", "fp-b", "fp-c"]))).toEqual({ evalsha: 1, set: 3 });
    expect(await billed(() => store.claimMany(["a", "b", "c"], 60_000, undefined, { redelivered: [true, true, true] }))).toEqual({
      evalsha: 1,
      mget: 1,
      pttl: 3,
    });
    expect(await billed(() => store.rememberMany(["a", "b", "c"]))).toEqual({ evalsha: 1, mget: 1, set: 3 });
    expect(await store.claimMany(["a", "b", "c"])).toEqual([
      { status: "done", fingerprint: "fp-a" },
      { status: "done", fingerprint: "fp-b" },
      { status: "done", fingerprint: "fp-c" },
    ]);
  });
});

describe("faults become StoreUnavailableError: handler not run, nothing acked", () => {
  async function expectFailClosed(store: RedisStore, label: string): Promise<StoreUnavailableError> {
    let effects = 0;
    const engine = new BatchEngine(store, () => {
      effects += 1;
    });
    const results = await engine.process(batch(label, 3));
    expect(effects).toBe(0);
    for (const result of results) {
      expect(result.status).toBe("failed");
      expect(result.ack).toBe(false);
      expect(result.handlerRan).toBe(false);
      expect(result.error).toBeInstanceOf(StoreUnavailableError);
    }
    return results[0]?.error as StoreUnavailableError;
  }

  it("the REST endpoint answering 500", async () => {
    const store = new UpstashRedisStore({ client: restClient(), namespace: namespace() });
    bridge.fault = "500";
    const error = await expectFailClosed(store, "e500");
    expect(error.message).toMatch(/^UpstashRedisStore\.claimMany failed: .*Internal Server Error/);
    await expect(store.remember("x")).rejects.toBeInstanceOf(StoreUnavailableError);
  });

  it("the REST endpoint hanging past the timeout (a given client, and one made from url + token)", async () => {
    bridge.fault = "hang";
    const given = new UpstashRedisStore({ client: restClient(), namespace: namespace(), timeoutMs: 300 });
    const started = Date.now();
    const error = await expectFailClosed(given, "hang");
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(error.message).toMatch(/no answer within 300 ms/);
    const made = new UpstashRedisStore({ url: bridge.url, token: TOKEN, namespace: namespace(), timeoutMs: 300 });
    const second = await expectFailClosed(made, "hang2");
    expect(second.store).toBe("UpstashRedisStore");
  });

  it("a connection dropped after the claim landed: the store's own client sends it once — the step fails, the store releases it, and the id is claimable at once", async () => {
    const store = new UpstashRedisStore({ url: bridge.url, token: TOKEN, namespace: namespace(), timeoutMs: 2_000 });
    let dropped = 0;
    bridge.resetIf = (commands) => {
      if (dropped > 0 || commands[0]?.[0] !== "SET") return false;
      dropped += 1;
      return true;
    };
    bridge.reset();
    await expect(store.claimMany(["reset-1"])).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(dropped).toBe(1);
    // Sent once: @upstash/redis' default retries would have resent the claim's SET after the network error.
    expect(bridge.log.filter((request) => request.includes("SET"))).toHaveLength(1);
    // The release the store sent behind the failed step took the landed claim back.
    expect((await store.claimMany(["reset-1"])).map((claim) => claim.status)).toEqual(["claimed"]);
  });

  it("a refused token", async () => {
    const store = new UpstashRedisStore({ client: restClient("wrong-token-value"), namespace: namespace() });
    const error = await expectFailClosed(store, "auth");
    expect(error.message).toMatch(/Unauthorized/);
    expect(everythingIn(error)).not.toContain("wrong-token-value");
  });

  it("a first-delivery step whose second request (the claim script, for a duplicate) fails holds nothing: the plain SETs' claims are given back", async () => {
    const store = new UpstashRedisStore({ client: restClient(), namespace: namespace() });
    await store.claimMany(["dup"], undefined, ["fp-dup"]);
    await store.rememberMany(["dup"], ["fp-dup"]);
    let failed = 0;
    bridge.faultIf = (commands) => {
      if (failed > 0 || commands[0]?.[0] !== "EVALSHA") return false;
      failed += 1;
      return true;
    };
    // "new" wins its SET NX; "dup" is held back by its record, so the claim script runs for it alone — and that request fails.
    await expect(store.claimMany(["new", "dup"], 60_000, ["fp-new", "fp-dup"])).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(failed).toBe(1);
    expect(await store.inspect("new")).toBeNull();
    const again = await store.claimMany(["new", "dup"], 60_000, ["fp-new", "fp-dup"]);
    expect(again.map((claim) => claim.status)).toEqual(["claimed", "done"]);
  });

  describe("Redis itself stopped", () => {
    let own: RedisServer;
    let ownBridge: UpstashBridge;
    beforeAll(async () => {
      own = await startRedisServer();
      ownBridge = await startUpstashBridge({ redisPort: own.port, token: TOKEN });
    });
    afterAll(async () => {
      await ownBridge.close();
      await own.stop();
    });

    it("over REST and over TCP", async () => {
      const rest = new UpstashRedisStore({
        client: new UpstashRedis({ url: ownBridge.url, token: TOKEN, enableTelemetry: false, retry: false }),
        namespace: namespace(),
      });
      const tcpClient = new IORedis({ host: "127.0.0.1", port: own.port, maxRetriesPerRequest: 1 });
      tcpClient.on("error", () => {});
      const tcp = new RedisStore({ client: ioredisScriptClient(tcpClient), namespace: namespace(), timeoutMs: 1_000 });
      expect((await rest.claim("up")).status).toBe("claimed");
      expect((await tcp.claim("up")).status).toBe("claimed");
      await own.stop();
      const restError = await expectFailClosed(rest, "down-rest");
      expect(restError.message).toMatch(/Redis is not reachable/);
      const tcpError = await expectFailClosed(tcp, "down-tcp");
      expect(tcpError.store).toBe("RedisStore");
      tcpClient.disconnect();
    });
  });
});

describe("a claim the transport sent twice (its first answer lost): the record holds this call's own token", () => {
  /** Repeats the first request whose first command is `name` (mock: a lost answer, which the bridge cannot lose on its own). */
  const repeatOnce = (name: string) => {
    let repeated = 0;
    bridge.repeatIf = (commands) => {
      if (repeated > 0 || commands[0]?.[0] !== name) return false;
      repeated += 1;
      return true;
    };
    return () => repeated;
  };

  for (const layout of ["babelqueue-serverless", "babelqueue-php", "babelqueue-go"] as const) {
    it(`${layout}: the claim script run twice answers claimed, and the claim is ours to release and to commit`, async () => {
      const prefix = `twice-${layout}-${namespace()}:`;
      const store = new UpstashRedisStore({ client: restClient(), layout, prefix });
      const repeated = repeatOnce("EVALSHA");
      // Redelivered: the store reads first, through the claim script.
      const claims = await store.claimMany(["a", "b"], 60_000, ["fp-a", "fp-b"], { redelivered: [true, true] });
      expect(repeated()).toBe(1);
      expect(claims.map((claim) => claim.status)).toEqual(["claimed", "claimed"]);
      const [a, b] = claims as { token: string }[];
      expect(await store.release("a", (a as { token: string }).token)).toBe(true);
      expect(await store.inspect("a")).toBeNull();
      await store.remember("b", "fp-b");
      expect((await store.claim("b")).status).toBe("done");
      expect(b).toBeDefined();
    });
  }

  it("the plain SETs of first deliveries sent twice: the claim script, given the SETs' own tokens, answers claimed", async () => {
    const store = new UpstashRedisStore({ client: restClient(), namespace: namespace() });
    const repeated = repeatOnce("SET");
    const claims = await store.claimMany(["p", "q"], 60_000, ["fp-p", "fp-q"]);
    expect(repeated()).toBe(1);
    expect(claims.map((claim) => claim.status)).toEqual(["claimed", "claimed"]);
    const { token } = claims[0] as { token: string };
    expect(await store.release("p", token)).toBe(true);
    // Someone else's claim is still in flight for another call: a second store's claim of q is held.
    expect((await new UpstashRedisStore({ client: restClient(), namespace: store.namespace }).claim("q")).status).toBe("in-flight");
  });
});

describe("a commit or forget whose reply is not Redis's (mock: a client that answers without asking Redis)", () => {
  it("is a StoreUnavailableError, never taken for done", async () => {
    const real = ioredisScriptClient(admin);
    let bogus = false;
    const client: RedisScriptClient = {
      eval: (script, keys, args) => (bogus ? Promise.resolve("This operation was aborted") : real.eval(script, keys, args)),
      evalsha: (sha, keys, args) => (bogus ? Promise.resolve("This operation was aborted") : real.evalsha(sha, keys, args)),
    };
    for (const layout of ["babelqueue-serverless", "babelqueue-php", "babelqueue-go"] as const) {
      const store = new RedisStore({ client, layout, prefix: `bogus-${layout}-${namespace()}:` });
      const claim = await store.claim("c");
      expect(claim.status, layout).toBe("claimed");
      bogus = true;
      await expect(store.remember("c"), layout).rejects.toBeInstanceOf(StoreUnavailableError);
      await expect(store.forget("c"), layout).rejects.toBeInstanceOf(StoreUnavailableError);
      bogus = false;
      expect((await store.inspect("c"))?.status, layout).toBe("in-flight");
    }
  });
});

describe("a commit step that failed for some of its scripts only (mock: one bucket's call refused)", () => {
  it("rejects with a PartialStepError naming exactly that bucket's ids; the other buckets' commits stand", async () => {
    const real = ioredisScriptClient(admin);
    const refused: string[][] = [];
    let refuse: string | undefined;
    // One bucket's script call fails: the one carrying `refuse`'s key (a fault on demand, for one call of a step).
    const pick = (keys: string[]): Promise<unknown> | undefined => {
      if (refuse === undefined || !keys.some((key) => key.endsWith(`:${refuse}`))) return undefined;
      refused.push(keys);
      return Promise.reject(Object.assign(new Error("LOADING Redis is loading the dataset in memory"), { name: "ReplyError" }));
    };
    const client: RedisScriptClient = {
      eval: (script, keys, args) => pick(keys) ?? real.eval(script, keys, args),
      evalsha: (sha, keys, args) => pick(keys) ?? real.evalsha(sha, keys, args),
    };
    const store = new RedisStore({ client, namespace: namespace(), buckets: 8 });
    const ids = Array.from({ length: 40 }, (_, i) => `b-${i}`);
    refuse = "b-7";
    const error = await store.rememberMany(ids).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PartialStepError);
    expect(refused).toHaveLength(1);
    const inRefusedCall = ids.filter((id) => (refused[0] as string[]).some((key) => key.endsWith(`:${id}`)));
    expect(inRefusedCall).toContain("b-7");
    expect(inRefusedCall.length).toBeLessThan(ids.length);
    const errors = (error as PartialStepError).errors;
    expect(ids.filter((_, i) => errors[i] !== undefined)).toEqual(inRefusedCall);
    expect((errors[7] as StoreUnavailableError).operation).toBe("rememberMany");
    refuse = undefined;
    expect(await store.seenMany(ids)).toEqual(ids.map((id) => !inRefusedCall.includes(id)));
    // Every id of the step in the refused call: that call's error, as one.
    refuse = "b-7";
    const whole = await store.rememberMany(inRefusedCall).catch((e: unknown) => e);
    expect(whole).toBeInstanceOf(StoreUnavailableError);
    expect(whole).not.toBeInstanceOf(PartialStepError);
  });
});

describe("secrets never leave the store", () => {
  it("keeps the REST token and fencing tokens out of errors, causes and console output", async () => {
    const lines: string[] = [];
    const spies = (["log", "info", "warn", "error", "debug", "trace"] as const).map((level) =>
      vi.spyOn(console, level).mockImplementation((...args: unknown[]) => {
        lines.push(args.map((arg) => inspect(arg, { depth: 10 })).join(" "));
      }),
    );
    try {
      const errors: unknown[] = [];
      const tokens: string[] = [];
      const stores = [
        new UpstashRedisStore({ client: restClient(), namespace: namespace(), timeoutMs: 300 }),
        new UpstashRedisStore({ url: bridge.url, token: TOKEN, namespace: namespace(), timeoutMs: 300 }),
      ];
      for (const store of stores) {
        const claims = await store.claimMany(["s-1", "s-2"]);
        const refs = claims.flatMap((claim, i) => (claim.status === "claimed" ? [{ id: `s-${i + 1}`, token: claim.token }] : []));
        tokens.push(...refs.map((ref) => ref.token));
        for (const fault of ["500", "hang"] as const) {
          bridge.fault = fault;
          for (const call of [
            () => store.release("s-1", refs[0]?.token ?? ""),
            () => store.releaseMany(refs),
            () => store.claim("s-3"),
            () => store.rememberMany(["s-1"]),
          ]) {
            await call().then(
              () => errors.push(new Error("expected a failure")),
              (error: unknown) => errors.push(error),
            );
          }
          bridge.fault = "none";
        }
      }
      expect(errors).toHaveLength(16);
      for (const error of errors) {
        expect(error).toBeInstanceOf(StoreUnavailableError);
        const text = everythingIn(error);
        expect(text).not.toContain(TOKEN);
        for (const token of tokens) expect(text).not.toContain(token);
        expect(text).not.toContain("EVALSHA");
      }
      const logged = lines.join("\n");
      expect(logged).not.toContain(TOKEN);
      for (const token of tokens) expect(logged).not.toContain(token);
    } finally {
      for (const spy of spies) spy.mockRestore();
    }
  });
});
