/**
 * BENCH — the messages between the fleet's coordinator (fleet.ts) and its consumers (consumer.ts).
 *
 * What this is *not*: a public protocol; both ends live in this folder.
 */
import type { QueuedDelivery } from "./queue.js";

export type FleetKit = "ours" | "Powertools";
export type FleetBackend = "DynamoDB" | "Redis" | "PostgreSQL";

/** Coordinator → consumer. */
export type ToConsumer = { readonly type: "batch"; readonly deliveries: readonly QueuedDelivery[] } | { readonly type: "stop" };

/** Consumer → coordinator. */
export type FromConsumer =
  | { readonly type: "ready" }
  | {
      readonly type: "done";
      /** Wall time of the handler call (ms). */
      readonly ms: number;
      /** Store requests the batch sent. */
      readonly requests: number;
      /** Ids whose effect ran in this batch (an id twice if it ran twice). */
      readonly ran: readonly string[];
      /** Message ids the consumer did not acknowledge. */
      readonly failed: readonly string[];
      /** The name of what the handler threw, when it threw out of the kit (it never should). */
      readonly error?: string;
    };
