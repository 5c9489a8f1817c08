/**
 * An example Worker (deploy it with the repo's wrangler.toml): a producer route and a Cloudflare
 * Queues consumer that runs each BabelQueue message's effect once, keyed on `meta.id`.
 *
 *   POST /jobs  {"job": "urn:babel:orders:created", "data": {...}, "id"?: "...", "copies"?: 1-5}
 *     → sends a schema_version-1 envelope to the queue (`copies` > 1 sends duplicates on purpose).
 *     Needs the PRODUCER_TOKEN secret as a Bearer token; answers 503 until it is set.
 *   GET / DELETE /admin/ids/<id>  → inspect / forget an id in the store (./admin.ts). OFF unless
 *     ADMIN_ROUTES = "on" and the ADMIN_TOKEN secret is set; then it needs that Bearer token.
 *
 * The consumer claims every id in the Durable Object store before running it: duplicates are
 * acknowledged without running, an id another delivery is running is retried after that lease,
 * and a handler that throws is retried and eventually dead-lettered by the queue.
 *
 * Secrets (an API token for your side effect, an Upstash token) come from `wrangler secret put`,
 * never from [vars] or this file.
 */
import { DurableObjectStore, queueHandler } from "babelqueue-serverless/cloudflare";
import { type AdminEnv, adminRoute, bearerRefusal } from "./admin.js";

// The Durable Object class must be exported from the Worker's main module.
export { IdempotencyObject } from "babelqueue-serverless/cloudflare/durable-object";

export interface Env extends AdminEnv {
  QUEUE: Queue;
  IDEMPOTENCY: DurableObjectNamespace<import("babelqueue-serverless/cloudflare/durable-object").IdempotencyObject>;
  SEEN: KVNamespace;
  /** Set with `wrangler secret put PRODUCER_TOKEN` (16+ characters; locally in .dev.vars): the Bearer token POST /jobs requires. Unset, POST /jobs answers 503. */
  PRODUCER_TOKEN?: string;
}

interface JobRequest {
  job?: unknown;
  data?: unknown;
  id?: unknown;
  copies?: unknown;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A BabelQueue wire envelope, schema_version 1. */
function envelope(job: string, data: Record<string, unknown>, id: string) {
  return {
    job,
    trace_id: crypto.randomUUID(),
    data,
    meta: { id, queue: "babelqueue-jobs", lang: "node", schema_version: 1, created_at: Date.now() },
    attempts: 0,
  };
}

/**
 * POST /jobs. Fail-closed: a deployed Worker is on a public URL, and anyone who can send an envelope
 * can take a `meta.id` first, so that the genuine message with that id is answered duplicate.
 */
export async function produce(request: Request, env: Pick<Env, "QUEUE" | "PRODUCER_TOKEN">): Promise<Response> {
  const refused = await bearerRefusal(request, env.PRODUCER_TOKEN, "PRODUCER_TOKEN", "POST /jobs is on");
  if (refused !== undefined) return refused;
  let input: JobRequest;
  try {
    input = (await request.json()) as JobRequest;
  } catch {
    return new Response("body must be JSON\n", { status: 400 });
  }
  if (typeof input.job !== "string" || input.job === "") return new Response('"job" must be a non-empty string\n', { status: 400 });
  const data = input.data === undefined ? {} : input.data;
  if (!isObject(data)) return new Response('"data" must be an object\n', { status: 400 });
  const id = typeof input.id === "string" && input.id !== "" ? input.id : crypto.randomUUID();
  const copies = typeof input.copies === "number" && Number.isInteger(input.copies) ? Math.min(5, Math.max(1, input.copies)) : 1;
  const body = envelope(input.job, data, id);
  await env.QUEUE.sendBatch(Array.from({ length: copies }, () => ({ body, contentType: "json" as const })));
  return Response.json({ id, copies }, { status: 202 });
}

/** The idempotency store: the consumer and the admin route see the same records. */
const idempotencyStore = (env: Env) => new DurableObjectStore(env.IDEMPOTENCY, { namespace: "example" });

export default {
  async fetch(request, env) {
    const admin = await adminRoute(request, env, () => idempotencyStore(env));
    if (admin !== undefined) return admin;
    const url = new URL(request.url);
    if (url.pathname === "/jobs" && request.method === "POST") return produce(request, env);
    return new Response("POST /jobs\n", { status: 404 });
  },

  queue: queueHandler<Env>({
    store: idempotencyStore,
    handle: async (message, ctx) => {
      // The side effect, run once per meta.id. Log ids and counts, never payloads or secrets.
      console.log(`ran ${message.job} id=${ctx.key ?? "(none)"} attempts=${ctx.attempts} dedupe=${ctx.dedupe}`);
    },
    // Every outcome that is not a plain run (duplicate, park, failure, conflict, store error) is
    // logged as one JSON line by default, without payloads; `metrics` and `tracing` are opt-in.
  }),
} satisfies ExportedHandler<Env>;
