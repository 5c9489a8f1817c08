/**
 * Outcome logs: one line per non-`ran` delivery and per store error, from synthetic event
 * sequences and through the batch engine on InMemoryStore and on DynamoDB Local (a real store
 * outage: a closed port). Never a body, a token, a credential or an error message.
 */
import { Logger } from "@aws-lambda-powertools/logger";
import { pino } from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import { GroupBlockedError, InvalidMessageError, PayloadConflictError, StoreUnavailableError } from "../../src/errors.js";
import { InMemoryStore } from "../../src/memory-store.js";
import { createObservability, jsonLogger, type LoggerLike, outcomeLogger } from "../../src/observability/index.js";
import { fieldsFirst } from "../../src/observability/log.js";
import { DynamoDBStore } from "../../entry/dynamodb.js";
import { freePort, localClientConfig } from "../../scripts/dynamodb-local.mjs";
import { body, recordingLogger, result, runBatch } from "./harness.js";

const SECRET = "card-4111-1111-1111-1111";
/** The line of `result(0, "in-flight", { key: "p", messageId: "m-p", attempts: 1, retryAfterMs: 1500 })` on queue "orders". */
const IN_FLIGHT_MESSAGE = "in flight: another delivery holds this id, retried later";
const IN_FLIGHT_FIELDS = { status: "in-flight", key: "p", messageId: "m-p", attempts: 1, retryAfterMs: 1500, queue: "orders" };

afterEach(() => {
  vi.restoreAllMocks();
});

describe("outcome lines from synthetic events", () => {
  it("logs every status but ran, at its level, with key, status, attempts and message id", () => {
    const { lines, logger } = recordingLogger();
    const observe = outcomeLogger(logger, "orders");
    if (observe === undefined) throw new Error("logger on");
    const statuses = ["ran", "duplicate", "in-flight", "failed", "invalid", "conflict", "commit-failed"];
    statuses.forEach((status, i) => {
      observe(result(i, status, { key: `id-${i}`, messageId: `m-${i}`, attempts: i }));
    });
    expect(lines.map((line) => [line.fields.status, line.level])).toEqual([
      ["duplicate", "info"],
      ["in-flight", "info"],
      ["failed", "warn"],
      ["invalid", "warn"],
      ["conflict", "error"],
      ["commit-failed", "error"],
    ]);
    expect(lines[0]?.fields).toEqual({
      logger: "babelqueue-serverless",
      status: "duplicate",
      key: "id-1",
      messageId: "m-1",
      attempts: 1,
      ack: true,
      dedupe: "claim",
      handlerRan: false,
      queue: "orders",
    });
  });

  it("says an error's name, code and this package's payload-free details, never its message", () => {
    const { lines, logger } = recordingLogger();
    const observe = outcomeLogger(logger) as NonNullable<ReturnType<typeof outcomeLogger>>;
    const handlerError = Object.assign(new TypeError(`declined ${SECRET}`), { code: "DECLINED" });
    observe(result(0, "failed", { key: "a", error: handlerError }));
    observe(result(1, "invalid", { error: new InvalidMessageError("'data' must be an object") }));
    observe(result(2, "conflict", { key: "c", error: new PayloadConflictError("c", "done", "fp-stored", "fp-new") }));
    observe(result(3, "failed", { key: "d", handlerRan: false, error: new GroupBlockedError("group-7") }));
    const outage = new StoreUnavailableError("dynamodb", "claim", `connect ECONNREFUSED ${SECRET}`, {
      cause: Object.assign(new Error(`getaddrinfo ${SECRET}`), { code: "ECONNREFUSED" }),
    });
    observe({ type: "store-error", step: "claim", ids: 4, error: outage });
    observe({ type: "store-error", step: "release", ids: 1, error: outage });

    expect(lines.map((line) => line.fields.error)).toEqual([
      { name: "TypeError", code: "DECLINED" },
      { name: "InvalidMessageError", code: "INVALID_MESSAGE", reason: "'data' must be an object" },
      { name: "PayloadConflictError", code: "PAYLOAD_CONFLICT", state: "done", storedFingerprint: "fp-stored", receivedFingerprint: "fp-new" },
      { name: "GroupBlockedError", code: "GROUP_BLOCKED", group: "group-7" },
      { name: "StoreUnavailableError", code: "STORE_UNAVAILABLE", store: "dynamodb", operation: "claim", cause: { name: "Error", code: "ECONNREFUSED" } },
      { name: "StoreUnavailableError", code: "STORE_UNAVAILABLE", store: "dynamodb", operation: "claim", cause: { name: "Error", code: "ECONNREFUSED" } },
    ]);
    // A FIFO-blocked message is the consequence of another failure: info, not warn.
    expect(lines[3]?.level).toBe("info");
    expect(lines.slice(4).map((line) => [line.level, line.fields.step, line.fields.ids, line.message])).toEqual([
      ["error", "claim", 4, "idempotency store claim failed for 4 id(s)"],
      ["warn", "release", 1, "idempotency store release failed for 1 id(s)"],
    ]);
    expect(JSON.stringify(lines)).not.toContain("4111");
  });

  it("cuts a long key, ignores a hostile error and a throwing logger", () => {
    const { lines, logger } = recordingLogger();
    const observe = outcomeLogger(logger) as NonNullable<ReturnType<typeof outcomeLogger>>;
    observe(result(0, "duplicate", { key: "k".repeat(1000) }));
    expect(lines[0]?.fields.key).toBe(`${"k".repeat(256)}…`);
    const hostile = new Proxy(new Error("x"), {
      getOwnPropertyDescriptor() {
        throw new Error("trap");
      },
    });
    observe(result(1, "failed", { key: "h", error: hostile }));
    expect(lines[1]?.fields.error).toEqual({ name: "Error" });
    observe(result(2, "failed", { key: "s", error: "a thrown string" }));
    expect(lines[2]?.fields.error).toEqual({ name: "string" });

    const throwing: LoggerLike = {
      info: () => {
        throw new Error("logger down");
      },
      warn: () => undefined,
      error: () => undefined,
    };
    expect(() => outcomeLogger(throwing)?.(result(0, "duplicate", { key: "x" }))).not.toThrow();
    expect(outcomeLogger(false)).toBeUndefined();
  });

  it("jsonLogger (the default) writes one JSON object per line, info to stdout, warn and error to stderr", () => {
    const out = vi.spyOn(process.stdout, "write").mockImplementation(() => true);
    const err = vi.spyOn(process.stderr, "write").mockImplementation(() => true);
    const observe = outcomeLogger(undefined, "orders") as NonNullable<ReturnType<typeof outcomeLogger>>;
    observe(result(0, "duplicate", { key: "a", messageId: "m-a", attempts: 2 }));
    observe(result(1, "commit-failed", { key: "b", error: new StoreUnavailableError("dynamodb", "rememberMany", "timeout") }));
    expect(out).toHaveBeenCalledTimes(1);
    expect(err).toHaveBeenCalledTimes(1);
    const info = JSON.parse(String(out.mock.calls[0]?.[0])) as Record<string, unknown>;
    expect(String(out.mock.calls[0]?.[0]).endsWith("}\n")).toBe(true);
    expect(info).toMatchObject({ level: "INFO", logger: "babelqueue-serverless", status: "duplicate", key: "a", messageId: "m-a", attempts: 2, queue: "orders" });
    expect(typeof info.timestamp).toBe("string");
    const error = JSON.parse(String(err.mock.calls[0]?.[0])) as Record<string, unknown>;
    expect(error).toMatchObject({ level: "ERROR", status: "commit-failed", error: { name: "StoreUnavailableError", store: "dynamodb" } });

    const written: string[] = [];
    jsonLogger((level, line) => written.push(`${level} ${line}`)).warn("m", { a: 1 }, "ignored", [2]);
    expect(written).toHaveLength(1);
    expect(JSON.parse(written[0]?.slice(5) ?? "")).toMatchObject({ level: "WARN", message: "m", a: 1 });
  });

  it("routes the fields into a Powertools Logger's own JSON line", () => {
    const out: string[] = [];
    vi.spyOn(process.stdout, "write").mockImplementation((chunk) => {
      out.push(String(chunk));
      return true;
    });
    vi.spyOn(process.stderr, "write").mockImplementation((chunk) => {
      out.push(String(chunk));
      return true;
    });
    const logger = new Logger({ serviceName: "orders-consumer" });
    const observe = outcomeLogger(logger, "orders") as NonNullable<ReturnType<typeof outcomeLogger>>;
    observe(result(0, "in-flight", { key: "p", messageId: "m-p", attempts: 1, retryAfterMs: 1500 }));
    const line = JSON.parse(out.join("").trim().split("\n").at(-1) ?? "{}") as Record<string, unknown>;
    expect(line).toMatchObject({ level: "INFO", service: "orders-consumer", message: IN_FLIGHT_MESSAGE, ...IN_FLIGHT_FIELDS });
  });

  it("gives pino its own order, fields first: every field lands in pino's JSON line, the message as msg", () => {
    const out: string[] = [];
    const logger = pino({ base: { service: "orders-consumer" } }, { write: (chunk: string) => out.push(chunk) });
    // Through the handler's option path, the way users pass it (type-checked as a LoggerLike).
    const batch = createObservability({ logger }, { system: "aws_sqs" }).batch({ queue: "orders" });
    batch.observe(result(0, "in-flight", { key: "p", messageId: "m-p", attempts: 1, retryAfterMs: 1500 }));
    batch.observe(result(1, "failed", { key: "q", error: Object.assign(new TypeError(`declined ${SECRET}`), { code: "DECLINED" }) }));
    // A child logger is a pino logger too.
    outcomeLogger(logger.child({ invocation: "i-1" }))?.(result(2, "duplicate", { key: "r" }));
    const lines = out.map((chunk) => JSON.parse(chunk) as Record<string, unknown>);
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatchObject({ level: 30, service: "orders-consumer", msg: IN_FLIGHT_MESSAGE, logger: "babelqueue-serverless", ...IN_FLIGHT_FIELDS });
    expect(lines[1]).toMatchObject({ level: 40, msg: "handler failed, retried", status: "failed", key: "q", error: { name: "TypeError", code: "DECLINED" } });
    expect(lines[2]).toMatchObject({ level: 30, invocation: "i-1", status: "duplicate", key: "r" });
    expect(out.join("")).not.toContain(SECRET);
  });

  it("takes only pino's shape for fields-first: levels.values and bindings(), both", () => {
    const calls: unknown[][] = [];
    const record = (...args: unknown[]) => void calls.push(args);
    const base = { info: record, warn: record, error: record };
    expect(fieldsFirst(pino({}, { write: () => undefined }))).toBe(true);
    // winston has a `levels` table of numbers, bunyan a levels() method, neither pino's levels.values with bindings().
    for (const logger of [
      { ...base, levels: { error: 0, warn: 1, info: 2 } },
      { ...base, levels: { values: { warn: 40 } } },
      { ...base, bindings: () => ({}) },
      { ...base, bindings: () => ({}), levels: { values: null } },
      { ...base, bindings: {}, levels: { values: { warn: 40 } } },
      console,
      new Logger(),
    ]) {
      expect(fieldsFirst(logger as LoggerLike)).toBe(false);
    }
    outcomeLogger({ ...base, levels: { values: { warn: 40 } } } as LoggerLike)?.(result(0, "duplicate", { key: "k" }));
    expect(calls[0]?.[0]).toBe("duplicate: already done, acknowledged without running");
  });

  it("rejects a logger option that is not one", () => {
    expect(() => createObservability({ logger: {} as LoggerLike }, { system: "aws_sqs" })).toThrow(/option "logger"/);
    expect(() => createObservability({ logger: console }, { system: "aws_sqs" })).not.toThrow();
  });
});

describe("outcome lines through the batch engine", () => {
  it("on InMemoryStore: one line per duplicate, in-flight, failed and invalid delivery; none for ran", async () => {
    const store = new InMemoryStore({ namespace: "log" });
    await store.remember("done-before");
    const held = await store.claim("held-elsewhere", 30_000);
    expect(held.status).toBe("claimed");
    const { lines, logger } = recordingLogger();
    const observation = createObservability({ logger }, { system: "aws_sqs" }).batch({ queue: "orders", size: 5 });
    const results = await runBatch(
      store,
      (message) => {
        if (message.data.mode === "throw") throw new Error(`declined ${SECRET}`);
      },
      [
        { body: body("fresh"), messageId: "m0" },
        { body: body("done-before"), messageId: "m1", redeliveries: 2 },
        { body: body("held-elsewhere"), messageId: "m2" },
        { body: body("throws", { mode: "throw", card: SECRET }), messageId: "m3" },
        { body: `{"not": "an envelope", "card": "${SECRET}"}`, messageId: "m4" },
      ],
      observation,
    );
    expect(results.map((r) => r.status)).toEqual(["ran", "duplicate", "in-flight", "failed", "invalid"]);
    // In the order the fates became final: the invalid body at decoding, the gate's verdicts, then the handler's.
    expect(lines.map((line) => [line.fields.status, line.fields.key, line.fields.messageId, line.level])).toEqual([
      ["invalid", undefined, "m4", "warn"],
      ["duplicate", "done-before", "m1", "info"],
      ["in-flight", "held-elsewhere", "m2", "info"],
      ["failed", "throws", "m3", "warn"],
    ]);
    expect(lines[1]?.fields.attempts).toBe(2);
    expect(lines[2]?.fields.retryAfterMs).toBeGreaterThan(25_000);
    expect(lines[3]?.fields.error).toEqual({ name: "Error" });
    expect(lines[0]?.fields.error).toMatchObject({ code: "INVALID_MESSAGE", reason: "no 'job' or 'urn': the message has no identity" });
    expect(JSON.stringify(lines)).not.toContain("4111");
  });

  it("on DynamoDB with the endpoint down: a store-error line and failed lines, no credential, no key in an error", async () => {
    const port = await freePort();
    const store = new DynamoDBStore({
      table: "unreachable",
      namespace: "log",
      clientConfig: localClientConfig(`http://127.0.0.1:${port}`, { maxAttempts: 1, credentials: { accessKeyId: "AKIATESTKEYID", secretAccessKey: SECRET } }),
    });
    const { lines, logger } = recordingLogger();
    const observation = createObservability({ logger }, { system: "aws_sqs" }).batch({ queue: "orders" });
    const results = await runBatch(store, () => undefined, [{ body: body("outage-a"), messageId: "ma" }, { body: body("outage-b"), messageId: "mb" }], observation);
    expect(results.map((r) => [r.status, r.handlerRan])).toEqual([
      ["failed", false],
      ["failed", false],
    ]);
    const storeErrors = lines.filter((line) => line.fields.status === "store-error");
    expect(storeErrors).toHaveLength(1);
    expect(storeErrors[0]).toMatchObject({ level: "error", fields: { step: "claim", ids: 2, error: { name: "StoreUnavailableError", code: "STORE_UNAVAILABLE", store: "DynamoDBStore" } } });
    const failed = lines.filter((line) => line.fields.status === "failed");
    expect(failed.map((line) => [line.fields.key, line.message])).toEqual([
      ["outage-a", "not run: the store could not answer, retried"],
      ["outage-b", "not run: the store could not answer, retried"],
    ]);
    const text = JSON.stringify(lines);
    expect(text).not.toContain("AKIATESTKEYID");
    expect(text).not.toContain("4111");
    expect(text).not.toContain(String(port));
  });
});

