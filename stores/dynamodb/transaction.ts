/**
 * DynamoDB transactional mode: the handler's writes and the commit of the message's id in ONE
 * `TransactWriteItems` (`TransactionalDynamoDBStore.transact` calls `transactDynamoDB`).
 *
 * The handler receives a `DynamoDBTransaction` and ADDS actions to it — Put / Update / Delete /
 * ConditionCheck, on any table of the account and region, in the low-level AttributeValue shape.
 * Nothing is sent while it runs. Then one request carries them plus, LAST, the dedupe item's Update
 * to done, conditioned on "in flight under my token, lease live" (`#s = :inflight AND #t = :token
 * AND #l > :now`, items.ts's `OWNED`; `:now` the earliest DynamoDB's clock can read, clock.ts, and
 * the retention counted from the latest). `ClientRequestToken` is the claim's token (hashed to 36 characters when longer), so
 * the SDK's own retries of a request whose answer was lost cannot apply it twice.
 *
 * Outcomes (`TransactionCanceledException.CancellationReasons`, one per action, in order):
 *   - the dedupe item's `ConditionalCheckFailed` → `FenceLostError` (nothing written);
 *   - another action's `ConditionalCheckFailed` (or `ValidationError`, `ItemCollectionSizeLimitExceeded`)
 *     → `TransactionConditionError` whose `failed` holds the handler's action indexes;
 *   - `TransactionConflict` / `ThrottlingError` / `ProvisionedThroughputExceeded` only → the request is
 *     sent again (new lease check, a derived ClientRequestToken) up to `maxTransactionRetries` times
 *     with backoff, then `StoreUnavailableError`;
 *   - a `ValidationException` (the request refused as a whole: two actions on one item that the checks
 *     below could not see, a malformed expression) → `TransactionConditionError`; any other failure →
 *     `StoreUnavailableError`.
 * DynamoDB's limits are checked before anything is sent, with an `InvalidOptionError` naming the limit:
 * 100 actions (the dedupe item's included), 4 MB of item data, no two actions on one item (the dedupe
 * item included; a Put's key is known when another action names the same table's key, or on the
 * dedupe table).
 *
 * IAM: `dynamodb:TransactWriteItems` is not an IAM action of its own: a transaction is authorized per
 * contained action (PutItem / UpdateItem / DeleteItem / ConditionCheckItem on each table). The dedupe
 * item's commit needs `dynamodb:UpdateItem` on the idempotency table; the handler's actions need theirs.
 *
 * What this is *not*: a read-your-writes transaction. The handler cannot read what it added; reads
 * it makes (GetItem, Query) see the table before the commit.
 */
import {
  type AttributeValue,
  type ConditionCheck,
  type Delete,
  type DynamoDBClient,
  type Put,
  type TransactWriteItem,
  TransactWriteItemsCommand,
  type Update,
} from "@aws-sdk/client-dynamodb";
import type { FencedClaim } from "../../src/contract.js";
import { FenceLostError, InvalidOptionError, StoreUnavailableError, TransactionConditionError } from "../../src/errors.js";
import { storeFailure } from "../../src/store-kit/failures.js";
import { sha256Base64url } from "../../src/store-kit/keys.js";
import { fenceToken } from "../../src/store-kit/tokens.js";
import { DONE, FINGERPRINT, IN_FLIGHT, NAMES, OWNED } from "./items.js";
import type { Send } from "./send.js";

/**
 * The IAM actions transactional mode adds on the idempotency table: the dedupe item's commit is an
 * Update inside the transaction. (There is no `dynamodb:TransactWriteItems` IAM action: each contained
 * action is authorized as its PutItem / UpdateItem / DeleteItem / ConditionCheckItem, per table.)
 */
export const DYNAMODB_TRANSACTION_ACTIONS = ["dynamodb:UpdateItem"] as const;

/** DynamoDB's limits on one TransactWriteItems request. */
export const DYNAMODB_TRANSACTION_LIMITS = { actions: 100, bytes: 4 * 1024 * 1024, clientRequestTokenLength: 36 } as const;

/** What `transactDynamoDB` needs from the store (all of it is `DynamoDBStore`'s own configuration). */
export interface DynamoDBTransactionDeps {
  readonly client: DynamoDBClient;
  /** The idempotency table. */
  readonly table: string;
  /** Its partition key attribute (`pk`). */
  readonly keyAttribute: string;
  /** Its TTL attribute (`ttl`, epoch seconds). */
  readonly ttlAttribute: string;
  /** How long the committed id is remembered. */
  readonly retentionMs: number;
  /** The clock of the lease check, epoch ms (the store's). Used only when `times` is not given. */
  readonly now: () => number;
  /**
   * DynamoDB's clock as the store estimates it (clock.ts): the fence's `:now` (the earliest it can
   * read) and where the retention starts (the latest). `DynamoDBStore` always passes it.
   */
  readonly times?: { conditionNow(): number; deadlineBase(): number };
  /** How to send (the store's bounded, clock-sampling sender). Default: `client.send`. */
  readonly send?: Send;
  /** The partition key value of an id (the store's own key function). */
  readonly key: (id: string) => Promise<string>;
  /** Attribute the claim's fingerprint is kept in. Default `fp`, the store's own (items.ts). */
  readonly fingerprintAttribute?: string;
  /** How many times a transaction cancelled only by conflicts or throttling is sent again. Default 3. */
  readonly maxTransactionRetries?: number;
}

/** Transactions whose handler has returned: their actions are being sent, a later one would be dropped. */
const SENT = new WeakSet<DynamoDBTransaction>();

/** The handler's handle in transactional mode: it collects actions; the commit sends them. */
export class DynamoDBTransaction {
  readonly #items: TransactWriteItem[] = [];

  put(put: Put): this {
    return this.add({ Put: put });
  }

  update(update: Update): this {
    return this.add({ Update: update });
  }

  delete(del: Delete): this {
    return this.add({ Delete: del });
  }

  conditionCheck(check: ConditionCheck): this {
    return this.add({ ConditionCheck: check });
  }

  /**
   * Adds raw `TransactWriteItem`s, in order. Throws `InvalidOptionError` once the handler has returned
   * (a write its handler did not await): the transaction is already on its way without it.
   */
  add(...items: TransactWriteItem[]): this {
    if (SENT.has(this)) throw new InvalidOptionError("tx", "used after the handler returned; its transaction was already sent: await every write before returning");
    this.#items.push(...items);
    return this;
  }

  /** The actions added so far, in order (their index is the one `TransactionConditionError.failed` reports). */
  get items(): readonly TransactWriteItem[] {
    return this.#items;
  }
}

const STORE_NAME = "DynamoDBStore";
const RETRYABLE_REASONS = new Set(["TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"]);
const HANDLER_REASONS = new Set(["ConditionalCheckFailed", "ValidationError", "ItemCollectionSizeLimitExceeded"]);
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Runs `work` on a fresh `DynamoDBTransaction`, then commits its actions and the fenced commit of
 * `claim.id` as one `TransactWriteItems`. See the file header for every outcome.
 */
export async function transactDynamoDB(
  deps: DynamoDBTransactionDeps,
  claim: FencedClaim,
  work: (tx: DynamoDBTransaction) => Promise<void>,
): Promise<void> {
  if (typeof work !== "function") throw new InvalidOptionError("work", "must be a function");
  const token = fenceToken(claim);
  const key = await deps.key(claim.id);
  const tx = new DynamoDBTransaction();
  try {
    await work(tx);
  } finally {
    SENT.add(tx);
  }
  const actions = [...tx.items];
  validate(deps, key, actions);
  const maxRetries = deps.maxTransactionRetries ?? 3;
  for (let attempt = 0; ; attempt += 1) {
    const input = {
      TransactItems: [...actions, { Update: commitUpdate(deps, key, claim) }],
      ClientRequestToken: await requestToken(token, attempt),
    };
    let error: unknown;
    try {
      await sendCommand(deps, () => new TransactWriteItemsCommand(input));
      return;
    } catch (caught) {
      error = caught;
    }
    const codes = cancellationCodes(error);
    if (codes === undefined) {
      // Refused as a whole (two actions on one item the checks could not see, a malformed expression):
      // the handler's actions can never pass as they are.
      if (error instanceof Error && error.name === "ValidationException") {
        // Not DynamoDB's words: they may quote the handler's values ("Input collection [a, a] contains duplicates").
        throw new TransactionConditionError(
          "DynamoDB refused the handler's actions (ValidationException): e.g. two actions on one item, a malformed expression or an invalid value",
          [],
          { cause: error },
        );
      }
      throw unavailable(deps.table, error);
    }
    if (codes[actions.length] === "ConditionalCheckFailed") throw new FenceLostError(claim.id);
    const failed = codes.flatMap((code, index) => (index < actions.length && HANDLER_REASONS.has(code) ? [index] : []));
    if (failed.length > 0) {
      const named = [...new Set(failed.map((index) => codes[index]))].join(", ");
      throw new TransactionConditionError(`action(s) ${failed.join(", ")} of the handler failed (${named})`, failed, { cause: error });
    }
    const retryable = codes.some((code) => RETRYABLE_REASONS.has(code));
    if (!retryable || attempt >= maxRetries) {
      const detail = `TransactionCanceledException (${[...new Set(codes.filter((code) => code !== "None"))].join(", ") || "no reason"})`;
      throw new StoreUnavailableError(STORE_NAME, "transact", `${detail}${retryable ? ` on every one of ${attempt + 1} attempts` : ""} on table ${deps.table}`, { cause: error });
    }
    await sleep(Math.floor(Math.min(1000, 25 * 2 ** attempt) * (0.5 + Math.random())));
  }
}

/** Sends the command; a TransactionInProgressException (our own request still running) waits and resends it as it is. */
async function sendCommand(deps: DynamoDBTransactionDeps, build: () => TransactWriteItemsCommand): Promise<void> {
  for (let wait = 0; ; wait += 1) {
    try {
      if (deps.send !== undefined) await deps.send(build);
      else await deps.client.send(build());
      return;
    } catch (error) {
      if (!(error instanceof Error && error.name === "TransactionInProgressException") || wait >= 5) throw error;
      await sleep(50 * 2 ** wait);
    }
  }
}

/** The dedupe item's Update to done (the layout of items.ts), conditioned on `OWNED`: "in flight under my token, lease live". */
function commitUpdate(deps: DynamoDBTransactionDeps, key: string, claim: FencedClaim): Update {
  // The fence's `:now` is the earliest DynamoDB's clock can read: a lease still live by its clock always
  // passes (the token is what fences a taken-over claim); the retention starts at the latest it can read.
  const now = deps.times === undefined ? deps.now() : deps.times.conditionNow();
  const retainUntil = (deps.times === undefined ? now : deps.times.deadlineBase()) + deps.retentionMs;
  const names: Record<string, string> = { "#s": NAMES["#s"], "#t": NAMES["#t"], "#l": NAMES["#l"], "#r": NAMES["#r"], "#x": deps.ttlAttribute };
  const values: Record<string, AttributeValue> = {
    ":done": { S: DONE },
    ":inflight": { S: IN_FLIGHT },
    ":token": { S: claim.token },
    ":now": { N: String(now) },
    ":retain": { N: String(retainUntil) },
    ":ttl": { N: String(Math.ceil(retainUntil / 1000)) },
  };
  let set = "#s = :done, #r = :retain, #x = :ttl";
  if (claim.fingerprint !== undefined) {
    names["#f"] = deps.fingerprintAttribute ?? FINGERPRINT;
    values[":fp"] = { S: claim.fingerprint };
    set += ", #f = :fp";
  }
  return {
    TableName: deps.table,
    Key: { [deps.keyAttribute]: { S: key } },
    UpdateExpression: `SET ${set} REMOVE #t, #l`,
    ConditionExpression: OWNED,
    ExpressionAttributeNames: names,
    ExpressionAttributeValues: values,
  };
}

/** The claim token when it fits DynamoDB's 36 characters (attempt 0); otherwise, and for resends, a hash. */
async function requestToken(token: string, attempt: number): Promise<string> {
  if (attempt === 0 && token.length <= DYNAMODB_TRANSACTION_LIMITS.clientRequestTokenLength && /^[\x21-\x7e]+$/.test(token)) return token;
  return (await sha256Base64url(attempt === 0 ? token : `${token}#${attempt}`)).slice(0, DYNAMODB_TRANSACTION_LIMITS.clientRequestTokenLength);
}

/** The cancellation reason codes, one per action, or undefined when the error is not a cancellation. */
function cancellationCodes(error: unknown): string[] | undefined {
  if (!(error instanceof Error) || error.name !== "TransactionCanceledException") return undefined;
  const reasons = (error as { CancellationReasons?: { Code?: string }[] }).CancellationReasons;
  return Array.isArray(reasons) ? reasons.map((reason) => reason?.Code ?? "None") : [];
}

function unavailable(table: string, error: unknown): Error {
  return storeFailure(STORE_NAME, "transact", error, { message: false, cause: "original", suffix: `on table ${table}` });
}

type Target = { table: string; key: Record<string, AttributeValue> | undefined; item: Record<string, AttributeValue> | undefined; index: number };

/** DynamoDB's limits, before anything is sent. Throws `InvalidOptionError` naming the limit and the action. */
function validate(deps: DynamoDBTransactionDeps, dedupeKey: string, actions: readonly TransactWriteItem[]): void {
  const { actions: maxActions, bytes: maxBytes } = DYNAMODB_TRANSACTION_LIMITS;
  if (actions.length + 1 > maxActions) {
    throw new InvalidOptionError("transaction", `has ${actions.length} actions; DynamoDB allows ${maxActions} per transaction, the dedupe item's commit included (so ${maxActions - 1} for the handler)`);
  }
  const targets: Target[] = [{ table: deps.table, key: { [deps.keyAttribute]: { S: dedupeKey } }, item: undefined, index: -1 }];
  let bytes = 0;
  actions.forEach((action, index) => {
    const kinds = (["Put", "Update", "Delete", "ConditionCheck"] as const).filter((kind) => action?.[kind] !== undefined);
    if (kinds.length !== 1) throw new InvalidOptionError("transaction", `action ${index} must hold exactly one of Put, Update, Delete, ConditionCheck`);
    const body = action[kinds[0] as "Put"] as Put & { Key?: Record<string, AttributeValue> };
    if (typeof body.TableName !== "string" || body.TableName === "") throw new InvalidOptionError("transaction", `action ${index} has no TableName`);
    bytes += mapSize(body.Item) + mapSize(body.Key) + mapSize(body.ExpressionAttributeValues);
    const target: Target = { table: body.TableName, key: body.Key, item: body.Item, index };
    for (const other of targets) {
      if (sameItem(target, other, deps)) {
        const what = other.index === -1 ? "the dedupe item (the engine commits it in the same transaction)" : `action ${other.index}`;
        throw new InvalidOptionError("transaction", `action ${index} targets the same item as ${what}; DynamoDB allows one action per item in a transaction`);
      }
    }
    targets.push(target);
  });
  if (bytes > maxBytes) throw new InvalidOptionError("transaction", `carries about ${bytes} bytes of item data; DynamoDB allows ${maxBytes} (4 MB) per transaction`);
}

/** Same table and same key — a Put's key read from its item with the other action's key attributes. */
function sameItem(a: Target, b: Target, deps: DynamoDBTransactionDeps): boolean {
  if (a.table !== b.table) return false;
  const keyOf = (target: Target, names: string[]) => (target.key ?? pick(target.item, names));
  const names = Object.keys(b.key ?? a.key ?? (a.table === deps.table ? { [deps.keyAttribute]: 1 } : {}));
  if (names.length === 0) return false;
  const ka = keyOf(a, names);
  const kb = keyOf(b, names);
  if (ka === undefined || kb === undefined) return false;
  const keys = Object.keys(ka);
  return keys.length === Object.keys(kb).length && keys.every((name) => kb[name] !== undefined && JSON.stringify(ka[name]) === JSON.stringify(kb[name]));
}

function pick(item: Record<string, AttributeValue> | undefined, names: string[]): Record<string, AttributeValue> | undefined {
  if (item === undefined || !names.every((name) => item[name] !== undefined)) return undefined;
  return Object.fromEntries(names.map((name) => [name, item[name] as AttributeValue]));
}

const utf8 = new TextEncoder();

/** Approximate DynamoDB size of a map of attributes (names + values), as AWS documents item size. */
function mapSize(map: Record<string, AttributeValue> | undefined): number {
  if (map === undefined) return 0;
  let size = 0;
  for (const [name, value] of Object.entries(map)) size += utf8.encode(name).length + valueSize(value);
  return size;
}

function valueSize(value: AttributeValue): number {
  if (value.S !== undefined) return utf8.encode(value.S).length;
  if (value.N !== undefined) return Math.ceil(value.N.replace(/^-|\.|e.*$/gi, "").length / 2) + 1;
  if (value.B !== undefined) return value.B.length;
  if (value.BOOL !== undefined || value.NULL !== undefined) return 1;
  if (value.SS !== undefined) return value.SS.reduce((sum, s) => sum + utf8.encode(s).length, 0);
  if (value.NS !== undefined) return value.NS.reduce((sum, n) => sum + valueSize({ N: n }), 0);
  if (value.BS !== undefined) return value.BS.reduce((sum, b) => sum + b.length, 0);
  if (value.L !== undefined) return 3 + value.L.reduce((sum, v) => sum + 1 + valueSize(v), 0);
  if (value.M !== undefined) return 3 + mapSize(value.M) + Object.keys(value.M).length;
  return 0;
}
