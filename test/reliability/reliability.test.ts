/**
 * The reliability suite (`npm run test:reliability` for the full size; a CI-sized run is part of
 * `npm test`): the simulated at-least-once broker of test/reliability/simulate.ts against every
 * claiming store on its real local backend — InMemoryStore, DynamoDB Local, PostgreSQL,
 * redis-server over TCP, the Redis Cluster (16 buckets), redis-server behind the Upstash REST
 * bridge — under several fault mixes, in plain mode and, where the store has it, in transactional
 * mode (effects counted from the database). Then the faults of real-faults.ts: skewed consumers and
 * throttled claims on DynamoDB, a PostgreSQL restart, a redis-server restart, a Redis failover.
 *
 * Every run must lose nothing, acknowledge nothing while the store is down, and repeat an effect
 * only in the window no store can close (crash after the effect and before the commit, or a failed
 * commit) — those repeats are counted and printed, never hidden. Transactional mode repeats none.
 *
 * At the CI size the stores run in parallel lanes (one lane per backend family), each lane's runs
 * one after the other: most of a small run is waiting for visibility timeouts and leases, not work.
 * The full size runs everything one after the other (see `lane`).
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { afterAll, describe, expect, it } from "vitest";
import { seededRandom } from "../../scripts/storm.js";
import {
  type Backend,
  STORE,
  type TransactionalBackend,
  dynamodbBackend,
  dynamodbTransactionalBackend,
  memoryBackend,
  postgresBackend,
  postgresTransactionalBackend,
  redisBackend,
  redisClusterBackend,
  upstashBackend,
} from "./backends.js";
import { InMemoryStore } from "../../src/memory-store.js";
import { aroundCalls, drawFault, sleep } from "./broker-parts.js";
import { withFaults } from "./faults.js";
import { KAFKA_MIXES, RELIABILITY_MIXES, reliabilitySize } from "./mixes.js";
import { raceDeliveries } from "./race.js";
import {
  type FaultFigures,
  LOST_COMMIT,
  NOT_RUN,
  REDIS_RESTART_FAULT,
  SKEW_FAULT,
  THROTTLE_FAULT,
  clusterFailoverFigures,
  failoverFigures,
  formatFaultTable,
  postgresRestart,
  postgresRestartFault,
  redisClusterFailover,
  redisClusterFailoverFault,
  redisFailover,
  redisFailoverFault,
  redisRestart,
  restartFigures,
  skewFigures,
  skewedConsumers,
  throttleFigures,
  throttledClaims,
} from "./real-faults.js";
import { type SimulationReport, formatSimulationTable, formatWindowTable, simulate, windowProblems } from "./simulate.js";
import { type KafkaSimulationReport, formatKafkaTable, simulateKafka } from "./simulate-kafka.js";

describe("the harness's fault draw", () => {
  it("draws from the stream, and forces the fault until it has happened once", () => {
    const stream = (values: number[]) => {
      let calls = 0;
      return { next: () => values[calls++] as number, calls: () => calls };
    };
    const high = stream([0.99, 0.99, 0.01, 0.99]);
    expect(drawFault(high.next, 0.15, 0)).toBe(true); // not drawn, but no fault yet: forced
    expect(drawFault(high.next, 0.15, 1)).toBe(false); // not drawn, one happened already
    expect(drawFault(high.next, 0.15, 3)).toBe(true); // drawn
    expect(drawFault(high.next, 0, 0)).toBe(false); // a mix without the fault never gets it
    expect(high.calls()).toBe(4); // one number per call, forced or not: the stream stays as it was
    expect(drawFault(stream([0.5]).next, undefined, 0)).toBe(false);
  });
});

describe("the harness's invocation limit", () => {
  // Invocations of 100 ms with no deadline guard, handlers of 0–400 ms: a batch with a slow handler is
  // killed at the limit. A killed process runs nothing more: effects of the abandoned batch that would
  // land after the limit (and, once their lease of 200 ms ended, again in the redelivery) must not
  // happen. A live run ends by the limit, 100 ms inside its lease, so none outlives it.
  it("kills the invocation at its limit: no effect of the abandoned batch lands after it", async () => {
    const report = await simulate({
      faultMix: "killed at the invocation's limit",
      store: "InMemoryStore",
      backend: new InMemoryStore(),
      random: seededRandom(91),
      messages: 40,
      leaseMs: 200,
      visibilityMs: 20,
      handlerMs: [0, 400],
      invocationMs: 100,
      deadlineGuard: false,
    });
    expect(report.crashes).toBeGreaterThan(0);
    expect(report.lost).toBe(0);
    expect(report.duplicates.leaseOutlived).toBeUndefined();
    expect(report.duplicates.unexplained).toBe(0);
    expect(report.effects).toBe(report.messages + report.duplicates.crashWindow);
  });
});

describe("the harness's hang verdict", () => {
  // The hang mix's guard promise, "only the hung record goes back", needs the store and the process on
  // time: a claim step that answers at the answer point leaves the handlers no time, and the engine
  // rightly returns the unfinished part. Such hangs are counted apart (lateHangs), and the verdict is
  // kept for the others: a batch with no guard at all, its store on time, still fails it. (The mix's
  // times, scaled down: invocations of 300 ms answered 150 ms before their end.)
  const invocationMs = 300;
  const deadlineMarginMs = 150;
  const mix = { faultMix: "hang", hang: 0.5, invocationMs, deadlineMarginMs, handlerMs: [0, 20], messages: 40, consumers: 2, leaseMs: 400, visibilityMs: 20 } as const;

  it("counts the hangs whose claim step answered too late apart, and judges the rest", async () => {
    const slowClaims = aroundCalls(new InMemoryStore(), (method, _args, call) => (method === "claim" || method === "claimMany" ? sleep(invocationMs - deadlineMarginMs - 5).then(call) : call()));
    const late = await simulate({ ...mix, store: "InMemoryStore", backend: slowClaims, random: seededRandom(93) });
    expect(late.lost).toBe(0);
    expect(late.window.hangs).toBeGreaterThan(0);
    expect(late.window.lateHangs).toBe(late.window.hangs);
    expect(late.window.returnedByLateHangs).toBe(late.window.returnedByHang);
    expect(windowProblems(late)).toEqual([]);
    expect(formatWindowTable([late])).toContain(`(${late.window.hangs} with the store or the process late: `);

    // Commits that land just after the flush allowance (the engine flushes until 37.5 ms before the
    // deadline): the batch answers with them in flight. Leases outlast the commits, so nothing repeats.
    const slowCommits = aroundCalls(new InMemoryStore(), (method, _args, call) => (method === "remember" || method === "rememberMany" ? sleep(invocationMs - 30).then(call) : call()));
    const lateCommits = await simulate({ ...mix, leaseMs: 3_000, store: "InMemoryStore", backend: slowCommits, random: seededRandom(94) });
    expect(lateCommits.lost).toBe(0);
    expect(lateCommits.window.hangs).toBeGreaterThan(0);
    // (A hung batch with nothing else to run commits nothing: that one is on time.)
    expect(lateCommits.window.lateHangs).toBeGreaterThan(0);
    expect(windowProblems(lateCommits)).toEqual([]);

    const unguarded = await simulate({ ...mix, deadlineGuard: false, store: "InMemoryStore", backend: new InMemoryStore(), random: seededRandom(93) });
    expect(unguarded.lost).toBe(0);
    expect(unguarded.window.hangs).toBeGreaterThan(0);
    // (A loaded machine may stall the process through one of them: that one is late, the rest judged.)
    expect(unguarded.window.lateHangs).toBeLessThan(unguarded.window.hangs);
    expect(windowProblems(unguarded)).toEqual([expect.stringMatching(/^hangs returned \d+ records for \d+ hangs \(besides \d+ with the store or the process late\)$/)]);
  });
});

describe("the harness's lease-outlived count", () => {
  // Handlers that run 100–120 ms under 60 ms leases: copies of an id taken meanwhile claim it again
  // once the lease ended, and run it again. Those repeats are the lease's documented limit, counted
  // as `leaseOutlived`, not as unexplained; with leases longer than the runs there are none.
  const run = (leaseMs: number) =>
    simulate({ faultMix: "runs longer than their lease", store: "InMemoryStore", backend: new InMemoryStore(), random: seededRandom(77), messages: 30, leaseMs, visibilityMs: 20, handlerMs: [100, 120] });

  it("counts the repeats of runs that outlived their lease, and explains nothing else that way", async () => {
    const short = await run(60);
    expect(short.lost).toBe(0);
    expect(short.duplicates.leaseOutlived ?? 0).toBeGreaterThan(0);
    expect(short.duplicates.unexplained).toBe(0);
    expect(short.effects).toBe(short.messages + (short.duplicates.leaseOutlived ?? 0));
    expect(formatSimulationTable([short])).toContain(`${short.duplicates.leaseOutlived} lease outlived by a stalled run`);
    const long = await run(5_000);
    expect(long.effects).toBe(long.messages);
    expect(long.duplicates.leaseOutlived).toBeUndefined();
  });
});

const FULL = process.env.RELIABILITY_FULL === "1";
const PER_MIX = reliabilitySize(FULL);
const MIXES = RELIABILITY_MIXES;
const TIMEOUT = { timeout: FULL ? 1_800_000 : 600_000 };

const reports: SimulationReport[] = [];
const kafkaReports: KafkaSimulationReport[] = [];
const faultRows: FaultFigures[] = [];

/** The verdicts every run shares. */
function expectSound(report: SimulationReport): void {
  expect(report.lost, "lost ids").toBe(0);
  expect(report.duplicates.unexplained, `repeats outside the crash window: ${JSON.stringify(report.duplicates.unexplainedIds)}`).toBe(0);
  expect(report.ackedDuringOutage, "acks while the store was down").toBe(0);
  expect(windowProblems(report)).toEqual([]);
}

/** Every mix of mixes.ts on one store in plain mode, Kafka mode included, and the delivery race. */
function suite(backend: () => Backend): void {
  const b = backend();
  describe(b.name, () => {
    MIXES.forEach((mix, m) => {
      it(`${mix.faultMix}: nothing lost, repeats only in the crash window`, TIMEOUT, async () => {
        const random = seededRandom(1000 + m);
        const real = await b.make(`rel-${m}-${Date.now().toString(36)}`);
        const { store, faults } = withFaults(real, mix.faults ?? {}, seededRandom(7_000 + m)); // an independent stream for store faults
        const report = await simulate({
          ...mix,
          store: b.name,
          backend: store,
          faults,
          random,
          messages: PER_MIX,
          leaseMs: 1_500,
          visibilityMs: 1_800,
        });
        reports.push(report);
        expectSound(report);
        if (mix.crash?.afterEffectBeforeCommit === undefined && mix.faults === undefined && mix.kill === undefined) {
          expect(report.effects).toBe(report.messages);
        }
        if (mix.outage) expect(report.storeFaults.outage ?? 0).toBeGreaterThan(0);
        if (mix.faults?.error) expect(Object.values(report.storeFaults).reduce((a, b) => a + b, 0), "faults injected").toBeGreaterThan(0);
        if (mix.kill) expect(report.window.kills, "kills happened").toBeGreaterThan(0);
        if (mix.hang) expect(report.window.hangs, "hangs happened").toBeGreaterThan(0);
      });
    });
    const hang = MIXES.find((mix) => mix.hang !== undefined);
    if (hang !== undefined) {
      it("one handler hangs past the deadline, WITHOUT the deadline guard (for comparison): Lambda kills the batch", TIMEOUT, async () => {
        const store = await b.make(`noguard-${Date.now().toString(36)}`);
        const { faults: _none, ...hangMix } = hang;
        const report = await simulate({ ...hangMix, hang: 0.3, faultMix: `${hang.faultMix} (no deadline guard)`, deadlineGuard: false, store: b.name, backend: store, random: seededRandom(4000), messages: PER_MIX, leaseMs: 1_500, visibilityMs: 1_800 });
        reports.push(report);
        expect(report.lost, "lost ids").toBe(0);
        expect(report.duplicates.unexplained).toBe(0);
        // Group commit alone already keeps the finished effects; the whole batch returns to the queue.
        expect(report.window.hangs, "hangs happened").toBeGreaterThan(0);
        expect(report.window.hangRepeats).toBe(0);
        expect(report.window.returnedByHang).toBeGreaterThan(report.window.hangs * 3);
      });
    }
    if (b.partitioned) {
      const partitioned = b.partitioned.bind(b);
      it("network partition mid-run (connections reset for 1 s): nothing acked while cut, nothing lost after", TIMEOUT, async () => {
        const random = seededRandom(3000);
        const target = await partitioned(`part-${Date.now().toString(36)}`);
        try {
          const report = await simulate({
            faultMix: "network partition mid-run (real)",
            handlerFailure: 0.05,
            store: b.name,
            backend: target.store,
            random,
            messages: PER_MIX,
            leaseMs: 1_500,
            visibilityMs: 1_800,
            outage: { atFraction: 0.3, durationMs: 1_000, begin: target.cut, end: target.heal },
          });
          reports.push(report);
          expectSound(report);
          expect(report.storeUnavailable, "the cut was felt").toBeGreaterThan(0);
        } finally {
          await target.close();
        }
      });
    }
    describe("Kafka mode", () => {
      KAFKA_MIXES.forEach((mix, m) => {
        it(`${mix.faultMix}: nothing lost, partitions in order, repeats only in the crash window`, TIMEOUT, async () => {
          const real = await b.make(`kafka-${m}-${Date.now().toString(36)}`);
          const { store, faults } = withFaults(real, mix.faults ?? {}, seededRandom(9_000 + m));
          const report = await simulateKafka({ ...mix, store: b.name, backend: store, faults, random: seededRandom(8_000 + m), messages: PER_MIX });
          reports.push(report);
          kafkaReports.push(report);
          expect(report.lost, "lost ids").toBe(0);
          expect(report.duplicates.unexplained, "repeats outside the crash window").toBe(0);
          expect(report.kafka.outOfOrder, "first effects out of offset order").toBe(0);
          expect(report.kafka.badResponses, "responses that are not a per-partition suffix").toBe(0);
          // Without crashes, kills or store faults, the only repeat left is a commit that a loaded machine's store landed after the lease.
          if (mix.crash === undefined && mix.kill === undefined && mix.faults === undefined) expect(report.effects - report.kafka.lateCommitRepeats, "no other repeat").toBe(report.messages);
          if (mix.rebalance) expect(report.kafka.rebalances, "rebalances happened").toBeGreaterThan(0);
          if (mix.handlerFailure) expect(report.kafka.resumes, "resumes from a failed offset happened").toBeGreaterThan(0);
          if (mix.kill) expect(report.window.kills, "kills happened").toBeGreaterThan(0);
          if (mix.faults?.error) expect(Object.values(report.storeFaults).reduce((a, b) => a + b, 0), "faults injected").toBeGreaterThan(0);
          expect(windowProblems(report)).toEqual([]);
        });
      });
    });
    it(`races: ${FULL ? 50 : 10} rounds of ${FULL ? 100 : 75} concurrent deliveries of one id run it once`, TIMEOUT, async () => {
      const store = await b.make(`race-${Date.now().toString(36)}`);
      const outcome = await raceDeliveries(store, FULL ? 50 : 10, FULL ? 100 : 75, "node");
      expect(outcome.runsPerRound.every((runs) => runs === 1), JSON.stringify(outcome.runsPerRound)).toBe(true);
      expect(outcome.suppressed + outcome.parked).toBe(outcome.rounds * (outcome.deliveriesPerRound - 1));
    });
    afterAll(async () => b.close?.());
  });
}

/**
 * Every mix of mixes.ts on one store in transactional mode: the handler's effect is a row / item
 * written through `ctx.tx` and committed with the id, counted from the database — exactly once per
 * id whatever the mix (a crash after the effect rolls it back with the commit).
 */
function transactionalSuite(backend: () => TransactionalBackend): void {
  const b = backend();
  describe(b.name, () => {
    MIXES.forEach((mix, m) => {
      it(`${mix.faultMix}: nothing lost, every effect exactly once (counted in the database)`, TIMEOUT, async () => {
        const namespace = `rel-tx-${m}-${Date.now().toString(36)}`;
        const real = await b.make(namespace);
        const { store, faults } = withFaults(real, mix.faults ?? {}, seededRandom(7_500 + m));
        const report = await simulate({
          ...mix,
          store: b.name,
          backend: store,
          faults,
          random: seededRandom(1_500 + m),
          messages: PER_MIX,
          leaseMs: 1_500,
          visibilityMs: 1_800,
          transactional: { write: b.write(namespace), count: () => b.count(namespace) },
        });
        reports.push(report);
        expectSound(report);
        expect(report.effects, "effects counted in the database").toBe(report.messages);
        if (mix.outage) expect(report.storeFaults.outage ?? 0).toBeGreaterThan(0);
        if (mix.kill) expect(report.window.kills, "kills happened").toBeGreaterThan(0);
        if (mix.hang) expect(report.window.hangs, "hangs happened").toBeGreaterThan(0);
      });
    });
    afterAll(async () => b.close?.());
  });
}

const { dynamodb: DYNAMODB, dynamodbTx: DYNAMODB_TX, postgres: POSTGRES, postgresTx: POSTGRES_TX, redis: REDIS, redisCluster: REDIS_CLUSTER } = STORE;

/** The faults of issue 19 on DynamoDB: skewed consumers and throttled claims, in both modes. */
function dynamodbFaults(): void {
  for (const [store, transactional] of [
    [DYNAMODB, false],
    [DYNAMODB_TX, true],
  ] as const) {
    it(`${store}: ${SKEW_FAULT}: no live lease taken, nothing lost`, TIMEOUT, async () => {
      const run = await skewedConsumers({ store, transactional, messages: PER_MIX, seed: 11_000 });
      reports.push(run.report);
      faultRows.push({ store, fault: "skewed consumers", figures: skewFigures(run) });
      expectSound(run.report);
      expect(run.report.crashes + run.report.window.kills, "crashes and kills left leases to take over").toBeGreaterThan(0);
      if (transactional) expect(run.report.effects, "effects counted in the database").toBe(run.report.messages);
      // The true offset (DynamoDB Local's clock is this machine's) lies within every consumer's estimate.
      for (const estimate of run.estimates) {
        expect(estimate.min, `skew ${estimate.skew}`).toBeLessThanOrEqual(-estimate.skew);
        expect(estimate.max, `skew ${estimate.skew}`).toBeGreaterThanOrEqual(-estimate.skew);
      }
    });

    it(`${store}: ${THROTTLE_FAULT}: the rest of each batch goes on, the throttled ids are retried, each runs once`, TIMEOUT, async () => {
      const run = await throttledClaims({ store, transactional, messages: PER_MIX, seed: 12_000 });
      reports.push(run.report);
      faultRows.push({ store, fault: "throttled claims (stand-in)", figures: throttleFigures(run) });
      expectSound(run.report);
      expect(run.refused, "claims throttled").toBeGreaterThan(0);
      expect(run.report.storeUnavailable, "deliveries failed by the throttle").toBeGreaterThan(0);
      expect(run.failedBeside, "deliveries of other ids failed with the throttle").toBe(0);
      expect(run.wentOnBeside, "deliveries beside a throttled one went on").toBeGreaterThan(0);
      expect(run.report.effects, "every effect exactly once").toBe(run.report.messages);
    });
  }
}

/** The faults of issue 19 on PostgreSQL: a restart (fast shutdown) and a crash, in both modes. */
function postgresFaults(): void {
  for (const [store, transactional, mode] of [
    [POSTGRES, false, "fast"],
    [POSTGRES, false, "immediate"],
    [POSTGRES_TX, true, "immediate"],
  ] as const) {
    it(`${store}: ${postgresRestartFault(mode)}: no crash, nothing acked while down or uncommitted, recovery after`, TIMEOUT, async () => {
      const run = await postgresRestart({ store, transactional, mode, messages: PER_MIX, seed: 13_000 });
      reports.push(run.report);
      faultRows.push({ store, fault: mode === "fast" ? "PostgreSQL restart (fast shutdown)" : "PostgreSQL crash and restart", figures: restartFigures(run, "pool") });
      expectSound(run.report);
      // Felt: a delivery refused while the server was away, or a pooled connection's error heard (on a
      // loaded machine every consumer can be between batches for the whole second it is away).
      expect(run.report.storeUnavailable + run.clientErrors, "the restart was felt").toBeGreaterThan(0);
      expect(run.ackedNotCommitted, "acked as committed, not in the store").toBe(0);
      expect(run.report.recoveryMs, "a batch ran after the restart").toBeDefined();
      // The fault that once crashed `npm run bench`: idle pooled connections terminated by the administrator command, heard by the pool's listener.
      if (mode === "fast") expect(run.clientErrors, "idle connections' errors heard").toBeGreaterThan(0);
      if (transactional) expect(run.report.effects, "effects counted in the database").toBe(run.report.messages);
    });
  }
}

/** The faults of issue 19 on Redis: a restart, a failover without and with waitReplicas. */
function redisFaults(): void {
  it(`${REDIS}: ${REDIS_RESTART_FAULT}: no crash, nothing acked while down or uncommitted, recovery after`, TIMEOUT, async () => {
    const run = await redisRestart({ store: REDIS, messages: PER_MIX, seed: 14_000 });
    reports.push(run.report);
    faultRows.push({ store: REDIS, fault: "redis-server restart", figures: restartFigures(run, "client") });
    expectSound(run.report);
    expect(run.report.storeUnavailable, "the restart was felt").toBeGreaterThan(0);
    expect(run.ackedNotCommitted, "acked as committed, not in the store").toBe(0);
    expect(run.report.recoveryMs, "a batch ran after the restart").toBeDefined();
  });

  for (const waitReplicas of [0, 1]) {
    it(`${REDIS}: ${redisFailoverFault(waitReplicas)}: ${waitReplicas === 0 ? "acknowledged commits lost, counted" : "no acknowledged commit lost"}`, TIMEOUT, async () => {
      const run = await redisFailover({ store: REDIS, waitReplicas, messages: PER_MIX, seed: 15_000 });
      reports.push(run.report);
      faultRows.push({ store: REDIS, fault: redisFailoverFault(waitReplicas), figures: failoverFigures(run) });
      expectSound(run.report);
      expect(run.acknowledgedBefore, "commits acknowledged before the failover").toBeGreaterThan(0);
      if (waitReplicas === 0) {
        // The commits of the cut reached the primary alone: asynchronous replication loses them.
        expect(run.lostCommits, "acknowledged commits lost").toBeGreaterThan(0);
      } else {
        expect(run.lostCommits, "acknowledged commits lost").toBe(0);
        expect(run.report.duplicates.byFault?.[LOST_COMMIT] ?? 0).toBe(0);
        expect(run.commitFailed, "commits the cut replica could not confirm").toBeGreaterThan(0);
      }
    });
  }
}

/** The faults of issue 19 on the Redis Cluster: a master killed and failed over, without and with waitReplicas. */
function redisClusterFaults(): void {
  for (const waitReplicas of [0, 1]) {
    it(`${REDIS_CLUSTER}: ${redisClusterFailoverFault(waitReplicas)}: nothing acked while its slots had no master${waitReplicas === 0 ? "" : ", no acknowledged commit lost"}`, TIMEOUT, async () => {
      const run = await redisClusterFailover({ store: REDIS_CLUSTER, waitReplicas, messages: PER_MIX, seed: 16_000 });
      reports.push(run.report);
      faultRows.push({ store: REDIS_CLUSTER, fault: redisClusterFailoverFault(waitReplicas), figures: clusterFailoverFigures(run) });
      expectSound(run.report);
      expect(run.report.storeUnavailable, "the kill was felt").toBeGreaterThan(0);
      expect(run.ackedWhileMasterless, "acked while the slots had no master").toBe(0);
      if (waitReplicas > 0) expect(run.lostCommits, "acknowledged commits lost").toBe(0);
    });
  }
}

/**
 * A lane: its runs go one after the other, while the lanes run side by side (most of a run is
 * waiting for visibility timeouts and leases, not work; a run's consumers and batch rate do not grow
 * with its message count, only its length does). The lanes follow the backends, so that each backend
 * serves about one run at a time. `RELIABILITY_LANES=serial` runs the lanes one after the other too,
 * for a machine too busy to keep five lanes' event loop free (a saturated event loop would stretch
 * batches past their leases — a fault of the test bench, not of a store).
 */
const LANES_SIDE_BY_SIDE = process.env.RELIABILITY_LANES !== "serial";

function lane(name: string, body: () => void): void {
  describe(name, { concurrent: LANES_SIDE_BY_SIDE }, () => {
    describe("one run at a time", { sequential: true }, body);
  });
}

describe("reliability: simulated at-least-once broker, and the faults of issue 19 on real backends", () => {
  lane("DynamoDB", () => {
    suite(dynamodbBackend);
    transactionalSuite(dynamodbTransactionalBackend);
    dynamodbFaults();
  });
  lane("PostgreSQL", () => {
    suite(postgresBackend);
    transactionalSuite(postgresTransactionalBackend);
    postgresFaults();
  });
  lane("Redis", () => {
    suite(redisBackend);
    redisFaults();
  });
  lane("Redis Cluster", () => {
    suite(redisClusterBackend);
    redisClusterFaults();
  });
  lane("memory, Upstash", () => {
    suite(memoryBackend);
    suite(upstashBackend);
  });
});

/** The reports grouped by store in the order of `STORE` (runs of parallel lanes interleave), each store's in the order they ran. */
function byStore<T extends { store: string }>(list: readonly T[]): T[] {
  const order = [...new Set([...Object.values(STORE), ...list.map((r) => r.store)])];
  return order.flatMap((store) => list.filter((r) => r.store === store));
}

afterAll(() => {
  const table = formatSimulationTable(byStore(reports));
  const window = formatWindowTable(byStore(reports));
  const kafka = kafkaReports.length === 0 ? "" : `\n\nKafka mode\n${formatKafkaTable(byStore(kafkaReports))}`;
  const faults = formatFaultTable([...byStore(faultRows), ...NOT_RUN]);
  console.log(
    `\nReliability (${FULL ? "full" : "CI size"}: ${PER_MIX} messages per mix and store)\n${table}\n\nThe window faults\n${window}${kafka}\n\nThe faults of issue 19: their own figures\n${faults}\n`,
  );
  mkdirSync(".tmp", { recursive: true });
  writeFileSync(`.tmp/reliability-${FULL ? "full" : "ci"}.md`, `${table}\n\n${window}${kafka}\n\n${faults}\n`);
});
