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
 *
 * The list is deliberate and pinned by test/package/exports.test.ts.
 *
 * @module babelqueue-serverless/cloudflare
 */
import type * as durableObject from "../stores/durable-object/store.js";
import * as queue from "../handlers/cloudflare-queue.js";

export {
  DurableObjectStore,
  type DurableObjectStoreOptions,
  type IdempotencyNamespace,
} from "../stores/durable-object/store.js";
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

// Deprecated: kept for one minor version, removed in 0.3.0.

/** @deprecated Internal to `queueHandler` (it sizes a park's retry delay for you). Removed in 0.3.0. */
export const parkDelaySeconds: typeof queue.parkDelaySeconds = queue.parkDelaySeconds;
/** @deprecated The object's RPC surface is internal to `DurableObjectStore`. Removed in 0.3.0. */
export type IdempotencyShard = durableObject.IdempotencyShard;
/** @deprecated The object's RPC answer is a `Claim` (from the package root). Removed in 0.3.0. */
export type ShardClaim = durableObject.ShardClaim;
/** @deprecated The object's RPC surface is internal to `DurableObjectStore`. Removed in 0.3.0. */
export type ShardClaimRef = durableObject.ShardClaimRef;
/** @deprecated The object's RPC answer is an `IdRecord` (from the package root). Removed in 0.3.0. */
export type ShardRecord = durableObject.ShardRecord;
