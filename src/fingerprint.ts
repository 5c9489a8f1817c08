/**
 * Payload fingerprints: what tells a redelivery of a message (same id, same content) from a
 * producer bug that reused an id for another message (same id, other content).
 *
 * The default fingerprint is a 128-bit hash (`h1:` + 22 base64url characters) of the canonical
 * JSON — object keys sorted at every depth — of the envelope's `job` and `data`. So a redelivery
 * that another SDK re-serialised, with other `attempts`, another `meta.lang` or another key order,
 * still matches; a different job or different data does not.
 *
 * Why not SHA-256: Web Crypto's digest is asynchronous and cost about 35 µs a message in the
 * benchmark — more than the rest of the engine together — while this check guards against
 * producer bugs, not adversaries (a producer that wants to reuse an id can do so anyway). A
 * synchronous 128-bit hash makes an accidental collision (which would only bring back the old
 * behaviour, a silent duplicate) vanishingly unlikely, in a few µs.
 *
 * What this is *not*: a content-addressed id, or a cryptographic digest. The dedupe key is still
 * `meta.id`; the fingerprint only checks that a reused id carries the same message. It is not a
 * secret either — a hash of the payload, stored next to the id.
 */

import { MAX_FINGERPRINT_LENGTH } from "./contract.js";

/** A message's fingerprint, or undefined when it has none (then it matches any record). */
export type Fingerprinter<Message> = (message: Message) => string | undefined | Promise<string | undefined>;


function isPlainRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * JSON with object keys sorted at every depth: equal for equal values whatever the key order.
 * Serialises as `JSON.stringify` would (`toJSON`, undefined and functions skipped in objects and
 * `null` in arrays, non-finite numbers as `null`); undefined for a cycle or a BigInt.
 */
export function canonicalJson(value: unknown): string | undefined {
  try {
    return serialise(value, new Set());
  } catch {
    return undefined;
  }
}

function serialise(value: unknown, stack: Set<object>): string | undefined {
  if (value === null) return "null";
  switch (typeof value) {
    case "string":
    case "boolean":
      return JSON.stringify(value);
    case "number":
      return Number.isFinite(value) ? JSON.stringify(value) : "null";
    case "bigint":
      throw new TypeError("BigInt has no JSON form");
    case "object":
      break;
    default:
      return undefined;
  }
  const object = value as object & { toJSON?: unknown };
  if (typeof object.toJSON === "function") return serialise((object.toJSON as () => unknown)(), stack);
  if (stack.has(object)) throw new TypeError("cycle");
  stack.add(object);
  let out: string;
  if (Array.isArray(object)) {
    out = `[${object.map((item) => serialise(item, stack) ?? "null").join(",")}]`;
  } else {
    const record = object as Record<string, unknown>;
    const parts: string[] = [];
    for (const key of Object.keys(record).sort()) {
      const item = serialise(record[key], stack);
      if (item !== undefined) parts.push(`${JSON.stringify(key)}:${item}`);
    }
    out = `{${parts.join(",")}}`;
  }
  stack.delete(object);
  return out;
}

const BASE64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/**
 * A 128-bit non-cryptographic hash of a string's UTF-16 code units: four 32-bit lanes, each
 * multiply-xor mixed per code unit and cross-fed, then avalanched (murmur3's fmix32). Stable across
 * runtimes (only `Math.imul` and 32-bit arithmetic), synchronous, a few µs for an envelope.
 */
export function hash128(text: string): string {
  let a = 0x6a09e667;
  let b = 0xbb67ae85;
  let c = 0x3c6ef372;
  let d = 0xa54ff53a;
  for (let i = 0; i < text.length; i += 1) {
    const unit = text.charCodeAt(i);
    a = Math.imul(a ^ unit, 0x01000193);
    b = Math.imul(b ^ unit, 0x5bd1e995) ^ (a >>> 15);
    c = Math.imul(c ^ unit, 0x27d4eb2d) ^ (b >>> 13);
    d = Math.imul(d ^ unit, 0x165667b1) ^ (c >>> 16);
  }
  const fmix = (h: number): number => {
    let x = h ^ (h >>> 16);
    x = Math.imul(x, 0x85ebca6b);
    x ^= x >>> 13;
    x = Math.imul(x, 0xc2b2ae35);
    return (x ^ (x >>> 16)) >>> 0;
  };
  // Cross-mix the lanes (and the length) before the final avalanche, so every lane sees every input unit.
  a = fmix(a ^ d ^ text.length);
  b = fmix(b ^ a);
  c = fmix(c ^ b);
  d = fmix(d ^ c);
  a = fmix(a ^ d);
  let out = "";
  let bits = 0;
  let buffer = 0;
  for (const lane of [a, b, c, d]) {
    for (let shift = 24; shift >= 0; shift -= 8) {
      buffer = (buffer << 8) | ((lane >>> shift) & 0xff);
      bits += 8;
      while (bits >= 6) {
        bits -= 6;
        out += BASE64URL[(buffer >>> bits) & 63];
      }
      buffer &= (1 << bits) - 1;
    }
  }
  if (bits > 0) out += BASE64URL[(buffer << (6 - bits)) & 63];
  return out;
}

/** The default fingerprint: `h1:` + the 128-bit hash of the canonical JSON of `{ job, data }`. */
export function defaultFingerprint(message: unknown): string | undefined {
  const record = isPlainRecord(message) ? message : { data: message };
  const canonical = canonicalJson({ job: record.job, data: record.data });
  return canonical === undefined ? undefined : `h1:${hash128(canonical)}`;
}

/**
 * Runs a fingerprinter safely. An answer longer than `MAX_FINGERPRINT_LENGTH` is hashed down to
 * one; a throw, a cycle or a non-string answer means "no fingerprint" (the message is then checked
 * by id only, as before this feature) rather than a failed delivery.
 */
export function fingerprintOf<Message>(
  fingerprinter: Fingerprinter<Message> | undefined,
  message: Message,
): string | undefined | Promise<string | undefined> {
  if (fingerprinter === undefined) return undefined;
  const settle = (value: unknown): string | undefined => {
    if (typeof value !== "string" || value === "") return undefined;
    return value.length <= MAX_FINGERPRINT_LENGTH ? value : `h1:${hash128(value)}`;
  };
  try {
    const value = fingerprinter(message);
    // Synchronous fingerprints (the default) stay synchronous: no event-loop turn per message.
    return value instanceof Promise ? value.then(settle, () => undefined) : settle(value);
  } catch {
    return undefined;
  }
}

/** True when a stored fingerprint and a message's disagree. A side without one matches anything. */
export function fingerprintsDiffer(stored: string | undefined, received: string | undefined): boolean {
  return stored !== undefined && received !== undefined && stored !== received;
}
