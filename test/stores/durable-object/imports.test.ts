/**
 * The Durable Object store's module split: `stores/durable-object/store.ts` (the `DurableObjectStore`
 * client) must load anywhere — Node, a bundler, a test — without `cloudflare:workers`, which only
 * `stores/durable-object/object.ts` (the object class) imports. Checked twice: by importing the client
 * in plain Node (which cannot resolve `cloudflare:workers`), and by bundling each file with esbuild
 * and reading the imports its metafile records.
 */
import { build } from "esbuild";
import { describe, expect, it } from "vitest";

async function bundledImports(entry: string): Promise<string[]> {
  const result = await build({
    entryPoints: [entry],
    bundle: true,
    format: "esm",
    platform: "neutral",
    write: false,
    metafile: true,
    logLevel: "silent",
    external: ["cloudflare:*"],
  });
  return Object.values(result.metafile.outputs).flatMap((output) => output.imports.map((entry) => entry.path));
}

describe("DurableObjectStore never pulls in cloudflare:workers", () => {
  it("imports and constructs in plain Node", async () => {
    const { DurableObjectStore } = await import("../../../stores/durable-object/store.js");
    const store = new DurableObjectStore({ idFromName: (name: string) => name, get: () => ({}) as never }, { shards: 4 });
    expect(store.shards).toBe(4);
    expect(store.shardOf("ns:id")).toBeGreaterThanOrEqual(0);
  });

  it("bundles without cloudflare:workers; the object class bundles with it", async () => {
    expect(await bundledImports("stores/durable-object/store.ts")).not.toContain("cloudflare:workers");
    expect(await bundledImports("stores/durable-object/object.ts")).toContain("cloudflare:workers");
  });
});
