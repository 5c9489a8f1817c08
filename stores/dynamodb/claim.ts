/**
 * One claim of one key on DynamoDB, on DynamoDB's clock (clock.ts) rather than the caller's.
 *
 * The request is today's ONE conditional `PutItem` (wins when the item is absent, its lease has
 * ended, or its retention has ended; `ReturnValuesOnConditionCheckFailure: ALL_OLD` answers done /
 * in-flight in the same round trip), with two differences:
 *
 * - its times come from the service-clock estimate: `:now` is the EARLIEST DynamoDB's clock can
 *   read (no lease is taken before it has ended by DynamoDB's clock), the lease written starts at
 *   the LATEST it can read (no lease is shorter than asked). At a cold start (no estimate yet) `:now`
 *   is 0 — only an absent item can be won — and the lease starts at the local clock + 1.5 s;
 * - it also asks `ReturnValues: ALL_OLD` (free: no read capacity, no extra request), so a win
 *   returns the item it replaced. The answer's own `Date` header refines the estimate. When the
 *   estimate the put was built from still stands (same `generation`: no cold start, step or
 *   contradicting answer since), its bounds held the true offset, so the put's condition and lease
 *   were right by construction; only a lease more than 2 s too long is rewritten. When the estimate
 *   started over, the win is checked against the new one: an item replaced while it may still have
 *   been live (a clock stepped) is put back, conditioned on our token, and the claim is answered
 *   in-flight or done; a lease written too short (or more than 2 s too long) is rewritten,
 *   conditioned on our token. Those corrections cost one request, only when a clock was wrong.
 *   (Re-checking a standing estimate would be wrong, not only wasteful: its bounds at the send time,
 *   read back from the answer's time, are widened for drift twice, and at a 1 s round trip about
 *   one claim in three was "corrected".)
 *
 * Bounds (with DynamoDB's `Date` truncated to the second, and clock rates within 200 ppm between
 * samples): a claim never wins a lease that is live by DynamoDB's clock; a lease is recorded to end
 * no earlier than `leaseMs` after the claim was sent and no later than 2 s + the estimate's width
 * (≤ 1 s + one round trip; a few ms once the estimate has seen a second boundary) after that.
 *
 * A put refused with `TransactionConflictException` (the item is in a transaction running now: in
 * transactional mode, its owner's commit; DynamoDB Local never raises it) wrote nothing: it is put
 * again after a short pause, and answered in-flight if the transaction outlasts MAX_PUTS puts.
 *
 * What this is *not*: a lock client. A won claim is a lease, not a heartbeat: nothing extends it
 * while the handler runs.
 */
import { PutItemCommand, type PutItemCommandOutput } from "@aws-sdk/client-dynamodb";
import type { Claim } from "../../src/contract.js";
import { DATE_RESOLUTION_MS, type ServiceClock } from "./clock.js";
import { CLAIMABLE, DONE, IN_FLIGHT, type Item, NAMES, blockingVerdict, fingerprintAttribute, isConditionFailure } from "./items.js";

/** How much longer than needed a lease may be recorded before the claim rewrites it (ms). */
export const MAX_LEASE_EXCESS_MS = 2 * DATE_RESOLUTION_MS;
/** Puts one claim may send before answering in-flight (a blocking item that keeps vanishing). */
const MAX_PUTS = 3;
/**
 * Pause before putting again after a `TransactionConflictException` (ms, times the put's number): the
 * item is inside a transaction that is running now — in transactional mode, its owner's commit — and
 * DynamoDB refuses a single-item write to it meanwhile, writing nothing. The transaction ends in
 * milliseconds; the next put then meets what it left (done, or the released item).
 */
const CONFLICT_PAUSE_MS = 25;
/** How long a claim answered in-flight for a transaction still running asks to wait (ms). */
const CONFLICT_RETRY_AFTER_MS = 1_000;

/** The condition of every correction: the item is still our in-flight claim. */
const STILL_OURS = "#s = :inflight AND #t = :token";

/** What a claim needs of the store. */
export interface ClaimTarget {
  readonly table: string;
  readonly keyAttribute: string;
  readonly ttlAttribute: string;
  readonly clock: ServiceClock;
  /** A fresh fencing token. */
  token(): string;
  /** Sends the command `build` returns, built once a request slot is free (limiter.ts), sampling the clock. */
  send<T>(build: () => PutItemCommand): Promise<T>;
  /** Consistent read of one key (the fallback for an emulator that returns no ALL_OLD item). */
  read(key: string): Promise<Item | undefined>;
  /** Maps a failure to the store's `StoreUnavailableError`. */
  fail(operation: string, error: unknown): Error;
  /**
   * Told that a put of this claim won (it is written) before its lease is checked: a failure after
   * this (a correction that could not be sent) leaves the claim written, for the caller to delete.
   */
  won?(token: string): void;
}

/** DynamoDB refused a single-item write because a transaction in progress includes the item (the Developer Guide, "Transaction conflict handling"). */
function isTransactionConflict(error: unknown): boolean {
  return error instanceof Error && error.name === "TransactionConflictException";
}

function ttl(deadlineMs: number): { N: string } {
  return { N: String(Math.ceil(deadlineMs / 1000)) };
}

/** The in-flight item of a claim. */
function claimItem(target: ClaimTarget, key: string, token: string, leaseUntil: number, fingerprint: string | undefined): Item {
  return {
    [target.keyAttribute]: { S: key },
    status: { S: IN_FLIGHT },
    token: { S: token },
    leaseUntil: { N: String(leaseUntil) },
    ...fingerprintAttribute(fingerprint),
    [target.ttlAttribute]: ttl(leaseUntil),
  };
}

/** A put of `item` that only lands while the key still holds our in-flight claim (`token`). */
function correction(target: ClaimTarget, item: Item, token: string): PutItemCommand {
  return new PutItemCommand({
    TableName: target.table,
    Item: item,
    ConditionExpression: STILL_OURS,
    ExpressionAttributeNames: { "#s": NAMES["#s"], "#t": NAMES["#t"] },
    ExpressionAttributeValues: { ":inflight": { S: IN_FLIGHT }, ":token": { S: token } },
  });
}

/** Claims `key` for `leaseMs`: claimed (with a token), done or in-flight. Throws the store's error. */
export async function claimKey(target: ClaimTarget, key: string, leaseMs: number, fingerprint: string | undefined): Promise<Claim> {
  for (let put = 1; ; put += 1) {
    const token = target.token();
    let sentAt = 0;
    let leaseUntil = 0;
    let generation = 0;
    let replaced: Item | undefined;
    try {
      const answer = await target.send<PutItemCommandOutput>(() => {
        // Times are read once the request can go out: a claim queued behind others gets its full lease.
        sentAt = target.clock.now();
        generation = target.clock.generation;
        const now = target.clock.conditionNow();
        leaseUntil = target.clock.deadlineBase() + leaseMs;
        return new PutItemCommand({
          TableName: target.table,
          Item: claimItem(target, key, token, leaseUntil, fingerprint),
          ConditionExpression: CLAIMABLE,
          ExpressionAttributeNames: { "#k": target.keyAttribute, "#s": NAMES["#s"], "#l": NAMES["#l"], "#r": NAMES["#r"] },
          ExpressionAttributeValues: { ":inflight": { S: IN_FLIGHT }, ":done": { S: DONE }, ":now": { N: String(now) } },
          ReturnValues: "ALL_OLD",
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        });
      });
      replaced = answer.Attributes;
    } catch (error) {
      if (isTransactionConflict(error)) {
        // Another delivery's transaction holds the item (not the SDK's to retry): it wrote nothing.
        if (put >= MAX_PUTS) return { status: "in-flight", retryAfterMs: CONFLICT_RETRY_AFTER_MS };
        await new Promise((resolve) => setTimeout(resolve, CONFLICT_PAUSE_MS * put));
        continue;
      }
      if (!isConditionFailure(error)) throw target.fail("claim", error);
      let blocking = error.Item;
      // An SDK retry of a put that had in fact landed meets our own item: we won (what the first
      // attempt replaced is unknown; it was claimable by the estimate the put was sent with).
      if (!(blocking?.token?.S === token && blocking.status?.S === IN_FLIGHT)) {
        if (blocking === undefined) blocking = await target.read(key);
        const verdict = blockingVerdict(blocking, target.clock.earliest());
        if (verdict !== undefined) return verdict;
        // The blocking item is gone or has ended (forget, release, or a cold start's `:now` of 0): put again.
        if (put >= MAX_PUTS) return { status: "in-flight", retryAfterMs: 0 };
        continue;
      }
    }
    return checkWin(target, key, token, fingerprint, { sentAt, leaseMs, leaseUntil, generation, replaced });
  }
}

/** A won put: what it was sent with, and what it replaced. */
export interface Win {
  /** Local time the put was built (its times were read then). */
  readonly sentAt: number;
  readonly leaseMs: number;
  /** The lease end the put wrote. */
  readonly leaseUntil: number;
  /** The clock's `generation` when the put was built. */
  readonly generation: number;
  /** The item the put replaced (`ReturnValues: ALL_OLD`), if any. */
  readonly replaced: Item | undefined;
}

/** What a won put needs: nothing, the replaced item put back, or its lease rewritten to end at `leaseUntil`. */
export type WinCheck =
  | { readonly action: "keep" }
  | { readonly action: "give-back"; readonly replaced: Item }
  | { readonly action: "rewrite"; readonly leaseUntil: number };

/** Checks a won put against the estimate its own answer just refined (no request: see `checkWin`). */
export function winCheck(clock: ServiceClock, win: Win): WinCheck {
  // The estimate the put was built from still stands: its `:now` and lease start were true bounds.
  const stands = clock.generation === win.generation;
  const known = clock.offset(win.sentAt);
  if (known === undefined && !stands) return withoutEstimate(win);
  const bounds = known ?? { min: 0, max: 0 };
  // The earliest DynamoDB's clock can have read when it decided the put.
  const decidedAt = win.sentAt + bounds.min;
  if (!stands && win.replaced !== undefined && blockingVerdict(win.replaced, decidedAt) !== undefined) {
    return { action: "give-back", replaced: win.replaced };
  }
  const needed = Math.ceil(win.sentAt + bounds.max) + win.leaseMs;
  const longEnough = stands || win.leaseUntil >= needed;
  if (longEnough && win.leaseUntil <= needed + MAX_LEASE_EXCESS_MS) return { action: "keep" };
  return { action: "rewrite", leaseUntil: needed };
}

/**
 * The estimate was dropped after the put was built (a clock step): DynamoDB's time is unknown, and
 * the local clock is the one that just proved wrong. Nothing is decided on its word: an item the put
 * replaced goes back (it may have been live), and the lease is never shortened — only lengthened to a
 * local lease when it is shorter than that. A lease too long only delays a redelivery; one too short
 * lets another consumer in while the handler runs.
 */
function withoutEstimate(win: Win): WinCheck {
  if (win.replaced !== undefined && blockingVerdict(win.replaced, Number.NEGATIVE_INFINITY) !== undefined) {
    return { action: "give-back", replaced: win.replaced };
  }
  const local = Math.ceil(win.sentAt) + win.leaseMs;
  return win.leaseUntil >= local ? { action: "keep" } : { action: "rewrite", leaseUntil: local };
}

/** A won put, checked against the estimate its own answer just refined (`winCheck`), and corrected if it must be. */
async function checkWin(target: ClaimTarget, key: string, token: string, fingerprint: string | undefined, win: Win): Promise<Claim> {
  target.won?.(token);
  const check = winCheck(target.clock, win);
  if (check.action === "keep") return { status: "claimed", token };
  if (check.action === "give-back") return giveBack(target, token, check.replaced);
  const needed = check.leaseUntil;
  // Written from a clock that was wrong (a cold start on a skewed host, a step): rewrite the lease.
  try {
    await target.send(() => correction(target, claimItem(target, key, token, needed, fingerprint), token));
    return { status: "claimed", token };
  } catch (error) {
    // Already not ours (the short lease was taken, or the id forgotten): we never ran, nothing to undo.
    if (isConditionFailure(error)) return { status: "in-flight", retryAfterMs: 0 };
    // Too long only: run; the commit or the release ends it (a crash leaves it to its lease).
    if (win.leaseUntil > needed) return { status: "claimed", token };
    // Too short and not fixed: another consumer may take it while we run. Fail closed.
    throw target.fail("claim", error);
  }
}

/**
 * Puts back the item a claim replaced while it may still have been live, and answers what it says.
 *
 * When the put-back itself fails (after the SDK's retries), the answer is the same and nothing more
 * is sent: our claim then stands where the replaced item stood, so the id stays held (for our lease)
 * and its owner's commit still overwrites it. Failing instead would have `claimMany` delete our
 * claim as a put of unknown fate, leaving the id free while its owner runs.
 */
async function giveBack(target: ClaimTarget, token: string, replaced: Item): Promise<Claim> {
  try {
    await target.send(() => correction(target, replaced, token));
  } catch {
    // A failed condition: our claim is gone already (its owner committed, or the id was forgotten),
    // nothing to give back. Any other failure: see above.
  }
  return blockingVerdict(replaced, target.clock.earliest()) ?? { status: "in-flight", retryAfterMs: 0 };
}
