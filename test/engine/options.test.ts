/**
 * BatchEngine's options as a person meets them (src/engine/settings.ts): the exact message of every
 * refused option, the fingerprint switch, each interceptor on its own, and what a batch's own
 * observer is told. Whole-message assertions: a message is what the person reads.
 */
import { describe, expect, it } from "vitest";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoDBStore, TransactionalDynamoDBStore } from "../../entry/dynamodb.js";
import { type Store, isTransactionalStore } from "../../src/contract.js";
import { BatchEngine } from "../../src/engine/index.js";
import { InvalidOptionError } from "../../src/errors.js";
import type { EngineEvent, RunInfo } from "../../src/events.js";
import { InMemoryStore } from "../../src/memory-store.js";
import { caught } from "../support/caught.js";
import { envelopeBody } from "../support/envelopes.js";

const body = (id: string) => envelopeBody(id, { job: "urn:babel:options" });
const one = (id = "a") => [{ body: body(id), context: {} }];

function refusal(make: () => unknown): [string, string] {
  const error = caught(make);
  expect(error).toBeInstanceOf(InvalidOptionError);
  return [(error as InvalidOptionError).option, (error as Error).message];
}

describe("refused options, message by message", () => {
  const store = new InMemoryStore();
  const handle = () => {};

  it("the store and the handler", () => {
    const storeMessage = 'option "store" must implement seen, remember and forget';
    expect(refusal(() => new BatchEngine(undefined as unknown as Store, handle))).toEqual(["store", storeMessage]);
    expect(refusal(() => new BatchEngine(null as unknown as Store, handle))).toEqual(["store", storeMessage]);
    const partial = (drop: "seen" | "remember" | "forget") => {
      const s: Record<string, unknown> = { seen: () => false, remember: () => {}, forget: () => {} };
      delete s[drop];
      return s as unknown as Store;
    };
    for (const drop of ["seen", "remember", "forget"] as const) expect(refusal(() => new BatchEngine(partial(drop), handle))).toEqual(["store", storeMessage]);
    expect(refusal(() => new BatchEngine(store, "run" as never))).toEqual(["handle", 'option "handle" must be a function']);
  });

  it("integers, with their bounds in the message", () => {
    expect(refusal(() => new BatchEngine(store, handle, { concurrency: 0 }))).toEqual(["concurrency", `option "concurrency" must be an integer from 1 to ${Number.MAX_SAFE_INTEGER}`]);
    expect(refusal(() => new BatchEngine(store, handle, { commitRetries: 11 }))).toEqual(["commitRetries", 'option "commitRetries" must be an integer from 0 to 10']);
    expect(refusal(() => new BatchEngine(store, handle, { commitLingerMs: 1.5 }))).toEqual(["commitLingerMs", 'option "commitLingerMs" must be an integer from 0 to 1000']);
    expect(refusal(() => new BatchEngine(store, handle, { deadlineMarginMs: -1 }))).toEqual(["deadlineMarginMs", 'option "deadlineMarginMs" must be an integer from 0 to 60000']);
  });

  it("choices, each allowed value quoted", () => {
    expect(refusal(() => new BatchEngine(store, handle, { onStoreError: "ignore" as never }))).toEqual(["onStoreError", 'option "onStoreError" must be "retry" or "run"']);
    expect(refusal(() => new BatchEngine(store, handle, { onInvalid: "skip" as never }))).toEqual(["onInvalid", 'option "onInvalid" must be "retry" or "drop"']);
    expect(refusal(() => new BatchEngine(store, handle, { onConflict: "" as never }))).toEqual(["onConflict", 'option "onConflict" must be "retry" or "drop"']);
  });

  it("fingerprint, transactional and a batch's deadline", () => {
    expect(refusal(() => new BatchEngine(store, handle, { fingerprint: true as never }))).toEqual(["fingerprint", 'option "fingerprint" must be a function of the message, or false']);
    expect(refusal(() => new BatchEngine(store, handle, { transactional: true }))).toEqual([
      "transactional",
      'option "transactional" needs a store with transact() (TransactionalDynamoDBStore, PostgresStore, D1Store)',
    ]);
    const engine = new BatchEngine(store, handle);
    return expect(engine.process(one(), { deadline: Number.NaN })).rejects.toThrow('option "deadline" must be an epoch time in ms');
  });

  it("transactional mode on DynamoDB is TransactionalDynamoDBStore's: a plain DynamoDBStore (kept lean of the transaction code) is refused", () => {
    const client = new DynamoDBClient({ region: "us-east-1", credentials: { accessKeyId: "x", secretAccessKey: "x" } });
    const plain = new DynamoDBStore({ table: "t", client });
    expect(isTransactionalStore(plain)).toBe(false);
    expect(refusal(() => new BatchEngine(plain, handle, { transactional: true }))[0]).toBe("transactional");
    const transactional = new TransactionalDynamoDBStore({ table: "t", client });
    expect(transactional).toBeInstanceOf(DynamoDBStore);
    expect(isTransactionalStore(transactional)).toBe(true);
    expect(() => new BatchEngine(transactional, handle, { transactional: true })).not.toThrow();
  });
});

describe("the fingerprint switch", () => {
  it("default: the stored record carries the payload's fingerprint; false: no fingerprint is stored or compared", async () => {
    const withPrint = new InMemoryStore();
    await new BatchEngine(withPrint, () => {}).process(one());
    expect((await withPrint.inspect("a"))?.fingerprint).toMatch(/^h1:[A-Za-z0-9_-]{22}$/);

    const without = new InMemoryStore();
    await new BatchEngine(without, () => {}, { fingerprint: false }).process(one());
    const record = await without.inspect("a");
    expect(record?.status).toBe("done");
    expect(record?.fingerprint).toBeUndefined();
    // Not compared either: another payload under the same id is a plain duplicate.
    const [again] = await new BatchEngine(withPrint, () => {}, { fingerprint: false }).process([
      { body: envelopeBody("a", { job: "urn:babel:other", traceId: "t", data: { other: 1 } }), context: {} },
    ]);
    expect(again?.status).toBe("duplicate");
  });
});

describe("interceptors on their own", () => {
  it("only the engine's, or only the batch's: each wraps the run, once", async () => {
    const calls: string[] = [];
    const tag = (name: string) => async (run: () => Promise<void>, info: RunInfo) => {
      calls.push(`${name}:${info.key}`);
      await run();
    };
    const engineOnly = new BatchEngine(new InMemoryStore(), () => void calls.push("handler"), { intercept: tag("engine") });
    expect((await engineOnly.process(one("e")))[0]?.status).toBe("ran");
    const batchOnly = new BatchEngine(new InMemoryStore(), () => void calls.push("handler"));
    expect((await batchOnly.process(one("b"), { intercept: tag("batch") }))[0]?.status).toBe("ran");
    expect(calls).toEqual(["engine:e", "handler", "batch:b", "handler"]);
  });
});

describe("a batch's own observer", () => {
  it("gets every event of its batch, store steps included, and a batch-end with a sane duration", async () => {
    const engineEvents: EngineEvent[] = [];
    const batchEvents: EngineEvent[] = [];
    const engine = new BatchEngine(new InMemoryStore(), () => {}, { observe: (e) => void engineEvents.push(e) });
    await engine.process(one(), { observe: (e) => void batchEvents.push(e) });
    const kinds = (events: EngineEvent[]) => events.map((e) => (e.type === "store-step" ? `${e.type}:${e.step}` : e.type));
    expect(kinds(batchEvents)).toEqual(["batch-start", "store-step:claim", "store-step:commit", "result", "batch-end"]);
    expect(kinds(engineEvents)).toEqual(kinds(batchEvents));
    const end = batchEvents.at(-1) as Extract<EngineEvent, { type: "batch-end" }>;
    expect([end.size, end.pending]).toEqual([1, 0]);
    expect(end.durationMs).toBeGreaterThanOrEqual(0);
    expect(end.durationMs).toBeLessThan(60_000);
  });
});
