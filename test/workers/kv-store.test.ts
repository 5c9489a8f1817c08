/**
 * KVStore inside workerd (Miniflare's local KV): the seen-set part of the shared store contract
 * and the manifest sequences in seen-set mode. KV cannot claim, and the suite checks it says so.
 */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { isClaimingStore } from "../../src/contract.js";
import { BatchEngine } from "../../src/engine/index.js";
import { storeKey } from "../../src/store-kit/keys.js";
import { KVStore, type SeenSetKV } from "../../stores/kv.js";
import { testStore } from "../stores/contract.js";

testStore("KVStore", {
  claims: false,
  clock: "real",
  make: ({ namespace, retentionMs }) => new KVStore(env.SEEN, { namespace, retentionMs }),
});

testStore("KVStore (per-key reads)", {
  claims: false,
  clock: "real",
  make: ({ namespace, retentionMs }) => new KVStore(env.SEEN, { namespace, retentionMs, bulkGet: false }),
});

describe("KVStore specifics", () => {
  it("is never a claiming store, so the engine runs it in seen-set mode", () => {
    const store = new KVStore(env.SEEN);
    expect(isClaimingStore(store)).toBe(false);
    expect(new BatchEngine(store, () => undefined).claimMode).toBe(false);
    // @ts-expect-error -- the types keep KV out of claim mode: there is no claim to call.
    expect(store.claim).toBeUndefined();
  });

  it("writes keys of at most 512 bytes with an expirationTtl of at least 60 s", async () => {
    const puts: { key: string; ttl: number | undefined }[] = [];
    const recording: SeenSetKV = {
      get: ((key: string | string[], type: "text") => env.SEEN.get(key as string[], type)) as SeenSetKV["get"],
      put: async (key, value, options) => {
        puts.push({ key, ttl: options?.expirationTtl });
        await env.SEEN.put(key, value, options);
      },
      delete: (key) => env.SEEN.delete(key),
    };
    const store = new KVStore(recording, { namespace: "kv-ttl", retentionMs: 1_000 });
    await store.rememberMany(["short", "é".repeat(2000), "x".repeat(10_000)]);
    expect(puts).toHaveLength(3);
    for (const put of puts) {
      expect(new TextEncoder().encode(put.key).length).toBeLessThanOrEqual(512);
      expect(put.ttl).toBe(60);
    }
    expect(await store.seenMany(["short", "é".repeat(2000), "x".repeat(10_000), "other"])).toEqual([true, true, true, false]);
    const long = new KVStore(recording, { namespace: "kv-ttl", retentionMs: 4 * 24 * 3600 * 1000 });
    await long.remember("four-days");
    expect(puts.at(-1)?.ttl).toBe(4 * 24 * 3600);
  });

  it("a retention past KV's longest expirationTtl (about 68 years; 'for good') writes no TTL, and the id stays seen", async () => {
    // KV refuses an expirationTtl over 2^31 - 1 s: every commit used to fail (commit-failed), so nothing was remembered.
    const year = 365 * 24 * 3600 * 1000;
    const namespace = `kv-for-good-${Date.now()}`;
    const forGood = new KVStore(env.SEEN, { namespace, retentionMs: Number.MAX_SAFE_INTEGER });
    await forGood.rememberMany(["kept"], ["fp-1"]);
    expect(await forGood.seen("kept")).toBe(true);
    const withinLimit = new KVStore(env.SEEN, { namespace, retentionMs: 60 * year });
    await withinLimit.remember("sixty-years");
    const { keys } = await env.SEEN.list({ prefix: `${namespace}:` });
    const expirations = Object.fromEntries(keys.map((key) => [key.name.slice(namespace.length + 1), key.expiration]));
    expect(expirations.kept).toBeUndefined();
    expect(expirations["sixty-years"]).toBeGreaterThan(Date.now() / 1000 + 59 * 365 * 24 * 3600);
  });

  it("answers seenMany for more than 100 ids (bulk reads are chunked)", async () => {
    const store = new KVStore(env.SEEN, { namespace: `kv-bulk-${Date.now()}` });
    const ids = Array.from({ length: 250 }, (_, i) => `id-${i}`);
    await store.rememberMany(ids.filter((_, i) => i % 3 === 0));
    expect(await store.seenMany(ids)).toEqual(ids.map((_, i) => i % 3 === 0));
  });

  it("stores the fingerprint in the value (deadline:fingerprint) and reads values written before it as none", async () => {
    const namespace = `kv-fp-${Date.now()}`;
    const store = new KVStore(env.SEEN, { namespace });
    const key = (id: string) => storeKey(namespace, id, 512);
    await store.rememberMany(["with", "without"], ["sha:ab:cd", undefined]);
    expect(await env.SEEN.get(await key("with"), "text")).toMatch(/^\d+:sha:ab:cd$/);
    expect(await env.SEEN.get(await key("without"), "text")).toMatch(/^\d+$/);
    // A value exactly as the previous version wrote it: the retention deadline alone.
    await env.SEEN.put(await key("legacy"), String(Date.now() + 60_000), { expirationTtl: 60 });
    expect(await store.recallMany(["with", "without", "legacy", "absent"])).toStrictEqual([
      { seen: true, fingerprint: "sha:ab:cd" },
      { seen: true },
      { seen: true },
      { seen: false },
    ]);
    expect(await store.seen("legacy")).toBe(true);
    expect(await store.inspect("legacy")).toMatchObject({ status: "done", retentionLeftMs: expect.any(Number) });
    expect(await store.inspect("with")).toMatchObject({ status: "done", fingerprint: "sha:ab:cd" });
  });

  it("answers recallMany from one bulk read per 100 ids, as seenMany does, and inspect from one read", async () => {
    const reads: (string | string[])[] = [];
    const counting: SeenSetKV = {
      get: ((key: string | string[], type: "text") => {
        reads.push(key);
        return env.SEEN.get(key as string[], type);
      }) as SeenSetKV["get"],
      put: (key, value, options) => env.SEEN.put(key, value, options),
      delete: (key) => env.SEEN.delete(key),
    };
    const store = new KVStore(counting, { namespace: `kv-reads-${Date.now()}` });
    const ids = Array.from({ length: 150 }, (_, i) => `id-${i}`);
    await store.rememberMany(ids.slice(0, 50), ids.slice(0, 50).map((id) => `fp-${id}`));
    const recalled = await store.recallMany(ids);
    expect(reads).toHaveLength(2);
    expect(recalled.filter((r) => r.seen)).toHaveLength(50);
    expect(recalled[7]).toStrictEqual({ seen: true, fingerprint: "fp-id-7" });
    reads.length = 0;
    await store.inspect("id-7");
    expect(reads).toHaveLength(1);
  });

  it("wraps KV failures in StoreUnavailableError", async () => {
    // A fault Miniflare's KV does not produce on demand: a binding that rejects (mock, on purpose).
    const fail = () => Promise.reject(new Error("KV GET failed: 500"));
    const broken = { get: fail, put: fail, delete: fail } as unknown as SeenSetKV;
    const store = new KVStore(broken);
    await expect(store.seen("a")).rejects.toMatchObject({ name: "StoreUnavailableError", store: "KVStore", operation: "seen" });
    await expect(store.seenMany(["a"])).rejects.toMatchObject({ operation: "seen" });
    await expect(store.remember("a")).rejects.toMatchObject({ operation: "remember" });
    await expect(store.forget("a")).rejects.toMatchObject({ operation: "forget" });
    await expect(store.recallMany(["a"])).rejects.toMatchObject({ operation: "recall" });
    await expect(store.inspect("a")).rejects.toMatchObject({ operation: "inspect" });
  });
});
