/**
 * BENCH — the `serverless.yml` artifact, built by `osls package` four ways: as committed (minified,
 * AWS SDK v3 bundled on purpose, a source map without sources), with the SDK left to the Lambda
 * runtime (`exclude: ["@aws-sdk/*"]`), bundled without a source map, and 0.1.0's build (not
 * minified, map with sources). The variants are serverless.yml with its esbuild lines changed,
 * written next to it for the run and removed after. For each: the zip, the bundle, the source map,
 * and the cold-start import time — a fresh Node process per sample imports the unzipped handler
 * with the NODE_OPTIONS serverless.yml deploys (`--enable-source-maps` parses the map at import)
 * and reports wall and CPU time of `import()`: module loading, evaluation, and the DynamoDB client
 * the handler module builds at top level. The external variant resolves `@aws-sdk/*` from a
 * node_modules holding only that scope, as the runtime's own copy is resolved.
 *
 *   npx tsx bench/lambda-artifact.ts          # BENCH_IMPORT_SAMPLES=15 by default
 *
 * What this is *not*: a Lambda INIT duration (no Lambda runtime, no code download, a warm page
 * cache on this machine): it compares the variants with each other, nothing more.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { zipEntries } from "../scripts/zip-entries.js";
import { median, rotate } from "./stats.js";

interface Variant {
  id: string;
  label: string;
  /** Replacements applied to serverless.yml (each must match once). */
  edits: [string, string][];
}

const MINIFY = "    minify: true\n    # Minified names would turn error names (set from the class name) into single letters in logs.\n    keepNames: true\n";
const MAP = "    sourcemap: true\n    sourcesContent: false\n";
const BUNDLED = "    exclude: []\n";

const VARIANTS: Variant[] = [
  { id: "bundled", label: "minified, AWS SDK bundled (serverless.yml)", edits: [] },
  { id: "external", label: "minified, AWS SDK external (the runtime's)", edits: [[BUNDLED, '    exclude: ["@aws-sdk/*"]\n']] },
  { id: "bundled-no-map", label: "minified, AWS SDK bundled, no source map", edits: [[MAP, "    sourcemap: false\n"]] },
  {
    id: "v0.1.0",
    label: "0.1.0: not minified, AWS SDK bundled, map with sources",
    edits: [
      [MINIFY, "    minify: false\n"],
      [MAP, "    sourcemap: true\n"],
    ],
  },
];

/** Times `import(argv[1])` in a fresh process. */
const PROBE =
  "const t=performance.now(),c=process.cpuUsage();await import(process.argv[1]);const u=process.cpuUsage(c);" +
  "process.stdout.write(JSON.stringify([performance.now()-t,(u.user+u.system)/1000]));";

const root = resolve(".");
/** NODE_OPTIONS as serverless.yml deploys them (--enable-source-maps reads the map at import). */
const deployedNodeOptions = /NODE_OPTIONS:\s*(.+)/.exec(readFileSync(join(root, "serverless.yml"), "utf8"))?.[1]?.trim() ?? "";
const samples = Math.max(1, Math.round(Number(process.env.BENCH_IMPORT_SAMPLES ?? 15)));
const work = mkdtempSync(join(tmpdir(), "bq-artifact-"));
const kib = (bytes: number) => `${(bytes / 1024).toFixed(1)} KiB`;

function packageVariant(variant: Variant): { zip: number; bundle: number; map: number; file: string } {
  const source = readFileSync(join(root, "serverless.yml"), "utf8");
  let text = source;
  for (const [from, to] of variant.edits) {
    if (text.split(from).length !== 2) throw new Error(`serverless.yml: expected exactly one ${JSON.stringify(from)}`);
    text = text.replace(from, to);
  }
  const config = `serverless.bench-${variant.id}.yml`;
  const out = join(work, variant.id);
  if (variant.edits.length > 0) writeFileSync(join(root, config), text);
  try {
    const run = spawnSync("osls", ["package", "--config", variant.edits.length > 0 ? config : "serverless.yml", "--package", out], {
      cwd: root,
      encoding: "utf8",
      env: { ...process.env, HOME: join(work, "home"), TMPDIR: work, SLS_TELEMETRY_DISABLED: "1", SLS_NOTIFICATIONS_MODE: "off" },
    });
    if (run.status !== 0) throw new Error(`osls package (${variant.id}) failed:\n${run.stdout}\n${run.stderr}`);
  } finally {
    if (variant.edits.length > 0) rmSync(join(root, config), { force: true });
  }
  const zipFile = join(out, "consumer.zip");
  const entries = zipEntries(readFileSync(zipFile));
  const dir = join(work, `${variant.id}-unzipped`);
  for (const [name, data] of entries) {
    mkdirSync(dirname(join(dir, name)), { recursive: true });
    writeFileSync(join(dir, name), data);
  }
  // What the Lambda runtime resolves for an ES module handler: its own @aws-sdk copy (and the
  // preload of the "SDK already loaded" figure needs it in every variant).
  mkdirSync(join(dir, "node_modules"), { recursive: true });
  symlinkSync(join(root, "node_modules", "@aws-sdk"), join(dir, "node_modules", "@aws-sdk"), "dir");
  const bundle = entries.get("examples/lambda/consumer.mjs");
  if (bundle === undefined) throw new Error(`${variant.id}: no examples/lambda/consumer.mjs in the zip`);
  return {
    zip: statSync(zipFile).size,
    bundle: bundle.length,
    map: entries.get("examples/lambda/consumer.mjs.map")?.length ?? 0,
    file: join(dir, "examples/lambda/consumer.mjs"),
  };
}

/** Wall and CPU milliseconds of one cold `import()`. CPU time is what contention disturbs least. */
function sample(file: string): [number, number] {
  const run = spawnSync(process.execPath, ["--input-type=module", "-e", PROBE, pathToFileURL(file).href], {
    cwd: dirname(file),
    encoding: "utf8",
    env: { PATH: process.env.PATH, AWS_REGION: "us-east-1", IDEMPOTENCY_TABLE: "idempotency", NODE_OPTIONS: deployedNodeOptions },
  });
  if (run.status !== 0) throw new Error(`import probe failed: ${run.stdout}${run.stderr}`);
  return JSON.parse(run.stdout) as [number, number];
}

try {
  const built = VARIANTS.map((variant) => ({ variant, ...packageVariant(variant) }));
  const wall = new Map<string, number[]>(built.map(({ variant }) => [variant.id, []]));
  const cpu = new Map<string, number[]>(built.map(({ variant }) => [variant.id, []]));
  for (let round = -1; round < samples; round += 1) {
    for (const { variant, file } of rotate(built, round + 1)) {
      const [wallMs, cpuMs] = sample(file);
      if (round < 0) continue; // a warm-up round: page cache
      wall.get(variant.id)?.push(wallMs);
      cpu.get(variant.id)?.push(cpuMs);
    }
  }
  const lines = [
    "| serverless.yml artifact | zip | bundle | source map | cold import, wall: median (best) | CPU: median (best) |",
    "|:--|--:|--:|--:|--:|--:|",
    ...built.map(({ variant, zip, bundle, map }) => {
      const w = wall.get(variant.id) as number[];
      const c = cpu.get(variant.id) as number[];
      const ms = (values: number[]) => `${median(values).toFixed(0)} ms (${Math.min(...values).toFixed(0)})`;
      return `| ${variant.label} | ${kib(zip)} | ${kib(bundle)} | ${kib(map)} | ${ms(w)} | ${ms(c)} |`;
    }),
    "",
    `${samples} fresh Node ${process.version} processes per variant, alternating, NODE_OPTIONS=${JSON.stringify(deployedNodeOptions)} as deployed.`,
  ];
  console.log(lines.join("\n"));
} finally {
  rmSync(work, { recursive: true, force: true });
}
