/**
 * A vitest run for child-guard.test.ts: the PostgreSQL and redis-server global setups and one test
 * that waits, so `npm test` (scripts/test.mjs) can be killed while its backends run.
 */
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/local-backends/waits.fixture.ts"],
    globalSetup: ["test/setup/postgres.ts", "test/setup/redis.ts"],
    testTimeout: 120_000,
  },
});
