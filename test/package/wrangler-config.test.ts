/**
 * The repo's wrangler.toml is deployable as it is: `wrangler deploy --dry-run` validates the
 * config (queue consumer with max_batch_size / max_retries / dead_letter_queue, the Durable
 * Object binding and its SQLite migration, the KV namespace) and bundles examples/worker offline.
 * Runs wrangler with a throwaway XDG_CONFIG_HOME and metrics off; needs no Cloudflare account.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const wrangler = join(root, "node_modules", "wrangler", "bin", "wrangler.js");
const scratch = mkdtempSync(join(tmpdir(), "bq-wrangler-"));

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe("wrangler.toml", () => {
  it("passes `wrangler deploy --dry-run` and bundles the example Worker", () => {
    const outdir = join(scratch, "out");
    const run = spawnSync(process.execPath, [wrangler, "deploy", "--dry-run", "--outdir", outdir], {
      cwd: root,
      encoding: "utf8",
      timeout: 90_000,
      env: {
        ...process.env,
        XDG_CONFIG_HOME: join(scratch, "config"),
        WRANGLER_SEND_METRICS: "false",
        CI: "1",
        NO_COLOR: "1",
      },
    });
    const output = `${run.stdout}\n${run.stderr}`;
    expect(run.status, output).toBe(0);
    expect(output).toContain("--dry-run: exiting now.");
    expect(output).toMatch(/env\.IDEMPOTENCY \(IdempotencyObject\)\s+Durable Object/);
    expect(output).toMatch(/env\.QUEUE \(babelqueue-jobs\)\s+Queue/);
    expect(output).toMatch(/env\.SEEN\b.*KV Namespace/);
    expect(output).toMatch(/env\.DB \(babelqueue-idempotency\)\s+D1 Database/);
    const bundle = join(outdir, "index.js");
    expect(existsSync(bundle)).toBe(true);
    const code = readFileSync(bundle, "utf8");
    expect(code).toMatch(/IdempotencyObject = class extends DurableObject/);
    // A Worker never bundles the AWS SDK or Node-only clients.
    expect(code).not.toMatch(/@aws-sdk|ioredis/);
  }, 120_000);

  it("keeps secrets out of the config: no [vars], and the consumer settings are explicit", () => {
    const toml = readFileSync(join(root, "wrangler.toml"), "utf8");
    expect(toml).not.toMatch(/^\s*\[vars\]/m);
    expect(toml).not.toMatch(/TOKEN\s*=/);
    expect(toml).toMatch(/^max_batch_size = \d+$/m);
    expect(toml).toMatch(/^max_retries = \d+$/m);
    expect(toml).toMatch(/^dead_letter_queue = "babelqueue-jobs-dlq"$/m);
    expect(toml).toMatch(/^new_sqlite_classes = \["IdempotencyObject"\]$/m);
  });
});
