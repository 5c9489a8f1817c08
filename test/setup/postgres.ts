/**
 * vitest globalSetup: a throwaway PostgreSQL for the PostgresStore tests.
 *
 * Runs Debian's PostgreSQL server binaries (`apt-get install -y postgresql`; `.ci/run` does it):
 * `initdb` into a fresh temp directory, then `postgres` itself as a child process on a free
 * loopback port (trust authentication, fsync off), provides `postgresUrl`, and stops the server
 * and deletes the directory after the run. The server refuses to run as root, so when the tests
 * run as root the directory is handed to the `postgres` system user and both binaries run as it.
 *
 * `startPostgres` is exported for scripts and tests that need a server of their own.
 * Binaries are looked up in `$PG_BIN`, then the newest `/usr/lib/postgresql/<major>/bin`, then
 * `pg_config --bindir`.
 *
 * What this is *not*: a PostgreSQL for anything but tests — it binds 127.0.0.1 only, trusts every
 * local connection and keeps nothing.
 */
import { freePort } from "../../scripts/dynamodb-local.mjs";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import type { TestProject } from "vitest/node";

declare module "vitest" {
  export interface ProvidedContext {
    /** Connection URL of the test server, e.g. postgres://postgres@127.0.0.1:41234/postgres. */
    postgresUrl: string;
  }
}

export interface PostgresServer {
  readonly url: string;
  readonly port: number;
  /** Stops the server (SIGINT: fast shutdown; SIGKILL after 5 s) and deletes its directory. */
  stop(): Promise<void>;
}

const INSTALL_HINT =
  "PostgreSQL server binaries (initdb, postgres) were not found: run `apt-get update && apt-get install -y postgresql` " +
  "(.ci/run does), or set PG_BIN to the directory holding them";

/** Where initdb and postgres live. Throws with the install command when nowhere. */
export function postgresBinDir(): string {
  const candidates: string[] = [];
  if (process.env.PG_BIN) candidates.push(process.env.PG_BIN);
  const debian = "/usr/lib/postgresql";
  if (existsSync(debian)) {
    const majors = readdirSync(debian).filter((name) => /^\d+$/.test(name)).sort((a, b) => Number(b) - Number(a));
    for (const major of majors) candidates.push(join(debian, major, "bin"));
  }
  const config = spawnSync("pg_config", ["--bindir"], { encoding: "utf8" });
  if (config.status === 0) candidates.push(config.stdout.trim());
  const found = candidates.find((dir) => existsSync(join(dir, "initdb")) && existsSync(join(dir, "postgres")));
  if (found === undefined) throw new Error(INSTALL_HINT);
  return found;
}


/** The uid/gid to run the server as: ours, or the `postgres` user's when we are root. */
function serverUser(): { uid: number; gid: number } | undefined {
  if (typeof process.getuid !== "function" || process.getuid() !== 0) return undefined;
  const uid = spawnSync("id", ["-u", "postgres"], { encoding: "utf8" });
  const gid = spawnSync("id", ["-g", "postgres"], { encoding: "utf8" });
  if (uid.status !== 0 || gid.status !== 0) {
    throw new Error("running as root, and PostgreSQL refuses root: a `postgres` system user is needed (the postgresql package creates it)");
  }
  return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
}

async function waitForServer(url: string, child: ChildProcess, output: () => string, deadlineMs: number): Promise<void> {
  const start = Date.now();
  while (Date.now() - start < deadlineMs) {
    if (child.exitCode !== null) throw new Error(`postgres exited with code ${child.exitCode}: ${output()}`);
    const probe = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1_000 });
    probe.on("error", () => {});
    try {
      await probe.connect();
      await probe.query("SELECT 1");
      return;
    } catch {
      // not up yet
    } finally {
      await probe.end().catch(() => {});
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`postgres did not accept connections within ${deadlineMs} ms: ${output()}`);
}

/** initdb + postgres on a free loopback port. */
export async function startPostgres(): Promise<PostgresServer> {
  const bin = postgresBinDir();
  const user = serverUser();
  const dir = mkdtempSync(join(tmpdir(), "bq-pg-"));
  const data = join(dir, "data");
  if (user !== undefined) chownSync(dir, user.uid, user.gid);
  const init = spawnSync(join(bin, "initdb"), ["-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync"], {
    encoding: "utf8",
    ...user,
  });
  if (init.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`initdb failed (${init.status}): ${(init.stderr || init.stdout || String(init.error)).slice(-1000)}`);
  }
  const port = await freePort();
  const args = ["-D", data, "-p", String(port), "-k", dir, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"];
  args.push("-c", "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "max_connections=200");
  const child = spawn(join(bin, "postgres"), args, { stdio: ["ignore", "ignore", "pipe"], ...user });
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr = (stderr + chunk.toString("utf8")).slice(-2000);
  });
  // If the test process ends without teardown (a crash), the server must not outlive it.
  const orphanGuard = () => child.kill("SIGKILL");
  process.once("exit", orphanGuard);
  child.once("exit", () => process.off("exit", orphanGuard));
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const stop = () =>
    new Promise<void>((resolve) => {
      const done = () => {
        rmSync(dir, { recursive: true, force: true });
        resolve();
      };
      if (child.exitCode !== null || child.signalCode !== null) return done();
      const force = setTimeout(() => child.kill("SIGKILL"), 5_000);
      child.once("exit", () => {
        clearTimeout(force);
        done();
      });
      child.kill("SIGINT");
    });
  try {
    await waitForServer(url, child, () => stderr, 20_000);
  } catch (error) {
    await stop();
    throw error;
  }
  return { url, port, stop };
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const server = await startPostgres();
  project.provide("postgresUrl", server.url);
  return () => server.stop();
}
