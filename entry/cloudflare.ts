/**
 * `babelqueue-serverless/cloudflare`: everything a Cloudflare Worker needs — the Durable Object
 * store and its object class, the KV seen-set store, and the Queues consumer handler.
 *
 * Re-export `IdempotencyObject` from your Worker's main module so the runtime can find the class
 * your `durable_objects` binding names. Nothing here imports the AWS SDK or any Node module.
 */
export {
  DurableObjectStore,
  type DurableObjectStoreOptions,
  type IdempotencyNamespace,
  type IdempotencyShard,
  type ShardClaim,
  type ShardClaimRef,
  type ShardRecord,
} from "../stores/durable-object.js";
export { IdempotencyObject, type IdempotencyObjectState } from "../stores/idempotency-object.js";
export { KVStore, type KVStoreOptions, type SeenSetKV } from "../stores/kv.js";
export {
  CONSUMER_WALL_TIME_MS,
  MAX_RETRY_DELAY_SECONDS,
  type ExecutionContextLike,
  type MessageBatchLike,
  type QueueConsumer,
  type QueueHandlerOptions,
  type QueueMessageLike,
  type QueueRuntimeContext,
  parkDelaySeconds,
  queueHandler,
} from "../handlers/cloudflare-queue.js";
export {
  D1_FENCE_CONSTRAINT,
  D1Store,
  type D1DatabaseLike,
  type D1ResultLike,
  type D1StatementLike,
  type D1StoreOptions,
  type D1Transaction,
  d1IdempotencyTableSql,
} from "../stores/d1.js";
