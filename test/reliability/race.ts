/**
 * The delivery race of the reliability suite: many concurrent deliveries of ONE message id, each
 * through its own engine (as separate Lambda invocations or Worker isolates would), against one
 * store. Exactly one delivery may run the handler; every other one is parked (in-flight) or, once
 * the winner committed, suppressed as a duplicate.
 */
import type { Store } from "../../src/contract.js";
import { BatchEngine } from "../../src/engine/index.js";
import { envelopeBody } from "../support/envelopes.js";

export interface RaceOutcome {
  rounds: number;
  deliveriesPerRound: number;
  /** Handler runs per round: must be [1, 1, …]. */
  runsPerRound: number[];
  /** Deliveries acknowledged without running, over all rounds. */
  suppressed: number;
  /** Deliveries parked (not acknowledged), over all rounds. */
  parked: number;
}

export async function raceDeliveries(store: Store, rounds: number, deliveriesPerRound: number, tag: string): Promise<RaceOutcome> {
  const runsPerRound: number[] = [];
  let suppressed = 0;
  let parked = 0;
  for (let round = 0; round < rounds; round += 1) {
    const id = `race-${tag}-${round}`;
    const body = envelopeBody(id, { job: "urn:babel:reliability:race", data: {}, meta: { queue: "race", lang: "node", created_at: round } });
    let runs = 0;
    const results = await Promise.all(
      Array.from({ length: deliveriesPerRound }, async () => {
        const engine = new BatchEngine(store, async () => {
          runs += 1;
          await new Promise((resolve) => setTimeout(resolve, 2));
        });
        return (await engine.process([{ body, context: {} }], { leaseMs: 30_000 }))[0];
      }),
    );
    runsPerRound.push(runs);
    for (const result of results) {
      if (result?.status === "duplicate") suppressed += 1;
      if (result?.status === "in-flight") parked += 1;
    }
  }
  return { rounds, deliveriesPerRound, runsPerRound, suppressed, parked };
}
