/**
 * BENCH — the Upstash part of the cost section alone, in a few seconds: `npx tsx bench/cost-redis.ts`
 * (`--layouts`: ours in the two BabelQueue layouts too).
 * Starts a throwaway redis-server and the Upstash REST bridge (no DynamoDB, no delay proxies: billed
 * commands do not depend on latency), runs every workload of cost-workloads.ts through ours and
 * Powertools exactly as `npm run bench` does (cost-runs.ts, `measureRedisCosts`), and prints the
 * billed commands, their breakdown and the dollars per million messages.
 *
 * What this is *not*: a replacement for `npm run bench`, which writes the report; nothing is written here.
 */
import { randomBytes } from "node:crypto";
import type { CacheClient } from "@aws-lambda-powertools/idempotency/cache/types";
import { createClient } from "@redis/client";
import { Redis } from "ioredis";
import { startRedisServer } from "../test/setup/redis.js";
import { startUpstashBridge } from "../test/support/upstash-bridge.js";
import { parseCommandStats } from "./billing.js";
import { measureRedisCosts } from "./cost-runs.js";

const redis = await startRedisServer();
const token = randomBytes(24).toString("base64url");
const bridge = await startUpstashBridge({ redisPort: redis.port, token });
const admin = new Redis({ host: "127.0.0.1", port: redis.port });
const powertools = createClient({ url: `redis://127.0.0.1:${redis.port}` });
await powertools.connect();
try {
  const figures = await measureRedisCosts({
    bridge,
    upstash: { url: bridge.url, token },
    nodeRedis: async () => powertools as unknown as CacheClient,
    redisCommandCalls: async () => parseCommandStats(await admin.info("commandstats")),
  }, undefined, process.argv.includes("--layouts") ? ["babelqueue-serverless", "babelqueue-php", "babelqueue-go"] : ["babelqueue-serverless"]);
  for (const workload of ["new-10", "dup-10", "storm"] as const) {
    const [ours, theirs] = ["ours", "Powertools"].map((kit) => figures.find((f) => f.workload === workload && f.kit === kit));
    for (const figure of figures.filter((f) => f.workload === workload)) {
      if (figure === undefined) continue;
      const breakdown = Object.entries(figure.breakdown ?? {})
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([name, count]) => `${name} ${count}`)
        .join(", ");
      console.log(
        `${workload.padEnd(7)} ${figure.kit.padEnd(27)} requests ${String(figure.requests).padStart(4)}  commands ${String(figure.units.commands).padStart(4)}  $${figure.usdPerMillionMessages.toFixed(2).padStart(6)} / M messages  (${breakdown})`,
      );
    }
    if (ours !== undefined && theirs !== undefined) console.log(`${workload.padEnd(7)} Powertools ÷ ours: ${(theirs.usdPerMillionMessages / ours.usdPerMillionMessages).toFixed(2)}×`);
  }
} finally {
  await powertools.close();
  admin.disconnect();
  await bridge.close();
  await redis.stop();
}
process.exit(0);
