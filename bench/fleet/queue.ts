/**
 * BENCH — the fleet's shared queue: an SQS-like queue in the coordinator's memory that hands batches
 * of up to 10 to whichever consumer asks, with at-least-once delivery.
 *
 * - Every message is enqueued once; a share of them (`duplicateShare`) is enqueued a second time at a
 *   random later position — the same message delivered twice, often to two consumers at once, as SQS
 *   may do.
 * - A delivery a consumer did not acknowledge (a batch item failure: an in-flight park, a store error,
 *   a handler failure) becomes visible again after `visibilityMs` with its receive count raised.
 * - The queue is drained when every message was acknowledged at least once and nothing is in flight.
 *
 * What this is *not*: SQS. Order, visibility and receive counts are simulated just enough for the
 * consumers' idempotency to be exercised; no network is involved.
 */

export interface QueuedDelivery {
  readonly id: string;
  readonly messageId: string;
  readonly receiveCount: number;
}

export interface FleetQueueOptions {
  readonly messages: number;
  /** Share of messages delivered twice (0..1). */
  readonly duplicateShare: number;
  /** How long an unacknowledged delivery stays invisible (ms). */
  readonly visibilityMs: number;
  /** A 0..1 random source (seeded, so ours and Powertools see the same queue). */
  readonly random: () => number;
  /** Prefix of the message ids (unique per run, so every run starts from new ids). */
  readonly tag: string;
}

export class FleetQueue {
  readonly #visible: QueuedDelivery[] = [];
  readonly #delayed: { at: number; delivery: QueuedDelivery }[] = [];
  readonly #acked = new Set<string>();
  readonly #total: number;
  #inFlight = 0;
  #sequence = 0;
  /** Deliveries handed out (redeliveries and duplicates included). */
  delivered = 0;
  /** Deliveries handed back unacknowledged. */
  returned = 0;

  constructor(readonly options: FleetQueueOptions) {
    this.#total = options.messages;
    const ids = Array.from({ length: options.messages }, (_, i) => `${options.tag}-${i}`);
    for (const id of ids) this.#visible.push(this.#delivery(id, 1));
    for (const id of ids) {
      if (options.random() >= options.duplicateShare) continue;
      // The duplicate lands within the next ~50 batches: usually while the first copy is in flight somewhere.
      const at = Math.min(this.#visible.length, Math.floor(ids.indexOf(id) + 1 + options.random() * 500));
      this.#visible.splice(at, 0, this.#delivery(id, 1));
    }
  }

  #delivery(id: string, receiveCount: number): QueuedDelivery {
    this.#sequence += 1;
    return { id, messageId: `m-${this.#sequence}`, receiveCount };
  }

  /** Up to `max` visible deliveries (empty when nothing is visible right now). */
  receive(max: number, now: number): QueuedDelivery[] {
    for (let i = this.#delayed.length - 1; i >= 0; i -= 1) {
      const entry = this.#delayed[i] as { at: number; delivery: QueuedDelivery };
      if (entry.at <= now) {
        this.#visible.push(entry.delivery);
        this.#delayed.splice(i, 1);
      }
    }
    const batch = this.#visible.splice(0, max);
    this.#inFlight += batch.length;
    this.delivered += batch.length;
    return batch;
  }

  /** The consumer's answer for a batch: every delivery acknowledged except `failedMessageIds`. */
  settle(batch: readonly QueuedDelivery[], failedMessageIds: ReadonlySet<string>, now: number): void {
    this.#inFlight -= batch.length;
    for (const delivery of batch) {
      if (failedMessageIds.has(delivery.messageId)) {
        this.returned += 1;
        this.#delayed.push({ at: now + this.options.visibilityMs, delivery: this.#delivery(delivery.id, delivery.receiveCount + 1) });
      } else {
        this.#acked.add(delivery.id);
      }
    }
  }

  /** True when every message was acknowledged and no delivery is in flight or waiting. */
  get drained(): boolean {
    return this.#acked.size === this.#total && this.#inFlight === 0 && this.#visible.length === 0 && this.#delayed.length === 0;
  }

  /** Something may become visible later (a delayed redelivery), even if nothing is visible now. */
  get waiting(): boolean {
    return this.#delayed.length > 0;
  }

  get acknowledged(): number {
    return this.#acked.size;
  }
}
