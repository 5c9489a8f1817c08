/**
 * babelqueue-serverless — the runtime-free core: the store contract, envelope decoding, the
 * one-message decision, the batch engine, `wrap`, and `InMemoryStore`.
 *
 * Runtime adapters and backend stores live behind their own subpaths
 * (`/lambda`, `/cloudflare`, `/dynamodb`, `/upstash`), so this entry has no dependency at all.
 */
export {
  type Claim,
  type ClaimHints,
  type ClaimRef,
  type FencedClaim,
  type IdRecord,
  type Recall,
  type TransactionalStore,
  isTransactionalStore,
  type ClaimStatus,
  type ClaimingStore,
  type Store,
  type StoreWindows,
  DEFAULT_LEASE_MS,
  DEFAULT_RETENTION_MS,
  isClaimingStore,
} from "./contract.js";
export type {
  DecisionPolicy,
  DedupeMode,
  MessageResult,
  ResultStatus,
} from "./decision.js";
export {
  BatchEngine,
  type Delivery,
  type EngineOptions,
  type Handler,
  type HandlerContext,
  type ProcessOptions,
} from "./engine.js";
export type { EngineEvent, RunInfo, RunInterceptor, StoreStep } from "./events.js";
export { type Fingerprinter, MAX_FINGERPRINT_LENGTH, canonicalJson, defaultFingerprint } from "./fingerprint.js";
export {
  type Decoded,
  type Envelope,
  type EnvelopeMeta,
  decodeEnvelope,
  messageId,
  parseBody,
  reconcileAttempts,
} from "./envelope.js";
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
} from "./errors.js";
export { checkNamespace, keyPart, sha256Base64url, storeKey, utf8Length } from "./keys.js";
export { InMemoryStore, type InMemoryStoreOptions } from "./memory-store.js";
export { checkMs, resolveWindows } from "./windows.js";
export { type WrapDelivery, type WrappedHandler, type WrappedResultHandler, rejectionOf, wrap, wrapResult } from "./wrap.js";
export { NoTransactionError, txOf } from "./transaction.js";
export {
  type BatchObservation,
  type LoggerLike,
  type MetricsOptions,
  type Observability,
  type ObservabilityOptions,
  type OtelApi,
  type TracingOptions,
  createObservability,
  isReplay,
  jsonLogger,
  traceIdOf,
} from "./observability/index.js";
