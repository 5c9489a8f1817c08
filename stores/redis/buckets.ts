/**
 * Hash-tag buckets: how `RedisStore` spreads one namespace over many Redis Cluster slots, and how it
 * finds an id again after the bucket count changed.
 *
 * Contract:
 *   - an id's bucket is `jumpHash(fnv1a32(id), buckets)`: FNV-1a (32-bit, over the id's UTF-16 code
 *     units, offset basis 0x811c9dc5, prime 0x01000193 — the hash the Durable Object store spreads
 *     shards with) fed to Lamping & Veach's jump consistent hash ("A Fast, Minimal Memory, Consistent
 *     Hash Algorithm", 2014). Pure arithmetic, the same in Node and workerd, stable across versions;
 *   - jump hash moves the fewest ids when the count changes: growing from n to m buckets moves
 *     exactly the ids that land in a new bucket (about (m − n) / m of them), and never moves an id
 *     between two old buckets;
 *   - bucket `b` of a namespace is the hash tag `{<namespace>:<b>}`, except bucket 0, which is
 *     `{<namespace>}`: so `buckets: 1` is exactly `hashTag: true`'s layout, and a store that grows
 *     from `hashTag: true` to `buckets: m` leaves 1/m of its ids where they are. Every key of one
 *     bucket shares one slot, so one script may touch all of them.
 *
 * What this is *not*: the slot map. Which node serves a bucket is the cluster's business (the client
 * reads it, see pipeline.ts); the number of buckets only bounds how many scripts a batch step needs
 * (at most one per bucket it touches, per 1,000 ids) and how evenly a namespace can spread.
 */

import { fnv1a32 } from "../fnv1a.js";

/** Most buckets a namespace may have (a batch step makes at most one script per bucket it touches). */
export const MAX_REDIS_BUCKETS = 1024;

const MASK_64 = (1n << 64n) - 1n;
const JUMP_MULTIPLIER = 2862933555777941757n;
const TWO_31 = 2 ** 31;

/** Jump consistent hash: the bucket in [0, buckets) of a 64-bit key (here a 32-bit one). */
export function jumpHash(key: number, buckets: number): number {
  let state = BigInt(key >>> 0);
  let bucket = -1;
  let next = 0;
  while (next < buckets) {
    bucket = next;
    state = (state * JUMP_MULTIPLIER + 1n) & MASK_64;
    next = Math.floor((bucket + 1) * (TWO_31 / (Number(state >> 33n) + 1)));
  }
  return bucket;
}

/** The bucket of an id among `buckets`. */
export function bucketOf(id: string, buckets: number): number {
  return buckets <= 1 ? 0 : jumpHash(fnv1a32(id), buckets);
}

/** The key head of a bucket: `{prefix}{<namespace>}` for bucket 0, `{prefix}{<namespace>:<b>}` otherwise. */
export function bucketHead(prefix: string, namespace: string, bucket: number): string {
  return bucket === 0 ? `${prefix}{${namespace}}` : `${prefix}{${namespace}:${bucket}}`;
}
