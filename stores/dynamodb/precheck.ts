/**
 * The claim precheck policy of `DynamoDBStore`: which ids of a `claimMany` call are read with one
 * consistent `BatchGetItem` before any conditional `PutItem` is sent.
 *
 * The trade, per id read (items under 1 KB, DynamoDB on-demand):
 * - found committed or in flight: the read answers it, and the `PutItem` that would have failed is
 *   never sent — one request and one write unit saved, for one read unit (a fifth of the price);
 * - found claimable (absent, expired): it is claimed with the `PutItem` anyway, after the read — one
 *   read unit and one sequential round trip spent for nothing.
 * The read itself is one request for up to 100 ids, so it pays for itself in requests from the
 * second id it finds blocking, and in billed units as soon as one in five of the ids it reads is.
 *
 * A redelivery (SQS `ApproximateReceiveCount` > 1) is where committed and in-flight ids are: a Lambda
 * that timed out or crashed after committing, a batch redelivered whole, a visibility timeout that
 * ran out mid-batch. A first delivery almost never is (only a producer that sent one id twice).
 * Hence the default, "auto": read the ids the engine flags as redelivered when there are at least
 * `AUTO_PRECHECK_MIN_REDELIVERED` of them, and never the first deliveries, which are claimed at once,
 * in parallel with the read, exactly as without a precheck. A batch of first deliveries therefore
 * costs what it always did, and a redelivered batch of 10 committed ids costs one request.
 *
 * "always" reads every id of every call (duplicates you expect without redelivery counts, e.g. a
 * producer that retries its sends); "never" never reads (every id is decided by its `PutItem`).
 *
 * What this is *not*: a cache, or a change to any answer. The read only answers ids it shows
 * blocking (committed and retained, or leased); everything else is still decided by the
 * conditional put, so the claim stays atomic.
 */
import type { Claim } from "../../src/contract.js";
import { type BatchTarget, type Projection, readOnce } from "./batch.js";
import { type Item, blockingVerdict } from "./items.js";

/** When `claimMany` reads before claiming: see the module header. */
export type PrecheckPolicy = "auto" | "always" | "never";

/** "auto" reads a call's redelivered ids only when there are at least this many of them (one read request must save two puts to pay). */
export const AUTO_PRECHECK_MIN_REDELIVERED = 2;

export const PRECHECK_POLICIES: readonly PrecheckPolicy[] = ["auto", "always", "never"];

/**
 * The keys to read first, out of a call's distinct `keys`; `redelivered[i]` flags `keys[i]`
 * (undefined when the caller gave no hints: "auto" then reads nothing).
 */
export function keysToRead(policy: PrecheckPolicy, keys: readonly string[], redelivered: readonly boolean[] | undefined): string[] {
  if (policy === "never" || keys.length === 0) return [];
  if (policy === "always") return [...keys];
  if (redelivered === undefined) return [];
  const flagged = keys.filter((_, index) => redelivered[index] === true);
  return flagged.length >= AUTO_PRECHECK_MIN_REDELIVERED ? flagged : [];
}

/**
 * The precheck read: the verdicts of the keys it shows committed or in flight. A key it shows
 * claimable, could not read (unprocessed), or a read that failed as a whole, leaves the decision
 * to the conditional put — the read is an optimisation, never an answer of its own.
 */
export async function readBlocking(
  target: BatchTarget,
  keys: readonly string[],
  projection: Projection,
  now: () => number,
): Promise<Map<string, Claim>> {
  const verdicts = new Map<string, Claim>();
  let items: Map<string, Item>;
  try {
    items = await readOnce(target, keys, projection);
  } catch {
    return verdicts;
  }
  // The clock after the answer: an item that blocks now was blocking when it was read.
  const after = now();
  for (const [key, item] of items) {
    const verdict = blockingVerdict(item, after);
    if (verdict !== undefined) verdicts.set(key, verdict);
  }
  return verdicts;
}
