/**
 * Each subpath bundles reaching only its own optional peers: esbuild (what a user's Lambda or
 * Worker build runs) resolves every import it can see — a lazy `import()` too — so a subpath that
 * names a peer it does not need fails to bundle where that peer is not installed. `/lambda` once
 * did, for `@aws-sdk/client-sqs` (the parks extension's lazy import): now `/lambda/parks` alone
 * imports it.
 *
 * The bundle is made from the subpath's source entry (the exports map's target, dist/x.js → x.ts);
 * every bare import the package's own files make is recorded and left external.
 *
 * What this is *not*: a size check (bench/bundle.ts), or a check of what the peers import.
 */
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { describe, expect, it } from "vitest";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
  bin: Record<string, string>;
  exports: Record<string, string | Record<string, unknown>>;
  peerDependencies: Record<string, string>;
};

/** The packages each subpath's own code imports (`node:` and `cloudflare:` built-ins aside). */
const EXPECTED: Readonly<Record<string, readonly string[]>> = {
  ".": [],
  "./lambda": [],
  "./lambda/parks": ["@aws-sdk/client-sqs"],
  "./dynamodb": ["@aws-sdk/client-dynamodb"],
  // The client is the user's (pg's Pool, ioredis, an OpenTelemetry api): passed in, never imported.
  "./postgres": [],
  "./redis": [],
  "./upstash": ["@upstash/redis"],
  "./cloudflare": [],
  "./cloudflare/durable-object": [],
  "./metrics": [],
  "./tracing": [],
  "./store-kit": [],
};

/** The package name of a bare specifier: `@aws-sdk/client-sqs/x` → `@aws-sdk/client-sqs`. */
function packageOf(specifier: string): string {
  const parts = specifier.split("/");
  return specifier.startsWith("@") ? parts.slice(0, 2).join("/") : (parts[0] as string);
}

/** The source a dist path was compiled from (dist/x/y.js → x/y.ts). */
const sourceOf = (distPath: string) => join(root, distPath.replace(/^\.\/dist\//, "").replace(/\.js$/, ".ts"));

async function packagesReached(subpath: string): Promise<string[]> {
  const target = pkg.exports[subpath] as Record<string, unknown>;
  return packagesOf(sourceOf(String(target.import ?? target.default)));
}

async function packagesOf(entry: string): Promise<string[]> {
  const reached = new Set<string>();
  await build({
    entryPoints: [entry],
    bundle: true,
    write: false,
    platform: "node",
    format: "esm",
    logLevel: "silent",
    plugins: [
      {
        name: "record-packages",
        setup(plugins) {
          plugins.onResolve({ filter: /^[^./]/ }, (args) => {
            if (!/^(node|cloudflare):/.test(args.path)) reached.add(packageOf(args.path));
            return { path: args.path, external: true };
          });
        },
      },
    ],
  });
  return [...reached].sort();
}

const subpaths = Object.keys(pkg.exports).filter((subpath) => subpath !== "./package.json");

describe("each subpath bundles reaching only its own peers", () => {
  it("every subpath has its expected list, and every package a subpath reaches is a declared peer", async () => {
    const seen: Record<string, string[]> = {};
    for (const subpath of subpaths) seen[subpath] = await packagesReached(subpath);
    expect(seen).toEqual(EXPECTED);
    for (const list of Object.values(seen)) for (const name of list) expect(Object.keys(pkg.peerDependencies)).toContain(name);
  });

  it("the CLI reaches exactly the stores' clients it loads on demand, each a declared (optional) peer — ioredis included", async () => {
    const reached = await packagesOf(sourceOf(pkg.bin["babelqueue-serverless"] as string));
    expect(reached).toEqual(["@aws-sdk/client-dynamodb", "@upstash/redis", "ioredis", "pg"]);
    for (const name of reached) expect(Object.keys(pkg.peerDependencies), name).toContain(name);
  });
});
