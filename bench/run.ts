/**
 * `npm run bench`: babelqueue-serverless and Powertools for AWS Lambda side by side, in one run.
 *
 *   1. per-message overhead in memory (no backend);
 *   2. bundle sizes (esbuild) and module import times (fresh processes);
 *   3. DynamoDB Local, redis-server and the Upstash REST bridge, each behind a delay proxy:
 *      store requests and wall time per batch of 1 / 10 / 100 new messages and of 10 duplicates;
 *   4. cost: billed units (DynamoDB RRU / WRU, Upstash commands, Durable Object requests and SQLite
 *      rows in workerd) and dollars per million messages on 10 new, 10 duplicates and a redelivery storm;
 *   5. a fleet: P concurrent consumers on one store (bench/fleet/), ours and Powertools side by side.
 *   6. large batches: one SQS batch of BENCH_LARGE_BATCH records on DynamoDB (large-batch.ts).
 * Writes bench/results/report.md, chart.svg and results.json. Starts and stops its own backends
 * (loopback only); exits non-zero if a kit got an outcome wrong or a backend would not start.
 *
 * Knobs (environment): BENCH_ROUNDS (default 9), BENCH_DELAY_MS (default 5),
 * BENCH_IMPORT_SAMPLES (default 15), BENCH_OVERHEAD_BATCHES (default 300), BENCH_FLEET_SIZES (default
 * "1,8,32,64"; empty skips the fleet), BENCH_FLEET_MESSAGES (default 2000),
 * BENCH_LARGE_BATCH (records in the large batch, default 10000; 0 skips the section).
 * `npx tsx bench/run.ts --report-only` re-renders report.md and chart.svg from results.json.
 *
 * What this is *not*: part of `npm test`.
 */
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { resolve } from "node:path";
import { startBackends } from "./backends.js";
import { measureBundles } from "./bundle.js";
import { measureImportTimes } from "./import-time.js";
import { measureOverhead } from "./overhead.js";
import { type BenchResults, fmt, keyRows, ratio, renderMarkdown, renderSvg } from "./report.js";
import { dynamodbKits, measureBackend, redisKits } from "./store-runs.js";
import { measureWindow } from "./window.js";
import { measureTransactional } from "./transactional.js";
import { measureCosts } from "./cost-runs.js";
import { measureLargeBatchDynamoDB } from "./large-batch.js";
import { measureDurableObjectCosts } from "./cost-do.js";
import { PRICES_CHECKED } from "./prices.js";
import { type FleetResults, measureFleet } from "./fleet/fleet.js";
import { guardSpawnedChildren } from "../scripts/child-guard.mjs";

// Every backend this run starts stops with it, however it ends (scripts/child-guard.mjs): the ones
// spawned here are guarded where they are spawned; Miniflare's workerd is guarded from here.
guardSpawnedChildren({ names: ["workerd"] });

function knob(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < 0) throw new Error(`${name} must be a number >= 0`);
  return value;
}

function version(pkg: string): string {
  const json = JSON.parse(readFileSync(resolve("node_modules", pkg, "package.json"), "utf8")) as { version: string };
  return json.version;
}

const outDir = resolve("bench", "results");

function write(results: BenchResults): void {
  mkdirSync(outDir, { recursive: true });
  writeFileSync(resolve(outDir, "results.json"), `${JSON.stringify(results, null, 2)}\n`);
  writeFileSync(resolve(outDir, "report.md"), renderMarkdown(results));
  writeFileSync(resolve(outDir, "chart.svg"), renderSvg(results));
  console.log("");
  for (const row of keyRows(results)) {
    console.log(`${row.label.padEnd(58)} ours ${fmt(row.ours, row.unit).padStart(9)}  Powertools ${fmt(row.powertools, row.unit).padStart(9)}  ${ratio(row.powertools, row.ours)}`);
  }
}

async function measure(): Promise<BenchResults> {
  const started = performance.now();
  const rounds = Math.max(1, Math.round(knob("BENCH_ROUNDS", 9)));
  const delayMs = knob("BENCH_DELAY_MS", 5);
  const importSamples = Math.max(1, Math.round(knob("BENCH_IMPORT_SAMPLES", 15)));
  const overheadBatches = Math.max(1, Math.round(knob("BENCH_OVERHEAD_BATCHES", 300)));
  const largeBatch = Math.min(10_000, Math.round(knob("BENCH_LARGE_BATCH", 10_000)));
  const loadStart = loadavg();
  const step = (text: string) => console.log(`[bench ${((performance.now() - started) / 1000).toFixed(0).padStart(3)} s] ${text}`);

  step("per-message overhead (in memory)");
  const overhead = await measureOverhead(rounds, overheadBatches);
  step("bundle sizes");
  const bundles = await measureBundles();
  step(`import times (${importSamples} fresh processes per bundle)`);
  const imports = measureImportTimes(bundles, importSamples);
  step(`starting DynamoDB Local, redis-server, the REST bridge and ${delayMs} ms delay proxies`);
  const backends = await startBackends(delayMs);
  let dynamodb: BenchResults["dynamodb"] | undefined;
  let redis: BenchResults["redis"] | undefined;
  let window: BenchResults["window"];
  let transactional: BenchResults["transactional"];
  let costFigures: Awaited<ReturnType<typeof measureCosts>> | undefined;
  let fleet: FleetResults | undefined;
  const fleetSizes = (process.env.BENCH_FLEET_SIZES ?? "1,8,32,64")
    .split(",")
    .map((size) => size.trim())
    .filter((size) => size !== "")
    .map(Number);
  if (fleetSizes.some((size) => !Number.isSafeInteger(size) || size < 1)) throw new Error("BENCH_FLEET_SIZES must be a list of positive integers");
  let largeBatchFigures: BenchResults["largeBatch"];
  try {
    step(`DynamoDB: ${rounds} rounds`);
    dynamodb = await measureBackend("DynamoDB", dynamodbKits(backends), rounds);
    step(`Redis: ${rounds} rounds`);
    redis = await measureBackend("Redis", await redisKits(backends), rounds);
    window = await measureWindow(backends, Math.max(1, Math.round(rounds / 3)), step);
    step("transactional mode next to plain mode (DynamoDB, PostgreSQL)");
    transactional = await measureTransactional(backends, rounds);
    step("cost: billed units on DynamoDB and Redis");
    costFigures = await measureCosts(backends);
    if (fleetSizes.length > 0) fleet = await measureFleet(backends, fleetSizes, Math.max(100, Math.round(knob("BENCH_FLEET_MESSAGES", 2000))), step);
    if (largeBatch > 0) largeBatchFigures = await measureLargeBatchDynamoDB(backends, largeBatch, step);
  } finally {
    await backends.stop();
  }
  step("cost: Durable Objects in workerd (Miniflare)");
  costFigures.push(...(await measureDurableObjectCosts()));

  const results: BenchResults = {
    facts: {
      date: new Date().toISOString(),
      node: process.versions.node,
      cpu: cpus()[0]?.model.trim() ?? "unknown CPU",
      cores: cpus().length,
      loadStart,
      loadEnd: loadavg(),
      delayMs,
      rounds,
      importSamples,
      durationS: (performance.now() - started) / 1000,
      versions: {
        "babelqueue-serverless": (JSON.parse(readFileSync("package.json", "utf8")) as { version: string }).version,
        "@aws-lambda-powertools/idempotency": version("@aws-lambda-powertools/idempotency"),
        "@aws-lambda-powertools/batch": version("@aws-lambda-powertools/batch"),
        "@aws-sdk/client-dynamodb": version("@aws-sdk/client-dynamodb"),
        "@upstash/redis": version("@upstash/redis"),
        "@redis/client": version("@redis/client"),
        ioredis: version("ioredis"),
        esbuild: version("esbuild"),
      },
    },
    dynamodb,
    redis,
    window,
    transactional,
    cost: { figures: costFigures, pricesChecked: PRICES_CHECKED },
    ...(largeBatchFigures === undefined ? {} : { largeBatch: largeBatchFigures }),
    overhead,
    // Where the bundles were written is this machine's business, not the report's.
    bundles: bundles.map(({ file: _file, ...figure }) => figure),
    imports,
    ...(fleet === undefined ? {} : { fleet }),
  };
  return results;
}

// `--report-only`: re-render report.md and chart.svg from the last results.json, measuring nothing.
if (process.argv.includes("--report-only")) {
  write(JSON.parse(readFileSync(resolve(outDir, "results.json"), "utf8")) as BenchResults);
} else {
  const started = performance.now();
  write(await measure());
  console.log(`[bench] done in ${((performance.now() - started) / 1000).toFixed(0)} s: bench/results/report.md, chart.svg, results.json`);
}
// Backend clients may keep sockets referenced for a moment; the run is over.
process.exit(0);
