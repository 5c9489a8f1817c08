/**
 * How `DynamoDBStore` sends a request: built once one of its `maxConcurrentRequests` slots is free
 * (limiter.ts), with the clock-sampling middleware added to that one command (clock.ts), through the
 * store's client. Every request the store makes goes through here, so every answer refines the
 * service-clock estimate and no batch step has more than N requests in flight.
 *
 * What this is *not*: error mapping (each caller maps its own failures to `StoreUnavailableError`,
 * knowing which failure is an answer, e.g. a failed condition).
 */
import type {
  BatchGetItemCommand,
  BatchWriteItemCommand,
  DeleteItemCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  TransactWriteItemsCommand,
} from "@aws-sdk/client-dynamodb";
import { type CommandWithStack, type ServiceClock, sampledBy } from "./clock.js";
import type { RequestLimiter } from "./limiter.js";

/** The commands the store sends. */
export type StoreCommand =
  | PutItemCommand
  | GetItemCommand
  | DeleteItemCommand
  | BatchWriteItemCommand
  | BatchGetItemCommand
  | TransactWriteItemsCommand;

/** Sends the command `build` returns; `build` runs when the request can go out (times read in it are fresh). */
export type Send = <T>(build: () => StoreCommand) => Promise<T>;

export function sender(client: DynamoDBClient, limiter: RequestLimiter, clock: ServiceClock): Send {
  return <T>(build: () => StoreCommand) =>
    limiter.run(() => {
      const command = build();
      sampledBy(command as unknown as CommandWithStack, clock);
      // One union of commands, one client: the SDK's per-command overloads cannot name the union.
      // The (empty) options object is load-bearing: with `cacheMiddleware: true` the client reuses one
      // handler per command class for sends *without* options, built from whichever command came
      // first, so the sampling middleware on this command would be skipped and DynamoDB's clock
      // never learned. A send with options always resolves this command's own stack.
      return client.send(command as never, {}) as Promise<T>;
    });
}
