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
 * import { batchMetrics } from "babelqueue-serverless/metrics";
 * export const handler = sqsHandler({ store, handle, metrics: batchMetrics() }); // EMF on stdout
 * ```
 */
export {
  ANALYTICS_DOUBLES,
  type AnalyticsEngineLike,
  type MetricsOptions,
  type PowertoolsMetricsLike,
  batchMetrics,
} from "../src/observability/metrics.js";
