/**
 * The Redis stores' BabelQueue layouts against a real redis-server (started by test/setup/redis.ts):
 *
 *   - the store contract suite in "babelqueue-php" and "babelqueue-go", over TCP (ioredis) and over
 *     Upstash's REST protocol (@upstash/redis through the test bridge), with the cases these layouts
 *     cannot honour skipped with the reason (fingerprints of committed ids, lone surrogates);
 *   - cross-writer tests: records written with exactly the other SDK's commands (the literal
 *     commands of BabelQueue's PHP `RedisStore` and Go `idempotency-redis`, sent with ioredis —
 *     /work/notes/babelqueue-layouts.md) read correctly by our store, and our records satisfying the
 *     other SDK's reads (`GET == '2'`, `EXISTS`, PHP's Lua release, PHP's and Go's claims);
 *   - the same against a real PHP client (php-cli + phpredis sending the PHP SDK's commands,
 *     fixtures/php-sdk-redis.php) when this machine has them — `apt-get install php-cli php-redis`;
 *     skipped, with the reason, when it does not;
 *   - what `namespace`, `prefix`, `hashTag` and long ids mean in these layouts.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { Redis as UpstashRedis } from "@upstash/redis";
import { Redis as IORedis } from "ioredis";
import { afterAll, describe, expect, inject, it } from "vitest";
import { BatchEngine } from "../../../src/engine/index.js";
import { RedisStore, type RedisStoreOptions, UpstashRedisStore, ioredisScriptClient } from "../../../entry/upstash.js";
import { testStore } from "../contract.js";

const rest = new UpstashRedis({ url: inject("upstashUrl"), token: inject("upstashToken"), enableTelemetry: false });
const tcp = new IORedis({ host: "127.0.0.1", port: inject("redisPort"), lazyConnect: true });
afterAll(() => {
  tcp.disconnect();
});

const LAYOUTS = [
  { layout: "babelqueue-php", sdk: "PHP", base: "bq:idem:" },
  { layout: "babelqueue-go", sdk: "Go", base: "bq:idemp:" },
] as const;

for (const { layout, sdk, base } of LAYOUTS) {
  const skip = {
    "done-fingerprint": `the ${sdk} SDK's committed record is a bare value: it has no room for a payload fingerprint (documented as lost)`,
    "commit-keeps-fingerprint": `the ${sdk} SDK's committed record is a bare value: it has no room for a payload fingerprint (documented as lost)`,
    "lone-surrogates": `the ${sdk} SDK uses meta.id verbatim as UTF-8 text: a lone surrogate reads as U+FFFD (as Go's JSON decoder reads it)`,
  };
  // The suite isolates its tests by namespace; in a BabelQueue layout that is the SDK's own prefix.
  const prefixOf = (namespace: string) => `${base}${namespace}:`;
  testStore(`RedisStore, layout "${layout}" (TCP, ioredis)`, {
    claims: true,
    clock: "real",
    skip,
    make: ({ namespace, leaseMs, retentionMs }) =>
      new RedisStore({ client: ioredisScriptClient(tcp), layout, prefix: prefixOf(namespace), leaseMs, retentionMs }),
  });
  testStore(`UpstashRedisStore, layout "${layout}" (REST, @upstash/redis)`, {
    claims: true,
    clock: "real",
    skip,
    raceRounds: 2,
    make: ({ namespace, leaseMs, retentionMs }) => new UpstashRedisStore({ client: rest, layout, prefix: prefixOf(namespace), leaseMs, retentionMs }),
  });
}

let runs = 0;
/** A fresh id prefix, so cross-writer tests can use the SDKs' default key prefixes. */
const unique = (name: string) => {
  runs += 1;
  return `${name}-${Date.now().toString(36)}-${runs}`;
};

function store(layout: RedisStoreOptions["layout"], options: Partial<RedisStoreOptions> = {}): RedisStore {
  return new RedisStore({ client: ioredisScriptClient(tcp), layout, ...options });
}

/** PHP `RedisStore::release` (src/Idempotency/RedisStore.php): its Lua compare-and-delete of '1', verbatim in effect. */
const PHP_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
const php = {
  key: (id: string) => `bq:idem:${id}`,
  /** `ClaimingDispatch::wrap` with the default TTL: `SET bq:idem:<id> 1 PX 3600000 NX`. */
  claim: async (id: string, ms = 3_600_000) => (await tcp.call("SET", `bq:idem:${id}`, "1", "PX", String(ms), "NX")) === "OK",
  seen: async (id: string) => (await tcp.get(`bq:idem:${id}`)) === "2",
  remember: (id: string) => tcp.call("SET", `bq:idem:${id}`, "2"),
  release: (id: string) => tcp.eval(PHP_RELEASE, 1, `bq:idem:${id}`, "1"),
  /** What `ClaimingDispatch::wrap` does before running the handler: "run", "skip" or "park". */
  async dispatch(id: string, ms?: number): Promise<"run" | "skip" | "park"> {
    if (await this.seen(id)) return "skip";
    if (!(await this.claim(id, ms))) return (await this.seen(id)) ? "skip" : "park";
    return "run";
  },
};
const go = {
  key: (id: string) => `bq:idemp:${id}`,
  /** go-redis `SetNX(ctx, key, "1", ttl)`: `SETNX` for ttl 0, `SET … EX <s> NX` for whole seconds, `SET … PX <ms> NX` otherwise. */
  remember: async (id: string, ttlMs = 0) => {
    if (ttlMs === 0) return (await tcp.call("SETNX", `bq:idemp:${id}`, "1")) === 1;
    if (ttlMs % 1000 === 0) return (await tcp.call("SET", `bq:idemp:${id}`, "1", "EX", String(ttlMs / 1000), "NX")) === "OK";
    return (await tcp.call("SET", `bq:idemp:${id}`, "1", "PX", String(ttlMs), "NX")) === "OK";
  },
  seen: async (id: string) => (await tcp.exists(`bq:idemp:${id}`)) === 1,
  forget: (id: string) => tcp.del(`bq:idemp:${id}`),
};

function envelope(id: string): string {
  return JSON.stringify({ job: "urn:babel:orders:created", trace_id: "7b3f9c2a-e41d-4f88-9b2a-1c0d5e6f7a8b", data: { n: 1 }, meta: { id, schema_version: 1 }, attempts: 0 });
}

describe('layout "babelqueue-php": the records of BabelQueue\'s PHP RedisStore', () => {
  it("reads PHP's records: '2' is a duplicate, '1' parks with PHP's lease left, a released '1' is claimable", async () => {
    const ours = store("babelqueue-php");
    const done = unique("php-done");
    const held = unique("php-held");
    const freed = unique("php-freed");
    expect(await php.dispatch(done)).toBe("run");
    await php.remember(done);
    expect(await php.dispatch(held, 60_000)).toBe("run");
    expect(await php.dispatch(freed)).toBe("run");
    expect(await php.release(freed)).toBe(1);

    expect(await ours.claim(done, 30_000, "fp")).toStrictEqual({ status: "done" });
    const parked = await ours.claim(held, 30_000, "fp");
    expect(parked).toMatchObject({ status: "in-flight" });
    expect(Object.keys(parked).sort()).toEqual(["retryAfterMs", "status"]);
    if (parked.status === "in-flight") {
      expect(parked.retryAfterMs).toBeGreaterThan(50_000);
      expect(parked.retryAfterMs).toBeLessThanOrEqual(60_000);
    }
    expect(await ours.release(held, "any-token")).toBe(false);
    expect(await tcp.get(php.key(held))).toBe("1");
    expect((await ours.claim(freed)).status).toBe("claimed");
    expect(await ours.seenMany([done, held, freed])).toEqual([true, false, false]);
    expect(await ours.inspect(done)).toStrictEqual({ status: "done" });
    expect(await ours.inspect(held)).toMatchObject({ status: "in-flight", leaseLeftMs: expect.any(Number) });
  });

  it("writes PHP's records: our claim is PHP's '1' (PHP parks), our commit PHP's '2' with no expiry (PHP skips), PHP's release never drops it", async () => {
    const ours = store("babelqueue-php");
    const id = unique("ours");
    const claim = await ours.claim(id, 45_000, "fp-ours");
    if (claim.status !== "claimed") throw new Error("expected claimed");
    expect(await tcp.get(php.key(id))).toBe("1");
    const lease = await tcp.pttl(php.key(id));
    expect(lease).toBeGreaterThan(40_000);
    expect(lease).toBeLessThanOrEqual(45_000);
    // Our token and fingerprint sit beside PHP's key, where PHP never looks.
    expect(await tcp.get(`bq:idem-lease:${id}`)).toBe(`${claim.token}:fp-ours`);
    expect(await php.dispatch(id)).toBe("park");
    expect(await ours.claim(id)).toMatchObject({ status: "in-flight", fingerprint: "fp-ours" });

    await ours.remember(id, "fp-ours");
    expect(await tcp.get(php.key(id))).toBe("2");
    expect(await tcp.pttl(php.key(id))).toBe(-1);
    expect(await tcp.exists(`bq:idem-lease:${id}`)).toBe(0);
    expect(await php.seen(id)).toBe(true);
    expect(await php.dispatch(id)).toBe("skip");
    expect(await php.release(id)).toBe(0);
    expect(await tcp.get(php.key(id))).toBe("2");
    expect(await ours.release(id, claim.token)).toBe(false);
    expect(await ours.claim(id)).toStrictEqual({ status: "done" });
  });

  it("our release is fenced: PHP's unfenced release of our '1' and a new PHP claim are never dropped by our stale token", async () => {
    const ours = store("babelqueue-php");
    const id = unique("stale");
    const claim = await ours.claim(id, 60_000, "fp-ours");
    if (claim.status !== "claimed") throw new Error("expected claimed");
    // A PHP worker whose own claim had expired releases: its Lua deletes any '1' — ours.
    expect(await php.release(id)).toBe(1);
    expect(await php.dispatch(id)).toBe("run"); // PHP claims again, for an hour
    // Our side key is still there, but no longer tied to the '1' it was written with.
    expect(await tcp.get(`bq:idem-lease:${id}`)).toBe(`${claim.token}:fp-ours`);
    const now = await ours.claim(id, 60_000, "fp-other");
    expect(now).toMatchObject({ status: "in-flight" });
    expect(Object.keys(now).sort()).toEqual(["retryAfterMs", "status"]);
    if (now.status === "in-flight") expect(now.retryAfterMs).toBeGreaterThan(3_500_000);
    expect(await ours.inspect(id)).toStrictEqual({ status: "in-flight", leaseLeftMs: expect.any(Number) });
    expect(await ours.release(id, claim.token)).toBe(false);
    expect(await tcp.get(php.key(id))).toBe("1");
    expect(await tcp.exists(`bq:idem-lease:${id}`)).toBe(0);
  });

  it("a mixed batch through the engine: PHP-done is a duplicate, PHP-held parks with its lease left, a new id runs and is PHP-done after", async () => {
    const ours = new UpstashRedisStore({ client: rest, layout: "babelqueue-php" });
    const [done, held, fresh] = [unique("b-done"), unique("b-held"), unique("b-new")];
    await php.remember(done);
    await php.claim(held, 90_000);
    const ran: string[] = [];
    const engine = new BatchEngine(ours, (_message, context) => {
      ran.push(context.key ?? "");
    });
    const results = await engine.process([done, held, fresh].map((id) => ({ body: envelope(id), context: {} })));
    expect(results.map((result) => result.status)).toEqual(["duplicate", "in-flight", "ran"]);
    expect(results.map((result) => result.ack)).toEqual([true, false, true]);
    expect(results[1]?.retryAfterMs).toBeGreaterThan(80_000);
    expect(ran).toEqual([fresh]);
    expect(await php.seen(fresh)).toBe(true);
    expect(await php.dispatch(fresh)).toBe("skip");
  });

  it("retentionMs, when given, is a PX on PHP's '2', which PHP reads the same", async () => {
    const ours = store("babelqueue-php", { retentionMs: 86_400_000 });
    const id = unique("kept");
    await ours.remember(id);
    expect(await tcp.get(php.key(id))).toBe("2");
    expect(await tcp.pttl(php.key(id))).toBeGreaterThan(86_000_000);
    expect(await php.seen(id)).toBe(true);
    expect(await ours.inspect(id)).toMatchObject({ status: "done", retentionLeftMs: expect.any(Number) });
  });
});

describe('layout "babelqueue-go": the records of BabelQueue\'s Go idempotency-redis store', () => {
  it("reads Go's records, whichever form go-redis wrote them in (SETNX, EX, PX): a duplicate; DEL (Go's Forget) makes the id claimable", async () => {
    const ours = store("babelqueue-go");
    const ids = [unique("setnx"), unique("ex"), unique("px")];
    expect(await go.remember(ids[0] as string)).toBe(true);
    expect(await go.remember(ids[1] as string, 86_400_000)).toBe(true);
    expect(await go.remember(ids[2] as string, 90_500)).toBe(true);
    expect(await ours.claimMany(ids, 30_000, ["a", "b", "c"])).toStrictEqual([{ status: "done" }, { status: "done" }, { status: "done" }]);
    expect(await ours.seenMany(ids)).toEqual([true, true, true]);
    expect(await ours.inspect(ids[0] as string)).toStrictEqual({ status: "done" });
    expect(await ours.inspect(ids[1] as string)).toMatchObject({ status: "done", retentionLeftMs: expect.any(Number) });
    await go.forget(ids[0] as string);
    expect((await ours.claim(ids[0] as string)).status).toBe("claimed");
  });

  it("our claim is invisible to Go's EXISTS; our commit is exactly Go's done record, and Go's SETNX leaves it alone", async () => {
    const ours = store("babelqueue-go");
    const id = unique("ours");
    const claim = await ours.claim(id, 45_000, "fp-ours");
    if (claim.status !== "claimed") throw new Error("expected claimed");
    expect(await go.seen(id)).toBe(false);
    expect(await tcp.exists(go.key(id))).toBe(0);
    expect(await tcp.get(`bq:idemp-lease:${id}`)).toBe(`${claim.token}:fp-ours`);
    expect(await ours.claim(id)).toMatchObject({ status: "in-flight", fingerprint: "fp-ours" });
    expect(await ours.inspect(id)).toMatchObject({ status: "in-flight", fingerprint: "fp-ours" });

    await ours.remember(id, "fp-ours");
    expect(await tcp.get(go.key(id))).toBe("1");
    expect(await tcp.pttl(go.key(id))).toBe(-1);
    expect(await tcp.exists(`bq:idemp-lease:${id}`)).toBe(0);
    expect(await go.seen(id)).toBe(true);
    expect(await go.remember(id)).toBe(false);
    expect(await ours.claim(id)).toStrictEqual({ status: "done" });
  });

  it("Go has no in-flight state: Go committing an id we hold makes it done for us; our release then drops only our side key", async () => {
    const ours = store("babelqueue-go", { retentionMs: 3_600_000 });
    const id = unique("race");
    const claim = await ours.claim(id, 60_000);
    if (claim.status !== "claimed") throw new Error("expected claimed");
    expect(await go.remember(id, 7_200_000)).toBe(true);
    expect(await ours.claim(id)).toStrictEqual({ status: "done" });
    expect(await ours.release(id, claim.token)).toBe(true);
    expect(await tcp.exists(`bq:idemp-lease:${id}`)).toBe(0);
    expect(await go.seen(id)).toBe(true);
    // Our commit after Go's never rewrites Go's record (SET NX, like Go's own Remember).
    await ours.remember(id);
    expect(await tcp.pttl(go.key(id))).toBeGreaterThan(7_000_000);
  });

  it("a mixed batch through the engine over REST: Go-done is a duplicate, a new id runs and Go sees it done", async () => {
    const ours = new UpstashRedisStore({ client: rest, layout: "babelqueue-go", retentionMs: 86_400_000 });
    const [done, fresh] = [unique("b-done"), unique("b-new")];
    await go.remember(done);
    const engine = new BatchEngine(ours, () => undefined);
    const results = await engine.process([done, fresh].map((id) => ({ body: envelope(id), context: {} })));
    expect(results.map((result) => result.status)).toEqual(["duplicate", "ran"]);
    expect(await go.seen(fresh)).toBe(true);
    expect(await tcp.get(go.key(fresh))).toBe("1");
    expect(await tcp.pttl(go.key(fresh))).toBeGreaterThan(86_000_000);
  });
});

describe("one batch naming an id twice (every layout)", () => {
  for (const layout of ["babelqueue-serverless", "babelqueue-php", "babelqueue-go"] as const) {
    it(`${layout}: claims it once, the second copy is in flight; a key of another type is never overwritten`, async () => {
      const options = layout === "babelqueue-serverless" ? { namespace: unique("twice") } : { prefix: `${layout === "babelqueue-php" ? "bq:idem:" : "bq:idemp:"}${unique("twice")}:` };
      const ours = store(layout, options);
      for (const redelivered of [false, true]) {
        const id = unique(`twice-${redelivered}`);
        const claims = await ours.claimMany([id, id], 60_000, ["fp", "fp"], { redelivered: [redelivered, redelivered] });
        expect(claims.map((claim) => claim.status)).toEqual(["claimed", "in-flight"]);
        expect(claims[1]).toMatchObject({ fingerprint: "fp" });
      }
      const odd = unique("hash");
      await tcp.hset(await ours.key(odd), "field", "value");
      if (layout === "babelqueue-go") {
        // One MGET reads Go's keys, and MGET sees only strings: a key of another type (never one Go
        // writes) is not read as done, as Go's EXISTS would. Documented in docs/concepts/fleet.md.
        expect((await ours.claimMany([odd], 60_000, undefined, { redelivered: [true] }))[0]?.status).toBe("claimed");
      } else {
        await expect(ours.claimMany([odd], 60_000, undefined, { redelivered: [true] })).rejects.toThrow(/WRONGTYPE/);
      }
      expect(await tcp.type(await ours.key(odd))).toBe("hash");
    });
  }
});

describe("namespaces, prefixes, hash tags and long ids in a BabelQueue layout", () => {
  it("keys ids verbatim under the SDK's prefix, a custom one too; the side key is the prefix turned into -lease:", async () => {
    expect(await store("babelqueue-php").key("m-1")).toBe("bq:idem:m-1");
    expect(await store("babelqueue-go").key("m-1")).toBe("bq:idemp:m-1");
    const custom = store("babelqueue-php", { prefix: "orders:idem:" });
    expect(await custom.key("m-1")).toBe("orders:idem:m-1");
    const claim = await custom.claim(unique("custom"));
    expect(claim.status).toBe("claimed");
    const id = unique("m");
    await custom.claim(id);
    expect(await tcp.get(`orders:idem:${id}`)).toBe("1");
    expect(await tcp.exists(`orders:idem-lease:${id}`)).toBe(1);
    expect(await store("babelqueue-go", { prefix: "app_idemp_" }).key("x")).toBe("app_idemp_x");
  });

  it("never hashes a long id, as the SDKs never do: a 10 KB id is the key, and the SDK finds our record there", async () => {
    const long = `${unique("long")}-${"x".repeat(10 * 1024)}`;
    const ours = store("babelqueue-php");
    expect(await ours.key(long)).toBe(`bq:idem:${long}`);
    await ours.remember(long);
    expect(await php.seen(long)).toBe(true);
    const goStore = store("babelqueue-go");
    await go.remember(long);
    expect(await goStore.claim(long)).toStrictEqual({ status: "done" });
  });

  it("refuses a namespace, a hash tag and an empty prefix, naming the SDK's way", () => {
    expect(() => store("babelqueue-php", { namespace: "orders" })).toThrow(/namespace.*PHP SDK keys an id as <prefix><id>/);
    expect(() => store("babelqueue-go", { namespace: "orders" })).toThrow(/namespace.*Go SDK/);
    expect(() => store("babelqueue-go", { hashTag: true })).toThrow(/hashTag/);
    expect(() => store("babelqueue-php", { prefix: "" })).toThrow(/prefix.*"bq:idem:"/);
    expect(() => store("babelqueue-ruby" as never)).toThrow(/layout.*"babelqueue-serverless", "babelqueue-php", "babelqueue-go"/);
    expect(() => new UpstashRedisStore({ client: rest, layout: "babelqueue-go", namespace: "x" })).toThrow(/namespace/);
  });

  it("keeps committed ids for good by default (the SDKs' default) and says so", () => {
    expect(store("babelqueue-php").retentionMs).toBe(Number.POSITIVE_INFINITY);
    expect(store("babelqueue-go", { retentionMs: 60_000 }).retentionMs).toBe(60_000);
    expect(store(undefined).retentionMs).toBe(4 * 86_400_000);
    expect(store(undefined).layout).toBe("babelqueue-serverless");
  });
});

const PHP_SCRIPT = fileURLToPath(new URL("./fixtures/php-sdk-redis.php", import.meta.url));
const phpRedis = spawnSync("php", ["-r", "exit(extension_loaded('redis') ? 0 : 1);"], { stdio: "ignore" }).status === 0;

describe("against a real PHP client (php-cli + phpredis, the PHP SDK's commands)", () => {
  if (!phpRedis) {
    it.skip("php-cli with the redis extension is not installed here (apt-get install php-cli php-redis)", () => {});
    return;
  }
  /** One PHP SDK operation on `id` under PHP's default prefix; its JSON answer. */
  const phpRun = (action: string, id: string, ttlSeconds?: number): unknown => {
    const args = [PHP_SCRIPT, String(inject("redisPort")), "bq:idem:", action, id, ...(ttlSeconds === undefined ? [] : [String(ttlSeconds)])];
    const result = spawnSync("php", args, { encoding: "utf8", timeout: 20_000 });
    if (result.status !== 0) throw new Error(`php ${action} failed: ${result.stderr}`);
    return JSON.parse(result.stdout);
  };

  it("PHP-committed is a duplicate for us; PHP-held parks us; ours parks PHP, and once committed PHP skips it", async () => {
    const ours = new UpstashRedisStore({ client: rest, layout: "babelqueue-php" });
    const [phpDone, phpHeld, mine] = [unique("php-cli-done"), unique("php-cli-held"), unique("php-cli-mine")];
    expect(phpRun("dispatch", phpDone)).toBe("run");
    expect(phpRun("remember", phpDone)).toBe(true);
    expect(phpRun("dispatch", phpHeld, 120)).toBe("run");

    expect(await ours.claim(phpDone)).toStrictEqual({ status: "done" });
    const parked = await ours.claim(phpHeld);
    expect(parked.status).toBe("in-flight");
    if (parked.status === "in-flight") expect(parked.retryAfterMs).toBeGreaterThan(100_000);

    const claim = await ours.claim(mine, 60_000);
    expect(claim.status).toBe("claimed");
    expect(phpRun("seen", mine)).toBe(false);
    expect(phpRun("dispatch", mine)).toBe("park");
    await ours.remember(mine);
    expect(phpRun("seen", mine)).toBe(true);
    expect(phpRun("dispatch", mine)).toBe("skip");
    expect(phpRun("release", mine)).toBe(0);
    expect(await ours.seen(mine)).toBe(true);
    // PHP's forget is a DEL: the id runs again, for us too.
    expect(phpRun("forget", mine)).toBe(1);
    expect((await ours.claim(mine)).status).toBe("claimed");
  });
});

