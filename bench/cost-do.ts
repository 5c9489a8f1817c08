/**
 * BENCH — the cost section's Durable Object figures: bundles bench/fixtures/worker-do-cost.ts with
 * esbuild, runs it in workerd through Miniflare (a SQLite-backed `IdempotencyObject` binding, as
 * the README's wrangler.toml declares it), hands it the cost workloads, and prices what it counted.
 * Each workload gets one unbilled warm-up message first (schema creation, the first alarm). Rows
 * written include every `setAlarm` (Cloudflare bills each as a row written) and the sweep that
 * deletes the workload's rows once they expire (run by the fixture as if 5 days had passed).
 *
 * What this is *not*: a comparison — Powertools has no Workers kit — nor a measure of duration
 * charges (GB-s), which depend on the deployed object's wall time, not on anything local.
 */
import { build } from "esbuild";
import { Miniflare } from "miniflare";
import type { CostFigure } from "./cost-runs.js";
import { type CostWorkload, costWorkloads, deliveriesOf } from "./cost-workloads.js";
import type { DurableObjectCost } from "./fixtures/worker-do-cost.js";
import { newIds } from "./fixtures/sqs.js";
import { PRICES, dollars } from "./prices.js";

const warmUp = (): CostWorkload => {
  const [id] = newIds(1, "do-warm") as [string];
  return { name: "new-10", label: "warm-up", messages: 1, prime: [], batches: [[{ id, receiveCount: 1, fail: false }]], expectRuns: 1, expectFailures: 0 };
};

export async function measureDurableObjectCosts(): Promise<CostFigure[]> {
  const bundle = await build({
    entryPoints: ["bench/fixtures/worker-do-cost.ts"],
    bundle: true,
    write: false,
    format: "esm",
    platform: "neutral",
    target: "es2022",
    conditions: ["workerd", "worker", "browser"],
    external: ["cloudflare:workers"],
  });
  const mf = new Miniflare({
    modules: true,
    script: bundle.outputFiles[0]?.text ?? "",
    compatibilityDate: "2025-09-01",
    durableObjects: { IDEMPOTENCY: { className: "MeteredIdempotencyObject", useSQLite: true } },
  });
  try {
    const workloads = costWorkloads(newIds);
    const response = await mf.dispatchFetch("http://bench.local/", { method: "POST", body: JSON.stringify([warmUp(), ...workloads]) });
    if (!response.ok) throw new Error(`the Durable Object cost run failed: HTTP ${response.status} ${await response.text()}`);
    const answers = ((await response.json()) as DurableObjectCost[]).slice(1);
    return workloads.map((workload, i) => {
      const cost = answers[i] as DurableObjectCost;
      if (cost.runs !== workload.expectRuns || cost.failures !== workload.expectFailures || cost.ranTwice > 0) {
        throw new Error(
          `DurableObjectStore on ${workload.name}: ${cost.runs} run(s) (expected ${workload.expectRuns}), ${cost.failures} failure(s) (expected ${workload.expectFailures}), ${cost.ranTwice} id(s) ran twice`,
        );
      }
      const rowsRead = cost.rowsRead + cost.sweepRowsRead;
      const rowsWritten = cost.rowsWritten + cost.alarmsSet + cost.sweepRowsWritten;
      const usd = dollars(PRICES.doRequest, cost.requests) + dollars(PRICES.doRowRead, rowsRead) + dollars(PRICES.doRowWritten, rowsWritten);
      return {
        backend: "Durable Objects",
        kit: "ours",
        workload: workload.name,
        messages: workload.messages,
        deliveries: deliveriesOf(workload),
        requests: cost.requests,
        units: {
          doRequests: cost.requests,
          rowsRead: cost.rowsRead,
          rowsWritten: cost.rowsWritten,
          alarmsSet: cost.alarmsSet,
          sweepRowsRead: cost.sweepRowsRead,
          sweepRowsWritten: cost.sweepRowsWritten,
        },
        usd,
        usdPerMillionMessages: (usd / workload.messages) * 1_000_000,
      } satisfies CostFigure;
    });
  } finally {
    await mf.dispose();
  }
}
