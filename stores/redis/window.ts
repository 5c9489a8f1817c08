/**
 * The bucket-change window: how `RedisStore` claims an id while the fleet moves from `previousBuckets`
 * to `buckets`, so that no in-flight or remembered id is lost and no id is ever claimed twice.
 *
 * During the window an id may have two keys: its key under the previous count (the OLD key) and
 * under the new one (the NEW key); jump hashing makes them the same key for most ids (buckets.ts).
 * Three kinds of consumers can share the store, never more than two kinds at once when the
 * changeover is done in two deploys (docs/operating/shards.md):
 *   - O, still on the previous count: reads and writes OLD keys only;
 *   - W, in the window (`buckets: m, previousBuckets: n`): the protocol below;
 *   - F, after the window (`buckets: m`): NEW keys only.
 *
 * Protocol of a W consumer:
 *   - claim: claim the OLD key first (the lock O also takes); where that wins and the id moved,
 *     claim the NEW key with the same fencing token (the lock F also takes). Winning both is
 *     `claimed`; losing the NEW key releases the OLD one (fenced by the token) and answers what the
 *     NEW key holds (`done` / `in-flight`). So W excludes O through the OLD key, F through the NEW
 *     key, and another W through the OLD key, always taken first;
 *   - remember: commits both keys (O reads the OLD one, F the NEW one), one step;
 *   - release, forget: both keys; seen: either key done; inspect: the NEW key's record, else the OLD.
 * A moved id costs a second claim round trip (and a third, a release, when it loses the NEW key);
 * an id that did not move has one key and costs what it always did.
 *
 * What this is *not*: a copy of old records into new buckets. Records only O wrote stay under their
 * OLD key until their lease or retention ends, which is why the window lasts a retention.
 */
import type { Claim } from "../../src/contract.js";
import type { StoreUnavailableError } from "../../src/errors.js";

/** One id's keys during the window (the same object twice for an id that did not move). */
export interface WindowKeys<K> {
  readonly old: K;
  readonly current: K;
  readonly moved: boolean;
}

/** The claim steps the window needs, over the store's own keys. */
export interface WindowSteps<K> {
  /** Claims these keys with these tokens (positions align); per key an answer, or undefined where its call failed. */
  claim(keys: readonly K[], tokens: readonly string[], positions: readonly number[]): Promise<{ values: (Claim | undefined)[]; error?: StoreUnavailableError }>;
  /**
   * Releases these keys fenced by these tokens, quietly (a failure leaves the claims to expire with
   * their lease). Sent after the claims on the same connections, so it also undoes a claim whose
   * call failed but still lands (ioredis resends what it had queued once it reconnects).
   */
  releaseQuietly(keys: readonly K[], tokens: readonly string[]): Promise<void>;
}

/** Claims every id across the window (see the header). `positions` index the batch's fingerprints. */
export async function claimAcrossWindow<K>(ids: readonly WindowKeys<K>[], tokens: readonly string[], steps: WindowSteps<K>): Promise<Claim[]> {
  const everyPosition = ids.map((_, i) => i);
  const first = await steps.claim(
    ids.map((id) => id.old),
    tokens,
    everyPosition,
  );
  const won = (answer: Claim | undefined) => answer?.status === "claimed";
  if (first.error !== undefined) {
    // Every token, not only the claims known to have won: a call that failed may still land.
    await steps.releaseQuietly(
      ids.map((id) => id.old),
      tokens,
    );
    throw first.error;
  }
  const answers = first.values as Claim[];
  const moved = everyPosition.filter((i) => won(answers[i]) && (ids[i] as WindowKeys<K>).moved);
  if (moved.length === 0) return answers;
  const second = await steps.claim(
    pick(ids, moved).map((id) => id.current),
    pick(tokens, moved),
    moved,
  );
  if (second.error !== undefined) {
    const oldHeld = everyPosition.filter((i) => won(answers[i]));
    await steps.releaseQuietly(
      [...pick(ids, oldHeld).map((id) => id.old), ...pick(ids, moved).map((id) => id.current)],
      [...pick(tokens, oldHeld), ...pick(tokens, moved)],
    );
    throw second.error;
  }
  const lost: number[] = [];
  moved.forEach((position, j) => {
    const answer = second.values[j] as Claim;
    if (answer.status !== "claimed") {
      answers[position] = answer;
      lost.push(position);
    }
  });
  if (lost.length > 0) await steps.releaseQuietly(pick(ids, lost).map((id) => id.old), pick(tokens, lost));
  return answers;
}

function pick<T>(values: readonly T[], at: readonly number[]): T[] {
  return at.map((position) => values[position] as T);
}
