/**
 * An operator route for a Worker's idempotency store — the Durable Object, D1 or KV store, which
 * the CLI cannot reach from outside Cloudflare. OFF by default.
 *
 *   GET    /admin/ids/<id>   what the store holds for the id (inspect, or seen for a store without it)
 *   DELETE /admin/ids/<id>   forget the id: its next delivery runs the effect again (a deliberate replay)
 *
 * (the id URL-encoded). It answers only when BOTH are set:
 *   - `ADMIN_ROUTES = "on"` (a plain variable: `wrangler deploy --var ADMIN_ROUTES:on`, or `[vars]`
 *     in your own config; unset means off, and the route is a 404 like any unknown path);
 *   - `ADMIN_TOKEN`, a secret (`wrangler secret put ADMIN_TOKEN`), sent as `Authorization: Bearer …`
 *     and compared in constant time (both sides hashed to 32 bytes first, so neither the content
 *     nor the length leaks through timing).
 *
 *   curl -H "Authorization: Bearer $ADMIN_TOKEN" https://<worker>/admin/ids/order-42
 *   curl -X DELETE -H "Authorization: Bearer $ADMIN_TOKEN" https://<worker>/admin/ids/order-42
 *
 * What this is *not*: a bulk tool or a public API. One id per request; keep it off unless you are
 * replaying something, and rotate the token after.
 */
import type { Store } from "babelqueue-serverless";

export interface AdminEnv {
  /** "on" enables the route; anything else (or unset) leaves it off. */
  ADMIN_ROUTES?: string;
  /** The bearer token, a `wrangler secret`. */
  ADMIN_TOKEN?: string;
}

const PREFIX = "/admin/ids/";
const encoder = new TextEncoder();

async function sha256(text: string): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(text)));
}

/** Constant-time equality of two secrets: workerd's `timingSafeEqual` over their SHA-256 digests. */
export async function sameSecret(given: string, expected: string): Promise<boolean> {
  const [a, b] = await Promise.all([sha256(given), sha256(expected)]);
  const subtle = crypto.subtle as SubtleCrypto & { timingSafeEqual?: (a: ArrayBufferView, b: ArrayBufferView) => boolean };
  if (typeof subtle.timingSafeEqual === "function") return subtle.timingSafeEqual(a, b);
  let difference = 0;
  for (let i = 0; i < a.length; i += 1) difference |= (a[i] as number) ^ (b[i] as number);
  return difference === 0;
}

/**
 * Fail-closed Bearer check of a route: a 503 while the secret is not set (or shorter than 16
 * characters), a 401 for a missing or wrong token (compared in constant time); undefined when the
 * request may go on. `secretName` and `what` only word the 503.
 */
export async function bearerRefusal(request: Request, secret: string | undefined, secretName: string, what: string): Promise<Response | undefined> {
  if (typeof secret !== "string" || secret.length < 16) {
    return new Response(`${what} but ${secretName} is not set (at least 16 characters): wrangler secret put ${secretName}\n`, { status: 503 });
  }
  const authorization = request.headers.get("authorization") ?? "";
  const given = authorization.startsWith("Bearer ") ? authorization.slice("Bearer ".length) : "";
  if (!(await sameSecret(given, secret))) return new Response("unauthorized\n", { status: 401, headers: { "www-authenticate": "Bearer" } });
  return undefined;
}

const json = (body: unknown, status = 200) => Response.json(body, { status, headers: { "cache-control": "no-store" } });

async function describe(store: Store, id: string): Promise<Record<string, unknown>> {
  if (typeof store.inspect === "function") {
    const record = await store.inspect(id);
    return record === null ? { id, status: "absent", source: "inspect" } : { id, ...record, source: "inspect" };
  }
  return { id, status: (await store.seen(id)) ? "done" : "not-done", source: "seen" };
}

/**
 * The admin route's answer, or undefined when the request is not for it (let the Worker go on).
 * `store` is called only for an authorized request.
 */
export async function adminRoute(request: Request, env: AdminEnv, store: () => Store): Promise<Response | undefined> {
  const url = new URL(request.url);
  if (!url.pathname.startsWith(PREFIX)) return undefined;
  if (env.ADMIN_ROUTES !== "on") return new Response("not found\n", { status: 404 });
  const refused = await bearerRefusal(request, env.ADMIN_TOKEN, "ADMIN_TOKEN", "admin routes are on");
  if (refused !== undefined) return refused;
  let id: string;
  try {
    id = decodeURIComponent(url.pathname.slice(PREFIX.length));
  } catch {
    return new Response("the id is not valid percent-encoding\n", { status: 400 });
  }
  if (id === "") return new Response("give an id: /admin/ids/<id>\n", { status: 400 });
  const target = store();
  try {
    if (request.method === "GET") return json(await describe(target, id));
    if (request.method === "DELETE") {
      const before = await describe(target, id);
      await target.forget(id);
      return json({ id, forgotten: true, before: before.status });
    }
    return new Response("GET or DELETE\n", { status: 405, headers: { allow: "GET, DELETE" } });
  } catch (error) {
    // The store's error names its kind; its message may quote a key, never printed here.
    return json({ id, error: error instanceof Error ? error.name : typeof error }, 503);
  }
}
