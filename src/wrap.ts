/**
 * `wrap(store, handle, options)`: the single-message API, with the shape of every BabelQueue
 * SDK's `Wrap(store, handler)` — it returns a handler of the same shape that RESOLVES when the
 * delivery may be acknowledged and REJECTS otherwise, so it drops into any job runner that
 * treats a resolved promise as success (BullMQ, a NestJS consumer, a hand-rolled loop).
 *
 * Resolves: the handler ran and its id was committed; a duplicate was skipped; an invalid body
 * was dropped (`onInvalid: "drop"`); a conflict was dropped (`onConflict: "drop"`); the commit
 * failed after the handler succeeded (`commit-failed`: the effect happened, a retry would repeat it).
 * Rejects with:
 * - the handler's own error, when it threw;
 * - `InFlightError` (with `retryAfterMs`) when another delivery holds the id's claim;
 * - `StoreUnavailableError` when the store could not answer (fail-closed);
 * - `InvalidMessageError` for a body that is not an accepted message;
 * - `PayloadConflictError` for a reused id with another payload;
 * - `DeadlineExceededError` when a `deadline` was given and came first; `FenceLostError` in transactional mode.
 *
 * `wrapResult` is the same engine returning the `MessageResult` instead, for callers that want
 * every detail. Both are the batch engine with a batch of one, so one delivery is decided by
 * exactly the same rules as a message inside an SQS or Cloudflare batch. Options that are wrong
 * throw `InvalidOptionError` at wrap time, not per message.
 *
 * What this is *not*: a retry loop. Redelivery is the queue's job.
 */
import type { Store } from "./contract.js";
import type { MessageResult } from "./decision.js";
import { BatchEngine, ENGINE_OPTION_KEYS, type EngineOptions, type Handler } from "./engine/index.js";
import { type OptionKeys, checkOptions } from "./store-kit/options.js";
import type { Envelope } from "./envelope.js";
import { BabelQueueServerlessError, InFlightError, InvalidOptionError } from "./errors.js";

/** Facts about one delivery that only the caller knows. */
export interface WrapDelivery {
  /** The runtime's 0-based redelivery count, reconciled with the body's `attempts`. */
  redeliveries?: number;
  /** Lease for this delivery (ms), overriding the option. */
  leaseMs?: number;
  /** Epoch ms by which the caller must have an answer (see `deadlineMarginMs`). */
  deadline?: number;
  /** The queue's own id of the delivery, for logs and traces. */
  messageId?: string;
  /** Out-of-band headers (e.g. `traceparent`), for interceptors such as tracing. */
  headers?: Readonly<Record<string, string>>;
}

/** Resolves when the delivery may be acknowledged; rejects otherwise. */
export type WrappedHandler = (body: unknown, delivery?: WrapDelivery) => Promise<void>;
/** Resolves with the full `MessageResult`; never rejects for the message's sake. */
export type WrappedResultHandler = (body: unknown, delivery?: WrapDelivery) => Promise<MessageResult>;

/** The error a not-acknowledged result rejects with. */
export function rejectionOf(result: MessageResult): unknown {
  if (result.status === "in-flight" && !(result.error instanceof BabelQueueServerlessError)) {
    return new InFlightError(result.key ?? "", result.retryAfterMs ?? 0);
  }
  if (result.error !== undefined) return result.error;
  return new BabelQueueServerlessError("NOT_ACKNOWLEDGED", `not acknowledged (${result.status})`);
}

/**
 * `wrap`, returning the `MessageResult` of each delivery (`status`, `ack`, `key`, `error`, …)
 * instead of resolving or rejecting: for callers that want every detail.
 *
 * @example
 * ```ts
 * import { InMemoryStore, wrapResult } from "babelqueue-serverless";
 *
 * const decide = wrapResult(new InMemoryStore(), async (envelope) => {
 *   await sendReceipt(envelope.data);
 * });
 * const result = await decide(rawJson);
 * if (!result.ack) console.log(`not acknowledged: ${result.status}`, result.retryAfterMs);
 * ```
 */
export function wrapResult<Message = Envelope>(
  store: Store,
  handle: Handler<Message, object>,
  options: EngineOptions<Message> = {},
): WrappedResultHandler {
  checkOptions(options, ENGINE_OPTION_KEYS as OptionKeys<EngineOptions<Message>>, "wrap");
  const engine = new BatchEngine<Message, object>(store, handle, options);
  return async (body, delivery) => {
    // `null` is "no details", as undefined is; anything else that is not an object is the caller's mistake.
    if (delivery !== undefined && typeof delivery !== "object") {
      throw new InvalidOptionError("delivery", "must be an object ({ redeliveries, leaseMs, deadline, messageId, headers }) or undefined");
    }
    const { redeliveries, leaseMs, deadline, messageId, headers } = delivery ?? {};
    const [result] = await engine.process(
      [
        {
          body,
          context: {},
          ...(redeliveries === undefined ? {} : { redeliveries }),
          ...(messageId === undefined ? {} : { messageId }),
          ...(headers === undefined ? {} : { headers }),
        },
      ],
      { ...(leaseMs === undefined ? {} : { leaseMs }), ...(deadline === undefined ? {} : { deadline }) },
    );
    return result as MessageResult;
  };
}

/**
 * Wraps a handler for one delivery at a time, for any job runner: the returned function resolves
 * when the delivery may be acknowledged (it ran and was committed, it was a duplicate, it was
 * dropped on purpose, or its commit failed after the effect) and rejects otherwise — with the
 * handler's own error, `InFlightError`, `StoreUnavailableError`, `InvalidMessageError`,
 * `PayloadConflictError`, `DeadlineExceededError` or `FenceLostError`. Wrong options throw
 * `InvalidOptionError` here, not per message.
 *
 * @param store Where ids are claimed and committed (any `Store`; a `ClaimingStore` closes the in-flight race).
 * @param handle The side effect. Throw to have the delivery retried.
 * @param options The engine's options (`EngineOptions`).
 *
 * @example
 * ```ts
 * import { InMemoryStore, wrap } from "babelqueue-serverless";
 *
 * const deliver = wrap(new InMemoryStore({ namespace: "orders" }), async (envelope, ctx) => {
 *   await chargeCard(envelope.data); // throw to have the job retried
 * });
 *
 * // In your job runner: a resolved promise acknowledges the job, a rejection retries it.
 * await deliver(job.data, { redeliveries: job.attemptsMade });
 * ```
 */
export function wrap<Message = Envelope>(store: Store, handle: Handler<Message, object>, options: EngineOptions<Message> = {}): WrappedHandler {
  const decide = wrapResult(store, handle, options);
  return async (body, delivery) => {
    const result = await decide(body, delivery);
    if (!result.ack) throw rejectionOf(result);
  };
}
