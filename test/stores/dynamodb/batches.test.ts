/**
 * DynamoDBStore's batch steps on DynamoDB Local: ids that fail alone, and a bound on requests in flight.
 *
 * - Per-id answers of `claimMany` (issue 19): a throttled id answers `{ status: "failed", error }`,
 *   the others are claimed and stay claimed; through `sqsHandler` the throttled records alone are
 *   reported as batch item failures, and their redelivery runs each effect once. Throttling is a fault
 *   DynamoDB Local cannot produce: a client middleware (test-only) refuses the chosen ids' PutItem with
 *   `ProvisionedThroughputExceededException`, as DynamoDB does once the SDK's retries are spent; every
 *   other request reaches the real backend.
 * - Large batches (issue 20): `claimMany`, `rememberMany`, `releaseMany` and `seenMany` of 240 ids keep
 *   at most `maxConcurrentRequests` requests in flight, counted both by the store and on the client.
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { SQSEvent } from "aws-lambda";
import { beforeAll, describe, expect, inject, it } from "vitest";
import type { ClaimRef } from "../../../src/contract.js";
import { StoreUnavailableError } from "../../../src/errors.js";
import { DynamoDBStore, createIdempotencyTable, idempotencyTableDefinition } from "../../../entry/dynamodb.js";
import { sqsHandler } from "../../../entry/lambda.js";
import { commandsSent, localClientConfig } from "../../../scripts/dynamodb-local.mjs";
import { lambdaContext, sqsRecord } from "../../../scripts/lambda-events.js";
import { throttlingClient, throughputExceeded } from "../../support/dynamodb-throttle.js";

const endpoint = inject("dynamodbEndpoint");
const table = `idempotency-batches-${Date.now().toString(36)}`;

beforeAll(async () => {
  await createIdempotencyTable(new DynamoDBClient(localClientConfig(endpoint)), idempotencyTableDefinition(table));
});

const body = (id: string) =>
  JSON.stringify({ job: "orders.charge", trace_id: `trace-${id}`, data: { id }, meta: { id, queue: "orders", schema_version: 1 }, attempts: 0 });
const event = (ids: readonly string[], receiveCount: number): SQSEvent => ({
  Records: ids.map((id) => sqsRecord(body(id), { messageId: `m-${id}`, receiveCount: String(receiveCount) })),
});

describe("claimMany answers a throttled id alone (mock: throttling, which DynamoDB Local cannot produce)", () => {
  it("the others are claimed; the throttled ones fail with the store's error, hold nothing, cost no cleanup request", async () => {
    const ids = Array.from({ length: 10 }, (_, i) => `t-${i}`);
    const throttled = new Set(["t-2", "t-5", "t-9"]);
    const { client, sent } = throttlingClient(endpoint, throttled);
    const namespace = `throttle-${Date.now().toString(36)}`;
    const store = new DynamoDBStore({ table, namespace, client });
    const answers = await store.claimMany(ids);
    expect(answers.map((answer, i) => [ids[i], answer.status])).toEqual(ids.map((id) => [id, throttled.has(id) ? "failed" : "claimed"]));
    for (const [i, answer] of answers.entries()) {
      if (answer.status !== "failed") continue;
      expect(answer.error, ids[i]).toBeInstanceOf(StoreUnavailableError);
      expect((answer.error as Error).message).toContain("ProvisionedThroughputExceededException");
      expect((answer.error as Error).message).not.toContain(namespace);
    }
    // A refused put wrote nothing: no fenced delete was sent for it, and nothing else was released.
    expect(sent.filter((name) => name === "DeleteItemCommand")).toHaveLength(0);
    const honest = new DynamoDBStore({ table, namespace, clientConfig: localClientConfig(endpoint) });
    for (const id of ids) expect((await honest.claim(id)).status, id).toBe(throttled.has(id) ? "claimed" : "in-flight");
  });

  it("through sqsHandler: only the throttled records come back as failures; their redelivery runs each effect once", async () => {
    const ids = Array.from({ length: 10 }, (_, i) => `h-${Date.now().toString(36)}-${i}`);
    const throttled = new Set([ids[1] as string, ids[6] as string]);
    const { client, switchable } = throttlingClient(endpoint, throttled);
    const runs = new Map<string, number>();
    const handler = sqsHandler({
      store: new DynamoDBStore({ table, namespace: "throttle-handler", client }),
      logger: false,
      handle: async (_envelope, ctx) => void runs.set(ctx.key ?? "", (runs.get(ctx.key ?? "") ?? 0) + 1),
    });
    const first = await handler(event(ids, 1), lambdaContext(30_000));
    expect(first.batchItemFailures.map((failure) => failure.itemIdentifier).sort()).toEqual([...throttled].map((id) => `m-${id}`).sort());
    expect([...runs.keys()].sort()).toEqual(ids.filter((id) => !throttled.has(id)).sort());
    expect(switchable.refused).toBe(2);
    // The throttling is over; SQS redelivers the whole batch (receive count 2).
    switchable.on = false;
    const second = await handler(event(ids, 2), lambdaContext(30_000));
    expect(second.batchItemFailures).toEqual([]);
    expect(ids.map((id) => runs.get(id))).toEqual(ids.map(() => 1));
  });
});

/**
 * A client whose claim puts, per attempt below the SDK's retry middleware: attempt 1 reaches DynamoDB
 * Local and its answer is dropped (a reset socket); later attempts are throttled. The error the SDK
 * hands back is the last attempt's (throttled), though the first one wrote the claim.
 */
function landedThenThrottled(): { client: DynamoDBClient; attempts: () => number } {
  const client = new DynamoDBClient(localClientConfig(endpoint, { maxAttempts: 3 }));
  let claimAttempts = 0;
  client.middlewareStack.add(
    (next) => async (args) => {
      const input = (args as { input?: { ConditionExpression?: string; Item?: unknown } }).input;
      if (input?.ConditionExpression === undefined || input.Item === undefined) return next(args);
      claimAttempts += 1;
      if (claimAttempts === 1) {
        await next(args);
        throw Object.assign(new Error("socket hang up"), { name: "Error", code: "ECONNRESET" });
      }
      throw Object.assign(throughputExceeded(), { $metadata: { httpStatusCode: 400 } });
    },
    { step: "finalizeRequest", priority: "low", name: "landedThenThrottled" },
  );
  return { client, attempts: () => claimAttempts };
}

describe("claimMany after the SDK's retries (mock: a lost answer and throttling, which DynamoDB Local cannot produce)", () => {
  it("a put that landed on its first attempt, answer lost, then throttled on the retries: the id fails and holds nothing", async () => {
    const { client, attempts } = landedThenThrottled();
    const sent = commandsSent(client);
    const namespace = `lost-${Date.now().toString(36)}`;
    const store = new DynamoDBStore({ table, namespace, client, precheck: "never" });
    const [answer] = await store.claimMany(["order-7"], 60_000);
    expect(attempts()).toBe(3);
    expect(answer?.status).toBe("failed");
    expect(((answer as { error?: Error }).error as Error).message).toContain("ProvisionedThroughputExceededException");
    // The claim the first attempt wrote was deleted (fenced by its token): a redelivery claims at once.
    expect(sent.filter((name) => name === "DeleteItemCommand")).toHaveLength(1);
    const honest = new DynamoDBStore({ table, namespace, clientConfig: localClientConfig(endpoint) });
    expect(await honest.inspect("order-7")).toBeNull();
    expect((await honest.claim("order-7")).status).toBe("claimed");
  });

  it("the same through claim(): it throws the store's error and holds nothing either", async () => {
    const { client, attempts } = landedThenThrottled();
    const sent = commandsSent(client);
    const namespace = `lost-one-${Date.now().toString(36)}`;
    const store = new DynamoDBStore({ table, namespace, client, precheck: "never" });
    await expect(store.claim("order-8", 60_000)).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(attempts()).toBe(3);
    expect(sent.filter((name) => name === "DeleteItemCommand")).toHaveLength(1);
    const honest = new DynamoDBStore({ table, namespace, clientConfig: localClientConfig(endpoint) });
    expect(await honest.inspect("order-8")).toBeNull();
  });
});

describe("a batch answer keyed by the table's other name (mock: DynamoDB Local keys answers by the name it was sent)", () => {
  // A table may be given as its ARN; a batch answer's maps are "table name or table ARN" to items.
  const arn = `arn:aws:dynamodb:eu-west-1:123456789012:table/${table}`;
  const keyedByArn = <T>(map: Record<string, T> | undefined): Record<string, T> | undefined =>
    map === undefined ? undefined : Object.fromEntries(Object.entries(map).map(([name, value]) => [name === table ? arn : name, value]));

  it("rememberMany resends items left unprocessed under the ARN; seenMany reads items answered under it", async () => {
    const client = new DynamoDBClient(localClientConfig(endpoint));
    let writes = 0;
    client.middlewareStack.add(
      (next) => async (args) => {
        const input = (args as { input?: { RequestItems?: Record<string, unknown[]> } }).input;
        const requests = input?.RequestItems?.[table];
        // The first BatchWriteItem: not sent, every item answered as unprocessed, under the ARN.
        if (Array.isArray(requests) && (requests[0] as { PutRequest?: unknown } | undefined)?.PutRequest !== undefined && writes++ === 0) {
          return { output: { UnprocessedItems: { [arn]: requests }, $metadata: {} }, response: {} } as never;
        }
        const answer = await next(args);
        const output = answer.output as { Responses?: Record<string, unknown>; UnprocessedKeys?: Record<string, unknown> };
        if (output.Responses !== undefined) output.Responses = keyedByArn(output.Responses);
        if (output.UnprocessedKeys !== undefined) output.UnprocessedKeys = keyedByArn(output.UnprocessedKeys);
        return answer;
      },
      { step: "initialize", name: "keyedByArn" },
    );
    const namespace = `arn-${Date.now().toString(36)}`;
    const store = new DynamoDBStore({ table, namespace, client });
    const ids = ["arn-a", "arn-b", "arn-c"];
    await store.rememberMany(ids);
    expect(writes).toBe(2);
    const honest = new DynamoDBStore({ table, namespace, clientConfig: localClientConfig(endpoint) });
    expect(await honest.seenMany(ids)).toEqual([true, true, true]);
    expect(await store.seenMany([...ids, "arn-absent"])).toEqual([true, true, true, false]);
  });
});

describe("a large batch keeps at most maxConcurrentRequests requests in flight", () => {
  it("claimMany, rememberMany, releaseMany and seenMany of 240 ids: 8 in flight at most", async () => {
    const client = new DynamoDBClient(localClientConfig(endpoint));
    let inFlight = 0;
    let peak = 0;
    // Counted on the client, in the SDK's finalize step (one count per request, its retries inside it).
    client.middlewareStack.add(
      (next) => async (args) => {
        inFlight += 1;
        peak = Math.max(peak, inFlight);
        try {
          return await next(args);
        } finally {
          inFlight -= 1;
        }
      },
      { step: "finalizeRequest", priority: "high", name: "inFlight" },
    );
    const store = new DynamoDBStore({ table, namespace: `large-${Date.now().toString(36)}`, client, maxConcurrentRequests: 8 });
    const ids = Array.from({ length: 240 }, (_, i) => `large-${i}`);
    const claims = await store.claimMany(ids);
    expect(claims.every((claim) => claim.status === "claimed")).toBe(true);
    expect(peak).toBe(8);
    const half = ids.slice(0, 120);
    await store.rememberMany(half);
    const refs: ClaimRef[] = ids.slice(120).map((id, i) => ({ id, token: (claims[120 + i] as { token: string }).token }));
    await store.releaseMany(refs);
    const seen = await store.seenMany(ids);
    expect(seen.filter(Boolean)).toHaveLength(120);
    expect(peak).toBe(8);
    expect(store.peakConcurrentRequests).toBe(8);
    // Released ones are free again, committed ones are done.
    const again = await store.claimMany([ids[0] as string, ids[239] as string]);
    expect(again.map((claim) => claim.status)).toEqual(["done", "claimed"]);
  });

  it("defaults to 50 (the SDK's default socket pool) and refuses a bound that is not an integer from 1 to 10000", () => {
    expect(new DynamoDBStore({ table }).maxConcurrentRequests).toBe(50);
    for (const bad of [0, -1, 1.5, 10_001, Number.NaN]) {
      expect(() => new DynamoDBStore({ table, maxConcurrentRequests: bad }), String(bad)).toThrow(/maxConcurrentRequests/);
    }
  });
});
