/**
 * `UpstashRedisStore`: the Redis store over Upstash's REST API (`@upstash/redis`), for Lambda without
 * a VPC and for Workers. The store logic is `RedisStore`'s (store.ts), unchanged: every operation is
 * one Lua script, so a batch step is ONE HTTP request.
 *
 * Give it an `@upstash/redis` client, or the REST URL and token to make one (made on first use from
 * the fetch-only build, so a TCP-only user never loads the package). The token never appears in an
 * error: it is scrubbed from every message the store reports.
 *
 * What this is *not*: a Redis Cluster client (Upstash needs none) or a connection manager.
 */
import { InvalidOptionError } from "../../src/errors.js";
import { checkOptions, optionKeys } from "../../src/store-kit/options.js";
import { checkMs } from "../../src/store-kit/windows.js";
import { type PlainSetter, type UpstashPipelineLike, hasPipeline, upstashSetter } from "./plain.js";
import type { RedisScriptClient } from "./scripts.js";
import { COMMON_OPTION_KEYS, DEFAULT_REDIS_TIMEOUT_MS, RedisStore, type RedisStoreCommonOptions } from "./store.js";

/** Options of `UpstashRedisStore`: a client, or the REST URL and token to make one. */
export interface UpstashRedisStoreOptions extends RedisStoreCommonOptions {
  /** An `@upstash/redis` client (`@upstash/redis`, `@upstash/redis/cloudflare`, `Redis.fromEnv()`). */
  client?: RedisScriptClient;
  /** `UPSTASH_REDIS_REST_URL`, when no `client` is given. */
  url?: string;
  /** `UPSTASH_REDIS_REST_TOKEN`, when no `client` is given. Never appears in an error. */
  token?: string;
}

const UPSTASH_OPTION_KEYS = optionKeys<UpstashRedisStoreOptions>({ ...COMMON_OPTION_KEYS, client: true, url: true, token: true });

/**
 * The Redis store over Upstash's REST API. Works in Lambda, Node and Workers.
 *
 * @example
 * ```ts
 * import { UpstashRedisStore } from "babelqueue-serverless/upstash";
 *
 * const store = new UpstashRedisStore({
 *   url: process.env.UPSTASH_REDIS_REST_URL,
 *   token: process.env.UPSTASH_REDIS_REST_TOKEN,
 *   namespace: "orders",
 * });
 * ```
 */
export class UpstashRedisStore extends RedisStore {
  protected override readonly storeName: string = "UpstashRedisStore";

  constructor(options: UpstashRedisStoreOptions) {
    checkOptions(options, UPSTASH_OPTION_KEYS, "UpstashRedisStore");
    const { url, token, client: given, ...common } = options ?? {};
    const timeoutMs = checkMs("timeoutMs", common.timeoutMs ?? DEFAULT_REDIS_TIMEOUT_MS);
    let client = given;
    let plainSets: PlainSetter | undefined;
    if (client === undefined) {
      if (typeof url !== "string" || url === "") throw new InvalidOptionError("url", "is required when no client is given");
      if (typeof token !== "string" || token === "") throw new InvalidOptionError("token", "is required when no client is given");
      const made = upstashRestClient(url, token, timeoutMs);
      client = made.scripts;
      plainSets = upstashSetter(made.redis);
    } else if (hasPipeline(client)) {
      const pipelined = client;
      plainSets = upstashSetter(() => pipelined);
    }
    super({ ...common, client, timeoutMs });
    if (typeof token === "string" && token !== "") this.secrets.push(token);
    // Upstash bills every command: first deliveries and fingerprinted commits go as plain pipelined SETs (plain.ts).
    this.plainSets = plainSets;
  }
}

/**
 * An `@upstash/redis` client made on first use (so a TCP-only user never loads the package), from
 * the fetch-only build that runs in Node 18+, Lambda and Workers alike. Each request is aborted
 * after `timeoutMs`, and sent once: the client's own retries (on by default, up to 5 resends over a
 * few seconds after a network error) could land a claim after the store gave its step up and sent
 * the release behind it, holding the id for a lease. Retrying is the engine's job (a commit step is
 * retried; a failed claim step is redelivered by the queue). `retries: 0`, as `retry: false` still
 * makes two attempts in @upstash/redis.
 */
function upstashRestClient(url: string, token: string, timeoutMs: number): { scripts: RedisScriptClient; redis: () => Promise<RedisScriptClient & UpstashPipelineLike> } {
  let made: Promise<RedisScriptClient & UpstashPipelineLike> | undefined;
  const redis = () => {
    if (made === undefined) {
      made = import("@upstash/redis/cloudflare").then(
        ({ Redis }) =>
          new Redis({ url, token, enableTelemetry: false, retry: { retries: 0 }, signal: () => AbortSignal.timeout(timeoutMs) }) as unknown as RedisScriptClient & UpstashPipelineLike,
      );
    }
    return made;
  };
  return {
    scripts: {
      eval: async (script, keys, args) => (await redis()).eval(script, keys, args),
      evalsha: async (sha1, keys, args) => (await redis()).evalsha(sha1, keys, args),
    },
    redis,
  };
}
