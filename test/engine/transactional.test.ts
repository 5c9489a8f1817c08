/**
 * Transactional mode end to end, through the ENGINE (the stores' own tests cover `transact` on its
 * own): PostgreSQL and DynamoDB Local, effects counted from the database — rows / items the
 * handler wrote through `ctx.tx` — never from a counter. Then the reliability suite's broker in
 * transactional mode under the crash faults of the window: 0 lost and 0 repeated effects.
 * (D1's are in test/workers/d1-transactional.test.ts, inside workerd.)
 */
import { DynamoDBClient, ScanCommand } from "@aws-sdk/client-dynamodb";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { BatchEngine } from "../../src/engine/index.js";
import { FenceLostError } from "../../src/errors.js";
import { txOf } from "../../src/transaction.js";
import { sqsHandler } from "../../handlers/lambda-sqs.js";
import { localClientConfig } from "../../scripts/dynamodb-local.mjs";
import { warmClock } from "../support/dynamodb-clock.js";
import { lambdaContext, sqsRecord } from "../../scripts/lambda-events.js";
import { seededRandom } from "../../scripts/storm.js";
import { type DynamoDBTransaction, TransactionalDynamoDBStore, createIdempotencyTable, idempotencyTableDefinition } from "../../entry/dynamodb.js";
import { PostgresStore, createIdempotencyTable as createPgTable } from "../../entry/postgres.js";
import { type SimulationReport, formatSimulationTable, formatWindowTable, simulate } from "../reliability/simulate.js";
import { envelopeBody } from "../support/envelopes.js";

const pool = new pg.Pool({ connectionString: inject("postgresUrl"), max: 40 });
pool.on("error", () => {});
const dynamo = new DynamoDBClient(localClientConfig(inject("dynamodbEndpoint")));
const run = Date.now().toString(36);
const TABLE = `tx-${run}`;
const EFFECTS = `tx-effects-${run}`;

beforeAll(async () => {
  await createPgTable(pool);
  await pool.query("CREATE TABLE IF NOT EXISTS tx_effects (message_id text NOT NULL, run text NOT NULL)");
  await createIdempotencyTable(dynamo, idempotencyTableDefinition(TABLE));
  await createIdempotencyTable(dynamo, idempotencyTableDefinition(EFFECTS));
  // DynamoDBStore's leases are on DynamoDB's clock: warmed, they are within a few ms of what is asked (these tests time 200 ms leases).
  await warmClock(dynamo, TABLE);
});
afterAll(async () => {
  // A handler hung past the deadline keeps its connection (Lambda would freeze or kill it): do not wait for it.
  await Promise.race([pool.end(), new Promise((resolve) => setTimeout(resolve, 2_000))]);
});

function envelope(id: string): string {
  return envelopeBody(id, { job: "urn:babel:tx:effect", traceId: `t-${id}` });
}

/** Effect rows per id, from Postgres. */
async function pgEffects(tag: string): Promise<Map<string, number>> {
  const { rows } = await pool.query<{ message_id: string; n: string }>("SELECT message_id, count(*) AS n FROM tx_effects WHERE run = $1 GROUP BY message_id", [tag]);
  return new Map(rows.map((row) => [row.message_id, Number(row.n)]));
}

/** Effect items per id, from DynamoDB (each effect is its own item: `<id>#<uuid>`). */
async function dynamoEffects(tag: string): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  let start: Record<string, import("@aws-sdk/client-dynamodb").AttributeValue> | undefined;
  do {
    const page = await dynamo.send(new ScanCommand({ TableName: EFFECTS, ConsistentRead: true, ...(start ? { ExclusiveStartKey: start } : {}) }));
    for (const item of page.Items ?? []) {
      if (item.run?.S !== tag) continue;
      const id = item.message_id?.S as string;
      counts.set(id, (counts.get(id) ?? 0) + 1);
    }
    start = page.LastEvaluatedKey;
  } while (start !== undefined);
  return counts;
}

const writePg = (tag: string) => async (id: string, tx: unknown) => {
  await txOf<pg.PoolClient>({ tx }).query("INSERT INTO tx_effects (message_id, run) VALUES ($1, $2)", [id, tag]);
};
const writeDynamo = (tag: string) => async (id: string, tx: unknown) => {
  txOf<DynamoDBTransaction>({ tx }).put({
    TableName: EFFECTS,
    Item: { pk: { S: `${id}#${crypto.randomUUID()}` }, message_id: { S: id }, run: { S: tag } },
  });
};

describe("transactional mode through the engine", () => {
  const backends = [
    {
      name: "PostgresStore",
      store: (namespace: string) => new PostgresStore<pg.PoolClient>({ pool, namespace }),
      write: writePg,
      effects: pgEffects,
    },
    {
      name: "TransactionalDynamoDBStore",
      store: (namespace: string) => new TransactionalDynamoDBStore({ table: TABLE, client: dynamo, namespace }),
      write: writeDynamo,
      effects: dynamoEffects,
    },
  ] as const;

  for (const backend of backends) {
    describe(backend.name, () => {
      it("commits the handler's writes with the id; a throwing handler writes nothing and is released", async () => {
        const tag = `a-${backend.name}-${Date.now()}`;
        const store = backend.store(tag);
        let fail = true;
        const engine = new BatchEngine(store, async (_m, ctx) => {
          await backend.write(tag)(ctx.key as string, ctx.tx);
          if (ctx.key === "bad" && fail) throw new Error("after writing: must roll back");
        }, { transactional: true });
        const results = await engine.process(["ok-1", "ok-2", "bad"].map((id) => ({ body: envelope(id), context: {} })));
        expect(results.map((r) => [r.key, r.status, r.ack])).toEqual([
          ["ok-1", "ran", true],
          ["ok-2", "ran", true],
          ["bad", "failed", false],
        ]);
        expect(Object.fromEntries(await backend.effects(tag))).toEqual({ "ok-1": 1, "ok-2": 1 });
        expect(await store.seen("ok-1")).toBe(true);
        // Released at once: the redelivery runs now, not after the lease.
        fail = false;
        const again = await engine.process(["ok-1", "bad"].map((id) => ({ body: envelope(id), context: {} })));
        expect(again.map((r) => r.status)).toEqual(["duplicate", "ran"]);
        expect(Object.fromEntries(await backend.effects(tag))).toEqual({ "ok-1": 1, "ok-2": 1, bad: 1 });
      });

      it("a handler rejecting with no reason (Promise.reject(), throw undefined) fails: not acked, nothing written, released", async () => {
        const tag = `u-${backend.name}-${Date.now()}`;
        const store = backend.store(tag);
        let fail = true;
        const engine = new BatchEngine(store, async (_m, ctx) => {
          await backend.write(tag)(ctx.key as string, ctx.tx);
          // A rejection without a value is still a rejection: the transaction is rolled back.
          if (fail) return Promise.reject();
        }, { transactional: true });
        const [result] = await engine.process([{ body: envelope("no-reason"), context: {} }]);
        expect(result).toMatchObject({ status: "failed", ack: false, handlerRan: true });
        expect(Object.fromEntries(await backend.effects(tag))).toEqual({});
        // Released, not left in flight: the redelivery runs at once and commits the only effect.
        fail = false;
        const [again] = await engine.process([{ body: envelope("no-reason"), context: {} }]);
        expect(again?.status).toBe("ran");
        expect(Object.fromEntries(await backend.effects(tag))).toEqual({ "no-reason": 1 });
      });

      it("a stale owner — lease over, id re-claimed — writes nothing: FenceLostError, not acked, not released", async () => {
        const tag = `b-${backend.name}-${Date.now()}`;
        const store = backend.store(tag);
        let reclaimed = false;
        const engine = new BatchEngine(store, async (_m, ctx) => {
          await backend.write(tag)(ctx.key as string, ctx.tx);
          await new Promise((resolve) => setTimeout(resolve, 400));
          // Meanwhile the lease ran out and another delivery claimed the id.
          reclaimed = (await store.claim(ctx.key as string, 60_000)).status === "claimed";
        }, { transactional: true, leaseMs: 200 });
        const [result] = await engine.process([{ body: envelope("stale"), context: {} }]);
        expect(reclaimed).toBe(true);
        expect(result).toMatchObject({ status: "failed", ack: false, handlerRan: true });
        expect(result?.error).toBeInstanceOf(FenceLostError);
        expect(Object.fromEntries(await backend.effects(tag))).toEqual({});
        // The new owner's claim was not released by the stale one.
        expect((await store.claim("stale", 1_000)).status).toBe("in-flight");
      });

      it("50 concurrent deliveries of one id through the engine produce ONE effect, counted in the database", async () => {
        const tag = `c-${backend.name}-${Date.now()}`;
        const store = backend.store(tag);
        const engines = Array.from({ length: 50 }, () =>
          new BatchEngine(store, async (_m, ctx) => backend.write(tag)(ctx.key as string, ctx.tx), { transactional: true }),
        );
        const results = (await Promise.all(engines.map((engine) => engine.process([{ body: envelope("one"), context: {} }])))).flat();
        expect(results.filter((r) => r.status === "ran")).toHaveLength(1);
        expect(results.every((r) => r.status === "ran" || r.status === "in-flight" || r.status === "duplicate")).toBe(true);
        expect(Object.fromEntries(await backend.effects(tag))).toEqual({ one: 1 });
      });
    });
  }

  it("sqsHandler in transactional mode: the hung record past the deadline writes nothing; the nine commit", async () => {
    const tag = `d-${Date.now()}`;
    const store = new PostgresStore<pg.PoolClient>({ pool, namespace: tag });
    let release!: () => void;
    const hung = new Promise<void>((resolve) => (release = resolve));
    const handler = sqsHandler({
      store,
      transactional: true,
      deadlineMarginMs: 300,
      logger: false,
      handle: async (_m, ctx) => {
        await writePg(tag)(ctx.key as string, ctx.tx);
        if (ctx.key === "h-9") await hung;
      },
    });
    const records = Array.from({ length: 10 }, (_, i) => sqsRecord(envelope(`h-${i}`)));
    const response = await handler({ Records: records }, lambdaContext(1_000));
    expect(response.batchItemFailures.map((f) => f.itemIdentifier)).toEqual([records[9]?.messageId]);
    expect((await pgEffects(tag)).size).toBe(9);
    release();
  });
});

describe("reliability in transactional mode: effects counted from the database", () => {
  const reports: SimulationReport[] = [];
  const mixes = [
    { faultMix: "crashes at 3 points + handler failures (tx)", handlerFailure: 0.05, crash: { beforeEffect: 0.05, afterEffectBeforeCommit: 0.1, afterCommitBeforeAck: 0.05 } },
    { faultMix: "killed at a random moment mid-batch (tx)", kill: 0.3, killWithinMs: 60, handlerMs: [0, 50] as const },
    { faultMix: "one handler hangs past the deadline (tx)", hang: 0.15, invocationMs: 800, deadlineMarginMs: 150, handlerMs: [0, 20] as const },
  ];
  const stores = [
    { name: "PostgresStore (tx)", make: (ns: string) => new PostgresStore<pg.PoolClient>({ pool, namespace: ns }), write: writePg, count: pgEffects },
    { name: "TransactionalDynamoDBStore (tx)", make: (ns: string) => new TransactionalDynamoDBStore({ table: TABLE, client: dynamo, namespace: ns }), write: writeDynamo, count: dynamoEffects },
  ];
  for (const backend of stores) {
    mixes.forEach((mix, m) => {
      it(`${backend.name}: ${mix.faultMix}: 0 lost, 0 repeated`, { timeout: 300_000 }, async () => {
        const tag = `rel-${m}-${backend.name.split(" ")[0]}-${Date.now().toString(36)}`;
        const report = await simulate({
          ...mix,
          store: backend.name,
          backend: backend.make(tag),
          random: seededRandom(5_000 + m),
          messages: 120,
          leaseMs: 1_500,
          visibilityMs: 1_800,
          transactional: { write: backend.write(tag), count: async () => backend.count(tag) },
        });
        reports.push(report);
        expect(report.lost, "lost ids").toBe(0);
        expect(report.effects, "effects counted in the database").toBe(report.messages);
        expect(report.duplicates.unexplained + report.duplicates.crashWindow + report.duplicates.commitFailed, "repeated effects").toBe(0);
        if (mix.kill) expect(report.window.kills).toBeGreaterThan(0);
        if (mix.hang) expect(report.window.hangs).toBeGreaterThan(0);
      });
    });
  }
  afterAll(() => {
    console.log(`\nReliability in transactional mode (120 messages per mix)\n${formatSimulationTable(reports)}\n\n${formatWindowTable(reports)}\n`);
  });
});
