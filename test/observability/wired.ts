/**
 * `sqsHandler` with the observability options, wired OUTSIDE the handler the way the handler will
 * wire them inside (one `createObservability` per handler, one `batch()` per invocation, the batch
 * run inside `batch.run`). Until handlers/lambda-sqs.ts takes `logger` / `metrics` / `tracing`
 * itself, the Middy and handler tests use this; afterwards `observedSqsHandler(o)` is just
 * `sqsHandler(o)`.
 */
import type { Context, SQSEvent } from "aws-lambda";
import type { Envelope } from "../../src/envelope.js";
import type { EngineEvent } from "../../src/events.js";
import { type BatchObservation, type ObservabilityOptions, createObservability, queueNameFromArn } from "../../src/observability/index.js";
import { type SqsHandler, type SqsHandlerOptions, sqsHandler } from "../../handlers/lambda-sqs.js";

export function observedSqsHandler(options: SqsHandlerOptions<Envelope> & ObservabilityOptions): SqsHandler {
  const { logger, metrics, tracing, ...handlerOptions } = options;
  const observability = createObservability(
    { ...(logger === undefined ? {} : { logger }), ...(metrics === undefined ? {} : { metrics }), ...(tracing === undefined ? {} : { tracing }) },
    { system: "aws_sqs" },
  );
  let current: { batch: BatchObservation; messageIds: string[] } | undefined;
  const userObserve = handlerOptions.observe;
  const handler = sqsHandler({
    ...handlerOptions,
    observe: (event) => {
      userObserve?.(event);
      if (current === undefined) return;
      // The current engine's result carries neither messageId nor attempts; the new engine's does.
      const messageId = event.type === "result" ? current.messageIds[event.index] : undefined;
      current.batch.observe({ ...event, ...(messageId === undefined ? {} : { messageId }) } as EngineEvent);
    },
  });
  return async (event: SQSEvent, context: Context) => {
    const records = Array.isArray(event?.Records) ? event.Records : [];
    const batch = observability.batch({ queue: queueNameFromArn(records[0]?.eventSourceARN), size: records.length });
    current = { batch, messageIds: records.map((record) => record.messageId) };
    try {
      return await batch.run(() => handler(event, context));
    } finally {
      current = undefined;
    }
  };
}
