/**
 * Bad input through the runtime adapters (issue "Proof", item 3): fast-check-generated bodies —
 * bad JSON, wrong types, huge and odd ids, deep nesting, `__proto__` keys, wrong schema versions,
 * empty batches, duplicated records — mixed into real batches. The adapters never throw, every
 * bad record is classified (not acknowledged unless dropped), good neighbours are processed once,
 * and nothing a record carried is ever written to the console. `kafkaHandler` also gets malformed
 * Kafka records (tombstones, bad base64, bad headers) and whole events of any shape: it answers,
 * or refuses the invocation with an `InvalidMessageError`, and never acknowledges a record it did
 * not process.
 *
 * The Cloudflare adapter runs here in Node with structural Queues messages (ack/retry recorders):
 * the point is the adapter's classification, which is runtime-free; its real-queue path runs in
 * workerd in test/workers/.
 */
import type { MSKRecord, SQSEvent } from "aws-lambda";
import fc from "fast-check";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { decodeEnvelope } from "../../src/envelope.js";
import { InvalidMessageError } from "../../src/errors.js";
import { type KafkaEvent, kafkaHandler } from "../../handlers/lambda-kafka.js";
import { InMemoryStore } from "../../src/memory-store.js";
import { queueHandler, type QueueMessageLike } from "../../handlers/cloudflare-queue.js";
import { sqsHandler } from "../../handlers/lambda-sqs.js";
import { kafkaRecord, lambdaContext, mskEvent, selfManagedKafkaEvent, sqsRecord } from "../../scripts/lambda-events.js";
import { envelope, envelopeBody } from "../support/envelopes.js";

const SECRET = "PAYLOAD-SECRET-7f3a";

function good(id: string): Record<string, unknown> {
  return envelope(id, { job: "urn:babel:test:good", traceId: "t-1", data: { card: SECRET }, meta: { queue: "q", lang: "node", created_at: 1 } });
}

const nested = (depth: number) => "[".repeat(depth) + "]".repeat(depth);

/** Bodies a broker might carry that are not acceptable envelopes (or are, with odd ids). */
const badBody: fc.Arbitrary<unknown> = fc.oneof(
  fc.string().map((s) => `${SECRET}${s}`),
  fc.constantFrom("", " ", "null", "[]", "{}", "42", '"str"', "{", nested(50_000), `{"__proto__":{"x":1}}`),
  fc.json(),
  fc.anything(),
  fc.record({
    job: fc.oneof(fc.constant("urn:babel:x"), fc.anything()),
    trace_id: fc.oneof(fc.constant("t"), fc.anything()),
    data: fc.oneof(fc.constant({ secret: SECRET }), fc.anything()),
    meta: fc.oneof(
      fc.record({ id: fc.oneof(fc.string(), fc.string({ minLength: 5000, maxLength: 12000 }), fc.anything()), schema_version: fc.oneof(fc.constant(1), fc.integer(), fc.anything()) }),
      fc.anything(),
    ),
    attempts: fc.oneof(fc.nat(), fc.anything()),
    __proto__: fc.anything(),
  }),
);

type Item = { kind: "good"; id: string } | { kind: "bad"; body: unknown };
const batchArb = fc.array(
  fc.oneof({ weight: 2, arbitrary: fc.nat(30).map((n): Item => ({ kind: "good", id: `good-${n}` })) }, { weight: 3, arbitrary: badBody.map((body): Item => ({ kind: "bad", body })) }),
  { minLength: 0, maxLength: 40 },
);

let logged: string[] = [];
beforeEach(() => {
  logged = [];
  for (const method of ["log", "info", "warn", "error", "debug"] as const) {
    vi.spyOn(console, method).mockImplementation((...args: unknown[]) => {
      logged.push(args.map((a) => (typeof a === "string" ? a : JSON.stringify(a) ?? String(a))).join(" "));
    });
  }
});
afterEach(() => vi.restoreAllMocks());

function toText(body: unknown): string {
  if (typeof body === "string") return body;
  try {
    return JSON.stringify(body) ?? "undefined";
  } catch {
    return String(body);
  }
}

describe("bad input through sqsHandler", () => {
  it("never throws, classifies each bad record, and processes good neighbours once", async () => {
    await fc.assert(
      fc.asyncProperty(batchArb, async (items) => {
        const store = new InMemoryStore();
        const effects = new Map<string, number>();
        const handler = sqsHandler({
          store,
          handle: (_envelope, ctx) => void effects.set(ctx.key ?? "", (effects.get(ctx.key ?? "") ?? 0) + 1),
        });
        const records = items.map((item, i) =>
          sqsRecord(item.kind === "good" ? JSON.stringify(good(item.id)) : toText(item.body), { messageId: `m-${i}` }),
        );
        const context = lambdaContext();
        const response = await handler({ Records: records } as SQSEvent, context);
        const failed = new Set(response.batchItemFailures.map((f) => f.itemIdentifier));
        const goodIds = new Set(items.flatMap((item) => (item.kind === "good" ? [item.id] : [])));
        items.forEach((item, i) => {
          if (item.kind === "good") expect(failed.has(`m-${i}`)).toBe(false);
        });
        for (const id of goodIds) expect(effects.get(id)).toBe(1);
        // Every record that is not an acceptable envelope is reported back to SQS, never acked.
        records.forEach((record, i) => {
          if (!decodeEnvelope(record.body).ok) expect(failed.has(`m-${i}`), `record ${i}`).toBe(true);
        });
        expect(logged.join("\n")).not.toContain(SECRET);
      }),
      { numRuns: 150 },
    );
  });

  it("handles an empty batch and a missing Records field", async () => {
    const handler = sqsHandler({ store: new InMemoryStore(), handle: () => {} });
    const context = lambdaContext(1_000);
    expect(await handler({ Records: [] }, context)).toEqual({ batchItemFailures: [] });
    expect(await handler({} as SQSEvent, context)).toEqual({ batchItemFailures: [] });
  });

  it("refuses another event source's event (the invocation fails, Lambda retries): nothing runs, nothing is answered as done", async () => {
    let runs = 0;
    const handler = sqsHandler({ store: new InMemoryStore(), handle: () => void (runs += 1) });
    const body = JSON.stringify(envelope("k-1"));
    const events: [string, unknown][] = [
      // Answered "nothing failed", Lambda would commit these Kafka offsets with nothing run.
      ["MSK", mskEvent([kafkaRecord(body)])],
      ["self-managed Kafka", selfManagedKafkaEvent([kafkaRecord(body)])],
      // SNS and Kinesis events carry `Records` too; SNS does not read the answer at all.
      ["SNS", { Records: [{ EventSource: "aws:sns", EventVersion: "1.0", Sns: { Message: body } }] }],
      ["Kinesis", { Records: [{ eventSource: "aws:kinesis", kinesis: { data: Buffer.from(body).toString("base64"), sequenceNumber: "1" } }] }],
      ["SQS then Kinesis", { Records: [sqsRecord(body), { eventSource: "aws:kinesis", kinesis: { sequenceNumber: "2" } }] }],
    ];
    for (const [label, event] of events) {
      const error = await handler(event as SQSEvent, lambdaContext()).then(
        () => undefined,
        (thrown: unknown) => thrown,
      );
      expect(error, label).toBeInstanceOf(InvalidMessageError);
      expect((error as Error).message, label).toMatch(/sqsHandler: the event (is not from an SQS queue|carries records of another event source); the invocation fails so that Lambda retries the batch$/);
      expect((error as Error).message, label).not.toContain("k-1");
    }
    expect(runs).toBe(0);
    // An SQS record without `eventSource` (a hand-built test event) is still read as SQS.
    const { eventSource: _source, ...bare } = sqsRecord(body, { messageId: "m-1" });
    expect(await handler({ Records: [bare] } as unknown as SQSEvent, lambdaContext())).toEqual({ batchItemFailures: [] });
    expect(runs).toBe(1);
  });
});

describe("bad input through kafkaHandler", () => {
  /** A record as the broker might carry it: a good envelope, a bad body, or an unreadable record. */
  const unreadable = fc.constantFrom<Partial<Record<"value" | "headers", unknown>>>(
    { value: null },
    { value: "not base64!" },
    { value: "abc" },
    { headers: [{ x: "a string" }] },
    { headers: [{ x: [1, 2, 256] }] },
    { headers: "nope" },
    { headers: [null] },
  );
  type KafkaItem = Item | { kind: "unreadable"; fields: Partial<Record<"value" | "headers", unknown>> };
  const kafkaBatchArb = fc.array(
    fc.record({
      partition: fc.nat(2),
      item: fc.oneof(
        { weight: 2, arbitrary: fc.nat(30).map((n): KafkaItem => ({ kind: "good", id: `good-${n}` })) },
        { weight: 2, arbitrary: badBody.map((body): KafkaItem => ({ kind: "bad", body })) },
        { weight: 1, arbitrary: unreadable.map((fields): KafkaItem => ({ kind: "unreadable", fields })) },
      ),
    }),
    { minLength: 0, maxLength: 30 },
  );

  it("never throws for a record, reports every record it did not process, and keeps each partition's order", async () => {
    await fc.assert(
      fc.asyncProperty(kafkaBatchArb, async (entries) => {
        const effects = new Map<string, number>();
        const handler = kafkaHandler({ store: new InMemoryStore(), handle: (_e, ctx) => void effects.set(ctx.key ?? "", (effects.get(ctx.key ?? "") ?? 0) + 1) });
        const offsets = [0, 0, 0];
        const records = entries.map(({ partition, item }) => {
          const offset = (offsets[partition] = (offsets[partition] ?? 0) + 1);
          // Good ids are per partition: a copy across partitions shares its first copy's fate instead.
          // A generated body that happens to be a valid envelope is replaced: its id could repeat across partitions.
          const bad = (body: unknown) => (decodeEnvelope(toText(body)).ok ? "not an envelope" : toText(body));
          const body = item.kind === "good" ? JSON.stringify(good(`${item.id}-p${partition}`)) : item.kind === "bad" ? bad(item.body) : "{}";
          const record = kafkaRecord(body, { partition, offset });
          return item.kind === "unreadable" ? ({ ...record, ...item.fields } as MSKRecord) : record;
        });
        const response = await handler(mskEvent(records), lambdaContext());
        const failed = response.batchItemFailures.map((f) => `${f.itemIdentifier.partition}@${f.itemIdentifier.offset}`);
        expect(new Set(failed).size).toBe(failed.length);
        const key = (record: MSKRecord) => `${record.topic}-${record.partition}@${record.offset}`;
        for (const partition of [0, 1, 2]) {
          const inPartition = records.filter((record) => record.partition === partition);
          const first = inPartition.findIndex((record) => failed.includes(key(record)));
          // After a partition's first unacknowledged record, nothing of that partition is acknowledged.
          for (const [i, record] of inPartition.entries()) expect(failed.includes(key(record)), key(record)).toBe(first !== -1 && i >= first);
        }
        const acked = new Set<string>();
        entries.forEach(({ item }, i) => {
          const record = records[i] as MSKRecord;
          if (item.kind !== "good") expect(failed.includes(key(record)), key(record)).toBe(true);
          else if (!failed.includes(key(record))) acked.add(`${item.id}-p${record.partition}`);
        });
        // A good id's effect ran once if one of its records was acknowledged, else not at all (never twice).
        for (const { item, partition } of entries) {
          if (item.kind === "good") expect(effects.get(`${item.id}-p${partition}`) ?? 0).toBe(acked.has(`${item.id}-p${partition}`) ? 1 : 0);
        }
        expect(logged.join("\n")).not.toContain(SECRET);
      }),
      { numRuns: 150 },
    );
  });

  it("a record of 3.4 MB (4.6 million base64 characters) runs like any other; the base64 check stays strict", async () => {
    const ran: string[] = [];
    const handler = kafkaHandler({ store: new InMemoryStore(), logger: false, handle: (_e, ctx) => void ran.push(ctx.key ?? "") });
    const big = kafkaRecord(envelopeBody("big-record", { data: { blob: "x".repeat(3_400_000) } }), { partition: 1 });
    expect((big.value as string).length).toBeGreaterThan(4_500_000);
    const small = kafkaRecord(envelopeBody("small-record"), { partition: 0 });
    const response = await handler(mskEvent([small, big]), lambdaContext());
    expect(response.batchItemFailures).toEqual([]);
    expect(ran.sort()).toEqual(["big-record", "small-record"]);
    // Not base64: a length that is not a multiple of 4, '=' inside or three of them, a character outside the alphabet.
    const good = Buffer.from(envelopeBody("strict")).toString("base64");
    for (const value of [good.slice(0, -1), `A=${good.slice(2)}`, `${good.slice(0, -4)}A===`, `${good.slice(0, -4)}AB-_`]) {
      const record = { ...kafkaRecord(envelopeBody("strict")), value };
      const [failure] = (await handler(mskEvent([record]), lambdaContext())).batchItemFailures;
      expect(failure?.itemIdentifier.offset).toBe(record.offset);
    }
    expect(ran).not.toContain("strict");
  });

  it("an event of any shape: answered, or the invocation refused with an InvalidMessageError — never another error", async () => {
    const handler = kafkaHandler({ store: new InMemoryStore(), handle: () => {} });
    const recordish = fc.oneof(fc.anything(), fc.record({ topic: fc.anything(), partition: fc.anything(), offset: fc.anything(), value: fc.anything(), headers: fc.anything() }));
    const eventArb = fc.oneof(
      fc.anything(),
      fc.record({ eventSource: fc.oneof(fc.constant("aws:kafka"), fc.anything()), records: fc.oneof(fc.anything(), fc.dictionary(fc.string(), fc.oneof(fc.anything(), fc.array(recordish)))) }),
    );
    await fc.assert(
      fc.asyncProperty(eventArb, async (event) => {
        try {
          const response = await handler(event as KafkaEvent, lambdaContext());
          for (const failure of response.batchItemFailures) {
            expect(typeof failure.itemIdentifier.partition).toBe("string");
            expect(Number.isSafeInteger(failure.itemIdentifier.offset)).toBe(true);
          }
        } catch (error) {
          expect(error).toBeInstanceOf(InvalidMessageError);
        }
      }),
      { numRuns: 300 },
    );
  });
});

describe("bad input through queueHandler", () => {
  it("never throws, acks good messages once, retries each bad one", async () => {
    await fc.assert(
      fc.asyncProperty(batchArb, fc.boolean(), async (items, asObjects) => {
        const store = new InMemoryStore();
        const effects = new Map<string, number>();
        const consumer = queueHandler<Record<string, never>>({
          store: () => store,
          handle: (_envelope, ctx) => void effects.set(ctx.key ?? "", (effects.get(ctx.key ?? "") ?? 0) + 1),
        });
        const outcome: string[] = items.map(() => "none");
        const messages: QueueMessageLike[] = items.map((item, i) => ({
          id: `q-${i}`,
          body: item.kind === "good" ? (asObjects ? good(item.id) : JSON.stringify(good(item.id))) : item.body,
          attempts: 1,
          ack: () => void (outcome[i] = outcome[i] === "none" ? "ack" : "twice"),
          retry: () => void (outcome[i] = outcome[i] === "none" ? "retry" : "twice"),
        }));
        await consumer({ queue: "q", messages }, {}, { waitUntil: () => {} });
        expect(outcome).not.toContain("none");
        expect(outcome).not.toContain("twice");
        items.forEach((item, i) => {
          if (item.kind === "good") expect(outcome[i]).toBe("ack");
        });
        for (const item of items) if (item.kind === "good") expect(effects.get(item.id)).toBe(1);
        items.forEach((item, i) => {
          if (item.kind === "bad" && !decodeEnvelope(item.body).ok) expect(outcome[i], `message ${i}`).toBe("retry");
        });
        expect(logged.join("\n")).not.toContain(SECRET);
      }),
      { numRuns: 150 },
    );
  });

  it("drops bad bodies when asked, and only then", async () => {
    const outcomes: string[] = [];
    const consumer = queueHandler<Record<string, never>>({ store: () => new InMemoryStore(), handle: () => {}, onInvalid: "drop" });
    const message = (body: unknown): QueueMessageLike => ({ id: "x", body, attempts: 1, ack: () => void outcomes.push("ack"), retry: () => void outcomes.push("retry") });
    await consumer({ queue: "q", messages: [message("{bad"), message({ job: 1 })] }, {}, { waitUntil: () => {} });
    expect(outcomes).toEqual(["ack", "ack"]);
  });
});

describe("conflicting payloads: a reused id with another payload, through both adapters", () => {
  /** Batches of (id, payload variant) pairs; the first variant an id is seen with is its real payload. */
  const reuseArb = fc.array(fc.array(fc.record({ id: fc.nat(6), variant: fc.nat(2) }), { minLength: 1, maxLength: 12 }), { minLength: 1, maxLength: 4 });
  const payload = (id: number, variant: number) => ({ ...good(`reused-${id}`), data: { card: SECRET, variant } });

  it("sqsHandler: a conflict is never run and never acked (dropped only with onConflict: drop), and its payload is never logged", async () => {
    await fc.assert(
      fc.asyncProperty(reuseArb, fc.boolean(), async (batches, drop) => {
        const store = new InMemoryStore();
        const runs = new Map<string, number[]>();
        const handler = sqsHandler({
          store,
          ...(drop ? { onConflict: "drop" as const } : {}),
          handle: (envelope, ctx) => void runs.set(ctx.key as string, [...(runs.get(ctx.key as string) ?? []), envelope.data.variant as number]),
        });
        const committed = new Map<number, number>();
        for (const [b, batch] of batches.entries()) {
          const records = batch.map((m, i) => sqsRecord(JSON.stringify(payload(m.id, m.variant)), { messageId: `b${b}-${i}` }));
          const response = await handler({ Records: records } as SQSEvent, lambdaContext());
          const failed = new Set(response.batchItemFailures.map((f) => f.itemIdentifier));
          const firstInBatch = new Map<number, number>();
          batch.forEach((m, i) => {
            const owner = committed.get(m.id) ?? firstInBatch.get(m.id);
            const conflict = owner !== undefined && owner !== m.variant;
            if (conflict) expect(failed.has(`b${b}-${i}`), `b${b}-${i} conflict acked`).toBe(!drop);
            else expect(failed.has(`b${b}-${i}`), `b${b}-${i}`).toBe(false);
            if (owner === undefined) firstInBatch.set(m.id, m.variant);
          });
          for (const [id, variant] of firstInBatch) committed.set(id, variant);
        }
        // Each id ran exactly once, with its first payload: a conflicting one never ran.
        for (const [id, variant] of committed) expect(runs.get(`reused-${id}`)).toEqual([variant]);
        expect(logged.join("\n")).not.toContain(SECRET);
      }),
      { numRuns: 100 },
    );
  });

  it("queueHandler: retries a conflict (or acks it with onConflict: drop), never runs it", async () => {
    for (const drop of [false, true]) {
      const store = new InMemoryStore();
      let runs = 0;
      const consumer = queueHandler<Record<string, never>>({ store: () => store, handle: () => void (runs += 1), ...(drop ? { onConflict: "drop" as const } : {}) });
      const outcomes: string[] = [];
      const message = (body: unknown): QueueMessageLike => ({ id: "x", body, attempts: 1, ack: () => void outcomes.push("ack"), retry: () => void outcomes.push("retry") });
      await consumer({ queue: "q", messages: [message(payload(1, 0))] }, {}, { waitUntil: () => {} });
      await consumer({ queue: "q", messages: [message(payload(1, 1)), message(payload(1, 0))] }, {}, { waitUntil: () => {} });
      expect(outcomes).toEqual(["ack", drop ? "ack" : "retry", "ack"]);
      expect(runs).toBe(1);
    }
    expect(logged.join("\n")).not.toContain(SECRET);
  });
});
