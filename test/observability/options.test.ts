/**
 * createObservability's checks of the `logger`, `metrics` and `tracing` options (and
 * `batchMetrics`'s of its own), message by message, what each accepts, and `queueNameFromArn`.
 */
import { describe, expect, it } from "vitest";
import { InvalidOptionError } from "../../src/errors.js";
import { createObservability, type ObservabilityOptions, queueNameFromArn } from "../../src/observability/index.js";
import { type MetricsOptions, batchMetrics, metricsSinks } from "../../src/observability/metrics.js";
import { thrownBy } from "../support/caught.js";

/** What `createObservability(options)` throws, if anything. */
const thrown = (options: unknown) => thrownBy(() => createObservability(options as ObservabilityOptions, { system: "aws_sqs" }));

/** What `attempt(options)` throws is an InvalidOptionError saying `message`. */
function expectRejectedBy(attempt: (options: unknown) => unknown, options: unknown, message: string) {
  const error = attempt(options);
  expect(error, JSON.stringify(options)).toBeInstanceOf(InvalidOptionError);
  expect((error as Error).message).toBe(message);
}

const expectRejected = (options: unknown, message: string) => expectRejectedBy(thrown, options, message);

const fn = () => undefined;

describe("the logger option", () => {
  it("must be false or a logger", () => {
    const message = 'option "logger" must be false or an object with info, warn and error methods (console, a Powertools Logger, pino)';
    for (const logger of [{}, null, "console", { info: fn, warn: fn }]) expectRejected({ logger }, message);
    for (const logger of [undefined, false, console, { info: fn, warn: fn, error: fn }]) expect(thrown({ logger })).toBeUndefined();
  });
});

/** What `batchMetrics(options)` (the extension the option takes) throws for `options`, if anything. */
const thrownMetrics = (metrics: unknown) => thrownBy(() => createObservability({ metrics: batchMetrics(metrics as MetricsOptions) }, { system: "aws_sqs" }));

const expectMetricsRejected = (metrics: unknown, message: string) => expectRejectedBy(thrownMetrics, metrics, message);

describe("the metrics option", () => {
  it("takes false or an extension; batchMetrics takes an options object", () => {
    const hint = 'option "metrics" must be false or batchMetrics({ … }) from "babelqueue-serverless/metrics"';
    for (const metrics of [null, "yes", 5, true, {}, { powertools: { addMetric: fn } }]) expectRejected({ metrics }, hint);
    for (const metrics of [undefined, false, batchMetrics(), batchMetrics({})]) expect(thrown({ metrics })).toBeUndefined();
    for (const metrics of [null, "yes", 5]) expectMetricsRejected(metrics, 'option "metrics" must be an options object');
    for (const metrics of [undefined, {}]) expect(thrownMetrics(metrics)).toBeUndefined();
  });

  it("powertools: something with addMetric", () => {
    for (const powertools of [{}, null, 5]) expectMetricsRejected({ powertools }, 'option "metrics.powertools" must be a Powertools Metrics instance (with addMetric)');
    expect(thrownMetrics({ powertools: { addMetric: fn } })).toBeUndefined();
  });

  it("analytics: a dataset or a function of env", () => {
    for (const analytics of [{}, null, 3]) expectMetricsRejected({ analytics }, 'option "metrics.analytics" must be an Analytics Engine dataset or (env) => dataset');
    for (const analytics of [{ writeDataPoint: fn }, () => undefined]) expect(thrownMetrics({ analytics })).toBeUndefined();
  });

  it("namespace and service: strings of 1 to 255 characters", () => {
    for (const field of ["namespace", "service"]) {
      for (const value of ["", 5, "n".repeat(256)]) expectMetricsRejected({ [field]: value }, `option "metrics.${field}" must be a string of 1 to 255 characters`);
      for (const value of ["n", "n".repeat(255)]) expect(thrownMetrics({ [field]: value })).toBeUndefined();
    }
  });

  it("namespace and service going to CloudWatch (EMF, Powertools): what CloudWatch takes, else refused at setup", () => {
    const namespace = 'option "metrics.namespace" must be printable ASCII, not only \':\' and not under "AWS/" (a CloudWatch namespace)';
    const service = 'option "metrics.service" must be printable ASCII with a non-blank character (a CloudWatch dimension value)';
    for (const value of ["AWS/Lambda", "commandesé", "a\nb", ":::", "\t"]) expectMetricsRejected({ namespace: value }, namespace);
    for (const value of ["   ", "service-café", "a\u0007b"]) expectMetricsRejected({ service: value }, service);
    for (const value of ["AWS/Lambda", "commandesé"]) expectMetricsRejected({ namespace: value, powertools: { addMetric: fn } }, namespace);
    for (const value of ["Orders/Consumer", "aws/lowercase", "a:b", "with space"]) expect(thrownMetrics({ namespace: value })).toBeUndefined();
    expect(thrownMetrics({ service: "orders consumer" })).toBeUndefined();
    // Analytics Engine only: any text is an index or a blob.
    expect(thrownMetrics({ service: "service-café", namespace: "AWS/x", analytics: { writeDataPoint: fn } })).toBeUndefined();
    expectMetricsRejected({ service: "service-café", analytics: { writeDataPoint: fn }, emf: true }, service);
    // Powertools beside Analytics Engine: the Powertools metrics still go to CloudWatch.
    expectMetricsRejected({ service: "service-café", analytics: { writeDataPoint: fn }, powertools: { addMetric: fn } }, service);
  });

  it("an environment value CloudWatch would refuse is passed over, not a failed cold start", () => {
    const saved = { ...process.env };
    try {
      process.env.POWERTOOLS_METRICS_NAMESPACE = "AWS/Reserved";
      process.env.POWERTOOLS_SERVICE_NAME = "café";
      process.env.AWS_LAMBDA_FUNCTION_NAME = "orders-consumer";
      const sinks = metricsSinks({});
      expect([sinks?.namespace, sinks?.service]).toEqual(["BabelQueue", "orders-consumer"]);
      process.env.POWERTOOLS_METRICS_NAMESPACE = "Shop";
      process.env.POWERTOOLS_SERVICE_NAME = "checkout";
      expect([metricsSinks({})?.namespace, metricsSinks({})?.service]).toEqual(["Shop", "checkout"]);
    } finally {
      process.env = saved;
    }
  });

  it("write: a function", () => {
    expectMetricsRejected({ write: "stdout" }, 'option "metrics.write" must be a function');
    expect(thrownMetrics({ write: fn })).toBeUndefined();
  });
});

describe("the tracing option", () => {
  it("takes false or an extension made by otelTracing", () => {
    const hint = 'option "tracing" must be false or otelTracing({ api }) from "babelqueue-serverless/tracing"';
    for (const tracing of [null, true, {}, { api: {} }, batchMetrics()]) expectRejected({ tracing }, hint);
    expect(thrown({ tracing: false })).toBeUndefined();
  });
});

describe("queueNameFromArn", () => {
  it("the last part of an SQS ARN of six or more parts, else undefined", () => {
    expect(queueNameFromArn("arn:aws:sqs:eu-west-1:123456789012:orders")).toBe("orders");
    expect(queueNameFromArn("arn:aws:sqs:eu-west-1:123456789012:orders.fifo")).toBe("orders.fifo");
    expect(queueNameFromArn("a:b:c:d:e:f:g")).toBe("g");
    expect(queueNameFromArn("arn:aws:sqs:eu-west-1:orders")).toBeUndefined();
    expect(queueNameFromArn("arn:aws:sqs:eu-west-1:123456789012:")).toBeUndefined();
    expect(queueNameFromArn("orders")).toBeUndefined();
    expect(queueNameFromArn("")).toBeUndefined();
    expect(queueNameFromArn(undefined)).toBeUndefined();
    expect(queueNameFromArn(42)).toBeUndefined();
  });
});
