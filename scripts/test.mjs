#!/usr/bin/env node
/**
 * `npm test`: runs every vitest project (the global setups start and stop the local backends),
 * then prints the plain `N passed, N failed` line CI reads. Extra arguments go to vitest.
 * Exits non-zero when anything failed or when no test ran.
 *
 * vitest runs as a guarded child (scripts/child-guard.mjs): SIGINT / SIGTERM are passed on to it,
 * and if this process is killed outright vitest is stopped too — and with it, through their own
 * guards, the backends its global setups started.
 */
import { spawn } from "node:child_process";
import { mkdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { guardChild } from "./child-guard.mjs";

// BQ_TEST_REPORT_DIR: where the JSON report goes (a nested run, e.g. the child-guard test's, keeps its own).
const outDir = process.env.BQ_TEST_REPORT_DIR || join(process.cwd(), ".tmp");
mkdirSync(outDir, { recursive: true });
const report = join(outDir, "vitest-report.json");
rmSync(report, { force: true });

const vitest = spawn("vitest", ["run", "--reporter=default", "--reporter=json", `--outputFile.json=${report}`, ...process.argv.slice(2)], {
  stdio: "inherit",
  env: { ...process.env, WRANGLER_SEND_METRICS: "false" },
});
guardChild(vitest, { graceMs: 10_000 });
const forward = (signal) => () => vitest.kill(signal);
process.on("SIGINT", forward("SIGINT"));
process.on("SIGTERM", forward("SIGTERM"));
const run = await new Promise((resolve) => {
  vitest.once("error", (error) => resolve({ status: 1, error }));
  vitest.once("exit", (code, signal) => resolve({ status: code ?? (signal ? 1 : 0) }));
});
if (run.error) console.error(`test: vitest could not start: ${run.error.message}`);

let passed = 0;
let failed = 0;
let skipped = 0;
try {
  const json = JSON.parse(readFileSync(report, "utf8"));
  passed = json.numPassedTests ?? 0;
  failed = (json.numFailedTests ?? 0) + (json.numFailedTestSuites ?? 0);
  skipped = (json.numPendingTests ?? 0) + (json.numTodoTests ?? 0);
} catch {
  failed += 1;
  console.error("test: no vitest report was written");
}
if (run.status !== 0 && failed === 0) failed = 1;
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ""}`);
process.exit(failed > 0 || passed === 0 ? 1 : 0);
