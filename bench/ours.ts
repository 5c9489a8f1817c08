/**
 * BENCH — our kit: `sqsHandler` over a store, exactly as the README shows it. The effect is the
 * same counted no-op every kit guards.
 *
 * What this is *not*: tuned for the bench (default options throughout; the store runs turn logs off,
 * as in Powertools' kit, so duplicates print nothing — the overhead run keeps them on).
 */
import type { Store } from "../src/contract.js";
import { type SqsHandlerOptions, sqsHandler } from "../handlers/lambda-sqs.js";
import { Effect, type Kit, type RequestCounter } from "./kit.js";

export function oursKit(
  name: string,
  description: string,
  store: Store,
  requests: RequestCounter,
  options: Pick<SqsHandlerOptions, "fingerprint" | "logger" | "metrics" | "commitLingerMs"> = {},
): Kit {
  const effect = new Effect();
  const handler = sqsHandler({
    store,
    // Logs off unless asked for: Powertools' kit logs nothing either (a duplicate would print a line).
    logger: false,
    handle: async (_envelope, context) => effect.run(context.key ?? ""),
    ...options,
  });
  return { name, description, effect, requests, handler };
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
