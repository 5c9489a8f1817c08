/**
 * The example Kafka consumer `serverless.yml` deploys: an Amazon MSK-triggered Lambda that runs its
 * side effect once per BabelQueue `meta.id`, deduplicated in the DynamoDB table the same file
 * creates, each partition in offset order, failures answered as a Kafka partial batch response.
 *
 * In your own project import from the package instead of the relative paths:
 *   import { kafkaHandler } from "babelqueue-serverless/lambda";
 *   import { DynamoDBStore } from "babelqueue-serverless/dynamodb";
 *
 * What this is *not*: a real side effect. It logs the job name, the ids and where the record sits
 * (never the payload); put your own work where the comment says.
 */
import { kafkaHandler } from "../../handlers/lambda-kafka.js";
import { DynamoDBStore } from "../../entry/dynamodb.js";

const table = process.env.IDEMPOTENCY_TABLE;
if (table === undefined || table === "") throw new Error("IDEMPOTENCY_TABLE is not set");

export const handler = kafkaHandler({
  store: new DynamoDBStore({
    table,
    // One namespace per consumer: this consumer and the SQS one each run a message once.
    namespace: process.env.IDEMPOTENCY_NAMESPACE ?? "orders-kafka-consumer",
  }),
  handle: async (envelope, ctx) => {
    // The side effect goes here. Throw to have this record — and the rest of its partition — retried.
    console.log(
      JSON.stringify({
        job: envelope.job,
        id: ctx.key,
        trace_id: envelope.trace_id,
        topic: ctx.record.topic,
        partition: ctx.record.partition,
        offset: ctx.record.offset,
        attempts: ctx.attempts,
        dedupe: ctx.dedupe,
      }),
    );
  },
  // As for sqsHandler: outcome logs by default (never a payload); `metrics: batchMetrics()`
  // (babelqueue-serverless/metrics) adds CloudWatch EMF lines; `tracing: otelTracing({ api })`
  // (babelqueue-serverless/tracing) OpenTelemetry spans (messaging.system "kafka").
});
