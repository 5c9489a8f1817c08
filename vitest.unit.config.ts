/**
 * The backend-free tests: the test files that need no backend, with no global setups, so a run is a
 * few seconds of pure computation. `npm run check` runs them before a push, and Stryker runs them
 * against each mutant (`npm run test:mutation`; mutants are of src/, see stryker.config.mjs).
 *
 * What this is *not*: the test suite (`npm test` runs everything, backends included). A new test
 * file that needs no backend belongs in BACKEND_FREE too, or the mutants it would kill are reported
 * as survivors.
 */
import { defineConfig } from "vitest/config";

const BACKEND_FREE = [
  "test/engine/batch-engine.test.ts",
  "test/engine/conflicts.test.ts",
  "test/engine/commit-window.test.ts",
  "test/engine/guards.test.ts",
  "test/engine/phases.test.ts",
  "test/engine/commit-queue.test.ts",
  "test/engine/batch-run.test.ts",
  "test/engine/options.test.ts",
  "test/engine/claim-failures.test.ts",
  "test/stores/dynamodb/clock.test.ts",
  "test/engine/linger.test.ts",
  "test/core/*.test.ts",
  "test/observability/*.test.ts",
  "test/stores/memory.test.ts",
  "test/handlers/bad-input.test.ts",
  "test/package/unknown-options.test.ts",
  "test/handlers/sqs-parks.test.ts",
  "test/handlers/sqs-records.test.ts",
  "test/package/public-surface.test.ts",
  "test/docs/doc-comments.test.ts",
  "test/docs/examples.test.ts",
  "test/stores/postgres/pool-listeners.test.ts",
  "test/stores/postgres/claim-release.test.ts",
  "test/package/bench-docs.test.ts",
  "test/package/bundle-peers.test.ts",
  "test/engine/batch-fates.test.ts",
  "test/engine/linger-timeline.test.ts",
  "test/engine/engine-edges.test.ts",
];

export default defineConfig({
  test: {
    name: "unit",
    include: BACKEND_FREE,
    globalSetup: [],
    testTimeout: 30_000,
  },
});
