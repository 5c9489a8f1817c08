/**
 * `sqsHandler` as the base handler of a Middy (`@middy/core`) stack with Powertools' Logger
 * (`injectLambdaContext`) and Metrics (`logMetrics`) middlewares, against DynamoDB Local, on SQS
 * events shaped as Lambda delivers them: the partial batch response passes through Middy
 * untouched, the outcome lines go to the Powertools Logger with its Lambda context keys, and the
 * counts go to the Powertools Metrics instance that `logMetrics` flushes once per invocation.
 *
 * No extra Middy middleware is needed: the handler is a plain `(event, context)` function, and
 * the Powertools instances are passed as the `logger` / `metrics` options.
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { Logger } from "@aws-lambda-powertools/logger";
import { injectLambdaContext } from "@aws-lambda-powertools/logger/middleware";
import { Metrics } from "@aws-lambda-powertools/metrics";
import { logMetrics } from "@aws-lambda-powertools/metrics/middleware";
import middy from "@middy/core";
import type { SQSBatchResponse, SQSEvent, SQSRecord } from "aws-lambda";
import { afterEach, beforeAll, describe, expect, inject, it, vi } from "vitest";
import { sqsHandler } from "../../handlers/lambda-sqs.js";
import { batchMetrics } from "../../entry/metrics.js";
import { localClientConfig } from "../../scripts/dynamodb-local.mjs";
import { lambdaContext, sqsRecord } from "../../scripts/lambda-events.js";
import { DynamoDBStore, createIdempotencyTable, idempotencyTableDefinition } from "../../entry/dynamodb.js";
import { emfViolations } from "../observability/emf-spec.js";
import { body } from "../observability/harness.js";


const endpoint = inject("dynamodbEndpoint");
const table = `idempotency-middy-${Date.now().toString(36)}`;
let namespaces = 0;
const store = () => {
  namespaces += 1;
  return new DynamoDBStore({ table, namespace: `middy-${namespaces}`, clientConfig: localClientConfig(endpoint) });
};

beforeAll(async () => {
  await createIdempotencyTable(new DynamoDBClient(localClientConfig(endpoint)), idempotencyTableDefinition(table));
});

afterEach(() => {
  vi.restoreAllMocks();
});

/** Captures everything written to stdout and stderr (Powertools writes there, past Lambda's console). */
function captureOutput() {
  const chunks: string[] = [];
  const capture = (chunk: unknown) => {
    chunks.push(String(chunk));
    return true;
  };
  vi.spyOn(process.stdout, "write").mockImplementation(capture);
  vi.spyOn(process.stderr, "write").mockImplementation(capture);
  return () =>
    chunks
      .join("")
      .split("\n")
      .filter((line) => line.startsWith("{"))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
}

const event = (records: SQSRecord[]): SQSEvent => ({ Records: records });
const failedIds = (response: SQSBatchResponse) => response.batchItemFailures.map((failure) => failure.itemIdentifier);

describe("sqsHandler under Middy with Powertools Logger and Metrics", () => {
  it("answers partial batch failures through the stack; outcome lines carry the Lambda context; one EMF document per invocation", async () => {
    const lines = captureOutput();
    const logger = new Logger({ serviceName: "orders-consumer" });
    const metrics = new Metrics({ namespace: "Shop", serviceName: "orders-consumer" });
    let effects = 0;
    const base = sqsHandler({
      store: store(),
      handle: (message) => {
        if (message.data.mode === "throw") throw new Error("payment declined for card 4111-1111-1111-1111");
        effects += 1;
      },
      logger,
      metrics: batchMetrics({ powertools: metrics }),
    });
    const handler = middy(base).use(injectLambdaContext(logger)).use(logMetrics(metrics, { captureColdStartMetric: true }));

    const ok = sqsRecord(body("order-1"), { messageId: "msg-ok" });
    const bad = sqsRecord(body("order-2", { mode: "throw" }), { messageId: "msg-bad" });
    const invalid = sqsRecord("{ not json", { messageId: "msg-invalid" });
    const first = await handler(event([ok, bad, invalid]), lambdaContext(30_000, "orders-consumer"));
    expect(failedIds(first).sort()).toEqual(["msg-bad", "msg-invalid"]);
    expect(effects).toBe(1);

    // Redelivery of the same three: the committed one is a duplicate.
    const again = await handler(
      event([
        sqsRecord(body("order-1"), { messageId: "msg-ok-2", receiveCount: "2" }),
        sqsRecord(body("order-2", { mode: "throw" }), { messageId: "msg-bad-2", receiveCount: "2" }),
      ]),
      lambdaContext(30_000, "orders-consumer"),
    );
    expect(failedIds(again)).toEqual(["msg-bad-2"]);
    expect(effects).toBe(1);

    const output = lines();
    const outcomes = output.filter((line) => line.logger === "babelqueue-serverless");
    expect(outcomes.map((line) => [line.level, line.status, line.key, line.messageId])).toEqual([
      ["WARN", "invalid", undefined, "msg-invalid"],
      ["WARN", "failed", "order-2", "msg-bad"],
      ["INFO", "duplicate", "order-1", "msg-ok-2"],
      ["WARN", "failed", "order-2", "msg-bad-2"],
    ]);
    // Powertools' own keys next to ours: the Lambda context injected by the middleware.
    expect(outcomes[0]).toMatchObject({ service: "orders-consumer", function_name: "orders-consumer", queue: "orders" });
    expect(typeof outcomes[0]?.cold_start).toBe("boolean");
    expect(typeof outcomes[0]?.function_request_id).toBe("string");
    expect(outcomes[0]?.function_request_id).not.toBe(outcomes[2]?.function_request_id);
    expect(JSON.stringify(output)).not.toContain("4111-1111"); // the card, not any 4-digit run: an EMF Timestamp can hold "4111"

    // logMetrics flushes once per invocation: one document of our counts each time.
    const emf = output.filter((line) => line._aws !== undefined);
    for (const document of emf) expect(emfViolations(JSON.stringify(document))).toEqual([]);
    const ours = emf.filter((document) => "Messages" in document);
    expect(ours.map((document) => [document.Messages, document.Ran, document.Duplicate, document.Failed, document.Invalid])).toEqual([
      [3, 1, 0, 1, 1],
      [2, 0, 1, 1, 0],
    ]);
    expect(ours[0]).toMatchObject({ service: "orders-consumer" });
  });

  it("sqsHandler with no observability options also works as a Middy base (the response passes through unchanged)", async () => {
    captureOutput();
    const logger = new Logger({ serviceName: "plain" });
    const metrics = new Metrics({ namespace: "Shop", serviceName: "plain" });
    const handler = middy(sqsHandler({ store: store(), handle: () => undefined }))
      .use(injectLambdaContext(logger))
      .use(logMetrics(metrics));
    const response = await handler(event([sqsRecord(body("plain-1")), sqsRecord("[]", { messageId: "poison" })]), lambdaContext());
    expect(failedIds(response)).toEqual(["poison"]);
  });
});
