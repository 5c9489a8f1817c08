/**
 * `babelqueue-serverless/tracing`: OpenTelemetry spans per batch and per message, as the `tracing`
 * option of `sqsHandler` / `queueHandler`. You pass the `@opentelemetry/api` module; this package
 * never imports it. A separate subpath so that an application without tracing does not bundle it.
 *
 * The list is deliberate and pinned by test/package/exports.test.ts.
 *
 * @example
 * ```ts
 * import * as otel from "@opentelemetry/api";
 * import { InMemoryStore } from "babelqueue-serverless";
 * import { sqsHandler } from "babelqueue-serverless/lambda";
 * import { otelTracing } from "babelqueue-serverless/tracing";
 *
 * export const handler = sqsHandler({
 *   store: new InMemoryStore(),
 *   handle: async (envelope) => sendReceipt(envelope.data),
 *   tracing: otelTracing({ api: otel }),
 * });
 * ```
 *
 * @module babelqueue-serverless/tracing
 */
export type { OtelApi } from "../src/observability/otel-api.js";
export { type TracingOptions, otelTracing } from "../src/observability/tracing.js";
