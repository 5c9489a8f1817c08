/**
 * sqsHandler end to end against DynamoDB Local, on SQS events shaped as Lambda delivers them
 * (messageId, receiptHandle, attributes with ApproximateReceiveCount as a string, eventSourceARN,
 * FIFO attributes on .fifo queues): a redelivery storm, in-flight parks, a throwing handler
 * released and retried, poison and non-envelope bodies, FIFO ordering and blocking, the store
 * unreachable, the lease sized to the invocation, the DynamoDB requests per batch, and the
 * manifest's `sqs.attempts_reconciliation` cases.
 */
import { DynamoDBClient, GetItemCommand } from "@aws-sdk/client-dynamodb";
import type { SQSBatchResponse, SQSEvent, SQSRecord } from "aws-lambda";
import { describe, expect, it } from "vitest";
import type { Envelope } from "../../src/envelope.js";
import type { HandlerContext } from "../../src/engine/index.js";
import { fifoGroupOf, headersOf, redeliveriesOf, type SqsRuntimeContext, sqsHandler } from "../../handlers/lambda-sqs.js";
import { DynamoDBStore, type DynamoDBStoreOptions, type DynamoDBTransaction, TransactionalDynamoDBStore } from "../../entry/dynamodb.js";
import { txOf } from "../../src/transaction.js";
import { commandsSent, freePort } from "../../scripts/dynamodb-local.mjs";
import { STANDARD_QUEUE_ARN, lambdaContext, sqsRecord } from "../../scripts/lambda-events.js";
import { conformanceSkipReason, manifest, nextManifest, sampleBody } from "../support/conformance-data.js";
import { localIdempotencyTable } from "../support/dynamodb-table.js";
import { gateBody, testSchemaGateCases } from "../support/schema-gate.js";
import { throwingOnAccess } from "../support/store-views.js";

const { table, clientConfig, namespace } = localIdempotencyTable("lambda");

function store(options: Partial<DynamoDBStoreOptions> = {}): DynamoDBStore {
  return new DynamoDBStore({ table, namespace: namespace(), clientConfig: clientConfig(), ...options });
}

// ---- SQS events as Lambda delivers them -------------------------------------------------------

const event = (records: SQSRecord[]): SQSEvent => ({ Records: records });
const failedIds = (response: SQSBatchResponse) => response.batchItemFailures.map((f) => f.itemIdentifier);

// ---- tests -------------------------------------------------------------------------------------

describe("sqsHandler on DynamoDB Local", () => {
  it("makes 11 DynamoDB requests for 10 new messages, 1 for 10 redelivered duplicates, 10 for 10 duplicates without the redelivery hint", async () => {
    const client = new DynamoDBClient(clientConfig());
    const sent = commandsSent(client);
    let effects = 0;
    const handler = sqsHandler({ store: store({ client }), handle: () => void (effects += 1) });
    const ids = Array.from({ length: 10 }, (_, i) => `batch-${i}`);
    const fresh = await handler(event(ids.map((id) => sqsRecord(sampleBody(id)))), lambdaContext());
    expect(fresh.batchItemFailures).toEqual([]);
    expect(effects).toBe(10);
    const newBatch = [...sent];
    sent.length = 0;
    const again = await handler(event(ids.map((id) => sqsRecord(sampleBody(id), { receiveCount: "2" }))), lambdaContext());
    expect(again.batchItemFailures).toEqual([]);
    expect(effects).toBe(10);
    const duplicateBatch = [...sent];
    console.info(
      `DynamoDB requests per batch of 10: new = ${newBatch.length} (${tally(newBatch)}), duplicates = ${duplicateBatch.length} (${tally(duplicateBatch)})`,
    );
    expect(newBatch.filter((c) => c === "PutItemCommand")).toHaveLength(10);
    expect(newBatch.filter((c) => c === "BatchWriteItemCommand")).toHaveLength(1);
    expect(newBatch).toHaveLength(11);
    // The engine tells the store these are redeliveries (ApproximateReceiveCount 2): one consistent read decides them.
    expect(duplicateBatch).toEqual(["BatchGetItemCommand"]);
    // Duplicates that look like first deliveries (a producer's second copy) are decided by the claims themselves.
    sent.length = 0;
    const copies = await handler(event(ids.map((id) => sqsRecord(sampleBody(id)))), lambdaContext());
    expect(copies.batchItemFailures).toEqual([]);
    expect(effects).toBe(10);
    expect(sent).toEqual(Array.from({ length: 10 }, () => "PutItemCommand"));
  });

  it("survives a redelivery storm: every id's effect exactly once, across concurrent invocations", async () => {
    const s = store();
    const ids = Array.from({ length: 200 }, (_, i) => `storm-${i}`);
    const effects = new Map<string, number>();
    let flaky = 0;
    const handler = sqsHandler({
      store: s,
      handle: async (_message: Envelope, ctx) => {
        await new Promise((r) => setTimeout(r, Math.random() * 5));
        if (Math.random() < 0.15) {
          flaky += 1;
          throw new Error("transient failure (scripted)");
        }
        effects.set(ctx.key as string, (effects.get(ctx.key as string) ?? 0) + 1);
      },
    });
    // The queue: each id is sent 1-3 times (producer retries), every copy a separate SQS message.
    type Queued = { body: string; receives: number };
    let queue: Queued[] = ids.flatMap((id) => Array.from({ length: 1 + Math.floor(Math.random() * 3) }, () => ({ body: sampleBody(id), receives: 0 })));
    let deliveries = 0;
    for (let round = 0; queue.length > 0 && round < 50; round += 1) {
      queue.sort(() => Math.random() - 0.5);
      const batches: Queued[][] = [];
      for (let i = 0; i < queue.length; i += 10) batches.push(queue.slice(i, i + 10));
      const next: Queued[] = [];
      // Four concurrent "Lambda instances" share the batches.
      const lanes = Array.from({ length: 4 }, (_, lane) => batches.filter((_, b) => b % 4 === lane));
      await Promise.all(
        lanes.map(async (laneBatches) => {
          for (const batch of laneBatches) {
            const records = batch.map((message) => {
              message.receives += 1;
              return sqsRecord(message.body, { receiveCount: String(message.receives) });
            });
            deliveries += records.length;
            const response = await handler(event(records), lambdaContext());
            const failed = new Set(failedIds(response));
            records.forEach((record, i) => {
              if (failed.has(record.messageId)) next.push(batch[i] as Queued);
            });
          }
        }),
      );
      queue = next;
    }
    expect(queue).toHaveLength(0);
    expect(flaky).toBeGreaterThan(0);
    expect(deliveries).toBeGreaterThan(ids.length);
    expect(ids.filter((id) => effects.get(id) !== 1)).toEqual([]);
  });

  it("parks a message another invocation holds: not run, reported as a failure, neighbours acked", async () => {
    const s = store();
    const other = new DynamoDBStore({ table, namespace: s.namespace, clientConfig: clientConfig() });
    expect((await other.claim("held", 60_000)).status).toBe("claimed");
    const ran: string[] = [];
    const handler = sqsHandler({ store: s, handle: (_m, ctx) => void ran.push(ctx.key as string) });
    const records = [sqsRecord(sampleBody("free-1")), sqsRecord(sampleBody("held")), sqsRecord(sampleBody("free-2"))];
    const response = await handler(event(records), lambdaContext());
    expect(failedIds(response)).toEqual([records[1]?.messageId]);
    expect(ran.sort()).toEqual(["free-1", "free-2"]);
  });

  it("releases the claim of a throwing handler so the redelivery runs at once, with attempts reconciled", async () => {
    const s = store();
    const seen: { attempts: number; receive: string | undefined }[] = [];
    let fail = true;
    const handler = sqsHandler({
      store: s,
      handle: (_m, ctx) => {
        if (ctx.key !== "retry-me") return;
        seen.push({ attempts: ctx.attempts, receive: ctx.record.attributes.ApproximateReceiveCount });
        if (fail) throw new Error("boom (scripted)");
      },
    });
    const first = sqsRecord(sampleBody("retry-me"));
    const neighbour = sqsRecord(sampleBody("fine"));
    const response = await handler(event([first, neighbour]), lambdaContext(600_000));
    expect(failedIds(response)).toEqual([first.messageId]);
    // The long lease (10 min + margin) is gone: released, not waiting out.
    expect((await s.claim("retry-me", 1000)).status).toBe("claimed");
    await s.forget("retry-me");
    fail = false;
    const retry = await handler(event([sqsRecord(sampleBody("retry-me"), { messageId: first.messageId, receiveCount: "2" })]), lambdaContext());
    expect(retry.batchItemFailures).toEqual([]);
    expect(seen.map((x) => x.attempts)).toEqual([0, 1]);
    expect(seen.map((x) => x.receive)).toEqual(["1", "2"]);
    expect(await s.seen("retry-me")).toBe(true);
  });

  it("fails only the poison and non-envelope bodies (retried for the DLQ), or acks them with onInvalid: drop", async () => {
    const bodies = [
      "not json at all",
      "",
      "{}",
      JSON.stringify({ job: "x", trace_id: "t", data: {}, meta: { schema_version: 2, id: "v2" }, attempts: 0 }),
      "[1,2,3]",
      sampleBody("poison-neighbour"),
      '{"job": "x", "trace_id": "t", "data": {}, "meta": {"schema_version": 1, "id": "frac"}, "attempts": 1.5}',
    ];
    for (const onInvalid of ["retry", "drop"] as const) {
      const ran: string[] = [];
      const handler = sqsHandler({ store: store(), onInvalid, handle: (_m, ctx) => void ran.push(ctx.key as string) });
      const records = bodies.map((body) => sqsRecord(body));
      const broken = { ...sqsRecord("x"), body: undefined } as unknown as SQSRecord;
      const response = await handler(event([...records, broken]), lambdaContext());
      expect(ran).toEqual(["poison-neighbour"]);
      const expected = onInvalid === "retry" ? [...records.filter((_, i) => i !== 5), broken].map((r) => r.messageId) : [];
      expect(failedIds(response).sort()).toEqual(expected.sort());
    }
  });

  it("runs a FIFO group in order and stops it at its first failure; other groups go on", async () => {
    const s = store();
    const order: string[] = [];
    const handler = sqsHandler({
      store: s,
      handle: async (_m, ctx) => {
        await new Promise((r) => setTimeout(r, 5));
        order.push(ctx.key as string);
        if (ctx.key === "a2") throw new Error("a2 fails (scripted)");
      },
    });
    const records = [
      sqsRecord(sampleBody("a1"), { group: "A" }),
      sqsRecord(sampleBody("b1"), { group: "B" }),
      sqsRecord(sampleBody("a2"), { group: "A" }),
      sqsRecord(sampleBody("b2"), { group: "B" }),
      sqsRecord(sampleBody("a3"), { group: "A" }),
      sqsRecord(sampleBody("b3"), { group: "B" }),
    ];
    const response = await handler(event(records), lambdaContext());
    expect(failedIds(response)).toEqual([records[2]?.messageId, records[4]?.messageId]);
    expect(order.filter((k) => k.startsWith("a"))).toEqual(["a1", "a2"]);
    expect(order.filter((k) => k.startsWith("b"))).toEqual(["b1", "b2", "b3"]);
    // a3 was never claimed: the redelivery of the group's tail runs it in order.
    const retry = await handler(event([sqsRecord(sampleBody("a2"), { group: "A", receiveCount: "2" }), sqsRecord(sampleBody("a3"), { group: "A", receiveCount: "2" })]), lambdaContext());
    expect(failedIds(retry)).toHaveLength(2);
    expect(order.filter((k) => k.startsWith("a"))).toEqual(["a1", "a2", "a2"]);
  });

  it("blocks the rest of a FIFO group behind a poison body too", async () => {
    const ran: string[] = [];
    const handler = sqsHandler({ store: store(), handle: (_m, ctx) => void ran.push(ctx.key as string) });
    const records = [sqsRecord("garbage", { group: "G" }), sqsRecord(sampleBody("g2"), { group: "G" }), sqsRecord(sampleBody("h1"), { group: "H" })];
    const response = await handler(event(records), lambdaContext());
    expect(failedIds(response)).toEqual([records[0]?.messageId, records[1]?.messageId]);
    expect(ran).toEqual(["h1"]);
  });

  it("treats MessageGroupId on a standard queue as no FIFO group", () => {
    const record = sqsRecord(sampleBody("x"), { arn: STANDARD_QUEUE_ARN });
    (record.attributes as unknown as Record<string, string>).MessageGroupId = "fair-queue-tenant";
    expect(fifoGroupOf(record)).toBeUndefined();
    expect(fifoGroupOf(sqsRecord(sampleBody("x"), { group: "g" }))).toBe("g");
  });

  it("acknowledges nothing and runs nothing when the store is unreachable", async () => {
    const port = await freePort();
    let ran = 0;
    const handler = sqsHandler({
      store: store({ clientConfig: clientConfig({ endpoint: `http://127.0.0.1:${port}`, maxAttempts: 1 }) }),
      handle: () => void (ran += 1),
    });
    const records = [sqsRecord(sampleBody("u1")), sqsRecord(sampleBody("u2")), sqsRecord(sampleBody("u3"))];
    const response = await handler(event(records), lambdaContext());
    expect(failedIds(response)).toEqual(records.map((r) => r.messageId));
    expect(ran).toBe(0);
  });

  it("reports every record as failed when the engine itself fails (mock: a store whose batch method throws on access)", async () => {
    const hostile = throwingOnAccess(store(), "claimMany");
    let ran = 0;
    const handler = sqsHandler({ store: hostile, handle: () => void (ran += 1) });
    const records = [sqsRecord(sampleBody("e1")), sqsRecord(sampleBody("e2"))];
    const response = await handler(event(records), lambdaContext());
    expect(failedIds(response)).toEqual(records.map((r) => r.messageId));
    expect(ran).toBe(0);
  });

  it("transactional mode: a handler that rejects with no reason (a bare reject()) writes nothing and its record is returned, not acknowledged", async () => {
    const s = new TransactionalDynamoDBStore({ table, namespace: namespace(), clientConfig: clientConfig() });
    const run = `tx-undefined-${Date.now().toString(36)}`;
    const handler = sqsHandler({
      store: s,
      transactional: true,
      logger: false,
      handle: (_m, ctx) => {
        txOf<DynamoDBTransaction>(ctx).put({ TableName: table, Item: { pk: { S: `effect#${run}#${ctx.key}` }, run: { S: run } } });
        // A callback API wrapped by hand, failing as `reject()`: the rejection carries undefined.
        if (ctx.key === `${run}-b`) return Promise.reject();
        return undefined;
      },
    });
    const records = [sqsRecord(sampleBody(`${run}-a`)), sqsRecord(sampleBody(`${run}-b`))];
    const response = await handler(event(records), lambdaContext());
    // The transaction rolled back: nothing of b was written, so b must come back.
    expect(failedIds(response)).toEqual([records[1]?.messageId]);
    const read = (id: string) => new DynamoDBClient(clientConfig()).send(new GetItemCommand({ TableName: table, Key: { pk: { S: `effect#${run}#${id}` } }, ConsistentRead: true }));
    expect((await read(`${run}-a`)).Item).toBeDefined();
    expect((await read(`${run}-b`)).Item).toBeUndefined();
    expect(await s.seen(`${run}-b`)).toBe(false);
  });

  it("sizes the lease to the invocation's remaining time plus the margin", async () => {
    const s = store();
    const probe = new DynamoDBStore({ table, namespace: s.namespace, clientConfig: clientConfig() });
    let parkedFor = 0;
    const handler = sqsHandler({
      store: s,
      leaseMarginMs: 5_000,
      handle: async () => {
        const other = await probe.claim("lease-probe", 1000);
        if (other.status === "in-flight") parkedFor = other.retryAfterMs;
      },
    });
    await handler(event([sqsRecord(sampleBody("lease-probe"))]), lambdaContext(120_000));
    expect(parkedFor).toBeGreaterThan(120_000);
    // 125 s, plus what DynamoDBStore may add on DynamoDB's clock: a cold store records a lease up to 3 s
    // and a round trip longer than asked (docs/stores/dynamodb.md); the store's default would be 60 s.
    expect(parkedFor).toBeLessThanOrEqual(125_000 + 3_500);
  });

  it("hands handle the envelope and a context with the record, the Lambda context, key, attempts and dedupe", async () => {
    const contexts: HandlerContext<SqsRuntimeContext>[] = [];
    const messages: Envelope[] = [];
    const handler = sqsHandler({
      store: store(),
      handle: (message, ctx) => {
        messages.push(message);
        contexts.push(ctx);
      },
    });
    const record = sqsRecord(sampleBody("ctx", { attempts: 1 }), { receiveCount: "4" });
    const invocation = lambdaContext();
    await handler(event([record, sqsRecord(sampleBody(undefined))]), invocation);
    expect(messages[0]?.job).toBe("urn:babel:orders:created");
    expect(contexts[0]?.record).toBe(record);
    expect(contexts[0]?.lambdaContext).toBe(invocation);
    expect(contexts[0]?.key).toBe("ctx");
    expect(contexts[0]?.attempts).toBe(3);
    expect(contexts[0]?.dedupe).toBe("claim");
    expect(contexts[1]?.key).toBeUndefined();
    expect(contexts[1]?.dedupe).toBe("none");
  });

  it("answers before the Lambda deadline when one record hangs: the nine effects committed, only the hung record returned", async () => {
    const s = store();
    let release!: () => void;
    const hung = new Promise<void>((resolve) => (release = resolve));
    const effects: string[] = [];
    const handler = sqsHandler({
      store: s,
      deadlineMarginMs: 400,
      handle: async (_m, ctx) => {
        if (ctx.key === "hang-9") await hung;
        effects.push(ctx.key as string);
      },
    });
    const records = Array.from({ length: 10 }, (_, i) => sqsRecord(sampleBody(`hang-${i}`)));
    const started = Date.now();
    const response = await handler(event(records), lambdaContext(1_500));
    const elapsed = Date.now() - started;
    // Answered inside the invocation (1.5 s), at about the deadline minus the margin.
    expect(elapsed).toBeLessThan(1_500);
    expect(elapsed).toBeGreaterThanOrEqual(1_000);
    expect(failedIds(response)).toEqual([records[9]?.messageId]);
    expect(effects.sort()).toEqual(Array.from({ length: 9 }, (_, i) => `hang-${i}`));
    expect(await Promise.all(records.slice(0, 9).map((_, i) => s.seen(`hang-${i}`)))).toEqual(Array(9).fill(true));
    // The hung handler keeps its claim: a redelivery now is parked, not run a second time.
    const redelivery = await handler(event([sqsRecord(sampleBody("hang-9"), { receiveCount: "2" })]), lambdaContext(1_500));
    expect(redelivery.batchItemFailures).toHaveLength(1);
    expect(effects.filter((k) => k === "hang-9")).toHaveLength(0);
    // When it finishes (Lambda thaws the environment), its commit is still made.
    release();
    const deadline = Date.now() + 3_000;
    while (!(await s.seen("hang-9")) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(await s.seen("hang-9")).toBe(true);
    expect(effects.filter((k) => k === "hang-9")).toHaveLength(1);
  });

  it("hands the record's String and Number message attributes to the handler as flat headers", async () => {
    const seen: Record<string, string>[] = [];
    const handler = sqsHandler({ store: store(), handle: (_m, ctx) => void seen.push({ ...ctx.headers }) });
    const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const record = sqsRecord(sampleBody("headers"), {
      messageAttributes: {
        traceparent: { dataType: "String", stringValue: traceparent, stringListValues: [], binaryListValues: [] },
        "bq-replay-bypass": { dataType: "String", stringValue: "1", stringListValues: [], binaryListValues: [] },
        "bq-attempts": { dataType: "Number", stringValue: "2", stringListValues: [], binaryListValues: [] },
        "bq-lang": { dataType: "String.lang", stringValue: "php", stringListValues: [], binaryListValues: [] },
        blob: { dataType: "Binary", binaryValue: "AAEC", stringListValues: [], binaryListValues: [] },
      } as SQSRecord["messageAttributes"],
    });
    const plain = sqsRecord(sampleBody("no-attributes"));
    await handler(event([record, plain]), lambdaContext());
    expect(seen[0]).toEqual({ traceparent, "bq-replay-bypass": "1", "bq-attempts": "2", "bq-lang": "php" });
    expect(headersOf(plain)).toEqual({});
    expect(seen[1]).toEqual({});
  });

  it("answers an empty or malformed event with no failures", async () => {
    const handler = sqsHandler({ store: store(), handle: () => undefined });
    expect(await handler(event([]), lambdaContext())).toEqual({ batchItemFailures: [] });
    expect(await handler({} as SQSEvent, lambdaContext())).toEqual({ batchItemFailures: [] });
  });

  it("parses ApproximateReceiveCount strictly", () => {
    const withCount = (count: string | null) => sqsRecord("{}", { receiveCount: count });
    expect(redeliveriesOf(withCount("1"))).toBe(0);
    expect(redeliveriesOf(withCount("7"))).toBe(6);
    for (const bad of ["0", "-1", "1.5", "", " 2", "abc", null]) expect(redeliveriesOf(withCount(bad))).toBeUndefined();
  });

  describe("manifest sqs.attempts_reconciliation", () => {
    const skip = conformanceSkipReason();
    if (skip !== undefined || manifest === undefined) {
      it.skip(skip ?? "skipped", () => {});
      return;
    }
    for (const testCase of manifest.sqs.attempts_reconciliation.cases) {
      it(testCase.name, async () => {
        let attempts: number | undefined;
        const handler = sqsHandler({ store: store(), handle: (_m, ctx) => void (attempts = ctx.attempts) });
        const record = sqsRecord(sampleBody(`attempts-${testCase.name}`, { attempts: testCase.body_attempts }), {
          receiveCount: testCase.approximate_receive_count,
        });
        const response = await handler(event([record]), lambdaContext());
        expect(response.batchItemFailures).toEqual([]);
        expect(attempts).toBe(testCase.expected_attempts);
      });
    }
  });
});

describe("manifest sqs.schema_version_gate (bq-schema-version, checked before the body is decoded)", () => {
  const skip = conformanceSkipReason();
  if (skip !== undefined || nextManifest === undefined) {
    it.skip(skip ?? "skipped", () => {});
    return;
  }
  const gate = nextManifest.sqs.schema_version_gate;
  expect(gate.property).toBe("bq-schema-version");
  testSchemaGateCases(gate, async (testCase, index, probe) => {
    const handler = sqsHandler({ store: store(), handle: probe.handle, logger: probe.logger });
    const body = gateBody(gate, `gate-${index}-${Date.now()}`);
    const attributes =
      testCase.absent === true ? {} : { [gate.property]: { dataType: "String", stringValue: testCase.value as string, binaryListValues: [], stringListValues: [] } };
    const record = sqsRecord(body, { messageAttributes: attributes });
    const response = await handler(event([record]), lambdaContext());
    return { failures: response.batchItemFailures, rejected: { itemIdentifier: record.messageId } };
  });

  it("a Binary bq-schema-version attribute is rejected, its neighbour decodes", async () => {
    let runs = 0;
    const handler = sqsHandler({ store: store(), handle: () => void (runs += 1), logger: false });
    const binary = sqsRecord(sampleBody("gate-binary"), { messageAttributes: { [gate.property]: { dataType: "Binary", binaryValue: "MQ==", binaryListValues: [], stringListValues: [] } } });
    const plain = sqsRecord(sampleBody("gate-plain"));
    const response = await handler(event([binary, plain]), lambdaContext());
    expect(runs).toBe(1);
    expect(response.batchItemFailures).toEqual([{ itemIdentifier: binary.messageId }]);
  });
});

function tally(names: string[]): string {
  const counts = new Map<string, number>();
  for (const name of names) counts.set(name, (counts.get(name) ?? 0) + 1);
  return [...counts].map(([name, n]) => `${n} × ${name.replace(/Command$/, "")}`).join(", ");
}
