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
 * then dies before `remember` is retried once the lease is over (docs/concepts/guarantees.md, "The one window no store can close").
 */

/**
 * The answer of `claim`: exactly one of three.
 *
 * `done` and `in-flight` carry the fingerprint the id was claimed (or remembered) under, when
 * one was stored, so the engine can tell a redelivery (same fingerprint) from a reused id with
 * another payload (a `conflict`) without another request. A record written without one (an
 * older version, or fingerprints off) has none and matches anything.
 */
export type Claim =
  /** This caller won. It owns the id until `leaseMs` elapses, and must `remember` or `release` it. */
  | { readonly status: "claimed"; readonly token: string }
  /** The id's effect is already committed: skip the handler and acknowledge the delivery. */
  | { readonly status: "done"; readonly fingerprint?: string }
  /**
   * Another delivery holds a live lease: do not run and do not acknowledge.
   * `retryAfterMs` is the lease's remaining time (0 when the store cannot tell).
   */
  | { readonly status: "in-flight"; readonly retryAfterMs: number; readonly fingerprint?: string };

/** The status names of `Claim`, for exhaustive switches. */
export type ClaimStatus = Claim["status"];

/**
 * A batch claim's answer for ONE id it could not decide (DynamoDB throttled that id's write, an
 * internal error on one request), while the other ids of the call were decided. Only `claimMany`
 * may answer it, never `claim` — so an exhaustive `switch` over `Claim` stays exhaustive.
 *
 * Nothing is held for that id: the store has released or never written its claim. The engine
 * treats the entry exactly as a store error on that id alone (fail-closed: the delivery is retried,
 * or run without dedupe with `onStoreError: "run"`); the batch's other ids go on.
 */
export interface ClaimFailure {
  readonly status: "failed";
  /** Why (typically a `StoreUnavailableError`; no key, token or payload in it). */
  readonly error: unknown;
}

/** One entry of `claimMany`'s answer: a decided `Claim`, or a `ClaimFailure` for that id alone. */
export type BatchClaim = Claim | ClaimFailure;

/** What a seen-set store recalls of one id: whether it is committed, and under which fingerprint. */
export interface Recall {
  readonly seen: boolean;
  /** The fingerprint the id was remembered under, when one was stored. */
  readonly fingerprint?: string;
}

/**
 * The seen-set every BabelQueue SDK shares. Its three methods may also answer synchronously
 * (BabelQueue's own `InMemoryStore` does): the engine awaits whatever they return.
 */
export interface Store {
  /**
   * True only for an id whose effect has been committed and is still within retention. The engine
   * also reads `1` / `0` (a Redis `EXISTS` reply a plain store passes through); any other answer is a
   * store failure, never "seen".
   */
  seen(id: string): Promise<boolean> | boolean;
  /**
   * Record the id as processed (the commit). Kept for the store's retention window.
   * `fingerprint` (optional) is stored with it. Without one, a claiming store keeps the claim's
   * where its commit can (memory, Redis, Durable Object, Postgres, D1) or stores none where the
   * commit is a blind write (DynamoDB's BatchWriteItem); the engine always passes the message's.
   */
  remember(id: string, fingerprint?: string): Promise<void> | void;
  /** Drop the id, whatever its state, so that a deliberate replay runs again. */
  forget(id: string): Promise<void> | void;
  /** Optional batch form of `seen`: one answer per id, in order. */
  seenMany?(ids: readonly string[]): Promise<boolean[]>;
  /**
   * Optional: `seenMany` plus the stored fingerprints, in the same one step. A seen-set store that
   * has it lets the engine report a reused id with another payload as a `conflict`.
   */
  recallMany?(ids: readonly string[]): Promise<Recall[]>;
  /**
   * Optional batch form of `remember`: the commit of many ids in one store step.
   * `fingerprints`, when given, has one entry per id (undefined where there is none). A step that
   * failed for some ids only may reject with a `PartialStepError` naming each id's error: the engine
   * then retries, and reports, only those ids. Any other rejection fails every id of the step.
   */
  rememberMany?(ids: readonly string[], fingerprints?: readonly (string | undefined)[]): Promise<void>;
  /** Optional, for operators (the CLI): what the store holds for one id, or null when nothing. */
  inspect?(id: string): Promise<IdRecord | null>;
}

/** What a store holds for one id, as an operator sees it. */
export interface IdRecord {
  readonly status: "in-flight" | "done";
  /** in-flight: the lease's remaining time (ms). */
  readonly leaseLeftMs?: number;
  /** done: the retention's remaining time (ms). */
  readonly retentionLeftMs?: number;
  readonly fingerprint?: string;
}

/**
 * What the engine knows of a batch's deliveries, passed to `claimMany` as its 4th argument.
 * Advisory only: a store may use it to choose how it decides the claims (DynamoDBStore reads a
 * batch full of redeliveries with one `BatchGetItem` before writing), never to change an answer.
 */
export interface ClaimHints {
  /**
   * One flag per id, in the order of `ids`: true when this delivery is a redelivery — SQS
   * `ApproximateReceiveCount` > 1, Cloudflare Queues `attempts` > 1, or the envelope's own
   * `attempts` > 0. A redelivered id is much more likely than a first delivery to be committed
   * or in flight already.
   */
  readonly redelivered?: readonly boolean[];
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
   * whose retention has expired, can be claimed again. `fingerprint`, when given, is stored with
   * the claim (and kept by the commit); `done` / `in-flight` answers return the stored one.
   */
  claim(id: string, leaseMs?: number, fingerprint?: string): Promise<Claim>;
  /**
   * Drop an *uncommitted* claim, and only if `token` still owns it. Resolves to true when
   * this call removed the claim; false when it was already gone, committed, or re-claimed
   * by someone else (the fence held).
   */
  release(id: string, token: string): Promise<boolean>;
  /**
   * Optional batch form of `claim`: one answer per id, in order; `fingerprints` one per id when given.
   * `hints` (optional) tells the store what the caller knows of the deliveries, so it can pick the
   * cheaper way to decide them (see `ClaimHints`); the answers are the same with or without it.
   *
   * Failures: a store that can fail one id of a batch while deciding the others (DynamoDB, one
   * request per id) answers that id with a `ClaimFailure` and holds nothing for it; a failure of the
   * whole step (the backend unreachable, one script or statement for every id) rejects the promise,
   * with nothing held for any id. A store never has to answer `ClaimFailure`: `Claim[]` is a valid answer.
   */
  claimMany?(
    ids: readonly string[],
    leaseMs?: number,
    fingerprints?: readonly (string | undefined)[],
    hints?: ClaimHints,
  ): Promise<BatchClaim[]>;
  /** Optional batch form of `release`; like `rememberMany`, it may reject with a `PartialStepError`. */
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

/** Longest payload fingerprint a store must hold (characters). Fingerprints are opaque strings of 1 to 64 characters. */
export const MAX_FINGERPRINT_LENGTH = 64;

/** Default lease of an in-flight claim. */
export const DEFAULT_LEASE_MS = 60_000;
/** Default retention of a committed id: SQS's and Cloudflare Queues' default message retention. */
export const DEFAULT_RETENTION_MS = 4 * 24 * 60 * 60 * 1000;

/** The claim a transactional commit is fenced by: the id, the token that owns it, its fingerprint. */
export interface FencedClaim {
  readonly id: string;
  readonly token: string;
  readonly fingerprint?: string;
}

/**
 * A claiming store that can commit a message together with the handler's own writes as ONE atomic
 * transaction, fenced by the claim (transactional mode; docs/ARCHITECTURE.md, "Transactional mode"). `Tx` is the handle the handler
 * writes through (DynamoDB: a collector of TransactWriteItems actions; Postgres: the transaction's
 * client; D1: a collector of prepared statements).
 *
 * What this is *not*: a cover for effects outside the store's database. An email sent or a card
 * charged inside `work` is not rolled back by anything here.
 */
export interface TransactionalStore<Tx> extends ClaimingStore {
  /**
   * Opens a transaction, calls `work(tx)` (the handler), then commits the handler's writes and the
   * commit of `claim.id` — conditioned on `claim.token` still owning the id — as one atomic unit.
   * Resolves when both happened. Rejects, with nothing written, with:
   * - whatever `work` threw;
   * - `FenceLostError` when the claim is no longer this caller's (lease expired and re-claimed, forgotten);
   * - `TransactionConditionError` when a condition of the handler's own writes failed;
   * - `StoreUnavailableError` when transient failures (throttling, serialization failures, deadlocks)
   *   outlast the store's bounded retries.
   * One exception to "nothing written": a `StoreUnavailableError` for a lost answer (the connection
   * dropped during the commit, a timeout) may follow a commit that landed — both or neither, never one
   * without the other; the id's record tells (done, or still in flight under this token).
   */
  transact(claim: FencedClaim, work: (tx: Tx) => Promise<void>): Promise<void>;
}

/** Tells a store that offers transactional mode. */
export function isTransactionalStore(store: Store): store is TransactionalStore<unknown> {
  return isClaimingStore(store) && typeof (store as Partial<TransactionalStore<unknown>>).transact === "function";
}
