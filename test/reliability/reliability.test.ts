/**
 * The reliability suite (`npm run test:reliability` for the full size; a CI-sized run is part of
 * `npm test`): the simulated at-least-once broker of test/reliability/simulate.ts against every
 * claiming store on its real local backend, under several fault mixes. Every run must lose
 * nothing, acknowledge nothing while the store is down, and repeat an effect only in the window
 * no store can close (crash after the effect and before the commit, or a failed commit) — those
 * repeats are counted and printed, never hidden.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { afterAll, describe, expect, it } from "vitest";
import { seededRandom } from "../../scripts/storm.js";
import { type Backend, dynamodbBackend, memoryBackend, upstashBackend } from "./backends.js";
import { withFaults } from "./faults.js";
import { raceDeliveries } from "./race.js";
import { KAFKA_MIXES, RELIABILITY_MIXES, reliabilitySize } from "./mixes.js";
import { type SimulationReport, formatSimulationTable, formatWindowTable, simulate, windowProblems } from "./simulate.js";
import { type KafkaSimulationReport, formatKafkaTable, simulateKafka } from "./simulate-kafka.js";

const FULL = process.env.RELIABILITY_FULL === "1";
const PER_MIX = reliabilitySize(FULL);
const MIXES = RELIABILITY_MIXES;

const reports: SimulationReport[] = [];
const kafkaReports: KafkaSimulationReport[] = [];

function suite(backend: () => Backend): void {
  const b = backend();
  describe(b.name, () => {
    MIXES.forEach((mix, m) => {
      it(`${mix.faultMix}: nothing lost, repeats only in the crash window`, { timeout: 600_000 }, async () => {
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
        expect(report.lost, "lost ids").toBe(0);
        expect(report.duplicates.unexplained, "repeats outside the crash window").toBe(0);
        expect(report.ackedDuringOutage, "acks while the store was down").toBe(0);
        if (mix.crash?.afterEffectBeforeCommit === undefined && mix.faults === undefined && mix.kill === undefined) {
          expect(report.effects).toBe(report.messages);
        }
        if (mix.outage) expect(report.storeFaults.outage ?? 0).toBeGreaterThan(0);
        if (mix.faults?.error) expect(Object.values(report.storeFaults).reduce((a, b) => a + b, 0), "faults injected").toBeGreaterThan(0);
        if (mix.kill) expect(report.window.kills, "kills happened").toBeGreaterThan(0);
        if (mix.hang) expect(report.window.hangs, "hangs happened").toBeGreaterThan(0);
        expect(windowProblems(report)).toEqual([]);
      });
    });
    const hang = MIXES.find((mix) => mix.hang !== undefined);
    if (hang !== undefined) {
      it("one handler hangs past the deadline, WITHOUT the deadline guard (for comparison): Lambda kills the batch", { timeout: 600_000 }, async () => {
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
      it("network partition mid-run (connections reset for 1 s): nothing acked while cut, nothing lost after", { timeout: 600_000 }, async () => {
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
          expect(report.lost, "lost ids").toBe(0);
          expect(report.duplicates.unexplained, "repeats outside the crash window").toBe(0);
          expect(report.ackedDuringOutage, "acks while the network was cut").toBe(0);
          expect(report.storeUnavailable, "the cut was felt").toBeGreaterThan(0);
        } finally {
          await target.close();
        }
      });
    }
    describe("Kafka mode", () => {
      KAFKA_MIXES.forEach((mix, m) => {
        it(`${mix.faultMix}: nothing lost, partitions in order, repeats only in the crash window`, { timeout: 600_000 }, async () => {
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
    it(`races: ${FULL ? 50 : 10} rounds of ${FULL ? 100 : 75} concurrent deliveries of one id run it once`, { timeout: 600_000 }, async () => {
      const store = await b.make(`race-${Date.now().toString(36)}`);
      const outcome = await raceDeliveries(store, FULL ? 50 : 10, FULL ? 100 : 75, "node");
      expect(outcome.runsPerRound.every((runs) => runs === 1), JSON.stringify(outcome.runsPerRound)).toBe(true);
      expect(outcome.suppressed + outcome.parked).toBe(outcome.rounds * (outcome.deliveriesPerRound - 1));
    });
    afterAll(async () => b.close?.());
  });
}

describe("reliability: simulated at-least-once broker", () => {
  suite(memoryBackend);
  suite(dynamodbBackend);
  suite(upstashBackend);
});

afterAll(() => {
  const table = formatSimulationTable(reports);
  const window = formatWindowTable(reports);
  const kafka = kafkaReports.length === 0 ? "" : `\n\nKafka mode\n${formatKafkaTable(kafkaReports)}`;
  console.log(`\nReliability (${FULL ? "full" : "CI size"}: ${PER_MIX} messages per mix and store)\n${table}\n\nThe window faults\n${window}${kafka}\n`);
  mkdirSync(".tmp", { recursive: true });
  writeFileSync(`.tmp/reliability-${FULL ? "full" : "ci"}.md`, `${table}\n\n${window}${kafka}\n`);
});
