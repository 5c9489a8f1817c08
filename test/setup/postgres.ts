/**
 * vitest globalSetup: a throwaway PostgreSQL for the PostgresStore tests.
 *
 * Runs Debian's PostgreSQL server binaries (`apt-get install -y postgresql`; `.ci/run` does it):
 * `initdb` into a fresh temp directory, then `postgres` itself as a child process on a free
 * loopback port (trust authentication, fsync off), provides `postgresUrl`, and stops the server
 * and deletes the directory after the run. The server refuses to run as root, so when the tests
 * run as root the directory is handed to the `postgres` system user and both binaries run as it.
 *
 * `startPostgres` is exported for scripts and tests that need a server of their own: it can also be
 * halted, resumed and restarted on the same data and port, and give a streaming-replication
 * standby that can be promoted (the restart and failover tests). Every server process is spawned
 * through scripts/child-guard.mjs: it never outlives the process that started it.
 * Binaries are looked up in `$PG_BIN`, then the newest `/usr/lib/postgresql/<major>/bin`, then
 * `pg_config --bindir`.
 *
 * What this is *not*: a PostgreSQL for anything but tests — it binds 127.0.0.1 only, trusts every
 * local connection and keeps nothing.
 */
import { spawnGuarded } from "../../scripts/child-guard.mjs";
import { freePort } from "../../scripts/dynamodb-local.mjs";
import { type ChildProcess, spawnSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import type { TestProject } from "vitest/node";
import { killOnExit, stopChild } from "../support/child-stop.js";

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

export interface StartPostgresOptions {
  /** Server settings (`-c name=value`) over the test defaults (fsync, synchronous_commit and full_page_writes off, 200 connections). */
  readonly settings?: Readonly<Record<string, string>>;
}

/** How a server process is stopped: "fast" (SIGINT: clients dropped, a clean checkpoint) or "immediate" (SIGQUIT: a crash, recovery on the next start). */
export type PostgresStopMode = "fast" | "immediate";

/** A running server of this setup, with what the restart and failover tests need. */
export interface RestartablePostgres extends PostgresServer {
  /** The data directory. */
  readonly dataDir: string;
  /** Stops the server process only (the data stays), as `mode` says. */
  halt(mode?: PostgresStopMode): Promise<void>;
  /** Starts it again on the same port and data. */
  resume(): Promise<void>;
  /** `halt` then `resume`: a restart, as clients see one. */
  restart(mode?: PostgresStopMode): Promise<void>;
  /** A streaming-replication standby of this server (pg_basebackup -R), on a port of its own. */
  startStandby(): Promise<RestartablePostgres>;
  /** Promotes this standby to a primary (`pg_promote()`); resolves once it accepts writes. */
  promote(): Promise<void>;
}

const DEFAULT_SETTINGS: Readonly<Record<string, string>> = {
  listen_addresses: "127.0.0.1",
  fsync: "off",
  synchronous_commit: "off",
  full_page_writes: "off",
  max_connections: "200",
};

/** One server process on `data`: launched guarded (scripts/child-guard.mjs), stopped on demand. */
async function serve(bin: string, dir: string, data: string, port: number, settings: Readonly<Record<string, string>>, user: { uid: number; gid: number } | undefined, cleanup: string[]) {
  const args = ["-D", data, "-p", String(port), "-k", dir];
  for (const [name, value] of Object.entries({ ...DEFAULT_SETTINGS, ...settings })) args.push("-c", `${name}=${value}`);
  // Guarded: the server (its whole process group) stops when this process ends, however it ends,
  // and the watchdog deletes the directory (scripts/child-guard.mjs). SIGINT is a fast shutdown.
  const child = spawnGuarded(join(bin, "postgres"), args, { stdio: ["ignore", "ignore", "pipe"], ...user, guard: { signal: "SIGINT", graceMs: 5_000, cleanup } });
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr = (stderr + chunk.toString("utf8")).slice(-2000);
  });
  // A normal exit of this process without teardown: the server must not outlive it either.
  killOnExit(child);
  const halt = (mode: PostgresStopMode = "fast") => stopChild(child, mode === "fast" ? "SIGINT" : "SIGQUIT", 5_000);
  return { child, halt, output: () => stderr };
}

/** initdb + postgres on a free loopback port. */
export async function startPostgres(options: StartPostgresOptions = {}): Promise<RestartablePostgres> {
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
  return runServer(bin, dir, data, await freePort(), options.settings ?? {}, user);
}

async function runServer(
  bin: string,
  dir: string,
  data: string,
  port: number,
  settings: Readonly<Record<string, string>>,
  user: { uid: number; gid: number } | undefined,
): Promise<RestartablePostgres> {
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  let current = await serve(bin, dir, data, port, settings, user, [dir]);
  const resume = async () => {
    current = await serve(bin, dir, data, port, settings, user, [dir]);
    await waitForServer(url, current.child, current.output, 30_000);
  };
  const stop = async () => {
    await current.halt("fast");
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitForServer(url, current.child, current.output, 20_000);
  } catch (error) {
    await stop();
    throw error;
  }
  const server: RestartablePostgres = {
    url,
    port,
    dataDir: data,
    stop,
    halt: (mode) => current.halt(mode),
    resume,
    restart: async (mode) => {
      await current.halt(mode);
      await resume();
    },
    startStandby: async () => {
      const standbyDir = mkdtempSync(join(tmpdir(), "bq-pg-standby-"));
      const standbyData = join(standbyDir, "data");
      if (user !== undefined) chownSync(standbyDir, user.uid, user.gid);
      const backup = spawnSync(join(bin, "pg_basebackup"), ["-D", standbyData, "-h", "127.0.0.1", "-p", String(port), "-U", "postgres", "-X", "stream", "-R", "--no-sync"], {
        encoding: "utf8",
        ...user,
      });
      if (backup.status !== 0) {
        rmSync(standbyDir, { recursive: true, force: true });
        throw new Error(`pg_basebackup failed (${backup.status}): ${(backup.stderr || String(backup.error)).slice(-1000)}`);
      }
      return runServer(bin, standbyDir, standbyData, await freePort(), settings, user);
    },
    promote: async () => {
      const client = new pg.Client({ connectionString: url });
      client.on("error", () => {});
      await client.connect();
      try {
        await client.query("SELECT pg_promote(true, 30)");
      } finally {
        await client.end().catch(() => {});
      }
    },
  };
  return server;
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const server = await startPostgres();
  project.provide("postgresUrl", server.url);
  return () => server.stop();
}
