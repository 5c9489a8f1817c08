/**
 * Throwaway redis-server processes for the tests that need more than the shared server: one node on a
 * port of its own (restartable on the same port, optionally persistent, optionally a replica), and a
 * Redis Cluster of such nodes built with `redis-cli --cluster create`.
 *
 * Every process is stopped by `stop()`, by the test process's `exit`, and — when the test process
 * dies without either (SIGKILL, a crash of the runner) — by a small watchdog shell that polls the
 * parent's pid once a second and kills the node (and deletes its directory) when the parent is gone.
 *
 * What this is *not*: a Redis for anything but tests — loopback only, nothing kept after `stop()`.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createServer } from "node:net";
import { Redis } from "ioredis";

export interface RedisNodeOptions {
  /** Port to listen on (default: a free one). */
  port?: number;
  /** Extra redis-server arguments (e.g. `--replicaof 127.0.0.1 P`, `--cluster-enabled yes`). */
  args?: string[];
  /** Keep data on disk: AOF with `appendfsync always`, so a SIGKILL loses nothing acknowledged. */
  persistent?: boolean;
}

export interface RedisNode {
  readonly port: number;
  readonly dir: string;
  /** The running process's pid (changes on restart). */
  readonly pid: number;
  /** SIGKILL, no shutdown save: what a crash or a lost machine does. Resolves once it has exited. */
  kill(): Promise<void>;
  /** Starts the node again on the same port and directory (after `kill`/`stop`, or kills it first). */
  restart(): Promise<void>;
  /** Stops the node (SIGTERM, SIGKILL after 2 s) and deletes its directory. */
  stop(): Promise<void>;
}

export function requireRedisServer(): void {
  if (spawnSync("redis-server", ["--version"], { stdio: "ignore" }).status !== 0) {
    throw new Error("redis-server is not installed: run `apt-get update && apt-get install -y redis-server` (.ci/run does)");
  }
}

/**
 * A free loopback port below the kernel's ephemeral range (32768+), where `freePort()` and every
 * outgoing connection draw from: a node that is killed and restarted on its port must not find it
 * taken meanwhile by another test worker's freshly started server.
 */
async function quietPort(): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    const free = await new Promise<boolean>((resolve) => {
      const server = createServer();
      server.once("error", () => resolve(false));
      server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
    });
    if (free) return port;
  }
}

/**
 * PINGs until the node answers — the node of THIS process (its `process_id`), not another server
 * that holds the port because this one could not bind it — or the process exits.
 */
async function waitForNode(port: number, child: ChildProcess, deadlineMs: number): Promise<void> {
  const start = Date.now();
  while (Date.now() - start < deadlineMs) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`redis-server on ${port} exited (${child.exitCode ?? child.signalCode})`);
    const probe = new Redis({ host: "127.0.0.1", port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    probe.on("error", () => {});
    try {
      await probe.connect();
      const pid = /process_id:(\d+)/.exec(await probe.info("server"))?.[1];
      if (pid !== undefined && Number(pid) !== child.pid) throw new PortTaken(port);
      if ((await probe.ping()) === "PONG") return;
    } catch (error) {
      if (error instanceof PortTaken) throw error;
      // not up yet (or still loading its AOF)
    } finally {
      probe.disconnect();
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`redis-server did not answer on port ${port} within ${deadlineMs} ms`);
}

class PortTaken extends Error {
  constructor(port: number) {
    super(`port ${port} is served by another redis-server`);
  }
}

/** Kills `pid` and deletes `dir` when this process is gone (polled each second); exits when `pid` is gone. */
function watchdog(pid: number, dir: string): ChildProcess {
  const script = 'while kill -0 "$0" 2>/dev/null && kill -0 "$1" 2>/dev/null; do sleep 1; done; kill -0 "$0" 2>/dev/null || { kill -9 "$1" 2>/dev/null; sleep 0.2; rm -rf "$2"; }';
  const guard = spawn("sh", ["-c", script, String(process.pid), String(pid), dir], {
    stdio: "ignore",
    detached: true,
  });
  guard.unref();
  return guard;
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once("exit", () => resolve()));
}

/** Starts one redis-server (see `RedisNodeOptions`); on a port of its own unless one is given. */
export async function startRedisNode(options: RedisNodeOptions = {}): Promise<RedisNode> {
  requireRedisServer();
  const dir = mkdtempSync(join(tmpdir(), "bq-redis-"));
  const persistence = options.persistent
    ? ["--appendonly", "yes", "--appendfsync", "always", "--save", ""]
    : ["--appendonly", "no", "--save", ""];
  let port = options.port ?? (await quietPort());
  const args = () => ["--bind", "127.0.0.1", "--port", String(port), "--dir", dir, ...persistence, ...(options.args ?? [])];
  let child: ChildProcess;
  let guard: ChildProcess | undefined;
  const orphanGuard = () => child.kill("SIGKILL");
  const launch = async () => {
    child = spawn("redis-server", args(), { stdio: "ignore", cwd: dir });
    process.once("exit", orphanGuard);
    child.once("exit", () => process.off("exit", orphanGuard));
    if (child.pid !== undefined) guard = watchdog(child.pid, dir);
    await waitForNode(port, child, 10_000);
  };
  const kill = async () => {
    child.kill("SIGKILL");
    await exited(child);
    guard?.kill("SIGKILL");
  };
  for (let attempt = 0; ; attempt += 1) {
    try {
      await launch();
      break;
    } catch (error) {
      await kill();
      // Lost a race for the port: try another one (only when the port was ours to choose).
      if (options.port === undefined && attempt < 4) {
        port = await quietPort();
        continue;
      }
      rmSync(dir, { recursive: true, force: true });
      throw error;
    }
  }
  return {
    port,
    dir,
    get pid() {
      return child.pid ?? -1;
    },
    kill,
    restart: async () => {
      await kill();
      await launch();
    },
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        const force = setTimeout(() => child.kill("SIGKILL"), 2_000);
        child.kill("SIGTERM");
        await exited(child);
        clearTimeout(force);
      }
      guard?.kill("SIGKILL");
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** One node of a cluster as `CLUSTER NODES` describes it. */
export interface ClusterNodeInfo {
  readonly id: string;
  readonly port: number;
  readonly role: "master" | "replica";
  /** A replica's master id. */
  readonly masterId?: string;
  /** A master's slot ranges as `CLUSTER NODES` prints them (e.g. "0-5460"). */
  readonly slots: string[];
}

export interface RedisCluster {
  readonly nodes: RedisNode[];
  /** The ports of the masters, in `CLUSTER NODES` order. */
  readonly masterPorts: number[];
  stop(): Promise<void>;
}

/** `CLUSTER NODES` as seen by the node on `port`. */
export async function clusterNodes(port: number): Promise<ClusterNodeInfo[]> {
  const admin = new Redis({ host: "127.0.0.1", port, lazyConnect: true, maxRetriesPerRequest: 1 });
  admin.on("error", () => {});
  try {
    await admin.connect();
    const text = (await admin.call("CLUSTER", "NODES")) as string;
    return text
      .trim()
      .split("\n")
      .map((line): ClusterNodeInfo => {
        const [id, address, flags, master, , , , , ...slots] = line.split(" ");
        const nodePort = Number((address as string).split("@")[0]?.split(":")[1]);
        const isMaster = (flags as string).split(",").includes("master");
        return {
          id: id as string,
          port: nodePort,
          role: isMaster ? "master" : "replica",
          ...(isMaster ? {} : { masterId: master as string }),
          slots: slots.filter((slot) => /^\d/.test(slot)),
        };
      });
  } finally {
    admin.disconnect();
  }
}

async function info(port: number, section: string): Promise<string> {
  const admin = new Redis({ host: "127.0.0.1", port, lazyConnect: true, maxRetriesPerRequest: 1 });
  admin.on("error", () => {});
  try {
    await admin.connect();
    return (section === "cluster" ? await admin.call("CLUSTER", "INFO") : await admin.call("INFO", section)) as string;
  } finally {
    admin.disconnect();
  }
}

/** Waits until every node says `cluster_state:ok` and every replica's link to its master is up. */
async function waitForCluster(nodes: readonly RedisNode[], replicas: boolean, deadlineMs: number): Promise<void> {
  const start = Date.now();
  while (Date.now() - start < deadlineMs) {
    const states = await Promise.all(nodes.map((node) => info(node.port, "cluster").catch(() => "")));
    const links = replicas ? await Promise.all(nodes.map((node) => info(node.port, "replication").catch(() => ""))) : [];
    const ok = states.every((state) => state.includes("cluster_state:ok"));
    const linked = links.every((text) => !text.includes("role:slave") || text.includes("master_link_status:up"));
    if (ok && linked) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`the cluster did not become ready within ${deadlineMs} ms`);
}

/** A port for a cluster node and one for its cluster bus (given with `--cluster-port`, not port + 10000). */
async function clusterPorts(): Promise<[number, number]> {
  const port = await quietPort();
  let bus = await quietPort();
  while (bus === port) bus = await quietPort();
  return [port, bus];
}

/**
 * A Redis Cluster on loopback: `masters` masters (at least 3) with `replicasPerMaster` replicas each,
 * slots spread evenly by `redis-cli --cluster create`. Resolves once every node agrees the cluster
 * is ok and every replica is in sync.
 */
export async function startRedisCluster(options: { masters?: number; replicasPerMaster?: number } = {}): Promise<RedisCluster> {
  const masters = options.masters ?? 3;
  const replicasPerMaster = options.replicasPerMaster ?? 0;
  const count = masters * (1 + replicasPerMaster);
  const nodes: RedisNode[] = [];
  const stop = async () => {
    await Promise.all(nodes.map((node) => node.stop()));
  };
  try {
    for (let i = 0; i < count; i += 1) {
      const [port, bus] = await clusterPorts();
      nodes.push(
        await startRedisNode({
          port,
          args: ["--cluster-enabled", "yes", "--cluster-port", String(bus), "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000"],
        }),
      );
    }
    const create = spawnSync(
      "redis-cli",
      ["--cluster", "create", ...nodes.map((node) => `127.0.0.1:${node.port}`), "--cluster-replicas", String(replicasPerMaster), "--cluster-yes"],
      { encoding: "utf8", timeout: 60_000 },
    );
    if (create.status !== 0) throw new Error(`redis-cli --cluster create failed (${create.status}): ${(create.stdout + create.stderr).slice(-1500)}`);
    await waitForCluster(nodes, replicasPerMaster > 0, 30_000);
    const described = await clusterNodes(nodes[0]?.port as number);
    const masterPorts = described.filter((node) => node.role === "master").map((node) => node.port);
    return { nodes, masterPorts, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
