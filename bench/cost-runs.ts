/**
 * BENCH — the cost section's runs on DynamoDB and Redis: every workload of cost-workloads.ts through
 * each kit, once (billed units do not vary between rounds), checking the outcome like the request
 * runs do (each message's effect ran once, the scripted failures were reported, nothing else), and
 * recording requests, billed units and dollars.
 *
 * Kits: on DynamoDB, ours (default options: the redelivery precheck on "auto"), ours with
 * `precheck: "never"` (what every batch cost before it), and Powertools; on Redis, ours over REST and
 * Powertools, both billed as Upstash pay-as-you-go commands (Upstash speaks RESP over TCP too, and
 * bills it the same, so Powertools' commands are what it would pay there).
 *
 * What this is *not*: a latency measurement (see the request runs) — one pass, no warm-up needed.
 */
import { countingCacheClient } from "./store-runs.js";
import { DynamoDBPersistenceLayer } from "@aws-lambda-powertools/idempotency/dynamodb";
import { CachePersistenceLayer } from "@aws-lambda-powertools/idempotency/cache";
import { DynamoDBStore } from "../entry/dynamodb.js";
import { type RedisLayoutName, UpstashRedisStore } from "../entry/upstash.js";
import { type Backends, OUR_TABLE, POWERTOOLS_TABLE } from "./backends.js";
import { DynamoMeter, commandDelta } from "./billing.js";
import { type CostWorkload, type CostWorkloadName, costWorkloads, deliveriesOf } from "./cost-workloads.js";
import { lambdaContext, newIds, sqsEventOf } from "./fixtures/sqs.js";
import { type Kit, Tally } from "./kit.js";
import { oursKit } from "./ours.js";
import { powertoolsKit } from "./powertools.js";
import { PRICES, dollars } from "./prices.js";

export type CostBackend = "DynamoDB" | "Upstash Redis" | "Durable Objects";

/** One kit on one workload. */
export interface CostFigure {
  readonly backend: CostBackend;
  readonly kit: string;
  readonly workload: CostWorkloadName;
  readonly messages: number;
  readonly deliveries: number;
  /** Store requests (round trips) of the billed batches. */
  readonly requests: number;
  /** Billed units by name: rru / wru (+ Local's reported ones), commands, doRequests / rowsRead / rowsWritten. */
  readonly units: Readonly<Record<string, number>>;
  /** Per-command breakdown (Redis). */
  readonly breakdown?: Readonly<Record<string, number>>;
  readonly usd: number;
  readonly usdPerMillionMessages: number;
}

/** What a metered kit is: the kit, and how to read its billed units around a workload. */
interface MeteredKit {
  readonly kit: Kit;
  start(): Promise<void>;
  stop(): Promise<{ units: Record<string, number>; usd: number; breakdown?: Record<string, number> }>;
}

/** Runs one batch; returns the batch item failures it reported. */
async function runBatch(kit: Kit, batch: CostWorkload["batches"][number]): Promise<number> {
  for (const delivery of batch) if (delivery.fail) kit.effect.failNext.add(delivery.id);
  const response = await kit.handler(sqsEventOf(batch), lambdaContext());
  // A scripted failure whose handler never ran must not leak into a later batch.
  kit.effect.failNext.clear();
  return response.batchItemFailures.length;
}

/** One unbilled message per kit first: connections, and the scripts loaded into Redis's cache (a cold EVALSHA costs an EVAL more). */
async function warmUp(kit: Kit): Promise<void> {
  await runBatch(kit, newIds(1, "cost-warm").map((id) => ({ id, receiveCount: 1, fail: false })));
}

async function runWorkload(backend: CostBackend, metered: MeteredKit, workload: CostWorkload): Promise<CostFigure> {
  const { kit } = metered;
  for (const batch of workload.prime) {
    if ((await runBatch(kit, batch)) > 0) throw new Error(`${kit.name}: priming batch of ${workload.name} reported failures`);
  }
  const runsBefore = kit.effect.runs;
  kit.requests.reset();
  await metered.start();
  let failures = 0;
  for (const batch of workload.batches) failures += await runBatch(kit, batch);
  const requests = kit.requests.count;
  const billed = await metered.stop();
  const runs = kit.effect.runs - runsBefore;
  const ids = new Set(workload.batches.flat().map((delivery) => delivery.id));
  const twice = [...ids].filter((id) => (kit.effect.perId.get(id) ?? 0) > 1);
  if (runs !== workload.expectRuns || failures !== workload.expectFailures || twice.length > 0) {
    throw new Error(
      `${kit.name} on ${backend} ${workload.name}: ${runs} effect run(s) (expected ${workload.expectRuns}), ${failures} failure(s) reported (expected ${workload.expectFailures}), ${twice.length} id(s) ran twice`,
    );
  }
  return {
    backend,
    kit: kit.name,
    workload: workload.name,
    messages: workload.messages,
    deliveries: deliveriesOf(workload),
    requests,
    units: billed.units,
    ...(billed.breakdown === undefined ? {} : { breakdown: billed.breakdown }),
    usd: billed.usd,
    usdPerMillionMessages: (billed.usd / workload.messages) * 1_000_000,
  };
}

function dynamoKit(kit: Kit, meter: DynamoMeter): MeteredKit {
  return {
    kit,
    start: async () => meter.reset(),
    stop: async () => {
      const units = { ...meter.units };
      return { units, usd: dollars(PRICES.dynamoRru, units.rru) + dollars(PRICES.dynamoWru, units.wru) };
    },
  };
}

function redisKit(kit: Kit, backends: Pick<Backends, "redisCommandCalls">): MeteredKit {
  let before = new Map<string, number>();
  return {
    kit,
    start: async () => {
      before = await backends.redisCommandCalls();
    },
    stop: async () => {
      const { billed, byCommand } = commandDelta(before, await backends.redisCommandCalls());
      return { units: { commands: billed }, breakdown: byCommand, usd: dollars(PRICES.upstashCommand, billed) };
    },
  };
}


/** Every workload through every DynamoDB and Redis kit. */
export async function measureCosts(backends: Backends): Promise<CostFigure[]> {
  const figures: CostFigure[] = [];
  const workloads = costWorkloads(newIds);

  const dynamo = (make: (tally: Tally, meter: DynamoMeter) => Kit): MeteredKit => {
    const tally = new Tally();
    const meter = new DynamoMeter();
    return dynamoKit(make(tally, meter), meter);
  };
  const dynamoKits = [
    dynamo((tally, meter) =>
      oursKit("ours", "sqsHandler + DynamoDBStore", new DynamoDBStore({ table: OUR_TABLE, namespace: "cost", client: backends.dynamodbClient(tally, meter) }), tally),
    ),
    dynamo((tally, meter) =>
      oursKit(
        "ours, no precheck",
        "sqsHandler + DynamoDBStore({ precheck: \"never\" })",
        new DynamoDBStore({ table: OUR_TABLE, namespace: "cost-never", precheck: "never", client: backends.dynamodbClient(tally, meter) }),
        tally,
      ),
    ),
    dynamo((tally, meter) =>
      powertoolsKit(
        "Powertools",
        "BatchProcessor + makeIdempotent + DynamoDBPersistenceLayer",
        new DynamoDBPersistenceLayer({ tableName: POWERTOOLS_TABLE, awsSdkV3Client: backends.dynamodbClient(tally, meter) }),
        tally,
      ),
    ),
  ];
  for (const metered of dynamoKits) await warmUp(metered.kit);
  for (const workload of workloads) for (const metered of dynamoKits) figures.push(await runWorkload("DynamoDB", metered, workload));

  figures.push(...(await measureRedisCosts(backends, workloads)));
  return figures;
}

/** What the Redis cost runs need of the backends (so bench/cost-redis.ts can run them without DynamoDB). */
export type RedisCostBackends = Pick<Backends, "bridge" | "upstash" | "nodeRedis" | "redisCommandCalls">;

/**
 * Every workload through ours (UpstashRedisStore over REST) and Powertools (CachePersistenceLayer), billed as Upstash commands.
 * `layouts`: ours in each of these record layouts (kit "ours" for the own one, "ours, <layout>" for the others).
 */
export async function measureRedisCosts(
  backends: RedisCostBackends,
  workloads: CostWorkload[] = costWorkloads(newIds),
  layouts: readonly RedisLayoutName[] = ["babelqueue-serverless"],
): Promise<CostFigure[]> {
  const figures: CostFigure[] = [];
  const bridge = backends.bridge;
  const theirs = new Tally();
  const bridgeRequests = {
    get count() {
      return bridge.requests;
    },
    reset: () => bridge.reset(),
  };
  const where = (layout: RedisLayoutName) =>
    layout === "babelqueue-serverless" ? { namespace: "cost" } : { layout, prefix: layout === "babelqueue-php" ? "bq:idem:cost:" : "bq:idemp:cost:" };
  const redisKits = [
    ...layouts.map((layout) =>
      redisKit(
        oursKit(
          layout === "babelqueue-serverless" ? "ours" : `ours, ${layout}`,
          `sqsHandler + UpstashRedisStore (REST${layout === "babelqueue-serverless" ? "" : `, layout "${layout}"`})`,
          new UpstashRedisStore({ url: backends.upstash.url, token: backends.upstash.token, ...where(layout) }),
          bridgeRequests,
        ),
        backends,
      ),
    ),
    redisKit(
      powertoolsKit(
        "Powertools",
        "BatchProcessor + makeIdempotent + CachePersistenceLayer",
        new CachePersistenceLayer({ client: countingCacheClient(await backends.nodeRedis(), theirs) }),
        theirs,
      ),
      backends,
    ),
  ];
  for (const metered of redisKits) await warmUp(metered.kit);
  for (const workload of workloads) for (const metered of redisKits) figures.push(await runWorkload("Upstash Redis", metered, workload));
  return figures;
}
