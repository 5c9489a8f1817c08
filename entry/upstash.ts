/**
 * `babelqueue-serverless/upstash`: `UpstashRedisStore`, the Redis store over Upstash's REST API
 * (`@upstash/redis`), for Lambda without a VPC and for Workers. `RedisStore` and its helpers are here
 * too, as they were before `babelqueue-serverless/redis` existed.
 *
 * The list is deliberate and pinned by test/package/exports.test.ts.
 *
 * @module babelqueue-serverless/upstash
 */
export { UpstashRedisStore, type UpstashRedisStoreOptions } from "../stores/redis/upstash.js";
export * from "./redis.js";
