/**
 * The example Worker's operator route (examples/worker/admin.ts) inside workerd, over the real
 * Durable Object store: off unless ADMIN_ROUTES = "on", fail-closed without an ADMIN_TOKEN, a
 * Bearer token compared in constant time, then GET inspects and DELETE forgets (a replay).
 */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { DurableObjectStore } from "../../stores/durable-object/store.js";
import { adminRoute, sameSecret } from "../../examples/worker/admin.js";

const TOKEN = "an-admin-token-of-32-characters!";
let runs = 0;
const namespace = () => {
  runs += 1;
  return `admin-${Date.now().toString(36)}-${runs}`;
};

/** A request to the route; `token` null sends no Authorization header. */
function request(path: string, init: RequestInit = {}, token: string | null = TOKEN): Request {
  const headers = new Headers(init.headers);
  if (token !== null) headers.set("authorization", `Bearer ${token}`);
  return new Request(`https://worker.example${path}`, { ...init, headers });
}

describe("the example Worker's admin route", () => {
  it("is off by default: a 404 like any unknown path, even with the right token; the store is never touched", async () => {
    let opened = 0;
    const store = () => {
      opened += 1;
      return new DurableObjectStore(env.IDEMPOTENCY, { namespace: namespace() });
    };
    for (const flag of [undefined, "off", "true", "ON"]) {
      const response = await adminRoute(request("/admin/ids/x"), { ADMIN_TOKEN: TOKEN, ...(flag === undefined ? {} : { ADMIN_ROUTES: flag }) }, store);
      expect(response?.status, String(flag)).toBe(404);
    }
    expect(await adminRoute(request("/jobs"), { ADMIN_ROUTES: "on", ADMIN_TOKEN: TOKEN }, store)).toBeUndefined();
    expect(opened).toBe(0);
  });

  it("fails closed when on without a (long enough) token, and rejects a missing or wrong token", async () => {
    const store = () => new DurableObjectStore(env.IDEMPOTENCY, { namespace: namespace() });
    expect((await adminRoute(request("/admin/ids/x"), { ADMIN_ROUTES: "on" }, store))?.status).toBe(503);
    expect((await adminRoute(request("/admin/ids/x"), { ADMIN_ROUTES: "on", ADMIN_TOKEN: "short" }, store))?.status).toBe(503);
    const on = { ADMIN_ROUTES: "on", ADMIN_TOKEN: TOKEN };
    for (const token of [null, "", "wrong", `${TOKEN}x`, TOKEN.slice(0, -1), TOKEN.toUpperCase()]) {
      const response = await adminRoute(request("/admin/ids/x", {}, token), on, store);
      expect(response?.status, String(token)).toBe(401);
      expect(response?.headers.get("www-authenticate")).toBe("Bearer");
    }
    const basic = await adminRoute(request("/admin/ids/x", { headers: { authorization: `Basic ${TOKEN}` } }, null), on, store);
    expect(basic?.status).toBe(401);
  });

  it("with the token: GET shows the id, DELETE forgets it so the next delivery can claim it", async () => {
    const ns = namespace();
    const store = new DurableObjectStore(env.IDEMPOTENCY, { namespace: ns });
    const on = { ADMIN_ROUTES: "on", ADMIN_TOKEN: TOKEN };
    const id = "order 42/é";
    expect((await store.claim(id, 60_000)).status).toBe("claimed");
    await store.remember(id);
    const path = `/admin/ids/${encodeURIComponent(id)}`;

    const shown = await adminRoute(request(path), on, () => store);
    expect(shown?.status).toBe(200);
    expect(shown?.headers.get("cache-control")).toBe("no-store");
    const body = (await shown?.json()) as { id: string; status: string; source: string };
    expect(body.id).toBe(id);
    expect(body.status).toBe("done");

    const forgotten = await adminRoute(request(path, { method: "DELETE" }), on, () => store);
    expect(forgotten?.status).toBe(200);
    expect(await forgotten?.json()).toEqual({ id, forgotten: true, before: "done" });
    expect(await store.seen(id)).toBe(false);
    expect((await store.claim(id, 60_000)).status).toBe("claimed");

    expect((await adminRoute(request(path, { method: "POST" }), on, () => store))?.status).toBe(405);
    expect((await adminRoute(request("/admin/ids/%E0%A4%A"), on, () => store))?.status).toBe(400);
    expect((await adminRoute(request("/admin/ids/"), on, () => store))?.status).toBe(400);
  });

  it("compares secrets by value, whatever their lengths", async () => {
    expect(await sameSecret(TOKEN, TOKEN)).toBe(true);
    expect(await sameSecret(TOKEN, `${TOKEN} `)).toBe(false);
    expect(await sameSecret("", TOKEN)).toBe(false);
    // workerd has crypto.subtle.timingSafeEqual; the fallback loop is for other runtimes.
    expect(typeof (crypto.subtle as unknown as { timingSafeEqual?: unknown }).timingSafeEqual).toBe("function");
  });
});
