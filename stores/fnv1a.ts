/**
 * FNV-1a, 32-bit, over a string's UTF-16 code units (offset basis 0x811c9dc5, prime 0x01000193):
 * the one hash the stores spread keys with — the Durable Object store's shards (durable-object/
 * placement.ts) and the Redis stores' hash-tag buckets (redis/buckets.ts). Pure arithmetic, the same
 * in Node and workerd and across versions, well defined for any JavaScript string (lone surrogates
 * included): a stored key's place must never move with a runtime.
 *
 * What this is *not*: a cryptographic hash, or a fingerprint of a payload (src/fingerprint.ts).
 */

/** 32-bit FNV-1a of `text`'s UTF-16 code units, as an unsigned integer. */
export function fnv1a32(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i += 1) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}
