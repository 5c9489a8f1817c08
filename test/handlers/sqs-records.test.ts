/**
 * The SQS adapter's translation of one record, without a backend: which message attributes become
 * headers (`headersOf`), and what of a record reaches the engine as its delivery — the message id
 * only when SQS gave a string, and a record that is not an object failing alone.
 *
 * The end-to-end behaviour on DynamoDB Local is in lambda-sqs.test.ts; this file is backend-free, so
 * mutation testing sees it (vitest.unit.config.ts).
 */
import type { SQSEvent, SQSMessageAttributes, SQSRecord } from "aws-lambda";
import { describe, expect, it } from "vitest";
import { fifoGroupOf, headersOf, redeliveriesOf, sqsHandler } from "../../handlers/lambda-sqs.js";
import type { ClaimingStore } from "../../src/contract.js";
import type { ObservabilityExtension } from "../../src/observability/index.js";
import { InMemoryStore } from "../../src/memory-store.js";
import { FIFO_QUEUE_ARN, STANDARD_QUEUE_ARN, lambdaContext, sqsRecord } from "../../scripts/lambda-events.js";
import { envelope } from "../support/envelopes.js";

function withAttributes(messageAttributes: unknown): SQSRecord {
  return { ...sqsRecord(JSON.stringify(envelope("h-1")), { messageId: "m-1" }), messageAttributes: messageAttributes as SQSMessageAttributes };
}

const text = (stringValue: unknown, dataType: unknown = "String") => ({ stringValue, dataType });

describe("headersOf: the message attributes a handler sees as headers", () => {
  it("keeps String and Number attributes (custom subtypes too) with a string value, and nothing else", () => {
    const headers = headersOf(
      withAttributes({
        plain: text("a"),
        custom: text("b", "String.json"),
        count: text("3", "Number"),
        price: text("1.5", "Number.float"),
        binary: { binaryValue: "AAE=", dataType: "Binary" },
        binaryWithText: text("c", "Binary"),
        prefixed: text("d", "CustomString"),
        suffixed: text("e", "Stringly"),
        noType: { stringValue: "f" },
        typeNotText: text("g", 7),
        valueNotText: text(42),
        empty: null,
      }),
    );
    expect(headers).toEqual({ plain: "a", custom: "b", count: "3", price: "1.5" });
  });

  it("reads only the attributes' own keys, and an own __proto__ key is an ordinary header", () => {
    const inherited = Object.create({ inherited: text("x") }) as Record<string, unknown>;
    inherited.own = text("y");
    Object.defineProperty(inherited, "__proto__", { value: text("z"), enumerable: true, configurable: true, writable: true });
    const headers = headersOf(withAttributes(inherited));
    expect(Object.keys(headers).sort()).toEqual(["__proto__", "own"]);
    expect(Object.getPrototypeOf(headers)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(headers, "__proto__")).toEqual({ value: "z", enumerable: true, writable: true, configurable: true });
    expect(Object.getOwnPropertyDescriptor(headers, "own")).toEqual({ value: "y", enumerable: true, writable: true, configurable: true });
  });

  it.each([
    ["absent", undefined],
    ["null", null],
    ["a string", "String"],
    ["a number", 5],
  ])("answers no headers when the attributes are %s", (_label, attributes) => {
    expect(headersOf(withAttributes(attributes))).toEqual({});
  });

  it("answers no headers for a record that is not an object", () => {
    expect(headersOf(undefined as unknown as SQSRecord)).toEqual({});
    expect(headersOf(null as unknown as SQSRecord)).toEqual({});
  });
});

describe("redeliveriesOf: SQS's receive count, 0-based", () => {
  const withCount = (count: unknown) => ({ ...sqsRecord("{}"), attributes: { ...sqsRecord("{}").attributes, ApproximateReceiveCount: count } }) as SQSRecord;

  it.each([
    ["1", 0],
    ["3", 2],
    ["12", 11],
  ])("reads %s as %s redeliveries", (count, redeliveries) => {
    expect(redeliveriesOf(withCount(count))).toBe(redeliveries);
  });

  it.each([["0"], ["-1"], ["1.5"], ["abc"], [" 2"], ["2 "], ["12a"], ["a12"], [""], ["9007199254740993"], [3], [undefined]])(
    "ignores a receive count of %j",
    (count) => {
      expect(redeliveriesOf(withCount(count))).toBeUndefined();
    },
  );

  it("ignores a record without attributes, or one that is not an object", () => {
    expect(redeliveriesOf({ ...sqsRecord("{}"), attributes: undefined } as unknown as SQSRecord)).toBeUndefined();
    expect(redeliveriesOf(null as unknown as SQSRecord)).toBeUndefined();
  });
});

describe("fifoGroupOf: the message group, on a FIFO queue only", () => {
  const record = (arn: unknown, group: unknown) =>
    ({ ...sqsRecord("{}"), eventSourceARN: arn, attributes: { ...sqsRecord("{}").attributes, MessageGroupId: group } }) as SQSRecord;

  it("reads the group of a record from a .fifo queue", () => {
    expect(fifoGroupOf(record(FIFO_QUEUE_ARN, "g-1"))).toBe("g-1");
  });

  it.each([
    ["a standard queue", STANDARD_QUEUE_ARN, "g-1"],
    ["a queue whose name only contains .fifo", `${FIFO_QUEUE_ARN}-old`, "g-1"],
    ["no queue ARN", undefined, "g-1"],
    ["an empty group", FIFO_QUEUE_ARN, ""],
    ["a group that is not a string", FIFO_QUEUE_ARN, 5],
    ["no group", FIFO_QUEUE_ARN, undefined],
  ])("answers none for %s", (_label, arn, group) => {
    expect(fifoGroupOf(record(arn, group))).toBeUndefined();
  });

  it("answers none for a FIFO record without attributes, or a record that is not an object", () => {
    expect(fifoGroupOf({ ...sqsRecord("{}"), eventSourceARN: FIFO_QUEUE_ARN, attributes: undefined } as unknown as SQSRecord)).toBeUndefined();
    expect(fifoGroupOf(undefined as unknown as SQSRecord)).toBeUndefined();
  });
});

describe("sqsHandler: what of a record reaches the engine", () => {
  /** A tracing extension that only records what each handler run was told about its delivery. */
  function recorder(): { extension: ObservabilityExtension; runs: { key?: string; messageId?: string; headers?: Record<string, string> }[] } {
    const runs: { key?: string; messageId?: string; headers?: Record<string, string> }[] = [];
    const extension: ObservabilityExtension = {
      extends: "tracing",
      batch: () => ({
        intercept: (run, info) => {
          runs.push({ key: info.key, ...(info.messageId === undefined ? {} : { messageId: info.messageId }), ...(info.headers === undefined ? {} : { headers: info.headers }) });
          return run();
        },
      }),
    };
    return { extension, runs };
  }

  it("passes the message id only when SQS gave a string, and the headers the record carried", async () => {
    const { extension, runs } = recorder();
    const handler = sqsHandler({ store: new InMemoryStore(), logger: false, tracing: extension, handle: async () => undefined });
    const numbered = { ...sqsRecord(JSON.stringify(envelope("n-1")), { messageId: "unused" }), messageId: 42 as unknown as string };
    const named = withAttributes({ trace: text("t-9") });
    const event: SQSEvent = { Records: [numbered, named] };
    const response = await handler(event, lambdaContext());
    expect(response.batchItemFailures).toEqual([]);
    expect(runs).toEqual([
      { key: "n-1", headers: {} },
      { key: "h-1", messageId: "m-1", headers: { trace: "t-9" } },
    ]);
  });

  it("gives the engine the record's redeliveries, FIFO group and schema-gate verdict", async () => {
    const seen: { key: string; attempts: number }[] = [];
    const handler = sqsHandler({
      store: new InMemoryStore(),
      logger: false,
      handle: async (message, ctx) => {
        seen.push({ key: String(ctx.key), attempts: ctx.attempts });
        if (message.meta.id === "f-1") throw new Error("scripted failure");
      },
    });
    const gated = sqsRecord(JSON.stringify(envelope("v-2")), {
      messageId: "m-gated",
      messageAttributes: { "bq-schema-version": { stringValue: "2", dataType: "String" } } as unknown as SQSMessageAttributes,
    });
    const response = await handler(
      {
        Records: [
          sqsRecord(JSON.stringify(envelope("r-3")), { messageId: "m-r3", receiveCount: "3" }),
          gated,
          sqsRecord(JSON.stringify(envelope("f-1")), { messageId: "m-f1", group: "a" }),
          sqsRecord(JSON.stringify(envelope("f-2")), { messageId: "m-f2", group: "a" }),
          sqsRecord(JSON.stringify(envelope("f-3")), { messageId: "m-f3", group: "b" }),
        ].map((one, index) => (index >= 2 ? { ...one, eventSourceARN: FIFO_QUEUE_ARN } : one)),
      },
      lambdaContext(),
    );
    // r-3 ran with 2 redeliveries; v-2 was not decoded (schema version 2); f-2 waits behind f-1 in group "a"; f-3's group runs on.
    expect(seen).toEqual([
      { key: "r-3", attempts: 2 },
      { key: "f-1", attempts: 0 },
      { key: "f-3", attempts: 0 },
    ]);
    expect(response.batchItemFailures.map((one) => one.itemIdentifier).sort()).toEqual(["m-f1", "m-f2", "m-gated"]);
  });

  it("hands the handler its record, the invocation's context and the record's headers", async () => {
    const record = withAttributes({ trace: text("t-1") });
    const context = lambdaContext();
    const seen: unknown[] = [];
    const handler = sqsHandler({ store: new InMemoryStore(), logger: false, handle: async (_message, ctx) => void seen.push(ctx.record, ctx.lambdaContext, ctx.headers) });
    await handler({ Records: [record] }, context);
    expect(seen[0]).toBe(record);
    expect(seen[1]).toBe(context);
    expect(seen[2]).toEqual({ trace: "t-1" });
  });

  it("fails a record that is not an object alone: its neighbours run and are acknowledged", async () => {
    const ran: string[] = [];
    const handler = sqsHandler({ store: new InMemoryStore(), logger: false, handle: async (message) => void ran.push(String(message.meta.id)) });
    const good = sqsRecord(JSON.stringify(envelope("g-1")), { messageId: "m-good" });
    const response = await handler({ Records: [null as unknown as SQSRecord, good] }, lambdaContext());
    expect(ran).toEqual(["g-1"]);
    // The bad record is not acknowledged (invalid, retried by default); it has no id of its own to name,
    // so Lambda retries the batch, whose good record is then a duplicate.
    expect(response.batchItemFailures).toEqual([{ itemIdentifier: "" }]);
    const again = await handler({ Records: [null as unknown as SQSRecord, good] }, lambdaContext());
    expect(ran).toEqual(["g-1"]);
    expect(again.batchItemFailures).toEqual([{ itemIdentifier: "" }]);
  });
});

describe("sqsHandler on a FIFO queue: a success whose commit is still retried at the deadline", () => {
  it("is acknowledged with the later records of its group: none is deleted ahead of one left unacknowledged", async () => {
    // i1's first commit fails (scripted), and its retry lands after the invocation must answer; i2's commits at once.
    const memory = new InMemoryStore();
    let i1Commits = 0;
    const store: ClaimingStore = {
      seen: (id) => memory.seen(id),
      forget: (id) => memory.forget(id),
      claim: (id, leaseMs, fingerprint) => memory.claim(id, leaseMs, fingerprint),
      release: (id, token) => memory.release(id, token),
      remember: async (id, fingerprint) => {
        if (id === "i1") {
          i1Commits += 1;
          if (i1Commits === 1) throw new Error("throttled (scripted)");
          await new Promise((resolve) => setTimeout(resolve, 1_500));
        }
        return memory.remember(id, fingerprint);
      },
    };
    const handler = sqsHandler({ store, logger: false, deadlineMarginMs: 1_000, handle: async () => new Promise((resolve) => setTimeout(resolve, 10)) });
    const records = [
      sqsRecord(JSON.stringify(envelope("i1")), { messageId: "m-i1", group: "g" }),
      sqsRecord(JSON.stringify(envelope("i2")), { messageId: "m-i2", group: "g" }),
    ];
    const response = await handler({ Records: records }, lambdaContext(1_500));
    expect(i1Commits).toBe(2);
    // i1's effect happened: it is acknowledged while its commit is retried (a redelivery could only repeat it).
    expect(response.batchItemFailures).toEqual([]);
    expect((await memory.inspect("i2"))?.status).toBe("done");
    await new Promise((resolve) => setTimeout(resolve, 1_600));
    expect((await memory.inspect("i1"))?.status).toBe("done");
  });
});

describe("sqsHandler on a FIFO queue: a copy of an id in another group", () => {
  it("returns the copy's group from the copy on when the first copy is held elsewhere: nothing after it runs or is deleted", async () => {
    const store = new InMemoryStore();
    await store.claim("x-1", 60_000); // another invocation holds x-1
    const ran: string[] = [];
    const handler = sqsHandler({ store, logger: false, handle: async (message) => void ran.push(String(message.meta.id)) });
    const records = [
      sqsRecord(JSON.stringify(envelope("x-1")), { messageId: "m-x-g", group: "g" }),
      sqsRecord(JSON.stringify(envelope("x-1")), { messageId: "m-x-h", group: "h" }),
      sqsRecord(JSON.stringify(envelope("y-1")), { messageId: "m-y-h", group: "h" }),
      sqsRecord(JSON.stringify(envelope("z-1")), { messageId: "m-z-k", group: "k" }),
    ];
    const response = await handler({ Records: records }, lambdaContext());
    expect(response.batchItemFailures.map((one) => one.itemIdentifier)).toEqual(["m-x-g", "m-x-h", "m-y-h"]);
    expect(ran).toEqual(["z-1"]);
    expect(await store.inspect("y-1")).toBeNull();
  });

  it("a copy after its group's first failure is returned with the rest of the group, though its first copy ran", async () => {
    const store = new InMemoryStore();
    const ran: string[] = [];
    const handler = sqsHandler({
      store,
      logger: false,
      handle: async (message) => {
        ran.push(String(message.meta.id));
        if (message.meta.id === "y-2") throw new Error("y-2 fails (scripted)");
      },
    });
    const records = [
      sqsRecord(JSON.stringify(envelope("x-2")), { messageId: "m-x", group: "g" }),
      sqsRecord(JSON.stringify(envelope("y-2")), { messageId: "m-y", group: "g" }),
      sqsRecord(JSON.stringify(envelope("x-2")), { messageId: "m-x-copy", group: "g" }),
      sqsRecord(JSON.stringify(envelope("z-2")), { messageId: "m-z", group: "g" }),
      sqsRecord(JSON.stringify(envelope("w-2")), { messageId: "m-w", group: "h" }),
    ];
    const response = await handler({ Records: records }, lambdaContext());
    // FIFO: nothing after the group's first failure is deleted, or the group's order is broken.
    expect(response.batchItemFailures.map((one) => one.itemIdentifier)).toEqual(["m-y", "m-x-copy", "m-z"]);
    expect(ran.filter((id) => id !== "w-2")).toEqual(["x-2", "y-2"]);
    expect(ran).toContain("w-2");
    // Its effect is committed: the copy comes back as a duplicate, after y-2.
    expect((await store.inspect("x-2"))?.status).toBe("done");
  });
});

