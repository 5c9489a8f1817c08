/**
 * BENCH — the workloads of the cost section, the same for every kit and store:
 *   - "new-10": a batch of 10 first deliveries;
 *   - "dup-10": the same 10 delivered again (ApproximateReceiveCount 2) after their effects were
 *     committed — only the redelivered batch is billed;
 *   - "storm": a redelivery storm: 100 messages, each delivered 1–5 times (uniformly), about a third
 *     of them failing in the handler on their first one or two deliveries; delivery k of every
 *     message goes out in round k, shuffled, in batches of 10. Seeded, so every kit gets the very
 *     same batches in the very same order.
 * Plain data (ids, receive counts, scripted failures), so the Durable Object run can take it as JSON.
 *
 * What this is *not*: a model of any real queue's redelivery timing; it fixes the mix, not the clock.
 */
// mulberry32 (scripts/storm.ts): the storm is the same in every run and for every kit.
import { seededRandom as random } from "../scripts/storm.js";

/** One delivery of one message. */
export interface CostDelivery {
  readonly id: string;
  /** SQS ApproximateReceiveCount (1 = first delivery). */
  readonly receiveCount: number;
  /** The handler throws on this delivery (a scripted failure). */
  readonly fail: boolean;
}

export type CostWorkloadName = "new-10" | "dup-10" | "storm";

export interface CostWorkload {
  readonly name: CostWorkloadName;
  readonly label: string;
  /** Distinct messages the billed batches stand for (the "per million messages" divisor). */
  readonly messages: number;
  /** Batches run first and not billed (dup-10: the first delivery). */
  readonly prime: readonly (readonly CostDelivery[])[];
  /** The billed batches, in order. */
  readonly batches: readonly (readonly CostDelivery[])[];
  /** Effect runs the billed batches must produce, and batch item failures they must report. */
  readonly expectRuns: number;
  readonly expectFailures: number;
}


function shuffled<T>(items: T[], next: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

function chunk<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

export const STORM_MESSAGES = 100;
export const STORM_SEED = 13;

/** The three workloads, with ids from `ids(count, tag)` (unique per call, so each kit starts clean). */
export function costWorkloads(ids: (count: number, tag: string) => string[]): CostWorkload[] {
  const fresh = ids(10, "cost-new");
  const repeated = ids(10, "cost-dup");
  const first = (id: string): CostDelivery => ({ id, receiveCount: 1, fail: false });

  const next = random(STORM_SEED);
  const plan = ids(STORM_MESSAGES, "cost-storm").map((id) => {
    const deliveries = 1 + Math.floor(next() * 5);
    const failures = deliveries > 1 && next() < 0.35 ? 1 + Math.floor(next() * Math.min(2, deliveries - 1)) : 0;
    return { id, deliveries, failures };
  });
  const rounds: CostDelivery[][] = [];
  for (let k = 0; k < 5; k++) {
    const round = plan.filter((p) => p.deliveries > k).map((p) => ({ id: p.id, receiveCount: k + 1, fail: k < p.failures }));
    rounds.push(shuffled(round, next));
  }
  const stormBatches = rounds.flatMap((round) => chunk(round, 10));

  return [
    { name: "new-10", label: "10 new", messages: 10, prime: [], batches: [fresh.map(first)], expectRuns: 10, expectFailures: 0 },
    {
      name: "dup-10",
      label: "10 redelivered",
      messages: 10,
      prime: [repeated.map(first)],
      batches: [repeated.map((id) => ({ id, receiveCount: 2, fail: false }))],
      expectRuns: 0,
      expectFailures: 0,
    },
    {
      name: "storm",
      label: `redelivery storm (${STORM_MESSAGES} messages, 1–5 deliveries, some failures)`,
      messages: STORM_MESSAGES,
      prime: [],
      batches: stormBatches,
      expectRuns: STORM_MESSAGES,
      expectFailures: plan.reduce((sum, p) => sum + p.failures, 0),
    },
  ];
}

/** Deliveries in a workload's billed batches (for "per delivery" figures). */
export function deliveriesOf(workload: CostWorkload): number {
  return workload.batches.reduce((sum, batch) => sum + batch.length, 0);
}
