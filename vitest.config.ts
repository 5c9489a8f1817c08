/**
 * Two vitest projects:
 *  - "node": the core, DynamoDB (DynamoDB Local), Redis (redis-server + the Upstash REST bridge),
 *    the Lambda handler. Backends are started by the global setups in test/setup/ and stopped after.
 *  - "workers": everything that must run inside workerd (Durable Objects, KV, Queues), configured
 *    in test/workers/vitest.config.ts through @cloudflare/vitest-pool-workers.
 */
import { existsSync, readdirSync } from "node:fs";
import { defineConfig } from "vitest/config";

const setups = existsSync("test/setup")
  ? readdirSync("test/setup")
      .filter((file) => file.endsWith(".ts"))
      .sort()
      .map((file) => `test/setup/${file}`)
  : [];

const workersConfig = "test/workers/vitest.config.ts";

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: "node",
          include: ["test/**/*.test.ts"],
          exclude: ["test/workers/**", "node_modules/**"],
          globalSetup: setups,
          provide: { conformanceRequired: Boolean(process.env.CI) },
          testTimeout: 30_000,
          hookTimeout: 60_000,
        },
      },
      ...(existsSync(workersConfig) ? [workersConfig] : []),
    ],
  },
});
