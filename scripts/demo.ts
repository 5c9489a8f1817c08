/**
 * `npm run demo`: redelivery storms through every runtime this checkout has, on embedded local
 * backends, and one verdict table. Exits non-zero if any scenario lost a message or ran an
 * effect twice.
 */
import { existsSync } from "node:fs";
import { BatchEngine, InMemoryStore } from "../entry/index.js";
import { type DemoReport, formatReports, passed } from "./demo-report.js";
import { runStorm } from "./storm.js";
import { guardSpawnedChildren } from "./child-guard.mjs";

// The demo's backends stop with it, however it ends (scripts/child-guard.mjs): DynamoDB Local is
// guarded where it is spawned; Miniflare's workerd from here.
guardSpawnedChildren({ names: ["workerd"] });

async function engineOnMemory(): Promise<DemoReport> {
  return runStorm({ scenario: "batch engine + InMemoryStore" }, (tools) => {
    const engine = new BatchEngine(
      new InMemoryStore(),
      async (_envelope, context) => {
        // A little work, so copies of one id in different consumers' batches overlap.
        await new Promise((resolve) => setTimeout(resolve, Math.random() < 0.1 ? 2 : 0));
        if (tools.shouldFail()) throw new Error("payment gateway timeout (scripted)");
        tools.effect(context.key as string);
      },
      { observe: tools.observe, leaseMs: 30_000 },
    );
    return async (batch) => {
      const results = await engine.process(batch.map((d) => ({ body: d.body, redeliveries: d.receiveCount - 1, context: {} })));
      return results.map((r) => r.ack);
    };
  });
}

/** Scenarios added by the runtime integrations, each in its own module beside this one. */
const extraScenarios: [file: string, load: () => Promise<() => Promise<DemoReport | undefined>>][] = [
  ["demo-lambda.ts", async () => (await import("./demo-lambda.js")).runLambdaScenario],
  ["demo-lambda.ts", async () => (await import("./demo-lambda.js")).runLambdaTransactionalScenario],
  ["demo-cloudflare.ts", async () => (await import("./demo-cloudflare.js")).runCloudflareScenario],
];

const reports: DemoReport[] = [];
const only = process.argv[2];
if (!only || only === "memory") reports.push(await engineOnMemory());
for (const [file, load] of extraScenarios) {
  if (only && !file.includes(only)) continue;
  if (!existsSync(new URL(file, import.meta.url))) continue;
  const report = await (await load())();
  if (report !== undefined) reports.push(report);
}
console.log(formatReports(reports));
const failed = reports.filter((r) => !passed(r));
if (failed.length > 0) {
  console.error(`\nFAIL: ${failed.map((r) => r.scenario).join(", ")} lost a message or ran an effect twice`);
  process.exit(1);
}
console.log("\nEvery message took effect exactly once.");
