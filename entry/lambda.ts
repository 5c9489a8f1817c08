/**
 * `babelqueue-serverless/lambda`: the AWS Lambda handlers — `sqsHandler` for SQS event sources,
 * `kafkaHandler` for Amazon MSK and self-managed Kafka event sources.
 *
 * The list is deliberate and pinned by test/package/exports.test.ts.
 *
 * @module babelqueue-serverless/lambda
 */
import * as sqs from "../handlers/lambda-sqs.js";

export { type SqsHandler, type SqsHandlerOptions, type SqsRuntimeContext, sqsHandler } from "../handlers/lambda-sqs.js";
// The types `parks` takes; the extension itself is `babelqueue-serverless/lambda/parks` (it imports @aws-sdk/client-sqs).
export type { ParkOutcome, SqsParks } from "../handlers/sqs-parks.js";
export {
  type KafkaBatchItemFailure,
  type KafkaBatchResponse,
  type KafkaEvent,
  type KafkaHandler,
  type KafkaHandlerOptions,
  type KafkaRecord,
  type KafkaRuntimeContext,
  kafkaHandler,
} from "../handlers/lambda-kafka.js";

/** @deprecated Internal to `sqsHandler` (it reconciles attempts for you: `ctx.attempts`). Removed in 0.3.0. */
export const redeliveriesOf: typeof sqs.redeliveriesOf = sqs.redeliveriesOf;
/** @deprecated Internal to `sqsHandler` (FIFO groups are kept in order for you). Removed in 0.3.0. */
export const fifoGroupOf: typeof sqs.fifoGroupOf = sqs.fifoGroupOf;
/** @deprecated Internal to `sqsHandler` (the handler gets `ctx.headers`). Removed in 0.3.0. */
export const headersOf: typeof sqs.headersOf = sqs.headersOf;
