/**
 * DynamoDBStore on DynamoDB Local (started by test/setup/dynamodb-local.ts): the shared store
 * contract suite (one call), then what only DynamoDB has — one round trip per claim thanks to
 * ALL_OLD, hashed long keys, BatchWriteItem chunking and UnprocessedItems retries, the race of
 * 50 concurrent claims repeated over separate clients, failures mapped to StoreUnavailableError,
 * the fingerprint attribute, and the claim precheck (one BatchGetItem before the puts) with exact
 * request counts for each side of its trade.
 */
import {
  DescribeTableCommand,
  DynamoDBClient,
  type DynamoDBClientConfig,
  GetItemCommand,
  PutItemCommand,
  type WriteRequest,
} from "@aws-sdk/client-dynamodb";
import { beforeAll, describe, expect, inject, it } from "vitest";
import { PartialStepError, StoreUnavailableError } from "../../../src/errors.js";
import { storeKey } from "../../../src/store-kit/keys.js";
import {
  DYNAMODB_MAX_KEY_BYTES,
  DynamoDBStore,
  type DynamoDBStoreOptions,
  createIdempotencyTable,
  idempotencyTableDefinition,
} from "../../../entry/dynamodb.js";
import { commandsSent, freePort, localClientConfig, onEveryRequest } from "../../../scripts/dynamodb-local.mjs";
import { WARM_WIDTH_MS, warmedClient } from "../../support/dynamodb-clock.js";
import { testStore } from "../contract.js";

const endpoint = inject("dynamodbEndpoint");
const table = `idempotency-store-${Date.now().toString(36)}`;

function clientConfig(overrides: DynamoDBClientConfig = {}): DynamoDBClientConfig {
  return localClientConfig(endpoint, overrides);
}

let namespaceCounter = 0;
function store(options: Partial<DynamoDBStoreOptions> = {}): DynamoDBStore {
  namespaceCounter += 1;
  return new DynamoDBStore({ table, namespace: `ddb-${namespaceCounter}`, clientConfig: clientConfig(), ...options });
}

/** A client whose clock estimate is already narrow (test/support/dynamodb-clock.ts): for the tests of short windows. */
let warm: DynamoDBClient;

beforeAll(async () => {
  await createIdempotencyTable(new DynamoDBClient(clientConfig()), idempotencyTableDefinition(table));
  warm = await warmedClient(endpoint, table);
});

testStore("DynamoDBStore", {
  claims: true,
  clock: "real",
  raceRounds: 20,
  skip: {
    "commit-keeps-fingerprint":
      "a batch commit is a blind BatchWriteItem Put (no conditions, no updates): it stores the fingerprint it is given, and the engine always gives the message's",
  },
  // One warmed client: the suite times 300 ms leases, which a cold store pads by up to 1.5 s (claim.ts).
  make: ({ namespace, leaseMs, retentionMs }) => new DynamoDBStore({ table, namespace, leaseMs, retentionMs, client: warm }),
});

describe("DynamoDBStore on DynamoDB Local", () => {
  it("decides every claim in ONE request: new, in-flight and done all answer from the conditional put", async () => {
    const client = new DynamoDBClient(clientConfig());
    const sent = commandsSent(client);
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
    const sent = commandsSent(client);
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
    const s = store({ client: warm, retentionMs: 200, leaseMs: 200 });
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
    const sent = commandsSent(client);
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
    const sent = commandsSent(client);
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

  it("a chunk that fails, or an item that stays unprocessed, fails only its own ids: a PartialStepError, and the rest stays written (mock: throttling)", async () => {
    const ids = Array.from({ length: 40 }, (_, i) => `part-${i}`);
    const names = (requests: WriteRequest[]) => requests.map((request) => JSON.stringify(request));
    const holds = (requests: WriteRequest[], id: string) => names(requests).some((name) => name.includes(`:${id}"`));
    const client = new DynamoDBClient(clientConfig({ maxAttempts: 1 }));
    client.middlewareStack.add(
      (next, context) => async (args) => {
        const input = args.input as { RequestItems?: Record<string, WriteRequest[]> };
        const requests = input.RequestItems?.[table];
        if (context.commandName !== "BatchWriteItemCommand" || requests === undefined) return next(args);
        // The second chunk (ids 25-39) is throttled as a whole, after the SDK's own retries.
        if (holds(requests, "part-30")) {
          throw Object.assign(new Error("Rate of requests exceeds the allowed throughput"), { name: "ProvisionedThroughputExceededException", $metadata: { httpStatusCode: 400 } });
        }
        // In the first chunk, part-3 is never processed: the rest is written for real.
        const stuck = requests.filter((request) => holds([request], "part-3"));
        const rest = requests.filter((request) => !stuck.includes(request));
        if (rest.length === 0) return { response: {}, output: { UnprocessedItems: { [table]: stuck }, $metadata: {} } } as never;
        const result = await next({ ...args, input: { RequestItems: { [table]: rest } } });
        (result.output as { UnprocessedItems?: Record<string, WriteRequest[]> }).UnprocessedItems = stuck.length > 0 ? { [table]: stuck } : {};
        return result;
      },
      { step: "initialize", name: "partlyThrottled" },
    );
    const s = store({ client, maxUnprocessedRetries: 1 });
    const error = await s.rememberMany(ids).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PartialStepError);
    const errors = (error as PartialStepError).errors;
    const unwritten = ids.filter((_, i) => errors[i] !== undefined);
    expect(unwritten).toEqual(["part-3", ...ids.slice(25)]);
    expect((errors[3] as Error).message).toContain("still unprocessed after 2 attempts");
    expect((errors[30] as Error).message).toContain("ProvisionedThroughputExceededException");
    expect(await s.seenMany(ids)).toEqual(ids.map((id) => !unwritten.includes(id)));
    // Only unwritten ids: the step's own error, as one.
    const whole = await s.rememberMany(ids.slice(25)).catch((e: unknown) => e);
    expect(whole).toBeInstanceOf(StoreUnavailableError);
    expect(whole).not.toBeInstanceOf(PartialStepError);
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

  it("answers a failed claim of claimMany alone and keeps the others (mock: one put fails with a 500, as no real backend will on cue)", async () => {
    const client = new DynamoDBClient(clientConfig({ maxAttempts: 1 }));
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
    const sent = commandsSent(client);
    const s = store({ client });
    const answers = await s.claimMany(["won-1", "boom", "won-2"]);
    expect(answers.map((a) => a.status)).toEqual(["claimed", "failed", "claimed"]);
    const failed = answers[1];
    if (failed?.status !== "failed") throw new Error("expected failed");
    expect(failed.error).toBeInstanceOf(StoreUnavailableError);
    expect((failed.error as Error).message).toContain("InternalServerError");
    // A 500 leaves it unknown whether the put landed: the store deleted its claim, fenced by its token.
    expect(sent.filter((name) => name === "DeleteItemCommand")).toHaveLength(1);
    const plain = new DynamoDBStore({ table, namespace: s.namespace, clientConfig: clientConfig() });
    expect((await plain.claim("won-1")).status).toBe("in-flight");
    expect((await plain.claim("won-2")).status).toBe("in-flight");
    expect((await plain.claim("boom")).status).toBe("claimed");
  });

  it("puts again after a TransactionConflictException — the item is in its owner's commit transaction — and answers what the put then meets; in-flight if the conflict outlasts the puts (mock: DynamoDB Local never raises it)", async () => {
    const conflicting = (times: number) => {
      const client = new DynamoDBClient(clientConfig({ maxAttempts: 1 }));
      let conflicts = 0;
      const sent: string[] = [];
      client.middlewareStack.add(
        (next, context) => async (args) => {
          sent.push(context.commandName as string);
          if (context.commandName !== "PutItemCommand" || conflicts >= times) return next(args);
          conflicts += 1;
          // DynamoDB's answer to a single-item write on an item an ongoing TransactWriteItems includes: nothing written.
          throw Object.assign(new Error("Transaction is ongoing for the item"), { name: "TransactionConflictException", $metadata: { httpStatusCode: 400, attempts: 1 } });
        },
        { step: "initialize", name: "conflict" },
      );
      return { client, sent, conflicts: () => conflicts };
    };
    const owner = store();
    await owner.remember("committed");
    // Two conflicts, then the put meets the committed item: a duplicate, not a store error.
    const twice = conflicting(2);
    const duplicate = store({ client: twice.client, namespace: owner.namespace });
    expect(await duplicate.claimMany(["committed"])).toEqual([{ status: "done" }]);
    expect(twice.conflicts()).toBe(2);
    expect(twice.sent).toEqual(["PutItemCommand", "PutItemCommand", "PutItemCommand"]);
    // The conflict outlasts the three puts: in flight (parked briefly), nothing deleted, nothing held.
    const always = conflicting(100);
    const parked = store({ client: always.client, namespace: owner.namespace });
    expect(await parked.claimMany(["fresh"])).toEqual([{ status: "in-flight", retryAfterMs: 1_000 }]);
    expect(always.sent).toEqual(["PutItemCommand", "PutItemCommand", "PutItemCommand"]);
    expect((await owner.claim("fresh")).status).toBe("claimed");
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

describe("DynamoDBStore fingerprints and inspect", () => {
  it("stores the claim's fingerprint and answers it from the failed put (ALL_OLD), still one request", async () => {
    const client = new DynamoDBClient(clientConfig());
    const sent = commandsSent(client);
    const s = store({ client });
    expect((await s.claim("f", 60_000, "fp-1")).status).toBe("claimed");
    sent.length = 0;
    const held = await s.claim("f", 60_000, "fp-2");
    expect(held).toMatchObject({ status: "in-flight", fingerprint: "fp-1" });
    expect(sent).toEqual(["PutItemCommand"]);
    await s.rememberMany(["f", "g"], ["fp-1", undefined]);
    sent.length = 0;
    expect(await s.claim("f")).toEqual({ status: "done", fingerprint: "fp-1" });
    expect(await s.claim("g")).toEqual({ status: "done" });
    expect(sent).toEqual(["PutItemCommand", "PutItemCommand"]);
    await s.remember("h", "fp-h");
    expect(await s.claimMany(["h", "h"])).toEqual([
      { status: "done", fingerprint: "fp-h" },
      { status: "done", fingerprint: "fp-h" },
    ]);
  });

  it("answers an item written before fingerprints existed without one", async () => {
    const s = store();
    const key = await storeKey(s.namespace, "legacy", DYNAMODB_MAX_KEY_BYTES);
    const retainUntil = Date.now() + 60_000;
    await s.client.send(
      new PutItemCommand({
        TableName: table,
        Item: { pk: { S: key }, status: { S: "done" }, retainUntil: { N: String(retainUntil) }, ttl: { N: String(Math.ceil(retainUntil / 1000)) } },
      }),
    );
    expect(await s.claim("legacy", undefined, "fp-new")).toEqual({ status: "done" });
    expect(await s.inspect("legacy")).toMatchObject({ status: "done" });
    expect((await s.inspect("legacy"))?.fingerprint).toBeUndefined();
  });

  it("inspects with one consistent GetItem: in flight, done, expired and absent", async () => {
    const sent = commandsSent(warm);
    const s = store({ client: warm, retentionMs: 60_000 });
    await s.claim("i", 30_000, "fp-i");
    sent.length = 0;
    const inFlight = await s.inspect("i");
    expect(sent).toEqual(["GetItemCommand"]);
    expect(inFlight).toMatchObject({ status: "in-flight", fingerprint: "fp-i" });
    expect(inFlight?.leaseLeftMs).toBeGreaterThan(20_000);
    // Counted on the earliest DynamoDB's clock can read: up to the estimate's width over the lease.
    expect(inFlight?.leaseLeftMs).toBeLessThanOrEqual(30_000 + WARM_WIDTH_MS);
    await s.remember("i", "fp-i");
    const done = await s.inspect("i");
    expect(done).toMatchObject({ status: "done", fingerprint: "fp-i" });
    expect(done?.retentionLeftMs).toBeGreaterThan(50_000);
    expect(await s.inspect("never-seen")).toBeNull();
    const short = store({ client: warm, leaseMs: 100 });
    await short.claim("gone");
    await new Promise((r) => setTimeout(r, 200));
    expect(await short.inspect("gone")).toBeNull();
  });

  it("rejects a fingerprint that is not a string of 1-64 characters, and a fingerprints array of the wrong length", async () => {
    const s = store();
    await expect(s.claim("x", undefined, "f".repeat(65))).rejects.toThrow(/fingerprint/);
    await expect(s.claimMany(["x", "y"], undefined, ["a"])).rejects.toThrow(/fingerprints/);
    await expect(s.rememberMany(["x"], [42 as unknown as string])).rejects.toThrow(/fingerprint/);
  });
});

describe("DynamoDBStore claim precheck: one BatchGetItem before the puts", () => {
  const ids = (tag: string, n = 10) => Array.from({ length: n }, (_, i) => `${tag}-${i}`);
  const flags = (n: number, value: boolean) => Array.from({ length: n }, () => value);

  /** A store on a counting client, with `committed` ids already done (under fingerprint `fp-<id>`). */
  async function primed(options: Partial<DynamoDBStoreOptions>, committed: string[]) {
    // The warmed client: some of these tests time 150 ms windows. Each test counts from its own counter.
    const sent = commandsSent(warm);
    const s = store({ client: warm, ...options });
    if (committed.length > 0) await s.rememberMany(committed, committed.map((id) => `fp-${id}`));
    sent.length = 0;
    return { s, sent };
  }

  it("auto: a redelivered batch of 10 committed ids costs ONE request (was 10 PutItem)", async () => {
    const batch = ids("dup");
    const { s, sent } = await primed({}, batch);
    const answers = await s.claimMany(batch, undefined, batch.map((id) => `fp-${id}`), { redelivered: flags(10, true) });
    expect(sent).toEqual(["BatchGetItemCommand"]);
    expect(answers).toEqual(batch.map((id) => ({ status: "done", fingerprint: `fp-${id}` })));
  });

  it("auto: a batch of 10 first deliveries costs what it always did: 10 PutItem + 1 BatchWriteItem", async () => {
    const batch = ids("new");
    const { s, sent } = await primed({}, []);
    const answers = await s.claimMany(batch, undefined, batch.map((id) => `fp-${id}`), { redelivered: flags(10, false) });
    expect(answers.every((a) => a.status === "claimed")).toBe(true);
    await s.rememberMany(batch, batch.map((id) => `fp-${id}`));
    expect(sent.filter((name) => name === "PutItemCommand")).toHaveLength(10);
    expect(sent.filter((name) => name !== "PutItemCommand")).toEqual(["BatchWriteItemCommand"]);
  });

  it("auto: a mixed batch reads only its redeliveries and puts only what the read shows claimable", async () => {
    const done = ids("mix-done", 4);
    const held = ids("mix-held", 2);
    const retried = ids("mix-retried", 2); // redelivered after a failure: the claim was released, nothing stored
    const fresh = ids("mix-new", 2);
    const { s, sent } = await primed({}, done);
    await s.claimMany(held, 60_000, held.map((id) => `fp-${id}`));
    sent.length = 0;
    const batch = [...done, ...held, ...retried, ...fresh];
    const redelivered = batch.map((id) => !id.startsWith("mix-new"));
    const answers = await s.claimMany(batch, undefined, batch.map((id) => `fp-${id}`), { redelivered });
    // 1 read of the 8 redeliveries + 4 puts (2 retried + 2 first deliveries), instead of 10 puts.
    expect(sent.filter((name) => name === "BatchGetItemCommand")).toHaveLength(1);
    expect(sent.filter((name) => name === "PutItemCommand")).toHaveLength(4);
    expect(sent).toHaveLength(5);
    expect(answers.slice(0, 4)).toEqual(done.map((id) => ({ status: "done", fingerprint: `fp-${id}` })));
    for (const [i, answer] of answers.slice(4, 6).entries()) {
      expect(answer).toMatchObject({ status: "in-flight", fingerprint: `fp-${held[i]}` });
      if (answer.status === "in-flight") expect(answer.retryAfterMs).toBeGreaterThan(30_000);
    }
    expect(answers.slice(6).map((a) => a.status)).toEqual(["claimed", "claimed", "claimed", "claimed"]);
  });

  it("auto: one redelivered id, or no hints at all, is not worth a read", async () => {
    const batch = ids("one-redelivered", 3);
    const { s, sent } = await primed({}, batch);
    await s.claimMany(batch, undefined, undefined, { redelivered: [true, false, false] });
    expect(sent).toEqual(["PutItemCommand", "PutItemCommand", "PutItemCommand"]);
    sent.length = 0;
    await s.claimMany(batch);
    expect(sent).toEqual(["PutItemCommand", "PutItemCommand", "PutItemCommand"]);
  });

  it("always: reads every id even without hints (10 duplicates: 1 request; 10 new: 1 read + 10 puts)", async () => {
    const dups = ids("always-dup");
    const { s, sent } = await primed({ precheck: "always" }, dups);
    expect((await s.claimMany(dups)).every((a) => a.status === "done")).toBe(true);
    expect(sent).toEqual(["BatchGetItemCommand"]);
    sent.length = 0;
    expect((await s.claimMany(ids("always-new"))).every((a) => a.status === "claimed")).toBe(true);
    expect(sent.filter((name) => name === "BatchGetItemCommand")).toHaveLength(1);
    expect(sent.filter((name) => name === "PutItemCommand")).toHaveLength(10);
  });

  it("never: 10 redelivered duplicates are decided by 10 PutItem, as before", async () => {
    const batch = ids("never-dup");
    const { s, sent } = await primed({ precheck: "never" }, batch);
    const answers = await s.claimMany(batch, undefined, undefined, { redelivered: flags(10, true) });
    expect(answers.every((a) => a.status === "done")).toBe(true);
    expect(sent).toEqual(flags(10, true).map(() => "PutItemCommand"));
  });

  it("claims what the read shows with an expired lease or retention (the conditional put decides)", async () => {
    const expired = ids("expired-done", 3);
    const lapsed = ids("expired-lease", 3);
    const { s, sent } = await primed({ retentionMs: 150, leaseMs: 150 }, expired);
    await s.claimMany(lapsed);
    await new Promise((r) => setTimeout(r, 250));
    sent.length = 0;
    const batch = [...expired, ...lapsed];
    const answers = await s.claimMany(batch, undefined, undefined, { redelivered: flags(6, true) });
    expect(answers.map((a) => a.status)).toEqual(flags(6, true).map(() => "claimed"));
    expect(sent.filter((name) => name === "BatchGetItemCommand")).toHaveLength(1);
    expect(sent.filter((name) => name === "PutItemCommand")).toHaveLength(6);
  });

  it("answers copies of one id in a prechecked call like consecutive claims", async () => {
    const { s } = await primed({}, ["copy-done"]);
    const answers = await s.claimMany(["copy-done", "copy-done", "copy-new", "copy-new"], undefined, ["a", "b", "c", "d"], {
      redelivered: [true, true, true, false],
    });
    expect(answers).toEqual([
      { status: "done", fingerprint: "fp-copy-done" },
      { status: "done", fingerprint: "fp-copy-done" },
      expect.objectContaining({ status: "claimed" }),
      expect.objectContaining({ status: "in-flight", fingerprint: "c" }),
    ]);
  });

  it("falls back to the puts when the read fails (mock: BatchGetItem throws, as under an outage of reads only)", async () => {
    const client = new DynamoDBClient(clientConfig({ maxAttempts: 1 }));
    client.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName === "BatchGetItemCommand") throw Object.assign(new Error("simulated"), { name: "InternalServerError" });
        return next(args);
      },
      { step: "initialize", name: "failReads" },
    );
    const sent = commandsSent(client);
    const s = store({ client });
    await s.rememberMany(["rf-1", "rf-2"]);
    sent.length = 0;
    const answers = await s.claimMany(["rf-1", "rf-2", "rf-3"], undefined, undefined, { redelivered: [true, true, true] });
    expect(answers.map((a) => a.status)).toEqual(["done", "done", "claimed"]);
    expect(sent).toEqual(["PutItemCommand", "PutItemCommand", "PutItemCommand"]);
  });

  it("validates the policy", () => {
    expect(() => store({ precheck: "sometimes" as never })).toThrow(/precheck/);
    expect(store().precheck).toBe("auto");
  });
});

describe("the request counter the tests above use (scripts/dynamodb-local.mjs)", () => {
  it("counts a command the SDK retries once per command, and once per HTTP attempt with per: attempt", async () => {
    const client = new DynamoDBClient(clientConfig());
    const commands = commandsSent(client);
    const attempts: string[] = [];
    // Added before the fault, so it sits outside it and sees both attempts.
    onEveryRequest(client, (name) => attempts.push(name));
    let failed = 0;
    client.middlewareStack.add(
      (next) => async (args) => {
        if (failed === 0) {
          failed += 1;
          // A 500 on the first attempt (simulated: DynamoDB Local cannot be made to answer one): the SDK retries it.
          throw Object.assign(new Error("internal server error (simulated)"), { name: "InternalServerError", $fault: "server", $metadata: { httpStatusCode: 500 } });
        }
        return next(args);
      },
      { step: "deserialize", name: "failFirstAttempt" },
    );
    await client.send(new DescribeTableCommand({ TableName: table }));
    expect(failed).toBe(1);
    expect(commands).toEqual(["DescribeTableCommand"]);
    expect(attempts).toEqual(["DescribeTableCommand", "DescribeTableCommand"]);
    expect(() => onEveryRequest(client, () => undefined, { per: "request" as never })).toThrow(/per must be/);
  });
});
