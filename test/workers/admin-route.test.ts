/**
 * The example Worker's operator route (examples/worker/admin.ts) inside workerd, over the real
 * Durable Object store: off unless ADMIN_ROUTES = "on", fail-closed without an ADMIN_TOKEN, a
 * Bearer token compared in constant time, then GET inspects and DELETE forgets (a replay). And its
 * producer route, POST /jobs, fail-closed the same way: anyone who can enqueue can take an id first.
 */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { DurableObjectStore } from "../../stores/durable-object/store.js";
import { adminRoute, sameSecret } from "../../examples/worker/admin.js";
import { produce } from "../../examples/worker/index.js";

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

describe("the example Worker's producer route (POST /jobs)", () => {
  /** A queue that keeps what it is sent. */
  const queue = () => {
    const sent: { body: unknown; contentType?: string }[][] = [];
    return { sent, QUEUE: { sendBatch: async (batch: { body: unknown; contentType?: string }[]) => void sent.push(batch) } as unknown as Queue };
  };
  const job = (token: string | null) => request("/jobs", { method: "POST", body: JSON.stringify({ job: "orders.created", data: { order: 1 }, id: "order-1", copies: 2 }) }, token);

  it("answers 503 until PRODUCER_TOKEN is set (16+ characters) and 401 to a missing or wrong token; nothing is sent", async () => {
    const { sent, QUEUE } = queue();
    expect((await produce(job(TOKEN), { QUEUE })).status).toBe(503);
    expect((await produce(job(TOKEN), { QUEUE, PRODUCER_TOKEN: "short" })).status).toBe(503);
    for (const token of [null, "", "wrong", TOKEN.slice(0, -1)]) {
      const response = await produce(job(token), { QUEUE, PRODUCER_TOKEN: TOKEN });
      expect(response.status, String(token)).toBe(401);
      expect(response.headers.get("www-authenticate")).toBe("Bearer");
    }
    expect(sent).toEqual([]);
  });

  it("with the token: sends the envelope, one copy per `copies`", async () => {
    const { sent, QUEUE } = queue();
    const response = await produce(job(TOKEN), { QUEUE, PRODUCER_TOKEN: TOKEN });
    expect(response.status).toBe(202);
    expect(await response.json()).toEqual({ id: "order-1", copies: 2 });
    expect(sent).toHaveLength(1);
    const [first, second] = sent[0] ?? [];
    expect(first?.contentType).toBe("json");
    expect(first?.body).toMatchObject({ job: "orders.created", data: { order: 1 }, meta: { id: "order-1", schema_version: 1 }, attempts: 0 });
    expect(second?.body).toEqual(first?.body);
  });
});
