/**
 * The vitest config Stryker runs (`npm run test:mutation`): only the test files that need no
 * backend, and no global setups, so each of Stryker's runs is a few seconds of pure computation.
 * Mutants are of src/ (see stryker.config.mjs); these files are the ones that exercise it.
 *
 * What this is *not*: the test suite. A new test file of src/ that needs no backend belongs in
 * BACKEND_FREE too, or the mutants it would kill are reported as survivors.
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
  "test/core/*.test.ts",
  "test/observability/*.test.ts",
  "test/stores/memory.test.ts",
  "test/handlers/bad-input.test.ts",
  "test/package/unknown-options.test.ts",
  "test/package/public-surface.test.ts",
];

export default defineConfig({
  test: {
    name: "mutation",
    include: BACKEND_FREE,
    globalSetup: [],
    testTimeout: 30_000,
  },
});
