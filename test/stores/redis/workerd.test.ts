/**
 * `UpstashRedisStore` inside workerd: esbuild bundles a tiny Worker that uses
 * `@upstash/redis/cloudflare` and the store (no Node compatibility flag), plain Miniflare runs it,
 * and `dispatchFetch` makes it claim / commit / release against the Upstash bridge on loopback,
 * which speaks to the real redis-server the global setup started.
 *
 * Two ways of building the store are exercised in the Worker: from an `@upstash/redis/cloudflare`
 * client, and from url + token (the store makes the client itself); and both BabelQueue layouts,
 * their records checked on the Redis server itself.
 */
import type { Miniflare } from "miniflare";
import { Redis as IORedis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startBundledWorker } from "../../support/bundled-worker.js";

const WORKER = `
import { Redis } from "@upstash/redis/cloudflare";
import { UpstashRedisStore } from "./entry/upstash.ts";

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const q = url.searchParams;
    const namespace = q.get("ns") ?? "";
    const layout = q.get("layout") ? { layout: q.get("layout"), prefix: q.get("prefix") } : { namespace };
    const store = q.get("via") === "url"
      ? new UpstashRedisStore({ url: env.UPSTASH_REDIS_REST_URL, token: env.UPSTASH_REDIS_REST_TOKEN, ...layout })
      : new UpstashRedisStore({
          client: new Redis({ url: env.UPSTASH_REDIS_REST_URL, token: env.UPSTASH_REDIS_REST_TOKEN, enableTelemetry: false }),
          ...layout,
        });
    const id = q.get("id") ?? "";
    try {
      switch (url.pathname) {
        case "/claim": return Response.json(await store.claim(id, Number(q.get("lease") ?? 60000), q.get("fp") ?? undefined));
        case "/claim-many": return Response.json(await store.claimMany(q.getAll("id")));
        case "/commit": await store.remember(id); return Response.json({ ok: true });
        case "/release": return Response.json({ released: await store.release(id, q.get("token") ?? "") });
        case "/release-many": await store.releaseMany(JSON.parse(q.get("claims") ?? "[]")); return Response.json({ ok: true });
        case "/seen": return Response.json({ seen: await store.seen(id) });
        case "/inspect": return Response.json({ record: await store.inspect(id) });
        default: return new Response("not found", { status: 404 });
      }
    } catch (error) {
      return Response.json({ error: error.name, message: error.message }, { status: 503 });
    }
  },
};
`;

let mf: Miniflare;

beforeAll(async () => {
  mf = await startBundledWorker(WORKER, {
    bundle: { platform: "browser", conditions: ["workerd", "worker", "browser"] },
    compatibilityFlags: [],
    bindings: { UPSTASH_REDIS_REST_URL: inject("upstashUrl"), UPSTASH_REDIS_REST_TOKEN: inject("upstashToken") },
  });
  await mf.ready;
}, 60_000);

afterAll(async () => {
  await mf?.dispose();
});

async function call(path: string, params: Record<string, string | string[]>): Promise<{ status: number; body: Record<string, unknown> | unknown[] }> {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) for (const one of [value].flat()) search.append(key, one);
  const response = await mf.dispatchFetch(`http://worker${path}?${search}`);
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

describe.each(["client", "url"])("UpstashRedisStore inside workerd (store made from %s)", (via) => {
  const ns = `workerd-${via}-${Date.now().toString(36)}`;

  it("claims, reports in-flight, releases with the token only, and commits", async () => {
    const first = await call("/claim", { via, ns, id: "m-1" });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ status: "claimed", token: expect.any(String) });
    const token = (first.body as { token: string }).token;

    const second = await call("/claim", { via, ns, id: "m-1" });
    expect(second.body).toMatchObject({ status: "in-flight" });
    expect((second.body as { retryAfterMs: number }).retryAfterMs).toBeGreaterThan(50_000);

    expect((await call("/release", { via, ns, id: "m-1", token: "not-the-token" })).body).toEqual({ released: false });
    expect((await call("/release", { via, ns, id: "m-1", token })).body).toEqual({ released: true });

    const third = await call("/claim", { via, ns, id: "m-1" });
    expect(third.body).toMatchObject({ status: "claimed" });
    expect((await call("/commit", { via, ns, id: "m-1" })).body).toEqual({ ok: true });
    expect((await call("/claim", { via, ns, id: "m-1" })).body).toEqual({ status: "done" });
    expect((await call("/seen", { via, ns, id: "m-1" })).body).toEqual({ seen: true });
  });

  it("stores a payload fingerprint with the claim and answers it, JSON look-alikes included", async () => {
    for (const fp of ["sha256:ab:cd", "123", "true"]) {
      const id = `fp-${fp}`;
      expect((await call("/claim", { via, ns, id, fp })).body).toMatchObject({ status: "claimed" });
      expect((await call("/claim", { via, ns, id })).body).toMatchObject({ status: "in-flight", fingerprint: fp });
      expect((await call("/inspect", { via, ns, id })).body).toMatchObject({ record: { status: "in-flight", fingerprint: fp } });
      await call("/commit", { via, ns, id });
      expect((await call("/claim", { via, ns, id })).body).toEqual({ status: "done", fingerprint: fp });
    }
  });

  it("runs the batch forms", async () => {
    await call("/commit", { via, ns, id: "b-done" });
    const claims = await call("/claim-many", { via, ns, id: ["b-new", "b-done", "b-new-2"] });
    const statuses = (claims.body as { status: string }[]).map((claim) => claim.status);
    expect(statuses).toEqual(["claimed", "done", "claimed"]);
    const owned = (claims.body as { status: string; token?: string }[]).flatMap((claim, i) =>
      claim.token ? [{ id: ["b-new", "b-done", "b-new-2"][i], token: claim.token }] : [],
    );
    await call("/release-many", { via, ns, claims: JSON.stringify(owned) });
    expect((await call("/claim", { via, ns, id: "b-new" })).body).toMatchObject({ status: "claimed" });
  });
});

describe.each([
  { layout: "babelqueue-php", base: "bq:idem:", held: "1", done: "2" },
  { layout: "babelqueue-go", base: "bq:idemp:", held: null, done: "1" },
])("UpstashRedisStore inside workerd, layout $layout", ({ layout, base, held, done }) => {
  const prefix = `${base}workerd-${Date.now().toString(36)}:`;
  const redis = new IORedis({ host: "127.0.0.1", port: inject("redisPort"), lazyConnect: true });
  afterAll(() => {
    redis.disconnect();
  });

  it("claims, parks and commits with exactly the SDK's records", async () => {
    const params = { via: "url", layout, prefix, id: "m-1" };
    const first = await call("/claim", { ...params, fp: "fp-1" });
    expect(first.body).toMatchObject({ status: "claimed", token: expect.any(String) });
    expect(await redis.get(`${prefix}m-1`)).toBe(held);
    expect((await call("/claim", params)).body).toMatchObject({ status: "in-flight", fingerprint: "fp-1" });
    await call("/commit", params);
    expect(await redis.get(`${prefix}m-1`)).toBe(done);
    expect((await call("/claim", params)).body).toEqual({ status: "done" });
    expect((await call("/inspect", params)).body).toEqual({ record: { status: "done" } });
  });
});

