/**
 * `DurableObjectStore`: a `ClaimingStore` on Cloudflare Durable Objects — the client half. The
 * object class it calls, `IdempotencyObject`, is in object.ts; this file never imports
 * `cloudflare:workers`, so importing the store (in a test, a bundle, a Node type check) does not pull
 * the Workers runtime in.
 *
 * A Durable Object runs one request at a time, and its SQLite storage answers synchronously, so
 * a whole batch step (claim 100 ids, say) runs inside one object as one atomic transaction: of
 * any number of concurrent callers exactly one gets `claimed`. Ids are spread over `shards`
 * objects by a hash of their key (placement.ts), and every batch step makes ONE RPC call per shard
 * that holds at least one of the batch's ids (fan-out.ts).
 *
 * `IdempotencyObject` keeps one row per key and decides expiry itself on every call, by its own
 * clock: the store sends durations (`leaseMs`, `retentionMs`), never deadlines, so no caller's clock
 * can shorten or stretch a lease. A claim's fingerprint is written in the same call (and SQLite
 * transaction) as the claim; `done` / `in-flight` answers carry the stored one. An alarm deletes
 * expired rows, so storage stays bounded without any external job.
 *
 * Changing `shards`: with `previousShards` set to the old count, keys that move are looked up and
 * claimed in both their old and their new object until the old count's records are dead — the
 * migration window, whose rules and safety argument are in placement.ts. Without it, a change of
 * `shards` (or of `objectName`) moves ids to objects that know nothing of them.
 *
 * Per-shard failures: one shard's call failing fails only the ids that shard holds (fan-out.ts).
 * `claimMany` answers per id — a failed shard's ids as `{ status: "failed", error }` (the
 * contract's `ClaimFailure`, which the engine retries alone), every other shard's answers as they
 * are. `rememberMany` rejects with a `PartialStepError` naming each id's error when only some ids
 * failed (the engine retries and reports those alone), with the shard's own error when all did. The
 * other batch forms answer for a whole step, so they still throw `StoreUnavailableError` — but only
 * after every other shard's call has finished: what other shards did stands.
 *
 * What this is *not*: a cross-shard transaction (a batch step is atomic per shard, which is all
 * the contract asks: every id is decided by exactly one object, or — for a moved key in the window —
 * by the two objects in a fixed order).
 *
 * Types: the Workers runtime types (`@cloudflare/workers-types`) declare globals that clash with
 * Node's, and this file is also compiled with the package's Node program, so it describes the
 * binding structurally (`IdempotencyNamespace`). The real `DurableObjectNamespace<IdempotencyObject>`
 * satisfies it.
 */
import type { BatchClaim, Claim, ClaimRef, ClaimingStore, IdRecord, StoreWindows } from "../../src/contract.js";
import { type BabelQueueServerlessError, InvalidOptionError, StoreUnavailableError } from "../../src/errors.js";
import { storeFailure, throwStepFailures } from "../../src/store-kit/failures.js";
import { checkFingerprint, checkFingerprints, withFingerprint } from "../../src/store-kit/fingerprints.js";
import { checkNamespace, storeKey } from "../../src/store-kit/keys.js";
import { checkOptions, optionKeys } from "../../src/store-kit/options.js";
import { heldClaims, isToken } from "../../src/store-kit/tokens.js";
import { checkMs, resolveWindows } from "../../src/store-kit/windows.js";
import { type Settled, type ShardRequest, fanOut, firstFailure } from "./fan-out.js";
import { type Placement, pairToken, placeKey, shardOf, splitToken } from "./placement.js";

const STORE_NAME = "DurableObjectStore";
/** Keys longer than this (UTF-8 bytes, namespace included) keep a SHA-256 of the id instead: rows stay small. */
const MAX_KEY_BYTES = 512;
/** Most objects one store spreads its ids over. */
const MAX_SHARDS = 1024;
const DEFAULT_OBJECT_NAME = "babelqueue-idempotency";

/** The answer of one claim inside the object (the public `Claim`, as plain data over RPC). */
export type ShardClaim = Claim;

/** One owned claim as the object takes it: a store key (not an id) and its fencing token. */
export interface ShardClaimRef {
  readonly key: string;
  readonly token: string;
}

/** What one object holds for one key (the public `IdRecord`, as plain data over RPC), or null. */
export type ShardRecord = IdRecord | null;

/**
 * The RPC surface of one `IdempotencyObject`, as a stub exposes it. Every method takes a batch.
 * `fingerprints`, when passed, has one entry per key (null where there is none).
 */
export interface IdempotencyShard {
  claim(keys: string[], leaseMs: number, fingerprints?: (string | null)[], tokens?: string[]): Promise<ShardClaim[]>;
  remember(keys: string[], retentionMs: number, fingerprints?: (string | null)[]): Promise<void>;
  release(claims: ShardClaimRef[]): Promise<boolean[]>;
  seen(keys: string[]): Promise<boolean[]>;
  forget(keys: string[]): Promise<void>;
  inspect(keys: string[]): Promise<ShardRecord[]>;
}

/**
 * What the store needs of a Durable Object namespace binding. `env.IDEMPOTENCY` typed
 * `DurableObjectNamespace<IdempotencyObject>` satisfies it.
 */
export interface IdempotencyNamespace<Id = unknown> {
  idFromName(name: string): Id;
  get(id: Id): IdempotencyShard;
}

/** Options of `DurableObjectStore`. */
export interface DurableObjectStoreOptions extends StoreWindows {
  /**
   * Key prefix separating consumers that must each run their effect once (two Workers
   * consuming the same message in different namespaces each run it). Default `""`.
   * 0-200 characters of `A-Z a-z 0-9 _ . - /`.
   */
  namespace?: string;
  /**
   * How many objects the ids are spread over (hash of namespace + id). One object serialises
   * its calls, and a call carries a whole batch step, so 1 serves most consumers; raise it when
   * one object's throughput (on the order of 1,000 calls a second) is not enough. A batch step
   * makes one call per shard that holds one of its ids. To change it on a running deployment,
   * set `previousShards` to the old count for the migration window (docs/operating/shards.md);
   * changing it without one moves ids to objects that know nothing of them. Default 1, at most 1024.
   */
  shards?: number;
  /**
   * The shard count of the deployment before this one, while records it placed may still be live:
   * ids whose object differs under the two counts are looked up, claimed, committed and released in
   * both objects (the previous one first), so nothing in flight or remembered is lost and no id
   * runs twice while old and new versions run side by side. Keep it until `retentionMs` (plus the
   * longest lease) has passed since the last invocation of the old version ended, then remove it.
   * Default: none.
   */
  previousShards?: number;
  /**
   * Name prefix of the objects: shard `i` is `idFromName(\`${objectName}/shard-${i}\`)`. Two
   * stores with different names never share an object. Default `"babelqueue-idempotency"`.
   */
  objectName?: string;
  /**
   * Lease of an in-flight claim (ms) when `claim` is given none. Default 60 s; `queueHandler`
   * passes the consumer's wall-time limit (15 minutes) unless told otherwise.
   */
  leaseMs?: number;
  /**
   * How long a committed id is remembered (ms). Should cover the queue's redelivery window
   * (Cloudflare Queues keep messages 4 days by default). Default 4 days.
   */
  retentionMs?: number;
}

/**
 * One id's claim answer, or the failure of the shard that holds it: the per-id entry a `claimMany`
 * answer may carry once the store contract allows it (the engine's `ClaimFailure`).
 */
export type ClaimOutcome = Claim | { readonly status: "failed"; readonly error: BabelQueueServerlessError };

/** What a commit request carries to its object. */
interface KeyItem {
  readonly key: string;
  readonly fingerprint: string | null;
}

/** What a claim request carries to its object. */
interface ClaimItem extends KeyItem {
  /** The fencing token the claim is made under (drawn by the store, so a failed call can be released). */
  readonly token: string;
}

const DURABLE_OBJECT_OPTION_KEYS = optionKeys<DurableObjectStoreOptions>({
  namespace: true,
  shards: true,
  previousShards: true,
  objectName: true,
  leaseMs: true,
  retentionMs: true,
});

function checkShards(option: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 1 || value > MAX_SHARDS) {
    throw new InvalidOptionError(option, `must be an integer from 1 to ${MAX_SHARDS}`);
  }
  return value;
}

/** Throws the first failure of a step, once every shard has answered. */
function throwIfFailed(settled: readonly Settled<unknown>[]): void {
  const failure = firstFailure(settled);
  if (failure !== undefined) throw failure;
}

/**
 * A claiming store on Cloudflare Durable Objects: ids spread over `shards` objects of the
 * `IdempotencyObject` class, one RPC call per shard per batch step, each run as one SQLite
 * transaction inside the object. Keep `objectName` fixed for a deployment; change `shards` only
 * through a `previousShards` window (see the `previousShards` option).
 *
 * @example
 * ```ts
 * import { DurableObjectStore, queueHandler } from "babelqueue-serverless/cloudflare";
 * export { IdempotencyObject } from "babelqueue-serverless/cloudflare/durable-object";
 *
 * // wrangler.toml: [[durable_objects.bindings]] name = "IDEMPOTENCY", class_name = "IdempotencyObject"
 * export default {
 *   queue: queueHandler<Env>({
 *     store: (env) => new DurableObjectStore(env.IDEMPOTENCY, { namespace: "orders", shards: 4 }),
 *     handle: async (envelope) => sendReceipt(envelope.data),
 *   }),
 * };
 * ```
 */
export class DurableObjectStore implements ClaimingStore {
  readonly namespace: string;
  readonly shards: number;
  /** The previous shard count while a change is in its migration window, else undefined. */
  readonly previousShards: number | undefined;
  readonly objectName: string;
  readonly leaseMs: number;
  readonly retentionMs: number;
  readonly #binding: IdempotencyNamespace;

  constructor(binding: IdempotencyNamespace, options: DurableObjectStoreOptions = {}) {
    checkOptions(options, DURABLE_OBJECT_OPTION_KEYS, STORE_NAME);
    if (typeof binding?.idFromName !== "function" || typeof binding.get !== "function") {
      throw new InvalidOptionError("binding", "must be a Durable Object namespace bound to IdempotencyObject");
    }
    this.#binding = binding;
    this.namespace = checkNamespace(options.namespace ?? "");
    ({ leaseMs: this.leaseMs, retentionMs: this.retentionMs } = resolveWindows(options));
    this.shards = checkShards("shards", options.shards ?? 1);
    this.previousShards = options.previousShards === undefined ? undefined : checkShards("previousShards", options.previousShards);
    const objectName = options.objectName ?? DEFAULT_OBJECT_NAME;
    if (typeof objectName !== "string" || objectName === "" || objectName.length > 200) {
      throw new InvalidOptionError("objectName", "must be a non-empty string of at most 200 characters");
    }
    this.objectName = objectName;
  }

  /** The shard that owns a store key (under `shards`). */
  shardOf(key: string): number {
    return shardOf(key, this.shards);
  }

  /** Where a store key lives: its owner, and its previous owner when the key moved (migration window only). */
  placementOf(key: string): Placement {
    return placeKey(key, this.shards, this.previousShards);
  }

  #stub(shard: number): IdempotencyShard {
    return this.#binding.get(this.#binding.idFromName(`${this.objectName}/shard-${shard}`));
  }

  #keys(ids: readonly string[]): Promise<string[]> {
    return Promise.all(ids.map((id) => storeKey(this.namespace, id, MAX_KEY_BYTES)));
  }

  /** One round of calls: one per shard, each settled on its own (fan-out.ts). */
  #round<Item, Answer>(
    operation: string,
    requests: readonly ShardRequest<Item>[],
    call: (shard: IdempotencyShard, items: Item[]) => Promise<unknown>,
  ): Promise<Settled<Answer | undefined>[]> {
    return fanOut(
      requests,
      (shard, items) => call(this.#stub(shard), items),
      // The error's name only: a Durable Object's message may quote what it was called with.
      (error) => storeFailure(STORE_NAME, operation, error, { prefix: "the Durable Object call failed", message: false, cause: "original" }),
      () => new StoreUnavailableError(STORE_NAME, operation, "the Durable Object returned an answer of the wrong shape"),
    );
  }

  /**
   * Every object a key lives in, with the key's position: the owner's request, then — for a moved
   * key — the previous owner's. `parts[i]` lists the request indexes of key `i`.
   */
  #everywhere<Item>(keys: readonly string[], item: (key: string, i: number) => Item) {
    const requests: ShardRequest<Item>[] = [];
    const parts: number[][] = keys.map((key, i) => {
      const placement = this.placementOf(key);
      const mine = [requests.push({ shard: placement.owner, item: item(key, i) }) - 1];
      if (placement.previous !== undefined) mine.push(requests.push({ shard: placement.previous, item: item(key, i) }) - 1);
      return mine;
    });
    return { requests, parts };
  }

  async seen(id: string): Promise<boolean> {
    return (await this.seenMany([id]))[0] === true;
  }

  /** Committed in the key's object — or, for a moved key, in either of its two objects (one answer `true` suffices). */
  async seenMany(ids: readonly string[]): Promise<boolean[]> {
    if (ids.length === 0) return [];
    const keys = await this.#keys(ids);
    const { requests, parts } = this.#everywhere(keys, (key) => key);
    const answers = await this.#round<string, boolean>("seen", requests, (shard, batch) => shard.seen(batch));
    return parts.map((mine) => {
      const settled = mine.map((at) => answers[at] as Settled<boolean | undefined>);
      if (settled.some((answer) => answer.ok && answer.value === true)) return true;
      throwIfFailed(settled);
      return false;
    });
  }

  async remember(id: string, fingerprint?: string): Promise<void> {
    await this.rememberMany([id], [checkFingerprint(fingerprint)]);
  }

  async rememberMany(ids: readonly string[], fingerprints?: readonly (string | undefined)[]): Promise<void> {
    const checked = checkFingerprints(fingerprints, ids.length);
    if (ids.length === 0) return;
    const keys = await this.#keys(ids);
    const withAny = checked.some((fingerprint) => fingerprint !== undefined);
    const { requests, parts } = this.#everywhere(keys, (key, i) => ({ key, fingerprint: checked[i] ?? null }));
    const settled = await this.#round<KeyItem, void>("remember", requests, (shard, batch) =>
      shard.remember(
        batch.map((item) => item.key),
        this.retentionMs,
        withAny ? batch.map((item) => item.fingerprint) : undefined,
      ),
    );
    // Per id: committed only where every object it lives in wrote it (a moved key: both).
    throwStepFailures(STORE_NAME, "remember", parts.map((mine) => firstFailure(mine.map((at) => settled[at] as Settled<unknown>))));
  }

  async forget(id: string): Promise<void> {
    const keys = await this.#keys([id]);
    const { requests } = this.#everywhere(keys, (key) => key);
    throwIfFailed(await this.#round<string, void>("forget", requests, (shard, batch) => shard.forget(batch)));
  }

  /** What the objects hold for one id (for operators): a live commit wherever it is, else the owner's record, else the previous owner's. */
  async inspect(id: string): Promise<IdRecord | null> {
    const keys = await this.#keys([id]);
    const { requests } = this.#everywhere(keys, (key) => key);
    const answers = await this.#round<string, ShardRecord>("inspect", requests, (shard, batch) => shard.inspect(batch));
    throwIfFailed(answers);
    const records = answers.map((answer) => (answer.ok ? (answer.value ?? null) : null));
    return records.find((record) => record?.status === "done") ?? records.find((record) => record !== null) ?? null;
  }

  async claim(id: string, leaseMs?: number, fingerprint?: string): Promise<Claim> {
    const [answer] = await this.claimMany([id], leaseMs, [checkFingerprint(fingerprint)]);
    if (answer?.status === "failed") throw answer.error;
    return answer as Claim;
  }

  /** One `Claim` per id; the ids of a shard whose call failed answer `{ status: "failed", error }` (`ClaimFailure`). */
  async claimMany(ids: readonly string[], leaseMs?: number, fingerprints?: readonly (string | undefined)[]): Promise<BatchClaim[]> {
    const lease = checkMs("leaseMs", leaseMs ?? this.leaseMs);
    const checked = checkFingerprints(fingerprints, ids.length);
    if (ids.length === 0) return [];
    return this.#claimOutcomes(await this.#keys(ids), lease, checked);
  }

  /**
   * The claim step, answered per key (placement.ts, "claim"): round 1 claims every key in its
   * owner, or — a moved key — in its previous owner; round 2 claims in their owner the moved keys
   * that round 1 granted; a moved key granted by its previous owner and refused by its owner has that
   * grant released before the answer. A moved key whose previous owner failed is read (not claimed)
   * in its owner, alongside round 2: committed there (by a store on the new count) → `done`, else it
   * stays a failure. The store draws every claim's token, so a call that failed — it may have
   * landed and only its answer been lost — is followed by a release of its claims under those tokens
   * (best effort, with the other releases): a failed key holds nothing for the rest of its lease.
   */
  async #claimOutcomes(keys: readonly string[], leaseMs: number, fingerprints: readonly (string | undefined)[]): Promise<ClaimOutcome[]> {
    const withAny = fingerprints.some((fingerprint) => fingerprint !== undefined);
    const send = (shard: IdempotencyShard, batch: ClaimItem[]) =>
      shard.claim(
        batch.map((item) => item.key),
        leaseMs,
        withAny ? batch.map((item) => item.fingerprint) : undefined,
        batch.map((item) => item.token),
      );
    const placements = keys.map((key) => this.placementOf(key));
    const claimItem = (i: number): ClaimItem => ({ key: keys[i] as string, fingerprint: fingerprints[i] ?? null, token: crypto.randomUUID() });
    const firstRequests = keys.map((_, i): ShardRequest<ClaimItem> => ({ shard: placements[i]?.previous ?? (placements[i] as Placement).owner, item: claimItem(i) }));
    const first = await this.#round<ClaimItem, ShardClaim>("claim", firstRequests, send);
    const outcomes = first.map((answer): ClaimOutcome => (answer.ok ? (answer.value as Claim) : { status: "failed", error: answer.error }));
    // Released at the end, whatever else happens: the claims a failed call may have made.
    const undo: ShardRequest<ShardClaimRef>[] = firstRequests.flatMap((request, i) =>
      first[i]?.ok === false ? [{ shard: request.shard, item: { key: request.item.key, token: request.item.token } }] : [],
    );
    const moved = keys.flatMap((_, i) => (placements[i]?.previous !== undefined && outcomes[i]?.status === "claimed" ? [i] : []));
    const unanswered = keys.flatMap((_, i) => (placements[i]?.previous !== undefined && outcomes[i]?.status === "failed" ? [i] : []));
    if (moved.length === 0 && unanswered.length === 0 && undo.length === 0) return outcomes;
    const secondRequests = moved.map((i): ShardRequest<ClaimItem> => ({ shard: (placements[i] as Placement).owner, item: claimItem(i) }));
    const [second, owned] = await Promise.all([
      this.#round<ClaimItem, ShardClaim>("claim", secondRequests, send),
      this.#round<string, ShardRecord>(
        "claim",
        unanswered.map((i) => ({ shard: (placements[i] as Placement).owner, item: keys[i] as string })),
        (shard, batch) => shard.inspect(batch),
      ),
    ]);
    // A commit in either object answers a moved key, as `seen` does; anything else there cannot be
    // decided without the previous owner (it may hold a commit or a live claim), so it stays failed.
    unanswered.forEach((i, j) => {
      const answer = owned[j] as Settled<ShardRecord | undefined>;
      if (answer.ok && answer.value?.status === "done") outcomes[i] = { status: "done", ...withFingerprint(answer.value.fingerprint) };
    });
    moved.forEach((i, j) => {
      const previousToken = (outcomes[i] as { token: string }).token;
      const answer = second[j] as Settled<ShardClaim | undefined>;
      if (answer.ok && answer.value?.status === "claimed") {
        outcomes[i] = { status: "claimed", token: pairToken(answer.value.token, previousToken) };
        return;
      }
      // The previous owner's grant goes back; so does the owner's claim if its call failed (it may have landed).
      const key = keys[i] as string;
      undo.push({ shard: (placements[i] as Placement).previous as number, item: { key, token: previousToken } });
      if (!answer.ok) undo.push({ shard: (placements[i] as Placement).owner, item: { key, token: (secondRequests[j] as ShardRequest<ClaimItem>).item.token } });
      outcomes[i] = answer.ok ? (answer.value as Claim) : { status: "failed", error: answer.error };
    });
    await this.#round<ShardClaimRef, boolean>("release", undo, (shard, batch) => shard.release(batch));
    return outcomes;
  }

  async release(id: string, token: string): Promise<boolean> {
    if (!isToken(token)) return false;
    const [key] = await this.#keys([id]);
    const [released] = await this.#releaseKeys([{ key: key as string, token }]);
    return released === true;
  }

  async releaseMany(claims: readonly ClaimRef[]): Promise<void> {
    const held = heldClaims(claims);
    if (held.length === 0) return;
    const keys = await this.#keys(held.map((claim) => claim.id));
    await this.#releaseKeys(held.map((claim, i): ShardClaimRef => ({ key: keys[i] as string, token: claim.token })));
  }

  /**
   * Releases each claim where it is held. A pair token (a claim made in a migration window) is
   * released in the previous owner first and, only if that half was this token's, in the owner: a
   * token that is not exactly the claim's never removes either half. Any other token is sent whole to
   * every object the key lives in (only the object that issued it matches). Throws when any shard failed,
   * once all have answered.
   */
  async #releaseKeys(refs: readonly ShardClaimRef[]): Promise<boolean[]> {
    const tokens = refs.map((ref) => splitToken(ref.token));
    const paired = refs.map((ref, i) => tokens[i]?.paired === true && this.placementOf(ref.key).previous !== undefined);
    // Round 1: every plain release, and the previous owner's half of every pair.
    const requests: ShardRequest<ShardClaimRef>[] = [];
    const parts: number[][] = refs.map((ref, i) => {
      const split = tokens[i] as ReturnType<typeof splitToken>;
      const placement = this.placementOf(ref.key);
      if (paired[i]) return [requests.push({ shard: placement.previous as number, item: { key: ref.key, token: split.previous } }) - 1];
      // Sent whole: only a moved key's pair is ever split (the window store that claimed it is the one releasing it).
      const mine = [requests.push({ shard: placement.owner, item: { key: ref.key, token: ref.token } }) - 1];
      if (placement.previous !== undefined) mine.push(requests.push({ shard: placement.previous, item: { key: ref.key, token: ref.token } }) - 1);
      return mine;
    });
    const first = await this.#round<ShardClaimRef, boolean>("release", requests, (shard, batch) => shard.release(batch));
    const released = parts.map((mine) => mine.some((at) => (first[at] as { value?: boolean }).value === true));
    // Round 2: the owner's half of each pair whose previous half was released.
    const second = refs.flatMap((_ref, i) => (paired[i] && released[i] ? [i] : []));
    const owners = await this.#round<ShardClaimRef, boolean>(
      "release",
      second.map((i) => ({ shard: this.placementOf((refs[i] as ShardClaimRef).key).owner, item: { key: (refs[i] as ShardClaimRef).key, token: (tokens[i] as { owner: string }).owner } })),
      (shard, batch) => shard.release(batch),
    );
    second.forEach((i, j) => {
      released[i] = (owners[j] as { value?: boolean }).value === true;
    });
    throwIfFailed(first);
    throwIfFailed(owners);
    return released;
  }
}
