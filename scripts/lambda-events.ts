/**
 * SQS events and Lambda contexts shaped as AWS delivers them, for the tests, the demo and the
 * benchmark (one place, so every caller exercises the handler with the same record shape).
 *
 * What this is *not*: a Lambda runtime. Nothing here invokes anything; it only builds the two
 * arguments a handler receives.
 */
import type { Context, SQSRecord } from "aws-lambda";

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
