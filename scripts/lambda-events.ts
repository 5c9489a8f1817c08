/**
 * SQS events, Amazon MSK / self-managed Kafka events and Lambda contexts shaped as AWS delivers
 * them, for the tests, the demo, `invoke:local` and the benchmark (one place, so every caller
 * exercises the handlers with the same record shapes).
 *
 * What this is *not*: a Lambda runtime. Nothing here invokes anything; it only builds the two
 * arguments a handler receives.
 */
import type { Context, MSKEvent, MSKRecord, MSKRecordHeader, SQSRecord, SelfManagedKafkaEvent } from "aws-lambda";

export const STANDARD_QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:orders";
export const FIFO_QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:orders.fifo";

let counter = 0;

/** What varies between records. */
export interface RecordShape {
  /** ApproximateReceiveCount; null leaves the attribute out. Default "1". */
  receiveCount?: string | null;
  /** MessageGroupId; a group without an ARN puts the record on the FIFO queue. */
  group?: string;
  /** The source queue's ARN. A `.fifo` ARN adds the FIFO attributes. */
  arn?: string;
  messageId?: string;
  /** Message attributes, as SQS delivers them to Lambda. */
  messageAttributes?: SQSRecord["messageAttributes"];
}

export function sqsRecord(body: string, shape: RecordShape = {}): SQSRecord {
  counter += 1;
  const arn = shape.arn ?? (shape.group ? FIFO_QUEUE_ARN : STANDARD_QUEUE_ARN);
  const attributes: Record<string, string> = {
    SentTimestamp: "1760000000000",
    SenderId: "AIDAIENQZJOLO23YVJ4VO",
    ApproximateFirstReceiveTimestamp: "1760000000500",
  };
  if (shape.receiveCount !== null) attributes.ApproximateReceiveCount = shape.receiveCount ?? "1";
  if (arn.endsWith(".fifo")) {
    attributes.SequenceNumber = String(18849496460467696128n + BigInt(counter));
    attributes.MessageGroupId = shape.group ?? "default";
    attributes.MessageDeduplicationId = `dedup-${counter}`;
  }
  return {
    messageId: shape.messageId ?? `059f36b4-87a3-44ab-83d2-${String(counter).padStart(12, "0")}`,
    receiptHandle: `AQEBwJnKyrHigUMZj6rYigCgxlaS3SLy0a${counter}`,
    body,
    attributes: attributes as unknown as SQSRecord["attributes"],
    messageAttributes: shape.messageAttributes ?? {},
    md5OfBody: "e4e68fb7bd0e697a0ae8f1bb342846b3",
    eventSource: "aws:sqs",
    eventSourceARN: arn,
    awsRegion: "us-east-1",
  };
}

/** A Lambda context whose invocation ends `remainingMs` from now. */
export function lambdaContext(remainingMs = 30_000, functionName = "babelqueue-consumer"): Context {
  const deadline = Date.now() + remainingMs;
  return {
    callbackWaitsForEmptyEventLoop: false,
    functionName,
    functionVersion: "$LATEST",
    invokedFunctionArn: `arn:aws:lambda:us-east-1:123456789012:function:${functionName}`,
    memoryLimitInMB: "256",
    awsRequestId: crypto.randomUUID(),
    logGroupName: `/aws/lambda/${functionName}`,
    logStreamName: "2026/01/01/[$LATEST]0123456789abcdef",
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}

// ---- Kafka (Amazon MSK, self-managed) ----------------------------------------------------------

/** An MSK cluster ARN of the documented shape (https://docs.aws.amazon.com/lambda/latest/dg/with-msk.html). */
export const MSK_CLUSTER_ARN = "arn:aws:kafka:us-east-1:123456789012:cluster/orders-cluster/751d2973-a626-431c-9d4e-d7975eb44dd7-2";
export const KAFKA_TOPIC = "orders";
const BOOTSTRAP_SERVERS = "b-1.orders-cluster.a1bcde.c1.kafka.us-east-1.amazonaws.com:9098,b-2.orders-cluster.a1bcde.c1.kafka.us-east-1.amazonaws.com:9098";

/** What varies between Kafka records. */
export interface KafkaRecordShape {
  /** Default "orders". */
  topic?: string;
  /** Default 0. */
  partition?: number;
  /** Default: the next offset of the record's topic-partition in this process. */
  offset?: number;
  /** Header values as strings (UTF-8 encoded into byte arrays), in order; a name may repeat. */
  headers?: Record<string, string> | readonly (readonly [string, string])[];
  /** The record key (a string, base64-encoded); default none. */
  key?: string;
}

const nextOffsets = new Map<string, number>();

/** Kafka record headers as Lambda delivers them: single-key objects, each value the UTF-8 bytes. */
export function kafkaHeaders(headers: KafkaRecordShape["headers"] = {}): MSKRecordHeader[] {
  const entries = Array.isArray(headers) ? headers : Object.entries(headers);
  return entries.map(([name, value]) => ({ [name]: [...new TextEncoder().encode(value)] }));
}

/** A Kafka record whose value is `value` (UTF-8, base64-encoded as Lambda delivers it). */
export function kafkaRecord(value: string, shape: KafkaRecordShape = {}): MSKRecord {
  const topic = shape.topic ?? KAFKA_TOPIC;
  const partition = shape.partition ?? 0;
  const id = `${topic}-${partition}`;
  const offset = shape.offset ?? nextOffsets.get(id) ?? 0;
  nextOffsets.set(id, Math.max(offset + 1, nextOffsets.get(id) ?? 0));
  return {
    topic,
    partition,
    offset,
    timestamp: 1_760_000_000_000 + offset,
    timestampType: "CREATE_TIME",
    ...(shape.key === undefined ? {} : { key: Buffer.from(shape.key).toString("base64") }),
    value: Buffer.from(value).toString("base64"),
    headers: kafkaHeaders(shape.headers),
  } as MSKRecord;
}

/** Records grouped under their "<topic>-<partition>" keys, in the order given. */
function grouped(records: readonly MSKRecord[]): Record<string, MSKRecord[]> {
  const byPartition: Record<string, MSKRecord[]> = {};
  for (const record of records) (byPartition[`${record.topic}-${record.partition}`] ??= []).push(record);
  return byPartition;
}

/** An Amazon MSK event (`eventSource` "aws:kafka") carrying `records`. */
export function mskEvent(records: readonly MSKRecord[]): MSKEvent {
  return { eventSource: "aws:kafka", eventSourceArn: MSK_CLUSTER_ARN, bootstrapServers: BOOTSTRAP_SERVERS, records: grouped(records) };
}

/** A self-managed Kafka event (`eventSource` "SelfManagedKafka") carrying `records`. */
export function selfManagedKafkaEvent(records: readonly MSKRecord[]): SelfManagedKafkaEvent {
  return { eventSource: "SelfManagedKafka", bootstrapServers: "kafka-1.internal:9092,kafka-2.internal:9092", records: grouped(records) };
}
