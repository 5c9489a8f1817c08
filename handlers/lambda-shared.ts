/**
 * What the AWS Lambda handlers (`sqsHandler`, `kafkaHandler`) share: their options, the option
 * check, and one batch's run through the engine with the lease and the deadline the invocation
 * gives.
 *
 * - The lease covers the invocation: `context.getRemainingTimeInMillis()` + `leaseMarginMs`
 *   (default 5 s, for clock skew between hosts and the time the commit itself takes), and never
 *   less than the `leaseMs` option. While this invocation may still be running, no other delivery
 *   can claim its ids; once Lambda has killed it, the lease ends soon after and a redelivery can run.
 * - The deadline guard: the invocation's deadline (now + remaining time) goes to the engine, which,
 *   `deadlineMarginMs` (default 1 s) before it, stops starting handlers, flushes the commits of what
 *   finished, releases the claims of what never started, and answers — so Lambda gets a partial
 *   batch response instead of killing the invocation with none (which would redeliver the whole
 *   batch). A handler still running keeps its claim and is reported as a failure; if it finishes
 *   later (Lambda thaws the environment for the next invocation), its commit is still made. A thaw
 *   after the lease ended may follow a redelivery that ran it: nothing renews a lease (docs: limits).
 * - Logs, metrics and tracing come from `createObservability`, per batch.
 *
 * What this is *not*: an event source's mapping. Turning records into deliveries (attempts, FIFO
 * groups or partitions, headers, the schema gate) and results into a partial batch response is
 * each handler's own business (lambda-sqs.ts, lambda-kafka.ts).
 */
import type { Context } from "aws-lambda";
import type { Store } from "../src/contract.js";
import type { MessageResult } from "../src/decision.js";
import { BatchEngine, type Delivery, ENGINE_OPTION_KEYS, type EngineOptions, type Handler } from "../src/engine/index.js";
import { InvalidMessageError, InvalidOptionError } from "../src/errors.js";
import {
  type MessagingSystem,
  OBSERVABILITY_OPTION_KEYS,
  type ObservabilityOptions,
  createObservability,
  engineHooks,
} from "../src/observability/index.js";
import { type OptionKeys, checkOptions, optionKeys, unionKeys } from "../src/store-kit/options.js";

/** Options of a Lambda handler: the store, the side effect, the engine's options and the lease margin. */
export interface LambdaHandlerOptions<Message, RuntimeContext> extends EngineOptions<Message>, ObservabilityOptions {
  /** Where ids are claimed and committed: a `ClaimingStore` (DynamoDBStore, …) or a seen-set `Store`. */
  store: Store;
  /** The side effect. Throw to have the message retried. */
  handle: Handler<Message, RuntimeContext>;
  /**
   * Added to the invocation's remaining time to size the lease (ms). Default 5000. The lease is
   * `max(leaseMs option, remaining time + leaseMarginMs)`; when the context has no remaining time,
   * the `leaseMs` option or the store's default lease applies.
   */
  leaseMarginMs?: number;
}

const DEFAULT_LEASE_MARGIN_MS = 5_000;

/** Every key of `LambdaHandlerOptions`: the engine's, observability's and the handler's own. */
const LAMBDA_HANDLER_OPTION_KEYS = unionKeys(
  unionKeys(ENGINE_OPTION_KEYS, OBSERVABILITY_OPTION_KEYS),
  optionKeys<Omit<LambdaHandlerOptions<unknown, unknown>, keyof EngineOptions | keyof ObservabilityOptions>>({
    store: true,
    handle: true,
    leaseMarginMs: true,
  }),
) as OptionKeys<LambdaHandlerOptions<unknown, unknown>>;

/**
 * Fails the invocation, so that Lambda retries the batch whole (or hands it to its failure
 * destination): for an event a handler must not answer for record by record — another event
 * source's, or records it cannot name in its answer.
 */
export function refuseEvent(owner: string, reason: string): never {
  throw new InvalidMessageError(`${owner}: ${reason}; the invocation fails so that Lambda retries the batch`);
}

/**
 * The records a partial batch response lists, by index: every one not acknowledged, and in a group
 * (an SQS FIFO message group, a Kafka partition; `groupOf` answers undefined outside one) every one
 * after the group's first not acknowledged. The engine blocks a group's tail when it stops the group;
 * the answer can still hold an acknowledged record after one that is not (a commit retried past the
 * deadline leaves an earlier record in flight after a later one committed), and that record is listed
 * too: it comes back as a duplicate, in order.
 */
export function unacknowledgedTail(size: number, acked: (index: number) => boolean, groupOf: (index: number) => string | undefined): number[] {
  const stopped = new Set<string>();
  const listed: number[] = [];
  for (let index = 0; index < size; index += 1) {
    const group = groupOf(index);
    if (acked(index) && (group === undefined || !stopped.has(group))) continue;
    if (group !== undefined) stopped.add(group);
    listed.push(index);
  }
  return listed;
}

/** The invocation's time left (ms) as its context reads it, a spent clock (0 or less) included; undefined without a usable clock. */
export function timeLeftMs(context: Context | undefined): number | undefined {
  try {
    const left = context?.getRemainingTimeInMillis?.();
    return typeof left === "number" && Number.isFinite(left) ? left : undefined;
  } catch {
    return undefined;
  }
}

/** The invocation's remaining time (ms), or undefined when the context has none usable (a spent clock included). */
export function remainingMs(context: Context | undefined): number | undefined {
  const left = timeLeftMs(context);
  return left !== undefined && left > 0 ? left : undefined;
}

/** What one batch adds: the invocation's context and the name its logs and spans carry. */
export interface LambdaBatch<RuntimeContext> {
  readonly deliveries: readonly Delivery<RuntimeContext>[];
  readonly lambdaContext: Context;
  /** The queue or topic, for logs, metrics and spans. */
  readonly queue: string | undefined;
}

/** Runs one batch: one result per delivery, in order. Throws only if the engine itself fails. */
export type LambdaBatchRunner<RuntimeContext> = (batch: LambdaBatch<RuntimeContext>) => Promise<MessageResult[]>;

/**
 * Checks a Lambda handler's options now (unknown keys included, named after `owner`) and returns
 * its per-batch runner: the engine over the store, observability for `system`, the lease sized to
 * the invocation and the deadline passed on.
 */
export function lambdaBatchRunner<Message, RuntimeContext>(
  owner: string,
  options: LambdaHandlerOptions<Message, RuntimeContext>,
  system: MessagingSystem,
): LambdaBatchRunner<RuntimeContext> {
  checkOptions(options, LAMBDA_HANDLER_OPTION_KEYS as OptionKeys<LambdaHandlerOptions<Message, RuntimeContext>>, owner);
  const { store, handle, leaseMarginMs = DEFAULT_LEASE_MARGIN_MS, logger, metrics, tracing, ...engineOptions } = options;
  if (typeof leaseMarginMs !== "number" || !Number.isFinite(leaseMarginMs) || leaseMarginMs < 0) {
    throw new InvalidOptionError("leaseMarginMs", "must be a number of milliseconds >= 0");
  }
  const engine = new BatchEngine<Message, RuntimeContext>(store, handle, engineOptions);
  const observability = createObservability({ logger, metrics, tracing }, { system });

  return async ({ deliveries, lambdaContext, queue }) => {
    const observation = observability.batch({ ...(queue === undefined ? {} : { queue }), size: deliveries.length });
    const remaining = remainingMs(lambdaContext);
    const leaseMs = remaining === undefined ? engineOptions.leaseMs : Math.max(engineOptions.leaseMs ?? 0, remaining + leaseMarginMs);
    return observation.run(() =>
      engine.process(deliveries, {
        ...(leaseMs === undefined ? {} : { leaseMs }),
        ...(remaining === undefined ? {} : { deadline: Date.now() + remaining }),
        ...engineHooks(observation),
      }),
    );
  };
}
