/**
 * `babelqueue-serverless` — the runtime-free core: what an application needs to dedupe its queue
 * consumer. `wrap` for any job runner, `BatchEngine` for a runtime of your own, `InMemoryStore`, the
 * store contract's types, the envelope, the results and the typed errors.
 *
 * Runtime adapters and backend stores live behind their own subpaths (`/lambda`, `/cloudflare`,
 * `/dynamodb`, `/redis`, `/upstash`, `/postgres`), so this entry has no dependency at all; metrics and
 * tracing are on `/metrics` and `/tracing`; the helpers for writing a store of your own are on `/store-kit`.
 *
 * The list below is deliberate, and pinned by test/package/exports.test.ts: adding or removing a
 * name is a visible decision. Names marked `@deprecated` moved elsewhere and are kept for one minor
 * version (removed in 0.3.0).
 *
 * @example
 * ```ts
 * import { InMemoryStore, wrap } from "babelqueue-serverless";
 *
 * const handle = wrap(new InMemoryStore(), async (envelope) => {
 *   await sendReceipt(envelope.data);
 * });
 * await handle(job.data); // resolves: ack the job; rejects: let the runner retry it
 * ```
 *
 * @module babelqueue-serverless
 */
import * as kit from "../src/store-kit/index.js";
import * as envelopeModule from "../src/envelope.js";
import * as fingerprintModule from "../src/fingerprint.js";
import * as traceContext from "../src/observability/trace-context.js";
import * as wrapModule from "../src/wrap.js";

import type * as contract from "../src/contract.js";
import type * as metrics from "../src/observability/metrics.js";
import type * as otelApi from "../src/observability/otel-api.js";
import type * as tracing from "../src/observability/tracing.js";

export {
  type Claim,
  type ClaimRef,
  type ClaimStatus,
  type ClaimingStore,
  type Store,
  type StoreWindows,
  type TransactionalStore,
  DEFAULT_LEASE_MS,
  DEFAULT_RETENTION_MS,
  isClaimingStore,
  isTransactionalStore,
} from "../src/contract.js";
export type { DecisionPolicy, DedupeMode, MessageResult, ResultStatus } from "../src/decision.js";
export {
  BatchEngine,
  type Delivery,
  type EngineOptions,
  type Handler,
  type HandlerContext,
  type ProcessOptions,
} from "../src/engine/index.js";
export type { EngineEvent, RunInfo, RunInterceptor, StoreStep } from "../src/events.js";
export { type Fingerprinter, defaultFingerprint } from "../src/fingerprint.js";
export { type Decoded, type Envelope, type EnvelopeMeta, decodeEnvelope, messageId } from "../src/envelope.js";
export {
  BabelQueueServerlessError,
  DeadlineExceededError,
  FenceLostError,
  GroupBlockedError,
  InFlightError,
  InvalidMessageError,
  InvalidOptionError,
  PayloadConflictError,
  StoreUnavailableError,
  TransactionConditionError,
} from "../src/errors.js";
export { InMemoryStore, type InMemoryStoreOptions } from "../src/memory-store.js";
export { type WrapDelivery, type WrappedHandler, type WrappedResultHandler, wrap, wrapResult } from "../src/wrap.js";
export { NoTransactionError, txOf } from "../src/transaction.js";
export {
  type BatchExtension,
  type BatchObservation,
  type LoggerLike,
  type Observability,
  type ObservabilityExtension,
  type ObservabilityOptions,
  createObservability,
  jsonLogger,
} from "../src/observability/index.js";
export { isReplay } from "../src/observability/trace-context.js";

// ---------------------------------------------------------------------------------------------
// Deprecated: kept for one minor version, removed in 0.3.0.

/** @deprecated Import it from `babelqueue-serverless/store-kit`. Removed in 0.3.0. */
export const MAX_FINGERPRINT_LENGTH: typeof kit.MAX_FINGERPRINT_LENGTH = kit.MAX_FINGERPRINT_LENGTH;
/** @deprecated Import it from `babelqueue-serverless/store-kit`. Removed in 0.3.0. */
export type ClaimHints = contract.ClaimHints;
/** @deprecated Import it from `babelqueue-serverless/store-kit`. Removed in 0.3.0. */
export type FencedClaim = contract.FencedClaim;
/** @deprecated Import it from `babelqueue-serverless/store-kit`. Removed in 0.3.0. */
export type IdRecord = contract.IdRecord;
/** @deprecated Import it from `babelqueue-serverless/store-kit`. Removed in 0.3.0. */
export type Recall = contract.Recall;
/** @deprecated Import it from `babelqueue-serverless/store-kit`. Removed in 0.3.0. */
export const storeKey: typeof kit.storeKey = kit.storeKey;
/** @deprecated Import it from `babelqueue-serverless/store-kit`. Removed in 0.3.0. */
export const keyPart: typeof kit.keyPart = kit.keyPart;
/** @deprecated Import it from `babelqueue-serverless/store-kit`. Removed in 0.3.0. */
export const utf8Length: typeof kit.utf8Length = kit.utf8Length;
/** @deprecated Import it from `babelqueue-serverless/store-kit`. Removed in 0.3.0. */
export const sha256Base64url: typeof kit.sha256Base64url = kit.sha256Base64url;
/** @deprecated Import it from `babelqueue-serverless/store-kit`. Removed in 0.3.0. */
export const checkNamespace: typeof kit.checkNamespace = kit.checkNamespace;
/** @deprecated Import it from `babelqueue-serverless/store-kit`. Removed in 0.3.0. */
export const checkMs: typeof kit.checkMs = kit.checkMs;
/** @deprecated Import it from `babelqueue-serverless/store-kit`. Removed in 0.3.0. */
export const resolveWindows: typeof kit.resolveWindows = kit.resolveWindows;
/** @deprecated Internal: the engine reconciles attempts itself (`ctx.attempts`). Removed in 0.3.0. */
export const reconcileAttempts: typeof envelopeModule.reconcileAttempts = envelopeModule.reconcileAttempts;
/** @deprecated Use `decodeEnvelope`, which parses the body too. Removed in 0.3.0. */
export const parseBody: typeof envelopeModule.parseBody = envelopeModule.parseBody;
/** @deprecated Internal to `wrap` (its rejections are the typed errors). Removed in 0.3.0. */
export const rejectionOf: typeof wrapModule.rejectionOf = wrapModule.rejectionOf;
/** @deprecated Internal to tracing (BabelQueue's trace_id → OpenTelemetry trace id). Removed in 0.3.0. */
export const traceIdOf: typeof traceContext.otelTraceId = traceContext.otelTraceId;
/** @deprecated Import it from `babelqueue-serverless/metrics` (with `batchMetrics`). Removed in 0.3.0. */
export type MetricsOptions<Env = unknown> = metrics.MetricsOptions<Env>;
/** @deprecated Import it from `babelqueue-serverless/tracing` (with `otelTracing`). Removed in 0.3.0. */
export type TracingOptions = tracing.TracingOptions;
/** @deprecated Import it from `babelqueue-serverless/tracing`. Removed in 0.3.0. */
export type OtelApi = otelApi.OtelApi;
/** @deprecated Internal to the default fingerprint. Removed in 0.3.0. */
export const canonicalJson: typeof fingerprintModule.canonicalJson = fingerprintModule.canonicalJson;
