/**
 * Where a store key lives among a `DurableObjectStore`'s objects, and how a shard count changes
 * without a double effect.
 *
 * Placement: shard `fnv1a32(key) mod shards` (32-bit FNV-1a over UTF-16 code units, ../fnv1a.ts:
 * stable across runtimes and versions). Shard `i` is the object named `${objectName}/shard-${i}`, so an object's
 * name does not depend on the count: growing from 4 to 8 shards keeps objects 0-3 and adds 4-7, and
 * a key whose shard index is the same under both counts stays in the very same object.
 *
 * Changing the count — the migration window. A store built with `previousShards` places every key
 * twice: its owner under `shards` and its previous owner under `previousShards`. A key whose two
 * owners are the same object did not move and is handled as always. A MOVED key is handled by both
 * objects, by these rules (store.ts applies them):
 *   - claim: claim in the previous owner first; only if that answered `claimed`, claim in the owner.
 *     Claimed in both → `claimed`, with a token that carries both objects' tokens (`pairToken`).
 *     The previous owner answers done / in-flight → that is the answer, and the owner is not
 *     touched (a redelivery of an id committed before the change costs one read in one object).
 *     The owner answers done / in-flight → that is the answer, and the previous owner's fresh claim
 *     is released at once. The previous owner fails → the owner is read, not claimed: a commit there
 *     (made under the new count) is the answer `done`; anything else stays a failure for that key.
 *   - commit (`remember`) and `forget`: in both objects.
 *   - release of a claim made in the window (its token is a pair): in the previous owner first, and
 *     in the owner only if that half was released — a token that is not exactly the claim's never
 *     removes either half. A plain token goes to both objects; only the one that issued it matches.
 *   - `seen`: committed in either object; `inspect`: the owner's record, else the previous owner's.
 *
 * Why claims never have two winners. A deployment moves through three configurations, and at any
 * moment at most two ADJACENT ones run (a Worker version still finishing its invocations next to the
 * new one): OLD = `{ shards: n }` claims a moved key in the previous owner P only; WINDOW =
 * `{ shards: m, previousShards: n }` claims in P and then in the owner O, and wins only if it wins
 * both; NEW = `{ shards: m }` claims in O only. OLD and WINDOW both need P; WINDOW and NEW both
 * need O. One object runs one claim transaction at a time and grants a live lease to one caller
 * (the store contract, per object), so of any callers that can run side by side, at most one wins
 * the object they share, and only that one can answer `claimed`. Within WINDOW alone, every caller
 * claims P first: P serialises them. A WINDOW loser that won P and lost O releases P before it
 * answers; if that release fails, P's claim only makes others wait for its lease (never a second
 * winner).
 *
 * Why nothing remembered is lost. Every commit under WINDOW writes both objects, so NEW finds in O
 * everything WINDOW committed; what OLD committed sits in P, which WINDOW reads. NEW stops reading P,
 * so P's records must be dead by then: switch from WINDOW to NEW only after the retention (plus the
 * longest lease) has passed since the last OLD invocation ended. A record's lease or retention is
 * decided by the object holding it, by that object's clock.
 *
 * The rules an operator follows (docs/operating/shards.md): deploy WINDOW; wait until no OLD
 * invocation runs (Cloudflare Queues: 15 minutes) and then `retentionMs` more; deploy NEW. One change
 * at a time. Growing (n < m) and shrinking (n > m) are the same procedure. What a window costs: a
 * moved key's first delivery claims and commits in two objects (2 rows written more) and its claim
 * step takes a second round trip; under `mod`, growing from n to 2n moves half the keys, from 1 to m
 * moves (m-1)/m of them.
 *
 * What this is *not*: consistent hashing. A count that is not a multiple of the old one moves more
 * keys than the minimum (n to n+1 moves n/(n+1) of them); correctness does not depend on it, only the
 * window's extra writes do. Another bucket-count store (Redis Cluster buckets) follows the same three
 * configurations and the same claim order: previous owner first, then the owner.
 */
import { fnv1a32 } from "../fnv1a.js";

/** The shard that owns a store key among `shards` objects. */
export function shardOf(key: string, shards: number): number {
  return shards === 1 ? 0 : fnv1a32(key) % shards;
}

/** Where one key lives: its owner, and its previous owner when that is another object (a moved key). */
export interface Placement {
  readonly owner: number;
  readonly previous?: number;
}

/** Places a key under `shards`, and under `previousShards` while a change of count is in its window. */
export function placeKey(key: string, shards: number, previousShards: number | undefined): Placement {
  const owner = shardOf(key, shards);
  if (previousShards === undefined || previousShards === shards) return { owner };
  const previous = shardOf(key, previousShards);
  return previous === owner ? { owner } : { owner, previous };
}

/** Separates the owner's token from the previous owner's in a moved key's claim token. */
const TOKEN_SEPARATOR = " ";

/** The token of a claim held in both objects: the owner's, then the previous owner's. */
export function pairToken(ownerToken: string, previousToken: string): string {
  return `${ownerToken}${TOKEN_SEPARATOR}${previousToken}`;
}

/**
 * The tokens to send with a release: a pair token is split into the owner's and the previous
 * owner's part; a plain token (claimed in one object, by a store without the window or before it)
 * is sent as it is to every object that may hold it — only the object that issued it matches.
 */
export function splitToken(token: string): { readonly owner: string; readonly previous: string; readonly paired: boolean } {
  const at = token.indexOf(TOKEN_SEPARATOR);
  if (at < 0) return { owner: token, previous: token, paired: false };
  return { owner: token.slice(0, at), previous: token.slice(at + TOKEN_SEPARATOR.length), paired: true };
}
