/**
 * The "workers" vitest project: tests that must run inside workerd (Durable Objects, KV,
 * Queues), through @cloudflare/vitest-pool-workers 0.19 (the vitest-4 `cloudflareTest` plugin).
 * The bindings come from ./wrangler.toml; its `main` (./worker.ts) is the Worker under test —
 * the Durable Object classes and the queue consumer the producer→consumer tests drive.
 */
import { fileURLToPath } from "node:url";
import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-pool-workers";
import { defineConfig } from "vitest/config";

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url));

export default defineConfig({
  plugins: [
    cloudflareTest(async () => ({
      wrangler: { configPath: here("./wrangler.toml") },
      // D1Store's tests apply the repo's own migration files (the ones `wrangler d1 migrations apply` runs).
      miniflare: { bindings: { TEST_MIGRATIONS: await readD1Migrations(here("../../migrations")) } },
    })),
  ],
  test: {
    name: "workers",
    root: here("."),
    // workerd (spawned by the pool's Miniflare) never outlives the run: scripts/child-guard.mjs.
    globalSetup: [here("../setup/workerd-guard.ts")],
    include: ["**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    provide: { reliabilityFull: process.env.RELIABILITY_FULL === "1", conformanceRequired: Boolean(process.env.CI) },
  },
  // The contract suite reads ../shared/conformance (outside the project) through import.meta.glob.
  server: { fs: { strict: false } },
});
