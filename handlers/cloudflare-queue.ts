/**
 * `queueHandler`: the Cloudflare Queues consumer — the Worker's `queue` export — as a thin
 * adapter over the batch engine (src/engine/), which makes every decision.
 *
 * Per message it hands the engine a delivery (the body as it came: an object for
 * `contentType: "json"`, or a JSON string; `redeliveries` = `message.attempts − 1`; the message,
 * `env` and the execution context as the handler's context) and maps each result back AS SOON AS
 * IT IS FINAL — not at the end of the batch: `ack()` when the engine says ack (committed,
 * duplicate, dropped invalid or conflict, commit-failed), otherwise `retry()` — for an in-flight
 * park with `delaySeconds` = the other delivery's remaining lease (rounded up, at most
 * Cloudflare's 12-hour delay limit), otherwise with `retryDelaySeconds` when set, else the queue's
 * own `retry_delay`. Cloudflare does not redeliver an explicitly acked message even if the
 * consumer later throws (acks are reported when the invocation ends; a host lost mid-batch may lose
 * them, and then committed ids come back as duplicates), so a failing batch repeats only the effects
 * whose commit was in flight, not every finished effect of the batch.
 *
 * Cloudflare Queues carry no per-message attributes, so there are no out-of-band headers here
 * (`traceparent` and replay flags travel in the envelope, if at all).
 *
 * The lease defaults to the consumer's wall-time limit (15 minutes), so no second delivery is told
 * to run while this invocation may still be running its handler.
 *
 * It never throws out of `queue` for a message's sake: a bad message is that message's result, and
 * an unexpected failure (the store factory throwing, an engine bug) retries every message of the
 * batch that was not yet acknowledged.
 *
 * Limits used (Cloudflare Queues limits page, developers.cloudflare.com/queues/platform/limits):
 * consumer duration (wall clock) 15 minutes; `delaySeconds` when sending or retrying at most 12
 * hours (43,200 s) — the page said 12 hours until 2026 and says 24 since; the smaller one is used,
 * so that a retry is never refused (a parked message only comes back sooner); batches of at most
 * 100 messages.
 *
 * What this is *not*: the place that decides anything, or a retry loop (redelivery is the queue's
 * job). Types: described structurally (`QueueMessageLike`, `MessageBatchLike`,
 * `ExecutionContextLike`) so the package's Node build needs no Workers globals; the runtime's
 * `MessageBatch`, `Message` and `ExecutionContext` satisfy them, and the returned function
 * satisfies `ExportedHandler<Env>["queue"]`.
 */
import type { Store } from "../src/contract.js";
import type { MessageResult } from "../src/decision.js";
import { BatchEngine, type Delivery, ENGINE_OPTION_KEYS, type EngineOptions, type Handler } from "../src/engine/index.js";
import type { Envelope } from "../src/envelope.js";
import { InvalidOptionError } from "../src/errors.js";
import { OBSERVABILITY_OPTION_KEYS, type ObservabilityOptions, createObservability, engineHooks } from "../src/observability/index.js";
import { errorFacts } from "../src/observability/error-facts.js";
import { lineLogger } from "../src/observability/log.js";
import { type OptionKeys, checkOptions, optionKeys, unionKeys } from "../src/store-kit/options.js";

/** The consumer's wall-time limit: the lease every claim of a batch gets by default. */
export const CONSUMER_WALL_TIME_MS = 15 * 60 * 1000;
/** The longest `delaySeconds` used on `retry()`: 12 hours, what Cloudflare's limits page allowed before it said 24 (see above). */
export const MAX_RETRY_DELAY_SECONDS = 12 * 60 * 60;

/** The members of a Queues `Message` the adapter uses. */
export interface QueueMessageLike {
  readonly id: string;
  readonly body: unknown;
  /** 1 on the first delivery. */
  readonly attempts: number;
  ack(): void;
  retry(options?: { delaySeconds?: number }): void;
}

/** The members of a Queues `MessageBatch` the adapter uses. */
export interface MessageBatchLike<Message extends QueueMessageLike = QueueMessageLike> {
  readonly queue: string;
  readonly messages: readonly Message[];
}

/** The members of an `ExecutionContext` the adapter passes on. */
export interface ExecutionContextLike {
  waitUntil(promise: Promise<unknown>): void;
}

/** What `handle` receives next to the message (plus the engine's `key`, `attempts`, `dedupe`). */
export interface QueueRuntimeContext<Env, Message extends QueueMessageLike = QueueMessageLike> {
  /** The Queues message being handled (do not ack or retry it yourself: the adapter does). */
  readonly message: Message;
  /** The queue's name. */
  readonly queue: string;
  readonly env: Env;
  readonly executionContext: ExecutionContextLike;
}

/** Options of `queueHandler`: the engine's options plus the store factory and the handler. */
export interface QueueHandlerOptions<Env, Message = Envelope, QueueMessage extends QueueMessageLike = QueueMessageLike>
  extends EngineOptions<Message>,
    ObservabilityOptions<Env> {
  /**
   * The store for this invocation, from the Worker's bindings: e.g.
   * `(env) => new DurableObjectStore(env.IDEMPOTENCY)`. Called once per batch.
   */
  store: (env: Env) => Store;
  /** The side effect. Throw to have the message retried. */
  handle: Handler<Message, QueueRuntimeContext<Env, QueueMessage>>;
  /**
   * Lease of each claim (ms). Default: the consumer's wall-time limit (15 minutes), so the lease
   * outlasts any invocation. Shorter leases let a crashed consumer's ids be retried sooner but
   * must still outlast your handler.
   */
  leaseMs?: number;
  /**
   * `delaySeconds` for retried messages that are not in-flight parks (handler failures, store
   * outages, invalid bodies). Default: none, so the queue's `retry_delay` applies.
   */
  retryDelaySeconds?: number;
}

/** Every key of `QueueHandlerOptions`: the engine's, observability's and the handler's own. */
const QUEUE_HANDLER_OPTION_KEYS = unionKeys(
  unionKeys(ENGINE_OPTION_KEYS, OBSERVABILITY_OPTION_KEYS),
  optionKeys<Omit<QueueHandlerOptions<unknown>, keyof EngineOptions | keyof ObservabilityOptions>>({ store: true, handle: true, retryDelaySeconds: true }),
) as OptionKeys<QueueHandlerOptions<unknown>>;

/** The Worker's `queue` export. */
export type QueueConsumer<Env, QueueMessage extends QueueMessageLike = QueueMessageLike> = (
  batch: MessageBatchLike<QueueMessage>,
  env: Env,
  ctx: ExecutionContextLike,
) => Promise<void>;

/** A store that is never called: lets the engine validate the options when the handler is built. */
const OPTIONS_PROBE: Store = {
  seen: async () => false,
  remember: async () => undefined,
  forget: async () => undefined,
};

function checkDelay(option: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 0 || value > MAX_RETRY_DELAY_SECONDS) {
    throw new InvalidOptionError(option, `must be an integer number of seconds from 0 to ${MAX_RETRY_DELAY_SECONDS}`);
  }
  return value;
}

/** `delaySeconds` for an in-flight park: the remaining lease, rounded up, within Cloudflare's limit. */
export function parkDelaySeconds(retryAfterMs: number): number {
  if (!Number.isFinite(retryAfterMs) || retryAfterMs <= 0) return 0;
  return Math.min(MAX_RETRY_DELAY_SECONDS, Math.ceil(retryAfterMs / 1000));
}

function settle(message: QueueMessageLike, result: MessageResult | undefined, retryDelaySeconds: number | undefined): void {
  if (result?.ack === true) {
    message.ack();
    return;
  }
  const park = result?.status === "in-flight" ? parkDelaySeconds(result.retryAfterMs ?? 0) : 0;
  if (park > 0) message.retry({ delaySeconds: park });
  else if (retryDelaySeconds !== undefined) message.retry({ delaySeconds: retryDelaySeconds });
  else message.retry();
}

/**
 * Builds a Worker's `queue` export: every message of a batch is decided by the batch engine and
 * acked or retried as soon as its fate is final (an in-flight park is retried after the other
 * delivery's remaining lease). The store is made per batch from the Worker's bindings. Wrong
 * options throw `InvalidOptionError` when the module loads, never per message.
 *
 * @example
 * ```ts
 * import { DurableObjectStore, queueHandler } from "babelqueue-serverless/cloudflare";
 * export { IdempotencyObject } from "babelqueue-serverless/cloudflare/durable-object";
 *
 * export default {
 *   queue: queueHandler<Env>({
 *     store: (env) => new DurableObjectStore(env.IDEMPOTENCY, { namespace: "orders" }),
 *     handle: async (envelope, ctx) => {
 *       // ctx.message, ctx.env, ctx.key (meta.id), ctx.attempts
 *       await sendReceipt(envelope.data); // throw to have this message retried
 *     },
 *   }),
 * };
 * ```
 */
export function queueHandler<Env, Message = Envelope, QueueMessage extends QueueMessageLike = QueueMessageLike>(
  options: QueueHandlerOptions<Env, Message, QueueMessage>,
): QueueConsumer<Env, QueueMessage> {
  checkOptions(options, QUEUE_HANDLER_OPTION_KEYS as OptionKeys<QueueHandlerOptions<Env, Message, QueueMessage>>, "queueHandler");
  const { store, handle, retryDelaySeconds, logger, metrics, tracing, ...engineOptions } = options;
  if (typeof store !== "function") throw new InvalidOptionError("store", "must be a function (env) => Store");
  if (retryDelaySeconds !== undefined) checkDelay("retryDelaySeconds", retryDelaySeconds);
  const leaseMs = engineOptions.leaseMs ?? CONSUMER_WALL_TIME_MS;
  // Throws InvalidOptionError now, at module load, rather than on every batch.
  new BatchEngine<Message, QueueRuntimeContext<Env, QueueMessage>>(OPTIONS_PROBE, handle, { ...engineOptions, leaseMs });
  const observability = createObservability<Env>({ logger, metrics, tracing }, { system: "cloudflare_queues" });
  // A batch that fails before any decision is logged where the outcome lines go (not at all with `logger: false`).
  const write = lineLogger(logger);

  return async (batch, env, ctx) => {
    const messages = batch.messages;
    const settled = new Array<boolean>(messages.length).fill(false);
    const settleOnce = (index: number, result: MessageResult | undefined) => {
      const message = messages[index];
      if (message === undefined || settled[index]) return;
      settled[index] = true;
      settle(message, result, retryDelaySeconds);
    };
    let results: MessageResult[];
    const observation = observability.batch({ queue: batch.queue, size: messages.length, env });
    try {
      const engine = new BatchEngine<Message, QueueRuntimeContext<Env, QueueMessage>>(store(env), handle, {
        ...engineOptions,
        leaseMs,
      });
      const deliveries = messages.map(
        (message): Delivery<QueueRuntimeContext<Env, QueueMessage>> => ({
          body: message.body,
          redeliveries: Number.isSafeInteger(message.attempts) && message.attempts >= 1 ? message.attempts - 1 : 0,
          ...(typeof message.id === "string" ? { messageId: message.id } : {}),
          context: { message, queue: batch.queue, env, executionContext: ctx },
        }),
      );
      // Each message is acked or retried the moment its fate is final.
      results = await observation.run(() =>
        engine.process(deliveries, {
          leaseMs,
          onResult: settleOnce,
          ...engineHooks(observation),
        }),
      );
    } catch (error) {
      // Not a message's fault (a message's failure is its result): retry the whole batch.
      write?.("error", "queue batch failed before a decision, retrying all", {
        logger: "babelqueue-serverless",
        status: "batch-error",
        queue: batch.queue,
        ids: messages.length,
        error: errorFacts(error),
      });
      // Messages already acked stay acked (their effect is committed); the rest are retried.
      for (let i = 0; i < messages.length; i += 1) settleOnce(i, undefined);
      return;
    }
    for (let i = 0; i < messages.length; i += 1) settleOnce(i, results[i]);
  };
}
