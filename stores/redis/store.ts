/**
 * `RedisStore` (export `babelqueue-serverless/redis`, and `/upstash`): the Redis store logic over any
 * client with `eval` / `evalsha` — a TCP client (ioredis, node-redis) for ElastiCache / Valkey /
 * self-hosted Redis, or Upstash's REST client, which `UpstashRedisStore` (upstash.ts) wraps. One
 * logic, two transports: every operation is one Lua script from scripts.ts, run with EVALSHA (EVAL
 * on NOSCRIPT).
 *
 * Contract (the store contract of docs/ARCHITECTURE.md, the same as `InMemoryStore`):
 *   - record layout (`layout`, layouts.ts): the own one by default — key `{prefix}{namespace}:{id}`
 *     (`prefix` defaults to "bq:"), built by `storeKey`; an id whose key would pass 512 bytes, or
 *     that starts with `#`, becomes `#` + its SHA-256; with `hashTag: true` (TCP, Redis Cluster)
 *     `{prefix}{{namespace}}:{id}` — or the records of BabelQueue's PHP or Go SDK
 *     ("babelqueue-php", "babelqueue-go"; docs/drafts/fleet-redis.md).
 *   - `claim` answers claimed / done / in-flight (+ the lease's remaining ms, + the stored payload
 *     fingerprint) in ONE command, and stores the claim's fingerprint in that same command;
 *     lease and retention are `PX` expiries on the Redis server's clock. Value layout: see
 *     scripts.ts (`i:<token>[:<fingerprint>]`, `d[:<fingerprint>]`).
 *   - `release` is a compare-and-delete on the fencing token; `remember` commits unconditionally,
 *     keeping the claim's fingerprint unless it is given one.
 *   - `claimMany` / `rememberMany` / `releaseMany` / `seenMany`: ONE command — one HTTP request
 *     over REST — for the whole batch, so a batch of N new messages costs 2 requests.
 *   - `inspect` (for operators): one command.
 *   - every failure (network, HTTP 4xx/5xx, Redis error, timeout, unexpected reply) becomes a
 *     `StoreUnavailableError` whose message and `cause` carry neither the REST token, nor a fencing
 *     token, nor the command's arguments.
 *
 * Redis Cluster (TCP only; Upstash needs nothing): a script may only touch keys of one hash slot.
 * Single-id calls always work. The batch forms need `hashTag: true`, which puts every key of a
 * namespace in one slot (so one shard serves that namespace); without it a batch across slots
 * fails with CROSSSLOT, which the engine reports as a store error for the batch.
 *
 * What this is *not*: a connection manager. You create, configure and close the client; the store
 * never logs. A call that timed out may still land on the server: a claim then simply expires with
 * its lease, a commit or a release is as if it had answered.
 */
import type { Claim, ClaimHints, ClaimRef, ClaimingStore, IdRecord, StoreWindows } from "../../src/contract.js";
import { InvalidOptionError, StoreUnavailableError } from "../../src/errors.js";
import { describeFailure } from "../../src/store-kit/failures.js";
import { checkOptions, optionKeys } from "../../src/store-kit/options.js";
import { checkFingerprint, checkFingerprints } from "../../src/store-kit/fingerprints.js";
import { checkMs, resolveWindows } from "../../src/store-kit/windows.js";
import { type RedisLayout, type RedisLayoutName, resolveRedisLayout } from "./layouts.js";
import { type RedisScript, type RedisScriptClient, readClaims, readIntegers, readRecord, runScript } from "./scripts.js";

export type { RedisScriptClient } from "./scripts.js";
export { MAX_REDIS_KEY_BYTES, type RedisLayoutName } from "./layouts.js";

export const DEFAULT_REDIS_TIMEOUT_MS = 5_000;

/** Options shared by both Redis stores. */
export interface RedisStoreCommonOptions extends StoreWindows {
  /**
   * Whose records the store reads and writes (docs/drafts/fleet-redis.md): "babelqueue-serverless" (default), or
   * "babelqueue-php" / "babelqueue-go" to share one seen-set with BabelQueue's PHP `RedisStore` or
   * Go `idempotency-redis` consumers of the same queue. A BabelQueue layout uses ids verbatim under
   * the SDK's prefix, refuses `namespace` and `hashTag`, keeps committed ids for good unless
   * `retentionMs` is given, and stores no fingerprint with a committed id.
   */
  layout?: RedisLayoutName;
  /** Key prefix separating consumers that must each run their effect once. Default "". Not in a BabelQueue layout (use `prefix`). */
  namespace?: string;
  /**
   * Put before every key, for sharing a database with other data. `A-Z a-z 0-9 _ . - / :`, up to 100.
   * Default "bq:"; in a BabelQueue layout the SDK's own prefix ("bq:idem:" PHP, "bq:idemp:" Go) —
   * give the one the SDK is configured with.
   */
  prefix?: string;
  /** Longest wait for one store call before it fails as unavailable (ms). Default 5000. */
  timeoutMs?: number;
}

/** Options of `RedisStore` (any Redis client with `eval` / `evalsha`). */
export interface RedisStoreOptions extends RedisStoreCommonOptions {
  /**
   * The client. Its `eval(script, keys, args)` and `evalsha(sha1, keys, args)` must resolve to the
   * script's reply and reject on a Redis error whose message starts with the Redis error code
   * (`NOSCRIPT ...`). `@upstash/redis` has this shape; for ioredis use `ioredisScriptClient(redis)`;
   * for node-redis: `{ eval: (s, keys, args) => c.eval(s, { keys, arguments: args }),
   * evalsha: (sha, keys, args) => c.evalSha(sha, { keys, arguments: args }) }`.
   */
  client: RedisScriptClient;
  /** Redis Cluster: tag keys `{prefix}{{namespace}}:{id}` so a batch stays in one slot. Needs a namespace. Default false. */
  hashTag?: boolean;
}

const REDIS_OPTION_KEYS = optionKeys<RedisStoreOptions>({
  layout: true,
  namespace: true,
  prefix: true,
  timeoutMs: true,
  leaseMs: true,
  retentionMs: true,
  client: true,
  hashTag: true,
});

/** The timer of `timeoutMs` ran out first. */
class CallTimedOut {
  constructor(readonly ms: number) {}
}

/**
 * The Redis store over any client with `eval` / `evalsha`: ioredis (`ioredisScriptClient`),
 * node-redis, an ioredis `Cluster` (with `hashTag: true`) — ElastiCache, Valkey or a self-hosted
 * Redis. One Lua script per batch step; lease and retention are `PX` expiries on the server's clock.
 *
 * @example
 * ```ts
 * import { Redis } from "ioredis";
 * import { RedisStore, ioredisScriptClient } from "babelqueue-serverless/redis";
 *
 * const redis = new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379");
 * const store = new RedisStore({ client: ioredisScriptClient(redis), namespace: "orders" });
 * ```
 */
export class RedisStore implements ClaimingStore {
  /** The record layout (see `layout`). */
  readonly layout: RedisLayoutName;
  readonly namespace: string;
  readonly prefix: string;
  readonly leaseMs: number;
  /** Retention of a committed id (ms); `Infinity` in a BabelQueue layout without `retentionMs` (kept for good). */
  readonly retentionMs: number;
  readonly timeoutMs: number;
  /** The name errors are reported under. */
  protected readonly storeName: string = "RedisStore";
  /** Strings scrubbed from every error detail (the REST token, when the store knows it). */
  protected readonly secrets: string[] = [];
  readonly #client: RedisScriptClient;
  readonly #layout: RedisLayout;

  constructor(options: RedisStoreOptions) {
    checkOptions(options, REDIS_OPTION_KEYS, "RedisStore");
    this.#layout = resolveRedisLayout(options);
    ({ name: this.layout, namespace: this.namespace, prefix: this.prefix, retentionMs: this.retentionMs } = this.#layout);
    this.leaseMs = resolveWindows(options).leaseMs;
    this.timeoutMs = checkMs("timeoutMs", options.timeoutMs ?? DEFAULT_REDIS_TIMEOUT_MS);
    const client = options.client;
    if (typeof client?.eval !== "function" || typeof client.evalsha !== "function") {
      throw new InvalidOptionError("client", "must have eval(script, keys, args) and evalsha(sha1, keys, args)");
    }
    this.#client = client;
  }

  /** The Redis key of an id (for operators and tests): the SDK's key in a BabelQueue layout. */
  key(id: string): Promise<string> {
    return this.#layout.key(id);
  }

  async claim(id: string, leaseMs?: number, fingerprint?: string): Promise<Claim> {
    return (await this.#claim("claim", [id], leaseMs, [checkFingerprint(fingerprint)]))[0] as Claim;
  }

  async claimMany(ids: readonly string[], leaseMs?: number, fingerprints?: readonly (string | undefined)[], hints?: ClaimHints): Promise<Claim[]> {
    return this.#claim("claimMany", ids, leaseMs, checkFingerprints(fingerprints, ids.length), hints?.redelivered);
  }

  async release(id: string, token: string): Promise<boolean> {
    return (await this.#release("release", [{ id, token }]))[0] === true;
  }

  async releaseMany(claims: readonly ClaimRef[]): Promise<void> {
    await this.#release("releaseMany", claims);
  }

  async remember(id: string, fingerprint?: string): Promise<void> {
    await this.#remember("remember", [id], [checkFingerprint(fingerprint)]);
  }

  async rememberMany(ids: readonly string[], fingerprints?: readonly (string | undefined)[]): Promise<void> {
    await this.#remember("rememberMany", ids, checkFingerprints(fingerprints, ids.length));
  }

  async seen(id: string): Promise<boolean> {
    return (await this.#seen("seen", [id]))[0] === true;
  }

  async seenMany(ids: readonly string[]): Promise<boolean[]> {
    return this.#seen("seenMany", ids);
  }

  async forget(id: string): Promise<void> {
    await this.#run("forget", this.#layout.scripts.forget, await this.#layout.keysOf(id), [], [], () => undefined);
  }

  /** What Redis holds for one id (for operators): state, the window's remaining ms, fingerprint. One command. */
  async inspect(id: string): Promise<IdRecord | null> {
    return this.#run("inspect", this.#layout.scripts.inspect, await this.#layout.keysOf(id), [], [], readRecord);
  }

  async #claim(
    operation: string,
    ids: readonly string[],
    leaseMs: number | undefined,
    fingerprints: readonly (string | undefined)[],
    redelivered?: readonly boolean[],
  ): Promise<Claim[]> {
    const lease = Math.max(1, Math.ceil(checkMs("leaseMs", leaseMs ?? this.leaseMs)));
    if (ids.length === 0) return [];
    const keys = await this.#keys(ids);
    const tokens = ids.map(() => globalThis.crypto.randomUUID());
    // The hints only choose how the script reads (scripts.ts, CLAIM); the answers are the same without them.
    const hints = redelivered?.length === ids.length ? redelivered.map((flag) => (flag === true ? "1" : "0")).join("") : "";
    const args = [String(lease), hints, ...tokens, ...fingerprintArgs(fingerprints)];
    return this.#run(operation, this.#layout.scripts.claim, keys, args, tokens, (reply) => readClaims(reply, tokens));
  }

  async #release(operation: string, claims: readonly ClaimRef[]): Promise<boolean[]> {
    if (claims.length === 0) return [];
    for (const claim of claims) {
      if (typeof claim?.token !== "string") throw new InvalidOptionError("token", "must be a string");
    }
    const keys = await this.#keys(claims.map((claim) => claim.id));
    const tokens = claims.map((claim) => claim.token);
    return this.#run(operation, this.#layout.scripts.release, keys, tokens, tokens, (reply) => readIntegers(reply, claims.length).map((n) => n === 1));
  }

  async #remember(operation: string, ids: readonly string[], fingerprints: readonly (string | undefined)[]): Promise<void> {
    if (ids.length === 0) return;
    const keys = await this.#keys(ids);
    // '': no expiry (a BabelQueue layout without retentionMs keeps committed ids for good, as its SDK does).
    const retention = Number.isFinite(this.retentionMs) ? String(Math.ceil(this.retentionMs)) : "";
    const args = [retention, ...fingerprintArgs(fingerprints)];
    await this.#run(operation, this.#layout.scripts.remember, keys, args, [], () => undefined);
  }

  async #seen(operation: string, ids: readonly string[]): Promise<boolean[]> {
    if (ids.length === 0) return [];
    const keys = await this.#keys(ids);
    return this.#run(operation, this.#layout.scripts.seen, keys, [], [], (reply) => readIntegers(reply, ids.length).map((n) => n === 1));
  }

  async #keys(ids: readonly string[]): Promise<string[]> {
    if (this.#layout.keysPerId === 1) return Promise.all(ids.map((id) => this.#layout.key(id)));
    return (await Promise.all(ids.map((id) => this.#layout.keysOf(id)))).flat();
  }

  /**
   * Runs one script under the timeout and turns every failure into a `StoreUnavailableError`.
   * `tokens`: the fencing tokens among `args` (scrubbed from errors).
   */
  async #run<T>(
    operation: string,
    script: RedisScript,
    keys: string[],
    args: string[],
    tokens: readonly string[],
    read: (reply: unknown) => T,
  ): Promise<T> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new CallTimedOut(this.timeoutMs)), this.timeoutMs);
    });
    let reply: unknown;
    try {
      reply = await Promise.race([runScript(this.#client, script, keys, args), timeout]);
    } catch (error) {
      const secrets = [...this.secrets, ...tokens];
      throw this.#unavailable(operation, error, secrets);
    } finally {
      clearTimeout(timer);
    }
    try {
      return read(reply);
    } catch {
      throw new StoreUnavailableError(this.storeName, operation, `unexpected reply from Redis (${describeShape(reply)})`);
    }
  }

  #unavailable(operation: string, error: unknown, secrets: readonly string[]): StoreUnavailableError {
    const detail = describeRedisFailure(error, secrets);
    // The original error is not kept as the cause: @upstash/redis puts the whole command (keys,
    // tokens) in its messages and ioredis attaches the command's arguments. A scrubbed copy instead.
    const name = error instanceof Error ? error.name : "Error";
    const cause = new Error(detail.startsWith(`${name}: `) ? detail.slice(name.length + 2) : detail);
    cause.name = name;
    return new StoreUnavailableError(this.storeName, operation, detail, { cause });
  }
}

/** What `ioredisScriptClient` needs from an ioredis `Redis` or `Cluster`: its `eval` and `evalsha`. */
export interface IoredisLike {
  eval(script: string, numkeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  evalsha(sha1: string, numkeys: number, ...keysAndArgs: string[]): Promise<unknown>;
}

/** Adapts an ioredis client (`new Redis(...)` or `new Cluster(...)`) to the stores' client shape. */
export function ioredisScriptClient(redis: IoredisLike): RedisScriptClient {
  return {
    eval: (script, keys, args) => redis.eval(script, keys.length, ...keys, ...args),
    evalsha: (sha1, keys, args) => redis.evalsha(sha1, keys.length, ...keys, ...args),
  };
}

/** A batch's fingerprints as script arguments: none at all when no id has one ('' where one has none). */
function fingerprintArgs(fingerprints: readonly (string | undefined)[]): string[] {
  return fingerprints.some((fingerprint) => fingerprint !== undefined) ? fingerprints.map((fingerprint) => fingerprint ?? "") : [];
}

function describeShape(reply: unknown): string {
  if (Array.isArray(reply)) return `an array of ${reply.length}`;
  return reply === null ? "null" : typeof reply;
}

/** A failure in words a person can act on, without the command, a token or a payload. */
function describeRedisFailure(error: unknown, secrets: readonly string[]): string {
  if (error instanceof CallTimedOut) return `no answer within ${error.ms} ms (timeoutMs)`;
  if (error instanceof Error && error.name === "UpstashJSONParseError") return "the REST endpoint answered with something that is not JSON";
  // @upstash/redis: "<server error>, command was: [...]" — keep only the server's words.
  return describeFailure(error, { secrets, cutAt: [", command was:"] });
}
