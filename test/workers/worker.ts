/**
 * The Worker under test (the "workers" project's `main`): the package's `IdempotencyObject`,
 * an `EffectLog` object the tests read effects back from, and a queue consumer built with
 * `queueHandler` + `DurableObjectStore` whose behaviour each message scripts in its `data.mode`:
 *   "ok" runs the effect; "throw" always fails (so the message reaches the dead-letter queue).
 * The dead-letter queue's consumer records what arrived there.
 */
import { DurableObject } from "cloudflare:workers";
import { DurableObjectStore, queueHandler } from "../../entry/cloudflare.js";
import { IdempotencyObject } from "../../entry/cloudflare-durable-object.js";

export { IdempotencyObject };

export interface TestEnv {
  IDEMPOTENCY: DurableObjectNamespace<IdempotencyObject>;
  EFFECTS: DurableObjectNamespace<EffectLog>;
  SEEN: KVNamespace;
  QUEUE: Queue;
}

export const JOBS_QUEUE = "bq-test-jobs";
export const DEAD_LETTER_QUEUE = "bq-test-jobs-dlq";
/** The consumer's store namespace (tests use fresh meta.ids, so they never collide). */
export const QUEUE_NAMESPACE = "queue-path";

/** Counts what happened, by kind and id. One object (by name) per test. */
export class EffectLog extends DurableObject {
  #ready = false;

  #sql(query: string, ...bindings: unknown[]) {
    if (!this.#ready) {
      this.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS log (kind TEXT NOT NULL, id TEXT NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (kind, id))");
      this.#ready = true;
    }
    return this.ctx.storage.sql.exec(query, ...bindings);
  }

  add(kind: string, id: string): void {
    this.#sql("INSERT INTO log (kind, id, n) VALUES (?, ?, 1) ON CONFLICT (kind, id) DO UPDATE SET n = n + 1", kind, id);
  }

  /** Every (kind, id) → count. */
  counts(): Record<string, Record<string, number>> {
    const out: Record<string, Record<string, number>> = {};
    for (const row of this.#sql("SELECT kind, id, n FROM log").toArray()) {
      const kind = String(row.kind);
      (out[kind] ??= {})[String(row.id)] = Number(row.n);
    }
    return out;
  }
}

/** The log object all consumers of a test write to: the meta.id prefix names it. */
export function logFor(env: TestEnv, id: string): DurableObjectStub<EffectLog> {
  const run = id.split("/")[0] ?? id;
  return env.EFFECTS.get(env.EFFECTS.idFromName(run));
}

const consumer = queueHandler<TestEnv>({
  store: (env) => new DurableObjectStore(env.IDEMPOTENCY, { namespace: QUEUE_NAMESPACE, shards: 2 }),
  handle: async (envelope, ctx) => {
    const id = ctx.key ?? "no-key";
    const log = logFor(ctx.env, id);
    await log.add("attempt", id);
    if (envelope.data.mode === "throw") throw new Error("scripted handler failure");
    await log.add("effect", id);
  },
});

function deadLetterId(body: unknown): string {
  if (typeof body === "string") return body;
  const meta = (body as { meta?: { id?: unknown } } | null)?.meta;
  return typeof meta?.id === "string" ? meta.id : "unknown";
}

export default {
  async queue(batch, env, ctx) {
    if (batch.queue === DEAD_LETTER_QUEUE) {
      for (const message of batch.messages) {
        const id = deadLetterId(message.body);
        await logFor(env, id).add("dead-letter", id);
        message.ack();
      }
      return;
    }
    await consumer(batch, env, ctx);
  },
} satisfies ExportedHandler<TestEnv>;
