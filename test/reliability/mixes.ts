/**
 * The fault mixes of the reliability suite, shared by the Node-side stores and the Durable Object
 * store in workerd, and the run sizes: 5 mixes × 2,000 = 10,000 messages per store in the full run
 * (`npm run test:reliability`), 150 per mix in `npm test`.
 */
import type { FaultRates } from "./faults.js";
import type { SimulationOptions } from "./simulate.js";
import type { KafkaSimulationOptions } from "./simulate-kafka.js";

export type Mix = Omit<SimulationOptions, "store" | "backend" | "faults" | "random" | "messages"> & { faults?: FaultRates };

export const RELIABILITY_MIXES: readonly Mix[] = [
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
  { faultMix: "killed at a random moment mid-batch", kill: 0.3, killWithinMs: 60, handlerMs: [0, 50] },
  // 650 ms before the guard answers: room for the gate on a loaded machine, so the hung handler starts.
  // Then up to 450 ms for in-flight commits, and 150 ms (a quarter of the margin) before the invocation's
  // limit: a busy machine's late timers and slow store calls fit (at 800/150 there were 37 ms, and a
  // loaded run let the limit kill 4 of 5 guarded batches).
  { faultMix: "one handler hangs past the deadline", hang: 0.15, invocationMs: 1_250, deadlineMarginMs: 600, handlerMs: [0, 20] },
];

export type KafkaMix = Omit<KafkaSimulationOptions, "store" | "backend" | "faults" | "random" | "messages"> & { faults?: FaultRates };

/** Kafka mode (simulate-kafka.ts): partitions, resumes from the first failed offset, rebalances. */
export const KAFKA_MIXES: readonly KafkaMix[] = [
  { faultMix: "kafka: handler failures (resume from the first failed offset)", handlerFailure: 0.1 },
  { faultMix: "kafka: rebalances replay whole batches", rebalance: 0.25, handlerFailure: 0.03 },
  {
    faultMix: "kafka: crashes at 3 points + handler failures + rebalances",
    handlerFailure: 0.05,
    rebalance: 0.1,
    crash: { beforeEffect: 0.03, afterEffectBeforeCommit: 0.03, afterCommitBeforeAck: 0.03 },
  },
  // Kills land within the first 25 ms, while a batch of handlers of up to 20 ms each is most likely still running: the CI size (about 15 batches) sees several.
  { faultMix: "kafka: killed at a random moment mid-batch", kill: 0.4, killWithinMs: 25, handlerMs: [0, 20] },
  {
    faultMix: "kafka: everything at once",
    handlerFailure: 0.05,
    rebalance: 0.1,
    crash: { beforeEffect: 0.02, afterEffectBeforeCommit: 0.02, afterCommitBeforeAck: 0.02 },
    faults: { error: 0.02, lostResponse: 0.02, timeout: 0.01, spike: 0.02, timeoutMs: 80, spikeMs: 40 },
  },
];

export function reliabilitySize(full: boolean): number {
  return full ? 2_000 : 150;
}
