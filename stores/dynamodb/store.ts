/**
 * `DynamoDBStore`: a `ClaimingStore` on one DynamoDB table (export `babelqueue-serverless/dynamodb`).
 * Item layout: items.ts; the table: table.ts; one claim: claim.ts; DynamoDB's clock: clock.ts; how
 * requests are sent: send.ts and limiter.ts; batch requests: batch.ts; the read-before-claim policy:
 * precheck.ts; transactional mode: `TransactionalDynamoDBStore` (transactional-store.ts over
 * transaction.ts), a subclass, so that an application without it does not bundle it.
 *
 * Round trips:
 * - `claim`: ONE conditional `PutItem` that wins when the item is absent, its lease has ended, or its
 *   retention has ended; `ReturnValuesOnConditionCheckFailure: ALL_OLD` returns the blocking item
 *   in the same round trip, telling `done` from `in-flight` (with the lease's remaining time and the
 *   stored fingerprint). A consistent `GetItem` is made only when the failure carried no item
 *   (emulators such as dynalite). A correction (one more `PutItem`) only when a clock was wrong (claim.ts).
 * - `claimMany`: the claims in parallel, at most `maxConcurrentRequests` in flight. DynamoDB has no
 *   batch *conditional* write: `BatchWriteItem` takes no conditions and `TransactWriteItems` fails as
 *   a whole when one condition fails. When the batch is likely to hold duplicates (`precheck`, from the
 *   engine's redelivery hints), ONE consistent `BatchGetItem` answers the committed and in-flight ids
 *   first and only the others are put. An id whose request fails (throttled, an internal error)
 *   answers `{ status: "failed", error }` alone; the others keep their answers.
 * - `remember`: unconditional `PutItem` → done. `rememberMany`: `BatchWriteItem` in chunks of 25
 *   (one id: a `PutItem`), `UnprocessedItems` retried with exponential backoff and jitter. The done
 *   item replaces the claim's whole item, so the commit writes the fingerprint it is given (the
 *   engine passes the claim's); a commit given none stores none.
 * - `release`: `DeleteItem` conditioned on "in-flight, lease live, and still holding this token".
 * - `seen` / `inspect`: strongly consistent `GetItem`; `seenMany`: consistent `BatchGetItem` in chunks of 100.
 * - `forget`: `DeleteItem`.
 *
 * Time is DynamoDB's, not the caller's (clock.ts): every answer's `Date` header refines an estimate
 * of DynamoDB's clock with an error bound; conditions use the earliest it can read, deadlines written
 * start at the latest. Expiry is decided by the store against that clock, never left to DynamoDB's
 * TTL sweep (which deletes items up to days late).
 *
 * IAM actions used: dynamodb:PutItem, GetItem, DeleteItem, BatchWriteItem, BatchGetItem
 * (`DYNAMODB_STORE_ACTIONS`).
 *
 * What this is *not*: a lock around the handler. A handler that outlives its lease may run twice;
 * the Lambda wrapper sizes the lease to the invocation's remaining time so that cannot happen
 * within one invocation.
 */
import {
  DeleteItemCommand,
  type DeleteItemCommandOutput,
  DynamoDBClient,
  type DynamoDBClientConfig,
  GetItemCommand,
  type GetItemCommandOutput,
  PutItemCommand,
} from "@aws-sdk/client-dynamodb";
import type { BatchClaim, Claim, ClaimHints, ClaimRef, ClaimingStore, IdRecord, StoreWindows } from "../../src/contract.js";
import { InvalidOptionError } from "../../src/errors.js";
import { storeFailure, throwStepFailures } from "../../src/store-kit/failures.js";
import { checkFingerprint, checkFingerprints } from "../../src/store-kit/fingerprints.js";
import { checkNamespace, storeKey } from "../../src/store-kit/keys.js";
import { checkOptions, optionKeys } from "../../src/store-kit/options.js";
import { isToken, tokenSource } from "../../src/store-kit/tokens.js";
import { checkMs, resolveWindows } from "../../src/store-kit/windows.js";
import { type BatchTarget, type Projection, readAll, writeAll } from "./batch.js";
import { type ClaimTarget, claimKey } from "./claim.js";
import { type OffsetBounds, ServiceClock } from "./clock.js";
import {
  DONE,
  DYNAMODB_MAX_KEY_BYTES,
  IN_FLIGHT,
  type Item,
  NAMES,
  OWNED,
  fingerprintAttribute,
  idRecord,
  isConditionFailure,
  isSeen,
} from "./items.js";
import { RequestLimiter } from "./limiter.js";
import { PRECHECK_POLICIES, type PrecheckPolicy, keysToRead, readBlocking } from "./precheck.js";
import { type Send, sender } from "./send.js";
import { type TableAttributeOptions, checkAttributeName } from "./table.js";
import type { DynamoDBTransactionDeps } from "./transaction.js";

const STORE_NAME = "DynamoDBStore";

/**
 * Default of `maxConcurrentRequests`: the SDK's default socket pool (`maxSockets` 50), so a batch step
 * goes as fast as the pool allows and nothing waits inside the SDK.
 */
export const DEFAULT_MAX_CONCURRENT_REQUESTS = 50;

/**
 * Failures after which the write surely did not happen (DynamoDB refused the request): a claim that
 * failed so in its one attempt holds nothing. After any other failure (a timeout, a 500) the put may
 * have landed.
 */
const REFUSED = new Set([
  "ProvisionedThroughputExceededException",
  "ThrottlingException",
  "RequestLimitExceeded",
  "ValidationException",
  "ResourceNotFoundException",
  "AccessDeniedException",
  "UnrecognizedClientException",
]);

/**
 * Whether a failed claim surely wrote nothing: DynamoDB refused it (`REFUSED`) and the SDK made one
 * attempt. The error the SDK hands back is its *last* attempt's: a throttled retry says nothing of
 * an earlier attempt that may have landed with its answer lost, so after retries (or when the error
 * does not say how many attempts there were) the put counts as possibly landed.
 */
function refusedOutright(error: unknown): boolean {
  const cause = (error as { cause?: unknown }).cause ?? error;
  if (!(cause instanceof Error) || !REFUSED.has(cause.name)) return false;
  const attempts = (cause as { $metadata?: { attempts?: unknown } }).$metadata?.attempts;
  return attempts === 1;
}

/**
 * One service-clock estimate per client and local clock: the offset between this process's clock
 * and DynamoDB's is a property of the process, so stores built on one client share what it learned.
 */
const clocks = new WeakMap<DynamoDBClient, Map<() => number, ServiceClock>>();

function clockFor(client: DynamoDBClient, now: () => number): ServiceClock {
  const byNow = clocks.get(client) ?? new Map<() => number, ServiceClock>();
  clocks.set(client, byNow);
  const clock = byNow.get(now) ?? new ServiceClock({ now });
  byNow.set(now, clock);
  return clock;
}

/** Options of `DynamoDBStore`. */
export interface DynamoDBStoreOptions extends StoreWindows, TableAttributeOptions {
  /** The table's name (or ARN). Required. Create it with `idempotencyTableDefinition`. */
  table: string;
  /** Key prefix separating consumers that must each run their effect once. Default "". */
  namespace?: string;
  /**
   * Your own client (region, credentials, retries, middleware). Default: a `new DynamoDBClient(clientConfig)`
   * — in Lambda that picks the region and credentials up from the environment. The store never changes
   * it: what it adds (a middleware reading each answer's `Date` header) goes on its own commands.
   */
  client?: DynamoDBClient;
  /** Configuration for the client the store creates when `client` is not given. Ignored otherwise. */
  clientConfig?: DynamoDBClientConfig;
  /**
   * How many times `rememberMany` / `seenMany` resend what DynamoDB left unprocessed (throttling)
   * before failing with `StoreUnavailableError`. Backoff doubles from 50 ms, with jitter, capped at 2 s.
   * Default 8.
   */
  maxUnprocessedRetries?: number;
  /**
   * Whether `claimMany` first reads ids with one consistent `BatchGetItem` and puts only those the
   * read shows claimable (precheck.ts). "auto": the ids the engine flags as redeliveries,
   * when a call has at least 2 of them; "always": every id (duplicates expected without redelivery
   * counts); "never": no read, one conditional `PutItem` per id. Default "auto".
   */
  precheck?: PrecheckPolicy;
  /**
   * Most requests the store has in flight at once, over all its calls: a batch step of 10,000 ids sends
   * them N at a time instead of all at once (each waits as a closure, not as a queued HTTP request).
   * Keep it at or under your client's socket pool (`maxSockets`; the SDK's default is 50). Default 50.
   */
  maxConcurrentRequests?: number;
  /**
   * The local clock, in epoch milliseconds. Default `Date.now`. Leases are not decided by it: the store
   * measures time on it and anchors it to DynamoDB's clock (every answer's `Date` header), so a skewed
   * local clock shifts nothing.
   */
  now?: () => number;
  /** Fencing-token generator. Default `crypto.randomUUID`. */
  token?: () => string;
}

const DYNAMODB_OPTION_KEYS = optionKeys<DynamoDBStoreOptions>({
  table: true,
  namespace: true,
  client: true,
  clientConfig: true,
  maxUnprocessedRetries: true,
  precheck: true,
  maxConcurrentRequests: true,
  now: true,
  token: true,
  leaseMs: true,
  retentionMs: true,
  keyAttribute: true,
  ttlAttribute: true,
});

/**
 * A claiming store on one DynamoDB table (with transactional mode: `TransactionalDynamoDBStore`): one item per id, claimed with one
 * conditional `PutItem`, committed in `BatchWriteItem`s of 25, released with a fenced `DeleteItem`.
 * Expiry is decided on DynamoDB's own clock (estimated from each answer's `Date`). IAM: `DYNAMODB_STORE_ACTIONS` on the table.
 *
 * @example
 * ```ts
 * import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
 * import { DynamoDBStore } from "babelqueue-serverless/dynamodb";
 *
 * // Module scope: the client and the store are reused while the Lambda environment is warm.
 * const store = new DynamoDBStore({
 *   table: process.env.IDEMPOTENCY_TABLE ?? "idempotency",
 *   namespace: "orders",
 *   client: new DynamoDBClient({ maxAttempts: 3 }),
 *   retentionMs: 14 * 24 * 60 * 60 * 1000, // the queue keeps messages 14 days
 * });
 * ```
 */
export class DynamoDBStore implements ClaimingStore {
  readonly table: string;
  readonly namespace: string;
  readonly leaseMs: number;
  readonly retentionMs: number;
  readonly keyAttribute: string;
  readonly ttlAttribute: string;
  readonly precheck: PrecheckPolicy;
  readonly maxConcurrentRequests: number;
  /** The client in use (yours, or the one the store created). */
  readonly client: DynamoDBClient;
  /** DynamoDB's clock as this store estimates it (shared by the stores on one client and local clock). */
  readonly #clock: ServiceClock;
  readonly #limiter: RequestLimiter;
  readonly #send: Send;
  readonly #batch: BatchTarget;
  readonly #claims: ClaimTarget;
  readonly #token: () => string;

  constructor(options: DynamoDBStoreOptions) {
    checkOptions(options, DYNAMODB_OPTION_KEYS, STORE_NAME);
    if (typeof options?.table !== "string" || options.table === "") {
      throw new InvalidOptionError("table", "must be the DynamoDB table's name");
    }
    this.table = options.table;
    this.namespace = checkNamespace(options.namespace ?? "");
    ({ leaseMs: this.leaseMs, retentionMs: this.retentionMs } = resolveWindows(options));
    this.keyAttribute = checkAttributeName("keyAttribute", options.keyAttribute ?? "pk");
    this.ttlAttribute = checkAttributeName("ttlAttribute", options.ttlAttribute ?? "ttl");
    const reserved = new Set<string>(Object.values(NAMES));
    if (reserved.has(this.keyAttribute) || reserved.has(this.ttlAttribute) || this.keyAttribute === this.ttlAttribute) {
      throw new InvalidOptionError("keyAttribute", `and ttlAttribute must differ and not be one of ${[...reserved].join(", ")}`);
    }
    const retries = options.maxUnprocessedRetries ?? 8;
    if (!Number.isSafeInteger(retries) || retries < 0) throw new InvalidOptionError("maxUnprocessedRetries", "must be an integer >= 0");
    const precheck = options.precheck ?? "auto";
    if (!PRECHECK_POLICIES.includes(precheck)) throw new InvalidOptionError("precheck", `must be one of ${PRECHECK_POLICIES.join(", ")}`);
    this.precheck = precheck;
    const concurrency = options.maxConcurrentRequests ?? DEFAULT_MAX_CONCURRENT_REQUESTS;
    if (!Number.isSafeInteger(concurrency) || concurrency < 1 || concurrency > 10_000) {
      throw new InvalidOptionError("maxConcurrentRequests", "must be an integer from 1 to 10000");
    }
    this.maxConcurrentRequests = concurrency;
    if (options.now !== undefined && typeof options.now !== "function") throw new InvalidOptionError("now", "must be a function returning epoch milliseconds");
    this.client = options.client ?? new DynamoDBClient(options.clientConfig ?? {});
    this.#clock = clockFor(this.client, options.now ?? Date.now);
    this.#token = tokenSource(options.token, () => globalThis.crypto.randomUUID());
    this.#limiter = new RequestLimiter(concurrency);
    this.#send = sender(this.client, this.#limiter, this.#clock);
    this.#batch = {
      send: this.#send,
      table: this.table,
      keyAttribute: this.keyAttribute,
      maxRetries: retries,
      fail: (operation, error) => this.#fail(operation, error),
    };
    this.#claims = {
      table: this.table,
      keyAttribute: this.keyAttribute,
      ttlAttribute: this.ttlAttribute,
      clock: this.#clock,
      token: this.#token,
      send: this.#send,
      read: (key) => this.#getItem("claim", key),
      fail: (operation, error) => this.#fail(operation, error),
    };
  }

  /**
   * DynamoDB's clock minus the local clock (`now`), in ms, as the store estimates it now: the true
   * offset is within [min, max]. Undefined before the store (or another on the same client and
   * clock) has had an answer from DynamoDB. For diagnostics: the store uses it by itself.
   */
  clockOffset(): OffsetBounds | undefined {
    return this.#clock.offset();
  }

  /** Most requests this store has had in flight at once (bench and tests). */
  get peakConcurrentRequests(): number {
    return this.#limiter.peak;
  }

  /** The partition key value of `id`. */
  #key(id: string): Promise<string> {
    return storeKey(this.namespace, id, DYNAMODB_MAX_KEY_BYTES);
  }

  #fail(operation: string, error: unknown): Error {
    // The name, codes and HTTP status only: a DynamoDB message might quote a key.
    return storeFailure(STORE_NAME, operation, error, { message: false, cause: "original", suffix: `on table ${this.table}` });
  }

  #ttl(deadlineMs: number): { N: string } {
    return { N: String(Math.ceil(deadlineMs / 1000)) };
  }

  /** What a claim reads: enough to answer done / in-flight with the fingerprint. */
  get #claimProjection(): Projection {
    return {
      expression: "#k, #s, #l, #r, #f",
      names: { "#k": this.keyAttribute, "#s": NAMES["#s"], "#l": NAMES["#l"], "#r": NAMES["#r"], "#f": NAMES["#f"] },
    };
  }

  async #getItem(operation: string, key: string): Promise<Item | undefined> {
    try {
      const answer = await this.#send<GetItemCommandOutput>(
        () => new GetItemCommand({ TableName: this.table, Key: { [this.keyAttribute]: { S: key } }, ConsistentRead: true }),
      );
      return answer.Item;
    } catch (error) {
      throw this.#fail(operation, error);
    }
  }

  /** One claim, as `claimMany` makes each: a failure throws, after deleting what a failed put may have left. */
  async claim(id: string, leaseMs?: number, fingerprint?: string): Promise<Claim> {
    const lease = checkMs("leaseMs", leaseMs ?? this.leaseMs);
    const claim = await this.#claimOne(await this.#key(id), lease, checkFingerprint(fingerprint));
    if (claim.status === "failed") throw claim.error;
    return claim;
  }

  /**
   * The claims in parallel (no batch conditional write exists in DynamoDB), at most
   * `maxConcurrentRequests` in flight, after one consistent `BatchGetItem` of the ids the precheck
   * policy picks from `hints` (those it shows committed or in flight are answered by it and not put;
   * ids it does not read are put at once, alongside the read).
   *
   * Each id stands alone: an id whose requests fail (throttled after the SDK's retries, an internal
   * error) answers `{ status: "failed", error }` and the others keep their answers. Nothing is held
   * for a failed id: a refused put wrote nothing, and after a failure that leaves it unknown (a
   * timeout, a 500) the store deletes the claim it may have written, fenced by its token.
   */
  async claimMany(
    ids: readonly string[],
    leaseMs?: number,
    fingerprints?: readonly (string | undefined)[],
    hints?: ClaimHints,
  ): Promise<BatchClaim[]> {
    const lease = checkMs("leaseMs", leaseMs ?? this.leaseMs);
    const prints = checkFingerprints(fingerprints, ids.length);
    const keys = await Promise.all(ids.map((id) => this.#key(id)));
    // Two copies of one id in a call: claim once, the copies share the answer's fate as `in-flight`.
    const firstIndex = new Map<string, number>();
    const redelivered = new Map<string, boolean>();
    keys.forEach((key, index) => {
      if (!firstIndex.has(key)) firstIndex.set(key, index);
      if (hints?.redelivered?.[index] === true) redelivered.set(key, true);
    });
    const distinct = [...firstIndex.keys()];
    const toRead = new Set(keysToRead(this.precheck, distinct, hints?.redelivered === undefined ? undefined : distinct.map((key) => redelivered.get(key) === true)));
    const read = toRead.size > 0 ? readBlocking(this.#batch, [...toRead], this.#claimProjection, () => this.#clock.earliest()) : undefined;
    const answers = await Promise.all(
      keys.map(async (key, index): Promise<BatchClaim | undefined> => {
        if (firstIndex.get(key) !== index) return undefined;
        if (read !== undefined && toRead.has(key)) {
          const verdict = (await read).get(key);
          if (verdict !== undefined) return verdict;
        }
        return this.#claimOne(key, lease, prints[index]);
      }),
    );
    return keys.map((key, index): BatchClaim => {
      const answer = answers[index];
      if (answer !== undefined) return answer;
      const first = firstIndex.get(key) as number;
      const firstAnswer = answers[first] as BatchClaim;
      if (firstAnswer.status === "done" || firstAnswer.status === "failed") return firstAnswer;
      const fingerprint = firstAnswer.status === "claimed" ? prints[first] : firstAnswer.fingerprint;
      return {
        status: "in-flight",
        retryAfterMs: firstAnswer.status === "in-flight" ? firstAnswer.retryAfterMs : lease,
        ...(fingerprint === undefined ? {} : { fingerprint }),
      };
    });
  }

  /** One id of `claimMany`: its claim, or its own failure (after deleting what a failed put may have left). */
  async #claimOne(key: string, leaseMs: number, fingerprint: string | undefined): Promise<BatchClaim> {
    const tokens: string[] = [];
    let won = false;
    const target: ClaimTarget = {
      ...this.#claims,
      token: () => {
        const token = this.#token();
        tokens.push(token);
        return token;
      },
      won: () => {
        won = true;
      },
    };
    try {
      return await claimKey(target, key, leaseMs, fingerprint);
    } catch (error) {
      // `refusedOutright` speaks of a put; a failure after a won put (its lease correction) leaves it written.
      if (won || !refusedOutright(error)) {
        // The put may have landed (a timeout, a 500, or an earlier attempt of the SDK's retries whose
        // answer was lost) or did: delete our claim if it is there, fenced by its token.
        await Promise.allSettled(tokens.map((token) => this.#releaseKey(key, token)));
      }
      return { status: "failed", error };
    }
  }

  #doneItem(key: string, base: number, fingerprint: string | undefined): Item {
    const retainUntil = base + this.retentionMs;
    return {
      [this.keyAttribute]: { S: key },
      status: { S: DONE },
      retainUntil: { N: String(retainUntil) },
      ...fingerprintAttribute(fingerprint),
      [this.ttlAttribute]: this.#ttl(retainUntil),
    };
  }

  async remember(id: string, fingerprint?: string): Promise<void> {
    await this.#putDone(await this.#key(id), "remember", checkFingerprint(fingerprint));
  }

  /** The commit of one key: an unconditional PutItem of the done item, retained from the latest DynamoDB's clock can read. */
  async #putDone(key: string, operation: string, fingerprint: string | undefined): Promise<void> {
    try {
      await this.#send(() => new PutItemCommand({ TableName: this.table, Item: this.#doneItem(key, this.#clock.deadlineBase(), fingerprint) }));
    } catch (error) {
      throw this.#fail(operation, error);
    }
  }

  /** `BatchWriteItem` in chunks of 25 (at most `maxConcurrentRequests` in flight); unprocessed items are resent with backoff. */
  async rememberMany(ids: readonly string[], fingerprints?: readonly (string | undefined)[]): Promise<void> {
    const prints = checkFingerprints(fingerprints, ids.length);
    const keys = await Promise.all(ids.map((id) => this.#key(id)));
    // One request may not name a key twice: one item per key, with the first fingerprint given for it.
    const byKey = new Map<string, string | undefined>();
    keys.forEach((key, index) => {
      if (byKey.get(key) === undefined) byKey.set(key, prints[index]);
    });
    // One commit: a plain PutItem is the same one request, without the batch's unprocessed-items loop.
    if (byKey.size === 1) {
      const [key, fingerprint] = [...byKey][0] as [string, string | undefined];
      return this.#putDone(key, "rememberMany", fingerprint);
    }
    const base = this.#clock.deadlineBase();
    const unwritten = await writeAll(this.#batch, "rememberMany", [...byKey].map(([key, fingerprint]) => this.#doneItem(key, base, fingerprint)));
    // Per id (ids of one key share its put): the engine retries and reports only the unwritten ones.
    throwStepFailures(STORE_NAME, "rememberMany", keys.map((key) => unwritten.get(key)));
  }

  async #releaseKey(key: string, token: string): Promise<boolean> {
    try {
      await this.#send<DeleteItemCommandOutput>(
        () =>
          new DeleteItemCommand({
            TableName: this.table,
            Key: { [this.keyAttribute]: { S: key } },
            ConditionExpression: OWNED,
            ExpressionAttributeNames: { "#s": NAMES["#s"], "#t": NAMES["#t"], "#l": NAMES["#l"] },
            // The earliest DynamoDB's clock can read: a lease live by its clock always passes; the token fences.
            ExpressionAttributeValues: { ":inflight": { S: IN_FLIGHT }, ":token": { S: token }, ":now": { N: String(this.#clock.conditionNow()) } },
          }),
      );
      return true;
    } catch (error) {
      if (isConditionFailure(error)) return false;
      throw this.#fail("release", error);
    }
  }

  async release(id: string, token: string): Promise<boolean> {
    if (!isToken(token)) return false;
    return this.#releaseKey(await this.#key(id), token);
  }

  /** Fenced deletes in parallel (a batch write cannot carry conditions), at most `maxConcurrentRequests` in flight. Throws the first failure after all were tried. */
  async releaseMany(claims: readonly ClaimRef[]): Promise<void> {
    const settled = await Promise.allSettled(claims.map((claim) => this.release(claim.id, claim.token)));
    const failure = settled.find((answer) => answer.status === "rejected");
    if (failure !== undefined) throw (failure as PromiseRejectedResult).reason;
  }

  async seen(id: string): Promise<boolean> {
    const key = await this.#key(id);
    const item = await this.#getItem("seen", key);
    return isSeen(item, this.#clock.earliest());
  }

  /** Consistent `BatchGetItem` in chunks of 100 (at most `maxConcurrentRequests` in flight); unprocessed keys are re-read with backoff. */
  async seenMany(ids: readonly string[]): Promise<boolean[]> {
    const keys = await Promise.all(ids.map((id) => this.#key(id)));
    const found = await readAll(this.#batch, "seenMany", [...new Set(keys)], {
      expression: "#k, #s, #r",
      names: { "#k": this.keyAttribute, "#s": NAMES["#s"], "#r": NAMES["#r"] },
    });
    const now = this.#clock.earliest();
    return keys.map((key) => isSeen(found.get(key), now));
  }

  /** What the table holds for `id` (one consistent `GetItem`): status, time left, fingerprint; null when absent or expired. */
  async inspect(id: string): Promise<IdRecord | null> {
    const key = await this.#key(id);
    const item = await this.#getItem("inspect", key);
    return idRecord(item, this.#clock.earliest());
  }

  async forget(id: string): Promise<void> {
    const key = await this.#key(id);
    try {
      await this.#send(() => new DeleteItemCommand({ TableName: this.table, Key: { [this.keyAttribute]: { S: key } } }));
    } catch (error) {
      throw this.#fail("forget", error);
    }
  }

  /** What transactional mode needs of this store (its client, table, attributes, DynamoDB's clock and keys), for `TransactionalDynamoDBStore`. */
  protected transactionDeps(): DynamoDBTransactionDeps {
    return {
      client: this.client,
      send: this.#send,
      table: this.table,
      keyAttribute: this.keyAttribute,
      ttlAttribute: this.ttlAttribute,
      retentionMs: this.retentionMs,
      now: this.#clock.now,
      times: this.#clock,
      key: (id) => this.#key(id),
    };
  }
}
