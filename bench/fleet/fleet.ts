/**
 * BENCH — a fleet of consumers on one store, ours and Powertools side by side (issue "Scale out").
 *
 * For each backend (DynamoDB Local, redis-server over TCP, PostgreSQL — each behind the bench's delay
 * proxy) and each fleet size P, P consumers (worker threads, consumer.ts: one "Lambda instance" each,
 * its own client and sockets) drain one shared simulated SQS queue (queue.ts) in batches of 10:
 * `messages` messages, a share of them delivered twice (often to two consumers at once), unacknowledged
 * deliveries coming back after a short visibility timeout. Ours and Powertools get the same queue
 * (same seed) one after the other. Recorded per run: messages per second (all messages acknowledged,
 * over the wall time from the first batch to the drained queue), p50 / p99 of a batch's handler call,
 * store requests per message, deliveries not acknowledged (parks and retries), and the outcome checks —
 * every message's effect ran exactly once across the fleet (duplicate effects and lost messages
 * counted, both must be 0), and nothing threw out of a kit (Powertools' `FullBatchFailureError`, its
 * documented answer when every record of a batch failed, is counted apart: `wholeBatchFailures`).
 *
 * This machine has 2 cores and runs the backends too, so absolute rates are this machine's; the
 * report gives ratios (ours / Powertools at the same P) and where a backend stops scaling.
 * Powertools has no PostgreSQL persistence layer: that row is ours alone.
 *
 * What this is *not*: a load test of AWS. The delay proxy gives every request a network round trip;
 * nothing else of a real region is modelled.
 */
import { Worker } from "node:worker_threads";
import pg from "pg";
import { createIdempotencyTable as createPostgresTable } from "../../entry/postgres.js";
import { seededRandom } from "../../scripts/storm.js";
import { startTcpProxy } from "../../scripts/tcp-proxy.js";
import { startPostgres } from "../../test/setup/postgres.js";
import { type Backends, OUR_TABLE, POWERTOOLS_TABLE } from "../backends.js";
import { quantile } from "../stats.js";
import type { FleetBackend, FleetKit, FromConsumer, ToConsumer } from "./protocol.js";
import { FleetQueue, type QueuedDelivery } from "./queue.js";

export interface FleetFigure {
  readonly backend: FleetBackend;
  readonly kit: FleetKit;
  readonly consumers: number;
  readonly messages: number;
  readonly seconds: number;
  readonly messagesPerSecond: number;
  readonly batchP50Ms: number;
  readonly batchP99Ms: number;
  readonly requestsPerMessage: number;
  /** Deliveries handed out (duplicates and redeliveries included). */
  readonly deliveries: number;
  /** Deliveries not acknowledged (parks, retries). */
  readonly returned: number;
  /** Ids whose effect ran more than once, across the fleet. */
  readonly duplicateEffects: number;
  /** Acknowledged ids whose effect never ran. */
  readonly lost: number;
  /**
   * Batches whose handler threw out of the kit, other than `wholeBatchFailures`: a kit fault (the
   * run is refused).
   */
  readonly errors: number;
  /**
   * Powertools: batches in which every record failed (e.g. all ids in progress on other consumers),
   * which `processPartialResponse` answers by throwing `FullBatchFailureError` unless told
   * `throwOnFullBatchFailure: false` — its documented default. Lambda then returns the whole batch to
   * the queue, the same as every record reported failed, so it is counted here, not as an error.
   */
  readonly wholeBatchFailures?: number;
}

/** The throw a Powertools batch answers "every record failed" with (see `wholeBatchFailures`). */
const FULL_BATCH_FAILURE = "FullBatchFailureError";

export interface FleetResults {
  readonly sizes: readonly number[];
  readonly messages: number;
  readonly duplicateShare: number;
  readonly figures: readonly FleetFigure[];
}

const POSTGRES_TABLE = "bq_bench_fleet";

interface RunOptions {
  readonly backend: FleetBackend;
  readonly kit: FleetKit;
  readonly consumers: number;
  readonly messages: number;
  readonly duplicateShare: number;
  readonly endpoint: string;
  readonly seed: number;
}

let runCounter = 0;

/** One fleet run: P consumers drain one queue; resolves with the figures once it is drained. */
async function runFleet(options: RunOptions): Promise<FleetFigure> {
  runCounter += 1;
  const tag = `fleet-${process.pid}-${Date.now().toString(36)}-${runCounter}`;
  const queue = new FleetQueue({ messages: options.messages, duplicateShare: options.duplicateShare, visibilityMs: 50, random: seededRandom(options.seed), tag });
  const workers = Array.from(
    { length: options.consumers },
    () =>
      new Worker(new URL("./consumer.ts", import.meta.url), {
        workerData: {
          kit: options.kit,
          backend: options.backend,
          endpoint: options.endpoint,
          namespace: tag,
          ourTable: OUR_TABLE,
          powertoolsTable: POWERTOOLS_TABLE,
          postgresTable: POSTGRES_TABLE,
        },
      }),
  );
  const effects = new Map<string, number>();
  const latencies: number[] = [];
  let requests = 0;
  let errors = 0;
  let wholeBatchFailures = 0;
  let started = 0;
  let finished = 0;
  try {
    await Promise.all(
      workers.map(
        (worker) =>
          new Promise<void>((resolve, reject) => {
            worker.once("error", reject);
            worker.once("message", (message: FromConsumer) => (message.type === "ready" ? resolve() : reject(new Error("consumer did not start"))));
          }),
      ),
    );
    started = performance.now();
    await new Promise<void>((resolve, reject) => {
      let stopped = 0;
      const give = (worker: Worker) => {
        if (queue.drained) {
          worker.postMessage({ type: "stop" } satisfies ToConsumer);
          stopped += 1;
          if (stopped === workers.length) resolve();
          return;
        }
        const batch = queue.receive(10, performance.now());
        if (batch.length === 0) {
          // Nothing visible now: a redelivery is waiting out its visibility, or another consumer holds the rest.
          setTimeout(() => give(worker), 5);
          return;
        }
        const pending: readonly QueuedDelivery[] = batch;
        worker.once("message", (message: FromConsumer) => {
          if (message.type !== "done") return reject(new Error("unexpected message from a consumer"));
          latencies.push(message.ms);
          requests += message.requests;
          if (message.error === FULL_BATCH_FAILURE && options.kit === "Powertools") wholeBatchFailures += 1;
          else if (message.error !== undefined) errors += 1;
          for (const id of message.ran) effects.set(id, (effects.get(id) ?? 0) + 1);
          queue.settle(pending, new Set(message.failed), performance.now());
          if (queue.drained && finished === 0) finished = performance.now();
          give(worker);
        });
        worker.postMessage({ type: "batch", deliveries: batch } satisfies ToConsumer);
      };
      for (const worker of workers) {
        worker.on("error", reject);
        give(worker);
      }
    });
  } finally {
    await Promise.all(workers.map((worker) => worker.terminate().catch(() => undefined)));
  }
  const seconds = ((finished || performance.now()) - started) / 1000;
  let duplicateEffects = 0;
  let lost = 0;
  for (let i = 0; i < options.messages; i += 1) {
    const runs = effects.get(`${tag}-${i}`) ?? 0;
    if (runs > 1) duplicateEffects += 1;
    if (runs === 0) lost += 1;
  }
  return {
    backend: options.backend,
    kit: options.kit,
    consumers: options.consumers,
    messages: options.messages,
    seconds,
    messagesPerSecond: options.messages / seconds,
    batchP50Ms: quantile(latencies, 0.5),
    batchP99Ms: quantile(latencies, 0.99),
    requestsPerMessage: requests / options.messages,
    deliveries: queue.delivered,
    returned: queue.returned,
    duplicateEffects,
    lost,
    errors,
    wholeBatchFailures,
  };
}

/**
 * The fleet section: every backend, every size in `sizes`, ours then Powertools (same queue, same
 * seed). `messages` per run; `duplicateShare` of them delivered twice.
 */
export async function measureFleet(
  backends: Backends,
  sizes: readonly number[],
  messages: number,
  step: (text: string) => void,
  duplicateShare = 0.1,
): Promise<FleetResults> {
  const postgres = await startPostgres();
  const proxy = await startTcpProxy({ targetPort: postgres.port, delayMs: backends.delayMs });
  const figures: FleetFigure[] = [];
  try {
    const pool = new pg.Pool({ connectionString: postgres.url });
    pool.on("error", () => undefined);
    await createPostgresTable(pool, { table: POSTGRES_TABLE });
    await pool.end();
    const postgresUrl = `postgres://postgres@127.0.0.1:${proxy.port}/postgres`;
    const plan: { backend: FleetBackend; endpoint: string; kits: FleetKit[] }[] = [
      { backend: "DynamoDB", endpoint: backends.endpoints.dynamodb, kits: ["ours", "Powertools"] },
      { backend: "Redis", endpoint: backends.endpoints.redis, kits: ["ours", "Powertools"] },
      { backend: "PostgreSQL", endpoint: postgresUrl, kits: ["ours"] },
    ];
    for (const { backend, endpoint, kits } of plan) {
      for (const consumers of sizes) {
        for (const kit of kits) {
          step(`fleet: ${backend}, ${consumers} consumer(s), ${kit}`);
          const figure = await runFleet({ backend, kit, consumers, messages, duplicateShare, endpoint, seed: 7_000 + consumers });
          if (figure.duplicateEffects > 0 || figure.lost > 0 || figure.errors > 0) {
            throw new Error(`fleet ${backend} × ${consumers} (${kit}): ${figure.duplicateEffects} duplicate effect(s), ${figure.lost} lost, ${figure.errors} error(s)`);
          }
          figures.push(figure);
        }
      }
    }
  } finally {
    await proxy.close();
    await postgres.stop();
  }
  return { sizes, messages, duplicateShare, figures };
}
