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
 *   FIFO-blocked) becomes a `batchItemFailures` entry, so only those messages return to the queue.
 *   The event source mapping must have `functionResponseType: ReportBatchItemFailures`.
 *
 * - BabelQueue's schema gate: a `bq-schema-version` message attribute is checked as it is BEFORE
 *   the body is decoded (src/schema-gate.ts): absent or ASCII-blank decodes, exactly "1" decodes,
 *   anything else is `invalid` without decoding (the DLQ path);
 * - the record's `messageAttributes` (String and Number values) reach the handler as a flat
 *   `ctx.headers` record — BabelQueue's `bq-*` attributes, `traceparent`, `bq-replay-bypass` — so
 *   `@babelqueue/core`'s `isReplay(headers)` and its OpenTelemetry `wrapHandler` work unchanged.
 *
 * The lease covers the invocation: `context.getRemainingTimeInMillis()` + `leaseMarginMs` (default
 * 5 s, for clock skew between hosts and the time the commit itself takes), and never less than the
 * `leaseMs` option. While this invocation may still be running, no other delivery can claim its ids;
 * once Lambda has killed it, the lease ends soon after and a redelivery can run.
 *
 * The deadline guard: the invocation's deadline (now + remaining time) goes to the engine, which,
 * `deadlineMarginMs` (default 1 s) before it, stops starting handlers, flushes the commits of what
 * finished, releases the claims of what never started, and answers — so Lambda gets a partial batch
 * response instead of killing the invocation with none (which would redeliver the whole batch). A
 * handler still running keeps its claim and is reported as a failure; if it finishes later (Lambda
 * thaws the environment for the next invocation), its commit is still made.
 *
 * The handler never throws for a record's sake. Should the engine itself fail unexpectedly, every
 * record is reported as failed: nothing that was not processed is ever acknowledged.
 *
 * What this is *not*: a retry loop or a DLQ. Redelivery and dead-lettering are the queue's job
 * (visibility timeout, `maxReceiveCount`, redrive policy).
 */
import type { Context, SQSBatchItemFailure, SQSBatchResponse, SQSEvent, SQSRecord } from "aws-lambda";
import type { Store } from "../src/contract.js";
import type { MessageResult } from "../src/decision.js";
import { BatchEngine, type Delivery, ENGINE_OPTION_KEYS, type EngineOptions, type Handler, type ProcessOptions } from "../src/engine/index.js";
import type { Envelope } from "../src/envelope.js";
import { InvalidOptionError } from "../src/errors.js";
import { SCHEMA_VERSION_PROPERTY, schemaVersionRejection } from "../src/schema-gate.js";
import { OBSERVABILITY_OPTION_KEYS, type ObservabilityOptions, createObservability, queueNameFromArn } from "../src/observability/index.js";
import { type OptionKeys, checkOptions, optionKeys, unionKeys } from "../src/store-kit/options.js";

/** What `handle` receives next to the message (plus the engine's `key`, `attempts` and `dedupe`). */
export interface SqsRuntimeContext {
  /** The SQS record as Lambda delivered it. */
  readonly record: SQSRecord;
  /** The Lambda invocation's context. */
  readonly lambdaContext: Context;
  /** The record's message attributes (String and Number values) as a flat record: `bq-*`, `traceparent`, … */
  readonly headers: Readonly<Record<string, string>>;
}

/** Options of `sqsHandler`: the store, the side effect, and the engine's options. */
export interface SqsHandlerOptions<Message = Envelope> extends EngineOptions<Message>, ObservabilityOptions {
  /** Where ids are claimed and committed: a `ClaimingStore` (DynamoDBStore, …) or a seen-set `Store`. */
  store: Store;
  /** The side effect. Throw to have the message retried. */
  handle: Handler<Message, SqsRuntimeContext>;
  /**
   * Added to the invocation's remaining time to size the lease (ms). Default 5000. The lease is
   * `max(leaseMs option, remaining time + leaseMarginMs)`; when the context has no remaining time,
   * the `leaseMs` option or the store's default lease applies.
   */
  leaseMarginMs?: number;
}

export type SqsHandler = (event: SQSEvent, context: Context) => Promise<SQSBatchResponse>;

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

const DEFAULT_LEASE_MARGIN_MS = 5_000;

/** Every key of `SqsHandlerOptions`: the engine's, observability's and the handler's own. */
const SQS_HANDLER_OPTION_KEYS = unionKeys(
  unionKeys(ENGINE_OPTION_KEYS, OBSERVABILITY_OPTION_KEYS),
  optionKeys<Omit<SqsHandlerOptions, keyof EngineOptions | keyof ObservabilityOptions>>({ store: true, handle: true, leaseMarginMs: true }),
) as OptionKeys<SqsHandlerOptions<unknown>>;

/** ApproximateReceiveCount − 1 when the attribute is an integer >= 1, else undefined (absent or garbage is ignored). */
export function redeliveriesOf(record: SQSRecord): number | undefined {
  const raw = (record.attributes as Partial<SQSRecord["attributes"]> | undefined)?.ApproximateReceiveCount as unknown;
  if (typeof raw !== "string" || !/^\d+$/.test(raw)) return undefined;
  const count = Number(raw);
  return Number.isSafeInteger(count) && count >= 1 ? count - 1 : undefined;
}

/** The FIFO message group of a record from a `.fifo` queue, else undefined. */
export function fifoGroupOf(record: SQSRecord): string | undefined {
  const arn = record.eventSourceARN;
  if (typeof arn !== "string" || !arn.endsWith(".fifo")) return undefined;
  const group = (record.attributes as Partial<SQSRecord["attributes"]> | undefined)?.MessageGroupId;
  return typeof group === "string" && group !== "" ? group : undefined;
}

function remainingMs(context: Context | undefined): number | undefined {
  try {
    const remaining = context?.getRemainingTimeInMillis?.();
    return typeof remaining === "number" && Number.isFinite(remaining) && remaining > 0 ? remaining : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The record's message attributes as flat headers: String and Number values (and their custom
 * `String.x` / `Number.x` types) by name; Binary values are left out (no lossless string form).
 */
export function headersOf(record: SQSRecord): Record<string, string> {
  const headers: Record<string, string> = {};
  const attributes = (record as Partial<SQSRecord> | undefined)?.messageAttributes;
  if (typeof attributes !== "object" || attributes === null) return headers;
  for (const [name, attribute] of Object.entries(attributes)) {
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

function failure(record: SQSRecord | undefined): SQSBatchItemFailure {
  return { itemIdentifier: String(record?.messageId ?? "") };
}

export function sqsHandler<Message = Envelope>(options: SqsHandlerOptions<Message>): SqsHandler {
  checkOptions(options, SQS_HANDLER_OPTION_KEYS as OptionKeys<SqsHandlerOptions<Message>>, "sqsHandler");
  const { store, handle, leaseMarginMs = DEFAULT_LEASE_MARGIN_MS, logger, metrics, tracing, ...engineOptions } = options;
  if (typeof leaseMarginMs !== "number" || !Number.isFinite(leaseMarginMs) || leaseMarginMs < 0) {
    throw new InvalidOptionError("leaseMarginMs", "must be a number of milliseconds >= 0");
  }
  const engine = new BatchEngine<Message, SqsRuntimeContext>(store, handle, engineOptions);
  const observability = createObservability({ logger, metrics, tracing }, { system: "aws_sqs" });

  return async (event, lambdaContext) => {
    const records: SQSRecord[] = Array.isArray(event?.Records) ? event.Records : [];
    if (records.length === 0) return { batchItemFailures: [] };
    const observation = observability.batch({ queue: queueNameFromArn(records[0]?.eventSourceARN), size: records.length });
    try {
      // Per record, the fields it has, set one by one (a spread of `{}` per absent field costs an object each).
      const deliveries: Delivery<SqsRuntimeContext>[] = records.map((record) => {
        const headers = headersOf(record);
        const delivery: Mutable<Delivery<SqsRuntimeContext>> = { body: record?.body, context: { record, lambdaContext, headers }, headers };
        const rejected = schemaVersionRejection(schemaVersionOf(record));
        if (rejected !== undefined) delivery.rejected = rejected;
        if (typeof record?.messageId === "string") delivery.messageId = record.messageId;
        const redeliveries = redeliveriesOf(record);
        if (redeliveries !== undefined) delivery.redeliveries = redeliveries;
        const group = fifoGroupOf(record);
        if (group !== undefined) delivery.group = group;
        return delivery;
      });
      const remaining = remainingMs(lambdaContext);
      const leaseMs =
        remaining === undefined ? engineOptions.leaseMs : Math.max(engineOptions.leaseMs ?? 0, remaining + leaseMarginMs);
      const run: ProcessOptions = { observe: observation.observe };
      if (leaseMs !== undefined) run.leaseMs = leaseMs;
      if (remaining !== undefined) run.deadline = Date.now() + remaining;
      if (observation.intercept !== undefined) run.intercept = observation.intercept;
      const results: MessageResult[] = await observation.run(() => engine.process(deliveries, run));
      const batchItemFailures: SQSBatchItemFailure[] = [];
      for (let index = 0; index < records.length; index += 1) {
        if (results[index]?.ack !== true) batchItemFailures.push(failure(records[index]));
      }
      return { batchItemFailures };
    } catch {
      // The engine never throws for a message; if it throws at all, nothing is known to be done.
      return { batchItemFailures: records.map(failure) };
    }
  };
}
