/**
 * What the engine tells observers while it works: the facts logs, metrics and traces are made
 * of. An event never carries a message body, a fencing token or a store credential; `key` is the
 * dedupe key (`meta.id`), which is an identifier, not a payload.
 *
 * What this is *not*: a way to change an outcome. Observers run after the fact, and an observer
 * that throws is ignored.
 */
import type { MessageResult } from "./decision.js";

/** The store steps the engine makes. `transact` is a transactional-mode commit (writes + commit in one). */
export type StoreStep = "claim" | "seen" | "commit" | "release" | "transact";

/**
 * What the engine reports to `observe` (and to the handlers' logs, metrics and traces): a batch's
 * start and end, each message's final result, each store step with its duration, and each store
 * failure. Never a body, a payload or a token.
 */
export type EngineEvent =
  /** A batch is about to be processed. */
  | { readonly type: "batch-start"; readonly size: number }
  /**
   * One delivery's fate is final (emitted as soon as it is: a committed success does not wait
   * for the rest of the batch). `index` is the delivery's position in the batch.
   */
  | {
      readonly type: "result";
      readonly index: number;
      readonly result: MessageResult;
      /** The queue's own id of the delivery (SQS `messageId`, Workers `message.id`), when the adapter knows it. */
      readonly messageId?: string;
      /** Reconciled attempts (0 on a first delivery). */
      readonly attempts: number;
      /** How long the handler ran (ms), when it ran. */
      readonly handlerMs?: number;
      /**
       * A result after the batch was answered: a handler that was still running at the deadline
       * (reported then as `in-flight`) finished, and this is its real outcome (e.g. committed).
       */
      readonly late?: boolean;
    }
  /** One store step finished (a batch form counts once; per-id fallbacks count once per step too). */
  | { readonly type: "store-step"; readonly step: StoreStep; readonly ids: number; readonly durationMs: number; readonly ok: boolean }
  /** A store step failed for `ids` ids (also counted in its `store-step`). */
  | { readonly type: "store-error"; readonly step: StoreStep; readonly ids: number; readonly error: unknown }
  /** The batch is answered. `pending` counts handlers still running past a deadline (their commit comes later). */
  | { readonly type: "batch-end"; readonly size: number; readonly durationMs: number; readonly pending: number };

/** What a handler interceptor learns about the run it wraps. */
export interface RunInfo {
  readonly index: number;
  readonly key: string | undefined;
  readonly attempts: number;
  readonly messageId?: string;
  /** Out-of-band headers of the delivery (SQS message attributes), when the runtime has them. */
  readonly headers?: Readonly<Record<string, string>>;
  /**
   * The message's `trace_id` (a BabelQueue envelope's, or an own string `trace_id` of a custom
   * message), for a tracer's fallback parent when there is no `traceparent` header.
   */
  readonly traceId?: string;
}

/**
 * Wraps each handler invocation, e.g. to make a tracing span the active context while the user's
 * handler runs. It must call `run` exactly once and return (or rethrow) what it gives.
 */
export type RunInterceptor = (run: () => Promise<void>, info: RunInfo) => Promise<void>;
