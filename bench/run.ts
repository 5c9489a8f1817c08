/**
 * `npm run bench`: babelqueue-serverless and Powertools for AWS Lambda side by side, in one run.
 *
 *   1. per-message overhead in memory (no backend);
 *   2. bundle sizes (esbuild) and module import times (fresh processes);
 *   3. DynamoDB Local, redis-server and the Upstash REST bridge, each behind a delay proxy:
 *      store requests and wall time per batch of 1 / 10 / 100 new messages and of 10 redelivered duplicates;
 *   4. cost: billed units (DynamoDB RRU / WRU, Upstash commands, Durable Object requests and SQLite
 *      rows in workerd) and dollars per million messages on 10 new, 10 redelivered and a redelivery storm;
 *   5. a fleet: P concurrent consumers on one store (bench/fleet/), ours and Powertools side by side;
 *   6. large batches: one SQS batch of BENCH_LARGE_BATCH records on DynamoDB (large-batch.ts).
 * Writes bench/results/report.md, chart.svg and results.json. Starts and stops its own backends
 * (loopback only); exits non-zero if a kit got an outcome wrong or a backend would not start.
 *
 * Knobs (environment): BENCH_ROUNDS (default 9), BENCH_DELAY_MS (default 5),
 * BENCH_IMPORT_SAMPLES (default 15), BENCH_OVERHEAD_BATCHES (default 300), BENCH_OVERHEAD_ROUNDS (default 21:
 * a round of every kit takes about half a second, and the overhead's spread is over rounds), BENCH_FLEET_SIZES (default
 * "1,8,32,64"; empty skips the fleet), BENCH_FLEET_MESSAGES (default 2000), BENCH_LARGE_BATCH (records
 * in the large batch, default 10000; 0 skips it).
 * `npx tsx bench/run.ts --report-only` re-renders report.md and chart.svg from results.json.
 * `--only=overhead,bundles,window,stores,transactional,cost,fleet,large-batch` measures just those parts (bundles
 * includes the import times) and keeps the rest from the last results.json; the report says which
 * parts are from which run. Every write also regenerates the docs' marked benchmark sections
 * (scripts/bench-docs.ts).
 *
 * What this is *not*: part of `npm test`.
 */
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { resolve } from "node:path";
import { startBackends } from "./backends.js";
import { measureBundles } from "./bundle.js";
import { measureImportTimes } from "./import-time.js";
import { type OverheadFigures, measureOverhead } from "./overhead.js";
import { type BenchResults, fmt, keyRows, ratio, renderMarkdown, renderSvg } from "./report.js";
import { dynamodbKits, measureBackend, redisKits } from "./store-runs.js";
import { measureWindow } from "./window.js";
import { measureTransactional } from "./transactional.js";
import { measureCosts } from "./cost-runs.js";
import { measureDurableObjectCosts } from "./cost-do.js";
import { PRICES_CHECKED } from "./prices.js";
import { writeBenchDocs } from "../scripts/bench-docs.js";
import { type FleetResults, measureFleet } from "./fleet/fleet.js";
import { measureLargeBatchDynamoDB } from "./large-batch.js";
import { guardSpawnedChildren } from "../scripts/child-guard.mjs";

// Every backend this run starts stops with it, however it ends (scripts/child-guard.mjs): the ones
// spawned here are guarded where they are spawned; Miniflare's workerd is guarded from here.
guardSpawnedChildren({ names: ["workerd"] });

/** The parts of a run that `--only` can pick. */
const PARTS = ["overhead", "bundles", "window", "stores", "transactional", "cost", "fleet", "large-batch"] as const;
type Part = (typeof PARTS)[number];

/** When each part of a partial run's results was measured: now for the parts of `--only`, else as the previous results say. */
function measuredOn(only: Set<Part>, previous: BenchResults): Record<string, string> {
  const now = new Date().toISOString();
  const before = previous.facts.measured ?? {};
  return Object.fromEntries(PARTS.map((part) => [part, only.has(part) ? now : (before[part] ?? previous.facts.date)]));
}

function onlyParts(argv: readonly string[]): Set<Part> | undefined {
  const arg = argv.find((one) => one.startsWith("--only="));
  if (arg === undefined) return undefined;
  const parts = arg.slice("--only=".length).split(",").filter(Boolean);
  for (const part of parts) if (!(PARTS as readonly string[]).includes(part)) throw new Error(`--only: unknown part "${part}" (parts: ${PARTS.join(", ")})`);
  return new Set(parts as Part[]);
}

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
  for (const file of writeBenchDocs(results)) console.log(`[bench] regenerated the marked sections of ${file}`);
}

async function measure(only: Set<Part> | undefined): Promise<BenchResults> {
  const started = performance.now();
  const wanted = (part: Part) => only === undefined || only.has(part);
  const previous = only === undefined ? undefined : (JSON.parse(readFileSync(resolve(outDir, "results.json"), "utf8")) as BenchResults);
  const rounds = Math.max(1, Math.round(knob("BENCH_ROUNDS", 9)));
  const delayMs = knob("BENCH_DELAY_MS", 5);
  const importSamples = Math.max(1, Math.round(knob("BENCH_IMPORT_SAMPLES", 15)));
  const overheadBatches = Math.max(1, Math.round(knob("BENCH_OVERHEAD_BATCHES", 300)));
  const overheadRounds = Math.max(1, Math.round(knob("BENCH_OVERHEAD_ROUNDS", 21)));
  const loadStart = loadavg();
  const step = (text: string) => console.log(`[bench ${((performance.now() - started) / 1000).toFixed(0).padStart(3)} s] ${text}`);

  let overhead = previous?.overhead as OverheadFigures;
  if (wanted("overhead")) {
    step("per-message overhead (in memory)");
    overhead = await measureOverhead(overheadRounds, overheadBatches);
  }
  let bundles = previous?.bundles as BenchResults["bundles"];
  let imports = previous?.imports as BenchResults["imports"];
  if (wanted("bundles")) {
    step("bundle sizes");
    const measured = await measureBundles();
    step(`import times (${importSamples} fresh processes per bundle)`);
    imports = measureImportTimes(measured, importSamples);
    // Where the bundles were written is this machine's business, not the report's.
    bundles = measured.map(({ file: _file, ...figure }) => figure);
  }
  let dynamodb = previous?.dynamodb as BenchResults["dynamodb"];
  let redis = previous?.redis as BenchResults["redis"];
  let window = previous?.window;
  let transactional = previous?.transactional;
  let costFigures = previous?.cost?.figures === undefined ? undefined : [...previous.cost.figures];
  let fleet: FleetResults | undefined = previous?.fleet;
  let largeBatchFigures = previous?.largeBatch;
  const fleetSizes = (process.env.BENCH_FLEET_SIZES ?? "1,8,32,64")
    .split(",")
    .map((size) => size.trim())
    .filter((size) => size !== "")
    .map(Number);
  if (fleetSizes.some((size) => !Number.isSafeInteger(size) || size < 1)) throw new Error("BENCH_FLEET_SIZES must be a list of positive integers");
  const largeBatch = Math.min(10_000, Math.round(knob("BENCH_LARGE_BATCH", 10_000)));
  if (wanted("stores") || wanted("window") || wanted("transactional") || wanted("cost") || wanted("fleet") || wanted("large-batch")) {
    step(`starting DynamoDB Local, redis-server, the REST bridge and ${delayMs} ms delay proxies`);
    const backends = await startBackends(delayMs);
    try {
      if (wanted("stores")) {
        step(`DynamoDB: ${rounds} rounds`);
        dynamodb = await measureBackend("DynamoDB", dynamodbKits(backends), rounds);
        step(`Redis: ${rounds} rounds`);
        redis = await measureBackend("Redis", await redisKits(backends), rounds);
      }
      if (wanted("window")) window = await measureWindow(backends, Math.max(1, Math.round(rounds / 3)), step);
      if (wanted("transactional")) {
        step("transactional mode next to plain mode (DynamoDB, PostgreSQL)");
        transactional = await measureTransactional(backends, rounds);
      }
      if (wanted("cost")) {
        step("cost: billed units on DynamoDB and Redis");
        costFigures = await measureCosts(backends);
      }
      if (wanted("fleet") && fleetSizes.length > 0) fleet = await measureFleet(backends, fleetSizes, Math.max(100, Math.round(knob("BENCH_FLEET_MESSAGES", 2000))), step);
      if (wanted("large-batch") && largeBatch > 0) largeBatchFigures = await measureLargeBatchDynamoDB(backends, largeBatch, step);
    } finally {
      await backends.stop();
    }
  }
  if (wanted("cost")) {
    step("cost: Durable Objects in workerd (Miniflare)");
    (costFigures as NonNullable<typeof costFigures>).push(...(await measureDurableObjectCosts()));
  }

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
      ...(only === undefined || previous === undefined ? {} : { measured: measuredOn(only, previous) }),
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
    ...(costFigures === undefined ? {} : { cost: { figures: costFigures, pricesChecked: PRICES_CHECKED } }),
    overhead,
    bundles,
    imports,
    ...(fleet === undefined ? {} : { fleet }),
    ...(largeBatchFigures === undefined ? {} : { largeBatch: largeBatchFigures }),
  };
  return results;
}

// `--report-only`: re-render report.md and chart.svg from the last results.json, measuring nothing.
if (process.argv.includes("--report-only")) {
  write(JSON.parse(readFileSync(resolve(outDir, "results.json"), "utf8")) as BenchResults);
} else {
  const started = performance.now();
  write(await measure(onlyParts(process.argv)));
  console.log(`[bench] done in ${((performance.now() - started) / 1000).toFixed(0)} s: bench/results/report.md, chart.svg, results.json`);
}
// Backend clients may keep sockets referenced for a moment; the run is over.
process.exit(0);
