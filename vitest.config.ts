/**
 * Two vitest projects:
 *  - "node": the core, DynamoDB (DynamoDB Local), Redis (redis-server + the Upstash REST bridge),
 *    the Lambda handler. Backends are started by the global setups in test/setup/ and stopped after.
 *  - "workers": everything that must run inside workerd (Durable Objects, KV, Queues), configured
 *    in test/workers/vitest.config.ts through @cloudflare/vitest-pool-workers.
 *
 * Coverage (`npm run coverage`, off otherwise) is istanbul, not v8: v8 coverage needs
 * `node:inspector`, which workerd does not have. Both projects report into one merged figure for the
 * shipped code (src, stores, handlers, entry); the thresholds sit just under the measured level so a
 * change that leaves new code untested fails.
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
    coverage: {
      provider: "istanbul",
      // Patterns match from any project root (the workers project's root is test/workers).
      include: ["**/src/**/*.ts", "**/stores/**/*.ts", "**/handlers/**/*.ts", "**/entry/**/*.ts"],
      exclude: ["**/node_modules/**", "**/test/**", "**/dist/**", "**/*.d.ts"],
      allowExternal: true,
      reporter: ["text-summary", "text", "json-summary"],
      reportsDirectory: "coverage",
      // A failing test still prints the figures (the thresholds still fail the run).
      reportOnFailure: true,
      // Measured 2026-12-03 over the whole suite: lines 98.13%, branches 91.67%, functions 98.14%, statements 95.97%.
      thresholds: { lines: 97.5, branches: 91, functions: 97.5, statements: 95.5 },
    },
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
