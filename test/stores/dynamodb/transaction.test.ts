/**
 * DynamoDB transactional mode on DynamoDB Local (started by test/setup/dynamodb-local.ts): the
 * handler's actions and the fenced commit of the id in ONE TransactWriteItems — both land or
 * neither; a stale owner writes nothing; the handler's failed conditions come back with their
 * indexes; DynamoDB's limits are refused before anything is sent; effects are counted from the table.
 */
import { CreateTableCommand, DynamoDBClient, GetItemCommand, QueryCommand, type TransactWriteItemsCommandInput } from "@aws-sdk/client-dynamodb";
import { beforeAll, describe, expect, inject, it } from "vitest";
import { testTransactionalStore } from "../transactional-contract.js";
import type { FencedClaim } from "../../../src/contract.js";
import { FenceLostError, InvalidOptionError, StoreUnavailableError, TransactionConditionError } from "../../../src/errors.js";
import { storeKey } from "../../../src/store-kit/keys.js";
import { DYNAMODB_MAX_KEY_BYTES, DynamoDBStore, TransactionalDynamoDBStore, createIdempotencyTable, idempotencyTableDefinition } from "../../../entry/dynamodb.js";
import { type DynamoDBTransaction, type DynamoDBTransactionDeps, transactDynamoDB } from "../../../stores/dynamodb/transaction.js";
import { commandsSent, localClientConfig } from "../../../scripts/dynamodb-local.mjs";
import { warmClock } from "../../support/dynamodb-clock.js";

const endpoint = inject("dynamodbEndpoint");
const suffix = Date.now().toString(36);
const table = `idempotency-tx-${suffix}`;
const effects = `effects-tx-${suffix}`;
const accounts = `accounts-tx-${suffix}`;
const client = new DynamoDBClient(localClientConfig(endpoint));

beforeAll(async () => {
  await createIdempotencyTable(client, idempotencyTableDefinition(table));
  // Stores on `client` know DynamoDB's clock closely: these tests time 100-150 ms leases (test/support/dynamodb-clock.ts).
  await warmClock(client, table);
  await client.send(
    new CreateTableCommand({
      TableName: effects,
      AttributeDefinitions: [{ AttributeName: "messageId", AttributeType: "S" }, { AttributeName: "note", AttributeType: "S" }],
      KeySchema: [{ AttributeName: "messageId", KeyType: "HASH" }, { AttributeName: "note", KeyType: "RANGE" }],
      BillingMode: "PAY_PER_REQUEST",
    }),
  );
  await client.send(
    new CreateTableCommand({
      TableName: accounts,
      AttributeDefinitions: [{ AttributeName: "id", AttributeType: "S" }],
      KeySchema: [{ AttributeName: "id", KeyType: "HASH" }],
      BillingMode: "PAY_PER_REQUEST",
    }),
  );
});

let counter = 0;
/** A store, and the deps its 3-line `transact` method would pass (the same client, table, clock and keys). */
function setup(overrides: Partial<DynamoDBTransactionDeps> = {}) {
  counter += 1;
  const namespace = `tx-${suffix}-${counter}`;
  const storeClient = overrides.client ?? client;
  const store = new DynamoDBStore({ table, namespace, client: storeClient });
  const deps: DynamoDBTransactionDeps = {
    client: storeClient,
    table,
    keyAttribute: store.keyAttribute,
    ttlAttribute: store.ttlAttribute,
    retentionMs: store.retentionMs,
    now: Date.now,
    key: (id) => storeKey(namespace, id, DYNAMODB_MAX_KEY_BYTES),
    ...overrides,
  };
  const transact = (claim: FencedClaim, work: (tx: DynamoDBTransaction) => Promise<void>) => transactDynamoDB(deps, claim, work);
  return { store, deps, transact, namespace };
}

async function owned(store: DynamoDBStore, id: string, leaseMs?: number): Promise<FencedClaim> {
  const claim = await store.claim(id, leaseMs);
  if (claim.status !== "claimed") throw new Error(`expected claimed, got ${claim.status}`);
  return { id, token: claim.token };
}

const putEffect = (tx: DynamoDBTransaction, messageId: string, note: string) =>
  tx.put({ TableName: effects, Item: { messageId: { S: messageId }, note: { S: note } } });

async function effectsOf(messageId: string): Promise<string[]> {
  const { Items } = await client.send(
    new QueryCommand({ TableName: effects, KeyConditionExpression: "messageId = :m", ExpressionAttributeValues: { ":m": { S: messageId } }, ConsistentRead: true }),
  );
  return (Items ?? []).map((item) => item.note?.S as string).sort();
}

describe("DynamoDB transactional mode on DynamoDB Local", () => {
  it("commits the handler's actions and the done record in ONE TransactWriteItems, the claim token as ClientRequestToken", async () => {
    const requestClient = new DynamoDBClient(localClientConfig(endpoint));
    const sent = commandsSent(requestClient);
    let input: TransactWriteItemsCommandInput | undefined;
    requestClient.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName === "TransactWriteItemsCommand") input = args.input as TransactWriteItemsCommandInput;
        return next(args);
      },
      { step: "initialize", name: "captureTransaction" },
    );
    const { store, transact } = setup({ client: requestClient });
    const messageId = `ok-${suffix}`;
    const claim = await owned(store, messageId);
    sent.length = 0;
    await transact({ ...claim, fingerprint: "fp-ok" }, async (tx) => {
      putEffect(tx, messageId, "a");
      putEffect(tx, messageId, "b");
    });
    expect(sent).toEqual(["TransactWriteItemsCommand"]);
    expect(input?.ClientRequestToken).toBe(claim.token);
    expect(input?.TransactItems).toHaveLength(3);
    expect(await effectsOf(messageId)).toEqual(["a", "b"]);
    expect((await store.claim(messageId)).status).toBe("done");
    const key = await storeKey(store.namespace, messageId, DYNAMODB_MAX_KEY_BYTES);
    const { Item } = await client.send(new GetItemCommand({ TableName: table, Key: { pk: { S: key } }, ConsistentRead: true }));
    expect(Item?.status?.S).toBe("done");
    expect(Item?.token).toBeUndefined();
    expect(Item?.fp?.S).toBe("fp-ok");
    expect(Number(Item?.ttl?.N)).toBe(Math.ceil(Number(Item?.retainUntil?.N) / 1000));
  });

  it("sends nothing when the handler throws", async () => {
    const { store, transact } = setup();
    const messageId = `throw-${suffix}`;
    const claim = await owned(store, messageId);
    const failure = new Error("handler failed (scripted)");
    await expect(
      transact(claim, async (tx) => {
        putEffect(tx, messageId, "a");
        throw failure;
      }),
    ).rejects.toBe(failure);
    expect(await effectsOf(messageId)).toEqual([]);
    expect((await store.claim(messageId)).status).toBe("in-flight");
  });

  it("a write the handler did not await throws once the handler returned, instead of being dropped from a committed transaction", async () => {
    const { store, transact } = setup();
    const messageId = `late-${suffix}`;
    const claim = await owned(store, messageId);
    let late: Promise<unknown> | undefined;
    await transact(claim, async (tx) => {
      putEffect(tx, messageId, "a");
      // Forgotten await: the helper writes after the handler has returned.
      // Caught at once: the send may still be in flight when it throws.
      late = new Promise((resolve) => setTimeout(resolve, 0)).then(() => putEffect(tx, messageId, "late")).catch((error: unknown) => error);
    });
    const thrown = await late;
    expect(thrown).toBeInstanceOf(InvalidOptionError);
    expect((thrown as Error).message).toMatch(/used after the handler returned/);
    expect(await effectsOf(messageId)).toEqual(["a"]);
    expect((await store.claim(messageId)).status).toBe("done");
  });

  it("a stale owner (lease over, id re-claimed) writes nothing: FenceLostError", async () => {
    const { store, transact } = setup();
    const messageId = `stale-${suffix}`;
    const stale = await owned(store, messageId, 100);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const next = await owned(store, messageId);
    await expect(transact(stale, async (tx) => void putEffect(tx, messageId, "stale"))).rejects.toBeInstanceOf(FenceLostError);
    expect(await effectsOf(messageId)).toEqual([]);
    await transact(next, async (tx) => void putEffect(tx, messageId, "owner"));
    expect(await effectsOf(messageId)).toEqual(["owner"]);
    // A lease that ran out during the handler, even with nobody re-claiming, fails the fence too.
    const late = await owned(store, `${messageId}-late`, 100);
    await expect(
      transact(late, async (tx) => {
        putEffect(tx, late.id, "late");
        await new Promise((resolve) => setTimeout(resolve, 200));
      }),
    ).rejects.toBeInstanceOf(FenceLostError);
    expect(await effectsOf(late.id)).toEqual([]);
  });

  it("reports the handler's failed conditions with their indexes, and writes nothing", async () => {
    const { store, transact } = setup();
    const messageId = `condition-${suffix}`;
    const claim = await owned(store, messageId);
    const failure = await transact(claim, async (tx) => {
      putEffect(tx, messageId, "a");
      tx.conditionCheck({ TableName: accounts, Key: { id: { S: `missing-${suffix}` } }, ConditionExpression: "attribute_exists(id)" });
      tx.update({
        TableName: accounts,
        Key: { id: { S: `absent-${suffix}` } },
        UpdateExpression: "SET balance = balance - :one",
        ConditionExpression: "balance >= :one",
        ExpressionAttributeValues: { ":one": { N: "1" } },
      });
    }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(TransactionConditionError);
    expect((failure as TransactionConditionError).failed).toEqual([1, 2]);
    expect(await effectsOf(messageId)).toEqual([]);
    expect((await store.claim(messageId)).status).toBe("in-flight");
  });

  it("refuses DynamoDB's limits before sending anything: 100 actions, one action per item (the dedupe item too), 4 MB", async () => {
    const requestClient = new DynamoDBClient(localClientConfig(endpoint));
    const sent = commandsSent(requestClient);
    const { store, transact, namespace } = setup({ client: requestClient });
    const claim = await owned(store, `limits-${suffix}`);
    sent.length = 0;
    const refused = (work: (tx: DynamoDBTransaction) => void) => transact(claim, async (tx) => work(tx)).catch((error: unknown) => error);
    const tooMany = await refused((tx) => {
      for (let i = 0; i < 100; i += 1) putEffect(tx, claim.id, `n-${i}`);
    });
    expect(tooMany).toBeInstanceOf(InvalidOptionError);
    expect(String((tooMany as Error).message)).toMatch(/100 actions.*99 for the handler/);
    const dedupe = await refused((tx) => tx.delete({ TableName: table, Key: { pk: { S: `${namespace}:${claim.id}` } } }));
    expect(String((dedupe as Error).message)).toMatch(/same item as the dedupe item/);
    const dedupePut = await refused((tx) => tx.put({ TableName: table, Item: { pk: { S: `${namespace}:${claim.id}` }, other: { S: "x" } } }));
    expect(String((dedupePut as Error).message)).toMatch(/same item as the dedupe item/);
    const twice = await refused((tx) => {
      tx.update({ TableName: accounts, Key: { id: { S: "same" } }, UpdateExpression: "SET a = :a", ExpressionAttributeValues: { ":a": { N: "1" } } });
      tx.put({ TableName: accounts, Item: { id: { S: "same" }, a: { N: "2" } } });
    });
    expect(String((twice as Error).message)).toMatch(/action 1 targets the same item as action 0/);
    const big = "x".repeat(350 * 1024);
    const tooBig = await refused((tx) => {
      for (let i = 0; i < 12; i += 1) tx.put({ TableName: effects, Item: { messageId: { S: claim.id }, note: { S: `big-${i}` }, body: { S: big } } });
    });
    expect(String((tooBig as Error).message)).toMatch(/4 MB/);
    expect(sent).toEqual([]);
    // Within the limits: 99 actions + the dedupe item in one request.
    await transact(claim, async (tx) => {
      for (let i = 0; i < 99; i += 1) putEffect(tx, claim.id, `n-${String(i).padStart(2, "0")}`);
    });
    expect(sent).toEqual(["TransactWriteItemsCommand"]);
    expect(await effectsOf(claim.id)).toHaveLength(99);
  });

  it("maps DynamoDB's own refusal of the actions (two Puts on one item the checks cannot see) to TransactionConditionError", async () => {
    const { store, transact } = setup();
    const claim = await owned(store, `refused-${suffix}`);
    const failure = await transact(claim, async (tx) => {
      putEffect(tx, claim.id, "same");
      putEffect(tx, claim.id, "same");
    }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(TransactionConditionError);
    expect(String((failure as Error).message)).toMatch(/refused the handler's actions/);
    expect(await effectsOf(claim.id)).toEqual([]);
    expect((await store.claim(claim.id)).status).toBe("in-flight");
  });

  it("a refusal that quotes the handler's values (a string set with a duplicate) does not carry them in its message", async () => {
    const { store, transact } = setup();
    const claim = await owned(store, `quoted-${suffix}`);
    // DynamoDB answers "Input collection [card 4111 1111 1111 1111, card 4111 1111 1111 1111] contains duplicates".
    const card = "card 4111 1111 1111 1111";
    const failure = await transact(claim, async (tx) => {
      tx.put({ TableName: effects, Item: { messageId: { S: claim.id }, note: { S: "set" }, cards: { SS: [card, card] } } });
    }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(TransactionConditionError);
    expect((failure as Error).message).not.toContain("4111");
    expect((failure as Error).message).toMatch(/^transaction not committed: DynamoDB refused the handler's actions \(ValidationException\)/);
    expect(await effectsOf(claim.id)).toEqual([]);
    expect((await store.claim(claim.id)).status).toBe("in-flight");
  });

  it("hashes a claim token longer than 36 characters into the ClientRequestToken", async () => {
    const requestClient = new DynamoDBClient(localClientConfig(endpoint));
    let token: string | undefined;
    requestClient.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName === "TransactWriteItemsCommand") token = (args.input as TransactWriteItemsCommandInput).ClientRequestToken;
        return next(args);
      },
      { step: "initialize", name: "captureToken" },
    );
    const { transact, namespace } = setup({ client: requestClient });
    const store = new DynamoDBStore({ table, namespace, client: requestClient, token: () => `long-token-${"z".repeat(60)}-${Math.random()}` });
    const claim = await owned(store, `long-token-${suffix}`);
    await transact(claim, async (tx) => void putEffect(tx, claim.id, "a"));
    expect(token).toHaveLength(36);
    expect(await effectsOf(claim.id)).toEqual(["a"]);
  });

  it("resends a transaction cancelled by conflicts with a new ClientRequestToken, then gives up (mock: DynamoDB Local does not produce TransactionConflict on demand)", async () => {
    const conflicted = (times: number) => {
      const requestClient = new DynamoDBClient(localClientConfig(endpoint));
      const tokens: string[] = [];
      let failures = 0;
      requestClient.middlewareStack.add(
        (next, context) => async (args) => {
          if (context.commandName !== "TransactWriteItemsCommand") return next(args);
          const input = args.input as TransactWriteItemsCommandInput;
          tokens.push(input.ClientRequestToken as string);
          failures += 1;
          if (failures > times) return next(args);
          const error = Object.assign(new Error("Transaction cancelled"), {
            name: "TransactionCanceledException",
            CancellationReasons: (input.TransactItems ?? []).map((_, i) => ({ Code: i === 0 ? "TransactionConflict" : "None" })),
          });
          throw error;
        },
        { step: "initialize", name: "conflicts" },
      );
      return { requestClient, tokens };
    };
    const twice = conflicted(2);
    const { store, transact } = setup({ client: twice.requestClient });
    const claim = await owned(store, `conflict-${suffix}`);
    await transact(claim, async (tx) => void putEffect(tx, claim.id, "a"));
    expect(twice.tokens).toHaveLength(3);
    expect(new Set(twice.tokens).size).toBe(3);
    expect(twice.tokens[0]).toBe(claim.token);
    expect(await effectsOf(claim.id)).toEqual(["a"]);

    const always = conflicted(100);
    const exhausted = setup({ client: always.requestClient, maxTransactionRetries: 2 });
    const other = await owned(exhausted.store, `conflict-always-${suffix}`);
    const failure = await exhausted.transact(other, async (tx) => void putEffect(tx, other.id, "a")).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(StoreUnavailableError);
    expect(String((failure as Error).message)).toMatch(/TransactionConflict.*3 attempts/);
    expect(await effectsOf(other.id)).toEqual([]);
  });
});

testTransactionalStore<DynamoDBTransaction>("DynamoDBStore", {
  make: (namespace) => new TransactionalDynamoDBStore({ table, namespace, client }),
  write: (tx, id, tag) => void putEffect(tx, id, tag),
  effects: effectsOf,
  raceLeaseMs: 150,
});
