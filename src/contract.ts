/**
 * The store contract.
 *
 * `Store` is the three-method seen-set every BabelQueue SDK shares (`seen` / `remember` /
 * `forget`), structurally identical to `@babelqueue/core`'s `Store`, so a store from this
 * package also works with that helper.
 *
 * `ClaimingStore` adds the atomic claim that closes the in-flight race: one round trip
 * answers "run it", "already done" or "someone else is running it right now", and a
 * fencing token makes sure a slow owner whose lease expired can never drop the next
 * owner's claim.
 *
 * What this is *not*: a distributed lock around arbitrary code. A lease is a promise that
 * nobody else will be *told* to run the id while it lasts; a handler that succeeds and
 * then dies before `remember` is retried once the lease is over (see README, "the window").
 */

/** The answer of `claim`: exactly one of three. */
export type Claim =
  /** This caller won. It owns the id until `leaseMs` elapses, and must `remember` or `release` it. */
  | { readonly status: "claimed"; readonly token: string }
  /** The id's effect is already committed: skip the handler and acknowledge the delivery. */
  | { readonly status: "done" }
  /**
   * Another delivery holds a live lease: do not run and do not acknowledge.
   * `retryAfterMs` is the lease's remaining time (0 when the store cannot tell).
   */
  | { readonly status: "in-flight"; readonly retryAfterMs: number };

/** The status names of `Claim`, for exhaustive switches. */
export type ClaimStatus = Claim["status"];

/** The seen-set every BabelQueue SDK shares. */
export interface Store {
  /** True only for an id whose effect has been committed and is still within retention. */
  seen(id: string): Promise<boolean>;
  /** Record the id as processed (the commit). Kept for the store's retention window. */
  remember(id: string): Promise<void>;
  /** Drop the id, whatever its state, so that a deliberate replay runs again. */
  forget(id: string): Promise<void>;
  /** Optional batch form of `seen`: one answer per id, in order. */
  seenMany?(ids: readonly string[]): Promise<boolean[]>;
  /** Optional batch form of `remember`: the commit of many ids in one store step. */
  rememberMany?(ids: readonly string[]): Promise<void>;
}

/** One owned claim, as `releaseMany` takes it. */
export interface ClaimRef {
  readonly id: string;
  readonly token: string;
}

/** A store that can claim atomically; it is still a seen-set `Store`. */
export interface ClaimingStore extends Store {
  /**
   * Claim `id` for `leaseMs` (the store's default lease when omitted). Atomic: of any number
   * of concurrent callers at most one gets `claimed`. An expired lease, or a committed id
   * whose retention has expired, can be claimed again.
   */
  claim(id: string, leaseMs?: number): Promise<Claim>;
  /**
   * Drop an *uncommitted* claim, and only if `token` still owns it. Resolves to true when
   * this call removed the claim; false when it was already gone, committed, or re-claimed
   * by someone else (the fence held).
   */
  release(id: string, token: string): Promise<boolean>;
  /** Optional batch form of `claim`: one `Claim` per id, in order. */
  claimMany?(ids: readonly string[], leaseMs?: number): Promise<Claim[]>;
  /** Optional batch form of `release`. */
  releaseMany?(claims: readonly ClaimRef[]): Promise<void>;
}

/** Tells a claiming store from a seen-set one (KV, a user's three-method store). */
export function isClaimingStore(store: Store): store is ClaimingStore {
  const candidate = store as Partial<ClaimingStore>;
  return typeof candidate.claim === "function" && typeof candidate.release === "function";
}

/** The two time windows every store takes, with their documented defaults. */
export interface StoreWindows {
  /**
   * How long an in-flight claim lasts when `claim` is called without `leaseMs`.
   * Must outlast the handler. Default: 60 seconds. The runtime wrappers pass their own
   * (the Lambda invocation's remaining time, the Workers consumer's wall-time limit).
   */
  leaseMs?: number;
  /**
   * How long a committed id is remembered. Should cover the broker's redelivery window:
   * SQS and Cloudflare Queues keep messages 4 days by default. Default: 4 days.
   */
  retentionMs?: number;
}

/** Default lease of an in-flight claim. */
export const DEFAULT_LEASE_MS = 60_000;
/** Default retention of a committed id: SQS's and Cloudflare Queues' default message retention. */
export const DEFAULT_RETENTION_MS = 4 * 24 * 60 * 60 * 1000;
