/**
 * `babelqueue-serverless/redis`: `RedisStore`, the Redis store over a TCP client (ioredis,
 * node-redis, an ioredis `Cluster`) for ElastiCache, Valkey or a self-hosted Redis, and the adapter
 * that gives an ioredis client the `eval` / `evalsha` shape the store calls.
 *
 * The list is deliberate and pinned by test/package/exports.test.ts.
 *
 * @module babelqueue-serverless/redis
 */
export {
  type IoredisLike,
  MAX_REDIS_KEY_BYTES,
  type RedisLayoutName,
  RedisStore,
  type RedisStoreCommonOptions,
  type RedisStoreOptions,
  ioredisScriptClient,
} from "../stores/redis/store.js";
export type { RedisScriptClient } from "../stores/redis/scripts.js";
