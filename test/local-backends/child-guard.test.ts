/**
 * Local backends never outlive their parent (scripts/child-guard.mjs): a node process starts each
 * backend exactly as the tests, the demo and the bench do (start-backend.ts), and is then killed —
 * SIGKILL (nothing runs in it any more), SIGTERM and SIGINT without handlers, or a plain exit that
 * forgot the teardown. Within a few seconds every backend process (its whole process group) is
 * gone, and so is a server's temp directory. Then `npm test` itself (scripts/test.mjs, on a small
 * vitest config with the PostgreSQL and redis-server setups) is killed with SIGKILL while its
 * backends run: vitest stops, and its backends with it.
 *
 * Processes are read from Linux's /proc; a zombie (exited, not yet reaped by pid 1) counts as gone.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { childrenOf } from "../../scripts/child-guard.mjs";

const root = fileURLToPath(new URL("../..", import.meta.url));
const starter = fileURLToPath(new URL("./start-backend.ts", import.meta.url));
const linux = process.platform === "linux";

/** State letter and process group of a live (non-zombie) process, or undefined. */
function stat(pid: number): { state: string; pgid: number } | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
    const state = fields[0] as string;
    return state === "Z" || state === "X" ? undefined : { state, pgid: Number(fields[2]) };
  } catch {
    return undefined;
  }
}

/** Live processes of process group `pgid`. */
function groupOf(pgid: number): number[] {
  return readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry))
    .map(Number)
    .filter((pid) => stat(pid)?.pgid === pgid);
}

async function waitFor(condition: () => boolean, ms: number): Promise<boolean> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (condition()) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return condition();
}

const started: ChildProcess[] = [];
afterAll(() => {
  for (const child of started) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
});

/** Starts `kind` in a fresh node parent; resolves with the parent, the backend pids (and their groups) and dirs. */
function launch(kind: string, mode?: "exit"): Promise<{ parent: ChildProcess; pids: number[]; groups: number[]; dirs: string[] }> {
  const parent = spawn(process.execPath, ["--import", "tsx", starter, kind, ...(mode ? [mode] : [])], { cwd: root, stdio: ["ignore", "pipe", "pipe"] });
  started.push(parent);
  return new Promise((resolve, reject) => {
    let out = "";
    let err = "";
    parent.stderr?.on("data", (chunk: Buffer) => {
      err += chunk.toString();
    });
    parent.stdout?.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      const line = out.split("\n").find((text) => text.startsWith("{"));
      if (line === undefined) return;
      const report = JSON.parse(line) as { pids: number[]; dirs: string[] };
      // The process groups the backends lead (spawned detached); workerd sits in its parent's group.
      const groups = report.pids.filter((pid) => stat(pid)?.pgid === pid);
      resolve({ parent, ...report, groups });
    });
    parent.once("exit", (code) => {
      if (!out.includes("{")) reject(new Error(`start-backend ${kind} exited (${code}) before reporting: ${err.slice(-800)}`));
    });
  });
}

const allGone = (pids: number[], groups: number[], dirs: string[]) => () =>
  pids.every((pid) => stat(pid) === undefined) && groups.every((pgid) => groupOf(pgid).length === 0) && dirs.every((dir) => !existsSync(dir));

describe.skipIf(!linux)("local backends never outlive their parent", () => {
  for (const kind of ["postgres", "redis", "dynamodb", "workerd"]) {
    it(`${kind}: SIGKILL of the node process that started it stops it (its whole group) within seconds`, async () => {
      const { parent, pids, groups, dirs } = await launch(kind);
      expect(pids.length).toBeGreaterThan(0);
      // Running now (a PostgreSQL worker may come and go on its own: the group leader must be up).
      expect(stat(pids[0] as number)).toBeDefined();
      if (kind === "postgres") expect(pids.length).toBeGreaterThan(3); // the postmaster and its workers (each in a group of its own)
      parent.kill("SIGKILL");
      expect(await waitFor(allGone(pids, groups, dirs), 10_000), `${kind} still running: ${pids.join(",")}`).toBe(true);
    }, 60_000);
  }

  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    it(`redis and postgres: ${signal} to the parent (no handler) stops them`, async () => {
      const [redis, postgres] = await Promise.all([launch("redis"), launch("postgres")]);
      redis.parent.kill(signal);
      postgres.parent.kill(signal);
      expect(await waitFor(allGone([...redis.pids, ...postgres.pids], [...redis.groups, ...postgres.groups], postgres.dirs), 10_000)).toBe(true);
    }, 60_000);
  }

  it("a parent that exits without its teardown leaves nothing behind", async () => {
    const { pids, groups } = await launch("redis", "exit");
    expect(await waitFor(allGone(pids, groups, []), 10_000)).toBe(true);
  }, 30_000);

  it("npm test killed with SIGKILL: vitest stops, and the backends its global setups started", async () => {
    const reports = mkdtempSync(join(tmpdir(), "bq-guard-report-"));
    const runner = spawn(process.execPath, ["scripts/test.mjs", "--config", "test/local-backends/guard-fixture.config.ts"], {
      cwd: root,
      stdio: "ignore",
      env: { ...process.env, BQ_TEST_REPORT_DIR: reports },
    });
    started.push(runner);
    try {
      let vitest: number | undefined;
      let backends: { pid: number; name: string }[] = [];
      const up = await waitFor(() => {
        vitest ??= childrenOf(runner.pid).find((child) => child.name === "node")?.pid;
        if (vitest === undefined) return false;
        backends = childrenOf(vitest).filter((child) => child.name === "postgres" || child.name === "redis-server");
        return backends.length === 2;
      }, 45_000);
      expect(up, "vitest and both backends started").toBe(true);
      const groups = backends.map((child) => child.pid);
      runner.kill("SIGKILL");
      expect(await waitFor(allGone([vitest as number, ...backends.map((child) => child.pid)], groups, []), 20_000)).toBe(true);
    } finally {
      rmSync(reports, { recursive: true, force: true });
    }
  }, 90_000);
});
