/**
 * The reliability suite's simulated at-least-once broker (test/reliability/simulate.ts) against
 * DurableObjectStore + IdempotencyObject, inside workerd. Same fault mixes and verdicts as the
 * Node-side stores in test/reliability/reliability.test.ts; the size follows RELIABILITY_FULL through
 * vitest's provide/inject.
 */
import { env } from "cloudflare:workers";
import { afterAll, describe, expect, inject, it } from "vitest";
import { DurableObjectStore } from "../../stores/durable-object/store.js";
import { seededRandom } from "../../scripts/storm.js";
import { withFaults } from "../reliability/faults.js";
import { raceDeliveries } from "../reliability/race.js";
import { RELIABILITY_MIXES, reliabilitySize } from "../reliability/mixes.js";
import { type SimulationReport, formatSimulationTable, formatWindowTable, simulate, windowProblems } from "../reliability/simulate.js";

declare module "vitest" {
  // biome-ignore lint/suspicious/noExportsInTest: a type augmentation of vitest, not an export of this file.
  export interface ProvidedContext {
    reliabilityFull: boolean;
  }
}

const full = inject("reliabilityFull") === true;
const perMix = reliabilitySize(full);
const reports: SimulationReport[] = [];
const NAME = "DurableObjectStore (4 shards, workerd)";

describe(`reliability: ${NAME}`, () => {
  RELIABILITY_MIXES.forEach((mix, m) => {
    it(`${mix.faultMix}: nothing lost, repeats only in the crash window`, { timeout: 600_000 }, async () => {
      const random = seededRandom(2000 + m);
      const real = new DurableObjectStore(env.IDEMPOTENCY, { namespace: `rel-${m}-${Date.now().toString(36)}`, shards: 4, objectName: "reliability" });
      const { store, faults } = withFaults(real, mix.faults ?? {}, seededRandom(7_000 + m)); // an independent stream for store faults
      const report = await simulate({ ...mix, store: NAME, backend: store, faults, random, messages: perMix, leaseMs: 1_500, visibilityMs: 1_800 });
      reports.push(report);
      expect(report.lost, "lost ids").toBe(0);
      expect(report.duplicates.unexplained, `repeats outside the crash window: ${JSON.stringify(report.duplicates.unexplainedIds)}`).toBe(0);
      expect(report.ackedDuringOutage, "acks while the store was down").toBe(0);
      if (mix.outage) expect(report.storeFaults.outage ?? 0).toBeGreaterThan(0);
      if (mix.faults?.error) expect(Object.values(report.storeFaults).reduce((a, b) => a + b, 0), "faults injected").toBeGreaterThan(0);
      if (mix.kill) expect(report.window.kills, "kills happened").toBeGreaterThan(0);
      if (mix.hang) expect(report.window.hangs, "hangs happened").toBeGreaterThan(0);
      expect(windowProblems(report)).toEqual([]);
    });
  });

  it(`races: ${full ? 50 : 10} rounds of ${full ? 100 : 75} concurrent deliveries of one id run it once`, { timeout: 600_000 }, async () => {
    const store = new DurableObjectStore(env.IDEMPOTENCY, { namespace: `race-${Date.now().toString(36)}`, shards: 4, objectName: "reliability" });
    const outcome = await raceDeliveries(store, full ? 50 : 10, full ? 100 : 75, "workerd");
    expect(outcome.runsPerRound.every((runs) => runs === 1), JSON.stringify(outcome.runsPerRound)).toBe(true);
    expect(outcome.suppressed + outcome.parked).toBe(outcome.rounds * (outcome.deliveriesPerRound - 1));
  });
});

afterAll(() => {
  console.log(`\nReliability (${full ? "full" : "CI size"}: ${perMix} messages per mix)\n${formatSimulationTable(reports)}\n\nThe window faults\n${formatWindowTable(reports)}\n`);
});
