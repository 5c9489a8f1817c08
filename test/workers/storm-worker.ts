/**
 * The Worker the Cloudflare demo (scripts/demo-cloudflare.ts) runs under Miniflare: the
 * redelivery storm's producer and consumers, on a real Miniflare queue and the Durable Object store.
 *
 * - POST /send {queue: "a" | "b", bodies: string[]}: sends up to 100 envelopes to that queue.
 * - Two queues ("storm-a", "storm-b") stand for two consumers of the same stream: both consume
 *   with the SAME store namespace, so copies of one meta.id in both queues race for the claim.
 * - The handler fails at random (`data.failRate`) before its effect; effects are counted per id
 *   in the `Tally` object, and so is every result the engine reports (through `observe`).
 * - GET /tally: the counts, for the demo's verdict.
 *
 * It is not a test (no *.test.ts): it lives here to be type-checked with the Workers types.
 */
import { DurableObject } from "cloudflare:workers";
import { DurableObjectStore, queueHandler } from "../../entry/cloudflare.js";
import { IdempotencyObject } from "../../entry/cloudflare-durable-object.js";
import type { MessageResult } from "../../src/decision.js";

export { IdempotencyObject };

export interface StormEnv {
  IDEMPOTENCY: DurableObjectNamespace<IdempotencyObject>;
  TALLY: DurableObjectNamespace<Tally>;
  QUEUE_A: Queue;
  QUEUE_B: Queue;
}

export interface TallyCounts {
  /** Effects per meta.id. */
  effects: Record<string, number>;
  /** Engine results by status, plus "acked" and "retried". */
  results: Record<string, number>;
  deadLettered: number;
}

/** Counts effects and results in its SQLite storage. One instance ("storm") per run. */
export class Tally extends DurableObject {
  #ready = false;

  #sql(query: string, ...bindings: unknown[]) {
    if (!this.#ready) {
      this.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS counts (kind TEXT NOT NULL, name TEXT NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (kind, name))");
      this.#ready = true;
    }
    return this.ctx.storage.sql.exec(query, ...bindings);
  }

  #add(kind: string, name: string, n: number): void {
    this.#sql("INSERT INTO counts (kind, name, n) VALUES (?, ?, ?) ON CONFLICT (kind, name) DO UPDATE SET n = n + excluded.n", kind, name, n);
  }

  effect(id: string): void {
    this.#add("effect", id, 1);
  }

  results(counts: Record<string, number>): void {
    this.ctx.storage.transactionSync(() => {
      for (const [status, n] of Object.entries(counts)) this.#add("result", status, n);
    });
  }

  deadLetter(n: number): void {
    this.#add("dead-letter", "all", n);
  }

  counts(): TallyCounts {
    const out: TallyCounts = { effects: {}, results: {}, deadLettered: 0 };
    for (const row of this.#sql("SELECT kind, name, n FROM counts").toArray()) {
      const n = Number(row.n);
      if (row.kind === "effect") out.effects[String(row.name)] = n;
      else if (row.kind === "result") out.results[String(row.name)] = n;
      else out.deadLettered += n;
    }
    return out;
  }
}

const tally = (env: StormEnv) => env.TALLY.get(env.TALLY.idFromName("storm"));

function countResults(results: readonly MessageResult[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const result of results) {
    counts[result.status] = (counts[result.status] ?? 0) + 1;
    const fate = result.ack ? "acked" : "retried";
    counts[fate] = (counts[fate] ?? 0) + 1;
  }
  return counts;
}

/** The lease of the storm: short, so parked copies come back within seconds. */
const STORM_LEASE_MS = 3_000;

function consumerFor(env: StormEnv) {
  const results: MessageResult[] = [];
  const handler = queueHandler<StormEnv>({
    store: (e) => new DurableObjectStore(e.IDEMPOTENCY, { namespace: "storm", shards: 4 }),
    leaseMs: STORM_LEASE_MS,
    // The storm's outcomes are counted below; thousands of duplicate lines would drown the demo.
    logger: false,
    handle: async (envelope, ctx) => {
      const failRate = typeof envelope.data.failRate === "number" ? envelope.data.failRate : 0;
      if (Math.random() < failRate) throw new Error("payment gateway timeout (scripted)");
      await tally(ctx.env).effect(ctx.key ?? "no-key");
    },
    observe: (event) => {
      if (event.type === "result") results.push(event.result);
    },
  });
  return { handler, results, env };
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (request.method === "POST" && url.pathname === "/send") {
      const { queue, bodies } = (await request.json()) as { queue: "a" | "b"; bodies: string[] };
      const target = queue === "a" ? env.QUEUE_A : env.QUEUE_B;
      await target.sendBatch(bodies.map((body) => ({ body, contentType: "text" as const })));
      return new Response(null, { status: 204 });
    }
    if (url.pathname === "/tally") return Response.json(await tally(env).counts());
    return new Response("not found", { status: 404 });
  },

  async queue(batch, env, ctx) {
    if (batch.queue === "storm-dlq") {
      await tally(env).deadLetter(batch.messages.length);
      batch.ackAll();
      return;
    }
    const consumer = consumerFor(env);
    await consumer.handler(batch, env, ctx);
    await tally(env).results(countResults(consumer.results));
  },
} satisfies ExportedHandler<StormEnv>;
