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
  "test/engine.test.ts",
  "test/engine-semantics.test.ts",
  "test/engine-window.test.ts",
  "test/engine-guards.test.ts",
  "test/engine-phases.test.ts",
  "test/engine-step-queue.test.ts",
  "test/engine-batch.test.ts",
  "test/engine-options.test.ts",
  "test/decision.test.ts",
  "test/errors.test.ts",
  "test/observability/*.test.ts",
  "test/envelope.test.ts",
  "test/memory-store.test.ts",
  "test/conformance.test.ts",
  "test/property.test.ts",
  "test/bad-input.test.ts",
  "test/core-*.test.ts",
];

export default defineConfig({
  test: {
    name: "mutation",
    include: BACKEND_FREE,
    globalSetup: [],
    testTimeout: 30_000,
  },
});
