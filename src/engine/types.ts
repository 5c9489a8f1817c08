/**
 * The engine's public shapes — a delivery in, the handler's context, the options — and the
 * per-delivery working record the three phases (gate, run, commit) share.
 *
 * What this is *not*: behaviour. The phases live in gate.ts, run.ts and commit.ts; one batch's
 * orchestration in batch.ts; the options' validation in settings.ts; the verdicts in ../decision.ts.
 */
import type { DedupeMode, GateOutcome, MessageResult } from "../decision.js";
import type { Envelope } from "../envelope.js";
import type { EngineEvent, RunInterceptor } from "../events.js";
import type { Fingerprinter } from "../fingerprint.js";

/** One delivery as a runtime adapter hands it to the engine. */
export interface Delivery<RuntimeContext> {
  /** The raw body: a JSON string, bytes, or an already-parsed object. */
  readonly body: unknown;
  /** The runtime's 0-based redelivery count (SQS: ApproximateReceiveCount − 1; Workers: attempts − 1). */
  readonly redeliveries?: number;
  /**
   * The transport's AUTHORITATIVE attempts count, when it carries one (Kafka: BabelQueue's
   * `bq-attempts` record header): the handler sees exactly this, not reconciled with the body's
   * `attempts` or with `redeliveries` — lower or higher. Ignored unless a safe integer >= 0.
   * Absent: attempts = max(body.attempts, redeliveries), the SQS and Workers rule.
   */
  readonly attempts?: number;
  /** FIFO message group. Messages of one group run in order and stop at the first failure. */
  readonly group?: string;
  /** The queue's own id of this delivery (SQS `messageId`, Workers `message.id`), for logs and traces. */
  readonly messageId?: string;
  /** Out-of-band headers (SQS message attributes), for interceptors such as tracing. */
  readonly headers?: Readonly<Record<string, string>>;
  /**
   * Set by the runtime adapter when the transport already rejects the delivery before its body is
   * decoded (BabelQueue's `bq-schema-version` gate): the reason. The body is then never parsed and
   * the delivery is reported `invalid` with this reason.
   */
  readonly rejected?: string;
  /** Passed through to the handler's context untouched (the SQS record, the Workers message, …). */
  readonly context: RuntimeContext;
}

/** What the handler receives next to the message: the runtime's context plus the engine's facts. */
export type HandlerContext<RuntimeContext> = RuntimeContext & {
  /** The dedupe key (`meta.id` by default), or undefined when the message had none. */
  readonly key: string | undefined;
  /**
   * Reconciled attempts: the transport's authoritative count when it has one (Kafka's `bq-attempts`
   * header), else max(body.attempts, the runtime's redelivery count).
   */
  readonly attempts: number;
  /** How this run is guarded. */
  readonly dedupe: DedupeMode;
  /**
   * Transactional mode only: the store's transaction handle (DynamoDB: a collector of
   * TransactWriteItems actions; Postgres: the transaction's client; D1: a collector of prepared
   * statements). Everything written through it commits atomically with the id. Each transactional
   * store exports a typed accessor for it.
   */
  readonly tx?: unknown;
};

/** The user's side effect. Throwing (or rejecting) means "not done": the delivery is retried. */
export type Handler<Message, RuntimeContext> = (
  message: Message,
  context: HandlerContext<RuntimeContext>,
) => unknown;

/** Options of the engine, shared by `wrap`, `sqsHandler` and `queueHandler`. */
export interface EngineOptions<Message = Envelope> {
  /** Lease of a claim (ms). Default: the store's own default. The runtime wrappers extend it to cover the invocation. */
  leaseMs?: number;
  /** Store unreachable at the gate: `"retry"` (default, fail-closed: not run, not acked) or `"run"` (run without dedupe). */
  onStoreError?: "retry" | "run";
  /** A body that is not an accepted message: `"retry"` (default; the queue's DLQ takes it eventually) or `"drop"` (ack it). */
  onInvalid?: "retry" | "drop";
  /**
   * A reused id with another payload (its stored fingerprint differs): `"retry"` (default: not
   * run, not acked, so the queue's DLQ takes it where a person can look) or `"drop"` (ack it).
   */
  onConflict?: "retry" | "drop";
  /**
   * The payload fingerprint stored with every claim and checked on every later delivery of the id.
   * Default: a 128-bit hash (`h1:` + 22 base64url characters) of the canonical JSON (sorted keys) of the envelope's `job` and `data`, so a
   * redelivery re-serialised by another SDK still matches. A function of the message, or `false`
   * to turn the check off.
   */
  fingerprint?: Fingerprinter<Message> | false;
  /** How many handlers may run at once within a batch. Default 10. */
  concurrency?: number;
  /**
   * Turns a raw body into the message the handler gets. Default: BabelQueue envelope decoding.
   * Throw to reject the body (an `InvalidMessageError`'s reason is reported as it is).
   */
  parse?: (body: unknown) => Message;
  /** The dedupe key of a message; undefined or "" means none (runs without dedupe). Default: `meta.id`. */
  key?: (message: Message) => string | undefined;
  /** Extra attempts of a failed commit step, 25 ms then 50 ms apart, before `commit-failed`. Default 2, at most 10. */
  commitRetries?: number;
  /**
   * Group commit: how long (ms) a finished success may wait for other handlers of the batch to
   * finish so that they share one commit step, while other handlers are still running. Default:
   * adaptive — at most one store round trip as the engine measures it (so the commit lands within
   * about two round trips of the effect), and only while another handler is expected to finish in
   * that time (judged from how far apart the batch's handlers finished so far); nothing at all on a
   * store that answers within a millisecond. A number fixes the linger instead: 0 commits each
   * success in the next step at once; larger values save store requests when handlers finish far
   * apart, at the price of a wider window between an effect and its commit (the effect's only
   * exposure to a crash). Whatever the setting, a commit step starts at once when no handler of the
   * batch is running any more, and successes that finish while a step is in flight share the next
   * one. At most 1,000.
   */
  commitLingerMs?: number;
  /**
   * Runtimes that know their deadline (Lambda): stop starting handlers this long (ms) before it,
   * flush the commits of what finished, release the claims of what never started, and answer.
   * It must cover one commit step and one release step of the store. Default 1,000.
   */
  deadlineMarginMs?: number;
  /**
   * Transactional mode: the store (a `TransactionalStore`: DynamoDB, Postgres, D1) commits each
   * message's id together with the handler's own writes, made through `context.tx`, in one atomic
   * transaction. Default false.
   */
  transactional?: boolean;
  /** Called for every result, store step and store error. Exceptions it throws are ignored. */
  observe?: (event: EngineEvent) => void;
  /** Wraps each handler run (e.g. to make a tracing span active). Must call `run` exactly once. */
  intercept?: RunInterceptor;
}

/** Per-call options from the runtime adapter. */
export interface ProcessOptions {
  /** Lease for this batch (ms), e.g. the invocation's remaining time. */
  leaseMs?: number;
  /**
   * Epoch ms at which the runtime ends the invocation (Lambda: now + getRemainingTimeInMillis()).
   * The engine answers `deadlineMarginMs` before it. Absent: no deadline.
   */
  deadline?: number;
  /**
   * Called once per delivery as soon as its fate is final (Cloudflare acks each message then),
   * before `process` resolves. Exceptions it throws are ignored.
   */
  onResult?: (index: number, result: MessageResult) => void;
  /** An observer for this batch only (logs, metrics, spans of one invocation), next to the engine's `observe`. */
  observe?: (event: EngineEvent) => void;
  /** An interceptor for this batch only, inside the engine's `intercept` when both are set. */
  intercept?: RunInterceptor;
}

/** One delivery's working record, shared by the phases. */
export interface Item<Message, RuntimeContext> {
  readonly index: number;
  readonly delivery: Delivery<RuntimeContext>;
  message?: Message;
  key?: string;
  fingerprint?: string;
  attempts: number;
  /** Index of the first delivery with the same key in this batch, for later copies. */
  firstCopy?: number;
  gate?: GateOutcome;
  token?: string;
  dedupe: DedupeMode;
  result?: MessageResult;
  /** The result is final and was reported (event, `onResult`). */
  reported?: boolean;
  /** Answered acknowledged at the deadline while its commit was in flight: no late result follows. */
  settledEarly?: boolean;
  /** Where the run phase got to: not started, its handler running, or finished (committing or final). */
  stage: "waiting" | "running" | "finished";
  handlerMs?: number;
}
