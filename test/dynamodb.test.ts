/**
 * DynamoDBStore on DynamoDB Local (started by test/setup/dynamodb-local.ts): the shared store
 * contract suite (one call), then what only DynamoDB has — one round trip per claim thanks to
 * ALL_OLD, hashed long keys, BatchWriteItem chunking and UnprocessedItems retries, the race of
 * 50 concurrent claims repeated over separate clients, and failures mapped to StoreUnavailableError.
 */
import {
  DynamoDBClient,
  type DynamoDBClientConfig,
  GetItemCommand,
  type WriteRequest,
} from "@aws-sdk/client-dynamodb";
import { beforeAll, describe, expect, inject, it } from "vitest";
import { StoreUnavailableError } from "../src/errors.js";
import { storeKey } from "../src/keys.js";
import {
  DYNAMODB_MAX_KEY_BYTES,
  DynamoDBStore,
  type DynamoDBStoreOptions,
  createIdempotencyTable,
  idempotencyTableDefinition,
} from "../stores/dynamodb.js";
import { freePort, localClientConfig, onEveryRequest } from "../scripts/dynamodb-local.mjs";
import { testStore } from "./store-contract.js";

const endpoint = inject("dynamodbEndpoint");
const table = `idempotency-store-${Date.now().toString(36)}`;

function clientConfig(overrides: DynamoDBClientConfig = {}): DynamoDBClientConfig {
  return localClientConfig(endpoint, overrides);
}

/** Records the name of every HTTP request a client sends (one per attempt). */
function countRequests(client: DynamoDBClient): string[] {
  const sent: string[] = [];
  onEveryRequest(client, (name) => sent.push(name));
  return sent;
}

let namespaceCounter = 0;
function store(options: Partial<DynamoDBStoreOptions> = {}): DynamoDBStore {
  namespaceCounter += 1;
  return new DynamoDBStore({ table, namespace: `ddb-${namespaceCounter}`, clientConfig: clientConfig(), ...options });
}

beforeAll(async () => {
  await createIdempotencyTable(new DynamoDBClient(clientConfig()), idempotencyTableDefinition(table));
});

testStore("DynamoDBStore", {
  claims: true,
  clock: "real",
  raceRounds: 20,
  make: ({ namespace, leaseMs, retentionMs }) =>
    new DynamoDBStore({ table, namespace, leaseMs, retentionMs, clientConfig: clientConfig() }),
});

describe("DynamoDBStore on DynamoDB Local", () => {
  it("decides every claim in ONE request: new, in-flight and done all answer from the conditional put", async () => {
    const client = new DynamoDBClient(clientConfig());
    const sent = countRequests(client);
    const s = store({ client });
    expect((await s.claim("one")).status).toBe("claimed");
    expect(sent).toEqual(["PutItemCommand"]);
    const parked = await s.claim("one", 60_000);
    expect(parked.status).toBe("in-flight");
    if (parked.status === "in-flight") expect(parked.retryAfterMs).toBeGreaterThan(30_000);
    await s.remember("one");
    sent.length = 0;
    expect(await s.claim("one")).toEqual({ status: "done" });
    expect(sent).toEqual(["PutItemCommand"]);
    sent.length = 0;
    const answers = await s.claimMany(["one", "two", "three"]);
    expect(answers.map((a) => a.status)).toEqual(["done", "claimed", "claimed"]);
    expect(sent).toEqual(["PutItemCommand", "PutItemCommand", "PutItemCommand"]);
  });

  it("falls back to one consistent GetItem only when the failed put returned no item (mock: strips ALL_OLD, as dynalite does)", async () => {
    const client = new DynamoDBClient(clientConfig());
    client.middlewareStack.add(
      (next) => async (args) => {
        try {
          return await next(args);
        } catch (error) {
          if (error instanceof Error && "Item" in error) delete (error as { Item?: unknown }).Item;
          throw error;
        }
      },
      { step: "initialize", name: "stripAllOld" },
    );
    const sent = countRequests(client);
    const s = store({ client });
    await s.remember("d");
    await s.claim("f");
    sent.length = 0;
    expect(await s.claim("d")).toEqual({ status: "done" });
    expect(sent).toEqual(["PutItemCommand", "GetItemCommand"]);
    expect((await s.claim("f")).status).toBe("in-flight");
  });

  it("writes one item per key: status, token, lease, retention and a TTL in epoch seconds", async () => {
    const s = store();
    const read = async (id: string) =>
      (
        await s.client.send(
          new GetItemCommand({ TableName: table, Key: { pk: { S: await storeKey(s.namespace, id, DYNAMODB_MAX_KEY_BYTES) } }, ConsistentRead: true }),
        )
      ).Item;
    const before = Date.now();
    const claim = await s.claim("item", 30_000);
    const inFlight = await read("item");
    expect(inFlight?.status?.S).toBe("in-flight");
    if (claim.status === "claimed") expect(inFlight?.token?.S).toBe(claim.token);
    expect(Number(inFlight?.leaseUntil?.N)).toBeGreaterThanOrEqual(before + 30_000);
    expect(Number(inFlight?.ttl?.N)).toBe(Math.ceil(Number(inFlight?.leaseUntil?.N) / 1000));
    await s.remember("item");
    const done = await read("item");
    expect(done?.status?.S).toBe("done");
    expect(done?.token).toBeUndefined();
    expect(Number(done?.retainUntil?.N)).toBeGreaterThanOrEqual(before + s.retentionMs);
    expect(Number(done?.ttl?.N)).toBe(Math.ceil(Number(done?.retainUntil?.N) / 1000));
  });

  it("enforces expiry itself, whatever the TTL sweep has not deleted yet", async () => {
    const s = store({ retentionMs: 200, leaseMs: 200 });
    await s.remember("expired");
    await s.claim("lease");
    await new Promise((r) => setTimeout(r, 300));
    // The items are still in the table (DynamoDB Local never sweeps), yet they no longer count.
    expect(await s.seen("expired")).toBe(false);
    expect((await s.claim("expired")).status).toBe("claimed");
    expect((await s.claim("lease")).status).toBe("claimed");
  });

  it("hashes keys past DynamoDB's 2048-byte limit and keeps ids that fit verbatim", async () => {
    const s = store({ namespace: "hash-ns" });
    const head = "hash-ns:";
    const fits = "f".repeat(DYNAMODB_MAX_KEY_BYTES - head.length);
    const over = `${fits}f`;
    expect(await storeKey(s.namespace, fits, DYNAMODB_MAX_KEY_BYTES)).toBe(head + fits);
    const hashed = await storeKey(s.namespace, over, DYNAMODB_MAX_KEY_BYTES);
    expect(hashed).toMatch(/^hash-ns:#[A-Za-z0-9_-]{43}$/);
    for (const id of [fits, over, "é".repeat(5000), "x".repeat(400_000)]) {
      expect((await s.claim(id)).status).toBe("claimed");
      await s.remember(id);
      expect(await s.seen(id)).toBe(true);
    }
    expect(await s.seen(`${over}f`)).toBe(false);
    await s.forget(over);
    expect(await s.seen(over)).toBe(false);
    expect(await s.seen(fits)).toBe(true);
  });

  it("commits in BatchWriteItem chunks of 25, each key once", async () => {
    const client = new DynamoDBClient(clientConfig());
    const sent = countRequests(client);
    const s = store({ client });
    const ids = Array.from({ length: 60 }, (_, i) => `chunk-${i}`);
    await s.rememberMany([...ids, ...ids.slice(0, 5)]);
    expect(sent).toEqual(["BatchWriteItemCommand", "BatchWriteItemCommand", "BatchWriteItemCommand"]);
    expect(await s.seenMany(ids)).toEqual(ids.map(() => true));
  });

  it("resends UnprocessedItems with backoff until all are written (mock: throttling DynamoDB Local cannot produce)", async () => {
    const client = new DynamoDBClient(clientConfig());
    let throttled = 0;
    // The first two BatchWriteItem calls write only half of what they carry and hand back the rest
    // as UnprocessedItems, as DynamoDB does under throttling. The written half goes to the real backend.
    client.middlewareStack.add(
      (next, context) => async (args) => {
        const input = args.input as { RequestItems?: Record<string, WriteRequest[]> };
        if (context.commandName !== "BatchWriteItemCommand" || throttled >= 2 || input.RequestItems === undefined) return next(args);
        throttled += 1;
        const requests = input.RequestItems[table] ?? [];
        const half = Math.ceil(requests.length / 2);
        const result = await next({ ...args, input: { RequestItems: { [table]: requests.slice(0, half) } } });
        (result.output as { UnprocessedItems?: Record<string, WriteRequest[]> }).UnprocessedItems = { [table]: requests.slice(half) };
        return result;
      },
      { step: "initialize", name: "throttle" },
    );
    const sent = countRequests(client);
    const s = store({ client });
    const ids = Array.from({ length: 20 }, (_, i) => `unprocessed-${i}`);
    await s.rememberMany(ids);
    expect(throttled).toBe(2);
    expect(sent.filter((name) => name === "BatchWriteItemCommand")).toHaveLength(3);
    expect(await s.seenMany(ids)).toEqual(ids.map(() => true));
  });

  it("fails with StoreUnavailableError when items stay unprocessed (mock: permanent throttling)", async () => {
    const client = new DynamoDBClient(clientConfig());
    client.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName !== "BatchWriteItemCommand") return next(args);
        const input = args.input as { RequestItems: Record<string, WriteRequest[]> };
        return { response: {}, output: { UnprocessedItems: input.RequestItems, $metadata: {} } };
      },
      { step: "initialize", name: "throttleForever" },
    );
    const s = store({ client, maxUnprocessedRetries: 2 });
    const error = await s.rememberMany(["a", "b"]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect(String((error as Error).message)).toContain("still unprocessed after 3 attempts");
  });

  it("gives exactly one claim of 50 concurrent ones from 5 separate clients, 20 rounds", async () => {
    const namespace = `race-${Date.now()}`;
    const stores = Array.from({ length: 5 }, () => new DynamoDBStore({ table, namespace, clientConfig: clientConfig() }));
    for (let round = 0; round < 20; round += 1) {
      const id = `contested-${round}`;
      const claims = await Promise.all(
        Array.from({ length: 50 }, (_, i) => {
          const s = stores[i % stores.length] as DynamoDBStore;
          return i % 3 === 0 ? s.claimMany([`other-${round}-${i}`, id]).then((answers) => answers[1]) : s.claim(id);
        }),
      );
      const statuses = claims.map((claim) => claim?.status);
      expect(statuses.filter((s) => s === "claimed"), `round ${round}`).toHaveLength(1);
      expect(statuses.filter((s) => s === "in-flight"), `round ${round}`).toHaveLength(49);
    }
  });

  it("answers copies of one id in one claimMany like consecutive claims", async () => {
    const s = store();
    const answers = await s.claimMany(["dup", "dup", "solo"]);
    expect(answers.map((a) => a.status)).toEqual(["claimed", "in-flight", "claimed"]);
  });

  it("releases what claimMany won when another claim of the call fails (mock: one put fails)", async () => {
    const client = new DynamoDBClient(clientConfig());
    client.middlewareStack.add(
      (next, context) => async (args) => {
        const input = args.input as { Item?: { pk?: { S?: string } } };
        if (context.commandName === "PutItemCommand" && input.Item?.pk?.S?.endsWith(":boom")) {
          throw Object.assign(new Error("simulated"), { name: "InternalServerError" });
        }
        return next(args);
      },
      { step: "initialize", name: "failOne" },
    );
    const s = store({ client });
    const error = await s.claimMany(["won-1", "boom", "won-2"]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreUnavailableError);
    const plain = new DynamoDBStore({ table, namespace: s.namespace, clientConfig: clientConfig() });
    expect((await plain.claim("won-1")).status).toBe("claimed");
    expect((await plain.claim("won-2")).status).toBe("claimed");
  });

  it("maps an unreachable endpoint to StoreUnavailableError without leaking the token", async () => {
    const port = await freePort();
    const s = store({ clientConfig: clientConfig({ endpoint: `http://127.0.0.1:${port}`, maxAttempts: 1 }) });
    for (const call of [() => s.claim("x"), () => s.seen("x"), () => s.remember("x"), () => s.forget("x"), () => s.release("x", "secret-token"), () => s.rememberMany(["x"]), () => s.seenMany(["x"])]) {
      const error = await call().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect((error as StoreUnavailableError).store).toBe("DynamoDBStore");
      expect((error as Error).message).not.toContain("secret-token");
      expect((error as Error).cause).toBeDefined();
    }
  });

  it("reports a missing table as StoreUnavailableError", async () => {
    const s = store({ table: "no-such-table" });
    const error = await s.claim("x").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect((error as Error).message).toContain("ResourceNotFoundException");
  });

  it("validates its options", () => {
    expect(() => new DynamoDBStore({ table: "" })).toThrow(/table/);
    expect(() => new DynamoDBStore({ table, namespace: "a:b" })).toThrow(/namespace/);
    expect(() => new DynamoDBStore({ table, leaseMs: 0 })).toThrow(/leaseMs/);
    expect(() => new DynamoDBStore({ table, keyAttribute: "status" })).toThrow(/keyAttribute/);
    expect(() => new DynamoDBStore({ table, ttlAttribute: "bad name" })).toThrow(/ttlAttribute/);
  });

  it("works with custom key and TTL attribute names on a table defined for them", async () => {
    const custom = `${table}-custom`;
    const client = new DynamoDBClient(clientConfig());
    const names = { keyAttribute: "id", ttlAttribute: "expires_at" };
    await createIdempotencyTable(client, idempotencyTableDefinition(custom, names));
    const s = new DynamoDBStore({ table: custom, client, ...names });
    expect((await s.claim("c")).status).toBe("claimed");
    await s.rememberMany(["c"]);
    expect(await s.seenMany(["c", "d"])).toEqual([true, false]);
    expect(await s.claim("c")).toEqual({ status: "done" });
  });
});
