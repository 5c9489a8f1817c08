/**
 * The faults of issue 19 in the reliability suite, each a real fault of a real backend where one can
 * be made, run through the same simulated broker (simulate.ts) and judged by the same verdicts:
 *
 * - skewed consumers (DynamoDB): four consumers whose clocks run +30 s, −30 s, +10 min and −10 min,
 *   each with its own `DynamoDBStore` (`now` option, its own client) on one shared table, under
 *   crashes, kills and handler failures, so that leases expire and are taken over by consumers of
 *   every skew. Real: DynamoDB Local's `Date` header is the real clock; the skew is the consumers'.
 * - throttled claims (DynamoDB): a tenth of the ids have their first two claim puts refused with
 *   `ProvisionedThroughputExceededException`. A STAND-IN: DynamoDB Local cannot throttle, so a client
 *   middleware refuses them (test/support/dynamodb-throttle.ts); every other request is real.
 * - a PostgreSQL restart mid-run: a server of the run's own (test/setup/postgres.ts), stopped — a
 *   fast shutdown (SIGINT: every connection terminated "due to administrator command", the fault
 *   that once crashed `npm run bench`) or a crash (SIGQUIT: recovery on start) — and started again
 *   while batches run, `synchronous_commit` on (PostgreSQL's default), through a pool with its
 *   `error` listener.
 * - a redis-server restart mid-run: a node of the run's own (AOF, `appendfsync always`, as a
 *   managed Redis with persistence) killed with SIGKILL and started again on its port.
 * - a Redis failover: a primary and a replica of the run's own; the replica's link is cut (a real
 *   partition, scripts/tcp-proxy.ts) until at least 10 commits were answered (150 ms at least), then
 *   the primary is killed: every commit of the cut reaches the primary alone — the worst case of asynchronous replication, made
 *   deterministic — then the replica is promoted (`REPLICAOF NO ONE`) and the clients' endpoint
 *   moves to it (test/support/tcp-forwarder.ts). Without `waitReplicas` the acknowledged commits the
 *   promoted replica lacks are counted (their repeats are that fault's, and named so); with
 *   `waitReplicas: 1` none may be lost. Claims are not waited for (a claim is not a commit): one
 *   made on the primary alone can be lost, and the id claimed again while its first owner runs it —
 *   the repeats of ids in flight from the cut to the move are counted under their own label.
 * - a Redis Cluster failover: a cluster of the run's own (3 masters, 1 replica each); one master is
 *   killed (SIGKILL) mid-run, its slots stay masterless for 500 ms, then its replica takes over
 *   (`CLUSTER FAILOVER TAKEOVER`) and the killed node rejoins as the heir's replica. No lag is
 *   forced here: the lost commits are what asynchronous replication on loopback really loses. Only
 *   a third of the slots goes away, so the verdict "nothing acked while down" is checked on the ids
 *   of those slots.
 *
 * Each returns the run's report and the figures of the fault itself; the test asserts the verdicts.
 * What this is *not*: a chaos tool for anything but these local test backends.
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { Cluster, Redis } from "ioredis";
import type { Store } from "../../src/contract.js";
import type { MessageResult } from "../../src/decision.js";
import { StoreUnavailableError } from "../../src/errors.js";
import { localClientConfig } from "../../scripts/dynamodb-local.mjs";
import { seededRandom } from "../../scripts/storm.js";
import { startTcpProxy } from "../../scripts/tcp-proxy.js";
import { DynamoDBStore, TransactionalDynamoDBStore } from "../../entry/dynamodb.js";
import { PostgresStore, createIdempotencyTable as createPostgresTable } from "../../entry/postgres.js";
import { RedisStore, ioredisScriptClient } from "../../entry/redis.js";
import { type PostgresStopMode, startPostgres } from "../setup/postgres.js";
import { throttlePuts } from "../support/dynamodb-throttle.js";
import { type ClusterNodeInfo, type RedisNode, clusterNodes, startRedisCluster, startRedisNode } from "../support/redis-nodes.js";
import { bucketHead, bucketOf } from "../../stores/redis/buckets.js";
import { slotOf } from "../../stores/redis/pipeline.js";
import { MAX_REDIS_KEY_BYTES } from "../../stores/redis/store.js";
import { storeKey } from "../../src/store-kit/keys.js";
import { replicaLinked, replicationInfo, waitUntil } from "../support/redis-replication.js";
import { startTcpForwarder } from "../support/tcp-forwarder.js";
import { dynamodbEffect, dynamodbEffects, dynamodbLocalTable, listenedPool, postgresEffect, postgresEffects } from "./backends.js";
import { type SimulationReport, simulate } from "./simulate.js";

/** What every run of this file shares: its size, its seed, the suite's lease and visibility timeout. */
export interface FaultRunOptions {
  messages: number;
  seed: number;
  /** Transactional mode: the effect is a row / item written through `ctx.tx`, counted from the database. */
  transactional?: boolean;
}

/** One row of the new faults' own table. */
export interface FaultFigures {
  store: string;
  fault: string;
  figures: string;
}

const TIMING = { leaseMs: 1_500, visibilityMs: 1_800 } as const;
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Ids acknowledged as committed (`ran`, or `duplicate`: the store said done) and as `ran` alone. */
function ackTracker() {
  const committed = new Set<string>();
  const ran = new Set<string>();
  return {
    committed,
    ran,
    onResult: (id: string, result: MessageResult) => {
      if (!result.ack) return;
      if (result.status === "ran" || result.status === "duplicate") committed.add(id);
      if (result.status === "ran") ran.add(id);
    },
  };
}

/** How many of `ids` `store` does not hold as committed. */
async function notCommitted(store: Store, ids: ReadonlySet<string>): Promise<number> {
  const list = [...ids];
  if (list.length === 0) return 0;
  const seen = store.seenMany ? await store.seenMany(list) : await Promise.all(list.map((id) => store.seen(id)));
  return seen.filter((held) => !held).length;
}

/** What every run of this file gives `simulate`: the fault's label, the store under test, the run's seed and size, the suite's timing. */
function runOf(run: FaultRunOptions & { store: string }, faultMix: string, backend: Store) {
  return { faultMix, store: run.store, backend, random: seededRandom(run.seed), messages: run.messages, ...TIMING };
}

/** Transactional mode on DynamoDB Local, when the run asks for it: effects written to and counted from their own table. */
function dynamodbTransactional(effects: ReturnType<typeof dynamodbLocalTable> | undefined, namespace: string) {
  return effects ? { transactional: { write: dynamodbEffect(effects.table, namespace), count: () => dynamodbEffects(effects.client, effects.table, namespace) } } : {};
}

const ms = (n: number | undefined) => (n === undefined ? "-" : `${(n / 1000).toFixed(1)} s`);

// ---------------------------------------------------------------------------------------------
// Skewed consumers (DynamoDB)

/** The consumers' clock skews: +30 s, −30 s, +10 min, −10 min. */
export const CONSUMER_SKEWS_MS = [30_000, -30_000, 600_000, -600_000] as const;
const skewLabel = (skew: number) => `${skew > 0 ? "+" : "−"}${Math.abs(skew) >= 60_000 ? `${Math.abs(skew) / 60_000} min` : `${Math.abs(skew) / 1000} s`}`;

export const SKEW_FAULT = "skewed consumers: clocks +30 s, −30 s, +10 min, −10 min (+ crashes at 3 points, kills, handler failures)";

export interface SkewRun {
  report: SimulationReport;
  /** Per consumer: its skew, and DynamoDB's clock as its store estimated it at the end (bounds of service − local). */
  estimates: { skew: number; min: number; max: number }[];
}

export async function skewedConsumers(run: FaultRunOptions & { store: string }): Promise<SkewRun> {
  const table = dynamodbLocalTable("rel-skew");
  const effects = run.transactional ? dynamodbLocalTable("rel-skew-effects") : undefined;
  await Promise.all([table.ready(), effects?.ready()]);
  const namespace = `skew-${run.seed}-${Date.now().toString(36)}`;
  const clients = CONSUMER_SKEWS_MS.map(() => new DynamoDBClient(localClientConfig(table.endpoint)));
  const stores = CONSUMER_SKEWS_MS.map((skew, i) => {
    const options = { table: table.table, client: clients[i] as DynamoDBClient, namespace, now: () => Date.now() + skew };
    return run.transactional ? new TransactionalDynamoDBStore(options) : new DynamoDBStore(options);
  });
  try {
    const report = await simulate({
      ...runOf(run, SKEW_FAULT, stores[0] as Store),
      backends: stores,
      consumers: stores.length,
      handlerFailure: 0.05,
      crash: { beforeEffect: 0.03, afterEffectBeforeCommit: 0.03, afterCommitBeforeAck: 0.03 },
      kill: 0.1,
      killWithinMs: 60,
      handlerMs: [0, 50],
      ...dynamodbTransactional(effects, namespace),
    });
    const estimates = stores.map((store, i) => {
      const bounds = store.clockOffset();
      if (bounds === undefined) throw new Error(`the consumer at ${skewLabel(CONSUMER_SKEWS_MS[i] as number)} never heard from DynamoDB`);
      return { skew: CONSUMER_SKEWS_MS[i] as number, ...bounds };
    });
    return { report, estimates };
  } finally {
    for (const client of clients) client.destroy();
    table.client.destroy();
    effects?.client.destroy();
  }
}

export function skewFigures(run: SkewRun): string {
  // DynamoDB Local's clock is this machine's: the true offset of a consumer at skew s is −s.
  const errors = run.estimates.map((e) => Math.max(Math.abs(e.min + e.skew), Math.abs(e.max + e.skew)));
  const widths = run.estimates.map((e) => e.max - e.min);
  return (
    `every consumer learnt DynamoDB's clock: the estimate holds the true offset (${run.estimates.every((e) => e.min <= -e.skew && -e.skew <= e.max) ? "all 4" : "NOT all"}), ` +
    `widest ${Math.round(Math.max(...widths))} ms, farthest bound ${Math.round(Math.max(...errors))} ms from it; leases decided on that clock, never the local one`
  );
}

// ---------------------------------------------------------------------------------------------
// Throttled claims (DynamoDB)

export const THROTTLE_FAULT = "throttled claims: a tenth of the ids' first 2 claim puts refused (ProvisionedThroughputExceededException, stand-in)";

/** A tenth of the ids, the same on every run (a hash of the id, not the order of the requests). */
function chosenForThrottling(id: string): boolean {
  let hash = 2166136261;
  for (let i = 0; i < id.length; i += 1) hash = Math.imul(hash ^ id.charCodeAt(i), 16777619);
  return (hash >>> 0) % 10 === 0;
}

export interface ThrottleRun {
  report: SimulationReport;
  /** Claim puts refused. */
  refused: number;
  /** Ids that had a claim refused. */
  throttledIds: number;
  /** Batches in which a delivery failed with the throttle. */
  batchesHit: number;
  /** Deliveries of other ids in those batches that went on (ran, or were decided: duplicate / in-flight). */
  wentOnBeside: number;
  /** Deliveries of ids never throttled that failed with a store error in those batches (must be 0). */
  failedBeside: number;
}

export async function throttledClaims(run: FaultRunOptions & { store: string }): Promise<ThrottleRun> {
  const table = dynamodbLocalTable("rel-throttle");
  const effects = run.transactional ? dynamodbLocalTable("rel-throttle-effects") : undefined;
  await Promise.all([table.ready(), effects?.ready()]);
  const namespace = `throttle-${run.seed}-${Date.now().toString(36)}`;
  const client = new DynamoDBClient(localClientConfig(table.endpoint));
  const refusals = new Map<string, number>();
  const throttle = throttlePuts(client, ({ id, conditional }) => {
    if (!conditional || !chosenForThrottling(id)) return false;
    const refused = refusals.get(id) ?? 0;
    if (refused >= 2) return false;
    refusals.set(id, refused + 1);
    return true;
  });
  const options = { table: table.table, client, namespace };
  const store = run.transactional ? new TransactionalDynamoDBStore(options) : new DynamoDBStore(options);
  const byBatch = new Map<number, { id: string; result: MessageResult }[]>();
  try {
    const report = await simulate({
      ...runOf(run, THROTTLE_FAULT, store),
      onResult: (id, result, batch) => {
        const list = byBatch.get(batch) ?? [];
        list.push({ id, result });
        byBatch.set(batch, list);
      },
      ...dynamodbTransactional(effects, namespace),
    });
    let batchesHit = 0;
    let wentOnBeside = 0;
    let failedBeside = 0;
    const storeFailure = (result: MessageResult) => result.status === "failed" && result.error instanceof StoreUnavailableError;
    for (const results of byBatch.values()) {
      if (!results.some(({ result }) => storeFailure(result))) continue;
      batchesHit += 1;
      for (const { id, result } of results) {
        if (refusals.has(id)) continue;
        if (storeFailure(result)) failedBeside += 1;
        else wentOnBeside += 1;
      }
    }
    return { report, refused: throttle.refused, throttledIds: refusals.size, batchesHit, wentOnBeside, failedBeside };
  } finally {
    client.destroy();
    table.client.destroy();
    effects?.client.destroy();
  }
}

export function throttleFigures(run: ThrottleRun): string {
  return (
    `${run.refused} claim puts refused (${run.throttledIds} ids); ${run.report.storeUnavailable} deliveries failed with it, in ${run.batchesHit} batches; ` +
    `beside them ${run.wentOnBeside} deliveries went on, ${run.failedBeside} failed; every throttled id ran once after its retries`
  );
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL restarted mid-run

export const postgresRestartFault = (mode: PostgresStopMode) =>
  mode === "fast"
    ? "PostgreSQL restarted mid-run (fast shutdown: every connection terminated by the administrator command; + handler failures)"
    : "PostgreSQL crashed and restarted mid-run (SIGQUIT, recovery on start; + handler failures)";

export interface RestartRun {
  report: SimulationReport;
  /** Deliveries acknowledged as committed (`ran` / `duplicate`) whose id the store does not hold afterwards (must be 0). */
  ackedNotCommitted: number;
  /** Error events the client heard (idle connections terminated, reconnect attempts). */
  clientErrors: number;
  /** How long the backend was away: stopped, down, started again. */
  awayMs: number;
}

export async function postgresRestart(run: FaultRunOptions & { store: string; mode: PostgresStopMode }): Promise<RestartRun> {
  const server = await startPostgres({ settings: { synchronous_commit: "on" } });
  const { pool, errors } = listenedPool(server.url, 40);
  try {
    await createPostgresTable(pool);
    if (run.transactional) await pool.query("CREATE TABLE reliability_effects (message_id text NOT NULL, run text NOT NULL)");
    const namespace = `pg-restart-${run.mode}-${run.seed}`;
    const store = new PostgresStore({ pool, namespace });
    const acks = ackTracker();
    let awayFrom = 0;
    let awayMs = 0;
    const report = await simulate({
      ...runOf(run, postgresRestartFault(run.mode), store),
      handlerFailure: 0.05,
      onResult: acks.onResult,
      outage: {
        atFraction: 0.3,
        durationMs: 1_000,
        // A fast run could otherwise finish every id on the server while it shuts down, leaving no batch to refuse or to recover.
        holdDeliveries: true,
        begin: async () => {
          // Some connections idle in the pool when the server goes, as between a function's invocations: their termination is an `error` event on the pool.
          await Promise.all(Array.from({ length: 5 }, () => pool.query("SELECT pg_sleep(0.02)")));
          awayFrom = Date.now();
          await server.halt(run.mode);
        },
        end: async () => {
          await server.resume();
          awayMs = Date.now() - awayFrom;
        },
      },
      ...(run.transactional ? { transactional: { write: postgresEffect("reliability_effects", namespace), count: () => postgresEffects(pool, "reliability_effects", namespace) } } : {}),
    });
    return { report, ackedNotCommitted: await notCommitted(store, acks.committed), clientErrors: errors(), awayMs };
  } finally {
    await pool.end();
    await server.stop();
  }
}

export function restartFigures(run: RestartRun, client: string): string {
  return (
    `away ${ms(run.awayMs)}: ${run.report.storeUnavailable} deliveries refused (StoreUnavailableError, not acked), ${run.clientErrors} ${client} error events heard, no crash; ` +
    `acked but not committed: ${run.ackedNotCommitted}; first batch after the restart ran ${ms(run.report.recoveryMs)} after it`
  );
}

// ---------------------------------------------------------------------------------------------
// redis-server restarted mid-run

export const REDIS_RESTART_FAULT = "redis-server restarted mid-run (SIGKILL, AOF appendfsync always; + handler failures)";

export async function redisRestart(run: FaultRunOptions & { store: string }): Promise<RestartRun> {
  const node = await startRedisNode({ persistent: true });
  let clientErrors = 0;
  const client = new Redis({ host: "127.0.0.1", port: node.port, retryStrategy: () => 50 });
  // What every user of ioredis needs: a listener, or each failed reconnect is an unhandled error.
  client.on("error", () => {
    clientErrors += 1;
  });
  try {
    const store = new RedisStore({ client: ioredisScriptClient(client), namespace: `redis-restart-${run.seed}`, timeoutMs: 1_000 });
    const acks = ackTracker();
    let awayFrom = 0;
    let awayMs = 0;
    const report = await simulate({
      ...runOf(run, REDIS_RESTART_FAULT, store),
      handlerFailure: 0.05,
      onResult: acks.onResult,
      // Down longer than the store's timeout: the batches meanwhile fail (ioredis' offline queue would otherwise carry a shorter outage unnoticed).
      outage: {
        atFraction: 0.3,
        durationMs: 1_500,
        begin: async () => {
          awayFrom = Date.now();
          await node.kill();
        },
        end: async () => {
          await node.restart();
          awayMs = Date.now() - awayFrom;
        },
      },
    });
    return { report, ackedNotCommitted: await notCommitted(store, acks.committed), clientErrors, awayMs };
  } finally {
    client.disconnect();
    await node.stop();
  }
}

// ---------------------------------------------------------------------------------------------
// Redis failover: primary killed, its replica promoted

/**
 * The replica's link stays cut until this many commits were answered (`ran` or `commit-failed`) —
 * at least `CUT_MIN_MS`, at most `CUT_MAX_MS` — so that the fault bites however loaded the machine is.
 */
const CUT_COMMITS = 10;
const CUT_MIN_MS = 150;
const CUT_MAX_MS = 5_000;

export const redisFailoverFault = (waitReplicas: number) =>
  `Redis failover: replica link cut for ${CUT_COMMITS}+ commits, primary killed, replica promoted (${waitReplicas === 0 ? "no waitReplicas" : `waitReplicas: ${waitReplicas}`})`;

export interface FailoverRun {
  report: SimulationReport;
  /** Ids acknowledged as `ran` (committed, and with waitReplicas confirmed by a replica) before the failover. */
  acknowledgedBefore: number;
  /** Of those, the ones the promoted replica did not have: commits acknowledged, then lost. */
  lostCommits: number;
  /** Deliveries answered `commit-failed` (the commit not confirmed: acked, the effect done once). */
  commitFailed: number;
  /** Ids of batches that ran while the primary was cut off or being failed over: their claims may be lost with it. */
  inWindow: number;
}

/** The labels of a failover's repeats in the report. */
export const LOST_COMMIT = "commit acknowledged, lost in the failover";
export const LOST_CLAIM = "claim lost in the failover";

/**
 * What both failovers track: the acks, the deliveries answered commit-failed, the acknowledged
 * commits the node that took over lacks (`lost`) and the ids in flight during the fault (`inWindow`),
 * whose repeats the report explains under `LOST_COMMIT` / `LOST_CLAIM`.
 */
function failoverTally() {
  const acks = ackTracker();
  const tally = {
    acks,
    commitFailed: 0,
    acknowledgedBefore: 0,
    lost: new Set<string>(),
    inWindow: new Set<string>(),
    onResult: (id: string, result: MessageResult) => {
      acks.onResult(id, result);
      if (result.status === "commit-failed") tally.commitFailed += 1;
    },
    explainedRepeats: [
      { label: LOST_COMMIT, ids: (): ReadonlySet<string> => tally.lost },
      { label: LOST_CLAIM, ids: (): ReadonlySet<string> => tally.inWindow },
    ],
    run: (report: SimulationReport): FailoverRun => ({
      report,
      acknowledgedBefore: tally.acknowledgedBefore,
      lostCommits: tally.lost.size,
      commitFailed: tally.commitFailed,
      inWindow: tally.inWindow.size,
    }),
  };
  return tally;
}

export async function redisFailover(run: FaultRunOptions & { store: string; waitReplicas: number }): Promise<FailoverRun> {
  const nodes: RedisNode[] = [];
  const primary = await startRedisNode();
  nodes.push(primary);
  const link = await startTcpProxy({ targetPort: primary.port });
  const replica = await startRedisNode({ args: ["--replicaof", "127.0.0.1", String(link.port), "--repl-timeout", "60"] });
  nodes.push(replica);
  const front = await startTcpForwarder(primary.port);
  const client = new Redis({ host: "127.0.0.1", port: front.port, retryStrategy: () => 50 });
  client.on("error", () => {});
  const namespace = `failover-${run.waitReplicas}-${run.seed}`;
  try {
    await replicaLinked(replica.port);
    const store = new RedisStore({
      client: ioredisScriptClient(client),
      namespace,
      timeoutMs: 1_000,
      ...(run.waitReplicas > 0 ? { waitReplicas: run.waitReplicas, waitTimeoutMs: 200 } : {}),
    });
    const tally = failoverTally();
    /** Commits answered (`ran` or `commit-failed`) so far. */
    let commits = 0;
    // From the cut to the endpoint's move: a claim made on the primary then may be missing on the
    // promoted replica, so another delivery claims the id while its first owner still runs it.
    let cutAt = Number.POSITIVE_INFINITY;
    let movedAt = Number.POSITIVE_INFINITY;
    const report = await simulate({
      ...runOf(run, redisFailoverFault(run.waitReplicas), store),
      handlerMs: [5, 30],
      onResult: (id, result, _batch, startedAt) => {
        tally.onResult(id, result);
        if (result.status === "ran" || result.status === "commit-failed") commits += 1;
        if (startedAt <= movedAt && Date.now() >= cutAt) tally.inWindow.add(id);
      },
      outage: {
        atFraction: 0.2,
        durationMs: 500,
        prelude: async () => {
          cutAt = Date.now();
          link.cut();
          await waitUntil("the primary to lose its replica", async () => (await replicationInfo(primary.port)).includes("connected_slaves:0"));
          const before = commits;
          const since = Date.now();
          await sleep(CUT_MIN_MS);
          while (commits - before < CUT_COMMITS && Date.now() - since < CUT_MAX_MS) await sleep(10);
        },
        begin: () => primary.kill(),
        end: async () => {
          const promoted = new Redis({ host: "127.0.0.1", port: replica.port });
          promoted.on("error", () => {});
          try {
            await promoted.call("REPLICAOF", "NO", "ONE");
            // Every batch answered by the dead primary has answered by now (it died durationMs ago).
            const acknowledged = [...tally.acks.ran];
            tally.acknowledgedBefore = acknowledged.length;
            const held = await new RedisStore({ client: ioredisScriptClient(promoted), namespace }).seenMany(acknowledged);
            tally.lost = new Set(acknowledged.filter((_, i) => !held[i]));
            if (run.waitReplicas > 0) {
              // A new replica for the promoted primary, so that commits can be confirmed again.
              const fresh = await startRedisNode({ args: ["--replicaof", "127.0.0.1", String(replica.port)] });
              nodes.push(fresh);
              await replicaLinked(fresh.port);
            }
          } finally {
            promoted.disconnect();
          }
          front.moveTo(replica.port);
          movedAt = Date.now();
        },
      },
      explainedRepeats: tally.explainedRepeats,
    });
    return tally.run(report);
  } finally {
    client.disconnect();
    await front.close();
    await link.close();
    for (const node of nodes) await node.stop();
  }
}

export function failoverFigures(run: FailoverRun): string {
  return (
    `${run.acknowledgedBefore} commits acknowledged before the failover, ${run.lostCommits} of them lost on the promoted replica ` +
    `(their repeats: ${run.report.duplicates.byFault?.[LOST_COMMIT] ?? 0}); ${run.commitFailed} deliveries answered commit-failed; ` +
    `repeats of ids whose claim the failover lost: ${run.report.duplicates.byFault?.[LOST_CLAIM] ?? 0} (of ${run.inWindow} ids in flight from the cut to the move)`
  );
}

// ---------------------------------------------------------------------------------------------
// Redis Cluster failover: a master killed, its replica takes over

export const redisClusterFailoverFault = (waitReplicas: number) =>
  `Redis Cluster failover: 1 of 3 masters killed, its replica takes over (${waitReplicas === 0 ? "no waitReplicas" : `waitReplicas: ${waitReplicas}`})`;

/** How long the killed master's slots stay without a master before its replica takes over. */
const MASTERLESS_MS = 500;

export interface ClusterFailoverRun extends FailoverRun {
  /** Deliveries of ids in the killed master's slots acknowledged as committed by a batch that ran wholly while those slots had no master (must be 0). */
  ackedWhileMasterless: number;
  /** From the kill to the replica's takeover (ms). */
  masterlessMs: number;
}

export async function redisClusterFailover(run: FaultRunOptions & { store: string; waitReplicas: number }): Promise<ClusterFailoverRun> {
  const cluster = await startRedisCluster({ masters: 3, replicasPerMaster: 1 });
  const seeds = cluster.nodes.map((node) => ({ host: "127.0.0.1", port: node.port }));
  const client = new Cluster(seeds, { clusterRetryStrategy: () => 100 });
  client.on("error", () => {});
  const namespace = `cluster-failover-${run.waitReplicas}-${run.seed}`;
  try {
    const described = await clusterNodes(cluster.masterPorts[0] as number);
    const victim = described.find((node) => node.role === "master" && node.slots.length > 0) as ClusterNodeInfo;
    const heir = described.find((node) => node.masterId === victim.id) as ClusterNodeInfo;
    const victimNode = cluster.nodes.find((node) => node.port === victim.port) as RedisNode;
    const ranges = victim.slots.map((range) => range.split("-").map(Number) as [number, number?]);
    const inVictimSlots = (id: string) => {
      const slot = slotOf(`${bucketHead("bq:", namespace, bucketOf(id, CLUSTER_BUCKETS))}:x`);
      return ranges.some(([low, high]) => slot >= low && slot <= (high ?? low));
    };
    const store = new RedisStore({
      client: ioredisScriptClient(client),
      namespace,
      buckets: CLUSTER_BUCKETS,
      timeoutMs: 1_000,
      ...(run.waitReplicas > 0 ? { waitReplicas: run.waitReplicas, waitTimeoutMs: 200 } : {}),
    });
    const tally = failoverTally();
    let killedAt = Number.POSITIVE_INFINITY;
    let takenOverAt = Number.POSITIVE_INFINITY;
    let ackedWhileMasterless = 0;
    const report = await simulate({
      ...runOf(run, redisClusterFailoverFault(run.waitReplicas), store),
      handlerMs: [5, 30],
      onResult: (id, result, _batch, startedAt) => {
        tally.onResult(id, result);
        const now = Date.now();
        if (startedAt >= killedAt && now < takenOverAt && inVictimSlots(id) && result.ack && (result.status === "ran" || result.status === "duplicate")) ackedWhileMasterless += 1;
        if (startedAt <= takenOverAt && now >= killedAt && inVictimSlots(id)) tally.inWindow.add(id);
      },
      midRun: {
        atFraction: 0.3,
        fault: async () => {
          await victimNode.kill();
          killedAt = Date.now();
          await sleep(MASTERLESS_MS);
          // What the heir holds of the commits acknowledged before the kill, read while it is still a
          // replica: nothing can write to it until the takeover, so this is exactly what it takes over.
          // (Read after the takeover, an id whose commit was lost may already have run and committed
          // again on the heir, and would not count as lost: one such repeat went unexplained.)
          const acknowledged = [...tally.acks.ran].filter(inVictimSlots);
          tally.acknowledgedBefore = acknowledged.length;
          tally.lost = await lostOnReplica(heir.port, acknowledged, (id) => storeKey("", id, MAX_REDIS_KEY_BYTES, bucketHead(store.prefix, namespace, bucketOf(id, CLUSTER_BUCKETS))));
          const admin = new Redis({ host: "127.0.0.1", port: heir.port });
          admin.on("error", () => {});
          try {
            // TAKEOVER: no agreement of the other masters needed, as an operator (or a managed service) forces it.
            await admin.call("CLUSTER", "FAILOVER", "TAKEOVER");
            await waitUntil("the replica to take over", async () => (await clusterNodes(heir.port)).find((node) => node.port === heir.port)?.role === "master");
            takenOverAt = Date.now();
            await waitUntil("the cluster to agree", async () => (await Promise.all(seeds.filter((seed) => seed.port !== victim.port).map((seed) => clusterState(seed.port)))).every((state) => state.includes("cluster_state:ok")));
          } finally {
            admin.disconnect();
          }
          // The killed master comes back as the heir's replica (its nodes.conf tells it it was failed over), so commits can be confirmed again.
          await victimNode.restart();
          if (run.waitReplicas > 0) await replicaLinked(victimNode.port);
        },
      },
      explainedRepeats: tally.explainedRepeats,
    });
    return { ...tally.run(report), ackedWhileMasterless, masterlessMs: takenOverAt - killedAt };
  } finally {
    client.disconnect();
    await cluster.stop();
  }
}

const CLUSTER_BUCKETS = 16;

/** The ids among `ids` whose done record (`d…`, our layout) the replica on `port` lacks: a plain GET per key, after READONLY. */
async function lostOnReplica(port: number, ids: readonly string[], keyOf: (id: string) => Promise<string>): Promise<Set<string>> {
  const replica = new Redis({ host: "127.0.0.1", port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  replica.on("error", () => {});
  try {
    await replica.connect();
    await replica.call("READONLY");
    const lost = new Set<string>();
    for (const id of ids) {
      const value = await replica.get(await keyOf(id));
      if (value === null || !value.startsWith("d")) lost.add(id);
    }
    return lost;
  } finally {
    replica.disconnect();
  }
}

async function clusterState(port: number): Promise<string> {
  const admin = new Redis({ host: "127.0.0.1", port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  admin.on("error", () => {});
  try {
    await admin.connect();
    return (await admin.call("CLUSTER", "INFO")) as string;
  } finally {
    admin.disconnect();
  }
}

export function clusterFailoverFigures(run: ClusterFailoverRun): string {
  return (
    `the killed master's slots had no master for ${ms(run.masterlessMs)} (${run.report.storeUnavailable} deliveries refused, ${run.ackedWhileMasterless} acked meanwhile); ` +
    `${run.acknowledgedBefore} commits in its slots acknowledged before, ${run.lostCommits} lost on the replica that took over; ${run.commitFailed} deliveries answered commit-failed; ` +
    `repeats: ${run.report.duplicates.byFault?.[LOST_COMMIT] ?? 0} of lost commits, ${run.report.duplicates.byFault?.[LOST_CLAIM] ?? 0} of claims lost (of ${run.inWindow} ids in flight in its slots)`
  );
}

/** The rows of the second table for what is not run, and why. */
export const NOT_RUN: readonly FaultFigures[] = [
  {
    store: "PostgresStore, RedisStore, UpstashRedisStore, DurableObjectStore, InMemoryStore",
    fault: "skewed consumers",
    figures:
      "not run: windows are decided on the server's clock (PostgreSQL clock_timestamp(), Redis PX expiry on the server, the Durable Object's own Date.now(), one process clock in memory); a consumer's clock never enters a lease",
  },
  {
    store: "PostgresStore, RedisStore, UpstashRedisStore, DurableObjectStore",
    fault: "throttled claims",
    figures: "not run: a batch's claim is one statement / script / call, so it fails or succeeds whole (the store-errors mix covers that); per-id failures are DynamoDB's (one PutItem per id)",
  },
  {
    store: "UpstashRedisStore",
    fault: "restart, failover",
    figures: "not run: Upstash is a managed service (the REST bridge here stands in for its API); a redis-server restart and a failover are RedisStore's rows, what Upstash guarantees is the service's",
  },
];

/** The second table: the new faults' own figures. */
export function formatFaultTable(rows: readonly FaultFigures[]): string {
  const header = "| store | fault | figures |";
  const rule = "|:--|:--|:--|";
  return [header, rule, ...rows.map((row) => `| ${row.store} | ${row.fault} | ${row.figures} |`)].join("\n");
}
