/**
 * The example consumer `serverless.yml` deploys: an SQS-triggered Lambda that runs its side
 * effect once per BabelQueue `meta.id`, deduplicated in the DynamoDB table the same file creates.
 *
 * In your own project import from the package instead of the relative paths:
 *   import { sqsHandler } from "babelqueue-serverless/lambda";
 *   import { DynamoDBStore } from "babelqueue-serverless/dynamodb";
 *
 * What this is *not*: a real side effect. It logs the job name and ids (never the payload); put
 * your own work where the comment says.
 */
import { sqsHandler } from "../../handlers/lambda-sqs.js";
import { DynamoDBStore } from "../../entry/dynamodb.js";

const table = process.env.IDEMPOTENCY_TABLE;
if (table === undefined || table === "") throw new Error("IDEMPOTENCY_TABLE is not set");

export const handler = sqsHandler({
  store: new DynamoDBStore({
    table,
    // One namespace per consumer of a queue: two consumers of the same message each run once.
    namespace: process.env.IDEMPOTENCY_NAMESPACE ?? "orders-consumer",
  }),
  handle: async (envelope, ctx) => {
    // The side effect goes here. Throw to have this message (only) retried.
    console.log(
      JSON.stringify({ job: envelope.job, id: ctx.key, trace_id: envelope.trace_id, attempts: ctx.attempts, dedupe: ctx.dedupe }),
    );
  },
  // Every delivery that is not a plain run (duplicate, park, failure, invalid, conflict,
  // commit-failed) and every store error is logged as one JSON line by default, never a payload.
  // `metrics: batchMetrics()` (babelqueue-serverless/metrics) adds CloudWatch EMF lines; `tracing: otelTracing({ api })` (babelqueue-serverless/tracing) OpenTelemetry spans.
});
