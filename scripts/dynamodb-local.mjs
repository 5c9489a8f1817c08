#!/usr/bin/env node
/**
 * DynamoDB Local (AWS's own emulator) for the tests and the demo, from nothing but npm and Java.
 *
 * `ensureDynamoDBLocal()` fetches the emulator once with `npm pack amplify-dynamodb-simulator@2.9.30`
 * (the npm package that ships DynamoDB Local's jar; installing it would drag in a large CLI, so it is
 * only packed and unpacked) into `.cache/dynamodb-local/` (git-ignored) and reuses it afterwards.
 * `startDynamoDBLocal()` runs it in memory on a free loopback port and resolves once it answers.
 *
 * CLI: `node scripts/dynamodb-local.mjs fetch` (download only) or `... start` (runs until Ctrl-C).
 *
 * What this is *not*: a DynamoDB for production, or a fallback when Java is missing (the demo uses
 * dynalite then; the tests require Java, which `.ci/run` checks).
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync } from "node:fs";
import { createServer, connect } from "node:net";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { spawnGuarded } from "./child-guard.mjs";

const PACKAGE = "amplify-dynamodb-simulator@2.9.30";
const projectRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** Where the unpacked emulator lives (contains DynamoDBLocal.jar and DynamoDBLocal_lib/). */
export const emulatorDir = join(projectRoot, ".cache", "dynamodb-local", "emulator");

/** True when a `java` binary answers `java -version`. */
export function hasJava() {
  const probe = spawnSync("java", ["-version"], { stdio: "ignore" });
  return probe.status === 0;
}

/** Downloads and unpacks DynamoDB Local once; returns the directory holding DynamoDBLocal.jar. */
export function ensureDynamoDBLocal() {
  if (existsSync(join(emulatorDir, "DynamoDBLocal.jar"))) return emulatorDir;
  const cacheDir = dirname(emulatorDir);
  const work = join(cacheDir, `tmp-${process.pid}`);
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });
  try {
    const pack = spawnSync("npm", ["pack", PACKAGE, "--silent", "--pack-destination", work], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    });
    if (pack.status !== 0) throw new Error(`npm pack ${PACKAGE} failed: ${pack.stderr.trim()}`);
    const tarball = readdirSync(work).find((file) => file.endsWith(".tgz"));
    if (tarball === undefined) throw new Error(`npm pack ${PACKAGE} produced no tarball`);
    const untar = spawnSync("tar", ["-xzf", join(work, tarball), "-C", work, "package/emulator"], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    });
    if (untar.status !== 0) throw new Error(`unpacking ${tarball} failed: ${untar.stderr.trim()}`);
    if (!existsSync(join(work, "package", "emulator", "DynamoDBLocal.jar"))) {
      throw new Error(`${PACKAGE} does not contain emulator/DynamoDBLocal.jar`);
    }
    // Another process may have finished first: keep theirs.
    if (!existsSync(join(emulatorDir, "DynamoDBLocal.jar"))) {
      rmSync(emulatorDir, { recursive: true, force: true });
      renameSync(join(work, "package", "emulator"), emulatorDir);
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return emulatorDir;
}

/** A port nobody listens on right now, on 127.0.0.1. */
export function freePort() {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolvePort(typeof address === "object" && address ? address.port : 0));
    });
  });
}

function canConnect(port) {
  return new Promise((resolveConnect) => {
    const socket = connect({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolveConnect(true);
    });
    socket.once("error", () => resolveConnect(false));
  });
}

/**
 * Starts DynamoDB Local in memory on a free loopback port.
 * Resolves to `{ endpoint, port, stop }`; `stop()` kills the JVM and resolves when it is gone.
 */
/**
 * Client configuration for a local emulator: its endpoint, a region, and dummy credentials
 * (the emulator checks neither). `overrides` win.
 */
export function localClientConfig(endpoint, overrides = {}) {
  return { endpoint, region: "us-east-1", credentials: { accessKeyId: "local", secretAccessKey: "local" }, ...overrides };
}

/**
 * Calls `onRequest(commandName)` for every request `client` sends. Returns the client.
 *
 * `per: "attempt"` (the default; the bench's request counts) sits in the deserialize step, inside the
 * SDK's retry loop, so a command the SDK retries counts once per HTTP attempt. `per: "command"` sits
 * in the initialize step and counts each command once, however often the SDK re-sends it: what the
 * tests of a store's request plan count, since a transport retry (a keep-alive socket the emulator
 * closed, a 500 from a loaded JVM) is the SDK's doing, not the store's, and is not billed.
 */
export function onEveryRequest(client, onRequest, { per = "attempt" } = {}) {
  if (per !== "attempt" && per !== "command") throw new Error(`onEveryRequest: per must be "attempt" or "command", got ${String(per)}`);
  client.middlewareStack.add(
    (next, context) => async (args) => {
      onRequest(context.commandName ?? "?");
      return next(args);
    },
    { step: per === "command" ? "initialize" : "deserialize", name: `countRequests-${Math.random().toString(36).slice(2)}` },
  );
  return client;
}

/** The name of every command `client` sends from now on, once per command (`onEveryRequest`, `per: "command"`). */
export function commandsSent(client) {
  const sent = [];
  onEveryRequest(client, (name) => sent.push(name), { per: "command" });
  return sent;
}

export async function startDynamoDBLocal({ timeoutMs = 30_000 } = {}) {
  const dir = ensureDynamoDBLocal();
  const port = await freePort();
  // Guarded: the JVM stops when this process ends, however it ends (scripts/child-guard.mjs).
  const child = spawnGuarded(
    "java",
    [
      "-Xmx256m",
      `-Djava.library.path=${join(dir, "DynamoDBLocal_lib")}`,
      "-jar",
      join(dir, "DynamoDBLocal.jar"),
      "-inMemory",
      "-port",
      String(port),
    ],
    { cwd: dir, stdio: ["ignore", "ignore", "pipe"], guard: { graceMs: 3000 } },
  );
  let stderr = "";
  child.stderr.on("data", (chunk) => {
    if (stderr.length < 4000) stderr += chunk;
  });
  let exited = false;
  const exit = new Promise((resolveExit) =>
    child.once("exit", () => {
      exited = true;
      resolveExit();
    }),
  );
  const deadline = Date.now() + timeoutMs;
  while (!(await canConnect(port))) {
    if (exited) throw new Error(`DynamoDB Local exited before listening: ${stderr.trim()}`);
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`DynamoDB Local did not listen on port ${port} within ${timeoutMs} ms`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const stop = async () => {
    if (!exited) {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 3000);
      await exit;
      clearTimeout(timer);
    }
  };
  return { endpoint: `http://127.0.0.1:${port}`, port, stop };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const command = process.argv[2] ?? "fetch";
  if (command === "fetch") {
    console.log(ensureDynamoDBLocal());
  } else if (command === "start") {
    const local = await startDynamoDBLocal();
    console.log(`DynamoDB Local listening at ${local.endpoint}`);
    const shutdown = () => local.stop().then(() => process.exit(0));
    process.on("SIGINT", shutdown);
    process.on("SIGTERM", shutdown);
  } else {
    console.error("usage: node scripts/dynamodb-local.mjs [fetch|start]");
    process.exit(2);
  }
}
