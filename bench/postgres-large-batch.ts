/**
 * BENCH — large batches on PostgreSQL (SQS with a batching window hands a Lambda up to 10,000
 * records): one store step per batch whatever its size, measured on a local PostgreSQL started here
 * (test/setup/postgres.ts, guarded: it stops with this process).
 *
 * - store steps alone: `claimMany`, `rememberMany`, `seenMany` of N new ids, N = 1,000 / 10,000 /
 *   100,000: statements per step (always 1), wall time, time per id;
 * - a whole batch through `BatchEngine.process`: N deliveries (BabelQueue envelopes of ~200 bytes)
 *   with a no-op handler: statements, time per message, and the consumer's memory per message
 *   (heap and RSS growth over the batch, after a GC when `--expose-gc` is on).
 *
 * The limits that matter, stated in the report: every step sends its ids as ONE `text[]` parameter
 * (no 65,535-parameter cap applies); PostgreSQL takes a single parameter value up to 1 GB, so ids
 * of up to 1,024 bytes would fit ~1,000,000 to a statement. The store sends 10,000 per statement
 * (a whole SQS batch) and splits larger steps.
 *
 * Run: `npx tsx bench/postgres-large-batch.ts` (or `node --expose-gc --import tsx …` for the
 * memory figures). Exported for bench/run.ts: `measurePostgresLargeBatches`.
 *
 * What this is *not*: a figure for a remote database (every statement here is a loopback round
 * trip) or a timed assertion (test/stores/postgres/large-batch.test.ts checks correctness).
 */
import pg from "pg";
import { BatchEngine } from "../src/engine/index.js";
import { PostgresStore, createIdempotencyTable } from "../entry/postgres.js";
import { startPostgres } from "../test/setup/postgres.js";
import { envelopeBody, newIds } from "./fixtures/sqs.js";
import { Tally } from "./kit.js";

export interface LargeBatchFigure {
  readonly step: "claimMany" | "rememberMany" | "seenMany" | "engine.process";
  readonly ids: number;
  readonly statements: number;
  readonly ms: number;
  readonly usPerId: number;
  /** Heap growth over the step per id (bytes), where measured. */
  readonly heapBytesPerId?: number;
  /** RSS growth over the step per id (bytes), where measured. */
  readonly rssBytesPerId?: number;
}

const gc = (globalThis as { gc?: () => void }).gc;

function countingPool(pool: pg.Pool, tally: Tally) {
  return {
    query: (text: string, values?: unknown[]) => (tally.add(), pool.query(text, values)),
    connect: async () => {
      const client = await pool.connect();
      return { query: (text: string, values?: unknown[]) => (tally.add(), client.query(text, values)), release: (e?: Error | boolean) => client.release(e) };
    },
  };
}

async function timed<T>(work: () => Promise<T>): Promise<{ value: T; ms: number; heap: number; rss: number }> {
  gc?.();
  const heap = process.memoryUsage().heapUsed;
  const rss = process.memoryUsage().rss;
  const started = performance.now();
  const value = await work();
  const ms = performance.now() - started;
  const after = process.memoryUsage();
  return { value, ms, heap: after.heapUsed - heap, rss: after.rss - rss };
}

export async function measurePostgresLargeBatches(sizes: readonly number[] = [1_000, 10_000, 100_000], engineSize = 10_000): Promise<LargeBatchFigure[]> {
  const server = await startPostgres({ settings: { synchronous_commit: "on" } });
  const pool = new pg.Pool({ connectionString: server.url, max: 10 });
  // An idle connection the server drops (a restart) must not end the run.
  pool.on("error", () => undefined);
  const figures: LargeBatchFigure[] = [];
  try {
    await createIdempotencyTable(pool);
    const tally = new Tally();
    const store = new PostgresStore({ pool: countingPool(pool, tally), namespace: "large" });
    for (const size of sizes) {
      const ids = newIds(size, "large");
      for (const step of ["claimMany", "rememberMany", "seenMany"] as const) {
        tally.reset();
        const run = await timed<unknown>(() => (step === "claimMany" ? store.claimMany(ids) : step === "rememberMany" ? store.rememberMany(ids) : store.seenMany(ids)));
        if (step === "claimMany" && (run.value as { status: string }[]).some((claim) => claim.status !== "claimed")) throw new Error("large batch: a new id was not claimed");
        if (step === "seenMany" && (run.value as boolean[]).some((seen) => !seen)) throw new Error("large batch: a committed id was not seen");
        figures.push({ step, ids: size, statements: tally.count, ms: run.ms, usPerId: (run.ms * 1000) / size });
      }
    }
    const engine = new BatchEngine(store, async () => undefined, { concurrency: 100 });
    // One warm-up batch, then the measured one.
    await engine.process(newIds(100, "warm").map((id) => ({ body: envelopeBody(id), context: {} })));
    const deliveries = newIds(engineSize, "engine").map((id) => ({ body: envelopeBody(id), context: {} }));
    tally.reset();
    const run = await timed(() => engine.process(deliveries));
    const ran = run.value.filter((result) => result.status === "ran").length;
    if (ran !== engineSize) throw new Error(`large batch: ${ran} of ${engineSize} ran`);
    figures.push({
      step: "engine.process",
      ids: engineSize,
      statements: tally.count,
      ms: run.ms,
      usPerId: (run.ms * 1000) / engineSize,
      ...(gc === undefined ? {} : { heapBytesPerId: Math.max(0, run.heap) / engineSize, rssBytesPerId: Math.max(0, run.rss) / engineSize }),
    });
  } finally {
    await pool.end();
    await server.stop();
  }
  return figures;
}

export function renderPostgresLargeBatches(figures: readonly LargeBatchFigure[]): string {
  return [
    "## Large batches on PostgreSQL",
    "",
    "One store step per batch, whatever its size: every id of the step travels in ONE `text[]` parameter. Local PostgreSQL 15, loopback, no delay proxy.",
    "",
    "| step | ids | statements | ms | µs per id | heap per id | RSS per id |",
    "|:--|--:|--:|--:|--:|--:|--:|",
    ...figures.map(
      (f) =>
        `| ${f.step} | ${f.ids.toLocaleString("en")} | ${f.statements} | ${f.ms.toFixed(0)} | ${f.usPerId.toFixed(1)} | ${f.heapBytesPerId === undefined ? "-" : `${Math.round(f.heapBytesPerId)} B`} | ${f.rssBytesPerId === undefined ? "-" : `${Math.round(f.rssBytesPerId)} B`} |`,
    ),
    "",
    "Limits: no parameter-count cap applies (one array parameter per column) and PostgreSQL takes one parameter value up to 1 GB, so a single statement could carry about 1,000,000 ids of up to 1,024 bytes (the store hashes longer ones). The store sends at most 10,000 ids per statement (`POSTGRES_MAX_IDS_PER_STATEMENT`, a whole SQS batch): a larger step becomes one statement per 10,000, one after another, so no statement holds its rows' locks for seconds. The engine's commits are group steps (successes finishing together share one statement), so a 10,000-message batch costs a handful of statements, not 10,000.",
    "",
  ].join("\n");
}

if (process.argv[1]?.endsWith("postgres-large-batch.ts")) {
  const figures = await measurePostgresLargeBatches();
  console.log(renderPostgresLargeBatches(figures));
  process.exit(0);
}
