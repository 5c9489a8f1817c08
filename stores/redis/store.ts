/**
 * `RedisStore` (export `babelqueue-serverless/redis`, and `/upstash`): the Redis store logic over any
 * client with `eval` / `evalsha` — a TCP client (ioredis, node-redis) for ElastiCache / Valkey /
 * self-hosted Redis, or Upstash's REST client, which `UpstashRedisStore` (upstash.ts) wraps. One
 * logic, two transports: every operation is one Lua script from scripts.ts, run with EVALSHA (EVAL
 * on NOSCRIPT).
 *
 * Contract (the store contract of docs/ARCHITECTURE.md, the same as `InMemoryStore`):
 *   - record layout (`layout`, layouts.ts): our own, "babelqueue-serverless" (default), or the records
 *     of BabelQueue's PHP or Go SDK ("babelqueue-php", "babelqueue-go": the SDK's key `<prefix><id>`
 *     and our side key, no namespace, no hash tag, no buckets; docs: "Joining a BabelQueue fleet").
 *   - our own key layout `{prefix}{namespace}:{id}` (`prefix` defaults to "bq:"), built by `storeKey`;
 *     an id whose key would pass 512 bytes, or that starts with `#`, becomes `#` + its SHA-256.
 *     With `hashTag: true` (TCP, Redis Cluster) the layout is `<prefix>{<namespace>}:<id>`; with
 *     `buckets: n` it is `<prefix>{<namespace>:<bucket>}:<id>` (bucket 0: `<prefix>{<namespace>}:<id>`),
 *     see buckets.ts.
 *   - `claim` answers claimed / done / in-flight (+ the lease's remaining ms, + the stored payload
 *     fingerprint) in ONE command, and stores the claim's fingerprint in that same command;
 *     lease and retention are `PX` expiries on the Redis server's clock. Value layout: see
 *     scripts.ts (`i:<token>[:<fingerprint>]`, `d[:<fingerprint>]`).
 *   - `release` is a compare-and-delete on the fencing token; `remember` commits unconditionally,
 *     keeping the claim's fingerprint unless it is given one.
 *   - `claimMany` / `rememberMany` / `releaseMany` / `seenMany`: ONE command — one HTTP request
 *     over REST — for the whole batch (up to 1,000 ids; a larger step is cut into scripts of
 *     1,000 keys, steps.ts), so a batch of N new messages costs 2 requests.
 *   - `inspect` (for operators): one command.
 *   - every failure (network, HTTP 4xx/5xx, Redis error, timeout, unexpected reply) becomes a
 *     `StoreUnavailableError` whose message and `cause` carry neither the REST token, nor a fencing
 *     token, nor the command's arguments.
 *
 * Redis Cluster (TCP only; Upstash needs nothing): a script may only touch keys of one hash slot.
 * Single-id calls always work. `hashTag: true` puts a namespace in one slot (one shard serves it);
 * `buckets: n` spreads it over n hash tags, and a batch step becomes one script per bucket it
 * touches, sent as one pipelined round trip per node (dispatch.ts, pipeline.ts). Without either, a
 * batch across slots fails with CROSSSLOT, which the engine reports as a store error for the batch.
 * Changing `buckets` goes through a window (`previousBuckets`, window.ts). `waitReplicas` makes a
 * commit wait for replicas (`WAIT`, in the commit's own round trip).
 *
 * What this is *not*: a connection manager. You create, configure and close the client; the store
 * never logs. A call that timed out may still land on the server: a claim step that failed or timed
 * out sends a release of its tokens behind it (fenced, so it only undoes its own claims; otherwise
 * such a claim would block its id for a lease), a commit or a release is as if it had answered.
 */
import type { Claim, ClaimHints, ClaimRef, ClaimingStore, IdRecord, StoreWindows } from "../../src/contract.js";
import { InvalidOptionError, StoreUnavailableError } from "../../src/errors.js";
import { describeFailure, throwStepFailures } from "../../src/store-kit/failures.js";
import { storeKey } from "../../src/store-kit/keys.js";
import { checkOptions, optionKeys } from "../../src/store-kit/options.js";
import { checkFingerprint, checkFingerprints } from "../../src/store-kit/fingerprints.js";
import { heldClaims, isToken } from "../../src/store-kit/tokens.js";
import { checkMs, resolveWindows } from "../../src/store-kit/windows.js";
import { MAX_REDIS_BUCKETS, bucketHead, bucketOf } from "./buckets.js";
import { type ReplicaWait, attachPipeline, pipelineOf } from "./dispatch.js";
import { canPipeline, ioredisPipeline } from "./pipeline.js";
import { MAX_REDIS_KEY_BYTES, type RedisLayout, type RedisLayoutName, resolveRedisLayout } from "./layouts.js";
import { type RedisScript, type RedisScriptClient, readClaims, readCount, readIntegers, readRecord } from "./scripts.js";
import { type StepKey, type StepOptions, type StepResult, StepTimedOut, allOf, pick, runStep } from "./steps.js";
import type { PlainSet, PlainSetter } from "./plain.js";
import { type WindowKeys, claimAcrossWindow } from "./window.js";

export type { RedisScriptClient } from "./scripts.js";
export { MAX_REDIS_KEY_BYTES, type RedisLayoutName } from "./layouts.js";

export const DEFAULT_REDIS_TIMEOUT_MS = 5_000;
const DEFAULT_WAIT_TIMEOUT_MS = 1_000;

/** Options shared by both Redis stores. */
export interface RedisStoreCommonOptions extends StoreWindows {
  /**
   * Whose records the store reads and writes: "babelqueue-serverless" (default), or "babelqueue-php" /
   * "babelqueue-go" to share one seen-set with BabelQueue's PHP `RedisStore` or Go `idempotency-redis`
   * consumers of the same queue. A BabelQueue layout uses ids verbatim under the SDK's prefix, refuses
   * `namespace`, `hashTag` and `buckets`, keeps committed ids for good unless `retentionMs` is given,
   * and stores no fingerprint with a committed id.
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
  /** Redis Cluster: tag keys `<prefix>{<namespace>}:<id>` so a batch stays in one slot (the same as `buckets: 1`). Needs a namespace. Default false. */
  hashTag?: boolean;
  /**
   * Redis Cluster: spread the namespace over this many hash-tag buckets (1-1024), key
   * `<prefix>{<namespace>:<bucket>}:<id>`, an id's bucket by jump consistent hash. A batch step is
   * one script per bucket it touches, one pipelined round trip per node with `ioredisScriptClient`.
   * A few times the number of masters spreads keys evenly (e.g. 16-64). Needs a namespace. To change
   * it on a running fleet, set `previousBuckets` for a while (see there). Default: none (one slot
   * with `hashTag`, no tag without).
   */
  buckets?: number;
  /**
   * The bucket count the fleet ran with before `buckets` changed (1 for a fleet on `hashTag: true`).
   * While it is set, an id that moved is claimed under its old key and its new one, and committed
   * under both, so consumers on either count never both win an id and no remembered id is lost.
   * Deploy it everywhere first; remove it once every consumer runs with it and a full
   * `retentionMs` has passed since the last consumer on the old count stopped.
   */
  previousBuckets?: number;
  /**
   * Durable commits: a commit is reported done only once this many replicas acknowledged it (Redis
   * `WAIT`, sent after the commit script on the same connection, in the same round trip); fewer
   * within `waitTimeoutMs` fails the commit (the engine retries it, then reports `commit-failed`).
   * Needs a client from `ioredisScriptClient`. Default 0 (a commit is done once the primary has it).
   */
  waitReplicas?: number;
  /** Longest `WAIT` for `waitReplicas` (ms), less than `timeoutMs`. Default 1000. */
  waitTimeoutMs?: number;
}

/** The option keys of `RedisStoreCommonOptions`: every Redis store's list starts with them. */
export const COMMON_OPTION_KEYS: { readonly [K in keyof Required<RedisStoreCommonOptions>]: true } = {
  layout: true,
  namespace: true,
  prefix: true,
  timeoutMs: true,
  leaseMs: true,
  retentionMs: true,
};

const REDIS_OPTION_KEYS = optionKeys<RedisStoreOptions>({
  ...COMMON_OPTION_KEYS,
  client: true,
  hashTag: true,
  buckets: true,
  previousBuckets: true,
  waitReplicas: true,
  waitTimeoutMs: true,
});

/** Where an id's keys are: the plain layout (no tag), or `count` buckets of a tagged namespace. */
type Placement = { readonly kind: "plain" } | { readonly kind: "buckets"; readonly count: number };

/** One id's keys: during a bucket window, the old key and the current one. */
type IdKeys = WindowKeys<StepKey>;

/**
 * The store logic, over any client with `eval` / `evalsha` (TCP or REST).
 *
 * @example
 * ```ts
 * import { Cluster } from "ioredis";
 * import { RedisStore, ioredisScriptClient } from "babelqueue-serverless/redis";
 *
 * // ElastiCache / Valkey in cluster mode: the namespace spread over 32 hash-tag buckets.
 * const cluster = new Cluster([{ host: process.env.REDIS_HOST!, port: 6379 }]);
 * cluster.on("error", () => {}); // failures reach the store as StoreUnavailableError
 * const store = new RedisStore({ client: ioredisScriptClient(cluster), namespace: "orders", buckets: 32 });
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
  /** Hash-tag buckets of the namespace (1 with `hashTag: true`), undefined for the plain layout. */
  readonly buckets: number | undefined;
  /** The bucket count before a change, while its window lasts. */
  readonly previousBuckets: number | undefined;
  /** Replicas a commit waits for (0: none). */
  readonly waitReplicas: number;
  /** The name errors are reported under. */
  protected readonly storeName: string = "RedisStore";
  /** Strings scrubbed from every error detail (the REST token, when the store knows it). */
  protected readonly secrets: string[] = [];
  /**
   * Plain pipelined SETs (plain.ts), when the transport bills per command and can pipeline them
   * (`UpstashRedisStore`): first deliveries and fully fingerprinted commits then skip the script.
   */
  protected plainSets: PlainSetter | undefined;
  readonly #client: RedisScriptClient;
  readonly #layout: RedisLayout;
  readonly #placement: Placement;
  readonly #previous: Placement | undefined;
  readonly #wait: ReplicaWait | undefined;

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
    this.buckets = bucketOption(options, this.namespace);
    this.#placement = this.buckets === undefined ? { kind: "plain" } : { kind: "buckets", count: this.buckets };
    this.previousBuckets = previousBucketsOption(options, this.buckets);
    this.#previous = this.previousBuckets === undefined ? undefined : { kind: "buckets", count: this.previousBuckets };
    this.waitReplicas = waitReplicasOption(options, client);
    if (this.waitReplicas > 0) {
      const timeoutMs = Math.ceil(checkMs("waitTimeoutMs", options.waitTimeoutMs ?? DEFAULT_WAIT_TIMEOUT_MS));
      if (timeoutMs >= this.timeoutMs) throw new InvalidOptionError("waitTimeoutMs", "must be less than timeoutMs");
      this.#wait = { replicas: this.waitReplicas, timeoutMs };
    } else if (options.waitTimeoutMs !== undefined) {
      throw new InvalidOptionError("waitTimeoutMs", "needs waitReplicas");
    }
  }

  /** The Redis key of an id (for operators and tests): the SDK's key in a BabelQueue layout; during a bucket window, its key under `buckets`. */
  key(id: string): Promise<string> {
    if (typeof id !== "string") throw new InvalidOptionError("id", "must be a string");
    return this.#keyIn(this.#placement, id).then((key) => key.key);
  }

  async claim(id: string, leaseMs?: number, fingerprint?: string): Promise<Claim> {
    return (await this.#claim("claim", [id], leaseMs, [checkFingerprint(fingerprint)]))[0] as Claim;
  }

  async claimMany(ids: readonly string[], leaseMs?: number, fingerprints?: readonly (string | undefined)[], hints?: ClaimHints): Promise<Claim[]> {
    return this.#claim("claimMany", ids, leaseMs, checkFingerprints(fingerprints, ids.length), hints?.redelivered);
  }

  async release(id: string, token: string): Promise<boolean> {
    if (!isToken(token)) return false;
    return (await this.#release("release", [{ id, token }]))[0] === true;
  }

  async releaseMany(claims: readonly ClaimRef[]): Promise<void> {
    await this.#release("releaseMany", heldClaims(claims));
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
    const keys = everyKey(await this.#idKeys([id]));
    const deleted = (reply: unknown, at: readonly number[]) => {
      readCount(reply, 0, at.length * this.#layout.keysPerId); // DEL's count: anything else did not come from Redis
      return at.map(() => undefined);
    };
    allOf(await this.#stepOf("forget", this.#layout.scripts.forget, keys, () => [], deleted, this.#deadline()));
  }

  /** What Redis holds for one id (for operators): state, the window's remaining ms, fingerprint. One command. */
  async inspect(id: string): Promise<IdRecord | null> {
    const [keys] = await this.#idKeys([id]);
    const ids = keys as IdKeys;
    const entries = ids.moved ? [ids.current, ids.old] : [ids.current];
    const records = allOf(await this.#stepOf("inspect", this.#layout.scripts.inspect, entries, () => [], (reply) => [readRecord(reply)], this.#deadline()));
    return records.find((record) => record !== null) ?? null;
  }

  async #claim(
    operation: string,
    ids: readonly string[],
    leaseMs: number | undefined,
    fingerprints: readonly (string | undefined)[],
    redelivered?: readonly boolean[],
    given?: readonly string[],
  ): Promise<Claim[]> {
    const lease = Math.max(1, Math.ceil(checkMs("leaseMs", leaseMs ?? this.leaseMs)));
    // The hints only choose how the script reads (scripts.ts, CLAIM); the answers are the same without them.
    const flags = redelivered?.length === ids.length ? redelivered.map((flag) => (flag === true ? "1" : "0")) : undefined;
    if (ids.length === 0) return [];
    const idKeys = await this.#idKeys(ids);
    // `given`: the plain path's own tokens, so that the script knows a record its SETs wrote (sent twice).
    const tokens = given ?? ids.map(() => globalThis.crypto.randomUUID());
    const deadline = this.#deadline();
    /** Claims `keys` (at batch positions `positions`) with `keyTokens`. */
    const claimKeys = (keys: readonly StepKey[], keyTokens: readonly string[], positions: readonly number[]) =>
      this.#stepOf(
        operation,
        this.#layout.scripts.claim,
        keys,
        (at) => [
          String(lease),
          flags === undefined ? "" : pick(flags, pick(positions, at)).join(""),
          ...pick(keyTokens, at),
          ...fingerprintArgs(pick(fingerprints, pick(positions, at))),
        ],
        (reply, at) => readClaims(reply, pick(keyTokens, at)),
        deadline,
        tokens,
        { acquires: true },
      );
    const releaseQuietly = async (keys: readonly StepKey[], keyTokens: readonly string[]) => {
      await this.#stepOf(operation, this.#layout.scripts.release, keys, (at) => pick(keyTokens, at), () => [], deadline, tokens).catch(() => undefined);
    };
    if (this.#previous !== undefined) {
      return claimAcrossWindow(idKeys, tokens, { claim: claimKeys, releaseQuietly });
    }
    if (this.#plainPath() && (flags === undefined || flags.every((flag) => flag === "0"))) {
      return this.#claimPlain(operation, ids, lease, fingerprints, idKeys.map((k) => k.current), tokens, releaseQuietly);
    }
    const result = await claimKeys(
      idKeys.map((k) => k.current),
      tokens,
      ids.map((_, i) => i),
    );
    if (result.error === undefined) return result.values as Claim[];
    // Give back what the step won — and what it may still win: a claim whose call failed or timed
    // out can land later (a client resends what it queued once it reconnects); the release, fenced
    // by the same tokens and sent after the claims, then undoes it instead of a lease-long block.
    await releaseQuietly(
      idKeys.map((k) => k.current),
      tokens,
    );
    throw result.error;
  }

  /** The plain-SET path applies: a transport that bills per command, our own layout, one key per id, no bucket window. */
  #plainPath(): boolean {
    return this.plainSets !== undefined && this.#layout.keysPerId === 1 && this.#placement.kind === "plain" && this.#previous === undefined;
  }

  /**
   * First deliveries (plain.ts): one `SET key i:<token>[:<fp>] NX PX lease` per id in ONE pipelined
   * request. An id whose SET was held back by a record (a duplicate, a delivery in flight, a copy
   * earlier in the batch) is then decided by the claim script, which reads it — a second request,
   * for those ids only.
   */
  async #claimPlain(
    operation: string,
    ids: readonly string[],
    lease: number,
    fingerprints: readonly (string | undefined)[],
    keys: readonly StepKey[],
    tokens: readonly string[],
    releaseQuietly: (keys: readonly StepKey[], tokens: readonly string[]) => Promise<void>,
  ): Promise<Claim[]> {
    const sets = keys.map((key, i): PlainSet => {
      const fingerprint = fingerprints[i];
      return { key: key.key, value: fingerprint === undefined ? `i:${tokens[i]}` : `i:${tokens[i]}:${fingerprint}`, px: lease, nx: true };
    });
    let replies: unknown[];
    try {
      replies = await this.#plain(sets);
      if (!Array.isArray(replies) || replies.length !== sets.length) throw new StoreUnavailableError(this.storeName, operation, `unexpected reply from Redis (${replies === null ? "null" : typeof replies})`);
    } catch (error) {
      // As for a failed script step: the SETs that did land are undone, fenced by their tokens.
      await releaseQuietly(keys, tokens);
      throw error instanceof StoreUnavailableError ? error : this.#unavailable(operation, error, [...this.secrets, ...tokens]);
    }
    const answers: (Claim | undefined)[] = replies.map((reply, i) => (reply === "OK" ? { status: "claimed", token: tokens[i] as string } : undefined));
    const held = answers.flatMap((answer, i) => (answer === undefined ? [i] : []));
    if (held.length > 0) {
      let read: Claim[];
      try {
        // With the SETs' own tokens: a SET that landed though its answer was lost (a transport that sent
        // the request twice got null the second time) holds this very token, and is answered claimed.
        read = await this.#claim(
          operation,
          held.map((i) => ids[i] as string),
          lease,
          held.map((i) => fingerprints[i]),
          held.map(() => true),
          held.map((i) => tokens[i] as string),
        );
      } catch (error) {
        // The step fails as a whole, so it holds nothing: the claims the SETs won are given back,
        // fenced by their tokens (#claim has already given back its own).
        const won = answers.flatMap((answer, i) => (answer === undefined ? [] : [i]));
        await releaseQuietly(pick(keys, won), pick(tokens, won));
        throw error;
      }
      held.forEach((i, j) => {
        answers[i] = read[j];
      });
    }
    return answers as Claim[];
  }

  /** Sends plain SETs under the store's timeout. */
  async #plain(sets: readonly PlainSet[]): Promise<unknown[]> {
    const setter = this.plainSets as PlainSetter;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new StepTimedOut(this.timeoutMs)), this.timeoutMs);
    });
    try {
      return await Promise.race([setter(sets), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  async #release(operation: string, claims: readonly ClaimRef[]): Promise<boolean[]> {
    if (claims.length === 0) return [];
    const idKeys = await this.#idKeys(claims.map((claim) => claim.id));
    const { keys, owners } = spread(idKeys);
    const tokens = owners.map((owner) => (claims[owner] as ClaimRef).token);
    const released = allOf(
      await this.#stepOf(operation, this.#layout.scripts.release, keys, (at) => pick(tokens, at), (reply, at) => readIntegers(reply, at.length).map((n) => n === 1), this.#deadline(), tokens),
    );
    return anyPerId(claims.length, owners, released);
  }

  async #remember(operation: string, ids: readonly string[], fingerprints: readonly (string | undefined)[]): Promise<void> {
    if (ids.length === 0) return;
    const { keys, owners } = spread(await this.#idKeys(ids));
    const keyFingerprints = owners.map((owner) => fingerprints[owner]);
    // '': no expiry (a BabelQueue layout without retentionMs keeps committed ids for good, as its SDK does).
    const retention = Number.isFinite(this.retentionMs) ? String(Math.ceil(this.retentionMs)) : "";
    if (this.#plainPath() && retention !== "" && this.#wait === undefined && fingerprints.every((fingerprint) => fingerprint !== undefined)) {
      // Every fingerprint known: the commit is one plain `SET key d:<fp> PX retention` per id, no read (plain.ts).
      let replies: unknown[];
      try {
        replies = await this.#plain(keys.map((key, i) => ({ key: key.key, value: `d:${keyFingerprints[i]}`, px: Number(retention), nx: false })));
      } catch (error) {
        throw this.#unavailable(operation, error, this.secrets);
      }
      if (!Array.isArray(replies) || replies.length !== keys.length || replies.some((reply) => reply !== "OK")) {
        throw new StoreUnavailableError(this.storeName, operation, "unexpected reply from Redis to a commit");
      }
      return;
    }
    const result = await this.#stepOf(
      operation,
      this.#layout.scripts.remember,
      keys,
      (at) => [retention, ...fingerprintArgs(pick(keyFingerprints, at))],
      // The script answers how many ids it committed: a reply that is not that count did not come from Redis.
      (reply, at) => {
        readCount(reply, at.length, at.length);
        return at.map(() => true);
      },
      this.#deadline(),
      [],
      { wait: this.#wait },
    );
    if (result.error === undefined) return;
    // Per id: committed only where every call carrying one of its keys answered. A failed replica
    // wait leaves every key answered and still fails the whole step.
    const failed = new Set(owners.filter((_, k) => result.values[k] !== true));
    if (failed.size === 0) throw result.error;
    throwStepFailures(this.storeName, operation, ids.map((_, i) => (failed.has(i) ? result.error : undefined)));
  }

  async #seen(operation: string, ids: readonly string[]): Promise<boolean[]> {
    if (ids.length === 0) return [];
    const { keys, owners } = spread(await this.#idKeys(ids));
    const seen = allOf(await this.#stepOf(operation, this.#layout.scripts.seen, keys, () => [], (reply, at) => readIntegers(reply, at.length).map((n) => n === 1), this.#deadline()));
    return anyPerId(ids.length, owners, seen);
  }

  /** Each id's keys under the current placement and, during a window, the previous one. */
  #idKeys(ids: readonly string[]): Promise<IdKeys[]> {
    return Promise.all(
      ids.map(async (id): Promise<IdKeys> => {
        const current = await this.#keyIn(this.#placement, id);
        if (this.#previous === undefined) return { old: current, current, moved: false };
        const old = await this.#keyIn(this.#previous, id);
        return old.key === current.key ? { old: current, current, moved: false } : { old, current, moved: true };
      }),
    );
  }

  async #keyIn(placement: Placement, id: string): Promise<StepKey> {
    if (typeof id !== "string") throw new InvalidOptionError("id", "must be a string");
    if (this.#layout.keysPerId === 2) {
      // A BabelQueue layout: the SDK's key, then our side key — both go to the same script (one slot is not promised).
      const [key, side] = (await this.#layout.keysOf(id)) as [string, string];
      return { key, group: "", with: [side] };
    }
    if (placement.kind === "plain") return { key: await storeKey(this.namespace, id, MAX_REDIS_KEY_BYTES, this.prefix), group: "" };
    const head = bucketHead(this.prefix, this.namespace, bucketOf(id, placement.count));
    return { key: await storeKey("", id, MAX_REDIS_KEY_BYTES, head), group: head };
  }

  #deadline(): number {
    return Date.now() + this.timeoutMs;
  }

  /** One step through steps.ts, its failures worded by this store. `tokens`: scrubbed from errors. */
  #stepOf<T>(
    operation: string,
    script: RedisScript,
    keys: readonly StepKey[],
    args: (at: readonly number[]) => string[],
    read: (reply: unknown, at: readonly number[]) => T[],
    deadline: number,
    tokens: readonly string[] = [],
    extra: Pick<StepOptions<T>, "wait" | "acquires"> = {},
  ): Promise<StepResult<T>> {
    const describe = (failedOperation: string, error: unknown) => this.#unavailable(failedOperation, error, [...this.secrets, ...tokens]);
    return runStep(this.#client, this.storeName, describe, { operation, script, keys, args, read, deadline, ...extra });
  }

  #unavailable(operation: string, error: unknown, secrets: readonly string[]): StoreUnavailableError {
    const detail = error instanceof StepTimedOut ? `no answer within ${this.timeoutMs} ms (timeoutMs)` : describeRedisFailure(error, secrets);
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

/**
 * Adapts an ioredis client (`new Redis(...)` or `new Cluster(...)`) to the stores' client shape. The
 * client it returns also sends a step's scripts as one pipelined round trip per node (a batch over
 * several buckets, `waitReplicas`), and follows a cluster's slot moves for them.
 */
export function ioredisScriptClient(redis: IoredisLike): RedisScriptClient {
  const client: RedisScriptClient = {
    eval: (script, keys, args) => redis.eval(script, keys.length, ...keys, ...args),
    evalsha: (sha1, keys, args) => redis.evalsha(sha1, keys.length, ...keys, ...args),
  };
  return canPipeline(redis) ? attachPipeline(client, ioredisPipeline(redis)) : client;
}

function bucketOption(options: RedisStoreOptions, namespace: string): number | undefined {
  const { buckets, hashTag } = options;
  if (hashTag !== undefined && typeof hashTag !== "boolean") throw new InvalidOptionError("hashTag", "must be true or false");
  if (buckets === undefined) {
    if (hashTag !== true) return undefined;
    if (namespace === "") throw new InvalidOptionError("hashTag", "needs a non-empty namespace (the hash tag)");
    return 1;
  }
  if (hashTag === true) throw new InvalidOptionError("hashTag", "cannot be combined with buckets (buckets: 1 is hashTag's layout)");
  checkBucketCount("buckets", buckets);
  if (namespace === "") throw new InvalidOptionError("buckets", "needs a non-empty namespace (the hash tag)");
  return buckets;
}

function previousBucketsOption(options: RedisStoreOptions, buckets: number | undefined): number | undefined {
  const previous = options.previousBuckets;
  if (previous === undefined) return undefined;
  if (buckets === undefined) throw new InvalidOptionError("previousBuckets", "needs buckets");
  checkBucketCount("previousBuckets", previous);
  if (previous === buckets) throw new InvalidOptionError("previousBuckets", "must differ from buckets (remove it once the change is done)");
  return previous;
}

function checkBucketCount(option: string, count: unknown): void {
  if (typeof count !== "number" || !Number.isSafeInteger(count) || count < 1 || count > MAX_REDIS_BUCKETS) {
    throw new InvalidOptionError(option, `must be an integer from 1 to ${MAX_REDIS_BUCKETS}`);
  }
}

function waitReplicasOption(options: RedisStoreOptions, client: RedisScriptClient): number {
  const replicas = options.waitReplicas ?? 0;
  if (typeof replicas !== "number" || !Number.isSafeInteger(replicas) || replicas < 0 || replicas > 100) {
    throw new InvalidOptionError("waitReplicas", "must be an integer from 0 to 100");
  }
  if (replicas > 0 && pipelineOf(client) === undefined) {
    throw new InvalidOptionError("waitReplicas", "needs a client from ioredisScriptClient (WAIT must follow the commit on its connection)");
  }
  return replicas;
}

/** Every key of these ids (both keys of a moved id). */
function everyKey(idKeys: readonly IdKeys[]): StepKey[] {
  return spread(idKeys).keys;
}

/** The keys of a step over these ids and, per key, the id it belongs to: current keys first, then old keys of moved ids. */
function spread(idKeys: readonly IdKeys[]): { keys: StepKey[]; owners: number[] } {
  const keys = idKeys.map((k) => k.current);
  const owners = idKeys.map((_, i) => i);
  idKeys.forEach((k, i) => {
    if (k.moved) {
      keys.push(k.old);
      owners.push(i);
    }
  });
  return { keys, owners };
}

/** Per id: true when any of its keys answered true. */
function anyPerId(count: number, owners: readonly number[], answers: readonly boolean[]): boolean[] {
  const out = new Array<boolean>(count).fill(false);
  owners.forEach((owner, i) => {
    if (answers[i] === true) out[owner] = true;
  });
  return out;
}

/** A batch's fingerprints as script arguments: none at all when no id has one ('' where one has none). */
function fingerprintArgs(fingerprints: readonly (string | undefined)[]): string[] {
  return fingerprints.some((fingerprint) => fingerprint !== undefined) ? fingerprints.map((fingerprint) => fingerprint ?? "") : [];
}

/** A failure in words a person can act on, without the command, a token or a payload. */
function describeRedisFailure(error: unknown, secrets: readonly string[]): string {
  if (error instanceof Error && error.name === "UpstashJSONParseError") return "the REST endpoint answered with something that is not JSON";
  // @upstash/redis: "<server error>, command was: [...]" — keep only the server's words.
  return describeFailure(error, { secrets, cutAt: [", command was:"] });
}
