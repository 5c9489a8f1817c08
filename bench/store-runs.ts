/**
 * BENCH — the store-backed comparison: the same SQS batches through each kit against the same
 * backend behind the same delay proxy. For every scenario (1, 10 and 100 new messages; 10
 * duplicates, i.e. a redelivered batch whose effects are already committed) and every kit it
 * records the store requests and the wall time of the handler call, over several interleaved
 * rounds, and checks the outcome: every new message's effect ran exactly once, no duplicate's ran,
 * nothing was reported as a batch item failure. A kit that gets that wrong fails the bench.
 *
 * What this is *not*: a throughput test (one batch at a time, like one Lambda instance).
 */
import { DynamoDBPersistenceLayer } from "@aws-lambda-powertools/idempotency/dynamodb";
import { CachePersistenceLayer } from "@aws-lambda-powertools/idempotency/cache";
import type { CacheClient } from "@aws-lambda-powertools/idempotency/cache/types";
import { DynamoDBStore } from "../entry/dynamodb.js";
import { RedisStore, type RedisScriptClient, UpstashRedisStore, ioredisScriptClient } from "../entry/upstash.js";
import { type Backends, OUR_TABLE, POWERTOOLS_TABLE } from "./backends.js";
import { lambdaContext, newIds, sqsEvent } from "./fixtures/sqs.js";
import { type Kit, type RequestCounter, Tally } from "./kit.js";
import { oursKit } from "./ours.js";
import { powertoolsKit } from "./powertools.js";
import { median, rotate } from "./stats.js";

export type ScenarioName = "new-1" | "new-10" | "new-100" | "dup-10";

export const SCENARIOS: readonly { name: ScenarioName; size: number; duplicate: boolean; label: string }[] = [
  { name: "new-1", size: 1, duplicate: false, label: "1 new" },
  { name: "new-10", size: 10, duplicate: false, label: "10 new" },
  { name: "new-100", size: 100, duplicate: false, label: "100 new" },
  { name: "dup-10", size: 10, duplicate: true, label: "10 redelivered" },
];

export interface ScenarioFigure {
  readonly kit: string;
  readonly scenario: ScenarioName;
  /** Median store requests per batch (they do not vary between rounds; the median guards against a stray retry). */
  readonly requests: number;
  /** Median wall time of one handler call, ms. */
  readonly ms: number;
  readonly rounds: number;
}

export interface BackendFigures {
  readonly backend: string;
  readonly kits: readonly { readonly name: string; readonly description: string }[];
  readonly figures: readonly ScenarioFigure[];
}

export function countingScriptClient(client: RedisScriptClient, tally: Tally): RedisScriptClient {
  return {
    eval: (script, keys, args) => (tally.add(), client.eval(script, keys, args)),
    evalsha: (sha, keys, args) => (tally.add(), client.evalsha(sha, keys, args)),
  };
}

export function countingCacheClient(client: CacheClient, tally: Tally): CacheClient {
  return {
    get: (name) => (tally.add(), client.get(name)),
    set: (name, value, options) => (tally.add(), client.set(name, value, options)),
    del: (keys) => (tally.add(), client.del(keys)),
  };
}

export function dynamodbKits(backends: Backends): Kit[] {
  const ours = new Tally();
  const theirs = new Tally();
  return [
    oursKit("ours", "sqsHandler + DynamoDBStore", new DynamoDBStore({ table: OUR_TABLE, client: backends.dynamodbClient(ours) }), ours),
    powertoolsKit(
      "Powertools",
      "BatchProcessor + makeIdempotent + DynamoDBPersistenceLayer",
      new DynamoDBPersistenceLayer({ tableName: POWERTOOLS_TABLE, awsSdkV3Client: backends.dynamodbClient(theirs) }),
      theirs,
    ),
  ];
}

export async function redisKits(backends: Backends): Promise<Kit[]> {
  const bridge = backends.bridge;
  const rest: RequestCounter = {
    get count() {
      return bridge.requests;
    },
    reset: () => bridge.reset(),
  };
  const tcp = new Tally();
  const theirs = new Tally();
  return [
    oursKit(
      "ours (REST)",
      "sqsHandler + UpstashRedisStore (@upstash/redis over HTTP, via the REST bridge)",
      new UpstashRedisStore({ url: backends.upstash.url, token: backends.upstash.token }),
      rest,
    ),
    oursKit(
      "ours (TCP)",
      "sqsHandler + RedisStore (ioredis over TCP)",
      new RedisStore({ client: countingScriptClient(ioredisScriptClient(await backends.ioredis()), tcp) }),
      tcp,
    ),
    powertoolsKit(
      "Powertools",
      "BatchProcessor + makeIdempotent + CachePersistenceLayer (@redis/client over TCP)",
      new CachePersistenceLayer({ client: countingCacheClient(await backends.nodeRedis(), theirs) }),
      theirs,
    ),
  ];
}

async function oneBatch(kit: Kit, scenario: (typeof SCENARIOS)[number]): Promise<{ ms: number; requests: number }> {
  const ids = newIds(scenario.size, scenario.name);
  const context = lambdaContext();
  if (scenario.duplicate) {
    const first = await kit.handler(sqsEvent(ids, 1), context);
    if (first.batchItemFailures.length > 0) throw new Error(`${kit.name}: priming batch reported failures`);
  }
  const before = kit.effect.runs;
  kit.requests.reset();
  const started = performance.now();
  const response = await kit.handler(sqsEvent(ids, scenario.duplicate ? 2 : 1), context);
  const ms = performance.now() - started;
  const requests = kit.requests.count;
  const ran = kit.effect.runs - before;
  const expected = scenario.duplicate ? 0 : scenario.size;
  if (response.batchItemFailures.length > 0 || ran !== expected) {
    throw new Error(
      `${kit.name} on ${scenario.name}: ${ran} effect(s) ran (expected ${expected}), ${response.batchItemFailures.length} failure(s) reported`,
    );
  }
  return { ms, requests };
}

/** Runs every scenario `rounds` times per kit (plus one warm-up round: connections, script cache, JIT). */
export async function measureBackend(backend: string, kits: readonly Kit[], rounds: number): Promise<BackendFigures> {
  const figures: ScenarioFigure[] = [];
  for (const scenario of SCENARIOS) {
    const samples = new Map<string, { ms: number[]; requests: number[] }>(kits.map((kit) => [kit.name, { ms: [], requests: [] }]));
    for (let round = -1; round < rounds; round++) {
      for (const kit of rotate(kits, round + 1)) {
        const sample = await oneBatch(kit, scenario);
        if (round < 0) continue;
        const into = samples.get(kit.name) as { ms: number[]; requests: number[] };
        into.ms.push(sample.ms);
        into.requests.push(sample.requests);
      }
    }
    for (const kit of kits) {
      const into = samples.get(kit.name) as { ms: number[]; requests: number[] };
      figures.push({ kit: kit.name, scenario: scenario.name, requests: median(into.requests), ms: median(into.ms), rounds });
    }
  }
  return { backend, kits: kits.map(({ name, description }) => ({ name, description })), figures };
}
