/**
 * The item layout of `DynamoDBStore` and how an item reads as an answer. One item per
 * (namespace, id) key:
 *
 * | attribute       | type | meaning                                                                  |
 * | --------------- | ---- | ------------------------------------------------------------------------ |
 * | `pk` (option)   | S    | `{namespace}:{id}`, hashed to a fixed length past 2048 bytes (store kit)  |
 * | `status`        | S    | `"in-flight"` (claimed, lease running) or `"done"` (committed)            |
 * | `token`         | S    | the fencing token of an in-flight claim (absent once done)               |
 * | `leaseUntil`    | N    | in-flight: end of the lease, epoch milliseconds                          |
 * | `retainUntil`   | N    | done: end of the retention, epoch milliseconds                           |
 * | `fp`            | S    | the payload fingerprint the id was claimed / committed under (optional)  |
 * | `ttl` (option)  | N    | epoch *seconds* for DynamoDB's TTL sweep (cleanup only)                  |
 *
 * Expiry is always decided here against the time it is given — the store passes DynamoDB's clock as
 * it estimates it (clock.ts), never the caller's raw clock — and never left to DynamoDB's TTL sweep,
 * which deletes expired items up to days late. Items written before fingerprints existed have no
 * `fp` and answer without one.
 *
 * What this is *not*: a place that talks to DynamoDB.
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import type { Claim, IdRecord } from "../../src/contract.js";

export type Item = Record<string, AttributeValue>;

/** DynamoDB's limit on a partition key value, in UTF-8 bytes (longer keys are hashed, keys.ts). */
export const DYNAMODB_MAX_KEY_BYTES = 2048;

export const IN_FLIGHT = "in-flight";
export const DONE = "done";
/** The fingerprint attribute. */
export const FINGERPRINT = "fp";

/** Attribute-name placeholders shared by every expression. */
export const NAMES = { "#s": "status", "#t": "token", "#l": "leaseUntil", "#r": "retainUntil", "#f": FINGERPRINT } as const;

/**
 * Absent, or an in-flight item whose lease ended, or a done item whose retention ended. `:now` is
 * the earliest DynamoDB's clock can read (0 at a cold start: only an absent item is claimable).
 */
export const CLAIMABLE =
  "attribute_not_exists(#k) OR (#s = :inflight AND #l <= :now) OR (#s = :done AND #r <= :now)";
/**
 * Still in flight, lease live, held by this token: the fence of a release and of a transactional
 * commit. `:now` is the earliest DynamoDB's clock can read, so a lease live by its clock always
 * passes; the token is what fences a claim taken over by someone else.
 */
export const OWNED = "#s = :inflight AND #t = :token AND #l > :now";

/** `{ fingerprint }` when the item carries one, else nothing (spread into an answer). */
function fingerprintOf(item: Item): { fingerprint?: string } {
  const fingerprint = item[FINGERPRINT]?.S;
  return fingerprint === undefined ? {} : { fingerprint };
}

/**
 * What an existing item answers a claim: `done` / `in-flight` (with the lease's remaining time and
 * the stored fingerprint), or undefined when it does not block a claim (absent, expired).
 */
export function blockingVerdict(item: Item | undefined, now: number): Claim | undefined {
  if (item === undefined) return undefined;
  const status = item.status?.S;
  if (status === DONE) {
    return Number(item.retainUntil?.N) > now ? { status: "done", ...fingerprintOf(item) } : undefined;
  }
  if (status === IN_FLIGHT) {
    const until = Number(item.leaseUntil?.N);
    return until > now ? { status: "in-flight", retryAfterMs: until - now, ...fingerprintOf(item) } : undefined;
  }
  return undefined;
}

/** What an operator sees of an item (`inspect`): null when absent or expired. */
export function idRecord(item: Item | undefined, now: number): IdRecord | null {
  const verdict = blockingVerdict(item, now);
  if (item === undefined || verdict === undefined) return null;
  if (verdict.status === "done") {
    return { status: "done", retentionLeftMs: Number(item.retainUntil?.N) - now, ...fingerprintOf(item) };
  }
  if (verdict.status === "in-flight") return { status: "in-flight", leaseLeftMs: verdict.retryAfterMs, ...fingerprintOf(item) };
  return null;
}

/** True for an item committed and still within retention. */
export function isSeen(item: Item | undefined, now: number): boolean {
  return item?.status?.S === DONE && Number(item.retainUntil?.N) > now;
}

/** The `fp` attribute to write, or nothing. */
export function fingerprintAttribute(fingerprint: string | undefined): Item {
  return fingerprint === undefined ? {} : { [FINGERPRINT]: { S: fingerprint } };
}

export function isConditionFailure(error: unknown): error is Error & { Item?: Item } {
  return error instanceof Error && error.name === "ConditionalCheckFailedException";
}
