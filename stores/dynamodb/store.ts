/**
 * `DynamoDBStore`: a `ClaimingStore` on one DynamoDB table (export `babelqueue-serverless/dynamodb`).
 * Item layout: items.ts; the table: table.ts; batch requests: batch.ts; the read-before-claim
 * policy: precheck.ts; transactional mode: `TransactionalDynamoDBStore` (transactional-store.ts over
 * transaction.ts), a subclass, so that an application without it does not bundle it.
 *
 * Round trips:
 * - `claim`: ONE conditional `PutItem` that wins when the item is absent, its lease has ended, or its
 *   retention has ended; `ReturnValuesOnConditionCheckFailure: ALL_OLD` returns the blocking item
 *   in the same round trip, telling `done` from `in-flight` (with the lease's remaining time and the
 *   stored fingerprint). A consistent `GetItem` is made only when the failure carried no item
 *   (emulators such as dynalite).
 * - `claimMany`: the claims in parallel. DynamoDB has no batch *conditional* write: `BatchWriteItem`
 *   takes no conditions and `TransactWriteItems` fails as a whole when one condition fails. When the
 *   batch is likely to hold duplicates (`precheck`, from the engine's redelivery hints), ONE consistent
 *   `BatchGetItem` answers the committed and in-flight ids first and only the others are put.
 * - `remember`: unconditional `PutItem` → done. `rememberMany`: `BatchWriteItem` in chunks of 25
 *   (one id: a `PutItem`), `UnprocessedItems` retried with exponential backoff and jitter. The done
 *   item replaces the claim's whole item, so the commit writes the fingerprint it is given (the
 *   engine passes the claim's); a commit given none stores none.
 * - `release`: `DeleteItem` conditioned on "in-flight, lease live, and still holding this token".
 * - `seen` / `inspect`: strongly consistent `GetItem`; `seenMany`: consistent `BatchGetItem` in chunks of 100.
 * - `forget`: `DeleteItem`.
 *
 * Expiry is decided against the caller's clock (`now`), never left to DynamoDB's TTL sweep. Clocks of
 * different callers should agree to well within the lease; Lambda hosts are NTP-synchronised.
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
  DynamoDBClient,
  type DynamoDBClientConfig,
  GetItemCommand,
  PutItemCommand,
} from "@aws-sdk/client-dynamodb";
import type { Claim, ClaimHints, ClaimRef, ClaimingStore, IdRecord, StoreWindows } from "../../src/contract.js";
import { InvalidOptionError } from "../../src/errors.js";
import { storeFailure } from "../../src/store-kit/failures.js";
import { checkFingerprint, checkFingerprints } from "../../src/store-kit/fingerprints.js";
import { checkNamespace, storeKey } from "../../src/store-kit/keys.js";
import { checkOptions, optionKeys } from "../../src/store-kit/options.js";
import { checkMs, resolveWindows } from "../../src/store-kit/windows.js";
import { type BatchTarget, type Projection, readAll, writeAll } from "./batch.js";
import {
  CLAIMABLE,
  DONE,
  DYNAMODB_MAX_KEY_BYTES,
  IN_FLIGHT,
  type Item,
  NAMES,
  OWNED,
  blockingVerdict,
  fingerprintAttribute,
  idRecord,
  isConditionFailure,
  isSeen,
} from "./items.js";
import { PRECHECK_POLICIES, type PrecheckPolicy, keysToRead, readBlocking } from "./precheck.js";
import { type TableAttributeOptions, checkAttributeName } from "./table.js";
import type { DynamoDBTransactionDeps } from "./transaction.js";

const STORE_NAME = "DynamoDBStore";

export interface DynamoDBStoreOptions extends StoreWindows, TableAttributeOptions {
  /** The table's name (or ARN). Required. Create it with `idempotencyTableDefinition`. */
  table: string;
  /** Key prefix separating consumers that must each run their effect once. Default "". */
  namespace?: string;
  /**
   * Your own client (region, credentials, retries, middleware). Default: a `new DynamoDBClient(clientConfig)`
   * — in Lambda that picks the region and credentials up from the environment.
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
  /** The clock, in epoch milliseconds. Default `Date.now`. */
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
  now: true,
  token: true,
  leaseMs: true,
  retentionMs: true,
  keyAttribute: true,
  ttlAttribute: true,
});

export class DynamoDBStore implements ClaimingStore {
  readonly table: string;
  readonly namespace: string;
  readonly leaseMs: number;
  readonly retentionMs: number;
  readonly keyAttribute: string;
  readonly ttlAttribute: string;
  readonly precheck: PrecheckPolicy;
  /** The client in use (yours, or the one the store created). */
  readonly client: DynamoDBClient;
  readonly #batch: BatchTarget;
  readonly #now: () => number;
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
    this.client = options.client ?? new DynamoDBClient(options.clientConfig ?? {});
    this.#now = options.now ?? Date.now;
    this.#token = options.token ?? (() => globalThis.crypto.randomUUID());
    this.#batch = {
      client: this.client,
      table: this.table,
      keyAttribute: this.keyAttribute,
      maxRetries: retries,
      fail: (operation, error) => this.#fail(operation, error),
    };
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

  async #claimKey(key: string, leaseMs: number, fingerprint: string | undefined): Promise<Claim> {
    // Twice at most: a GetItem fallback can find the blocking item already gone (then claim again).
    for (let attempt = 0; ; attempt++) {
      const now = this.#now();
      const token = this.#token();
      const leaseUntil = now + leaseMs;
      try {
        await this.client.send(
          new PutItemCommand({
            TableName: this.table,
            Item: {
              [this.keyAttribute]: { S: key },
              status: { S: IN_FLIGHT },
              token: { S: token },
              leaseUntil: { N: String(leaseUntil) },
              ...fingerprintAttribute(fingerprint),
              [this.ttlAttribute]: this.#ttl(leaseUntil),
            },
            ConditionExpression: CLAIMABLE,
            ExpressionAttributeNames: { "#k": this.keyAttribute, "#s": NAMES["#s"], "#l": NAMES["#l"], "#r": NAMES["#r"] },
            ExpressionAttributeValues: { ":inflight": { S: IN_FLIGHT }, ":done": { S: DONE }, ":now": { N: String(now) } },
            ReturnValuesOnConditionCheckFailure: "ALL_OLD",
          }),
        );
        return { status: "claimed", token };
      } catch (error) {
        if (!isConditionFailure(error)) throw this.#fail("claim", error);
        let old = error.Item;
        // An SDK retry of a put that had in fact succeeded meets our own item: we won.
        if (old?.token?.S === token && old.status?.S === IN_FLIGHT) return { status: "claimed", token };
        if (old === undefined) old = await this.#getItem("claim", key);
        const verdict = blockingVerdict(old, now);
        if (verdict !== undefined) return verdict;
        // The blocking item vanished or expired between the put and the read (forget, release): claim again.
        if (attempt >= 2) return { status: "in-flight", retryAfterMs: 0 };
      }
    }
  }

  async #getItem(operation: string, key: string): Promise<Item | undefined> {
    try {
      const answer = await this.client.send(
        new GetItemCommand({ TableName: this.table, Key: { [this.keyAttribute]: { S: key } }, ConsistentRead: true }),
      );
      return answer.Item;
    } catch (error) {
      throw this.#fail(operation, error);
    }
  }

  async claim(id: string, leaseMs?: number, fingerprint?: string): Promise<Claim> {
    const lease = checkMs("leaseMs", leaseMs ?? this.leaseMs);
    return this.#claimKey(await this.#key(id), lease, checkFingerprint(fingerprint));
  }

  /**
   * The claims in parallel (no batch conditional write exists in DynamoDB), after one consistent
   * `BatchGetItem` of the ids the precheck policy picks from `hints` (those it shows committed or in
   * flight are answered by it and not put; ids it does not read are put at once, alongside the read).
   * When one claim fails, the claims this call won are released before the error is thrown, so
   * nothing stays leased for nobody.
   */
  async claimMany(
    ids: readonly string[],
    leaseMs?: number,
    fingerprints?: readonly (string | undefined)[],
    hints?: ClaimHints,
  ): Promise<Claim[]> {
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
    const read = toRead.size > 0 ? readBlocking(this.#batch, [...toRead], this.#claimProjection, this.#now) : undefined;
    const settled = await Promise.allSettled(
      keys.map(async (key, index): Promise<Claim | undefined> => {
        if (firstIndex.get(key) !== index) return undefined;
        if (read !== undefined && toRead.has(key)) {
          const verdict = (await read).get(key);
          if (verdict !== undefined) return verdict;
        }
        return this.#claimKey(key, lease, prints[index]);
      }),
    );
    const failure = settled.find((answer) => answer.status === "rejected");
    if (failure !== undefined) {
      const won = settled.flatMap((answer, index) =>
        answer.status === "fulfilled" && answer.value?.status === "claimed"
          ? [{ key: keys[index] as string, token: answer.value.token }]
          : [],
      );
      await Promise.allSettled(won.map((claim) => this.#releaseKey(claim.key, claim.token)));
      throw (failure as PromiseRejectedResult).reason;
    }
    return keys.map((key, index): Claim => {
      const answer = (settled[index] as PromiseFulfilledResult<Claim | undefined>).value;
      if (answer !== undefined) return answer;
      const first = firstIndex.get(key) as number;
      const firstAnswer = (settled[first] as PromiseFulfilledResult<Claim>).value;
      if (firstAnswer.status === "done") return firstAnswer;
      const fingerprint = firstAnswer.status === "claimed" ? prints[first] : firstAnswer.fingerprint;
      return {
        status: "in-flight",
        retryAfterMs: firstAnswer.status === "in-flight" ? firstAnswer.retryAfterMs : lease,
        ...(fingerprint === undefined ? {} : { fingerprint }),
      };
    });
  }

  #doneItem(key: string, now: number, fingerprint: string | undefined): Item {
    const retainUntil = now + this.retentionMs;
    return {
      [this.keyAttribute]: { S: key },
      status: { S: DONE },
      retainUntil: { N: String(retainUntil) },
      ...fingerprintAttribute(fingerprint),
      [this.ttlAttribute]: this.#ttl(retainUntil),
    };
  }

  async remember(id: string, fingerprint?: string): Promise<void> {
    await this.#putDone(await this.#key(id), this.#now(), "remember", checkFingerprint(fingerprint));
  }

  /** The commit of one key: an unconditional PutItem of the done item. */
  async #putDone(key: string, now: number, operation: string, fingerprint: string | undefined): Promise<void> {
    try {
      await this.client.send(new PutItemCommand({ TableName: this.table, Item: this.#doneItem(key, now, fingerprint) }));
    } catch (error) {
      throw this.#fail(operation, error);
    }
  }

  /** `BatchWriteItem` in chunks of 25 (sent in parallel); unprocessed items are resent with backoff. */
  async rememberMany(ids: readonly string[], fingerprints?: readonly (string | undefined)[]): Promise<void> {
    const prints = checkFingerprints(fingerprints, ids.length);
    const keys = await Promise.all(ids.map((id) => this.#key(id)));
    // One request may not name a key twice: one item per key, with the first fingerprint given for it.
    const byKey = new Map<string, string | undefined>();
    keys.forEach((key, index) => {
      if (byKey.get(key) === undefined) byKey.set(key, prints[index]);
    });
    const now = this.#now();
    // One commit: a plain PutItem is the same one request, without the batch's unprocessed-items loop.
    if (byKey.size === 1) {
      const [key, fingerprint] = [...byKey][0] as [string, string | undefined];
      return this.#putDone(key, now, "rememberMany", fingerprint);
    }
    await writeAll(this.#batch, "rememberMany", [...byKey].map(([key, fingerprint]) => this.#doneItem(key, now, fingerprint)));
  }

  async #releaseKey(key: string, token: string): Promise<boolean> {
    try {
      await this.client.send(
        new DeleteItemCommand({
          TableName: this.table,
          Key: { [this.keyAttribute]: { S: key } },
          ConditionExpression: OWNED,
          ExpressionAttributeNames: { "#s": NAMES["#s"], "#t": NAMES["#t"], "#l": NAMES["#l"] },
          ExpressionAttributeValues: { ":inflight": { S: IN_FLIGHT }, ":token": { S: token }, ":now": { N: String(this.#now()) } },
        }),
      );
      return true;
    } catch (error) {
      if (isConditionFailure(error)) return false;
      throw this.#fail("release", error);
    }
  }

  async release(id: string, token: string): Promise<boolean> {
    if (typeof token !== "string" || token === "") return false;
    return this.#releaseKey(await this.#key(id), token);
  }

  /** Fenced deletes in parallel (a batch write cannot carry conditions). Throws the first failure after all were tried. */
  async releaseMany(claims: readonly ClaimRef[]): Promise<void> {
    const settled = await Promise.allSettled(claims.map((claim) => this.release(claim.id, claim.token)));
    const failure = settled.find((answer) => answer.status === "rejected");
    if (failure !== undefined) throw (failure as PromiseRejectedResult).reason;
  }

  async seen(id: string): Promise<boolean> {
    const key = await this.#key(id);
    const now = this.#now();
    return isSeen(await this.#getItem("seen", key), now);
  }

  /** Consistent `BatchGetItem` in chunks of 100 (parallel); unprocessed keys are re-read with backoff. */
  async seenMany(ids: readonly string[]): Promise<boolean[]> {
    const keys = await Promise.all(ids.map((id) => this.#key(id)));
    const now = this.#now();
    const found = await readAll(this.#batch, "seenMany", [...new Set(keys)], {
      expression: "#k, #s, #r",
      names: { "#k": this.keyAttribute, "#s": NAMES["#s"], "#r": NAMES["#r"] },
    });
    return keys.map((key) => isSeen(found.get(key), now));
  }

  /** What the table holds for `id` (one consistent `GetItem`): status, time left, fingerprint; null when absent or expired. */
  async inspect(id: string): Promise<IdRecord | null> {
    const key = await this.#key(id);
    const item = await this.#getItem("inspect", key);
    return idRecord(item, this.#now());
  }

  async forget(id: string): Promise<void> {
    const key = await this.#key(id);
    try {
      await this.client.send(new DeleteItemCommand({ TableName: this.table, Key: { [this.keyAttribute]: { S: key } } }));
    } catch (error) {
      throw this.#fail("forget", error);
    }
  }

  /** What transactional mode needs of this store (its own client, table, attributes, clock and keys), for `TransactionalDynamoDBStore`. */
  protected transactionDeps(): DynamoDBTransactionDeps {
    const deps = { client: this.client, table: this.table, keyAttribute: this.keyAttribute, ttlAttribute: this.ttlAttribute, retentionMs: this.retentionMs };
    return { ...deps, now: this.#now, key: (id) => this.#key(id) };
  }
}
