/**
 * kafkaHandler end to end against DynamoDB Local, on Amazon MSK and self-managed Kafka events shaped
 * as Lambda delivers them (records keyed by "<topic>-<partition>", base64 values, headers as byte
 * arrays): partitions in offset order and stopped at their first unacknowledged record, the Kafka
 * partial batch response (object identifiers, every unacknowledged record), the replay Lambda makes
 * from the first failed offset and after a rebalance, headers, malformed records and events, parks,
 * conflicts, the store unreachable, the deadline guard, transactional mode, tracing — and every case
 * of BabelQueue's Kafka binding (manifest-next.json block `kafka`): property_projection,
 * attempts_reconciliation, schema_version_gate.
 */
import { DynamoDBClient, ScanCommand } from "@aws-sdk/client-dynamodb";
import type { MSKRecord, SQSEvent } from "aws-lambda";
import { describe, expect, it } from "vitest";
import { type KafkaBatchResponse, type KafkaEvent, type KafkaHandlerOptions, type KafkaRuntimeContext, kafkaHandler } from "../../handlers/lambda-kafka.js";
import { DynamoDBStore, type DynamoDBStoreOptions, type DynamoDBTransaction, TransactionalDynamoDBStore } from "../../entry/dynamodb.js";
import type { ClaimingStore } from "../../src/contract.js";
import type { Envelope } from "../../src/envelope.js";
import type { HandlerContext } from "../../src/engine/index.js";
import { InvalidMessageError } from "../../src/errors.js";
import { InMemoryStore } from "../../src/memory-store.js";
import { txOf } from "../../src/transaction.js";
import { freePort } from "../../scripts/dynamodb-local.mjs";
import { kafkaRecord, lambdaContext, mskEvent, selfManagedKafkaEvent, sqsRecord } from "../../scripts/lambda-events.js";
import { otelTracing } from "../../entry/tracing.js";
import { fakeOtel } from "../observability/fake-otel.js";
import { conformanceSkipReason, fixtureText, nextManifest, sampleBody } from "../support/conformance-data.js";
import { localIdempotencyTable } from "../support/dynamodb-table.js";
import { gateBody, testSchemaGateCases } from "../support/schema-gate.js";
import { throwingOnAccess } from "../support/store-views.js";

const { table, clientConfig, namespace } = localIdempotencyTable("kafka");

function store(options: Partial<DynamoDBStoreOptions> = {}): TransactionalDynamoDBStore {
  return new TransactionalDynamoDBStore({ table, namespace: namespace(), clientConfig: clientConfig(), ...options });
}

let idCounter = 0;
/** A fresh id per test run: the table is shared by the whole file. */
const fresh = (id: string) => `${id}-${Date.now().toString(36)}-${(idCounter += 1)}`;

/** "<topic>-<partition>@<offset>" of every reported failure, in order. */
const failed = (response: KafkaBatchResponse) => response.batchItemFailures.map((f) => `${f.itemIdentifier.partition}@${f.itemIdentifier.offset}`);
const at = (record: MSKRecord) => `${record.topic}-${record.partition}@${record.offset}`;

/** A kafkaHandler (on a fresh store unless `options` names one) that records `at(record)` of every record it runs and throws where `fails` says. */
function recording(fails: (record: MSKRecord) => boolean = () => false, options: Partial<KafkaHandlerOptions> = {}) {
  const ran: string[] = [];
  const handler = kafkaHandler({
    logger: false,
    ...options,
    store: options.store ?? store(),
    handle: (_m, ctx) => {
      ran.push(at(ctx.record));
      if (fails(ctx.record)) throw new Error("scripted");
    },
  });
  return { ran, handler };
}

describe("kafkaHandler on DynamoDB Local", () => {
  it("runs each partition in offset order, stops it at its first failure, and reports that record and the rest of its partition", async () => {
    const ids = { a: [10, 11, 12, 13, 14].map((o) => fresh(`a${o}`)), b: [0, 1, 2, 3].map((o) => fresh(`b${o}`)) };
    const order: string[] = [];
    let failing = true;
    const handler = kafkaHandler({
      store: store(),
      logger: false,
      handle: async (_m, ctx) => {
        await new Promise((r) => setTimeout(r, 3));
        order.push(`${ctx.record.partition}@${ctx.record.offset}`);
        if (failing && ctx.record.partition === 0 && ctx.record.offset === 12) throw new Error("offset 12 fails (scripted)");
      },
    });
    const p0 = ids.a.map((id, i) => kafkaRecord(sampleBody(id), { partition: 0, offset: 10 + i }));
    const p1 = ids.b.map((id, i) => kafkaRecord(sampleBody(id), { partition: 1, offset: i }));
    // Within a partition the event's array is out of order: offsets decide.
    const event = mskEvent([p0[3], p1[0], p0[0], p0[4], p1[2], p0[1], p1[1], p0[2], p1[3]] as MSKRecord[]);
    const response = await handler(event, lambdaContext());
    expect(response).toEqual({
      batchItemFailures: [12, 13, 14].map((offset) => ({ itemIdentifier: { partition: "orders-0", offset } })),
    });
    expect(order.filter((x) => x.startsWith("0@"))).toEqual(["0@10", "0@11", "0@12"]);
    expect(order.filter((x) => x.startsWith("1@"))).toEqual(["1@0", "1@1", "1@2", "1@3"]);

    // Lambda resumes partition orders-0 at its lowest failed offset: 12, 13, 14 run once, in order.
    failing = false;
    order.length = 0;
    const resumed = await handler(mskEvent(p0.slice(2)), lambdaContext());
    expect(resumed.batchItemFailures).toEqual([]);
    expect(order).toEqual(["0@12", "0@13", "0@14"]);

    // A rebalance replays the whole batch: every record is a duplicate, nothing runs again.
    order.length = 0;
    const replayed = await handler(event, lambdaContext());
    expect(replayed.batchItemFailures).toEqual([]);
    expect(order).toEqual([]);
  });

  it("lists the whole tail of a partition from its first failure, even a later copy of an id that already ran", async () => {
    const x = fresh("x");
    const { ran, handler } = recording((record) => record.offset === 1);
    const records = [kafkaRecord(sampleBody(x), { partition: 0, offset: 0 }), kafkaRecord(sampleBody(fresh("y")), { partition: 0, offset: 1 }), kafkaRecord(sampleBody(x), { partition: 0, offset: 2 })];
    const response = await handler(mskEvent(records), lambdaContext());
    // The copy at offset 2 is done (its id ran at offset 0), but it sits after the resume point.
    expect(failed(response)).toEqual(["orders-0@1", "orders-0@2"]);
    expect(ran).toEqual(["orders-0@0", "orders-0@1"]);
  });

  it("acknowledges a success whose commit is still retried at the deadline with the record after it: nothing of the partition goes back", async () => {
    const memory = new InMemoryStore();
    const first = fresh("late");
    let commits = 0;
    const slowFirst: ClaimingStore = {
      seen: (id) => memory.seen(id),
      forget: (id) => memory.forget(id),
      claim: (id, leaseMs, fingerprint) => memory.claim(id, leaseMs, fingerprint),
      release: (id, token) => memory.release(id, token),
      remember: async (id, fingerprint) => {
        if (id === first) {
          commits += 1;
          if (commits === 1) throw new Error("throttled (scripted)");
          await new Promise((resolve) => setTimeout(resolve, 1_500));
        }
        return memory.remember(id, fingerprint);
      },
    };
    const handler = kafkaHandler({ store: slowFirst, logger: false, deadlineMarginMs: 1_000, handle: async () => new Promise((resolve) => setTimeout(resolve, 10)) });
    const records = [kafkaRecord(sampleBody(first), { partition: 3, offset: 0 }), kafkaRecord(sampleBody(fresh("next")), { partition: 3, offset: 1 })];
    const response = await handler(mskEvent(records), lambdaContext(1_500));
    expect(commits).toBe(2);
    // Its effect happened: a resume from it could only repeat it. The commit lands after the answer.
    expect(failed(response)).toEqual([]);
    await new Promise((resolve) => setTimeout(resolve, 1_600));
    expect(await memory.seen(first)).toBe(true);
  });

  it("reads self-managed Kafka events too, with topics whose names contain dashes, one identifier per topic-partition", async () => {
    const { ran, handler } = recording((record) => record.topic === "orders-eu" && record.offset === 7);
    const records = [
      kafkaRecord(sampleBody(fresh("eu7")), { topic: "orders-eu", partition: 1, offset: 7 }),
      kafkaRecord(sampleBody(fresh("eu8")), { topic: "orders-eu", partition: 1, offset: 8 }),
      kafkaRecord(sampleBody(fresh("eu1-0")), { topic: "orders-eu-1", partition: 0, offset: 7 }),
    ];
    const event = selfManagedKafkaEvent(records);
    expect(Object.keys(event.records)).toEqual(["orders-eu-1", "orders-eu-1-0"]);
    const response = await handler(event, lambdaContext());
    expect(response.batchItemFailures).toEqual([
      { itemIdentifier: { partition: "orders-eu-1", offset: 7 } },
      { itemIdentifier: { partition: "orders-eu-1", offset: 8 } },
    ]);
    expect(ran.sort()).toEqual(["orders-eu-1-0@7", "orders-eu-1@7"]);
  });

  it("hands the record's headers to the handler as UTF-8 strings: signed bytes, a repeated name (last wins), a null value (absent)", async () => {
    const seen: Record<string, string>[] = [];
    const handler = kafkaHandler({ store: store(), logger: false, handle: (_m, ctx) => void seen.push({ ...ctx.headers }) });
    const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const signed = (text: string) => [...new TextEncoder().encode(text)].map((byte) => (byte > 127 ? byte - 256 : byte));
    const record = kafkaRecord(sampleBody(fresh("headers")), { headers: [["traceparent", traceparent], ["bq-source-lang", "php"]] });
    record.headers.push({ "bq-job": signed("urn:babel:café ✓") }, { "bq-source-lang": [...new TextEncoder().encode("go")] }, { "bq-replay-bypass": null } as unknown as MSKRecord["headers"][number]);
    record.headers.push(JSON.parse('{"__proto__": [49]}') as MSKRecord["headers"][number]);
    const plain = { ...kafkaRecord(sampleBody(fresh("no-headers"))), headers: undefined } as unknown as MSKRecord;
    const response = await handler(mskEvent([record, plain]), lambdaContext());
    expect(response.batchItemFailures).toEqual([]);
    expect(seen[0]).toEqual({ traceparent, "bq-source-lang": "go", "bq-job": "urn:babel:café ✓", ["__proto__"]: "1" });
    expect(Object.getPrototypeOf(seen[0])).toBe(Object.prototype);
    expect(seen[1]).toEqual({});
  });

  it("hands handle the envelope and a context with the record, the Lambda context, key, attempts and dedupe", async () => {
    const contexts: HandlerContext<KafkaRuntimeContext>[] = [];
    const messages: Envelope[] = [];
    const handler = kafkaHandler({
      store: store(),
      logger: false,
      handle: (message, ctx) => {
        messages.push(message);
        contexts.push(ctx);
      },
    });
    const id = fresh("ctx");
    const record = kafkaRecord(sampleBody(id, { attempts: 1 }), { partition: 3 });
    const invocation = lambdaContext();
    await handler(mskEvent([record, kafkaRecord(sampleBody(undefined), { partition: 4 })]), invocation);
    expect(messages[0]?.job).toBe("urn:babel:orders:created");
    expect(contexts[0]?.record).toBe(record);
    expect(contexts[0]?.lambdaContext).toBe(invocation);
    expect(contexts[0]?.key).toBe(id);
    expect(contexts[0]?.attempts).toBe(1);
    expect(contexts[0]?.dedupe).toBe("claim");
    expect(contexts[1]?.key).toBeUndefined();
    expect(contexts[1]?.dedupe).toBe("none");
  });

  it("reports unreadable records as invalid (retried), blocks the rest of their partition, runs the other partitions; onInvalid: drop acks them", async () => {
    for (const onInvalid of ["retry", "drop"] as const) {
      const { ran, handler } = recording(undefined, { onInvalid });
      const tombstone = { ...kafkaRecord("", { partition: 0, offset: 1 }), value: null } as unknown as MSKRecord;
      const notBase64 = { ...kafkaRecord("", { partition: 1, offset: 1 }), value: "not base64!" };
      const badHeaders = { ...kafkaRecord(sampleBody(fresh("bad-headers")), { partition: 2, offset: 1 }), headers: [{ x: "a string" }] } as unknown as MSKRecord;
      const notAnEnvelope = kafkaRecord("{\"hello\": 1}", { partition: 3, offset: 1 });
      const behind = (partition: number) => kafkaRecord(sampleBody(fresh(`behind-${partition}`)), { partition, offset: 2 });
      const neighbour = kafkaRecord(sampleBody(fresh("neighbour")), { partition: 9, offset: 1 });
      const records = [tombstone, behind(0), notBase64, behind(1), badHeaders, behind(2), notAnEnvelope, behind(3), neighbour];
      const response = await handler(mskEvent(records), lambdaContext());
      if (onInvalid === "retry") {
        expect(failed(response)).toEqual(["orders-0@1", "orders-0@2", "orders-1@1", "orders-1@2", "orders-2@1", "orders-2@2", "orders-3@1", "orders-3@2"]);
        expect(ran).toEqual(["orders-9@1"]);
      } else {
        expect(response.batchItemFailures).toEqual([]);
        expect(ran.sort()).toEqual(["orders-0@2", "orders-1@2", "orders-2@2", "orders-3@2", "orders-9@1"]);
      }
    }
  });

  it("fails the invocation for an event of another source (answering it would acknowledge its records); answers an empty one with no failures", async () => {
    const handler = kafkaHandler({ store: store(), logger: false, handle: () => undefined });
    const sqs: SQSEvent = { Records: [sqsRecord(sampleBody(fresh("sqs")))] };
    await expect(handler(sqs as unknown as KafkaEvent, lambdaContext())).rejects.toBeInstanceOf(InvalidMessageError);
    await expect(handler({ eventSource: "aws:sqs", records: {} } as unknown as KafkaEvent, lambdaContext())).rejects.toBeInstanceOf(InvalidMessageError);
    for (const empty of [{}, null, { records: {} }, { eventSource: "aws:kafka", records: { "orders-0": "not an array" } }, { Records: [] }]) {
      expect(await handler(empty as unknown as KafkaEvent, lambdaContext())).toEqual({ batchItemFailures: [] });
    }
  });

  it("a record to retry that has no offset fails the whole invocation; one that succeeds does not", async () => {
    const handler = kafkaHandler({ store: store(), logger: false, handle: () => undefined });
    const good = { ...kafkaRecord(sampleBody(fresh("no-offset-good"))), offset: undefined } as unknown as MSKRecord;
    expect(await handler(mskEvent([good]), lambdaContext())).toEqual({ batchItemFailures: [] });
    const bad = { ...kafkaRecord("garbage"), offset: "x" } as unknown as MSKRecord;
    await expect(handler(mskEvent([bad]), lambdaContext())).rejects.toThrow(/no topic, partition or offset/);
    // A digit string is an offset (some samples carry strings).
    const stringly = { ...kafkaRecord("garbage", { partition: 5 }), offset: "42", partition: "5" } as unknown as MSKRecord;
    expect(failed(await handler(mskEvent([stringly]), lambdaContext()))).toEqual(["orders-5@42"]);
  });

  it("parks a record another invocation holds: not run, reported with the rest of its partition", async () => {
    const s = store();
    const held = fresh("held");
    const other = new DynamoDBStore({ table, namespace: s.namespace, clientConfig: clientConfig() });
    expect((await other.claim(held, 60_000)).status).toBe("claimed");
    const { ran, handler } = recording(undefined, { store: s });
    const records = [
      kafkaRecord(sampleBody(fresh("p0")), { partition: 0, offset: 0 }),
      kafkaRecord(sampleBody(held), { partition: 0, offset: 1 }),
      kafkaRecord(sampleBody(fresh("p2")), { partition: 0, offset: 2 }),
      kafkaRecord(sampleBody(fresh("q0")), { partition: 1, offset: 0 }),
    ];
    const response = await handler(mskEvent(records), lambdaContext());
    expect(failed(response)).toEqual(["orders-0@1", "orders-0@2"]);
    expect(ran.sort()).toEqual(["orders-0@0", "orders-1@0"]);
  });

  it("a reused id with another payload is a conflict: not run, not acked, the rest of its partition waits", async () => {
    const id = fresh("conflict");
    const { ran, handler } = recording();
    const first = kafkaRecord(sampleBody(id), { partition: 0, offset: 0 });
    await handler(mskEvent([first]), lambdaContext());
    const other = kafkaRecord(sampleBody(id, { data: { order_id: 99 } }), { partition: 0, offset: 1 });
    const after = kafkaRecord(sampleBody(fresh("after-conflict")), { partition: 0, offset: 2 });
    const response = await handler(mskEvent([other, after]), lambdaContext());
    expect(failed(response)).toEqual(["orders-0@1", "orders-0@2"]);
    expect(ran).toEqual(["orders-0@0"]);
  });

  it("a copy of an id in another partition holds that partition until the first copy is done: not acked, the rest of it waits", async () => {
    const fails = (record: MSKRecord) => record.partition === 0 && record.offset === 0;
    const { ran, handler } = recording(fails, { store: new InMemoryStore() });
    const id = fresh("copy");
    const records = [
      kafkaRecord(sampleBody(id), { partition: 0, offset: 0 }),
      kafkaRecord(sampleBody(id), { partition: 1, offset: 0 }),
      kafkaRecord(sampleBody(fresh("after-copy")), { partition: 1, offset: 1 }),
    ];
    const response = await handler(mskEvent(records), lambdaContext());
    expect(failed(response)).toEqual(["orders-0@0", "orders-1@0", "orders-1@1"]);
    expect(ran).toEqual(["orders-0@0"]);
  });

  it("acknowledges nothing and runs nothing when the store is unreachable", async () => {
    const port = await freePort();
    let ran = 0;
    const handler = kafkaHandler({
      store: store({ clientConfig: clientConfig({ endpoint: `http://127.0.0.1:${port}`, maxAttempts: 1 }) }),
      logger: false,
      handle: () => void (ran += 1),
    });
    const records = [kafkaRecord(sampleBody(fresh("u1")), { partition: 0 }), kafkaRecord(sampleBody(fresh("u2")), { partition: 1 })];
    const response = await handler(mskEvent(records), lambdaContext());
    expect(failed(response)).toEqual(records.map(at));
    expect(ran).toBe(0);
  });

  it("reports every record as failed when the engine itself fails (mock: a store whose batch method throws on access)", async () => {
    const hostile = throwingOnAccess(store(), "claimMany");
    let ran = 0;
    const handler = kafkaHandler({ store: hostile, logger: false, handle: () => void (ran += 1) });
    const records = [kafkaRecord(sampleBody(fresh("e1")), { partition: 0 }), kafkaRecord(sampleBody(fresh("e2")), { partition: 0 })];
    expect(failed(await handler(mskEvent(records), lambdaContext()))).toEqual(records.map(at));
    expect(ran).toBe(0);
  });

  it("answers before the Lambda deadline when a record hangs: the hung record and the rest of its partition returned, the others committed", async () => {
    const s = store();
    let release!: () => void;
    const hung = new Promise<void>((resolve) => (release = resolve));
    const effects: string[] = [];
    const hangId = fresh("hang");
    const handler = kafkaHandler({
      store: s,
      logger: false,
      deadlineMarginMs: 400,
      handle: async (_m, ctx) => {
        if (ctx.key === hangId) await hung;
        effects.push(at(ctx.record));
      },
    });
    const p0 = [kafkaRecord(sampleBody(fresh("h0")), { partition: 0, offset: 0 }), kafkaRecord(sampleBody(hangId), { partition: 0, offset: 1 }), kafkaRecord(sampleBody(fresh("h2")), { partition: 0, offset: 2 })];
    const p1 = Array.from({ length: 5 }, (_, i) => kafkaRecord(sampleBody(fresh(`g${i}`)), { partition: 1, offset: i }));
    const started = Date.now();
    const response = await handler(mskEvent([...p0, ...p1]), lambdaContext(1_500));
    const elapsed = Date.now() - started;
    expect(elapsed).toBeLessThan(1_500);
    expect(elapsed).toBeGreaterThanOrEqual(1_000);
    expect(failed(response)).toEqual(["orders-0@1", "orders-0@2"]);
    expect(effects.sort()).toEqual(["orders-0@0", ...p1.map(at)].sort());
    // The hung handler keeps its claim; when it finishes, its commit is still made.
    release();
    const deadline = Date.now() + 3_000;
    while (!(await s.seen(hangId)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(await s.seen(hangId)).toBe(true);
  });

  it("transactional mode: each record's writes commit with its id; a throwing record writes nothing and blocks its partition", async () => {
    const s = store();
    const run = `tx-${Date.now().toString(36)}`;
    const handler = kafkaHandler({
      store: s,
      transactional: true,
      logger: false,
      handle: async (_m, ctx) => {
        txOf<DynamoDBTransaction>(ctx).put({ TableName: table, Item: { pk: { S: `effect#${run}#${ctx.key}` }, run: { S: run } } });
        if (ctx.record.offset === 1) throw new Error("after writing: rolled back (scripted)");
      },
    });
    const ids = [0, 1, 2].map((offset) => fresh(`tx${offset}`));
    const records = ids.map((id, offset) => kafkaRecord(sampleBody(id), { partition: 0, offset }));
    const response = await handler(mskEvent(records), lambdaContext());
    expect(failed(response)).toEqual(["orders-0@1", "orders-0@2"]);
    const page = await new DynamoDBClient(clientConfig()).send(
      new ScanCommand({ TableName: table, ConsistentRead: true, FilterExpression: "#run = :run", ExpressionAttributeNames: { "#run": "run" }, ExpressionAttributeValues: { ":run": { S: run } } }),
    );
    expect((page.Items ?? []).map((item) => item.pk?.S)).toEqual([`effect#${run}#${ids[0]}`]);
  });

  it("traces as messaging system kafka: the topic as destination, partition@offset as message id, the producer's traceparent header", async () => {
    const otel = fakeOtel();
    const handler = kafkaHandler({ store: store(), logger: false, tracing: otelTracing({ api: otel.api }), handle: () => undefined });
    const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const record = kafkaRecord(sampleBody(fresh("traced")), { partition: 2, offset: 40, headers: { traceparent } });
    await handler(mskEvent([record]), lambdaContext());
    const [batch, message] = otel.spans;
    expect(batch?.name).toBe("process orders");
    expect((batch?.options as { attributes: Record<string, unknown> }).attributes).toMatchObject({ "messaging.system": "kafka", "messaging.destination.name": "orders" });
    expect((message?.options as { attributes: Record<string, unknown> }).attributes).toMatchObject({ "messaging.system": "kafka", "messaging.message.id": "orders-2@40" });
    expect(message?.parent).toBe("remote 00f067aa0ba902b7 in span s1");
  });
});

describe("BabelQueue's Kafka binding (manifest-next.json block kafka), through kafkaHandler", () => {
  const skip = conformanceSkipReason();
  if (skip !== undefined || nextManifest === undefined) {
    it.skip(skip ?? "skipped", () => {});
    return;
  }
  const kafka = nextManifest.kafka;

  it("property_projection: a record produced as the binding says reaches the handler with exactly those headers, agreeing with its envelope", async () => {
    const projection = kafka.property_projection;
    const value = fixtureText(projection.envelope_file);
    const seen: { message: Envelope; ctx: HandlerContext<KafkaRuntimeContext> }[] = [];
    const handler = kafkaHandler({ store: store(), logger: false, handle: (message, ctx) => void seen.push({ message, ctx }) });
    const response = await handler(mskEvent([kafkaRecord(value, { headers: projection.headers })]), lambdaContext());
    expect(response.batchItemFailures).toEqual([]);
    expect(seen).toHaveLength(1);
    const { message, ctx } = seen[0] as (typeof seen)[number];
    expect({ ...ctx.headers }).toEqual(projection.headers);
    expect(ctx.headers["bq-job"]).toBe(message.job);
    expect(ctx.headers["bq-trace-id"]).toBe(message.trace_id);
    expect(ctx.headers["bq-message-id"]).toBe(message.meta.id);
    expect(ctx.headers["bq-schema-version"]).toBe(String(message.meta.schema_version));
    expect(ctx.headers["bq-source-lang"]).toBe(message.meta.lang);
    expect(ctx.headers["bq-attempts"]).toBe(String(message.attempts));
    expect(ctx.key).toBe(projection.headers["bq-message-id"]);
    expect(ctx.attempts).toBe(Number(projection.headers["bq-attempts"]));
  });

  describe("attempts_reconciliation: bq-attempts is authoritative, the body's attempts the fallback", () => {
    for (const testCase of kafka.attempts_reconciliation.cases) {
      it(`${testCase.name}: body ${testCase.body_attempts}, header ${testCase.header_attempts ?? "absent"} → ${testCase.expected_attempts}`, async () => {
        let attempts: number | undefined;
        const handler = kafkaHandler({ store: store(), logger: false, handle: (_m, ctx) => void (attempts = ctx.attempts) });
        const headers: Record<string, string> = testCase.header_attempts === null ? {} : { "bq-attempts": String(testCase.header_attempts) };
        const record = kafkaRecord(sampleBody(fresh(`attempts-${testCase.name}`), { attempts: testCase.body_attempts }), { headers });
        const response = await handler(mskEvent([record]), lambdaContext());
        expect(response.batchItemFailures).toEqual([]);
        expect(attempts).toBe(testCase.expected_attempts);
      });
    }
  });

  describe("schema_version_gate: bq-schema-version checked before the value is decoded", () => {
    const gate = kafka.schema_version_gate;
    it("names the property the handler reads", () => expect(gate.property).toBe("bq-schema-version"));
    testSchemaGateCases(gate, async (testCase, index, probe) => {
      const handler = kafkaHandler({ store: store(), handle: probe.handle, logger: probe.logger });
      const value = gateBody(gate, fresh(`gate-${index}`));
      const record = kafkaRecord(value, { partition: 7, headers: testCase.absent === true ? {} : { [gate.property]: testCase.value as string } });
      const response = await handler(mskEvent([record]), lambdaContext());
      return { failures: response.batchItemFailures, rejected: { itemIdentifier: { partition: "orders-7", offset: record.offset } } };
    });
  });
});
