/**
 * `DynamoDBStore`: a `ClaimingStore` on one DynamoDB table (export `babelqueue-serverless/dynamodb`).
 *
 * One item per (namespace, id) key:
 *
 * | attribute       | type | meaning                                                                  |
 * | --------------- | ---- | ------------------------------------------------------------------------ |
 * | `pk` (option)   | S    | `{namespace}:{id}`, hashed to a fixed length past 2048 bytes (keys.ts)    |
 * | `status`        | S    | `"in-flight"` (claimed, lease running) or `"done"` (committed)            |
 * | `token`         | S    | the fencing token of an in-flight claim (absent once done)               |
 * | `leaseUntil`    | N    | in-flight: end of the lease, epoch milliseconds                          |
 * | `retainUntil`   | N    | done: end of the retention, epoch milliseconds                           |
 * | `ttl` (option)  | N    | epoch *seconds* for DynamoDB's TTL sweep (cleanup only)                  |
 *
 * Round trips:
 * - `claim`: ONE conditional `PutItem` that wins when the item is absent, its lease has ended, or its
 *   retention has ended; `ReturnValuesOnConditionCheckFailure: ALL_OLD` returns the blocking item
 *   in the same round trip, telling `done` from `in-flight` (and the lease's remaining time). A
 *   consistent `GetItem` is made only when the failure carried no item (emulators such as dynalite).
 * - `claimMany`: the claims in parallel. DynamoDB has no batch *conditional* write: `BatchWriteItem`
 *   takes no conditions and `TransactWriteItems` fails as a whole when one condition fails.
 * - `remember`: unconditional `PutItem` → done. `rememberMany`: `BatchWriteItem` in chunks of 25 (one id: a `PutItem`),
 *   `UnprocessedItems` retried with exponential backoff and jitter.
 * - `release`: `DeleteItem` conditioned on "in-flight, lease live, and still holding this token".
 * - `seen`: strongly consistent `GetItem`; `seenMany`: consistent `BatchGetItem` in chunks of 100.
 * - `forget`: `DeleteItem`.
 *
 * Expiry is decided by the condition expressions against the caller's clock (`now`), never left to
 * DynamoDB's TTL sweep, which deletes expired items up to days late. Clocks of different callers
 * should agree to well within the lease; Lambda hosts are NTP-synchronised.
 *
 * IAM actions used: dynamodb:PutItem, GetItem, DeleteItem, BatchWriteItem, BatchGetItem
 * (`DYNAMODB_STORE_ACTIONS`).
 *
 * What this is *not*: a lock around the handler. A handler that outlives its lease may run twice;
 * the Lambda wrapper sizes the lease to the invocation's remaining time so that cannot happen
 * within one invocation.
 */
import {
  type AttributeValue,
  BatchGetItemCommand,
  BatchWriteItemCommand,
  CreateTableCommand,
  DeleteItemCommand,
  DescribeTableCommand,
  DynamoDBClient,
  type DynamoDBClientConfig,
  GetItemCommand,
  PutItemCommand,
  UpdateTimeToLiveCommand,
  type WriteRequest,
} from "@aws-sdk/client-dynamodb";
import type { Claim, ClaimRef, ClaimingStore, StoreWindows } from "../src/contract.js";
import { InvalidOptionError, StoreUnavailableError } from "../src/errors.js";
import { checkNamespace, storeKey } from "../src/keys.js";
import { checkMs, resolveWindows } from "../src/windows.js";

/** DynamoDB's limit on a partition key value, in UTF-8 bytes. */
export const DYNAMODB_MAX_KEY_BYTES = 2048;

/** The exact IAM actions the store uses, on the table's ARN. */
export const DYNAMODB_STORE_ACTIONS = [
  "dynamodb:PutItem",
  "dynamodb:GetItem",
  "dynamodb:DeleteItem",
  "dynamodb:BatchWriteItem",
  "dynamodb:BatchGetItem",
] as const;

const STORE_NAME = "DynamoDBStore";
const BATCH_WRITE_LIMIT = 25;
const BATCH_GET_LIMIT = 100;
const ATTRIBUTE_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,255}$/;

export interface DynamoDBStoreOptions extends StoreWindows {
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
  /** Name of the table's partition key attribute (type S). Default "pk". */
  keyAttribute?: string;
  /** Name of the attribute the table's TTL is enabled on (epoch seconds). Default "ttl". */
  ttlAttribute?: string;
  /**
   * How many times `rememberMany` / `seenMany` resend what DynamoDB left unprocessed (throttling)
   * before failing with `StoreUnavailableError`. Backoff doubles from 50 ms, with jitter, capped at 2 s.
   * Default 8.
   */
  maxUnprocessedRetries?: number;
  /** The clock, in epoch milliseconds. Default `Date.now`. */
  now?: () => number;
  /** Fencing-token generator. Default `crypto.randomUUID`. */
  token?: () => string;
}

/** What `idempotencyTableDefinition` returns: a CreateTable input and the TTL setting, as CloudFormation and the SDK spell them. */
export interface IdempotencyTableDefinition {
  /** Input of `CreateTableCommand` (and the `Properties` of an `AWS::DynamoDB::Table`, minus TTL). */
  readonly createTable: {
    readonly TableName: string;
    readonly AttributeDefinitions: readonly { readonly AttributeName: string; readonly AttributeType: "S" }[];
    readonly KeySchema: readonly { readonly AttributeName: string; readonly KeyType: "HASH" }[];
    readonly BillingMode: "PAY_PER_REQUEST";
  };
  /** `TimeToLiveSpecification` of the table (UpdateTimeToLive / CloudFormation). */
  readonly timeToLive: { readonly AttributeName: string; readonly Enabled: true };
}

/**
 * The idempotency table: one string partition key, on-demand billing, TTL on the `ttl` attribute.
 * `serverless.yml` declares the same table (test/serverless.test.ts checks that they agree).
 */
export function idempotencyTableDefinition(
  tableName: string,
  options: Pick<DynamoDBStoreOptions, "keyAttribute" | "ttlAttribute"> = {},
): IdempotencyTableDefinition {
  const keyAttribute = checkAttributeName("keyAttribute", options.keyAttribute ?? "pk");
  const ttlAttribute = checkAttributeName("ttlAttribute", options.ttlAttribute ?? "ttl");
  return {
    createTable: {
      TableName: tableName,
      AttributeDefinitions: [{ AttributeName: keyAttribute, AttributeType: "S" }],
      KeySchema: [{ AttributeName: keyAttribute, KeyType: "HASH" }],
      BillingMode: "PAY_PER_REQUEST",
    },
    timeToLive: { AttributeName: ttlAttribute, Enabled: true },
  };
}

/**
 * Creates the idempotency table from its definition, for local development, tests and demos
 * (production tables come from `serverless.yml` / CloudFormation). Waits until it is ACTIVE.
 * `timeToLive: false` skips enabling TTL, for emulators without `UpdateTimeToLive`.
 */
export async function createIdempotencyTable(
  client: DynamoDBClient,
  definition: IdempotencyTableDefinition,
  options: { timeToLive?: boolean } = {},
): Promise<void> {
  const { createTable, timeToLive } = definition;
  await client.send(
    new CreateTableCommand({
      TableName: createTable.TableName,
      AttributeDefinitions: createTable.AttributeDefinitions.map((attribute) => ({ ...attribute })),
      KeySchema: createTable.KeySchema.map((key) => ({ ...key })),
      BillingMode: createTable.BillingMode,
    }),
  );
  for (let i = 0; i < 100; i++) {
    const { Table } = await client.send(new DescribeTableCommand({ TableName: createTable.TableName }));
    if (Table?.TableStatus === "ACTIVE") break;
    await sleep(100);
  }
  if (options.timeToLive !== false) {
    await client.send(
      new UpdateTimeToLiveCommand({ TableName: createTable.TableName, TimeToLiveSpecification: { ...timeToLive } }),
    );
  }
}

function checkAttributeName(option: string, value: string): string {
  if (typeof value !== "string" || !ATTRIBUTE_NAME_PATTERN.test(value)) {
    throw new InvalidOptionError(option, "must be 1-255 characters of A-Z a-z 0-9 _ . -");
  }
  return value;
}

type Item = Record<string, AttributeValue>;

const IN_FLIGHT = "in-flight";
const DONE = "done";

/** Attribute-name placeholders shared by every expression. */
const NAMES = { "#s": "status", "#t": "token", "#l": "leaseUntil", "#r": "retainUntil" } as const;

/** Absent, or an in-flight item whose lease ended, or a done item whose retention ended. */
const CLAIMABLE =
  "attribute_not_exists(#k) OR (#s = :inflight AND #l <= :now) OR (#s = :done AND #r <= :now)";
/** Still in flight, lease live, held by this token. */
const OWNED = "#s = :inflight AND #t = :token AND #l > :now";

function errorName(error: unknown): string {
  if (error instanceof Error) return error.name;
  return typeof error;
}

function isConditionFailure(error: unknown): error is Error & { Item?: Item } {
  return error instanceof Error && error.name === "ConditionalCheckFailedException";
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export class DynamoDBStore implements ClaimingStore {
  readonly table: string;
  readonly namespace: string;
  readonly leaseMs: number;
  readonly retentionMs: number;
  readonly keyAttribute: string;
  readonly ttlAttribute: string;
  /** The client in use (yours, or the one the store created). */
  readonly client: DynamoDBClient;
  readonly #maxRetries: number;
  readonly #now: () => number;
  readonly #token: () => string;

  constructor(options: DynamoDBStoreOptions) {
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
    this.#maxRetries = retries;
    this.client = options.client ?? new DynamoDBClient(options.clientConfig ?? {});
    this.#now = options.now ?? Date.now;
    this.#token = options.token ?? (() => globalThis.crypto.randomUUID());
  }

  /** The partition key value of `id`. */
  async #key(id: string): Promise<string> {
    if (typeof id !== "string") throw new InvalidOptionError("id", "must be a string");
    return storeKey(this.namespace, id, DYNAMODB_MAX_KEY_BYTES);
  }

  #fail(operation: string, error: unknown): StoreUnavailableError {
    if (error instanceof StoreUnavailableError) return error;
    const status = (error as { $metadata?: { httpStatusCode?: number } })?.$metadata?.httpStatusCode;
    // The name and HTTP status only: a backend message might quote a key.
    const detail = `${errorName(error)}${status === undefined ? "" : ` (HTTP ${status})`} on table ${this.table}`;
    return new StoreUnavailableError(STORE_NAME, operation, detail, { cause: error });
  }

  #ttl(deadlineMs: number): AttributeValue {
    return { N: String(Math.ceil(deadlineMs / 1000)) };
  }

  /** Reads an old item's verdict: done / in-flight, or undefined when it no longer blocks a claim. */
  #blocking(item: Item | undefined, now: number): Claim | undefined {
    if (item === undefined) return undefined;
    const status = item.status?.S;
    if (status === DONE) {
      const until = Number(item.retainUntil?.N);
      return until > now ? { status: "done" } : undefined;
    }
    if (status === IN_FLIGHT) {
      const until = Number(item.leaseUntil?.N);
      return until > now ? { status: "in-flight", retryAfterMs: until - now } : undefined;
    }
    return undefined;
  }

  async #claimKey(key: string, leaseMs: number): Promise<Claim> {
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
        const verdict = this.#blocking(old, now);
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

  async claim(id: string, leaseMs?: number): Promise<Claim> {
    const lease = checkMs("leaseMs", leaseMs ?? this.leaseMs);
    return this.#claimKey(await this.#key(id), lease);
  }

  /**
   * The claims in parallel (no batch conditional write exists in DynamoDB). When one fails, the
   * claims this call won are released before the error is thrown, so nothing stays leased for nobody.
   */
  async claimMany(ids: readonly string[], leaseMs?: number): Promise<Claim[]> {
    const lease = checkMs("leaseMs", leaseMs ?? this.leaseMs);
    const keys = await Promise.all(ids.map((id) => this.#key(id)));
    // Two copies of one id in a call: claim once, the copies share the answer's fate as `in-flight`.
    const firstIndex = new Map<string, number>();
    keys.forEach((key, index) => {
      if (!firstIndex.has(key)) firstIndex.set(key, index);
    });
    const settled = await Promise.allSettled(
      keys.map((key, index) => (firstIndex.get(key) === index ? this.#claimKey(key, lease) : Promise.resolve(undefined))),
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
    return keys.map((key, index) => {
      const answer = (settled[index] as PromiseFulfilledResult<Claim | undefined>).value;
      if (answer !== undefined) return answer;
      const first = (settled[firstIndex.get(key) as number] as PromiseFulfilledResult<Claim>).value;
      if (first.status === "done") return first;
      return { status: "in-flight", retryAfterMs: first.status === "in-flight" ? first.retryAfterMs : lease };
    });
  }

  #doneItem(key: string, now: number): Item {
    const retainUntil = now + this.retentionMs;
    return {
      [this.keyAttribute]: { S: key },
      status: { S: DONE },
      retainUntil: { N: String(retainUntil) },
      [this.ttlAttribute]: this.#ttl(retainUntil),
    };
  }

  async remember(id: string): Promise<void> {
    await this.#putDone(await this.#key(id), this.#now(), "remember");
  }

  /** The commit of one key: an unconditional PutItem of the done item. */
  async #putDone(key: string, now: number, operation: string): Promise<void> {
    try {
      await this.client.send(new PutItemCommand({ TableName: this.table, Item: this.#doneItem(key, now) }));
    } catch (error) {
      throw this.#fail(operation, error);
    }
  }

  /** `BatchWriteItem` in chunks of 25 (sent in parallel); unprocessed items are resent with backoff. */
  async rememberMany(ids: readonly string[]): Promise<void> {
    // One request may not name a key twice.
    const keys = [...new Set(await Promise.all(ids.map((id) => this.#key(id))))];
    const now = this.#now();
    // One commit: a plain PutItem is the same one request, without the batch's unprocessed-items loop.
    if (keys.length === 1) return this.#putDone(keys[0] as string, now, "rememberMany");
    const chunks: WriteRequest[][] = [];
    for (let i = 0; i < keys.length; i += BATCH_WRITE_LIMIT) {
      chunks.push(keys.slice(i, i + BATCH_WRITE_LIMIT).map((key) => ({ PutRequest: { Item: this.#doneItem(key, now) } })));
    }
    await Promise.all(chunks.map((chunk) => this.#batchWrite(chunk)));
  }

  async #batchWrite(requests: WriteRequest[]): Promise<void> {
    await this.#untilProcessed("rememberMany", "item(s)", requests, async (pending) => {
      const answer = await this.client.send(new BatchWriteItemCommand({ RequestItems: { [this.table]: pending } }));
      return answer.UnprocessedItems?.[this.table] ?? [];
    });
  }

  /**
   * Sends `first`, then resends whatever DynamoDB returned unprocessed (throttling, size limits)
   * with exponential backoff and jitter, `maxUnprocessedRetries` times at most.
   */
  async #untilProcessed<T>(operation: string, what: string, first: T[], send: (pending: T[]) => Promise<T[]>): Promise<void> {
    let pending = first;
    for (let attempt = 0; ; attempt++) {
      let unprocessed: T[];
      try {
        unprocessed = await send(pending);
      } catch (error) {
        throw this.#fail(operation, error);
      }
      if (unprocessed.length === 0) return;
      if (attempt >= this.#maxRetries) {
        throw new StoreUnavailableError(
          STORE_NAME,
          operation,
          `${unprocessed.length} ${what} still unprocessed after ${attempt + 1} attempts on table ${this.table}`,
        );
      }
      pending = unprocessed;
      await sleep(backoffMs(attempt));
    }
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

  #isSeen(item: Item | undefined, now: number): boolean {
    return item?.status?.S === DONE && Number(item.retainUntil?.N) > now;
  }

  async seen(id: string): Promise<boolean> {
    const key = await this.#key(id);
    const now = this.#now();
    return this.#isSeen(await this.#getItem("seen", key), now);
  }

  /** Consistent `BatchGetItem` in chunks of 100 (parallel); unprocessed keys are re-read with backoff. */
  async seenMany(ids: readonly string[]): Promise<boolean[]> {
    const keys = await Promise.all(ids.map((id) => this.#key(id)));
    const unique = [...new Set(keys)];
    const now = this.#now();
    const found = new Map<string, Item>();
    const chunks: string[][] = [];
    for (let i = 0; i < unique.length; i += BATCH_GET_LIMIT) chunks.push(unique.slice(i, i + BATCH_GET_LIMIT));
    await Promise.all(chunks.map((chunk) => this.#batchGet(chunk, found)));
    return keys.map((key) => this.#isSeen(found.get(key), now));
  }

  async #batchGet(keys: string[], found: Map<string, Item>): Promise<void> {
    const first: Item[] = keys.map((key) => ({ [this.keyAttribute]: { S: key } }));
    await this.#untilProcessed("seenMany", "key(s)", first, async (pending) => {
      const answer = await this.client.send(
        new BatchGetItemCommand({
          RequestItems: {
            [this.table]: {
              Keys: pending,
              ConsistentRead: true,
              ProjectionExpression: "#k, #s, #r",
              ExpressionAttributeNames: { "#k": this.keyAttribute, "#s": NAMES["#s"], "#r": NAMES["#r"] },
            },
          },
        }),
      );
      for (const item of answer.Responses?.[this.table] ?? []) {
        const key = item[this.keyAttribute]?.S;
        if (key !== undefined) found.set(key, item);
      }
      return answer.UnprocessedKeys?.[this.table]?.Keys ?? [];
    });
  }

  async forget(id: string): Promise<void> {
    const key = await this.#key(id);
    try {
      await this.client.send(new DeleteItemCommand({ TableName: this.table, Key: { [this.keyAttribute]: { S: key } } }));
    } catch (error) {
      throw this.#fail("forget", error);
    }
  }
}

/** Exponential backoff with full jitter: 50 ms doubling, capped at 2 s. */
function backoffMs(attempt: number): number {
  const ceiling = Math.min(2000, 50 * 2 ** attempt);
  return Math.floor(ceiling / 2 + Math.random() * (ceiling / 2));
}
