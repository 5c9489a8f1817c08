/**
 * Outcome logs: one structured line per delivery that was not a plain `ran` (duplicate, in-flight,
 * failed, invalid, conflict, commit-failed) and one per store error, built from the engine's events.
 *
 * A line carries the delivery's dedupe key, status, attempts, the queue's message id, ack, dedupe
 * mode and, for an error, its name, code and this package's payload-free details (error-facts.ts).
 * Never the body, never a token or credential, never an error's *message* (see error-facts.ts for
 * why: a handler's message is user content, a backend's may quote keys, URLs or credentials).
 *
 * Levels: duplicate, in-flight and a FIFO-blocked message are `info` (the system working as meant);
 * a failed handler, an invalid body and a failed release are `warn` (retried); a conflict, a
 * commit that failed after the effect, and a failed claim / seen / commit / transact step are
 * `error` (someone should look).
 *
 * The logger is anything with `info` / `warn` / `error` taking `(message, ...extra)`: a
 * Powertools `Logger` (the fields become keys of its JSON line, next to its Lambda context keys),
 * `console`, or `jsonLogger()` (the default: one JSON object per line, written straight to
 * stdout/stderr on Node — past Lambda's console prefix — and to `console` elsewhere). pino takes
 * `(fields, message)` and drops an object given after the message (it reads it as a printf
 * argument), so a pino logger — recognised by its shape, `fieldsFirst` — is called that way.
 *
 * What this is *not*: a general logger. A plain `ran` is not logged (count it with metrics), and
 * nothing here changes an outcome: a logger that throws is ignored.
 */
import type { MessageResult, ResultStatus } from "../decision.js";
import type { EngineEvent, StoreStep } from "../events.js";
import { type ErrorFacts, errorFacts } from "./error-facts.js";

/** The logging surface used: Powertools `Logger`, pino, `console` and `jsonLogger()` all have it. */
export interface LoggerLike {
  info(message: string, ...extra: unknown[]): unknown;
  warn(message: string, ...extra: unknown[]): unknown;
  error(message: string, ...extra: unknown[]): unknown;
}

export type LogLevel = "info" | "warn" | "error";

/** Every status a result may carry (`conflict` is reported by the fingerprint check). */
export type OutcomeStatus = ResultStatus | "conflict";

/** The fields of one outcome line. */
export interface OutcomeFields {
  /** Always "babelqueue-serverless", to filter this package's lines. */
  readonly logger: "babelqueue-serverless";
  readonly status: OutcomeStatus | "store-error";
  /** The dedupe key (`meta.id`), cut to 256 characters. */
  readonly key?: string;
  /** The queue's own id of the delivery (SQS `messageId`, Workers `message.id`). */
  readonly messageId?: string;
  readonly attempts?: number;
  readonly ack?: boolean;
  readonly dedupe?: MessageResult["dedupe"];
  readonly handlerRan?: boolean;
  readonly retryAfterMs?: number;
  readonly handlerMs?: number;
  /** The queue, when the runtime says (SQS queue name, Workers `batch.queue`). */
  readonly queue?: string;
  /** store-error: the failed step and how many ids it carried. */
  readonly step?: StoreStep;
  readonly ids?: number;
  readonly error?: ErrorFacts;
}

/** One line to write: its level, a short human message, and the structured fields. */
export interface OutcomeLine {
  readonly level: LogLevel;
  readonly message: string;
  readonly fields: OutcomeFields;
}

const MAX_KEY = 256;

type ResultEvent = Extract<EngineEvent, { type: "result" }>;
type StoreErrorEvent = Extract<EngineEvent, { type: "store-error" }>;

function cut(key: string): string {
  return key.length > MAX_KEY ? `${key.slice(0, MAX_KEY)}…` : key;
}

function describe(result: MessageResult, facts: ErrorFacts | undefined): { level: LogLevel; message: string } {
  const status = result.status as OutcomeStatus;
  const code = facts?.code;
  switch (status) {
    case "duplicate":
      return { level: "info", message: "duplicate: already done, acknowledged without running" };
    case "in-flight":
      if (code === "DEADLINE_EXCEEDED") return { level: "warn", message: "not acknowledged: the handler was still running at the deadline, retried (its claim is kept)" };
      return { level: "info", message: "in flight: another delivery holds this id, retried later" };
    case "failed":
      if (code === "GROUP_BLOCKED") return { level: "info", message: "not run: an earlier message of its FIFO group failed, retried" };
      if (code === "DEADLINE_EXCEEDED") return { level: "warn", message: "not run: the invocation's deadline was near, retried" };
      if (code === "FENCE_LOST" || code === "TRANSACTION_CONDITION") return { level: "warn", message: "transaction not committed, retried" };
      if (!result.handlerRan) return { level: "warn", message: "not run: the store could not answer, retried" };
      return { level: "warn", message: "handler failed, retried" };
    case "invalid":
      return { level: "warn", message: result.ack ? "invalid message, dropped" : "invalid message, retried until the queue dead-letters it" };
    case "conflict":
      return { level: "error", message: "conflict: this id was used before with another payload, not run" };
    case "commit-failed":
      return { level: "error", message: "commit failed after the handler ran: acknowledged, a later copy of this id may run again" };
    default:
      return { level: "warn", message: String(status) };
  }
}

/** The line for one result, or undefined for a plain `ran` (not logged). */
export function resultLine(event: ResultEvent, queue?: string): OutcomeLine | undefined {
  const result = event.result;
  if (result.status === "ran") return undefined;
  const facts = result.error === undefined ? undefined : errorFacts(result.error);
  const { level, message } = describe(result, facts);
  const fields: OutcomeFields = {
    logger: "babelqueue-serverless",
    status: result.status,
    ...(result.key === undefined ? {} : { key: cut(result.key) }),
    ...(typeof event.messageId === "string" ? { messageId: event.messageId } : {}),
    ...(typeof event.attempts === "number" ? { attempts: event.attempts } : {}),
    ack: result.ack,
    dedupe: result.dedupe,
    handlerRan: result.handlerRan,
    ...(result.retryAfterMs === undefined ? {} : { retryAfterMs: result.retryAfterMs }),
    ...(typeof event.handlerMs === "number" ? { handlerMs: Math.round(event.handlerMs) } : {}),
    ...(queue === undefined ? {} : { queue }),
    ...(facts === undefined ? {} : { error: facts }),
  };
  return { level, message, fields };
}

/** The line for one store error. A failed release only delays a retry (warn); anything else is an error. */
export function storeErrorLine(event: StoreErrorEvent, queue?: string): OutcomeLine {
  return {
    level: event.step === "release" ? "warn" : "error",
    message: `idempotency store ${event.step} failed for ${event.ids} id(s)`,
    fields: {
      logger: "babelqueue-serverless",
      status: "store-error",
      step: event.step,
      ids: event.ids,
      ...(queue === undefined ? {} : { queue }),
      error: errorFacts(event.error),
    },
  };
}

/** Where `jsonLogger` writes one finished line. */
export type LineWriter = (level: LogLevel, line: string) => void;

interface NodeStreams {
  stdout?: { write(chunk: string): unknown };
  stderr?: { write(chunk: string): unknown };
}

/**
 * Node (Lambda): straight to stdout / stderr, like Powertools, so the line stays one JSON object
 * (Lambda's console adds a text prefix). Elsewhere (workerd, browsers): `console`.
 */
export const writeLine: LineWriter = (level, line) => {
  const agent = (globalThis as { navigator?: { userAgent?: unknown } }).navigator?.userAgent;
  const streams = (globalThis as { process?: NodeStreams }).process;
  const stream = level === "info" ? streams?.stdout : streams?.stderr;
  if (typeof agent === "string" && agent.startsWith("Node.js") && typeof stream?.write === "function") {
    stream.write(`${line}\n`);
    return;
  }
  console[level](line);
};

/**
 * A logger that writes one JSON object per line: `{"level":"WARN","message":…,"timestamp":…, …fields}`.
 * Object arguments after the message are merged into the line; anything else is ignored.
 */
export function jsonLogger(write: LineWriter = writeLine): LoggerLike {
  const log = (level: LogLevel) => (message: string, ...extra: unknown[]) => {
    const line: Record<string, unknown> = { level: level.toUpperCase(), message, timestamp: new Date().toISOString() };
    for (const part of extra) {
      if (typeof part === "object" && part !== null && !Array.isArray(part)) Object.assign(line, part);
    }
    write(level, JSON.stringify(line));
  };
  return { info: log("info"), warn: log("warn"), error: log("error") };
}

/**
 * Whether `logger` takes its fields before the message: pino (`logger.warn(fields, message)`), known
 * by its `levels.values` table and `bindings()` method, which no `(message, fields)` logger here has.
 * Other fields-first loggers (bunyan) need a three-line adapter; see docs/operating/observability.md.
 */
export function fieldsFirst(logger: LoggerLike): boolean {
  const candidate = logger as { levels?: { values?: unknown }; bindings?: unknown };
  return typeof candidate.bindings === "function" && typeof candidate.levels?.values === "object" && candidate.levels.values !== null;
}

/** Checks a `logger` option: a LoggerLike, `false`, or undefined (the default JSON logger). */
export function isLoggerLike(value: unknown): value is LoggerLike {
  if (typeof value !== "object" && typeof value !== "function") return false;
  if (value === null) return false;
  const candidate = value as Partial<LoggerLike>;
  return typeof candidate.info === "function" && typeof candidate.warn === "function" && typeof candidate.error === "function";
}

/** Writes one line to a logger, in the order the logger takes (see `fieldsFirst`); never throws. */
export type LineLogger = (level: LogLevel, message: string, fields: object) => void;

/**
 * The one way this package writes to a logger, made once per handler: `false` silences it (returns
 * undefined); undefined means `jsonLogger()`. The logger's shape is read here, once, and a logger
 * whose shape cannot be read (a strict proxy) is taken as `(message, fields)`; a logger that
 * throws while writing is ignored.
 */
export function lineLogger(logger: LoggerLike | false | undefined): LineLogger | undefined {
  if (logger === false) return undefined;
  const target = logger ?? jsonLogger();
  let swap = false;
  try {
    swap = fieldsFirst(target);
  } catch {
    // Read as a (message, fields) logger.
  }
  return (level, message, fields) => {
    try {
      if (swap) (target[level] as (...args: unknown[]) => unknown)(fields, message);
      else target[level](message, fields);
    } catch {
      // A logger must never change an outcome.
    }
  };
}

/** The event observer that logs outcomes through `write`; `queue` is added to every line when given. */
export function outcomeObserver(write: LineLogger, queue?: string): (event: EngineEvent) => void {
  return (event) => {
    let line: OutcomeLine | undefined;
    if (event.type === "result") line = resultLine(event, queue);
    else if (event.type === "store-error") line = storeErrorLine(event, queue);
    if (line !== undefined) write(line.level, line.message, line.fields);
  };
}

/**
 * The event observer that logs outcomes. `false` silences it (returns undefined); undefined
 * means `jsonLogger()`. `queue` is added to every line when given.
 */
export function outcomeLogger(logger: LoggerLike | false | undefined, queue?: string): ((event: EngineEvent) => void) | undefined {
  const write = lineLogger(logger);
  return write === undefined ? undefined : outcomeObserver(write, queue);
}
