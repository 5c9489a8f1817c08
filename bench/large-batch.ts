/**
 * BENCH — large batches (issue 20): one SQS batch of N new records (N = `BENCH_LARGE_BATCH`, default
 * 10,000, SQS's largest with a batching window) through `sqsHandler`, on DynamoDB Local behind the
 * delay proxy. Per kit: wall time and time per message, store requests per message, the most
 * requests in flight at once (counted on the client, inside the SDK's retry loop), and the peak heap
 * growth per message while the batch runs (sampled every 10 ms after a forced GC; the event itself
 * is built before the baseline).
 *
 * Kits: ours with `maxConcurrentRequests` 8, 50 (the default) and 10,000 (no bound: every claim at
 * once, as before the option existed), and Powertools' documented pattern (`BatchProcessor`, which
 * runs records in parallel, + `makeIdempotent` + `DynamoDBPersistenceLayer`) on the same batch.
 * Every kit must run every record exactly once with no failure reported, or the bench fails. An
 * untimed batch of up to 500 records warms DynamoDB Local up first.
 *
 * What this is *not*: a throughput test of DynamoDB (DynamoDB Local shares this machine's 2 cores
 * with the kits), or a store of Redis or PostgreSQL (their sections belong to their stores).
 */
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoDBPersistenceLayer } from "@aws-lambda-powertools/idempotency/dynamodb";
import { DynamoDBStore } from "../entry/dynamodb.js";
import { type Backends, OUR_TABLE, POWERTOOLS_TABLE } from "./backends.js";
import { lambdaContext, newIds, sqsEvent } from "./fixtures/sqs.js";
import { type Kit, Tally } from "./kit.js";
import { oursKit } from "./ours.js";
import { powertoolsKit } from "./powertools.js";

export interface LargeBatchFigure {
  readonly backend: string;
  readonly kit: string;
  readonly size: number;
  /** Wall time of the one handler call (ms). */
  readonly ms: number;
  readonly msPerMessage: number;
  readonly requestsPerMessage: number;
  /** Most store requests in flight at once. */
  readonly peakInFlight: number;
  /** Peak heap growth during the call, per message (bytes). */
  readonly heapPerMessage: number;
}

/** A `gc()` for the measurement (the bench runs without --expose-gc). */
function collector(): () => void {
  setFlagsFromString("--expose-gc");
  return runInNewContext("gc") as () => void;
}

/** Counts, on `client`, the requests in flight (finalize step: one per request, its retries inside). */
function inFlightGauge(client: DynamoDBClient): { readonly peak: number } {
  const gauge = { now: 0, peak: 0 };
  client.middlewareStack.add(
    (next) => async (args) => {
      gauge.now += 1;
      gauge.peak = Math.max(gauge.peak, gauge.now);
      try {
        return await next(args);
      } finally {
        gauge.now -= 1;
      }
    },
    { step: "finalizeRequest", priority: "high", name: "benchInFlight" },
  );
  return gauge;
}

async function oneLargeBatch(kit: Kit, size: number, gauge: { readonly peak: number }, gc: () => void): Promise<Omit<LargeBatchFigure, "backend" | "kit">> {
  const ids = newIds(size, `large-${kit.name}`);
  const event = sqsEvent(ids, 1);
  const context = lambdaContext();
  gc();
  const baseline = process.memoryUsage().heapUsed;
  let peakHeap = baseline;
  const sampler = setInterval(() => {
    peakHeap = Math.max(peakHeap, process.memoryUsage().heapUsed);
  }, 10);
  kit.requests.reset();
  const before = kit.effect.runs;
  const started = performance.now();
  let response: Awaited<ReturnType<Kit["handler"]>>;
  try {
    response = await kit.handler(event, context);
  } finally {
    clearInterval(sampler);
  }
  const ms = performance.now() - started;
  peakHeap = Math.max(peakHeap, process.memoryUsage().heapUsed);
  const ran = kit.effect.runs - before;
  if (response.batchItemFailures.length > 0 || ran !== size) {
    throw new Error(`${kit.name} on a batch of ${size}: ${ran} effect(s) ran, ${response.batchItemFailures.length} failure(s) reported`);
  }
  return {
    size,
    ms,
    msPerMessage: ms / size,
    requestsPerMessage: kit.requests.count / size,
    peakInFlight: gauge.peak,
    heapPerMessage: Math.max(0, peakHeap - baseline) / size,
  };
}

/** The DynamoDB rows: ours at three bounds, and Powertools, each on a fresh client and a batch of `size`. */
export async function measureLargeBatchDynamoDB(backends: Backends, size: number, step: (text: string) => void): Promise<LargeBatchFigure[]> {
  const gc = collector();
  const figures: LargeBatchFigure[] = [];
  const kits: { name: string; make: () => { kit: Kit; gauge: { readonly peak: number } } }[] = [
    ...[8, 50, 10_000].map((bound) => ({
      name: bound === 10_000 ? "ours, no bound (10,000)" : `ours, maxConcurrentRequests ${bound}${bound === 50 ? " (default)" : ""}`,
      make: () => {
        const tally = new Tally();
        const client = backends.dynamodbClient(tally);
        const gauge = inFlightGauge(client);
        const store = new DynamoDBStore({ table: OUR_TABLE, client, maxConcurrentRequests: bound });
        return { kit: oursKit("ours", "sqsHandler + DynamoDBStore", store, tally), gauge };
      },
    })),
    {
      name: "Powertools (BatchProcessor, parallel)",
      make: () => {
        const tally = new Tally();
        const client = backends.dynamodbClient(tally);
        const gauge = inFlightGauge(client);
        const layer = new DynamoDBPersistenceLayer({ tableName: POWERTOOLS_TABLE, awsSdkV3Client: client });
        return { kit: powertoolsKit("Powertools", "BatchProcessor + makeIdempotent + DynamoDBPersistenceLayer", layer, tally), gauge };
      },
    },
  ];
  // One untimed batch first: DynamoDB Local's JIT and the table warm up on it, not on the first kit.
  step(`large batch: warm-up (${Math.min(size, 500)} records)`);
  const warmUp = kits[1]?.make();
  if (warmUp !== undefined) await oneLargeBatch(warmUp.kit, Math.min(size, 500), warmUp.gauge, gc);
  for (const { name, make } of kits) {
    step(`large batch: ${size} records, ${name}`);
    const { kit, gauge } = make();
    figures.push({ backend: "DynamoDB", kit: name, ...(await oneLargeBatch(kit, size, gauge, gc)) });
  }
  return figures;
}

export function renderLargeBatch(figures: readonly LargeBatchFigure[] | undefined, delayMs: number): string {
  if (figures === undefined || figures.length === 0) return "";
  const kib = (bytes: number) => `${(bytes / 1024).toFixed(1)} KiB`;
  return [
    "## Large batches",
    "",
    `One SQS batch of ${figures[0]?.size.toLocaleString("en-US")} new records (SQS's largest, with a batching window) through the handler, once per kit, ` +
      `on DynamoDB Local behind the ${delayMs} ms delay proxy. In flight: the most store requests outstanding at once, counted on the client. ` +
      "Heap: the peak growth while the batch ran, per message (after a forced GC; the event itself built before).",
    "",
    "| backend | kit | ms | ms per message | requests per message | most in flight | heap per message |",
    "|:--|:--|--:|--:|--:|--:|--:|",
    ...figures.map(
      (f) =>
        `| ${f.backend} | ${f.kit} | ${f.ms.toFixed(0)} | ${f.msPerMessage.toFixed(3)} | ${f.requestsPerMessage.toFixed(2)} | ${f.peakInFlight} | ${kib(f.heapPerMessage)} |`,
    ),
    "",
    "Ours claims the whole batch in one step (one conditional PutItem per id: DynamoDB has no batch conditional write) and commits in BatchWriteItem chunks of 25, " +
      "never more than `maxConcurrentRequests` requests at once; without the bound every claim is sent at once and waits in the SDK's socket pool (50 sockets) instead of in the store. " +
      "A throttled id fails alone and is retried with its delivery (docs/stores/dynamodb.md).",
    "",
  ].join("\n");
}
