/**
 * BENCH — module import time on a cold start: a fresh Node process per sample imports one bundle
 * (SDK external, resolved from node_modules like the Lambda runtime's own copy) and reports how
 * long `import()` took — module loading, evaluation, and the store/client construction the
 * handler module does at top level. Node's own start-up is not included. A second sample per
 * round first loads the AWS SDK modules untimed (the Lambda runtime ships them, both kits use
 * them), which isolates each module's own share. Samples alternate between bundles; figures are
 * medians.
 *
 * What this is *not*: a Lambda INIT duration (no runtime, no network, a warm page cache).
 */
import { execFileSync } from "node:child_process";
import { dirname } from "node:path";
import { pathToFileURL } from "node:url";
import type { BundleFigure } from "./bundle.js";
import { median, rotate } from "./stats.js";

export interface ImportFigure {
  readonly id: string;
  readonly label: string;
  readonly kit: BundleFigure["kit"];
  /** Median import time, ms, the AWS SDK included. */
  readonly ms: number;
  /** Fastest sample, ms: the least disturbed by other processes. */
  readonly minMs: number;
  /** Median import time with the AWS SDK already loaded, ms: the module's own share. */
  readonly ownMs: number;
  readonly samples: number;
}

/** Times `import(argv[1])`, after importing what `argv[2]` lists (comma-separated) untimed. */
const PROBE =
  "for(const m of (process.argv[2]||'').split(',').filter(Boolean))await import(m);" +
  "const t=performance.now();await import(process.argv[1]);process.stdout.write(String(performance.now()-t));";

/** What the Lambda Node.js runtime ships and both kits load: preloaded for the "own share" figure. */
const SDK_MODULES = ["@aws-sdk/client-dynamodb", "@aws-sdk/util-dynamodb"];

function sample(file: string, preload: readonly string[]): number {
  const out = execFileSync(process.execPath, ["--input-type=module", "-e", PROBE, pathToFileURL(file).href, preload.join(",")], {
    cwd: dirname(file),
    encoding: "utf8",
    env: { ...process.env, AWS_REGION: "us-east-1", IDEMPOTENCY_TABLE: "idempotency", NODE_OPTIONS: "" },
  });
  const ms = Number(out.trim());
  if (!Number.isFinite(ms)) throw new Error(`import-time probe printed ${JSON.stringify(out)}`);
  return ms;
}

export function measureImportTimes(bundles: readonly BundleFigure[], samples: number): ImportFigure[] {
  const targets = bundles.filter((bundle) => bundle.file !== undefined);
  const times = new Map<string, number[]>(targets.map((target) => [target.id, []]));
  const own = new Map<string, number[]>(targets.map((target) => [target.id, []]));
  for (let round = -1; round < samples; round++) {
    for (const target of rotate(targets, round + 1)) {
      const ms = sample(target.file as string, []);
      const ownMs = sample(target.file as string, SDK_MODULES);
      if (round < 0) continue;
      (times.get(target.id) as number[]).push(ms);
      (own.get(target.id) as number[]).push(ownMs);
    }
  }
  return targets.map((target) => ({
    id: target.id,
    label: target.label,
    kit: target.kit,
    ms: median(times.get(target.id) as number[]),
    minMs: Math.min(...(times.get(target.id) as number[])),
    ownMs: median(own.get(target.id) as number[]),
    samples,
  }));
}
