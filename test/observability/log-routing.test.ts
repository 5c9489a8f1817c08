/**
 * Where this package's lines go: every line (outcomes, the SQS parks' warning, a Worker batch that
 * failed before a decision) through the one `lineLogger`, so each honours `logger: false`, a pino
 * logger's fields-first order and a logger whose shape cannot be read; the wording of the lines
 * the deadline and the fence give; and an engine given no `observe` when nothing listens.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { queueHandler } from "../../handlers/cloudflare-queue.js";
import { sqsHandler } from "../../handlers/lambda-sqs.js";
import { lambdaContext, sqsRecord } from "../../scripts/lambda-events.js";
import { DeadlineExceededError, FenceLostError, TransactionConditionError } from "../../src/errors.js";
import { InMemoryStore } from "../../src/memory-store.js";
import { createObservability, engineHooks } from "../../src/observability/index.js";
import { lineLogger, resultLine } from "../../src/observability/log.js";
import { body, recordingLogger, result } from "./harness.js";

afterEach(() => {
  vi.restoreAllMocks();
});

/** A pino-shaped logger (fields first), recording its calls. */
function pinoLike() {
  const calls: { level: string; args: unknown[] }[] = [];
  const at = (level: string) => (...args: unknown[]) => void calls.push({ level, args });
  return { calls, logger: { info: at("info"), warn: at("warn"), error: at("error"), bindings: () => ({}), levels: { values: { info: 30 } } } };
}

/** A strict proxy: every property it does not define throws when read (pino's `bindings` probe included). */
function strictLogger(lines: string[]) {
  const known = { info: (m: string) => void lines.push(m), warn: (m: string) => void lines.push(m), error: (m: string) => void lines.push(m) };
  return new Proxy(known, {
    get(target, property) {
      if (property in target) return target[property as keyof typeof target];
      throw new Error(`no logger property ${String(property)}`);
    },
  });
}

describe("lineLogger", () => {
  it("writes (message, fields), or (fields, message) to pino; false is silence; a throwing logger is ignored", () => {
    const plain = recordingLogger();
    lineLogger(plain.logger)?.("warn", "m", { a: 1 });
    expect(plain.lines).toStrictEqual([{ level: "warn", message: "m", fields: { a: 1 } }]);
    const pino = pinoLike();
    lineLogger(pino.logger)?.("error", "m", { a: 1 });
    expect(pino.calls).toStrictEqual([{ level: "error", args: [{ a: 1 }, "m"] }]);
    expect(lineLogger(false)).toBeUndefined();
    const throwing = { info: () => undefined, warn: () => undefined, error: () => {
      throw new Error("sink down");
    } };
    expect(() => lineLogger(throwing)?.("error", "m", {})).not.toThrow();
  });

  it("a logger whose shape cannot be read (a strict proxy) is written to as (message, fields), and never fails a batch", async () => {
    const lines: string[] = [];
    const store = new InMemoryStore({ namespace: "strict" });
    await store.remember("done-before");
    const handler = sqsHandler({ store, logger: strictLogger(lines), handle: () => undefined });
    const response = await handler({ Records: [sqsRecord(body("done-before")), sqsRecord(body("new"))] }, lambdaContext());
    expect(response.batchItemFailures).toEqual([]);
    expect(await store.seen("new")).toBe(true);
    expect(lines).toStrictEqual(["duplicate: already done, acknowledged without running"]);
  });
});

describe("the lines the deadline and the fence give", () => {
  const line = (status: string, error: unknown, handlerRan = false) => resultLine(result(0, status, { key: "k", error, handlerRan }) as Extract<Parameters<typeof resultLine>[0], { type: "result" }>);

  it("say what happened, not what a neighbouring status means", () => {
    expect(line("in-flight", new DeadlineExceededError("still running"), true)).toMatchObject({
      level: "warn",
      message: "not acknowledged: the handler was still running at the deadline, retried (its claim is kept)",
    });
    expect(line("failed", new DeadlineExceededError("not started"))).toMatchObject({ level: "warn", message: "not run: the invocation's deadline was near, retried" });
    expect(line("failed", new FenceLostError("k"), true)).toMatchObject({ level: "warn", message: "transaction not committed, retried" });
    expect(line("failed", new TransactionConditionError("a condition failed"), true)).toMatchObject({ level: "warn", message: "transaction not committed, retried" });
    // The statuses they were confused with keep their words.
    expect(line("in-flight", undefined)).toMatchObject({ level: "info", message: "in flight: another delivery holds this id, retried later" });
    expect(line("failed", new TypeError("x"), true)).toMatchObject({ level: "warn", message: "handler failed, retried" });
  });
});

describe("the SQS parks' warning", () => {
  const failing = { park: () => Promise.reject(new TypeError("receipt-handle-secret")) };

  it("goes to pino fields first, with the error's facts and the package's logger field", async () => {
    const pino = pinoLike();
    const handler = sqsHandler({ store: new InMemoryStore(), handle: () => undefined, logger: pino.logger, parks: failing });
    const response = await handler({ Records: [sqsRecord(body("p-1"))] }, lambdaContext());
    expect(response.batchItemFailures).toEqual([]);
    const warnings = pino.calls.filter((call) => call.level === "warn");
    expect(warnings).toStrictEqual([
      {
        level: "warn",
        args: [
          { logger: "babelqueue-serverless", queue: "orders", failed: 1, changed: 0, error: { name: "TypeError" } },
          "parks: visibility not changed, the queue's visibility timeout applies",
        ],
      },
    ]);
  });

  it("is silent with logger: false", async () => {
    const write = vi.spyOn(process.stderr, "write").mockImplementation(() => true);
    const out = vi.spyOn(process.stdout, "write").mockImplementation(() => true);
    const handler = sqsHandler({ store: new InMemoryStore(), handle: () => undefined, logger: false, parks: failing });
    await handler({ Records: [sqsRecord(body("p-2"))] }, lambdaContext());
    expect([...write.mock.calls, ...out.mock.calls].map(([chunk]) => String(chunk)).filter((chunk) => chunk.includes("parks"))).toEqual([]);
  });
});

describe("a Worker batch that fails before a decision", () => {
  const batchOf = (ids: string[]) => {
    const messages = ids.map((id) => ({ id: `q-${id}`, timestamp: new Date(0), body: body(id), attempts: 1, ack: vi.fn(), retry: vi.fn() }));
    return { messages, batch: { queue: "orders", messages, ackAll: vi.fn(), retryAll: vi.fn() } };
  };
  const brokenStore = () => {
    throw new Error("binding missing: postgres://user:hunter2@db");
  };

  it("is logged through the logger, by the error's name, with every message retried", async () => {
    const { lines, logger } = recordingLogger();
    const { messages, batch } = batchOf(["a", "b"]);
    await queueHandler({ store: brokenStore, handle: () => undefined, logger })(batch, {}, { waitUntil: () => undefined });
    expect(messages.map((message) => message.retry.mock.calls.length)).toEqual([1, 1]);
    expect(lines).toStrictEqual([
      {
        level: "error",
        message: "queue batch failed before a decision, retrying all",
        fields: { logger: "babelqueue-serverless", status: "batch-error", queue: "orders", ids: 2, error: { name: "Error" } },
      },
    ]);
    expect(JSON.stringify(lines)).not.toContain("hunter2");
  });

  it("is silent with logger: false", async () => {
    const error = vi.spyOn(console, "error").mockImplementation(() => undefined);
    const { messages, batch } = batchOf(["c"]);
    await queueHandler({ store: brokenStore, handle: () => undefined, logger: false })(batch, {}, { waitUntil: () => undefined });
    expect(messages[0]?.retry).toHaveBeenCalledTimes(1);
    expect(error).not.toHaveBeenCalled();
  });
});

describe("an engine nobody listens to", () => {
  it("gets no observe with logger: false and no metrics or tracing; a logger or an extension gives it one", () => {
    expect(engineHooks(createObservability({ logger: false }, { system: "aws_sqs" }).batch())).toStrictEqual({});
    expect(Object.keys(engineHooks(createObservability({}, { system: "aws_sqs" }).batch()))).toEqual(["observe"]);
    const withMetrics = createObservability({ logger: false, metrics: { extends: "metrics", batch: () => ({ observe: () => undefined }) } }, { system: "aws_sqs" });
    expect(Object.keys(engineHooks(withMetrics.batch()))).toEqual(["observe"]);
  });
});
