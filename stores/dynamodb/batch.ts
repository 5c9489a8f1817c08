/**
 * `DynamoDBStore`'s batch requests: `BatchWriteItem` in chunks of 25 and consistent `BatchGetItem`
 * in chunks of 100, chunks sent in parallel through the store's sender (at most
 * `maxConcurrentRequests` in flight, send.ts). What DynamoDB leaves unprocessed (throttling, size
 * limits) is resent with exponential backoff and full jitter, a bounded number of times, then the
 * call fails with `StoreUnavailableError` — for writes, only the items left unwritten (`writeAll`).
 * `readOnce` is the exception: it sends each chunk once and reports only what came back (the claim
 * precheck claims whatever it could not read).
 *
 * What this is *not*: atomic. A batch write is many independent puts (no conditions, no rollback).
 */
import {
  BatchGetItemCommand,
  type BatchGetItemCommandOutput,
  BatchWriteItemCommand,
  type BatchWriteItemCommandOutput,
  type WriteRequest,
} from "@aws-sdk/client-dynamodb";
import { StoreUnavailableError } from "../../src/errors.js";
import type { Item } from "./items.js";
import type { Send } from "./send.js";

export const BATCH_WRITE_LIMIT = 25;
export const BATCH_GET_LIMIT = 100;
const STORE_NAME = "DynamoDBStore";

/** What the batch helpers need of the store. */
export interface BatchTarget {
  /** The store's sender (bounded, clock-sampled). */
  readonly send: Send;
  readonly table: string;
  readonly keyAttribute: string;
  /** Resends of unprocessed items before failing (`maxUnprocessedRetries`). */
  readonly maxRetries: number;
  /** Maps a failure to the store's `StoreUnavailableError` (no key, token or payload in it). */
  fail(operation: string, error: unknown): Error;
}

/** A projection: the expression and the names it uses. */
export interface Projection {
  readonly expression: string;
  readonly names: Record<string, string>;
}

function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/** Exponential backoff with full jitter: 50 ms doubling, capped at 2 s. */
export function backoffMs(attempt: number): number {
  const ceiling = Math.min(2000, 50 * 2 ** attempt);
  return Math.floor(ceiling / 2 + Math.random() * (ceiling / 2));
}

/**
 * Sends `first`, then resends whatever DynamoDB returned unprocessed with exponential backoff and
 * jitter, `target.maxRetries` times at most.
 */
export async function untilProcessed<T>(
  target: BatchTarget,
  operation: string,
  what: string,
  first: T[],
  send: (pending: T[]) => Promise<T[]>,
): Promise<void> {
  let pending = first;
  for (let attempt = 0; ; attempt++) {
    let unprocessed: T[];
    try {
      unprocessed = await send(pending);
    } catch (error) {
      throw target.fail(operation, error);
    }
    if (unprocessed.length === 0) return;
    if (attempt >= target.maxRetries) {
      throw new StoreUnavailableError(
        STORE_NAME,
        operation,
        `${unprocessed.length} ${what} still unprocessed after ${attempt + 1} attempts on table ${target.table}`,
      );
    }
    pending = unprocessed;
    await new Promise<void>((resolve) => setTimeout(resolve, backoffMs(attempt)));
  }
}

/**
 * The table's entry of a batch answer's map (`Responses`, `UnprocessedItems`, `UnprocessedKeys`). A
 * request here names one table, so the answer holds at most that one: read by the name given, else
 * the only entry — a table given as an ARN may come back keyed by its name, or the other way round.
 */
function ofTable<T>(map: Record<string, T> | undefined, table: string): T | undefined {
  if (map === undefined) return undefined;
  return map[table] ?? Object.values(map)[0];
}

/**
 * Puts every item: `BatchWriteItem` in chunks of 25, in parallel, unprocessed items resent. Answers
 * the items that were not written, by key, each with its chunk's error (empty when every item was):
 * a chunk that failed does not undo the chunks that were written, nor the puts of its own that an
 * earlier attempt got through.
 */
export async function writeAll(target: BatchTarget, operation: string, items: readonly Item[]): Promise<Map<string, Error>> {
  const unwritten = new Map<string, Error>();
  await Promise.all(
    chunks(items, BATCH_WRITE_LIMIT).map(async (chunk) => {
      const requests = chunk.map((item): WriteRequest => ({ PutRequest: { Item: item } }));
      // What is still unwritten if the chunk fails now: the requests being sent, then what came back unprocessed.
      let outstanding: WriteRequest[] = requests;
      try {
        await untilProcessed<WriteRequest>(target, operation, "item(s)", requests, async (pending) => {
          outstanding = pending;
          const answer = await target.send<BatchWriteItemCommandOutput>(() => new BatchWriteItemCommand({ RequestItems: { [target.table]: pending } }));
          outstanding = ofTable(answer.UnprocessedItems, target.table) ?? [];
          return outstanding;
        });
      } catch (error) {
        // Never a failure read as success: with nothing outstanding on record, the whole chunk failed.
        for (const request of outstanding.length > 0 ? outstanding : requests) {
          const key = request.PutRequest?.Item?.[target.keyAttribute]?.S;
          if (key !== undefined) unwritten.set(key, error as Error);
        }
      }
    }),
  );
  return unwritten;
}

/** One consistent `BatchGetItem` of `keys` (≤ 100): the items found, and the keys left unprocessed. */
async function getChunk(target: BatchTarget, keys: Item[], projection: Projection, found: Map<string, Item>): Promise<Item[]> {
  const answer = await target.send<BatchGetItemCommandOutput>(
    () =>
      new BatchGetItemCommand({
        RequestItems: {
          [target.table]: { Keys: keys, ConsistentRead: true, ProjectionExpression: projection.expression, ExpressionAttributeNames: projection.names },
        },
      }),
  );
  for (const item of ofTable(answer.Responses, target.table) ?? []) {
    const key = item[target.keyAttribute]?.S;
    if (key !== undefined) found.set(key, item);
  }
  return ofTable(answer.UnprocessedKeys, target.table)?.Keys ?? [];
}

/** Reads every key consistently (chunks of 100, in parallel), re-reading unprocessed keys with backoff. */
export async function readAll(target: BatchTarget, operation: string, keys: readonly string[], projection: Projection): Promise<Map<string, Item>> {
  const found = new Map<string, Item>();
  await Promise.all(
    chunks(keys, BATCH_GET_LIMIT).map((chunk) =>
      untilProcessed<Item>(target, operation, "key(s)", chunk.map((key) => ({ [target.keyAttribute]: { S: key } })), (pending) =>
        getChunk(target, pending, projection, found),
      ),
    ),
  );
  return found;
}

/**
 * Reads every key consistently ONCE (one request per chunk of 100, in parallel). Keys DynamoDB left
 * unprocessed are simply missing from the answer. Rejects with the first request's failure.
 */
export async function readOnce(target: BatchTarget, keys: readonly string[], projection: Projection): Promise<Map<string, Item>> {
  const found = new Map<string, Item>();
  await Promise.all(
    chunks(keys, BATCH_GET_LIMIT).map((chunk) =>
      getChunk(target, chunk.map((key) => ({ [target.keyAttribute]: { S: key } })), projection, found),
    ),
  );
  return found;
}
