/**
 * The public surface, as literal lists: every name each subpath exports, and the deprecated ones it
 * still exports for one minor version (removed in 0.3.0). Adding or removing a public name means
 * editing this file — a visible decision in review. `type X` is a type-only export.
 *
 * Checked against the entry sources by public-surface.test.ts, and against the packed package's
 * run-time exports by exports.test.ts.
 */
export interface Surface {
  readonly public: readonly string[];
  readonly deprecated: readonly string[];
}

export const SURFACE: Readonly<Record<string, Surface>> = {
  ".": {
    public: [
      "BabelQueueServerlessError", "BatchEngine", "type BatchExtension", "type BatchObservation", "type Claim", "type ClaimingStore", "type ClaimRef",
      "type ClaimStatus", "createObservability", "DeadlineExceededError", "type DecisionPolicy", "type Decoded", "decodeEnvelope",
      "type DedupeMode", "DEFAULT_LEASE_MS", "DEFAULT_RETENTION_MS", "defaultFingerprint", "type Delivery", "type EngineEvent",
      "type EngineOptions", "type Envelope", "type EnvelopeMeta", "FenceLostError", "type Fingerprinter", "GroupBlockedError",
      "type Handler", "type HandlerContext", "InFlightError", "InMemoryStore", "type InMemoryStoreOptions", "InvalidMessageError",
      "InvalidOptionError", "isClaimingStore", "isReplay", "isTransactionalStore", "jsonLogger", "type LoggerLike", "messageId",
      "type MessageResult", "NoTransactionError", "type Observability", "type ObservabilityExtension", "type ObservabilityOptions",
      "PayloadConflictError", "type ProcessOptions", "type ResultStatus", "type RunInfo", "type RunInterceptor",
      "type Store", "type StoreStep", "StoreUnavailableError", "type StoreWindows", "type TransactionalStore",
      "TransactionConditionError", "txOf", "wrap", "type WrapDelivery", "type WrappedHandler", "type WrappedResultHandler", "wrapResult",
    ],
    deprecated: [
      "canonicalJson", "checkMs", "checkNamespace", "type ClaimHints", "type FencedClaim", "type IdRecord", "keyPart",
      "MAX_FINGERPRINT_LENGTH", "type MetricsOptions", "type OtelApi", "parseBody", "type Recall", "reconcileAttempts", "rejectionOf",
      "resolveWindows", "sha256Base64url", "storeKey", "traceIdOf", "type TracingOptions", "utf8Length",
    ],
  },
  "./lambda": {
    public: [
      "kafkaHandler", "type KafkaBatchItemFailure", "type KafkaBatchResponse", "type KafkaEvent", "type KafkaHandler", "type KafkaHandlerOptions",
      "type KafkaRecord", "type KafkaRuntimeContext", "type ParkOutcome", "sqsHandler", "type SqsHandler",
      "type SqsHandlerOptions", "type SqsParks", "type SqsRuntimeContext",
    ],
    deprecated: ["fifoGroupOf", "headersOf", "redeliveriesOf"],
  },
  "./lambda/parks": {
    public: ["type ParkOptions", "type ParkOutcome", "type SqsClientLike", "type SqsParks", "sqsParks"],
    deprecated: [],
  },
  "./dynamodb": {
    public: [
      "AUTO_PRECHECK_MIN_REDELIVERED", "createIdempotencyTable", "type CreateIdempotencyTableOptions", "DYNAMODB_MAX_KEY_BYTES",
      "DYNAMODB_STORE_ACTIONS", "DYNAMODB_TRANSACTION_ACTIONS", "DYNAMODB_TRANSACTION_LIMITS", "DynamoDBStore", "type DynamoDBStoreOptions",
      "DynamoDBTransaction", "idempotencyTableDefinition", "type IdempotencyTableDefinition", "type PrecheckPolicy", "type TableAttributeOptions",
      "TransactionalDynamoDBStore",
    ],
    deprecated: ["transactDynamoDB"],
  },
  "./postgres": {
    public: [
      "createIdempotencyTable", "type CreateIdempotencyTableOptions", "DEFAULT_POSTGRES_TABLE", "DEFAULT_POSTGRES_TABLES", "idempotencyTableSql",
      "type PgPooledClient", "type PgPoolLike", "type PgQueryable", "type PgResult", "POSTGRES_MAX_IDS_PER_STATEMENT", "POSTGRES_MAX_KEY_BYTES", "type PostgresIsolation",
      "type PostgresLayout", "PostgresStore", "type PostgresStoreOptions", "quoteTableName",
    ],
    deprecated: [],
  },
  "./redis": {
    public: [
      "type IoredisLike", "ioredisScriptClient", "MAX_REDIS_KEY_BYTES", "type RedisLayoutName", "type RedisScriptClient", "RedisStore",
      "type RedisStoreCommonOptions", "type RedisStoreOptions",
    ],
    deprecated: [],
  },
  "./upstash": {
    public: [
      "type IoredisLike", "ioredisScriptClient", "MAX_REDIS_KEY_BYTES", "type RedisLayoutName", "type RedisScriptClient", "RedisStore",
      "type RedisStoreCommonOptions", "type RedisStoreOptions", "UpstashRedisStore", "type UpstashRedisStoreOptions",
    ],
    deprecated: [],
  },
  "./cloudflare": {
    public: [
      "CONSUMER_WALL_TIME_MS", "D1_FENCE_CONSTRAINT", "type D1DatabaseLike", "d1IdempotencyTableSql", "type D1ResultLike", "type D1StatementLike",
      "D1Store", "type D1StoreOptions", "type D1Transaction", "DurableObjectStore", "type DurableObjectStoreOptions", "type ExecutionContextLike",
      "type IdempotencyNamespace", "KVStore", "type KVStoreOptions", "MAX_RETRY_DELAY_SECONDS", "type MessageBatchLike", "type QueueConsumer",
      "queueHandler", "type QueueHandlerOptions", "type QueueMessageLike", "type QueueRuntimeContext", "type SeenSetKV",
    ],
    deprecated: ["type IdempotencyShard", "parkDelaySeconds", "type ShardClaim", "type ShardClaimRef", "type ShardRecord"],
  },
  "./cloudflare/durable-object": {
    public: ["IdempotencyObject", "type IdempotencyObjectState"],
    deprecated: [],
  },
  "./metrics": {
    public: ["ANALYTICS_DOUBLES", "type AnalyticsEngineLike", "batchMetrics", "type MetricsOptions", "type PowertoolsMetricsLike"],
    deprecated: [],
  },
  "./tracing": {
    public: ["type OtelApi", "otelTracing", "type TracingOptions"],
    deprecated: [],
  },
  "./store-kit": {
    public: [
      "answerPerKey", "type BatchClaim", "checkFingerprint", "checkFingerprints", "checkMs", "checkNamespace", "checkOptions", "type ClaimFailure", "type ClaimHints",
      "describeFailure", "errorCode", "fenceToken", "heldClaims", "isToken",
      "type FailureOptions", "type FailureWording", "type FencedClaim", "httpStatus", "type IdRecord", "keyPart", "MAX_FAILURE_DETAIL",
      "MAX_FINGERPRINT_LENGTH", "optionKeys", "type OptionKeys", "PartialStepError", "type Recall", "resolveWindows", "scrubbedError", "sha256Base64url",
      "storeFailure", "storeKey", "type StoreKeyOptions", "throwStepFailures", "unionKeys", "utf8Length", "withFingerprint",
    ],
    deprecated: [],
  },
};

/** The run-time (value) names of a subpath, public and deprecated, sorted as `Object.keys` of the module would be after sorting. */
export function valueNames(surface: Surface): string[] {
  return [...surface.public, ...surface.deprecated].filter((name) => !name.startsWith("type ")).sort();
}
