#!/usr/bin/env node
/**
 * `npm test`: runs every vitest project (the global setups start and stop the local backends),
 * then prints the plain `N passed, N failed` line CI reads. Extra arguments go to vitest.
 * Exits non-zero when anything failed or when no test ran.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";

const outDir = join(process.cwd(), ".tmp");
mkdirSync(outDir, { recursive: true });
const report = join(outDir, "vitest-report.json");
rmSync(report, { force: true });

const run = spawnSync(
  "vitest",
  ["run", "--reporter=default", "--reporter=json", `--outputFile.json=${report}`, ...process.argv.slice(2)],
  { stdio: "inherit", env: { ...process.env, WRANGLER_SEND_METRICS: "false" } },
);

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
