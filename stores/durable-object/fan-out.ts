/**
 * One round of calls to a `DurableObjectStore`'s objects: requests grouped by shard, ONE call per
 * shard that has any, all in parallel, and every shard's call settled on its own — a shard that
 * fails (or answers with the wrong shape) fails only its own requests; the other shards' answers
 * stand, and no call is left running when the round returns.
 *
 * What this is *not*: a retry loop (the engine retries commits; a failed claim is retried with the
 * delivery), nor the place that decides what a failed request means for an id (store.ts does).
 */
import type { BabelQueueServerlessError } from "../../src/errors.js";

/** One request: an item for the object of one shard. */
export interface ShardRequest<Item> {
  readonly shard: number;
  readonly item: Item;
}

/** A request's answer, or the error its shard's call failed with. */
export type Settled<Answer> = { readonly ok: true; readonly value: Answer } | { readonly ok: false; readonly error: BabelQueueServerlessError };

/**
 * Sends `requests` as one call per shard (`call(shard, items)`, the shard's items in request order)
 * and answers one `Settled` per request, in request order. A call that resolves with no value (a
 * void RPC) answers `undefined` for each of its items; any other answer must be an array of one
 * entry per item, or the shard's items fail with `wrongShape()`. `failure` wraps a shard's error (`storeFailure`: a typed error passes as it is).
 */
export async function fanOut<Item, Answer>(
  requests: readonly ShardRequest<Item>[],
  call: (shard: number, items: Item[]) => Promise<unknown>,
  failure: (error: unknown) => BabelQueueServerlessError,
  wrongShape: () => BabelQueueServerlessError,
): Promise<Settled<Answer | undefined>[]> {
  const groups = new Map<number, { items: Item[]; positions: number[] }>();
  requests.forEach((request, position) => {
    let group = groups.get(request.shard);
    if (group === undefined) {
      group = { items: [], positions: [] };
      groups.set(request.shard, group);
    }
    group.items.push(request.item);
    group.positions.push(position);
  });
  const settled = new Array<Settled<Answer | undefined>>(requests.length);
  await Promise.all(
    [...groups].map(async ([shard, group]) => {
      let answers: (Answer | undefined)[];
      try {
        const result = await call(shard, group.items);
        if (result === undefined) answers = new Array<undefined>(group.items.length).fill(undefined);
        else if (Array.isArray(result) && result.length === group.items.length) answers = result as Answer[];
        else throw wrongShape();
      } catch (error) {
        const wrapped = failure(error);
        for (const position of group.positions) settled[position] = { ok: false, error: wrapped };
        return;
      }
      group.positions.forEach((position, i) => {
        settled[position] = { ok: true, value: answers[i] };
      });
    }),
  );
  return settled;
}

/** The first failure of a round, if any. */
export function firstFailure(settled: readonly Settled<unknown>[]): BabelQueueServerlessError | undefined {
  for (const answer of settled) if (!answer.ok) return answer.error;
  return undefined;
}
