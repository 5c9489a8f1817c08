/**
 * `kafkaHandler`: an AWS Lambda handler for Amazon MSK and self-managed Apache Kafka event sources
 * (export `babelqueue-serverless/lambda`), with the same options and engine as `sqsHandler`.
 *
 * A thin adapter over the batch engine (src/engine/), which makes every decision:
 * - each record (read by kafka-records.ts) becomes a `Delivery`: its base64-decoded value is the
 *   body (the BabelQueue envelope, as bytes); its headers, decoded as UTF-8, are `ctx.headers`;
 *   its FIFO group is its partition, "<topic>-<partition>", so the records of one partition run in
 *   offset order and, after the partition's first record that is not acknowledged (failed, parked
 *   in flight, invalid, store error), the rest of that partition is not run;
 * - BabelQueue's Kafka binding (conformance manifest block `kafka`): attempts = the `bq-attempts`
 *   header when present — AUTHORITATIVE, not a max with the body's (Kafka has no delivery count) —
 *   else the body's own `attempts`; the `bq-schema-version` header is checked as it is BEFORE the
 *   value is decoded (src/schema-gate.ts): absent or ASCII-blank or exactly "1" decodes, anything
 *   else is `invalid` without decoding;
 * - a record that cannot be read (no value, a value that is not base64, headers that are not byte
 *   arrays) is `invalid`: retried, then Lambda's on-failure destination — never dropped unless
 *   `onInvalid: "drop"` says so, never a crash of the batch.
 *
 * The partial batch response. Lambda's Kafka event source mappings read
 *   { "batchItemFailures": [ { "itemIdentifier": { "partition": "<topic>-<partition>", "offset": <number> } } ] }
 * — an OBJECT identifier, `partition` being the same "<topic>-<partition>" string as the event's
 * `records` keys, `offset` a number (the flat string identifier of SQS / Kinesis is not valid
 * here). Sources: AWS, "Configuring error handling controls for Kafka event sources" (partial batch
 * response; provisioned poller mode is required for it),
 * https://docs.aws.amazon.com/lambda/latest/dg/kafka-retry-configurations.html; Powertools for AWS
 * Lambda (Python), `aws_lambda_powertools/utilities/batch/base.py` `_collect_kafka_failures` (commit
 * 0233a9df6d112fc06ca8537a13b994191fdad542), which emits
 * `{"itemIdentifier": {"partition": f"{msg.topic}-{msg.partition}", "offset": msg.offset}}` for every
 * failed record, and its `KafkaItemIdentifier(TypedDict): partition: str; offset: int` (types.py).
 *
 * Which records are listed: per partition, its first record that is not acknowledged and EVERY
 * later record of that partition in the batch — those the engine blocked (a later copy of an id that
 * already ran included) and any acknowledged after it (a record the engine acknowledged after one it
 * did not must still not have its offset committed first). Powertools lists every failed record; a Kafka consumer can only commit one offset per
 * partition, so Lambda resumes each partition at its lowest listed offset (as it checkpoints at the
 * lowest listed sequence number on Kinesis). Listing the whole tail changes nothing there, and is
 * still correct should Lambda retry only the listed records: nothing after a failure is ever
 * acknowledged past it. Records of the tail whose effect is already committed come back as
 * `duplicate`, so their effects do not run again.
 *
 * The lease, the deadline guard, option checks and observability (messaging system "kafka") are
 * the Lambda handlers' shared part (lambda-shared.ts), as for `sqsHandler`.
 *
 * Never throws for a record's sake. Two cases fail the whole invocation (Lambda then retries the
 * batch; nothing is acknowledged): an event that is not a Kafka event but carries records of
 * another source (`Records`: SQS, Kinesis, DynamoDB Streams — answering it as "nothing failed"
 * would acknowledge them), and a record to retry that has no topic, partition or offset (no
 * identifier can name it). Should the engine itself fail, every record is reported as failed.
 *
 * What this is *not*: a Kafka client, a retry loop or a DLQ. Retries, the on-failure destination
 * and offsets are the event source mapping's job (MaximumRetryAttempts, DestinationConfig).
 */
import type { Context, MSKEvent, MSKRecord, SelfManagedKafkaEvent } from "aws-lambda";
import type { MessageResult } from "../src/decision.js";
import type { Delivery } from "../src/engine/index.js";
import type { Envelope } from "../src/envelope.js";
import { schemaVersionRejection } from "../src/schema-gate.js";
import { type KafkaRecordView, recordsOf } from "./kafka-records.js";
import { type LambdaHandlerOptions, lambdaBatchRunner, refuseEvent as refuse, unacknowledgedTail } from "./lambda-shared.js";

/** An Amazon MSK (`aws:kafka`) or self-managed Kafka (`SelfManagedKafka`) event. */
export type KafkaEvent = MSKEvent | SelfManagedKafkaEvent;

/** One Kafka record as Lambda delivers it (the MSK and self-managed shapes are the same). */
export type KafkaRecord = MSKRecord;

/** One record Lambda should deliver again: its partition (`<topic>-<partition>`) and offset. */
export interface KafkaBatchItemFailure {
  itemIdentifier: { partition: string; offset: number };
}

/** The partial batch response of a Kafka event source mapping with `ReportBatchItemFailures`. */
export interface KafkaBatchResponse {
  batchItemFailures: KafkaBatchItemFailure[];
}

/** What `handle` receives next to the message (plus the engine's `key`, `attempts` and `dedupe`). */
export interface KafkaRuntimeContext {
  /** The Kafka record as Lambda delivered it (`topic`, `partition`, `offset`, `timestamp`, base64 `key` and `value`, raw `headers`). */
  readonly record: KafkaRecord;
  /** The Lambda invocation's context. */
  readonly lambdaContext: Context;
  /** The record's headers as UTF-8 strings by name: BabelQueue's `bq-*` headers, `traceparent`, … */
  readonly headers: Readonly<Record<string, string>>;
}

/**
 * Options of `kafkaHandler`: the same as `sqsHandler`'s — the store, the side effect (`handle`),
 * the engine's options, the lease margin and observability. Unknown keys are refused. A `parse`
 * option receives the record's value as bytes (a `Uint8Array`).
 */
export interface KafkaHandlerOptions<Message = Envelope> extends LambdaHandlerOptions<Message, KafkaRuntimeContext> {}

/** The Lambda handler `kafkaHandler` returns: an MSK or self-managed Kafka event in, the Kafka partial batch response out. */
export type KafkaHandler = (event: KafkaEvent, context: Context) => Promise<KafkaBatchResponse>;

/** The event sources a Kafka event may name ("aws:SelfManagedKafka" appears in some samples). */
const KAFKA_SOURCES = new Set(["aws:kafka", "SelfManagedKafka", "aws:SelfManagedKafka"]);

/** Fails the invocation: the batch must be retried whole (see the header for the two cases). */
function refuseEvent(reason: string): never {
  return refuse("kafkaHandler", reason);
}

/** True for a Kafka event; throws for records of another event source; false for an empty event. */
function isKafkaEvent(event: unknown): boolean {
  if (typeof event !== "object" || event === null) return false;
  const fields = event as Record<string, unknown>;
  const source = fields.eventSource;
  if (source !== undefined && !(typeof source === "string" && KAFKA_SOURCES.has(source))) refuseEvent("the event is not from a Kafka event source");
  if (Array.isArray(fields.Records) && fields.Records.length > 0) refuseEvent("the event carries `Records` of another event source");
  return true;
}

function failureOf(view: KafkaRecordView): KafkaBatchItemFailure {
  if (view.partition === undefined || view.offset === undefined) refuseEvent("a record to retry has no topic, partition or offset");
  return { itemIdentifier: { partition: view.partition, offset: view.offset } };
}

function deliveryOf(view: KafkaRecordView, lambdaContext: Context): Delivery<KafkaRuntimeContext> {
  const { record, headers, partition, offset } = view;
  const rejected = view.unreadable ?? schemaVersionRejection(view.schemaVersion);
  return {
    body: view.value,
    ...(rejected === undefined ? {} : { rejected }),
    ...(view.attempts === undefined ? {} : { attempts: view.attempts }),
    ...(partition === undefined ? {} : { group: partition }),
    ...(partition === undefined || offset === undefined ? {} : { messageId: `${partition}@${offset}` }),
    headers,
    context: { record, lambdaContext, headers },
  };
}

/**
 * An MSK / self-managed Kafka Lambda handler: each record's effect once per BabelQueue `meta.id`,
 * partitions in offset order, failures reported as a Kafka partial batch response. The event
 * source mapping needs `FunctionResponseTypes: [ReportBatchItemFailures]`, which needs provisioned
 * poller mode.
 *
 * @example
 * ```ts
 * import { kafkaHandler } from "babelqueue-serverless/lambda";
 * import { DynamoDBStore } from "babelqueue-serverless/dynamodb";
 *
 * export const handler = kafkaHandler({
 *   store: new DynamoDBStore({ table: process.env.IDEMPOTENCY_TABLE!, namespace: "orders-kafka" }),
 *   handle: async (envelope, ctx) => {
 *     await chargeCard(envelope.data); // throw to have this record (and the rest of its partition) retried
 *   },
 * });
 * ```
 */
export function kafkaHandler<Message = Envelope>(options: KafkaHandlerOptions<Message>): KafkaHandler {
  const run = lambdaBatchRunner<Message, KafkaRuntimeContext>("kafkaHandler", options, "kafka");

  return async (event, lambdaContext) => {
    if (!isKafkaEvent(event)) return { batchItemFailures: [] };
    const views = recordsOf(event);
    if (views.length === 0) return { batchItemFailures: [] };
    let results: MessageResult[] | undefined;
    try {
      const deliveries = views.map((view) => deliveryOf(view, lambdaContext));
      const topic = (views[0]?.record as Partial<KafkaRecord> | undefined)?.topic;
      results = await run({ deliveries, lambdaContext, queue: typeof topic === "string" && topic !== "" ? topic : undefined });
    } catch {
      // The engine never throws for a record; if it throws at all, nothing is known to be done.
      results = undefined;
    }
    // Views are grouped by partition in offset order: from a partition's first unacknowledged record on, list the rest of it.
    const listed = unacknowledgedTail(
      views.length,
      (index) => results?.[index]?.ack === true,
      (index) => views[index]?.partition,
    );
    return { batchItemFailures: listed.map((index) => failureOf(views[index] as KafkaRecordView)) };
  };
}
