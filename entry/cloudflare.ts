/**
 * `babelqueue-serverless/cloudflare`: what a Cloudflare Queues consumer needs — the Durable Object
 * store's client, the KV seen-set store, and the Queues consumer handler.
 *
 * This entry imports nothing from `cloudflare:workers`, so it loads in plain Node too: a user's
 * unit tests can import their consumer (built with `queueHandler`) without workerd. The Durable
 * Object class itself is not here: it extends `cloudflare:workers`' `DurableObject`, so it lives
 * behind `babelqueue-serverless/cloudflare/durable-object` (and, under the `workerd` export
 * condition that wrangler bundles with, is re-exported from this subpath as well; see
 * ./cloudflare-workerd.ts). Nothing here imports the AWS SDK or any Node module.
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
