/**
 * Parks come back when the lease ends: `sqsParks({ client })`, the extension `sqsHandler`'s `parks`
 * option takes. It is its own subpath, `babelqueue-serverless/lambda/parks`, because it imports
 * `@aws-sdk/client-sqs`: `/lambda` names no SQS client at all, so an application without parks
 * neither installs, bundles nor loads it (a bundler resolves even a lazy `import()` it can see).
 *
 * A parked SQS delivery — another delivery holds the id's lease, so this one is neither run nor
 * acknowledged — goes back in `batchItemFailures` and, by default, returns after the queue's
 * visibility timeout: long before the lease ends when the first run is slow, so it is received again
 * and again, and every receive raises its `ApproximateReceiveCount` until the redrive policy sends a
 * perfectly good duplicate to the DLQ. With `parks`, the handler sets each parked record's
 * visibility to the lease's remaining time (plus a margin) with `ChangeMessageVisibilityBatch`
 * (10 entries per request, requests in parallel), so the record comes back once, right after the
 * lease ends — when the other delivery has committed (a duplicate, acknowledged) or died (it runs).
 *
 * Lambda's event source mapping does not reset the visibility of a failed record itself: the
 * record reappears when its visibility timeout lapses (AWS, "Handling errors for an SQS event source
 * in Lambda"), so the value set here is the one that counts. SQS caps a message's visibility at
 * 12 hours from its first receipt; longer leases are capped, and a refused change only means the
 * queue's default applies.
 *
 * IAM: `sqs:ChangeMessageVisibility` on the queue (it also grants the batch form; the managed
 * `AWSLambdaSQSQueueExecutionRole` does not include it).
 *
 * What this is *not*: a retry policy for failures. Only parks (status `in-flight` with a known
 * lease) are delayed; a failed handler's record keeps the queue's visibility timeout, and nothing
 * acknowledged is ever touched.
 */
import { ChangeMessageVisibilityBatchCommand } from "@aws-sdk/client-sqs";
import type { SQSRecord } from "aws-lambda";
import type { MessageResult } from "../src/decision.js";
import { InvalidOptionError } from "../src/errors.js";
import { checkOptions, optionKeys } from "../src/store-kit/options.js";

/** SQS's upper bound on a visibility timeout: 12 hours. */
export const MAX_VISIBILITY_SECONDS = 12 * 60 * 60;
/** Entries per `ChangeMessageVisibilityBatch` request (SQS's limit). */
export const VISIBILITY_BATCH_LIMIT = 10;

/** What `parks` needs of an SQS client: `send` (an `@aws-sdk/client-sqs` `SQSClient` has it). */
export interface SqsClientLike {
  send(command: unknown): Promise<unknown>;
}

/** Options of `sqsHandler`'s `parks`. */
export interface ParkOptions {
  /** The SQS client that changes the visibilities: `new SQSClient({})` from `@aws-sdk/client-sqs`. */
  client: SqsClientLike;
  /** Seconds added to the lease's remaining time, so the record is back just after the lease ends. Default 1. */
  marginSeconds?: number;
}

const PARK_OPTION_KEYS = optionKeys<ParkOptions>({ client: true, marginSeconds: true });

/** One visibility change: which record, for how long. */
export interface VisibilityChange {
  readonly queueUrl: string;
  readonly messageId: string;
  readonly receiptHandle: string;
  readonly seconds: number;
}

/** What `sqsHandler` calls after each batch when `parks` is set: build it with `sqsParks`. */
export interface SqsParks {
  /** Changes the visibility of the batch's parked records. Never throws. */
  park(records: readonly SQSRecord[], results: readonly (MessageResult | undefined)[]): Promise<ParkOutcome>;
}

/**
 * The parks extension for `sqsHandler`: each parked record (another delivery holds its id) comes
 * back right after the lease ends instead of after the queue's visibility timeout.
 *
 * @example
 * ```ts
 * import { SQSClient } from "@aws-sdk/client-sqs";
 * import { DynamoDBStore } from "babelqueue-serverless/dynamodb";
 * import { sqsHandler } from "babelqueue-serverless/lambda";
 * import { sqsParks } from "babelqueue-serverless/lambda/parks";
 *
 * export const handler = sqsHandler({
 *   store: new DynamoDBStore({ table: process.env.IDEMPOTENCY_TABLE ?? "idempotency" }),
 *   handle: async (envelope) => console.log(envelope.job),
 *   parks: sqsParks({ client: new SQSClient({}) }), // needs sqs:ChangeMessageVisibility on the queue
 * });
 * ```
 */
export function sqsParks(options: ParkOptions): SqsParks {
  const { client, marginSeconds } = checkParkOptions(options);
  return { park: (records, results) => applyParks(client, parkChanges(records, results, marginSeconds)) };
}

/** Checks the options of `sqsParks`; returns them with their defaults. */
export function checkParkOptions(parks: ParkOptions): Required<ParkOptions> {
  if (typeof parks !== "object" || parks === null) throw new InvalidOptionError("parks", "must be an object with an SQS client: sqsParks({ client })");
  checkOptions(parks, PARK_OPTION_KEYS, "parks");
  if (typeof parks.client?.send !== "function") throw new InvalidOptionError("parks.client", "must be an SQS client (new SQSClient() from @aws-sdk/client-sqs)");
  const marginSeconds = parks.marginSeconds ?? 1;
  if (!Number.isSafeInteger(marginSeconds) || marginSeconds < 0 || marginSeconds > 60) throw new InvalidOptionError("parks.marginSeconds", "must be an integer from 0 to 60");
  return { client: parks.client, marginSeconds };
}

/** The queue URL of an SQS queue ARN (`arn:aws:sqs:region:account:name`), or undefined. */
export function queueUrlOf(arn: unknown): string | undefined {
  if (typeof arn !== "string") return undefined;
  const match = /^arn:(aws[a-z-]*):sqs:([a-z0-9-]+):(\d{12}):([A-Za-z0-9_.-]{1,80})$/.exec(arn);
  if (match === null) return undefined;
  const [, partition, region, account, name] = match as unknown as [string, string, string, string, string];
  const domain = partition === "aws-cn" ? "amazonaws.com.cn" : "amazonaws.com";
  return `https://sqs.${region}.${domain}/${account}/${name}`;
}

/** The visibility changes a batch's results ask for: one per parked record whose lease is known. */
export function parkChanges(records: readonly SQSRecord[], results: readonly (MessageResult | undefined)[], marginSeconds: number): VisibilityChange[] {
  const changes: VisibilityChange[] = [];
  records.forEach((record, index) => {
    const result = results[index];
    if (result === undefined || result.ack || result.status !== "in-flight" || !(Number(result.retryAfterMs) > 0)) return;
    const queueUrl = queueUrlOf(record?.eventSourceARN);
    if (queueUrl === undefined || typeof record.receiptHandle !== "string" || typeof record.messageId !== "string") return;
    const seconds = Math.min(MAX_VISIBILITY_SECONDS, Math.ceil((result.retryAfterMs as number) / 1000) + marginSeconds);
    changes.push({ queueUrl, messageId: record.messageId, receiptHandle: record.receiptHandle, seconds });
  });
  return changes;
}

/** What became of a batch's visibility changes. */
export interface ParkOutcome {
  readonly changed: number;
  readonly failed: number;
  /** The first failure, for the log line (a name, never a receipt handle). */
  readonly error?: unknown;
}

/**
 * Sends the changes: `ChangeMessageVisibilityBatch` per queue and per 10 entries, in parallel.
 * Never throws: a change SQS refuses only leaves that record on the queue's own visibility timeout.
 */
export async function applyParks(client: SqsClientLike, changes: readonly VisibilityChange[]): Promise<ParkOutcome> {
  if (changes.length === 0) return { changed: 0, failed: 0 };
  let failed = 0;
  let changed = 0;
  let firstError: unknown;
  const requests: { queueUrl: string; entries: VisibilityChange[] }[] = [];
  for (const change of changes) {
    let request = requests.find((one) => one.queueUrl === change.queueUrl && one.entries.length < VISIBILITY_BATCH_LIMIT);
    if (request === undefined) {
      request = { queueUrl: change.queueUrl, entries: [] };
      requests.push(request);
    }
    request.entries.push(change);
  }
  await Promise.all(
    requests.map(async ({ queueUrl, entries }) => {
      try {
        const answer = (await client.send(
          new ChangeMessageVisibilityBatchCommand({
            QueueUrl: queueUrl,
            // Entry ids: the position in this request (SQS wants [A-Za-z0-9_-]{1,80}, unique per request).
            Entries: entries.map((entry, i) => ({ Id: `p${i}`, ReceiptHandle: entry.receiptHandle, VisibilityTimeout: entry.seconds })),
          }),
        )) as { Failed?: unknown[]; Successful?: unknown[] } | undefined;
        const refused = Array.isArray(answer?.Failed) ? answer.Failed.length : 0;
        failed += refused;
        changed += entries.length - refused;
        if (refused > 0) firstError ??= new Error(`SQS refused ${refused} visibility change(s)`);
      } catch (error) {
        failed += entries.length;
        firstError ??= error;
      }
    }),
  );
  return { changed, failed, ...(firstError === undefined ? {} : { error: firstError }) };
}
