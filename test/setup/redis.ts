/**
 * vitest globalSetup for the Redis stores: starts Debian's `redis-server` on a free loopback port
 * (no persistence), starts the Upstash REST bridge (test/support/upstash-bridge.ts) in front of it,
 * provides `redisPort`, `upstashUrl` and `upstashToken` to the tests, and stops both afterwards.
 *
 * `startRedisServer` is exported too, for tests that need a Redis of their own (one they stop).
 * It needs `redis-server` on PATH: `apt-get install -y redis-server` (.ci/run does it).
 *
 * What this is *not*: a Redis for anything but tests — it binds 127.0.0.1 only and saves nothing.
 */
import { spawnGuarded } from "../../scripts/child-guard.mjs";
import { freePort } from "../../scripts/dynamodb-local.mjs";
import { type ChildProcess, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import type { TestProject } from "vitest/node";
import { killOnExit, stopChild } from "../support/child-stop.js";
import { startUpstashBridge } from "../support/upstash-bridge.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** Port of the shared test redis-server on 127.0.0.1. */
    redisPort: number;
    /** REST URL of the Upstash bridge in front of it. */
    upstashUrl: string;
    /** Bearer token of the bridge. */
    upstashToken: string;
  }
}

export interface RedisServer {
  readonly port: number;
  /** Stops the server (SIGTERM, then SIGKILL after 2 s). */
  stop(): Promise<void>;
}


async function waitForPing(port: number, child: ChildProcess, deadlineMs: number): Promise<void> {
  const start = Date.now();
  while (Date.now() - start < deadlineMs) {
    if (child.exitCode !== null) throw new Error(`redis-server exited with code ${child.exitCode}`);
    const probe = new Redis({ host: "127.0.0.1", port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    probe.on("error", () => {});
    try {
      await probe.connect();
      if ((await probe.ping()) === "PONG") return;
    } catch {
      // not up yet
    } finally {
      probe.disconnect();
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`redis-server did not answer on port ${port} within ${deadlineMs} ms`);
}

/** Starts a throwaway redis-server on a free loopback port. */
export async function startRedisServer(): Promise<RedisServer> {
  if (spawnSync("redis-server", ["--version"], { stdio: "ignore" }).status !== 0) {
    throw new Error("redis-server is not installed: run `apt-get update && apt-get install -y redis-server` (.ci/run does)");
  }
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt += 1) {
    const port = await freePort();
    // Guarded: the server stops when this process ends, however it ends (scripts/child-guard.mjs).
    const child = spawnGuarded("redis-server", ["--bind", "127.0.0.1", "--port", String(port), "--save", "", "--appendonly", "no"], {
      stdio: "ignore",
      guard: { graceMs: 2000 },
    });
    try {
      await waitForPing(port, child, 5_000);
    } catch (error) {
      lastError = error;
      child.kill("SIGKILL");
      continue;
    }
    // If the test process ends without teardown (a crash), the server must not outlive it.
    killOnExit(child);
    return { port, stop: () => stopChild(child, "SIGTERM", 2_000) };
  }
  throw lastError;
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const redis = await startRedisServer();
  const token = randomBytes(24).toString("base64url");
  const bridge = await startUpstashBridge({ redisPort: redis.port, token });
  project.provide("redisPort", redis.port);
  project.provide("upstashUrl", bridge.url);
  project.provide("upstashToken", token);
  return async () => {
    await bridge.close();
    await redis.stop();
  };
}
