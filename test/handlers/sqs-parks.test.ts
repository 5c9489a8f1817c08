/**
 * `sqsHandler`'s `parks`: a record parked behind another delivery's lease gets its visibility set
 * to the lease's remaining time (+ margin) with `ChangeMessageVisibilityBatch`, sent by the real
 * `@aws-sdk/client-sqs` over HTTP to a loopback stand-in of that one SQS call
 * (support/sqs-visibility-server.ts: no SQS emulator installs here); nothing acknowledged or merely
 * failed is touched, a refused change is logged and changes nothing else, and the option is checked.
 * The receives it saves are measured in test/reliability/parks.test.ts.
 */
import { type AddressInfo, type Socket, createServer } from "node:net";
import { SQSClient } from "@aws-sdk/client-sqs";
import type { SQSEvent } from "aws-lambda";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InMemoryStore, InvalidOptionError } from "../../entry/index.js";
import { sqsHandler } from "../../entry/lambda.js";
import { sqsParks } from "../../entry/lambda-parks.js";
import { type ParkOutcome, parkChanges, queueUrlOf } from "../../handlers/sqs-parks.js";
import { FIFO_QUEUE_ARN, lambdaContext, sqsRecord } from "../../scripts/lambda-events.js";
import { caught } from "../support/caught.js";
import { envelopeBody } from "../support/envelopes.js";
import { type VisibilityServer, startVisibilityServer } from "../support/sqs-visibility-server.js";

let server: VisibilityServer;
let client: SQSClient;

beforeAll(async () => {
  server = await startVisibilityServer();
  client = new SQSClient({
    endpoint: server.endpoint,
    region: "us-east-1",
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
    useQueueUrlAsEndpoint: false,
    maxAttempts: 1,
  });
});
afterAll(async () => {
  client.destroy();
  await server.close();
});

const event = (ids: string[]): SQSEvent => ({ Records: ids.map((id) => sqsRecord(envelopeBody(id))) });

describe("parks come back when the lease ends", () => {
  it("a parked record's visibility becomes the lease's remaining time + 1 s; the response still reports it", async () => {
    const store = new InMemoryStore();
    const held = await store.claim("held", 30_000);
    expect(held.status).toBe("claimed");
    const handler = sqsHandler({ store, handle: () => undefined, logger: false, parks: sqsParks({ client }) });
    const before = server.requests.length;
    const batch = event(["held", "free"]);
    const response = await handler(batch, lambdaContext());
    const parked = batch.Records[0] as SQSEvent["Records"][number];
    expect(response.batchItemFailures).toEqual([{ itemIdentifier: parked.messageId }]);
    const sent = server.requests.slice(before);
    expect(sent).toHaveLength(1);
    expect(sent[0]?.queueUrl).toBe("https://sqs.us-east-1.amazonaws.com/123456789012/orders");
    expect(sent[0]?.entries).toHaveLength(1);
    expect(sent[0]?.entries[0]?.ReceiptHandle).toBe(parked.receiptHandle);
    // 30 s lease, a few ms gone: ceil(≈29.99) + 1.
    expect(sent[0]?.entries[0]?.VisibilityTimeout).toBe(31);
  });

  it("12 parks: two requests (10 + 2), marginSeconds honoured, ids unique per request", async () => {
    const store = new InMemoryStore();
    const ids = Array.from({ length: 12 }, (_, i) => `p-${i}`);
    for (const id of ids) await store.claim(id, 5_000);
    const handler = sqsHandler({ store, handle: () => undefined, logger: false, parks: sqsParks({ client, marginSeconds: 0 }) });
    const before = server.requests.length;
    const response = await handler(event(ids), lambdaContext());
    expect(response.batchItemFailures).toHaveLength(12);
    const sent = server.requests.slice(before);
    expect(sent.map((request) => request.entries.length).sort()).toEqual([10, 2].sort());
    for (const request of sent) {
      expect(new Set(request.entries.map((entry) => entry.Id)).size).toBe(request.entries.length);
      for (const entry of request.entries) expect(entry.VisibilityTimeout).toBe(5);
    }
  });

  it("no request when nothing parks: acknowledged, failed and invalid records keep the queue's visibility", async () => {
    const store = new InMemoryStore();
    const handler = sqsHandler({
      store,
      handle: (_m, ctx) => {
        if (ctx.key === "boom") throw new Error("handler failed");
      },
      logger: false,
      parks: sqsParks({ client }),
    });
    const before = server.requests.length;
    const response = await handler({ Records: [sqsRecord(envelopeBody("ok")), sqsRecord(envelopeBody("boom")), sqsRecord("not json")] }, lambdaContext());
    expect(response.batchItemFailures).toHaveLength(2);
    expect(server.requests.length).toBe(before);
  });

  it("a refused change is logged (never the receipt handle) and changes nothing else", async () => {
    const store = new InMemoryStore();
    await store.claim("refused", 10_000);
    const batch = event(["refused"]);
    const record = batch.Records[0] as SQSEvent["Records"][number];
    server.refuse.add(record.receiptHandle);
    const warnings: unknown[][] = [];
    const logger = { info: () => undefined, warn: (...args: unknown[]) => void warnings.push(args), error: () => undefined };
    const handler = sqsHandler({ store, handle: () => undefined, logger, parks: sqsParks({ client }) });
    const response = await handler(batch, lambdaContext());
    expect(response.batchItemFailures).toEqual([{ itemIdentifier: record.messageId }]);
    const parkWarnings = warnings.filter(([message]) => String(message).startsWith("parks:"));
    expect(parkWarnings).toHaveLength(1);
    expect(parkWarnings[0]?.[1]).toMatchObject({ failed: 1, changed: 0, queue: "orders" });
    expect(JSON.stringify(parkWarnings)).not.toContain(record.receiptHandle);
  });

  it("SQS unreachable: the batch answers as without parks", async () => {
    const down = new SQSClient({ endpoint: "http://127.0.0.1:9", region: "us-east-1", credentials: { accessKeyId: "t", secretAccessKey: "t" }, useQueueUrlAsEndpoint: false, maxAttempts: 1 });
    const store = new InMemoryStore();
    await store.claim("down", 10_000);
    const handler = sqsHandler({ store, handle: () => undefined, logger: false, parks: sqsParks({ client: down }) });
    const batch = event(["down", "up"]);
    const response = await handler(batch, lambdaContext());
    expect(response.batchItemFailures).toEqual([{ itemIdentifier: (batch.Records[0] as SQSEvent["Records"][number]).messageId }]);
    down.destroy();
  });

  /** A real TCP endpoint that accepts the connection and never answers: the black hole a throttled or partitioned SQS endpoint is. */
  async function stalledSqs(): Promise<{ client: SQSClient; close(): Promise<void> }> {
    const sockets: Socket[] = [];
    const stall = createServer((socket) => void sockets.push(socket));
    await new Promise<void>((resolve) => stall.listen(0, "127.0.0.1", resolve));
    const endpoint = `http://127.0.0.1:${(stall.address() as AddressInfo).port}`;
    // The SDK has no request timeout by default, so the call hangs.
    const client = new SQSClient({ endpoint, region: "us-east-1", credentials: { accessKeyId: "t", secretAccessKey: "t" }, useQueueUrlAsEndpoint: false, maxAttempts: 1 });
    return {
      client,
      close: async () => {
        client.destroy();
        for (const socket of sockets) socket.destroy();
        await new Promise((resolve) => stall.close(resolve));
      },
    };
  }

  it("SQS stalled (accepts, never answers): the batch still answers before the Lambda deadline, as without parks", async () => {
    const stalled = await stalledSqs();
    try {
      const store = new InMemoryStore();
      await store.claim("stalled", 30_000);
      const handler = sqsHandler({ store, handle: () => undefined, logger: false, parks: sqsParks({ client: stalled.client }) });
      const batch = event(["stalled", "runs"]);
      const remaining = 2_000;
      const started = Date.now();
      const answer = await Promise.race([handler(batch, lambdaContext(remaining)), new Promise<"killed">((resolve) => setTimeout(() => resolve("killed"), remaining))]);
      // Past the deadline Lambda kills the invocation and the whole batch comes back, "runs" included.
      expect(answer).toEqual({ batchItemFailures: [{ itemIdentifier: (batch.Records[0] as SQSEvent["Records"][number]).messageId }] });
      expect(Date.now() - started).toBeLessThan(remaining);
      expect((await store.inspect("runs"))?.status).toBe("done");
    } finally {
      await stalled.close();
    }
  });

  it("SQS stalled, and the engine answering right at the deadline (deadlineMarginMs 0): the parks get no time, the batch still answers", async () => {
    const stalled = await stalledSqs();
    try {
      const store = new InMemoryStore();
      await store.claim("stalled", 30_000);
      const handler = sqsHandler({
        store,
        logger: false,
        deadlineMarginMs: 0,
        parks: sqsParks({ client: stalled.client }),
        // A slow neighbour, still running at the deadline: the engine answers when the time is up.
        handle: (_message, ctx) => (ctx.key === "slow" ? new Promise((resolve) => setTimeout(resolve, 1_500)) : undefined),
      });
      const batch = event(["stalled", "slow"]);
      const remaining = 300;
      const answer = await Promise.race([handler(batch, lambdaContext(remaining)), new Promise<"hung">((resolve) => setTimeout(() => resolve("hung"), remaining + 1_000))]);
      expect(answer).not.toBe("hung");
      expect((answer as { batchItemFailures: unknown[] }).batchItemFailures).toHaveLength(2);
    } finally {
      await stalled.close();
    }
  });

  it("the options are checked when the extension and the handler are built", () => {
    const store = new InMemoryStore();
    const handle = () => undefined;
    expect((caught(() => sqsParks({} as never)) as InvalidOptionError).option).toBe("parks.client");
    expect((caught(() => sqsParks(undefined as never)) as InvalidOptionError).option).toBe("parks");
    expect((caught(() => sqsParks({ client, marginSeconds: -1 })) as InvalidOptionError).option).toBe("parks.marginSeconds");
    expect((caught(() => sqsParks({ client, margin: 1 } as never)) as InvalidOptionError).option).toBe("margin");
    expect(caught(() => sqsParks({ client, marginSeconds: 61 }))).toBeInstanceOf(InvalidOptionError);
    expect(sqsParks({ client, marginSeconds: 60 }).park).toBeTypeOf("function");
    // The handler takes the extension, not its options (the shape of the first release of parks).
    const legacy = caught(() => sqsHandler({ store, handle, parks: { client } as never })) as InvalidOptionError;
    expect(legacy).toBeInstanceOf(InvalidOptionError);
    expect([legacy.option, legacy.message]).toEqual(["parks", expect.stringContaining("sqsParks({ client })")]);
    expect(() => sqsHandler({ store, handle, parks: false })).not.toThrow();
  });

  it("an extension that throws changes nothing of the batch's answer (logged, by name only)", async () => {
    const store = new InMemoryStore();
    const lines: unknown[][] = [];
    const logger = { info: () => undefined, warn: (...args: unknown[]) => lines.push(args), error: () => undefined };
    const throwing = { park: () => Promise.reject(new TypeError("receipt-handle-secret")) };
    const handler = sqsHandler({ store, handle: () => undefined, logger, parks: throwing });
    const response = await handler(event(["a", "b"]), lambdaContext());
    expect(response.batchItemFailures).toEqual([]);
    expect(lines).toHaveLength(1);
    expect(lines[0]?.[1]).toMatchObject({ failed: 2, changed: 0, error: { name: "TypeError" } });
    expect(JSON.stringify(lines)).not.toContain("receipt-handle-secret");
  });

  it("an extension that throws at once, or answers no outcome, changes nothing of the answer either: no effect runs twice", async () => {
    const extensions = [
      { label: "throws at once", park: (): Promise<never> => {
          throw new TypeError("receipt-handle-secret");
        }, logged: 1 },
      { label: "answers nothing", park: () => Promise.resolve(undefined as unknown as ParkOutcome), logged: 0 },
    ];
    for (const { label, park, logged } of extensions) {
      const store = new InMemoryStore();
      const lines: unknown[][] = [];
      const logger = { info: () => undefined, warn: (...args: unknown[]) => lines.push(args), error: () => undefined };
      const runs: string[] = [];
      const handler = sqsHandler({ store, handle: (envelope) => void runs.push(envelope.job), logger, parks: { park } });
      // One record with an id, one without (it runs without dedupe: a whole-batch failure would run it again).
      const noId = sqsRecord(JSON.stringify({ job: "no-id", trace_id: "t", data: {}, meta: { schema_version: 1 }, attempts: 0 }), { messageId: "m-no-id" });
      const response = await handler({ Records: [sqsRecord(envelopeBody("k1")), noId] }, lambdaContext());
      expect(response.batchItemFailures, label).toEqual([]);
      expect(runs.sort(), label).toEqual(["no-id", "urn:babel:test:job"]);
      expect(lines, label).toHaveLength(logged);
      if (logged > 0) expect(lines[0]?.[1], label).toMatchObject({ failed: 2, changed: 0, error: { name: "TypeError" } });
      expect(JSON.stringify(lines), label).not.toContain("receipt-handle-secret");
    }
  });
});

describe("parkChanges and queueUrlOf", () => {
  const record = (arn = "arn:aws:sqs:eu-west-1:123456789012:jobs") => sqsRecord(envelopeBody("x"), { arn });

  it("queue URLs from ARNs: aws, aws-cn, FIFO; anything else has none", () => {
    expect(queueUrlOf("arn:aws:sqs:eu-west-1:123456789012:jobs")).toBe("https://sqs.eu-west-1.amazonaws.com/123456789012/jobs");
    expect(queueUrlOf("arn:aws-cn:sqs:cn-north-1:123456789012:jobs")).toBe("https://sqs.cn-north-1.amazonaws.com.cn/123456789012/jobs");
    expect(queueUrlOf(FIFO_QUEUE_ARN)).toBe("https://sqs.us-east-1.amazonaws.com/123456789012/orders.fifo");
    for (const bad of [undefined, 1, "", "arn:aws:sns:us-east-1:123456789012:t", "arn:aws:sqs:us-east-1:12:x"]) expect(queueUrlOf(bad)).toBeUndefined();
  });

  it("only parks with a lease: in-flight, not acked, retryAfterMs > 0; capped at 12 hours", () => {
    const r = record();
    const park = (retryAfterMs: number) => ({ status: "in-flight" as const, ack: false, dedupe: "claim" as const, handlerRan: false, retryAfterMs });
    expect(parkChanges([r], [park(1_500)], 1)).toEqual([{ queueUrl: "https://sqs.eu-west-1.amazonaws.com/123456789012/jobs", messageId: r.messageId, receiptHandle: r.receiptHandle, seconds: 3 }]);
    expect(parkChanges([r], [park(0)], 1)).toEqual([]);
    expect(parkChanges([r], [{ ...park(1_000), ack: true }], 1)).toEqual([]);
    expect(parkChanges([r], [{ status: "failed", ack: false, dedupe: "claim", handlerRan: true }], 1)).toEqual([]);
    expect(parkChanges([r], [undefined], 1)).toEqual([]);
    expect(parkChanges([r], [park(100 * 3_600_000)], 1)[0]?.seconds).toBe(43_200);
    expect(parkChanges([record("not an arn")], [park(1_000)], 1)).toEqual([]);
  });
});
