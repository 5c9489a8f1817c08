/**
 * Batch metrics: how many deliveries ended in each status, how long each store step and each
 * handler took, and how many store steps failed — gathered from the engine's events and written
 * once per batch, as
 *
 * - a CloudWatch Embedded Metric Format (EMF) document on stdout (Lambda turns it into metrics,
 *   no API call, no SDK), or
 * - `addMetric` calls on a Powertools `Metrics` instance (its `logMetrics` middleware or
 *   `publishStoredMetrics()` flushes them with the user's own metrics), and/or
 * - one Workers Analytics Engine data point (`writeDataPoint`) per batch.
 *
 * Dimensions are bounded: `service` only (a per-status metric name instead of a status dimension,
 * so one document per batch carries every count). Never an id, a key, a message id or a queue
 * message's content.
 *
 * Metrics (units): Messages, Ran, Duplicate, InFlight, Failed, Invalid, Conflict, CommitFailed,
 * StoreErrors (Count); StoreClaimMs, StoreSeenMs, StoreCommitMs, StoreReleaseMs, StoreTransactMs,
 * HandlerMs, BatchMs (Milliseconds; one value per step / handler run / batch). Every count is
 * written, zeros included, so an alarm sees 0 rather than missing data.
 *
 * `batchMetrics(options)` makes the `metrics` option of `sqsHandler` / `queueHandler` (export
 * `babelqueue-serverless/metrics`): this module is bundled only where an application imports it.
 *
 * What this is *not*: on by default. Each metric name is a CloudWatch custom metric (billed per
 * metric per month), so metrics are opt-in: `metrics: batchMetrics()` or `batchMetrics({ … })`.
 */
import { InvalidOptionError } from "../errors.js";
import type { EngineEvent, StoreStep } from "../events.js";
import { type OptionKeys, checkOptions, optionKeys } from "../store-kit/options.js";
import type { ObservabilityExtension } from "./index.js";
import type { OutcomeStatus } from "./log.js";
import { writeLine } from "./log.js";

/** The surface of a Powertools `Metrics` instance used here. */
export interface PowertoolsMetricsLike {
  addMetric(name: string, unit: "Count" | "Milliseconds", value: number): unknown;
}

/** A Workers Analytics Engine dataset binding (`[[analytics_engine_datasets]]`). */
export interface AnalyticsEngineLike {
  writeDataPoint(point: { indexes: string[]; blobs: string[]; doubles: number[] }): unknown;
}

/** Options of the `metrics` option. */
export interface MetricsOptions<Env = unknown> {
  /** CloudWatch namespace of the EMF metrics. Default: `POWERTOOLS_METRICS_NAMESPACE`, else "BabelQueue". */
  namespace?: string;
  /**
   * The `service` dimension (and Analytics Engine index). Default: `POWERTOOLS_SERVICE_NAME`,
   * else `AWS_LAMBDA_FUNCTION_NAME`, else "babelqueue-serverless".
   */
  service?: string;
  /** Add the metrics to this Powertools `Metrics` instead of printing EMF; its own flush writes them. */
  powertools?: PowertoolsMetricsLike;
  /** Workers: an Analytics Engine dataset, or how to get it from the Worker's `env`. One data point per batch. */
  analytics?: AnalyticsEngineLike | ((env: Env) => AnalyticsEngineLike | undefined);
  /** Print EMF documents. Default: true unless `powertools` or `analytics` is given. */
  emf?: boolean;
  /** Where an EMF document (one line of JSON) goes. Default: stdout on Node, `console.log` elsewhere. */
  write?: (line: string) => void;
}

/** What one batch (or the late part of one, see `BatchMetrics`) measured. */
export interface BatchTally {
  messages: number;
  readonly statuses: Record<OutcomeStatus, number>;
  storeErrors: number;
  readonly steps: Partial<Record<StoreStep, number[]>>;
  readonly handlerMs: number[];
  batchMs?: number;
}

/** Metric name of each status count. */
export const STATUS_METRICS: Readonly<Record<OutcomeStatus, string>> = {
  ran: "Ran",
  duplicate: "Duplicate",
  "in-flight": "InFlight",
  failed: "Failed",
  invalid: "Invalid",
  conflict: "Conflict",
  "commit-failed": "CommitFailed",
};

/** Metric name of each store step's latency. */
export const STEP_METRICS: Readonly<Record<StoreStep, string>> = {
  claim: "StoreClaimMs",
  seen: "StoreSeenMs",
  commit: "StoreCommitMs",
  release: "StoreReleaseMs",
  transact: "StoreTransactMs",
};

const STATUSES = Object.keys(STATUS_METRICS) as OutcomeStatus[];
const STEPS = Object.keys(STEP_METRICS) as StoreStep[];

/**
 * The Analytics Engine columns, in order: `double1` … `double16` of each data point
 * (`blob1` = service, `blob2` = queue; `index1` = service). Counts, then milliseconds (sums).
 */
export const ANALYTICS_DOUBLES = [
  "messages",
  "ran",
  "duplicate",
  "in_flight",
  "failed",
  "invalid",
  "conflict",
  "commit_failed",
  "store_errors",
  "batch_ms",
  "handler_ms",
  "claim_ms",
  "seen_ms",
  "commit_ms",
  "release_ms",
  "transact_ms",
] as const;

/** EMF allows at most 100 values per metric in one document. */
export const EMF_MAX_VALUES = 100;

export function emptyTally(): BatchTally {
  return {
    messages: 0,
    // A literal, not built from STATUSES: made twice per batch, and a literal costs one object.
    statuses: { ran: 0, duplicate: 0, "in-flight": 0, failed: 0, invalid: 0, conflict: 0, "commit-failed": 0 },
    storeErrors: 0,
    steps: {},
    handlerMs: [],
  };
}

function isEmpty(tally: BatchTally): boolean {
  return (
    tally.messages === 0 &&
    tally.storeErrors === 0 &&
    tally.batchMs === undefined &&
    tally.handlerMs.length === 0 &&
    STATUSES.every((status) => tally.statuses[status] === 0) &&
    STEPS.every((step) => tally.steps[step] === undefined)
  );
}

const round = (ms: number) => Math.round(ms * 100) / 100;
const sum = (values: readonly number[]) => values.reduce((total, value) => total + value, 0);

/** Adds one event to a tally. */
export function count(tally: BatchTally, event: EngineEvent): void {
  switch (event.type) {
    case "result": {
      // A late result is a delivery already counted, as InFlight, when the batch was answered:
      // its final status is added, the delivery is not counted again.
      if (event.late !== true) tally.messages += 1;
      const status = event.result.status as OutcomeStatus;
      if (status in tally.statuses) tally.statuses[status] += 1;
      if (typeof event.handlerMs === "number" && Number.isFinite(event.handlerMs)) tally.handlerMs.push(round(event.handlerMs));
      break;
    }
    case "store-step": {
      if (!Number.isFinite(event.durationMs)) break;
      const values = tally.steps[event.step] ?? [];
      values.push(round(event.durationMs));
      tally.steps[event.step] = values;
      break;
    }
    case "store-error":
      tally.storeErrors += 1;
      break;
    case "batch-end":
      if (Number.isFinite(event.durationMs)) tally.batchMs = round(event.durationMs);
      break;
    case "batch-start":
      break;
  }
}

/** One EMF metric: its name, unit and value(s). */
interface Measure {
  readonly name: string;
  readonly unit: "Count" | "Milliseconds";
  readonly values: readonly number[];
  /** A count is one number; a latency is a list of observations. */
  readonly single: boolean;
}

function measures(tally: BatchTally): Measure[] {
  const list: Measure[] = [{ name: "Messages", unit: "Count", values: [tally.messages], single: true }];
  for (const status of STATUSES) list.push({ name: STATUS_METRICS[status], unit: "Count", values: [tally.statuses[status]], single: true });
  list.push({ name: "StoreErrors", unit: "Count", values: [tally.storeErrors], single: true });
  for (const step of STEPS) {
    const values = tally.steps[step];
    if (values !== undefined && values.length > 0) list.push({ name: STEP_METRICS[step], unit: "Milliseconds", values, single: false });
  }
  if (tally.handlerMs.length > 0) list.push({ name: "HandlerMs", unit: "Milliseconds", values: tally.handlerMs, single: false });
  if (tally.batchMs !== undefined) list.push({ name: "BatchMs", unit: "Milliseconds", values: [tally.batchMs], single: true });
  return list;
}

/**
 * The EMF documents of one tally: usually one; more only when a latency has more than 100
 * observations (EMF's limit per metric), the extra documents carrying just those values.
 */
export function emfDocuments(tally: BatchTally, target: { namespace: string; service: string; timestamp?: number }): Record<string, unknown>[] {
  const timestamp = target.timestamp ?? Date.now();
  const chunks: Measure[][] = [];
  for (const measure of measures(tally)) {
    for (let start = 0, part = 0; start < measure.values.length; start += EMF_MAX_VALUES, part += 1) {
      const values = measure.values.slice(start, start + EMF_MAX_VALUES);
      const chunk = chunks[part] ?? [];
      chunk.push({ ...measure, values });
      chunks[part] = chunk;
    }
  }
  return chunks.map((chunk) => {
    const document: Record<string, unknown> = {
      _aws: {
        Timestamp: timestamp,
        CloudWatchMetrics: [
          {
            Namespace: target.namespace,
            Dimensions: [["service"]],
            Metrics: chunk.map((measure) => ({ Name: measure.name, Unit: measure.unit })),
          },
        ],
      },
      service: target.service,
    };
    for (const measure of chunk) document[measure.name] = measure.single ? measure.values[0] : measure.values;
    return document;
  });
}

/** The Analytics Engine data point of one tally (columns: `ANALYTICS_DOUBLES`). */
export function analyticsDataPoint(tally: BatchTally, target: { service: string; queue?: string }): { indexes: string[]; blobs: string[]; doubles: number[] } {
  const step = (name: StoreStep) => round(sum(tally.steps[name] ?? []));
  const doubles = [
    tally.messages,
    ...STATUSES.map((status) => tally.statuses[status]),
    tally.storeErrors,
    tally.batchMs ?? 0,
    round(sum(tally.handlerMs)),
    ...STEPS.map(step),
  ];
  // An Analytics Engine index is at most 96 bytes.
  const index = new TextEncoder().encode(target.service).length <= 96 ? target.service : target.service.slice(0, 32);
  return { indexes: [index], blobs: [target.service, target.queue ?? ""], doubles };
}

/** Adds a tally to a Powertools `Metrics` (every count, each latency observation). */
export function addToPowertools(metrics: PowertoolsMetricsLike, tally: BatchTally): void {
  for (const measure of measures(tally)) {
    for (const value of measure.values) metrics.addMetric(measure.name, measure.unit, value);
  }
}

function environment(name: string, valid: (value: string) => boolean): string | undefined {
  const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env;
  const value = env?.[name];
  return typeof value === "string" && value !== "" && valid(value) ? value : undefined;
}

/** The metrics sinks of one consumer, resolved from the option once. */
export interface MetricsSinks<Env = unknown> {
  readonly namespace: string;
  readonly service: string;
  readonly emf: boolean;
  readonly write: (line: string) => void;
  readonly powertools?: PowertoolsMetricsLike;
  readonly analytics?: MetricsOptions<Env>["analytics"];
}

/** Resolves the `metrics` option: undefined / false → no metrics; true → EMF with the defaults. */
export function metricsSinks<Env>(option: boolean | MetricsOptions<Env> | undefined): MetricsSinks<Env> | undefined {
  if (option === undefined || option === false) return undefined;
  const options: MetricsOptions<Env> = option === true ? {} : option;
  const emf = options.emf ?? (options.powertools === undefined && options.analytics === undefined);
  return {
    // An environment value CloudWatch would refuse is passed over (a cold start must not fail on it).
    namespace: options.namespace ?? environment("POWERTOOLS_METRICS_NAMESPACE", cloudWatchNamespace) ?? "BabelQueue",
    service:
      options.service ??
      environment("POWERTOOLS_SERVICE_NAME", cloudWatchText) ??
      environment("AWS_LAMBDA_FUNCTION_NAME", cloudWatchText) ??
      "babelqueue-serverless",
    emf,
    write: options.write ?? ((line) => writeLine("info", line)),
    ...(options.powertools === undefined ? {} : { powertools: options.powertools }),
    ...(options.analytics === undefined ? {} : { analytics: options.analytics }),
  };
}

/**
 * The metrics of one batch. Counts every event; writes at `batch-end`. The late results that
 * follow it (`batch-end.pending` handlers still running past a deadline) are written together
 * once the last one is in, with their final statuses and no second `Messages` count.
 * `finish()` writes whatever was not written, for an engine that never said `batch-end`.
 */
export class BatchMetrics<Env = unknown> {
  readonly #sinks: MetricsSinks<Env>;
  readonly #queue: string | undefined;
  readonly #dataset: AnalyticsEngineLike | undefined;
  #tally = emptyTally();
  #ended = false;
  /** Late results still expected after `batch-end`. */
  #pending = 0;

  constructor(sinks: MetricsSinks<Env>, batch: { queue?: string; env?: Env }) {
    this.#sinks = sinks;
    this.#queue = batch.queue;
    const analytics = sinks.analytics;
    let dataset: AnalyticsEngineLike | undefined;
    try {
      dataset = typeof analytics === "function" ? analytics(batch.env as Env) : analytics;
    } catch {
      dataset = undefined;
    }
    this.#dataset = typeof dataset?.writeDataPoint === "function" ? dataset : undefined;
  }

  observe(event: EngineEvent): void {
    count(this.#tally, event);
    if (event.type === "batch-end") {
      this.#ended = true;
      this.#pending = event.pending;
      this.#flush();
    } else if (this.#ended && event.type === "result" && event.late === true) {
      this.#pending -= 1;
      if (this.#pending <= 0) this.#flush();
    }
  }

  /** Writes what was not written yet, unless late results are still expected after a `batch-end`. */
  finish(): void {
    if (!this.#ended || this.#pending <= 0) this.#flush();
  }

  #flush(): void {
    const tally = this.#tally;
    this.#tally = emptyTally();
    if (isEmpty(tally)) return;
    const sinks = this.#sinks;
    const powertools = sinks.powertools;
    const dataset = this.#dataset;
    const queue = this.#queue;
    // Each sink on its own: one that throws neither stops the others nor changes an outcome.
    if (powertools !== undefined) attempt(() => addToPowertools(powertools, tally));
    if (sinks.emf) attempt(() => {
      for (const document of emfDocuments(tally, sinks)) sinks.write(JSON.stringify(document));
    });
    if (dataset !== undefined) {
      attempt(() => dataset.writeDataPoint(analyticsDataPoint(tally, { service: sinks.service, ...(queue === undefined ? {} : { queue }) })));
    }
  }
}

function attempt(write: () => void): void {
  try {
    write();
  } catch {
    // ignored on purpose
  }
}

// Stryker disable next-line BooleanLiteral: optionKeys reads only the keys; each `true` lets the compiler check the list against the options type
const METRICS_OPTION_KEYS = optionKeys<MetricsOptions>({ namespace: true, service: true, powertools: true, analytics: true, emf: true, write: true });

/** Checks the options of `batchMetrics` (unknown keys included) and resolves its sinks. */
function checkMetrics<Env>(metrics: MetricsOptions<Env>): MetricsSinks<Env> {
  if (typeof metrics !== "object" || metrics === null) throw new InvalidOptionError("metrics", "must be an options object");
  checkOptions(metrics, METRICS_OPTION_KEYS as OptionKeys<MetricsOptions<Env>>, "metrics");
  if (metrics.powertools !== undefined && typeof metrics.powertools?.addMetric !== "function") {
    throw new InvalidOptionError("metrics.powertools", "must be a Powertools Metrics instance (with addMetric)");
  }
  const analytics = metrics.analytics;
  if (analytics !== undefined && typeof analytics !== "function" && typeof analytics?.writeDataPoint !== "function") {
    throw new InvalidOptionError("metrics.analytics", "must be an Analytics Engine dataset or (env) => dataset");
  }
  for (const field of ["namespace", "service"] as const) {
    const value = metrics[field];
    if (value !== undefined && (typeof value !== "string" || value === "" || value.length > 255)) {
      throw new InvalidOptionError(`metrics.${field}`, "must be a string of 1 to 255 characters");
    }
  }
  if (metrics.write !== undefined && typeof metrics.write !== "function") throw new InvalidOptionError("metrics.write", "must be a function");
  // CloudWatch drops a document whose namespace or dimension value it refuses: refused here, at setup
  // (when the metrics go to CloudWatch: EMF or Powertools; Analytics Engine takes any text).
  const cloudWatch = metrics.powertools !== undefined || (metrics.emf ?? metrics.analytics === undefined);
  if (cloudWatch && metrics.namespace !== undefined && !cloudWatchNamespace(metrics.namespace)) {
    throw new InvalidOptionError("metrics.namespace", 'must be printable ASCII, not only \':\' and not under "AWS/" (a CloudWatch namespace)');
  }
  if (cloudWatch && metrics.service !== undefined && !cloudWatchText(metrics.service)) {
    throw new InvalidOptionError("metrics.service", "must be printable ASCII with a non-blank character (a CloudWatch dimension value)");
  }
  return metricsSinks(metrics) as MetricsSinks<Env>;
}

/** What CloudWatch takes as a dimension value: ASCII without control characters, not blank. */
function cloudWatchText(value: string): boolean {
  return /^[\x20-\x7e]+$/.test(value) && value.trim() !== "";
}

/** What CloudWatch takes as a custom namespace: such a text, not only colons, not under "AWS/". */
function cloudWatchNamespace(value: string): boolean {
  return cloudWatchText(value) && /[^:]/.test(value) && !value.startsWith("AWS/");
}

/**
 * Metrics per batch, as the `metrics` option of `sqsHandler` / `queueHandler` (or
 * `createObservability`): with no options, CloudWatch EMF on stdout under the defaults; with
 * `powertools`, `addMetric` calls on your Powertools `Metrics`; with `analytics`, one Workers
 * Analytics Engine data point per batch. Throws `InvalidOptionError` for a wrong option.
 *
 * @example
 * ```ts
 * import { Metrics } from "@aws-lambda-powertools/metrics";
 * import { InMemoryStore } from "babelqueue-serverless";
 * import { sqsHandler } from "babelqueue-serverless/lambda";
 * import { batchMetrics } from "babelqueue-serverless/metrics";
 *
 * export const handler = sqsHandler({
 *   store: new InMemoryStore(),
 *   handle: async (envelope) => sendReceipt(envelope.data),
 *   metrics: batchMetrics({ powertools: new Metrics({ namespace: "orders" }) }),
 * });
 * ```
 */
export function batchMetrics<Env = unknown>(options: MetricsOptions<Env> = {}): ObservabilityExtension<Env> {
  const sinks = checkMetrics(options);
  return {
    extends: "metrics",
    batch(facts) {
      const metrics = new BatchMetrics(sinks, facts);
      return { observe: (event) => metrics.observe(event), finish: () => metrics.finish() };
    },
  };
}
