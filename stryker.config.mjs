/**
 * Mutation testing of src/ (`npm run test:mutation`): Stryker mutates the core and runs the
 * backend-free tests (vitest.unit.config.ts) against each mutant. It runs in place, because the
 * conformance tests read ../shared/conformance relative to the project (a sandbox copy would not
 * find it); Stryker restores every file when it ends (kill it with Ctrl-C, not SIGKILL). About 3,900 mutants:
 * about 45 minutes on 2 cores; `--incremental` reruns only what a change touched. `npx stryker run
 * --dryRunOnly` checks the setup in under a minute.
 *
 * Reports: reports/mutation/mutation.html and .json (git-ignored).
 */
// @ts-check
/** @type {import("@stryker-mutator/api/core").PartialStrykerOptions} */
export default {
  packageManager: "npm",
  plugins: ["@stryker-mutator/vitest-runner"],
  testRunner: "vitest",
  vitest: { configFile: "vitest.unit.config.ts" },
  mutate: ["src/**/*.ts"],
  inPlace: true,
  concurrency: 2,
  reporters: ["clear-text", "progress", "html", "json"],
  htmlReporter: { fileName: "reports/mutation/mutation.html" },
  jsonReporter: { fileName: "reports/mutation/mutation.json" },
  // The target for src/ is 90%; below 80% the report is red. Not a CI gate (too slow for it).
  thresholds: { high: 90, low: 80, break: null },
  tempDirName: ".stryker-tmp",
  cleanTempDir: "always",
};
