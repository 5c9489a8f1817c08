/**
 * `babelqueue-serverless/metrics`: metrics per batch — CloudWatch EMF on stdout, a Powertools
 * `Metrics` instance, or a Workers Analytics Engine dataset — as the `metrics` option of
 * `sqsHandler` / `queueHandler`. A separate subpath so that an application without metrics does
 * not bundle them.
 *
 * The list is deliberate and pinned by test/package/exports.test.ts.
 *
 * @example
 * ```ts
 * import { InMemoryStore } from "babelqueue-serverless";
 * import { sqsHandler } from "babelqueue-serverless/lambda";
 * import { batchMetrics } from "babelqueue-serverless/metrics";
 *
 * export const handler = sqsHandler({
 *   store: new InMemoryStore(),
 *   handle: async (envelope) => sendReceipt(envelope.data),
 *   metrics: batchMetrics(), // CloudWatch EMF on stdout
 * });
 * ```
 *
 * @module babelqueue-serverless/metrics
 */
export {
  ANALYTICS_DOUBLES,
  type AnalyticsEngineLike,
  type MetricsOptions,
  type PowertoolsMetricsLike,
  batchMetrics,
} from "../src/observability/metrics.js";
