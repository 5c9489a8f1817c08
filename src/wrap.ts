/**
 * `wrap(store, handle, options)`: the single-message API, for any runtime or a hand-rolled
 * consumer loop. It is the batch engine with a batch of one, so one delivery is decided by
 * exactly the same rules as a message inside an SQS or Cloudflare batch.
 *
 * The wrapped function never throws for the message's sake: it resolves to a `MessageResult`
 * whose `ack` says whether to acknowledge the delivery. Options that are wrong throw
 * `InvalidOptionError` at `wrap` time, not per message.
 *
 * What this is *not*: a retry loop. Redelivery is the queue's job.
 */
import type { Store } from "./contract.js";
import type { MessageResult } from "./decision.js";
import { BatchEngine, type EngineOptions, type Handler } from "./engine.js";
import type { Envelope } from "./envelope.js";

/** Facts about one delivery that only the caller knows. */
export interface WrapDelivery {
  /** The runtime's 0-based redelivery count, reconciled with the body's `attempts`. */
  redeliveries?: number;
  /** Lease for this delivery (ms), overriding the option. */
  leaseMs?: number;
}

export type WrappedHandler = (body: unknown, delivery?: WrapDelivery) => Promise<MessageResult>;

export function wrap<Message = Envelope>(
  store: Store,
  handle: Handler<Message, object>,
  options: EngineOptions<Message> = {},
): WrappedHandler {
  const engine = new BatchEngine<Message, object>(store, handle, options);
  return async (body, delivery = {}) => {
    const [result] = await engine.process(
      [{ body, context: {}, ...(delivery.redeliveries === undefined ? {} : { redeliveries: delivery.redeliveries }) }],
      delivery.leaseMs === undefined ? {} : { leaseMs: delivery.leaseMs },
    );
    return result as MessageResult;
  };
}
