/**
 * DynamoDB throttling on demand, for tests: a client middleware that refuses chosen ids' PutItem
 * with `ProvisionedThroughputExceededException` in one attempt, as the SDK hands it back when it
 * does not retry (its retry quota spent, or `maxAttempts: 1`). Every other request reaches the real
 * backend (DynamoDB Local).
 *
 * Why a stand-in: DynamoDB Local never throttles (it has no provisioned capacity to exceed), so this
 * fault cannot be produced by the real backend. The refusal is thrown in the SDK's `initialize`
 * step, outside its retry loop: the store sees the error the SDK would hand it after its retries.
 *
 * What this is *not*: a capacity model. Which puts are refused is the caller's choice, nothing else.
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { localClientConfig, onEveryRequest } from "../../scripts/dynamodb-local.mjs";

/** Whether the throttle is on, and how many puts it refused so far. */
export interface ThrottleSwitch {
  on: boolean;
  refused: number;
}

/** The request a refusal decision sees: the put's id (the part of the key after the namespace) and whether it is conditional (a claim). */
export interface ThrottledPut {
  readonly id: string;
  readonly conditional: boolean;
}

/** The error DynamoDB answers a throttled request with, shaped as the SDK throws it. */
export function throughputExceeded(): Error {
  return Object.assign(new Error("The level of configured provisioned throughput for the table was exceeded."), {
    name: "ProvisionedThroughputExceededException",
    $fault: "client",
    // One attempt: the store may then trust that nothing was written (after retries it may not).
    $metadata: { httpStatusCode: 400, attempts: 1 },
  });
}

/** Adds to `client` a middleware that refuses every PutItem `refuse` chooses (while the switch is on). */
export function throttlePuts(client: DynamoDBClient, refuse: (put: ThrottledPut) => boolean): ThrottleSwitch {
  const switchable: ThrottleSwitch = { on: true, refused: 0 };
  client.middlewareStack.add(
    (next, context) => async (args) => {
      if (switchable.on && context.commandName === "PutItemCommand") {
        const input = args.input as { Item?: { pk?: { S?: string } }; ConditionExpression?: string };
        const key = input.Item?.pk?.S ?? "";
        if (refuse({ id: key.slice(key.indexOf(":") + 1), conditional: input.ConditionExpression !== undefined })) {
          switchable.refused += 1;
          throw throughputExceeded();
        }
      }
      return next(args);
    },
    { step: "initialize", name: `throttleChosenPuts-${Math.random().toString(36).slice(2)}` },
  );
  return switchable;
}

/** A new client on `endpoint` that refuses the PutItem of any id in `throttled` (while on), and records every request it sends. */
export function throttlingClient(endpoint: string, throttled: ReadonlySet<string>): { client: DynamoDBClient; switchable: ThrottleSwitch; sent: string[] } {
  const client = new DynamoDBClient(localClientConfig(endpoint));
  const switchable = throttlePuts(client, (put) => throttled.has(put.id));
  const sent: string[] = [];
  onEveryRequest(client, (name) => sent.push(name));
  return { client, switchable, sent };
}
