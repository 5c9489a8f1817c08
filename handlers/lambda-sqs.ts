/**
 * `sqsHandler`: an SQS-triggered AWS Lambda handler (export `babelqueue-serverless/lambda`).
 *
 * A thin adapter over the batch engine (src/engine/), which makes every decision:
 * - each `SQSRecord` becomes a `Delivery`: its body; `redeliveries` = ApproximateReceiveCount − 1
 *   when the count parses as an integer >= 1 (so the handler sees
 *   attempts = max(body.attempts, ApproximateReceiveCount − 1)); a FIFO group = the record's
 *   `MessageGroupId` when its source queue is a `.fifo` queue (a standard queue's message group, as
 *   fair queues use it, promises no order, so it is not treated as one);
 * - every result with `ack: false` (failed, in-flight, invalid unless dropped, store error,
 *   FIFO-blocked) becomes a `batchItemFailures` entry, so only those messages return to the queue;
 *   on a FIFO queue, so does every later record of a group after its first failure (a later copy of
 *   an id that ran included), as AWS asks of a FIFO partial batch response;
 *   The event source mapping must have `functionResponseType: ReportBatchItemFailures`.
 *
 * - BabelQueue's schema gate: a `bq-schema-version` message attribute is checked as it is BEFORE
 *   the body is decoded (src/schema-gate.ts): absent or ASCII-blank decodes, exactly "1" decodes,
 *   anything else is `invalid` without decoding (the DLQ path);
 * - the record's `messageAttributes` (String and Number values) reach the handler as a flat
 *   `ctx.headers` record — BabelQueue's `bq-*` attributes, `traceparent`, `bq-replay-bypass` — so
 *   `@babelqueue/core`'s `isReplay(headers)` and its OpenTelemetry `wrapHandler` work unchanged.
 *
 * The lease, the deadline guard, the option check and observability are the Lambda handlers'
 * shared part (lambda-shared.ts): the lease covers the invocation, and the engine answers
 * `deadlineMarginMs` before the invocation's deadline with what finished.
 *
 * The handler never throws for a record's sake. Should the engine itself fail unexpectedly, every
 * record is reported as failed: nothing that was not processed is ever acknowledged.
 *
 * What this is *not*: a retry loop or a DLQ. Redelivery and dead-lettering are the queue's job
 * (visibility timeout, `maxReceiveCount`, redrive policy).
 */
import type { Context, SQSBatchItemFailure, SQSBatchResponse, SQSEvent, SQSRecord } from "aws-lambda";
import type { MessageResult } from "../src/decision.js";
import type { Delivery } from "../src/engine/index.js";
import type { Envelope } from "../src/envelope.js";
import { SCHEMA_VERSION_PROPERTY, schemaVersionRejection } from "../src/schema-gate.js";
import { queueNameFromArn } from "../src/observability/index.js";
import { errorFacts } from "../src/observability/error-facts.js";
import { lineLogger } from "../src/observability/log.js";
import { InvalidOptionError } from "../src/errors.js";
import { DEFAULT_DEADLINE_MARGIN_MS } from "../src/engine/settings.js";
import { type LambdaHandlerOptions, lambdaBatchRunner, refuseEvent, timeLeftMs, unacknowledgedTail } from "./lambda-shared.js";
import type { ParkOutcome, SqsParks } from "./sqs-parks.js";

/** What `handle` receives next to the message (plus the engine's `key`, `attempts` and `dedupe`). */
export interface SqsRuntimeContext {
  /** The SQS record as Lambda delivered it. */
  readonly record: SQSRecord;
  /** The Lambda invocation's context. */
  readonly lambdaContext: Context;
  /** The record's message attributes (String and Number values) as a flat record: `bq-*`, `traceparent`, … */
  readonly headers: Readonly<Record<string, string>>;
}

/**
 * Options of `sqsHandler`: the store, the side effect (`handle`), the engine's options, the lease
 * margin and observability (`logger`, `metrics`, `tracing`). Unknown keys are refused.
 */
export interface SqsHandlerOptions<Message = Envelope> extends LambdaHandlerOptions<Message, SqsRuntimeContext> {
  /**
   * Parks come back when the lease ends: a record parked because another delivery holds its id gets
   * its visibility set to the lease's remaining time (+ `marginSeconds`) with
   * `ChangeMessageVisibilityBatch`, so it is received once more, right after the lease — instead of
   * after every visibility timeout, each receive raising `ApproximateReceiveCount` toward the DLQ.
   * Give `sqsParks({ client: new SQSClient({}) })` from `babelqueue-serverless/lambda/parks` (the
   * role needs `sqs:ChangeMessageVisibility`); its own subpath, so an application without parks
   * neither installs nor bundles `@aws-sdk/client-sqs`. The changes get what is left
   * of the invocation, short of a quarter of `deadlineMarginMs`: a slow SQS only leaves its records on
   * the queue's visibility timeout, never the batch unanswered. Default: off (the queue's
   * visibility timeout applies).
   */
  parks?: SqsParks | false;
}

/**
 * An SQS-triggered Lambda handler: `(event, context)` in, the partial batch response out
 * (`batchItemFailures` lists every record that was not acknowledged).
 */
export type SqsHandler = (event: SQSEvent, context: Context) => Promise<SQSBatchResponse>;

/** ApproximateReceiveCount − 1 when the attribute is an integer >= 1, else undefined (absent or garbage is ignored). */
export function redeliveriesOf(record: SQSRecord): number | undefined {
  // A record that is not an object (never from SQS, but an event is the caller's input) has none.
  const raw = (record as Partial<SQSRecord> | undefined)?.attributes?.ApproximateReceiveCount as unknown;
  if (typeof raw !== "string" || !/^\d+$/.test(raw)) return undefined;
  const count = Number(raw);
  return Number.isSafeInteger(count) && count >= 1 ? count - 1 : undefined;
}

/** The FIFO message group of a record from a `.fifo` queue, else undefined. */
export function fifoGroupOf(record: SQSRecord): string | undefined {
  const arn = (record as Partial<SQSRecord> | undefined)?.eventSourceARN;
  if (typeof arn !== "string" || !arn.endsWith(".fifo")) return undefined;
  const group = (record as Partial<SQSRecord>).attributes?.MessageGroupId as unknown;
  return typeof group === "string" && group !== "" ? group : undefined;
}

/**
 * The record's message attributes as flat headers: String and Number values (and their custom
 * `String.x` / `Number.x` types) by name; Binary values are left out (no lossless string form).
 */
export function headersOf(record: SQSRecord): Record<string, string> {
  const headers: Record<string, string> = {};
  const attributes = (record as Partial<SQSRecord> | undefined)?.messageAttributes;
  if (typeof attributes !== "object" || attributes === null) return headers;
  // for…in + hasOwn, not Object.entries: no array of pairs per record (most records carry none).
  for (const name in attributes) {
    if (!Object.hasOwn(attributes, name)) continue;
    const attribute = attributes[name];
    const type = typeof attribute?.dataType === "string" ? attribute.dataType : "";
    const value = attribute?.stringValue;
    if (typeof value !== "string" || !/^(String|Number)(\.|$)/.test(type)) continue;
    Object.defineProperty(headers, name, { value, enumerable: true, writable: true, configurable: true });
  }
  return headers;
}

/**
 * The record's `bq-schema-version` attribute for the schema gate: its string value, undefined when
 * the attribute is absent, or the attribute itself when it carries no string (a Binary value).
 */
function schemaVersionOf(record: SQSRecord): unknown {
  const attributes = (record as Partial<SQSRecord> | undefined)?.messageAttributes;
  if (typeof attributes !== "object" || attributes === null || !Object.hasOwn(attributes, SCHEMA_VERSION_PROPERTY)) return undefined;
  const attribute = attributes[SCHEMA_VERSION_PROPERTY];
  return typeof attribute?.stringValue === "string" ? attribute.stringValue : attribute;
}

/**
 * Every record not acknowledged, and on a FIFO queue every record of a group after its first one not
 * acknowledged (AWS's rule for FIFO partial batch responses; `unacknowledgedTail`).
 */
function failuresOf(records: readonly SQSRecord[], results: readonly (MessageResult | undefined)[]): SQSBatchItemFailure[] {
  return unacknowledgedTail(
    records.length,
    (index) => results[index]?.ack === true,
    (index) => fifoGroupOf(records[index] as SQSRecord),
  ).map((index) => failure(records[index]));
}

/**
 * The parks' outcome, or — when they have not answered `marginMs` before the invocation's deadline —
 * a failed one: the batch's answer must reach Lambda in time. An SQS call that hangs (the SDK sets no
 * request timeout by default) would otherwise run the invocation into its timeout, and Lambda would
 * return the WHOLE batch: the acknowledged records too, the `commit-failed` ones to run again.
 */
async function withinDeadline(parking: Promise<ParkOutcome>, remaining: number | undefined, marginMs: number, size: number): Promise<ParkOutcome> {
  if (remaining === undefined) return parking;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<ParkOutcome>((resolve) => {
    timer = setTimeout(
      () => resolve({ changed: 0, failed: size, error: Object.assign(new Error("parks did not answer before the invocation's deadline"), { name: "TimeoutError" }) }),
      Math.max(0, remaining - marginMs),
    );
  });
  try {
    return await Promise.race([parking, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The time the parks may take: what is left of the invocation, and 0 — not "no limit" — once the
 * engine answered at or past the deadline (with a `deadlineMarginMs` of 0 the answer comes right at
 * the deadline). Undefined only without a clock.
 */
function parkTimeMs(context: Context | undefined): number | undefined {
  const left = timeLeftMs(context);
  return left === undefined ? undefined : Math.max(0, left);
}

function failure(record: SQSRecord | undefined): SQSBatchItemFailure {
  return { itemIdentifier: String(record?.messageId ?? "") };
}

/**
 * The event's SQS records, none for an empty event. Throws (the invocation fails, Lambda retries)
 * for another source's event: a Kafka event wired here by mistake answered "nothing failed" would
 * have its records committed unrun, and an SNS or S3 event's answer is not read at all.
 */
function sqsRecordsOf(event: SQSEvent | undefined): SQSRecord[] {
  if (typeof event !== "object" || event === null) return [];
  const fields = event as unknown as Record<string, unknown>;
  const records = fields.Records;
  if (!Array.isArray(records)) {
    if (fields.records !== undefined || fields.eventSource !== undefined) refuseEvent("sqsHandler", "the event is not from an SQS queue");
    return [];
  }
  for (const record of records as unknown[]) {
    const entry = typeof record === "object" && record !== null ? (record as Record<string, unknown>) : undefined;
    const source = entry?.eventSource ?? entry?.EventSource;
    if (source !== undefined && source !== "aws:sqs") refuseEvent("sqsHandler", "the event carries records of another event source");
  }
  return records as SQSRecord[];
}

/**
 * Builds the handler of an SQS-triggered Lambda function: every record is decided by the batch
 * engine, and every record that was not acknowledged is in `batchItemFailures` (the event source
 * mapping needs `functionResponseType: ReportBatchItemFailures`). The lease covers the invocation,
 * and the deadline guard answers `deadlineMarginMs` before Lambda would kill it. Wrong options throw
 * `InvalidOptionError` when the handler is built (at cold start), never per record.
 *
 * @example
 * ```ts
 * import { sqsHandler } from "babelqueue-serverless/lambda";
 * import { DynamoDBStore } from "babelqueue-serverless/dynamodb";
 *
 * export const handler = sqsHandler({
 *   store: new DynamoDBStore({ table: process.env.IDEMPOTENCY_TABLE ?? "idempotency", namespace: "orders" }),
 *   handle: async (envelope, ctx) => {
 *     // ctx.record, ctx.lambdaContext, ctx.headers, ctx.key (meta.id), ctx.attempts
 *     await chargeCard(envelope.data); // throw to have this record retried
 *   },
 * });
 * ```
 */
export function sqsHandler<Message = Envelope>(options: SqsHandlerOptions<Message>): SqsHandler {
  const { parks: parkOption, ...handlerOptions } = options ?? ({} as SqsHandlerOptions<Message>);
  const run = lambdaBatchRunner<Message, SqsRuntimeContext>("sqsHandler", handlerOptions as SqsHandlerOptions<Message>, "aws_sqs");
  const parks = parkOption === undefined || parkOption === false ? undefined : parkOption;
  if (parks !== undefined && typeof parks?.park !== "function") {
    throw new InvalidOptionError("parks", 'must be sqsParks({ client }) from "babelqueue-serverless/lambda/parks"');
  }
  // Parks' own warning goes through the logger the outcome lines use, in the order it takes.
  const warn = parks === undefined ? undefined : lineLogger(options?.logger);
  // What the parks leave of the invocation: the engine's own flush margin (a quarter of deadlineMarginMs, checked above).
  const answerMarginMs = (options.deadlineMarginMs ?? DEFAULT_DEADLINE_MARGIN_MS) / 4;

  return async (event, lambdaContext) => {
    const records = sqsRecordsOf(event);
    if (records.length === 0) return { batchItemFailures: [] };
    try {
      const deliveries: Delivery<SqsRuntimeContext>[] = records.map((record) => {
        const redeliveries = redeliveriesOf(record);
        const group = fifoGroupOf(record);
        const headers = headersOf(record);
        const messageId = typeof record?.messageId === "string" ? record.messageId : undefined;
        const rejected = schemaVersionRejection(schemaVersionOf(record));
        // Built in place, not with conditional spreads: no throwaway object per optional field.
        const delivery: { -readonly [K in keyof Delivery<SqsRuntimeContext>]: Delivery<SqsRuntimeContext>[K] } = {
          body: record?.body,
          context: { record, lambdaContext, headers },
          headers,
        };
        if (rejected !== undefined) delivery.rejected = rejected;
        if (messageId !== undefined) delivery.messageId = messageId;
        if (redeliveries !== undefined) delivery.redeliveries = redeliveries;
        if (group !== undefined) delivery.group = group;
        return delivery;
      });
      const queue = queueNameFromArn(records[0]?.eventSourceARN);
      const results: MessageResult[] = await run({ deliveries, lambdaContext, queue });
      if (parks !== undefined) {
        // Parks only delay a redelivery: whatever they do (or throw, at once or later), the batch's answer stands.
        const parking = Promise.resolve()
          .then(() => parks.park(records, results))
          .catch((error: unknown): ParkOutcome => ({ changed: 0, failed: records.length, error }));
        const outcome = await withinDeadline(parking, parkTimeMs(lambdaContext), answerMarginMs, records.length);
        // `outcome?`: a user's own parks may answer anything at all.
        if ((outcome?.failed ?? 0) > 0) {
          warn?.("warn", "parks: visibility not changed, the queue's visibility timeout applies", {
            logger: "babelqueue-serverless",
            ...(queue === undefined ? {} : { queue }),
            failed: outcome.failed,
            changed: outcome.changed,
            error: errorFacts(outcome.error),
          });
        }
      }
      return { batchItemFailures: failuresOf(records, results) };
    } catch {
      // The engine never throws for a message; if it throws at all, nothing is known to be done.
      return { batchItemFailures: records.map(failure) };
    }
  };
}
