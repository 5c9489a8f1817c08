/**
 * A Worker given as TypeScript source, bundled from this checkout with esbuild and run in workerd by
 * plain Miniflare: how the store tests show that a store works inside a Worker over a real backend
 * client (`pg` with nodejs_compat, `@upstash/redis/cloudflare` without it).
 *
 * What this is *not*: the vitest-pool-workers project (test/workers/), which runs test files
 * themselves inside workerd.
 */
import { type BuildOptions, build } from "esbuild";
import { Miniflare } from "miniflare";

/** What differs between Workers: the bundle's platform and resolution, and the runtime's flags and bindings. */
export interface BundledWorkerOptions {
  readonly bundle: Pick<BuildOptions, "platform" | "conditions" | "external" | "banner">;
  readonly compatibilityFlags: string[];
  readonly bindings: Record<string, string>;
}

/** Bundles `source` (ESM, es2022) and starts it in Miniflare; the caller disposes of it. */
export async function startBundledWorker(source: string, options: BundledWorkerOptions): Promise<Miniflare> {
  const bundle = await build({
    stdin: { contents: source, resolveDir: process.cwd(), loader: "ts", sourcefile: "worker.ts" },
    bundle: true,
    format: "esm",
    ...options.bundle,
    target: "es2022",
    write: false,
    logLevel: "silent",
  });
  return new Miniflare({
    modules: true,
    script: bundle.outputFiles[0]?.text ?? "",
    compatibilityDate: "2025-09-01",
    compatibilityFlags: options.compatibilityFlags,
    bindings: options.bindings,
  });
}
