/**
 * Parks and receives (issue "One seen-set", item 4), measured. The waiting delivery: another worker
 * holds an id's claim — a Laravel worker of the same BabelQueue fleet (its PHP `RedisStore` claim,
 * `SET bq:idem:<id> 1 PX <ttl> NX`, then `SET … 2` when done), or another consumer of our own on
 * DynamoDB — for 3 s and finishes after 2 s, while a copy of the message reaches our Lambda fleet.
 * SQS is simulated — a queue with a 300 ms visibility timeout, receive counts and a redrive policy
 * (maxReceiveCount 5 → DLQ) — and every invocation is the real `sqsHandler` on a real store.
 *
 * - Without `parks`, the copy is parked and comes back after every visibility timeout while the
 *   other worker holds the id: each receive raises its `ApproximateReceiveCount`, and past 5 the
 *   redrive policy sends a perfectly good duplicate to the DLQ.
 * - With `parks`, the handler sets the parked record's visibility to the claim's remaining time, so
 *   it comes back once, after the claim, and is acknowledged as a duplicate.
 *
 * The visibility change reaches the simulated queue through an in-process SQS client stand-in (the
 * queue itself is simulated; the real client and the real request are tested in
 * test/handlers/sqs-parks.test.ts). Every effect runs exactly once in both modes.
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { SQSEvent } from "aws-lambda";
import { Redis } from "ioredis";
import { afterAll, describe, expect, inject, it } from "vitest";
import { DynamoDBStore, createIdempotencyTable } from "../../entry/dynamodb.js";
import type { Store } from "../../entry/index.js";
import { sqsHandler } from "../../entry/lambda.js";
import { sqsParks } from "../../entry/lambda-parks.js";
import { RedisStore, ioredisScriptClient } from "../../entry/redis.js";
import { localClientConfig } from "../../scripts/dynamodb-local.mjs";
import { STANDARD_QUEUE_ARN, lambdaContext, sqsRecord } from "../../scripts/lambda-events.js";
import { envelopeBody } from "../support/envelopes.js";

const VISIBILITY_MS = 300;
const MAX_RECEIVE_COUNT = 5;
/** The other worker's claim, and when it commits. */
const HOLD_MS = 3_000;
const WORK_MS = 2_000;
const IDS = 12;

/** Where the other worker holds an id, and the store our consumers use. */
interface Scenario {
  readonly name: string;
  store(tag: string): Promise<Store>;
  /** The other worker: claims `id` for HOLD_MS now, commits it after WORK_MS. */
  hold(tag: string, id: string): Promise<void>;
  close(): Promise<void>;
}

function laravelOnRedis(): Scenario {
  const redis = new Redis(inject("redisPort"), "127.0.0.1", { lazyConnect: true });
  const connected = redis.connect();
  return {
    name: "RedisStore, layout babelqueue-php (a Laravel worker holds the id)",
    store: async (tag) => {
      await connected;
      return new RedisStore({ client: ioredisScriptClient(redis), layout: "babelqueue-php", prefix: `bq:idem:${tag}:` });
    },
    hold: async (tag, id) => {
      await connected;
      // The PHP SDK's own commands: claim with a TTL, then mark seen.
      expect(await redis.set(`bq:idem:${tag}:${id}`, "1", "PX", HOLD_MS, "NX")).toBe("OK");
      setTimeout(() => void redis.set(`bq:idem:${tag}:${id}`, "2"), WORK_MS);
    },
    close: async () => redis.disconnect(),
  };
}

function otherConsumerOnDynamoDB(): Scenario {
  const client = new DynamoDBClient(localClientConfig(inject("dynamodbEndpoint")));
  const table = `parks-${Date.now().toString(36)}`;
  const created = createIdempotencyTable(client, { table });
  return {
    name: "DynamoDBStore (another consumer holds the id)",
    store: async (tag) => {
      await created;
      return new DynamoDBStore({ table, client, namespace: tag });
    },
    hold: async (tag, id) => {
      await created;
      const other = new DynamoDBStore({ table, client, namespace: tag });
      expect((await other.claim(id, HOLD_MS)).status).toBe("claimed");
      setTimeout(() => void other.remember(id), WORK_MS);
    },
    close: async () => client.destroy(),
  };
}

interface Message {
  readonly id: string;
  readonly messageId: string;
  receives: number;
  visibleAt: number;
  receiptHandle: string;
  done: boolean;
  deadLettered: boolean;
}

interface ParkFigures {
  readonly store: string;
  readonly parks: boolean;
  readonly duplicates: number;
  /** Receives of each id's second copy (the one that waits behind the first run), mean and max. */
  readonly receivesMean: number;
  readonly receivesMax: number;
  readonly deadLettered: number;
  readonly effects: number;
  readonly seconds: number;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function run(scenario: Scenario, parks: boolean): Promise<ParkFigures> {
  const tag = `parks-${parks ? "on" : "off"}-${Date.now().toString(36)}`;
  const store: Store = await scenario.store(tag);
  const messages: Message[] = [];
  for (let i = 0; i < IDS; i += 1) {
    await scenario.hold(tag, `${tag}-${i}`);
    messages.push({ id: `${tag}-${i}`, messageId: `${tag}-${i}-copy`, receives: 0, visibleAt: 0, receiptHandle: "", done: false, deadLettered: false });
  }
  const byHandle = new Map<string, Message>();
  // Stands in for SQS's ChangeMessageVisibilityBatch on this simulated queue.
  const client = {
    send: async (command: unknown) => {
      const input = (command as { input: { Entries: { ReceiptHandle: string; VisibilityTimeout: number }[] } }).input;
      for (const entry of input.Entries) {
        const message = byHandle.get(entry.ReceiptHandle);
        if (message !== undefined) message.visibleAt = Date.now() + entry.VisibilityTimeout * 1000;
      }
      return { Successful: input.Entries.map((_, i) => ({ Id: `p${i}` })), Failed: [] };
    },
  };
  // Our effects: none may run — the other worker runs each id's effect (once, in `hold`).
  let effects = 0;
  const handler = sqsHandler({
    store,
    logger: false,
    handle: async () => {
      effects += 1;
    },
    ...(parks ? { parks: sqsParks({ client, marginSeconds: 0 }) } : {}),
  });
  const started = Date.now();
  const invocations: Promise<void>[] = [];
  const live = () => messages.some((message) => !message.done && !message.deadLettered);
  while (live() && Date.now() - started < 60_000) {
    const now = Date.now();
    const batch = messages.filter((message) => !message.done && !message.deadLettered && message.visibleAt <= now).slice(0, 10);
    for (const message of batch) {
      // The redrive policy: past maxReceiveCount, the next receive moves it to the DLQ instead.
      if (message.receives >= MAX_RECEIVE_COUNT) {
        message.deadLettered = true;
        continue;
      }
      message.receives += 1;
      message.receiptHandle = `${message.messageId}-r${message.receives}`;
      byHandle.set(message.receiptHandle, message);
      message.visibleAt = now + VISIBILITY_MS;
    }
    const received = batch.filter((message) => !message.deadLettered);
    if (received.length > 0) {
      const event: SQSEvent = {
        Records: received.map((message) => {
          const record = sqsRecord(envelopeBody(message.id), { messageId: message.messageId, receiveCount: String(message.receives), arn: STANDARD_QUEUE_ARN });
          return { ...record, receiptHandle: message.receiptHandle };
        }),
      };
      invocations.push(
        handler(event, lambdaContext(10_000)).then((response) => {
          const failed = new Set(response.batchItemFailures.map((failure) => failure.itemIdentifier));
          for (const message of received) if (!failed.has(message.messageId)) message.done = true;
        }),
      );
    }
    await sleep(20);
  }
  await Promise.all(invocations);
  return {
    store: scenario.name,
    parks,
    duplicates: messages.length,
    receivesMean: messages.reduce((sum, message) => sum + message.receives, 0) / messages.length,
    receivesMax: Math.max(...messages.map((message) => message.receives)),
    deadLettered: messages.filter((message) => message.deadLettered).length,
    effects,
    seconds: (Date.now() - started) / 1000,
  };
}

const figures: ParkFigures[] = [];

describe("parks: receives per parked message, with and without", () => {
  for (const make of [laravelOnRedis, otherConsumerOnDynamoDB]) {
    const scenario = make();
    describe(scenario.name, () => {
      it("without parks the copy is received every visibility timeout and reaches the DLQ; with parks, once more after the claim", { timeout: 120_000 }, async () => {
        const off = await run(scenario, false);
        const on = await run(scenario, true);
        figures.push(off, on);
        // The other worker ran every effect; our consumers ran none, in both modes.
        expect(off.effects).toBe(0);
        expect(on.effects).toBe(0);
        expect(off.receivesMean).toBeGreaterThanOrEqual(MAX_RECEIVE_COUNT);
        expect(off.deadLettered).toBe(IDS);
        expect(on.receivesMax).toBeLessThanOrEqual(2);
        expect(on.deadLettered).toBe(0);
      });
      afterAll(() => scenario.close());
    });
  }
});

afterAll(() => {
  if (figures.length === 0) return;
  const lines = [
    "",
    `Parks: ${IDS} ids held by another worker for ${HOLD_MS} ms (done after ${WORK_MS} ms), a copy of each on the queue; visibility timeout ${VISIBILITY_MS} ms, maxReceiveCount ${MAX_RECEIVE_COUNT}`,
    "| store | parks | receives per parked message (mean / max) | sent to the DLQ | our effects | seconds |",
    "|:--|:--|--:|--:|--:|--:|",
    ...figures.map((f) => `| ${f.store} | ${f.parks ? "on" : "off"} | ${f.receivesMean.toFixed(1)} / ${f.receivesMax} | ${f.deadLettered} | ${f.effects} | ${f.seconds.toFixed(1)} |`),
  ];
  console.log(lines.join("\n"));
});
