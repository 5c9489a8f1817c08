/**
 * The demo's Lambda scenario: a redelivery storm (scripts/storm.ts) consumed through `sqsHandler`
 * + `DynamoDBStore`, exactly as an SQS-triggered Lambda would run it — every batch becomes an
 * `SQSEvent` with real-shaped records (ApproximateReceiveCount, messageId, ARN), several simulated
 * invocations run concurrently, and the `batchItemFailures` they return are what goes back to the
 * queue.
 *
 * Backend: DynamoDB Local (AWS's emulator, scripts/dynamodb-local.mjs) when `java` is present,
 * otherwise dynalite (a pure-JavaScript DynamoDB emulator from npm). The table is created from the
 * same `idempotencyTableDefinition` the tests and serverless.yml use. dynalite ignores
 * ReturnValuesOnConditionCheckFailure, so there the store takes its consistent-GetItem fallback.
 *
 * Size: `BQ_DEMO_LAMBDA_MESSAGES` distinct ids, each sent 1–5 times. Default 3,000 (about 9,000
 * deliveries, ~25 s including the emulator's start). Measured on this project's 2-core machine:
 * both emulators serve only ~600–800 requests/s (the SDK's own per-request CPU cost included), and a
 * delivery costs ~1.1 requests (one conditional put, a tenth of a batch write), so the 10,000-id
 * storm (~30,400 deliveries) took 78 s on DynamoDB Local: not "well under a minute".
 * Backend: `BQ_DEMO_LAMBDA_BACKEND=dynalite` forces the pure-JavaScript emulator.
 *
 * What this is *not*: a benchmark of DynamoDB. The emulators' latency and throughput are nothing
 * like the service's.
 */
import type { createServer } from "node:net";
import { createRequire } from "node:module";
import { type AttributeValue, DynamoDBClient, ScanCommand } from "@aws-sdk/client-dynamodb";
import type { SQSEvent, SQSRecord } from "aws-lambda";
import { sqsHandler } from "../handlers/lambda-sqs.js";
import { DynamoDBStore, type DynamoDBTransaction, TransactionalDynamoDBStore, createIdempotencyTable, idempotencyTableDefinition } from "../entry/dynamodb.js";
import { txOf } from "../src/transaction.js";
import type { DemoReport } from "./demo-report.js";
import { hasJava, localClientConfig, startDynamoDBLocal } from "./dynamodb-local.mjs";
import { lambdaContext, sqsRecord } from "./lambda-events.js";
import { runStorm } from "./storm.js";

interface Backend {
  name: string;
  endpoint: string;
  /** Whether the emulator implements UpdateTimeToLive. */
  timeToLive: boolean;
  stop(): Promise<void>;
}

async function startDynalite(): Promise<Backend> {
  const require = createRequire(import.meta.url);
  const dynalite = require("dynalite") as (options: { createTableMs?: number; deleteTableMs?: number }) => ReturnType<typeof createServer>;
  const server = dynalite({ createTableMs: 0, deleteTableMs: 0 });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const address = server.address();
  const port = typeof address === "object" && address !== null ? address.port : 0;
  return {
    name: "dynalite",
    endpoint: `http://127.0.0.1:${port}`,
    timeToLive: false,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

async function startBackend(): Promise<Backend> {
  if (process.env.BQ_DEMO_LAMBDA_BACKEND !== "dynalite" && hasJava()) {
    const local = await startDynamoDBLocal();
    return { name: "DynamoDB Local", endpoint: local.endpoint, timeToLive: true, stop: local.stop };
  }
  return startDynalite();
}

export async function runLambdaScenario(): Promise<DemoReport> {
  const messages = Number(process.env.BQ_DEMO_LAMBDA_MESSAGES ?? 3_000);
  const backend = await startBackend();
  try {
    const client = new DynamoDBClient(localClientConfig(backend.endpoint));
    const table = "babelqueue-idempotency";
    await createIdempotencyTable(client, idempotencyTableDefinition(table), { timeToLive: backend.timeToLive });
    return await runStorm({ scenario: `Lambda SQS + DynamoDBStore (${backend.name})`, messages }, (tools) => {
      const handler = sqsHandler({
        store: new DynamoDBStore({ table, namespace: "payments-consumer", client }),
        handle: async (_envelope, context) => {
          if (tools.shouldFail()) throw new Error("payment gateway timeout (scripted)");
          tools.effect(context.key as string);
        },
        observe: tools.observe,
        // The storm counts outcomes itself; the default log line per duplicate would drown the table.
        logger: false,
      });
      return async (batch) => {
        const records: SQSRecord[] = batch.map((delivery) =>
          sqsRecord(delivery.body, { messageId: delivery.deliveryId, receiveCount: String(delivery.receiveCount) }),
        );
        const event: SQSEvent = { Records: records };
        const response = await handler(event, lambdaContext(30_000, "babelqueue-demo"));
        const failed = new Set(response.batchItemFailures.map((failure) => failure.itemIdentifier));
        return records.map((record) => !failed.has(record.messageId));
      };
    });
  } finally {
    await backend.stop();
  }
}

/** Effect items per id in the effects table: the database's own count. */
async function effectCounts(client: DynamoDBClient, table: string): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  let start: Record<string, AttributeValue> | undefined;
  do {
    const page = await client.send(new ScanCommand({ TableName: table, ConsistentRead: true, ...(start ? { ExclusiveStartKey: start } : {}) }));
    for (const item of page.Items ?? []) {
      const id = item.message_id?.S;
      if (id !== undefined) counts.set(id, (counts.get(id) ?? 0) + 1);
    }
    start = page.LastEvaluatedKey;
  } while (start !== undefined);
  return counts;
}

/**
 * The transactional scenario: the same storm, but the effect is an item the handler writes into an
 * `effects` table through `ctx.tx` — committed with the id in ONE TransactWriteItems — and one
 * invocation in twenty CRASHES after the handler's writes and before the commit (the invocation
 * dies: no response, every record of the batch returns). Effects are counted FROM THE TABLE, not by
 * the handler. DynamoDB Local only: dynalite has no TransactWriteItems.
 */
export async function runLambdaTransactionalScenario(): Promise<DemoReport | undefined> {
  if (process.env.BQ_DEMO_LAMBDA_BACKEND === "dynalite" || !hasJava()) {
    console.log("(transactional scenario skipped: it needs DynamoDB Local, i.e. Java; dynalite has no TransactWriteItems)");
    return undefined;
  }
  const messages = Number(process.env.BQ_DEMO_TX_MESSAGES ?? 1_000);
  const local = await startDynamoDBLocal();
  try {
    const client = new DynamoDBClient(localClientConfig(local.endpoint));
    const table = "babelqueue-idempotency";
    const effects = "orders-effects";
    await createIdempotencyTable(client, idempotencyTableDefinition(table));
    await createIdempotencyTable(client, idempotencyTableDefinition(effects));
    const report = await runStorm({ scenario: "Lambda SQS + DynamoDBStore, transactional (DynamoDB Local)", messages }, (tools) => {
      const store = new TransactionalDynamoDBStore({ table, namespace: "orders-consumer", client });
      // One invocation per batch; `crash` says whether it dies after the writes, before the commit.
      const invocation = (crash: boolean) =>
        sqsHandler({
          store,
          transactional: true,
          logger: false,
          observe: tools.observe,
          handle: async (_envelope, context) => {
            if (tools.shouldFail()) throw new Error("inventory service timeout (scripted)");
            const id = context.key as string;
            txOf<DynamoDBTransaction>(context).put({ TableName: effects, Item: { pk: { S: `${id}#${crypto.randomUUID()}` }, message_id: { S: id } } });
            tools.effect(id);
            // The invocation dies after the write, before the commit: the transaction is never sent.
            if (crash) throw new Error("invocation killed (scripted)");
          },
        });
      return async (batch) => {
        const records: SQSRecord[] = batch.map((delivery) =>
          sqsRecord(delivery.body, { messageId: delivery.deliveryId, receiveCount: String(delivery.receiveCount) }),
        );
        const crash = tools.shouldFail(); // about one invocation in twenty
        const response = await invocation(crash)({ Records: records }, lambdaContext(30_000, "babelqueue-demo"));
        if (crash) return records.map(() => false); // no response reached Lambda: every record returns
        const failed = new Set(response.batchItemFailures.map((failure) => failure.itemIdentifier));
        return records.map((record) => !failed.has(record.messageId));
      };
    });
    // The truth is in the table: rows the committed transactions wrote.
    const counts = await effectCounts(client, effects);
    let total = 0;
    let repeated = 0;
    for (const n of counts.values()) {
      total += n;
      repeated += Math.max(0, n - 1);
    }
    return { ...report, effects: total, duplicateEffects: repeated, lost: report.uniqueIds - counts.size };
  } finally {
    await local.stop();
  }
}
