/**
 * BENCH — bundle size: each fixture bundled by esbuild exactly as a user's build would (minified,
 * ESM), reported raw and gzipped (level 9). Lambda bundles keep the AWS SDK external (the Lambda
 * Node.js runtime ships it); a second pair bundles the SDK in, for those who pin their own.
 * The Lambda bundles (SDK external) are written to `.tmp/bench/` for the import-time measurement.
 *
 * What this is *not*: a tree-shaking audit; it is what a user ships.
 */
import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { gzipSync } from "node:zlib";
import { type BuildOptions, build } from "esbuild";

export interface BundleFigure {
  readonly id: string;
  readonly label: string;
  readonly kit: "ours" | "Powertools" | "baseline";
  /** Minified bytes. */
  readonly bytes: number;
  /** Minified + gzip -9 bytes. */
  readonly gzipBytes: number;
  /** Where the bundle was written, when it was (Lambda bundles with the SDK external). */
  readonly file?: string;
  /** Our bundles only: the minified bytes each area of the package adds (esbuild's metafile), largest first. */
  readonly areas?: readonly BundleArea[];
}

/** One area of the package in a bundle: a folder of it (`src/engine`, `stores/dynamodb`, …) or a top-level file. */
export interface BundleArea {
  readonly area: string;
  /** Minified bytes in the bundle (before gzip, which cannot be split by module). */
  readonly bytes: number;
}

/**
 * The package's share of a bundle by area: each input's `bytesInOutput`, summed per folder
 * (`src/engine/batch.ts` → `src/engine`; `src/envelope.ts` → `src/envelope.ts`; a dependency →
 * `node_modules`). The bench's own fixture is left out.
 */
export function bundleAreas(inputs: Readonly<Record<string, { readonly bytesInOutput: number }>>): BundleArea[] {
  const byArea = new Map<string, number>();
  for (const [path, input] of Object.entries(inputs)) {
    if (path.startsWith("bench/") || input.bytesInOutput === 0) continue;
    const parts = path.split("/");
    const area = parts.includes("node_modules") ? "node_modules" : parts.length > 2 ? parts.slice(0, 2).join("/") : path;
    byArea.set(area, (byArea.get(area) ?? 0) + input.bytesInOutput);
  }
  return [...byArea].map(([area, bytes]) => ({ area, bytes })).sort((a, b) => b.bytes - a.bytes || a.area.localeCompare(b.area));
}

export const OUT_DIR = resolve(".tmp", "bench");

interface Target {
  id: string;
  label: string;
  kit: BundleFigure["kit"];
  entry: string;
  options: BuildOptions;
  write: boolean;
}

const lambda: BuildOptions = { platform: "node", target: "node20", format: "esm", mainFields: ["module", "main"] };
const sdkExternal: BuildOptions = { ...lambda, external: ["@aws-sdk/*", "@smithy/*"] };

const TARGETS: Target[] = [
  {
    id: "engine-alone",
    label: "The engine alone: BatchEngine, no store, runtime or logs (the floor under every bundle of ours below)",
    kit: "ours",
    entry: "bench/fixtures/engine-alone.ts",
    options: { platform: "neutral", target: "es2022", format: "esm" },
    write: false,
  },
  {
    id: "worker-ours",
    label: "Worker: queueHandler + DurableObjectStore",
    kit: "ours",
    entry: "bench/fixtures/worker-ours.ts",
    options: { platform: "neutral", target: "es2022", format: "esm", conditions: ["workerd", "worker", "browser"], external: ["cloudflare:workers"] },
    write: false,
  },
  { id: "lambda-ours", label: "Lambda: sqsHandler + DynamoDBStore (SDK external)", kit: "ours", entry: "bench/fixtures/lambda-ours.ts", options: sdkExternal, write: true },
  {
    id: "lambda-powertools",
    label: "Lambda: Powertools batch + idempotency + DynamoDBPersistenceLayer (SDK external)",
    kit: "Powertools",
    entry: "bench/fixtures/lambda-powertools.ts",
    options: sdkExternal,
    write: true,
  },
  { id: "lambda-sdk-only", label: "Lambda: a DynamoDB client alone (SDK external)", kit: "baseline", entry: "bench/fixtures/lambda-sdk-only.ts", options: sdkExternal, write: true },
  { id: "lambda-ours-sdk", label: "Lambda: sqsHandler + DynamoDBStore (SDK bundled)", kit: "ours", entry: "bench/fixtures/lambda-ours.ts", options: lambda, write: false },
  {
    id: "lambda-powertools-sdk",
    label: "Lambda: Powertools batch + idempotency + DynamoDBPersistenceLayer (SDK bundled)",
    kit: "Powertools",
    entry: "bench/fixtures/lambda-powertools.ts",
    options: lambda,
    write: false,
  },
  {
    id: "lambda-ours-upstash",
    label: "Lambda: sqsHandler + UpstashRedisStore (@upstash/redis bundled)",
    kit: "ours",
    entry: "bench/fixtures/lambda-ours-upstash.ts",
    options: sdkExternal,
    write: false,
  },
  {
    id: "lambda-powertools-redis",
    label: "Lambda: Powertools batch + idempotency + CachePersistenceLayer (@redis/client bundled)",
    kit: "Powertools",
    entry: "bench/fixtures/lambda-powertools-redis.ts",
    options: sdkExternal,
    write: false,
  },
];

export async function measureBundles(): Promise<BundleFigure[]> {
  mkdirSync(OUT_DIR, { recursive: true });
  const figures: BundleFigure[] = [];
  for (const target of TARGETS) {
    const file = join(OUT_DIR, `${target.id}.mjs`);
    const result = await build({
      ...target.options,
      entryPoints: [target.entry],
      bundle: true,
      minify: true,
      legalComments: "none",
      logLevel: "silent",
      write: false,
      outfile: file,
      metafile: target.kit === "ours",
    });
    const output = result.outputFiles.find((out) => out.path.endsWith(".mjs"));
    if (output === undefined) throw new Error(`esbuild produced no bundle for ${target.id}`);
    if (target.write) {
      const { writeFileSync } = await import("node:fs");
      writeFileSync(file, output.contents);
    }
    figures.push({
      id: target.id,
      label: target.label,
      kit: target.kit,
      bytes: output.contents.byteLength,
      gzipBytes: gzipSync(output.contents, { level: 9 }).byteLength,
      ...(target.write ? { file } : {}),
      ...(result.metafile === undefined ? {} : { areas: bundleAreas(Object.values(result.metafile.outputs)[0]?.inputs ?? {}) }),
    });
  }
  return figures;
}
