/**
 * DurableObjectStore + IdempotencyObject inside workerd: the shared store contract with one
 * shard, with several, and inside a migration window (growing and shrinking), the alarm sweep, the
 * number of Durable Object calls a batch costs, and what one failing shard does to a step.
 */
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { BatchEngine } from "../../src/engine/index.js";
import { storeKey } from "../../src/store-kit/keys.js";
import { PartialStepError, StoreUnavailableError } from "../../src/errors.js";
import { DurableObjectStore, type IdempotencyNamespace, type IdempotencyShard } from "../../stores/durable-object/store.js";
import { testStore } from "../stores/contract.js";

testStore("DurableObjectStore (1 shard)", {
  claims: true,
  clock: "real",
  make: ({ namespace, leaseMs, retentionMs }) => new DurableObjectStore(env.IDEMPOTENCY, { namespace, leaseMs, retentionMs }),
});

testStore("DurableObjectStore (4 shards)", {
  claims: true,
  clock: "real",
  make: ({ namespace, leaseMs, retentionMs }) =>
    new DurableObjectStore(env.IDEMPOTENCY, { namespace, leaseMs, retentionMs, shards: 4, objectName: "contract-4" }),
});

// Inside a migration window every moved key is claimed, committed, released and forgotten in two
// objects: the whole contract must still hold (fencing, the 50-claim race, lease and retention expiry).
testStore("DurableObjectStore (growing 4 → 6 shards, migration window)", {
  claims: true,
  clock: "real",
  make: ({ namespace, leaseMs, retentionMs }) =>
    new DurableObjectStore(env.IDEMPOTENCY, { namespace, leaseMs, retentionMs, shards: 6, previousShards: 4, objectName: "contract-window" }),
});

testStore("DurableObjectStore (shrinking 5 → 2 shards, migration window)", {
  claims: true,
  clock: "real",
  make: ({ namespace, leaseMs, retentionMs }) =>
    new DurableObjectStore(env.IDEMPOTENCY, { namespace, leaseMs, retentionMs, shards: 2, previousShards: 5, objectName: "contract-shrink" }),
});

/** The real binding, counting every RPC call by method and shard. */
function countingBinding(): { binding: IdempotencyNamespace; calls: Map<string, number>; total: () => number } {
  const calls = new Map<string, number>();
  const real = env.IDEMPOTENCY;
  const binding: IdempotencyNamespace<{ id: DurableObjectId; name: string }> = {
    idFromName: (name) => ({ id: real.idFromName(name), name }),
    get: ({ id, name }) => {
      const stub = real.get(id);
      const count = (method: string) => calls.set(`${method} ${name}`, (calls.get(`${method} ${name}`) ?? 0) + 1);
      const shard: IdempotencyShard = {
        claim: (keys, leaseMs, fingerprints) => (count("claim"), stub.claim(keys, leaseMs, fingerprints)),
        remember: (keys, retentionMs, fingerprints) => (count("remember"), stub.remember(keys, retentionMs, fingerprints)),
        release: (claims) => (count("release"), stub.release(claims)),
        seen: (keys) => (count("seen"), stub.seen(keys)),
        forget: (keys) => (count("forget"), stub.forget(keys)),
        inspect: (keys) => (count("inspect"), stub.inspect(keys)),
      };
      return shard;
    },
  };
  return { binding: binding as IdempotencyNamespace, calls, total: () => [...calls.values()].reduce((a, b) => a + b, 0) };
}

const envelope = (id: string, mode: "ok" | "throw" = "ok") =>
  JSON.stringify({ job: "urn:test:job", trace_id: "t", data: { mode }, meta: { id, schema_version: 1 }, attempts: 0 });

describe("DurableObjectStore: Durable Object calls per batch", () => {
  for (const shards of [1, 4, 8]) {
    it(`a batch of 100 through the engine makes one call per shard per step (${shards} shard${shards > 1 ? "s" : ""})`, async () => {
      const counter = countingBinding();
      const store = new DurableObjectStore(counter.binding, { namespace: `calls-${shards}-${Date.now()}`, shards, objectName: `calls-${shards}` });
      const ids = Array.from({ length: 100 }, (_, i) => `msg-${i}`);
      // 90 succeed, 10 fail: the engine claims (1 step), commits (1 step) and releases (1 step). A fixed
      // linger: the adaptive default sizes itself from the store's round trips, which an object in this
      // same process answers in well under a millisecond — so it would rightly commit wave by wave.
      const engine = new BatchEngine(
        store,
        (message: { data: { mode: string } }) => {
          if (message.data.mode === "throw") throw new Error("scripted");
        },
        { commitLingerMs: 5 },
      );
      const results = await engine.process(ids.map((id, i) => ({ body: envelope(id, i % 10 === 0 ? "throw" : "ok"), context: {} })));
      expect(results.filter((r) => r.status === "ran")).toHaveLength(90);
      expect(results.filter((r) => r.status === "failed")).toHaveLength(10);
      const perMethod = (method: string) => [...counter.calls].filter(([k]) => k.startsWith(`${method} `)).map(([, n]) => n);
      const used = new Set(await Promise.all(ids.map(async (id) => store.shardOf(await storeKey(store.namespace, id, 512))))).size;
      expect(perMethod("claim")).toHaveLength(used);
      expect(perMethod("claim").every((n) => n === 1)).toBe(true);
      expect(perMethod("remember").every((n) => n === 1)).toBe(true);
      expect(perMethod("release").every((n) => n === 1)).toBe(true);
      expect(perMethod("remember").length).toBeLessThanOrEqual(used);
      expect(perMethod("release").length).toBeLessThanOrEqual(used);
      console.log(
        `[do-calls] batch of 100, ${shards} shard(s): claim ${perMethod("claim").length}, remember ${perMethod("remember").length}, release ${perMethod("release").length}, total ${counter.total()}`,
      );
      // Every redelivery of the same 100 is answered in one call per shard too.
      const before = counter.total();
      const again = await engine.process(ids.map((id) => ({ body: envelope(id), context: {} })));
      expect(again.filter((r) => r.status === "duplicate")).toHaveLength(90);
      expect(again.filter((r) => r.status === "ran")).toHaveLength(10);
      expect(counter.total() - before).toBeLessThanOrEqual(2 * used);
    });
  }
});

describe("DurableObjectStore: clocks", () => {
  it("sends the objects durations, never deadlines: the lease and retention are reckoned by the object's clock", async () => {
    const counter = countingBinding();
    const sent: unknown[][] = [];
    const binding: IdempotencyNamespace = {
      idFromName: (name) => counter.binding.idFromName(name),
      get: (id) => {
        const shard = counter.binding.get(id);
        return {
          ...shard,
          claim: (keys, leaseMs, fingerprints) => (sent.push(["claim", leaseMs]), shard.claim(keys, leaseMs, fingerprints)),
          remember: (keys, retentionMs, fingerprints) => (sent.push(["remember", retentionMs]), shard.remember(keys, retentionMs, fingerprints)),
        };
      },
    };
    const store = new DurableObjectStore(binding, { namespace: `clock-${Date.now()}`, retentionMs: 123_456 });
    const claim = await store.claim("c", 4_321);
    await store.remember("c");
    expect(sent).toEqual([
      ["claim", 4_321],
      ["remember", 123_456],
    ]);
    expect(claim.status).toBe("claimed");
    const record = await store.inspect("c");
    expect(record?.retentionLeftMs).toBeGreaterThan(120_000);
    expect(record?.retentionLeftMs).toBeLessThanOrEqual(123_456);
  });
});

describe("DurableObjectStore: fingerprints", () => {
  it("claims with fingerprints in one call per shard, and inspects in one call", async () => {
    const counter = countingBinding();
    const store = new DurableObjectStore(counter.binding, { namespace: `fp-calls-${Date.now()}`, shards: 4, objectName: "fp-calls" });
    const ids = Array.from({ length: 20 }, (_, i) => `fp-${i}`);
    const fingerprints = ids.map((id, i) => (i % 4 === 0 ? undefined : `sha-${id}`));
    const claims = await store.claimMany(ids, undefined, fingerprints);
    expect(claims.every((claim) => claim.status === "claimed")).toBe(true);
    const used = new Set(await Promise.all(ids.map(async (id) => store.shardOf(await storeKey(store.namespace, id, 512))))).size;
    expect(counter.total()).toBe(used);
    const again = await store.claimMany(ids);
    expect(again.map((claim) => (claim.status === "in-flight" ? (claim.fingerprint ?? null) : claim.status))).toEqual(
      fingerprints.map((fingerprint) => fingerprint ?? null),
    );
    const before = counter.total();
    expect(await store.inspect("fp-1")).toMatchObject({ status: "in-flight", fingerprint: "sha-fp-1" });
    expect(counter.total() - before).toBe(1);
  });

  it("claims under the caller's tokens when given one per key, and refuses malformed ones", async () => {
    const stub = env.IDEMPOTENCY.get(env.IDEMPOTENCY.idFromName(`tokens-${Date.now()}/shard-0`));
    const tokens = [crypto.randomUUID(), crypto.randomUUID()];
    expect(await stub.claim(["t:a", "t:b"], 60_000, undefined, tokens)).toEqual(tokens.map((token) => ({ status: "claimed", token })));
    expect(await stub.release([{ key: "t:a", token: tokens[0] as string }])).toEqual([true]);
    // Checked inside the object (an error thrown over RPC is reported by the pool as uncaught).
    const refused = await runInDurableObject(stub, async (instance) => {
      const bad = [["short"], [crypto.randomUUID(), crypto.randomUUID()], [`${crypto.randomUUID()} ${crypto.randomUUID()}`], [42]];
      const messages: string[] = [];
      for (const tokens of bad) await instance.claim(["t:c"], 60_000, undefined, tokens as string[]).catch((error: Error) => messages.push(error.message));
      return messages;
    });
    expect(refused).toEqual(Array(4).fill("tokens must be an array of one token (16-200 characters, no whitespace) per key"));
    expect((await stub.claim(["t:c"], 60_000))[0]).toMatchObject({ status: "claimed", token: expect.any(String) });
  });

  it("reads a table written before fingerprints existed: adds the column, old rows carry none", async () => {
    const objectName = `legacy-${Date.now()}`;
    const namespace = "legacy";
    const stub = env.IDEMPOTENCY.get(env.IDEMPOTENCY.idFromName(`${objectName}/shard-0`));
    const token = crypto.randomUUID();
    const now = Date.now();
    // The table and rows exactly as the previous version wrote them (no fingerprint column).
    await runInDurableObject(stub, async (_instance, state) => {
      state.storage.sql.exec(`CREATE TABLE entries (
        key TEXT PRIMARY KEY,
        status TEXT NOT NULL CHECK (status IN ('in-flight', 'done')),
        token TEXT,
        lease_until INTEGER,
        retain_until INTEGER
      )`);
      state.storage.sql.exec("INSERT INTO entries VALUES (?, 'done', NULL, NULL, ?)", await storeKey(namespace, "old-done", 512), now + 60_000);
      state.storage.sql.exec("INSERT INTO entries VALUES (?, 'in-flight', ?, ?, NULL)", await storeKey(namespace, "old-held", 512), token, now + 60_000);
    });
    const store = new DurableObjectStore(env.IDEMPOTENCY, { namespace, objectName });
    expect(await store.claim("old-done", undefined, "fp-new")).toStrictEqual({ status: "done" });
    const held = await store.claim("old-held", undefined, "fp-new");
    expect(held.status).toBe("in-flight");
    expect(Object.keys(held).sort()).toEqual(["retryAfterMs", "status"]);
    expect(await store.inspect("old-done")).toMatchObject({ status: "done", retentionLeftMs: expect.any(Number) });
    expect(await store.release("old-held", token)).toBe(true);
    // New rows in the migrated table carry their fingerprint; the commit keeps it.
    expect((await store.claim("old-held", undefined, "fp-new")).status).toBe("claimed");
    await store.remember("old-held");
    expect(await store.claim("old-held")).toStrictEqual({ status: "done", fingerprint: "fp-new" });
    const columns = await runInDurableObject(stub, (_instance, state) =>
      state.storage.sql.exec<{ name: string }>("SELECT name FROM pragma_table_info('entries')").toArray().map((row) => row.name),
    );
    expect(columns).toContain("fingerprint");
  });
});

describe("IdempotencyObject: the alarm sweep", () => {
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  /** Polls until `check` holds (the real alarm fires on its own schedule). */
  async function eventually(check: () => Promise<boolean>, timeoutMs = 5_000): Promise<void> {
    const end = Date.now() + timeoutMs;
    while (!(await check())) {
      if (Date.now() > end) throw new Error("condition not reached in time");
      await sleep(25);
    }
  }

  it("fires on its own at the deadline of the write that armed it, removes expired rows and nothing else, and re-arms", async () => {
    const objectName = `sweep-${Date.now()}`;
    const store = new DurableObjectStore(env.IDEMPOTENCY, { namespace: "sweep", objectName, leaseMs: 60_000, retentionMs: 60_000 });
    const short = new DurableObjectStore(env.IDEMPOTENCY, { namespace: "sweep", objectName, leaseMs: 1_500, retentionMs: 1_500 });
    const stub = env.IDEMPOTENCY.get(env.IDEMPOTENCY.idFromName(`${objectName}/shard-0`));
    const alarmAt = () => runInDurableObject(stub, (_instance, state) => state.storage.getAlarm());

    // The first write arms the alarm at its own deadline.
    await short.claim("expired-lease");
    const firstAlarm = await alarmAt();
    expect(firstAlarm).not.toBeNull();
    expect((firstAlarm as number) - Date.now()).toBeLessThanOrEqual(1_500);
    await short.remember("expired-retention");
    await store.claim("live-lease");
    await store.remember("live-done");
    const held = await store.claim("live-held");
    expect(held.status).toBe("claimed");
    // Later writes leave a scheduled alarm alone (every setAlarm is a row written).
    expect(await alarmAt()).toBe(firstAlarm);
    expect(await stub.storedRows()).toBe(5);

    await eventually(async () => (await stub.storedRows()) === 3);
    expect(await stub.size()).toBe(3);
    // Nothing live was touched: the in-flight claims, the committed id, the fencing token.
    expect((await store.claim("live-lease")).status).toBe("in-flight");
    expect(await store.seen("live-done")).toBe(true);
    if (held.status === "claimed") expect(await store.release("live-held", held.token)).toBe(true);
    // Re-armed for the earliest live deadline (about a minute away), not cleared.
    const next = await alarmAt();
    expect(next).not.toBeNull();
    expect((next as number) - Date.now()).toBeGreaterThan(30_000);
  });

  it("a sweep run on demand deletes only what has expired, and leaves no alarm once every row is gone", async () => {
    const objectName = `sweep-demand-${Date.now()}`;
    const store = new DurableObjectStore(env.IDEMPOTENCY, { namespace: "sweep", objectName, leaseMs: 60_000, retentionMs: 60_000 });
    const stub = env.IDEMPOTENCY.get(env.IDEMPOTENCY.idFromName(`${objectName}/shard-0`));
    await store.rememberMany(["a", "b"]);
    await store.claim("c");
    // Nothing has expired: the sweep keeps all three and re-arms.
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect(await stub.storedRows()).toBe(3);
    expect(await runInDurableObject(stub, (_instance, state) => state.storage.getAlarm())).not.toBeNull();
    await store.forget("a");
    await store.forget("b");
    await store.forget("c");
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect(await stub.storedRows()).toBe(0);
    expect(await runInDurableObject(stub, (_instance, state) => state.storage.getAlarm())).toBeNull();
  });

  it("windows of Number.MAX_SAFE_INTEGER ms ('for good'): claims and commits answer, the alarm is armed within about ten years", async () => {
    // workerd refuses alarm times after 2189: such a deadline used to fail the claim and the commit
    // (after they had landed) and leave the object believing an alarm was set.
    const objectName = `sweep-for-good-${Date.now()}`;
    const store = new DurableObjectStore(env.IDEMPOTENCY, { namespace: "sweep", objectName, leaseMs: Number.MAX_SAFE_INTEGER, retentionMs: Number.MAX_SAFE_INTEGER });
    const stub = env.IDEMPOTENCY.get(env.IDEMPOTENCY.idFromName(`${objectName}/shard-0`));
    const alarmAt = () => runInDurableObject(stub, (_instance, state) => state.storage.getAlarm());
    expect((await store.claim("held")).status).toBe("claimed");
    await store.remember("done");
    expect(await store.seen("done")).toBe(true);
    const year = 365 * 86_400_000;
    const armed = await alarmAt();
    expect(armed).not.toBeNull();
    expect((armed as number) - Date.now()).toBeGreaterThan(9 * year);
    expect((armed as number) - Date.now()).toBeLessThanOrEqual(10 * year);
    // That sweep comes early: it finds nothing expired, keeps both rows and re-arms.
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect(await stub.storedRows()).toBe(2);
    expect((await store.claim("held")).status).toBe("in-flight");
    expect(await store.seen("done")).toBe(true);
    expect(await alarmAt()).not.toBeNull();
  });

  it("expired rows answer as absent even before any sweep", async () => {
    const store = new DurableObjectStore(env.IDEMPOTENCY, { namespace: `sweep-logic-${Date.now()}`, leaseMs: 30, retentionMs: 30 });
    await store.claim("lease");
    await store.remember("done");
    await sleep(60);
    expect((await store.claim("lease")).status).toBe("claimed");
    expect(await store.seen("done")).toBe(false);
  });
});

describe("DurableObjectStore: options and failures", () => {
  it("rejects bad options", () => {
    expect(() => new DurableObjectStore(env.IDEMPOTENCY, { shards: 0 })).toThrow(/shards/);
    expect(() => new DurableObjectStore(env.IDEMPOTENCY, { shards: 1.5 })).toThrow(/shards/);
    expect(() => new DurableObjectStore(env.IDEMPOTENCY, { shards: 4, previousShards: 0 })).toThrow(/previousShards/);
    expect(() => new DurableObjectStore(env.IDEMPOTENCY, { shards: 4, previousShards: 2000 })).toThrow(/previousShards/);
    expect(() => new DurableObjectStore(env.IDEMPOTENCY, { namespace: "a:b" })).toThrow(/namespace/);
    expect(() => new DurableObjectStore(env.IDEMPOTENCY, { leaseMs: -1 })).toThrow(/leaseMs/);
    expect(() => new DurableObjectStore({} as IdempotencyNamespace)).toThrow(/binding/);
  });

  it("wraps a failing Durable Object call in StoreUnavailableError, without the ids", async () => {
    // A fault no local backend produces on demand: a binding whose calls reject (mock, on purpose).
    const broken: IdempotencyNamespace = {
      idFromName: (name) => name,
      get: () => {
        const fail = () => Promise.reject(new Error("Network connection lost. secret-id-123"));
        return { claim: fail, remember: fail, release: fail, seen: fail, forget: fail, inspect: fail };
      },
    };
    const store = new DurableObjectStore(broken);
    const error = await store.claim("secret-id-123").catch((e: unknown) => e);
    expect(error).toMatchObject({ name: "StoreUnavailableError", store: "DurableObjectStore", operation: "claim" });
    expect(String((error as Error).message)).not.toContain("secret-id-123");
    await expect(store.rememberMany(["x"])).rejects.toMatchObject({ operation: "remember" });
  });
});

describe("DurableObjectStore: an overloaded object", () => {
  it("its error is an overloaded StoreUnavailableError, and the engine commits once, not again into the overload", async () => {
    // A fault no local backend produces on demand: an object whose commits fail with Cloudflare's
    // overload error (`.overloaded`, which Cloudflare asks callers not to retry); claims and
    // releases reach the real object (mock, on purpose).
    const real = env.IDEMPOTENCY;
    let remembers = 0;
    const overloaded: IdempotencyNamespace<DurableObjectId> = {
      idFromName: (name) => real.idFromName(name),
      get: (id) => {
        const stub = real.get(id) as unknown as IdempotencyShard;
        return {
          claim: (...args) => stub.claim(...args),
          remember: async () => {
            remembers += 1;
            throw Object.assign(new Error("Durable Object is overloaded. Too many requests queued."), { overloaded: true, retryable: false });
          },
          release: (...args) => stub.release(...args),
          seen: (...args) => stub.seen(...args),
          forget: (...args) => stub.forget(...args),
          inspect: (...args) => stub.inspect(...args),
        };
      },
    };
    const store = new DurableObjectStore(overloaded as IdempotencyNamespace, { namespace: "hot", objectName: `overloaded-${Date.now()}` });
    await expect(store.rememberMany(["a"])).rejects.toMatchObject({ name: "StoreUnavailableError", operation: "remember", overloaded: true });
    remembers = 0;
    const results = await new BatchEngine(store, () => undefined, { commitLingerMs: 0 }).process([{ body: envelope("hot-1"), context: {} }]);
    expect(results.map((result) => result.status)).toEqual(["commit-failed"]);
    expect((results[0] as { error?: unknown }).error).toMatchObject({ overloaded: true });
    expect(remembers).toBe(1);
  });
});

describe("DurableObjectStore: one shard failing", () => {
  /**
   * The real binding, except that every call to the objects named in `failing` rejects: a fault no
   * local backend produces on demand for one object only (mock, on purpose).
   */
  function partlyBroken(failing: Set<string>): IdempotencyNamespace {
    const real = env.IDEMPOTENCY;
    const binding: IdempotencyNamespace<{ id: DurableObjectId; name: string }> = {
      idFromName: (name) => ({ id: real.idFromName(name), name }),
      get: ({ id, name }) => {
        if (!failing.has(name)) return real.get(id) as unknown as IdempotencyShard;
        const fail = () => Promise.reject(new Error("Durable Object reset because its code was updated"));
        return { claim: fail, remember: fail, release: fail, seen: fail, forget: fail, inspect: fail };
      },
    };
    return binding as IdempotencyNamespace;
  }

  /**
   * The real binding, except that a claim sent to an object named in `losing` lands and its answer
   * is then lost (the call rejects after the object ran it): a dropped connection, on demand.
   */
  function answersLost(losing: Set<string>): IdempotencyNamespace {
    const real = env.IDEMPOTENCY;
    const binding: IdempotencyNamespace<{ id: DurableObjectId; name: string }> = {
      idFromName: (name) => ({ id: real.idFromName(name), name }),
      get: ({ id, name }) => {
        const stub = real.get(id) as unknown as IdempotencyShard;
        if (!losing.has(name)) return stub;
        return {
          claim: async (...args: Parameters<IdempotencyShard["claim"]>) => {
            await stub.claim(...args);
            throw new Error("Network connection lost.");
          },
          remember: (...args) => stub.remember(...args),
          release: (...args) => stub.release(...args),
          seen: (...args) => stub.seen(...args),
          forget: (...args) => stub.forget(...args),
          inspect: (...args) => stub.inspect(...args),
        };
      },
    };
    return binding as IdempotencyNamespace;
  }

  async function split(store: DurableObjectStore, ids: string[], shard: number) {
    const owners = await Promise.all(ids.map(async (id) => store.shardOf(await storeKey(store.namespace, id, 512))));
    return { onBroken: ids.filter((_, i) => owners[i] === shard), healthy: ids.filter((_, i) => owners[i] !== shard) };
  }

  it("a failed shard fails only its ids' claims (ClaimFailure); a failed commit keeps what the healthy shards committed", async () => {
    const objectName = `broken-${Date.now()}`;
    const options = { namespace: "pf", objectName, shards: 4 };
    const healthy = new DurableObjectStore(env.IDEMPOTENCY, options);
    const broken = new DurableObjectStore(partlyBroken(new Set([`${objectName}/shard-1`])), options);
    const ids = Array.from({ length: 40 }, (_, i) => `pf-${i}`);
    const { onBroken, healthy: elsewhere } = await split(healthy, ids, 1);
    expect(onBroken.length).toBeGreaterThan(0);
    expect(elsewhere.length).toBeGreaterThan(0);

    const answers = await broken.claimMany(ids);
    // The broken shard's ids fail alone; every other shard's claims stand (the engine runs them).
    answers.forEach((answer, i) => {
      if (onBroken.includes(ids[i] as string)) {
        expect(answer).toMatchObject({ status: "failed", error: { name: "StoreUnavailableError", store: "DurableObjectStore", operation: "claim" } });
      } else {
        expect(answer.status).toBe("claimed");
      }
    });
    await expect(broken.claim(onBroken[0] as string)).rejects.toMatchObject({ name: "StoreUnavailableError", operation: "claim" });
    await healthy.releaseMany(
      ids.flatMap((id, i) => (answers[i]?.status === "claimed" ? [{ id, token: (answers[i] as { token: string }).token }] : [])),
    );

    // The step names each id's fate: a PartialStepError whose errors are exactly the broken shard's ids.
    const partial = await broken.rememberMany(ids).catch((error: unknown) => error);
    expect(partial).toBeInstanceOf(PartialStepError);
    expect(partial).toMatchObject({ name: "PartialStepError", operation: "remember" });
    expect((partial as PartialStepError).errors.map((error, i) => [ids[i], error === undefined ? "written" : (error as StoreUnavailableError).operation])).toEqual(
      ids.map((id) => [id, onBroken.includes(id) ? "remember" : "written"]),
    );
    // All of a step's ids on the broken shard: the shard's own error, as one.
    const whole = await broken.rememberMany(onBroken).catch((error: unknown) => error);
    expect(whole).toBeInstanceOf(StoreUnavailableError);
    expect(whole).not.toBeInstanceOf(PartialStepError);
    // Every healthy shard's commit stands; the broken shard's ids are not committed.
    expect(await healthy.seenMany(elsewhere)).toEqual(elsewhere.map(() => true));
    expect(await healthy.seenMany(onBroken)).toEqual(onBroken.map(() => false));
    await expect(broken.seenMany(ids)).rejects.toMatchObject({ operation: "seen" });
    // Only the broken shard's ids are unknown: a step of healthy ids alone still answers.
    expect(await broken.seenMany(elsewhere)).toEqual(elsewhere.map(() => true));
  });

  it("through the engine, a failed shard's ids are the only ones retried and reported commit-failed; the others ran", async () => {
    const objectName = `partial-${Date.now()}`;
    const options = { namespace: "pc", objectName, shards: 4 };
    const healthy = new DurableObjectStore(env.IDEMPOTENCY, options);
    const ids = Array.from({ length: 24 }, (_, i) => `pc-${i}`);
    const { onBroken } = await split(healthy, ids, 2);
    expect(onBroken.length).toBeGreaterThan(0);
    // Claims reach every object; only shard 2's commits fail (mock, on purpose: a fault on demand).
    // Every commit sent is counted per key, whichever step (or wave of handlers) it went in.
    const real = env.IDEMPOTENCY;
    const sends = new Map<string, number>();
    const binding: IdempotencyNamespace<{ id: DurableObjectId; name: string }> = {
      idFromName: (name) => ({ id: real.idFromName(name), name }),
      get: ({ id, name }) => {
        const stub = real.get(id) as unknown as IdempotencyShard;
        const broken = name === `${objectName}/shard-2`;
        return {
          claim: (...args) => stub.claim(...args),
          remember: async (...args: Parameters<IdempotencyShard["remember"]>) => {
            for (const key of args[0]) sends.set(key, (sends.get(key) ?? 0) + 1);
            if (broken) throw new Error("Durable Object reset because its code was updated");
            return stub.remember(...args);
          },
          release: (...args) => stub.release(...args),
          seen: (...args) => stub.seen(...args),
          forget: (...args) => stub.forget(...args),
          inspect: (...args) => stub.inspect(...args),
        };
      },
    };
    const store = new DurableObjectStore(binding as IdempotencyNamespace, options);
    const results = await new BatchEngine(store, () => undefined, { commitLingerMs: 5 }).process(ids.map((id) => ({ body: envelope(id), context: {} })));
    expect(results.map((result, i) => [ids[i], result.status])).toEqual(ids.map((id) => [id, onBroken.includes(id) ? "commit-failed" : "ran"]));
    // The broken shard's ids were sent three times (their step, then two retries of them alone); the others once.
    const sent = await Promise.all(ids.map(async (id) => sends.get(await storeKey(store.namespace, id, 512))));
    expect(sent).toEqual(ids.map((id) => (onBroken.includes(id) ? 3 : 1)));
    expect(await healthy.seenMany(ids)).toEqual(ids.map((id) => !onBroken.includes(id)));
  });

  it("a claim call that landed but whose answer was lost leaves nothing held: the failed ids' claims are released under the store's tokens", async () => {
    const objectName = `lost-${Date.now()}`;
    const options = { namespace: "lost", objectName, shards: 2 };
    const healthy = new DurableObjectStore(env.IDEMPOTENCY, options);
    const lossy = new DurableObjectStore(answersLost(new Set([`${objectName}/shard-1`])), options);
    const ids = Array.from({ length: 20 }, (_, i) => `lost-${i}`);
    const { onBroken, healthy: elsewhere } = await split(healthy, ids, 1);
    expect(onBroken.length).toBeGreaterThan(0);
    const answers = await lossy.claimMany(ids);
    expect(answers.map((claim) => claim.status)).toEqual(ids.map((id) => (onBroken.includes(id) ? "failed" : "claimed")));
    // The lost answers' claims were undone: their redeliveries are claimed at once, not in flight for the lease.
    for (const id of onBroken) expect(await healthy.inspect(id)).toBeNull();
    expect((await healthy.claimMany(onBroken)).map((claim) => claim.status)).toEqual(onBroken.map(() => "claimed"));
    // The healthy shard's claims stand.
    expect((await healthy.claimMany(elsewhere)).map((claim) => claim.status)).toEqual(elsewhere.map(() => "in-flight"));
  });

  it("in a migration window, a lost answer from either object leaves a moved id held in neither", async () => {
    const objectName = `lost-window-${Date.now()}`;
    const windowOptions = { namespace: "lostw", objectName, shards: 4, previousShards: 2 };
    const window = new DurableObjectStore(env.IDEMPOTENCY, windowOptions);
    const ids = Array.from({ length: 60 }, (_, i) => `lostw-${i}`);
    const keys = await Promise.all(ids.map((id) => storeKey("lostw", id, 512)));
    // Moved ids from shard 0 to shard 2: one half loses the owner's answer (round 2), the other the previous owner's (round 1).
    const moved = ids.filter((_, i) => window.placementOf(keys[i] as string).previous === 0 && window.shardOf(keys[i] as string) === 2);
    const ownerLost = moved.filter((_, i) => i % 2 === 0);
    const previousLost = moved.filter((_, i) => i % 2 === 1);
    expect(previousLost.length).toBeGreaterThan(0);
    const lossyOwner = new DurableObjectStore(answersLost(new Set([`${objectName}/shard-2`])), windowOptions);
    expect((await lossyOwner.claimMany(ownerLost)).map((claim) => claim.status)).toEqual(ownerLost.map(() => "failed"));
    const lossyPrevious = new DurableObjectStore(answersLost(new Set([`${objectName}/shard-0`])), windowOptions);
    expect((await lossyPrevious.claimMany(previousLost)).map((claim) => claim.status)).toEqual(previousLost.map(() => "failed"));
    for (const id of moved) expect(await window.inspect(id)).toBeNull();
    expect((await window.claimMany(moved)).map((claim) => claim.status)).toEqual(moved.map(() => "claimed"));
  });

  it("in a migration window, a commit seen in one of a moved id's two objects is an answer even when the other fails", async () => {
    const objectName = `broken-window-${Date.now()}`;
    const old = new DurableObjectStore(env.IDEMPOTENCY, { namespace: "pfw", objectName, shards: 2 });
    const windowOptions = { namespace: "pfw", objectName, shards: 4, previousShards: 2 };
    const window = new DurableObjectStore(env.IDEMPOTENCY, windowOptions);
    const ids = Array.from({ length: 40 }, (_, i) => `pfw-${i}`);
    const keys = await Promise.all(ids.map((id) => storeKey("pfw", id, 512)));
    // Moved ids whose new owner is shard 2: committed under the old count, so only shard 0 (their previous owner) has them.
    const moved = ids.filter((_, i) => window.placementOf(keys[i] as string).previous === 0 && window.shardOf(keys[i] as string) === 2);
    expect(moved.length).toBeGreaterThan(0);
    await old.rememberMany(moved);
    const ownerDown = new DurableObjectStore(partlyBroken(new Set([`${objectName}/shard-2`])), windowOptions);
    expect(await ownerDown.seenMany(moved)).toEqual(moved.map(() => true));
    // A claim answered `done` by the previous owner never needs the (failing) new owner.
    expect((await ownerDown.claimMany(moved)).map((claim) => claim.status)).toEqual(moved.map(() => "done"));
    const previousDown = new DurableObjectStore(partlyBroken(new Set([`${objectName}/shard-0`])), windowOptions);
    await expect(previousDown.seenMany(moved)).rejects.toMatchObject({ operation: "seen" });
    // The previous owner down: a moved id cannot be decided (it must be asked first), so it fails alone.
    for (const answer of await previousDown.claimMany(moved)) expect(answer).toMatchObject({ status: "failed", error: { operation: "claim" } });
  });

  it("in a migration window, a moved id committed in its new owner (by a store on the new count) is answered done even when its previous owner fails", async () => {
    const objectName = `broken-previous-${Date.now()}`;
    const next = new DurableObjectStore(env.IDEMPOTENCY, { namespace: "pfp", objectName, shards: 4 });
    const windowOptions = { namespace: "pfp", objectName, shards: 4, previousShards: 2 };
    const ids = Array.from({ length: 40 }, (_, i) => `pfp-${i}`);
    const keys = await Promise.all(ids.map((id) => storeKey("pfp", id, 512)));
    const window = new DurableObjectStore(env.IDEMPOTENCY, windowOptions);
    // Moved ids whose previous owner is shard 0: half committed in their new owner only, half never seen.
    const moved = ids.filter((_, i) => window.placementOf(keys[i] as string).previous === 0);
    const committed = moved.filter((_, i) => i % 2 === 0);
    const unknown = moved.filter((_, i) => i % 2 === 1);
    expect(committed.length).toBeGreaterThan(0);
    expect(unknown.length).toBeGreaterThan(0);
    await next.rememberMany(
      committed,
      committed.map((id) => `fp-${id}`),
    );
    const previousDown = new DurableObjectStore(partlyBroken(new Set([`${objectName}/shard-0`])), windowOptions);
    const answers = await previousDown.claimMany(moved, undefined, moved.map((id) => `fp-${id}`));
    moved.forEach((id, i) => {
      if (committed.includes(id)) expect(answers[i]).toEqual({ status: "done", fingerprint: `fp-${id}` });
      else expect(answers[i]).toMatchObject({ status: "failed", error: { operation: "claim" } });
    });
    // Nothing was claimed for the undecided ids: their owner holds no record.
    for (const id of unknown) expect(await next.inspect(id)).toBeNull();
    expect((await previousDown.claim(committed[0] as string)).status).toBe("done");
  });
});
