/**
 * BENCH — transactional mode next to plain mode: store requests (DynamoDB) and statements
 * (PostgreSQL) for a batch of 10 new messages whose effect is one write to the same database.
 *   - plain: the effect is its own write (a PutItem / an INSERT the handler sends itself), then the
 *     engine's group commit;
 *   - transactional: the effect goes through `ctx.tx` and lands in the commit's transaction.
 * Counted the same way as the rest of the bench (AWS SDK middleware; a counting pg wrapper).
 * D1's figures are asserted in test/workers/d1-store.test.ts (one `db.batch` per message).
 *
 * What this is *not*: a Powertools comparison — Powertools has no transactional mode.
 */
import { PutItemCommand } from "@aws-sdk/client-dynamodb";
import pg from "pg";
import { BatchEngine } from "../src/engine/index.js";
import { txOf } from "../src/transaction.js";
import { type DynamoDBTransaction, TransactionalDynamoDBStore, createIdempotencyTable, idempotencyTableDefinition } from "../entry/dynamodb.js";
import { type PgPoolLike, PostgresStore, createIdempotencyTable as createPgTable } from "../entry/postgres.js";
import { startPostgres } from "../test/setup/postgres.js";
import type { Backends } from "./backends.js";
import { newIds } from "./fixtures/sqs.js";
import { Tally } from "./kit.js";
import { median } from "./stats.js";

export interface TransactionalFigure {
  readonly backend: string;
  readonly mode: "plain" | "transactional";
  /** Median requests (DynamoDB) or statements (PostgreSQL) per batch of 10 new messages, effect writes included. */
  readonly perBatch: number;
  readonly perMessage: number;
  readonly ms: number;
}

const body = (id: string) => ({ job: "orders.charge", trace_id: `t-${id}`, data: { id }, meta: { id, schema_version: 1 }, attempts: 0 });
const EFFECTS = "bq-bench-effects";

function countingPool(pool: pg.Pool, tally: Tally): PgPoolLike<pg.PoolClient> {
  return {
    query: (text: string, values?: unknown[]) => (tally.add(), pool.query(text, values)),
    connect: async () => {
      const client = await pool.connect();
      const counted = { query: (text: string, values?: unknown[]) => (tally.add(), client.query(text, values)), release: (e?: Error | boolean) => client.release(e) };
      return counted as unknown as pg.PoolClient;
    },
  } as PgPoolLike<pg.PoolClient>;
}

async function sample(engine: BatchEngine, tally: Tally, rounds: number): Promise<{ perBatch: number; ms: number }> {
  const counts: number[] = [];
  const times: number[] = [];
  for (let round = -1; round < rounds; round += 1) {
    const ids = newIds(10, "tx");
    tally.reset();
    const started = performance.now();
    const results = await engine.process(ids.map((id) => ({ body: body(id), context: {} })));
    const ms = performance.now() - started;
    if (results.some((r) => r.status !== "ran")) throw new Error(`transactional bench: ${results.map((r) => r.status).join(",")}`);
    if (round < 0) continue;
    counts.push(tally.count);
    times.push(ms);
  }
  return { perBatch: median(counts), ms: median(times) };
}

export async function measureTransactional(backends: Backends, rounds: number): Promise<TransactionalFigure[]> {
  const figures: TransactionalFigure[] = [];
  const push = (backend: string, mode: TransactionalFigure["mode"], s: { perBatch: number; ms: number }) =>
    figures.push({ backend, mode, perBatch: s.perBatch, perMessage: s.perBatch / 10, ms: s.ms });

  const tally = new Tally();
  const client = backends.dynamodbClient(tally);
  await createIdempotencyTable(client, idempotencyTableDefinition(EFFECTS)).catch(() => undefined);
  const table = "bq-bench-tx";
  await createIdempotencyTable(client, idempotencyTableDefinition(table)).catch(() => undefined);
  const store = new TransactionalDynamoDBStore({ table, client, namespace: "tx-bench" });
  const plain = new BatchEngine(store, async (_m, ctx) => {
    await client.send(new PutItemCommand({ TableName: EFFECTS, Item: { pk: { S: `${ctx.key}` } } }));
  });
  push("DynamoDB", "plain", await sample(plain, tally, rounds));
  const transactional = new BatchEngine(store, async (_m, ctx) => {
    txOf<DynamoDBTransaction>(ctx).put({ TableName: EFFECTS, Item: { pk: { S: `${ctx.key}` } } });
  }, { transactional: true });
  push("DynamoDB", "transactional", await sample(transactional, tally, rounds));

  const server = await startPostgres();
  const pool = new pg.Pool({ connectionString: server.url, max: 10 });
  // pg emits "error" for an idle connection the server drops (a restart, a failover); unheard, it ends the process.
  pool.on("error", () => undefined);
  try {
    await createPgTable(pool);
    await pool.query("CREATE TABLE IF NOT EXISTS bench_effects (id text PRIMARY KEY)");
    const statements = new Tally();
    const pgStore = new PostgresStore<pg.PoolClient>({ pool: countingPool(pool, statements), namespace: "tx-bench" });
    const pgPlain = new BatchEngine(pgStore, async (_m, ctx) => {
      statements.add();
      await pool.query("INSERT INTO bench_effects (id) VALUES ($1)", [ctx.key]);
    });
    push("PostgreSQL", "plain", await sample(pgPlain, statements, rounds));
    const pgTx = new BatchEngine(pgStore, async (_m, ctx) => {
      await txOf<pg.PoolClient>(ctx).query("INSERT INTO bench_effects (id) VALUES ($1)", [ctx.key]);
    }, { transactional: true });
    push("PostgreSQL", "transactional", await sample(pgTx, statements, rounds));
  } finally {
    await pool.end();
    await server.stop();
  }
  return figures;
}

export function renderTransactional(figures: readonly TransactionalFigure[] | undefined, delayMs: number): string {
  if (figures === undefined || figures.length === 0) return "";
  return [
    "## Transactional mode next to plain mode",
    "",
    `A batch of 10 new messages whose effect is one write to the store's own database: requests (DynamoDB, through the ${delayMs} ms delay proxy) or statements (PostgreSQL, local, no proxy) per batch, the effect's own writes included, and the median wall time of the batch.`,
    "",
    "| backend | mode | per batch | per message | ms per batch |",
    "|:--|:--|--:|--:|--:|",
    ...figures.map((f) => `| ${f.backend} | ${f.mode} | ${f.perBatch} | ${f.perMessage.toFixed(1)} | ${f.ms.toFixed(1)} |`),
    "",
    "Plain mode spends fewer round trips per batch (the commits of the batch are grouped), transactional mode closes the window for these effects: a crash between the write and the commit leaves neither. Each transactional message is its own transaction (DynamoDB: one TransactWriteItems; PostgreSQL: BEGIN, the handler's statements, the fenced UPDATE, COMMIT).",
    "",
  ].join("\n");
}
