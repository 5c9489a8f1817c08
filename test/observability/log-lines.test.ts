/**
 * Outcome lines, exactly: the level, the message and the whole field object of each status (no
 * field with an undefined value), the store-error line, the JSON line `jsonLogger` writes, where
 * `writeLine` sends it on Node and elsewhere, and which values pass as a logger.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import type { MessageResult } from "../../src/decision.js";
import { GroupBlockedError, InvalidMessageError, StoreUnavailableError } from "../../src/errors.js";
import type { EngineEvent } from "../../src/events.js";
import { isLoggerLike, jsonLogger, outcomeLogger, resultLine, storeErrorLine, writeLine } from "../../src/observability/log.js";
import { recordingLogger, withGlobal } from "./harness.js";

type ResultEvent = Extract<EngineEvent, { type: "result" }>;

afterEach(() => {
  vi.restoreAllMocks();
  vi.useRealTimers();
});

/** A result event with exactly the given fields (no harness defaults). */
function event(result: Partial<Omit<MessageResult, "status">> & { status: string }, extra: Partial<Omit<ResultEvent, "type" | "result">> = {}): ResultEvent {
  return {
    type: "result",
    index: 0,
    result: { ack: false, dedupe: "claim", handlerRan: false, ...result } as MessageResult,
    ...extra,
  } as ResultEvent;
}

const base = { logger: "babelqueue-serverless" } as const;

describe("resultLine", () => {
  it("a plain ran is not logged", () => {
    expect(resultLine(event({ status: "ran", ack: true, handlerRan: true }, { attempts: 0 }))).toBeUndefined();
  });

  it("each status: its level, its message and exactly its fields", () => {
    const lines = [
      resultLine(event({ status: "duplicate", ack: true, key: "k1" }, { attempts: 1, messageId: "m1" }), "orders"),
      resultLine(event({ status: "in-flight", key: "k2", retryAfterMs: 1500 }, { attempts: 0 })),
      resultLine(event({ status: "failed", key: "k3", handlerRan: true, error: new TypeError("x") }, { attempts: 2, handlerMs: 12.6 })),
      resultLine(event({ status: "failed", key: "k4", error: new StoreUnavailableError("s", "claim", "down") }, { attempts: 0 })),
      resultLine(event({ status: "failed", key: "k5", error: new GroupBlockedError("g") }, { attempts: 0 })),
      resultLine(event({ status: "invalid", ack: true, error: new InvalidMessageError("bad") }, { attempts: 0 })),
      resultLine(event({ status: "invalid", error: new InvalidMessageError("bad") }, { attempts: 0 })),
      resultLine(event({ status: "conflict", key: "k6" }, { attempts: 0 })),
      resultLine(event({ status: "commit-failed", ack: true, key: "k7", handlerRan: true }, { attempts: 0, handlerMs: 3.4 })),
    ];
    expect(lines).toStrictEqual([
      {
        level: "info",
        message: "duplicate: already done, acknowledged without running",
        fields: { ...base, status: "duplicate", key: "k1", messageId: "m1", attempts: 1, ack: true, dedupe: "claim", handlerRan: false, queue: "orders" },
      },
      {
        level: "info",
        message: "in flight: another delivery holds this id, retried later",
        fields: { ...base, status: "in-flight", key: "k2", attempts: 0, ack: false, dedupe: "claim", handlerRan: false, retryAfterMs: 1500 },
      },
      {
        level: "warn",
        message: "handler failed, retried",
        fields: { ...base, status: "failed", key: "k3", attempts: 2, ack: false, dedupe: "claim", handlerRan: true, handlerMs: 13, error: { name: "TypeError" } },
      },
      {
        level: "warn",
        message: "not run: the store could not answer, retried",
        fields: {
          ...base,
          status: "failed",
          key: "k4",
          attempts: 0,
          ack: false,
          dedupe: "claim",
          handlerRan: false,
          error: { name: "StoreUnavailableError", code: "STORE_UNAVAILABLE", store: "s", operation: "claim" },
        },
      },
      {
        level: "info",
        message: "not run: an earlier message of its FIFO group failed, retried",
        fields: { ...base, status: "failed", key: "k5", attempts: 0, ack: false, dedupe: "claim", handlerRan: false, error: { name: "GroupBlockedError", code: "GROUP_BLOCKED", group: "g" } },
      },
      {
        level: "warn",
        message: "invalid message, dropped",
        fields: { ...base, status: "invalid", attempts: 0, ack: true, dedupe: "claim", handlerRan: false, error: { name: "InvalidMessageError", code: "INVALID_MESSAGE", reason: "bad" } },
      },
      {
        level: "warn",
        message: "invalid message, retried until the queue dead-letters it",
        fields: { ...base, status: "invalid", attempts: 0, ack: false, dedupe: "claim", handlerRan: false, error: { name: "InvalidMessageError", code: "INVALID_MESSAGE", reason: "bad" } },
      },
      {
        level: "error",
        message: "conflict: this id was used before with another payload, not run",
        fields: { ...base, status: "conflict", key: "k6", attempts: 0, ack: false, dedupe: "claim", handlerRan: false },
      },
      {
        level: "error",
        message: "commit failed after the handler ran: acknowledged, a later copy of this id may run again",
        fields: { ...base, status: "commit-failed", key: "k7", attempts: 0, ack: true, dedupe: "claim", handlerRan: true, handlerMs: 3 },
      },
    ]);
  });

  it("a failed handler that ran with a GROUP_BLOCKED code is still info; handlerMs 0 is kept", () => {
    const line = resultLine(event({ status: "failed", handlerRan: true, error: new GroupBlockedError("g") }, { attempts: 0, handlerMs: 0 }));
    expect(line?.level).toBe("info");
    expect(line?.fields.handlerMs).toBe(0);
  });

  it("an event without attempts or message id, and a message id that is not a string, add no field", () => {
    const noAttempts = event({ status: "duplicate", ack: true }, { messageId: 42 as unknown as string });
    expect(resultLine(noAttempts)?.fields).toStrictEqual({ ...base, status: "duplicate", ack: true, dedupe: "claim", handlerRan: false });
  });

  it("an unknown status is a warn line named after it", () => {
    expect(resultLine(event({ status: "weird" }, { attempts: 0 }))).toStrictEqual({
      level: "warn",
      message: "weird",
      fields: { ...base, status: "weird", attempts: 0, ack: false, dedupe: "claim", handlerRan: false },
    });
    expect(resultLine(event({ status: "" }, { attempts: 0 }))).toMatchObject({ level: "warn", message: "" });
  });

  it("cuts a key longer than 256 characters, not one of 256", () => {
    const at = (key: string) => resultLine(event({ status: "duplicate", key }, { attempts: 0 }))?.fields.key;
    expect(at("k".repeat(256))).toBe("k".repeat(256));
    expect(at("k".repeat(257))).toBe(`${"k".repeat(256)}…`);
  });
});

describe("storeErrorLine", () => {
  it("error for every step but release (warn), with or without the queue", () => {
    const outage = new StoreUnavailableError("redis", "seen", "down");
    const facts = { name: "StoreUnavailableError", code: "STORE_UNAVAILABLE", store: "redis", operation: "seen" };
    expect(storeErrorLine({ type: "store-error", step: "seen", ids: 3, error: outage }, "orders")).toStrictEqual({
      level: "error",
      message: "idempotency store seen failed for 3 id(s)",
      fields: { ...base, status: "store-error", step: "seen", ids: 3, queue: "orders", error: facts },
    });
    expect(storeErrorLine({ type: "store-error", step: "release", ids: 1, error: outage })).toStrictEqual({
      level: "warn",
      message: "idempotency store release failed for 1 id(s)",
      fields: { ...base, status: "store-error", step: "release", ids: 1, error: facts },
    });
  });
});

describe("outcomeLogger", () => {
  it("writes nothing for events that are not results or store errors, nor for ran", () => {
    const { lines, logger } = recordingLogger();
    const observe = outcomeLogger(logger) as NonNullable<ReturnType<typeof outcomeLogger>>;
    observe({ type: "batch-start", size: 1 });
    observe({ type: "store-step", step: "claim", ids: 1, durationMs: 1, ok: true });
    observe(event({ status: "ran", ack: true, handlerRan: true }, { attempts: 0 }));
    observe({ type: "batch-end", size: 1, durationMs: 1, pending: 0 });
    expect(lines).toStrictEqual([]);
    observe({ type: "store-error", step: "commit", ids: 2, error: new Error("x") });
    expect(lines).toStrictEqual([
      { level: "error", message: "idempotency store commit failed for 2 id(s)", fields: { ...base, status: "store-error", step: "commit", ids: 2, error: { name: "Error" } } },
    ]);
  });
});

describe("jsonLogger", () => {
  it("one JSON object: level in capitals, message, timestamp, then the object arguments' fields", () => {
    vi.useFakeTimers();
    vi.setSystemTime(new Date("2024-01-02T03:04:05.678Z"));
    const written: [string, string][] = [];
    const logger = jsonLogger((level, line) => written.push([level, line]));
    logger.warn("m", { a: 1 }, "ignored", [2], null, 7, { b: "two" });
    logger.info("i");
    logger.error("e", { c: true });
    expect(written).toStrictEqual([
      ["warn", '{"level":"WARN","message":"m","timestamp":"2024-01-02T03:04:05.678Z","a":1,"b":"two"}'],
      ["info", '{"level":"INFO","message":"i","timestamp":"2024-01-02T03:04:05.678Z"}'],
      ["error", '{"level":"ERROR","message":"e","timestamp":"2024-01-02T03:04:05.678Z","c":true}'],
    ]);
  });
});

describe("writeLine", () => {
  function consoles() {
    const calls: [string, unknown][] = [];
    for (const level of ["info", "warn", "error"] as const) {
      vi.spyOn(console, level).mockImplementation((line: unknown) => void calls.push([level, line]));
    }
    return calls;
  }

  it("on Node: info to stdout, warn and error to stderr, one line each", () => {
    const out = vi.spyOn(process.stdout, "write").mockImplementation(() => true);
    const err = vi.spyOn(process.stderr, "write").mockImplementation(() => true);
    const calls = consoles();
    writeLine("info", "I");
    writeLine("warn", "W");
    writeLine("error", "E");
    expect(out.mock.calls).toStrictEqual([["I\n"]]);
    expect(err.mock.calls).toStrictEqual([["W\n"], ["E\n"]]);
    expect(calls).toStrictEqual([]);
  });

  it("elsewhere, or without a usable stream: console", () => {
    const out = vi.spyOn(process.stdout, "write").mockImplementation(() => true);
    const err = vi.spyOn(process.stderr, "write").mockImplementation(() => true);
    const calls = consoles();
    withGlobal("navigator", undefined, () => writeLine("info", "no navigator"));
    withGlobal("navigator", { userAgent: 5 }, () => writeLine("warn", "agent not a string"));
    withGlobal("navigator", { userAgent: "Cloudflare-Workers" }, () => writeLine("error", "workerd"));
    withGlobal("navigator", { userAgent: "Node.js/22" }, () => {
      withGlobal("process", undefined, () => writeLine("info", "no process"));
      withGlobal("process", undefined, () => writeLine("error", "no process either"));
      withGlobal("process", { stdout: { write: () => true } }, () => writeLine("warn", "no stderr"));
      withGlobal("process", { stdout: { write: "not a function" } }, () => writeLine("info", "write not a function"));
    });
    expect(calls).toStrictEqual([
      ["info", "no navigator"],
      ["warn", "agent not a string"],
      ["error", "workerd"],
      ["info", "no process"],
      ["error", "no process either"],
      ["warn", "no stderr"],
      ["info", "write not a function"],
    ]);
    expect(out).not.toHaveBeenCalled();
    expect(err).not.toHaveBeenCalled();
  });
});

describe("isLoggerLike", () => {
  const fn = () => undefined;
  it("an object or a function with info, warn and error methods", () => {
    expect(isLoggerLike({ info: fn, warn: fn, error: fn })).toBe(true);
    expect(isLoggerLike(Object.assign(() => undefined, { info: fn, warn: fn, error: fn }))).toBe(true);
    expect(isLoggerLike(console)).toBe(true);
  });

  it("nothing else", () => {
    for (const value of [undefined, null, "logger", 5, true, {}, () => undefined, { warn: fn, error: fn }, { info: fn, error: fn }, { info: fn, warn: fn }, { info: fn, warn: fn, error: "x" }]) {
      expect(isLoggerLike(value), String(value)).toBe(false);
    }
  });
});
