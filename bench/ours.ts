/**
 * BENCH — our kit: `sqsHandler` over a store, exactly as the README shows it. The effect is the
 * same counted no-op every kit guards.
 *
 * What this is *not*: tuned for the bench (default options throughout). The one addition is the
 * redelivery hints the engine is about to pass the store (see `withRedeliveryHints`).
 */
import type { SQSEvent } from "aws-lambda";
import type { ClaimHints, ClaimingStore, Store } from "../src/contract.js";
import { sqsHandler } from "../handlers/lambda-sqs.js";
import { Effect, type Kit, type RequestCounter } from "./kit.js";

/**
 * The store as the engine will drive it once it passes `claimMany` its redelivery hints
 * (`ClaimHints`, one flag per id: ApproximateReceiveCount > 1): until then this fills them in from
 * the batch being handled, exactly so; when the engine passes hints itself, they are used untouched.
 */
function withRedeliveryHints(store: Store, current: () => ReadonlyMap<string, boolean>): Store {
  const claiming = store as ClaimingStore;
  if (typeof claiming.claimMany !== "function") return store;
  return new Proxy(claiming, {
    get(target, property) {
      if (property === "claimMany") {
        return (ids: readonly string[], leaseMs?: number, fingerprints?: readonly (string | undefined)[], hints?: ClaimHints) =>
          target.claimMany?.(ids, leaseMs, fingerprints, hints ?? { redelivered: ids.map((id) => current().get(id) === true) });
      }
      const value = Reflect.get(target, property) as unknown;
      return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/** Which ids of an SQS batch are redeliveries, as the engine reads them (receive count above 1). */
function redeliveredIds(event: SQSEvent): Map<string, boolean> {
  const out = new Map<string, boolean>();
  for (const record of event.Records) {
    const id = (JSON.parse(record.body) as { meta?: { id?: string } }).meta?.id;
    if (id !== undefined) out.set(id, Number(record.attributes.ApproximateReceiveCount) > 1);
  }
  return out;
}

export function oursKit(name: string, description: string, store: Store, requests: RequestCounter): Kit {
  const effect = new Effect();
  let current: ReadonlyMap<string, boolean> = new Map();
  const handler = sqsHandler({
    store: withRedeliveryHints(store, () => current),
    handle: async (_envelope, context) => effect.run(context.key ?? ""),
  });
  return {
    name,
    description,
    effect,
    requests,
    handler: async (event, context) => {
      current = redeliveredIds(event);
      return handler(event, context);
    },
  };
}

/** The baseline: a hand-written SQS handler with no idempotency at all (parse, run, report). */
export function bareKit(): Kit {
  const effect = new Effect();
  return {
    name: "bare",
    description: "hand-written loop: JSON.parse each body, run the effect, no dedupe",
    effect,
    requests: { count: 0, reset: () => undefined },
    handler: async (event) => {
      const batchItemFailures: { itemIdentifier: string }[] = [];
      for (const record of event.Records) {
        try {
          const body = JSON.parse(record.body) as { meta?: { id?: string } };
          await effect.run(body.meta?.id ?? "");
        } catch {
          batchItemFailures.push({ itemIdentifier: record.messageId });
        }
      }
      return { batchItemFailures };
    },
  };
}
