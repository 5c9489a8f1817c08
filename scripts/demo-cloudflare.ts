/**
 * The demo's Cloudflare scenario: a redelivery storm on a REAL Miniflare queue, consumed by
 * `queueHandler` + `DurableObjectStore` (4 shards) inside workerd.
 *
 * 3,000 distinct meta.ids, each produced 1–5 times (about 9,000 sends), the copies spread at
 * random over two queues that stand for two consumers of one stream: both claim in the SAME
 * namespace, so copies of one id in both queues race, and the loser is parked with a delay.
 * 10% of handler runs throw (before their effect) and are retried by the queue (max_retries 20,
 * then a dead-letter queue, which the verdict counts as lost). Effects and results are counted in
 * a separate Durable Object and read back over HTTP.
 *
 * Size: 3,000 ids / ~9,000 sends (~9,500 deliveries with retries) ran in about 12 s here, workerd
 * start included (2 cores) — well under a minute even on a slower CI machine — while still
 * producing hundreds of handler failures, thousands of suppressed duplicates and some cross-queue
 * in-flight parks. (Miniflare hands each queue's batches to its consumer one at a time, so races
 * happen only across the two queues.) The worker is test/workers/storm-worker.ts, bundled with esbuild.
 */
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { Miniflare } from "miniflare";
import type { DemoReport } from "./demo-report.js";
import { seededRandom } from "./storm.js";

const UNIQUE_IDS = 3_000;
const MAX_COPIES = 5;
const FAIL_RATE = 0.1;
const SEED = 20260801;
const TIMEOUT_MS = 50_000;

interface TallyCounts {
  effects: Record<string, number>;
  results: Record<string, number>;
  deadLettered: number;
}

async function bundleWorker(): Promise<string> {
  const result = await build({
    entryPoints: [fileURLToPath(new URL("../test/workers/storm-worker.ts", import.meta.url))],
    bundle: true,
    format: "esm",
    platform: "neutral",
    target: "es2022",
    conditions: ["workerd", "worker", "browser"],
    external: ["cloudflare:workers"],
    write: false,
    logLevel: "silent",
  });
  return result.outputFiles[0]?.text ?? "";
}

function envelope(id: string, n: number): string {
  return JSON.stringify({
    job: "urn:babel:orders:charge",
    trace_id: `trace-${n}`,
    data: { order: n, failRate: FAIL_RATE },
    meta: { id, queue: "storm", lang: "node", schema_version: 1, created_at: 1 },
    attempts: 0,
  });
}

export async function runCloudflareScenario(): Promise<DemoReport> {
  const started = Date.now();
  const random = seededRandom(SEED);
  const consumer = { maxBatchSize: 100, maxBatchTimeout: 0.1, maxRetries: 20, retryDelay: 0, deadLetterQueue: "storm-dlq" };
  const mf = new Miniflare({
    modules: true,
    script: await bundleWorker(),
    compatibilityDate: "2025-09-01",
    durableObjects: {
      IDEMPOTENCY: { className: "IdempotencyObject", useSQLite: true },
      TALLY: { className: "Tally", useSQLite: true },
    },
    queueProducers: { QUEUE_A: { queueName: "storm-a" }, QUEUE_B: { queueName: "storm-b" } },
    queueConsumers: { "storm-a": consumer, "storm-b": consumer, "storm-dlq": { maxBatchSize: 100, maxBatchTimeout: 0.1 } },
  });
  try {
    await mf.ready;
    // Produce: every id 1..MAX_COPIES times, shuffled, each copy to queue a or b at random.
    const sends: { queue: "a" | "b"; body: string }[] = [];
    for (let n = 0; n < UNIQUE_IDS; n += 1) {
      const id = `order-${n}`;
      const copies = 1 + Math.floor(random() * MAX_COPIES);
      for (let c = 0; c < copies; c += 1) sends.push({ queue: random() < 0.5 ? "a" : "b", body: envelope(id, n) });
    }
    for (let i = sends.length - 1; i > 0; i -= 1) {
      const j = Math.floor(random() * (i + 1));
      [sends[i], sends[j]] = [sends[j] as (typeof sends)[number], sends[i] as (typeof sends)[number]];
    }
    for (let i = 0; i < sends.length; i += 100) {
      const chunk = sends.slice(i, i + 100);
      for (const queue of ["a", "b"] as const) {
        const bodies = chunk.filter((s) => s.queue === queue).map((s) => s.body);
        if (bodies.length === 0) continue;
        const response = await mf.dispatchFetch("http://storm/send", { method: "POST", body: JSON.stringify({ queue, bodies }) });
        if (!response.ok) throw new Error(`send failed: ${response.status}`);
        await response.arrayBuffer();
      }
    }

    // Every copy ends acknowledged (ran or duplicate) or dead-lettered.
    let tally: TallyCounts = { effects: {}, results: {}, deadLettered: 0 };
    while (Date.now() - started < TIMEOUT_MS) {
      tally = (await (await mf.dispatchFetch("http://storm/tally")).json()) as TallyCounts;
      if ((tally.results.acked ?? 0) + tally.deadLettered >= sends.length) break;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }

    const effectCounts = Object.values(tally.effects);
    const results = tally.results;
    return {
      scenario: "Cloudflare Queues (Miniflare) + Durable Objects",
      deliveries: Object.entries(results)
        .filter(([status]) => status !== "acked" && status !== "retried")
        .reduce((sum, [, n]) => sum + n, 0),
      uniqueIds: UNIQUE_IDS,
      effects: effectCounts.reduce((a, b) => a + b, 0),
      duplicatesSuppressed: results.duplicate ?? 0,
      inFlightParks: results["in-flight"] ?? 0,
      retries: results.retried ?? 0,
      lost: UNIQUE_IDS - effectCounts.filter((n) => n > 0).length,
      duplicateEffects: effectCounts.reduce((sum, n) => sum + Math.max(0, n - 1), 0),
      elapsedMs: Date.now() - started,
    };
  } finally {
    await mf.dispose();
  }
}

// Run on its own: `tsx scripts/demo-cloudflare.ts`.
if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const report = await runCloudflareScenario();
  console.log(JSON.stringify(report, null, 2));
}
