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
import { seededRandom } from "../scripts/storm.js";
import { type Backend, dynamodbBackend, memoryBackend, upstashBackend } from "./reliability/backends.js";
import { withFaults } from "./reliability/faults.js";
import { type SimulationOptions, type SimulationReport, formatSimulationTable, simulate } from "./reliability/simulate.js";

const FULL = process.env.RELIABILITY_FULL === "1";
/** Messages per fault mix and store: 5 mixes × 2,000 = 10,000 per store in the full run. */
const PER_MIX = FULL ? 2_000 : 150;

type Mix = Omit<SimulationOptions, "store" | "backend" | "faults" | "random" | "messages"> & {
  faults?: Parameters<typeof withFaults>[1];
};

const MIXES: Mix[] = [
  { faultMix: "handler failures", handlerFailure: 0.1 },
  {
    faultMix: "crashes at 3 points + handler failures",
    handlerFailure: 0.05,
    crash: { beforeEffect: 0.03, afterEffectBeforeCommit: 0.03, afterCommitBeforeAck: 0.03 },
  },
  { faultMix: "store errors, lost responses, timeouts, spikes", faults: { error: 0.03, lostResponse: 0.02, timeout: 0.01, spike: 0.03, timeoutMs: 80, spikeMs: 40 } },
  { faultMix: "store outage mid-run", faults: {}, outage: { atFraction: 0.3, durationMs: 1_000 } },
  {
    faultMix: "everything at once",
    handlerFailure: 0.05,
    crash: { beforeEffect: 0.02, afterEffectBeforeCommit: 0.02, afterCommitBeforeAck: 0.02 },
    faults: { error: 0.02, lostResponse: 0.02, timeout: 0.01, spike: 0.02, timeoutMs: 80, spikeMs: 40 },
  },
];

const reports: SimulationReport[] = [];

function suite(backend: () => Backend): void {
  const b = backend();
  describe(b.name, () => {
    MIXES.forEach((mix, m) => {
      it(`${mix.faultMix}: nothing lost, repeats only in the crash window`, { timeout: 600_000 }, async () => {
        const random = seededRandom(1000 + m);
        const real = await b.make(`rel-${m}-${Date.now().toString(36)}`);
        const { store, faults } = withFaults(real, mix.faults ?? {}, random);
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
        if (mix.crash?.afterEffectBeforeCommit === undefined && mix.faults === undefined) {
          expect(report.effects).toBe(report.messages);
        }
        if (mix.outage) expect(report.storeFaults.outage ?? 0).toBeGreaterThan(0);
      });
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
  console.log(`\nReliability (${FULL ? "full" : "CI size"}: ${PER_MIX} messages per mix and store)\n${table}\n`);
  mkdirSync(".tmp", { recursive: true });
  writeFileSync(`.tmp/reliability-${FULL ? "full" : "ci"}.md`, `${table}\n`);
});
