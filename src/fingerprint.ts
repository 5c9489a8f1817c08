/**
 * Payload fingerprints: what tells a redelivery of a message (same id, same content) from a
 * producer bug that reused an id for another message (same id, other content).
 *
 * The default fingerprint is a 128-bit hash (`h1:` + 22 base64url characters) of the canonical
 * JSON — object keys sorted at every depth — of the envelope's `job` and `data`. So a redelivery
 * that another SDK re-serialised, with other `attempts`, another `meta.lang` or another key order,
 * still matches; a different job or different data does not.
 *
 * Hashed while walking: `defaultFingerprint` feeds the canonical JSON to the hash piece by piece as
 * it walks the message, and never builds the string. The value is exactly `hash128(canonicalJson(…))`
 * (test/core/fingerprint.test.ts pins both, and checks them against each other on random values), so
 * fingerprints stored by earlier versions and by other SDKs stay comparable. The walk allocates
 * nothing per string, number or key except each object's sorted key list.
 *
 * Why not SHA-256: Web Crypto's digest is asynchronous and cost about 35 µs a message in the
 * benchmark — more than the rest of the engine together — while this check guards against
 * producer bugs, not adversaries (a producer that wants to reuse an id can do so anyway). A
 * synchronous 128-bit hash makes an accidental collision (which would only bring back the old
 * behaviour, a silent duplicate) vanishingly unlikely, in well under a µs for an envelope.
 *
 * Versions: the prefix names the form. Two hashes of different versions are never compared
 * (`fingerprintsDiffer`), so a release can change the form without redeliveries across the deploy
 * reading as conflicts. `h2:` is the form of a payload holding an empty object or array, or an object
 * keyed `"0"`…`"n-1"`: BabelQueue's PHP SDK decodes bodies into PHP arrays, so a message it
 * re-encodes (a DLQ redrive, a Laravel relay) carries `[]` for `{}` and `["a"]` for `{"0":"a"}`.
 * `h2:` hashes such objects as the lists PHP makes of them, so both encodings of one message match.
 * Every other payload keeps its `h1:` value (the same text), so records written before `h2:` existed
 * still compare.
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
    return serialise(value, new Set(), undefined);
  } catch {
    return undefined;
  }
}

/**
 * The text the `h2:` form hashes: `canonicalJson`, except that an object keyed `"0"`…`"n-1"` (the
 * empty object too) is written as the list of its values, as BabelQueue's PHP SDK re-encodes it.
 * `listed` tells whether the value holds such an object or an empty array (then the fingerprint is
 * `h2:`; else the text is `canonicalJson`'s and the fingerprint `h1:`). Undefined as `canonicalJson`.
 */
export function phpStableJson(value: unknown): { text: string | undefined; listed: boolean } | undefined {
  const seen = { listed: false };
  try {
    return { text: serialise(value, new Set(), seen), listed: seen.listed };
  } catch {
    return undefined;
  }
}

/** Whether an object's own keys (in `Object.keys` order) are exactly "0"…"n-1": PHP decodes it to a list. */
function isIndexList(keys: readonly string[]): boolean {
  for (let i = 0; i < keys.length; i += 1) if (keys[i] !== String(i)) return false;
  return true;
}

function serialise(value: unknown, stack: Set<object>, php: { listed: boolean } | undefined): string | undefined {
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
  if (typeof object.toJSON === "function") return serialise((object.toJSON as () => unknown)(), stack, php);
  if (stack.has(object)) throw new TypeError("cycle");
  stack.add(object);
  let out: string;
  const keys = Array.isArray(object) ? undefined : Object.keys(object);
  // The PHP-stable form only: an object PHP decodes to a list is written as one.
  const phpList = php !== undefined && keys !== undefined && isIndexList(keys);
  if (php !== undefined && (phpList || (Array.isArray(object) && object.length === 0))) php.listed = true;
  if (Array.isArray(object)) {
    out = `[${object.map((item) => serialise(item, stack, php) ?? "null").join(",")}]`;
  } else if (phpList) {
    const record = object as Record<string, unknown>;
    out = `[${(keys as string[]).map((key) => serialise(record[key], stack, php) ?? "null").join(",")}]`;
  } else {
    const record = object as Record<string, unknown>;
    const parts: string[] = [];
    for (const key of (keys as string[]).sort()) {
      const item = serialise(record[key], stack, php);
      if (item !== undefined) parts.push(`${JSON.stringify(key)}:${item}`);
    }
    out = `{${parts.join(",")}}`;
  }
  stack.delete(object);
  return out;
}

const BASE64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/** murmur3's 32-bit finaliser: every input bit reaches every output bit. */
function fmix(h: number): number {
  let x = h ^ (h >>> 16);
  x = Math.imul(x, 0x85ebca6b);
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2ae35);
  return (x ^ (x >>> 16)) >>> 0;
}

/**
 * The state of `hash128` over a text fed in pieces: feeding "ab" then "c" gives the hash of "abc".
 * Four 32-bit lanes, each multiply-xor mixed per UTF-16 code unit and cross-fed.
 */
class Hash128 {
  a = 0x6a09e667;
  b = 0xbb67ae85;
  c = 0x3c6ef372;
  d = 0xa54ff53a;
  /** Code units fed so far. */
  n = 0;
  /** The payload held an empty array, or an object PHP decodes to a list (the `h2:` form). */
  listed = false;

  text(text: string): void {
    let { a, b, c, d } = this;
    for (let i = 0; i < text.length; i += 1) {
      const unit = text.charCodeAt(i);
      a = Math.imul(a ^ unit, 0x01000193);
      b = Math.imul(b ^ unit, 0x5bd1e995) ^ (a >>> 15);
      c = Math.imul(c ^ unit, 0x27d4eb2d) ^ (b >>> 13);
      d = Math.imul(d ^ unit, 0x165667b1) ^ (c >>> 16);
    }
    this.a = a;
    this.b = b;
    this.c = c;
    this.d = d;
    this.n += text.length;
  }

  /** `JSON.stringify(text)`, fed without building it unless the text needs escaping. */
  jsonString(text: string): void {
    for (let i = 0; i < text.length; i += 1) {
      const unit = text.charCodeAt(i);
      if (unit < 0x20 || unit === 0x22 || unit === 0x5c || (unit >= 0xd800 && unit <= 0xdfff)) {
        // Rare: a control character, a quote, a backslash or a surrogate. JSON.stringify knows the rules.
        this.text(JSON.stringify(text));
        return;
      }
    }
    this.text('"');
    this.text(text);
    this.text('"');
  }

  /** The 22 base64url characters of the 128 bits, after the final avalanche. */
  digest(): string {
    // Cross-mix the lanes (and the length) before the final avalanche, so every lane sees every input unit.
    const a = fmix(this.a ^ this.d ^ this.n);
    const b = fmix(this.b ^ a);
    const c = fmix(this.c ^ b);
    const d = fmix(this.d ^ c);
    const e = fmix(a ^ d);
    return base64url(e, b, c, d);
  }
}

/** The character codes of one digest, reused: the digest string is made in one piece. */
const DIGITS: number[] = new Array<number>(22).fill(0);

/** Four 32-bit words, big-endian, as base64url without padding (22 characters). */
function base64url(w0: number, w1: number, w2: number, w3: number): string {
  let digit = 0;
  let bits = 0;
  let buffer = 0;
  for (let lane = 0; lane < 4; lane += 1) {
    const word = lane === 0 ? w0 : lane === 1 ? w1 : lane === 2 ? w2 : w3;
    for (let shift = 24; shift >= 0; shift -= 8) {
      buffer = (buffer << 8) | ((word >>> shift) & 0xff);
      bits += 8;
      while (bits >= 6) {
        bits -= 6;
        DIGITS[digit++] = BASE64URL.charCodeAt((buffer >>> bits) & 63);
      }
      buffer &= (1 << bits) - 1;
    }
  }
  // 128 bits: 21 full digits and 2 bits left over, padded to the 22nd.
  DIGITS[digit] = BASE64URL.charCodeAt((buffer << (6 - bits)) & 63);
  return String.fromCharCode.apply(null, DIGITS);
}

/** An object's own enumerable keys, sorted in place as `Array.prototype.sort` sorts strings (by UTF-16 code units). */
function sortedKeys(keys: string[]): string[] {
  if (keys.length > 16) return keys.sort();
  // Insertion sort: most objects have a handful of keys, and this allocates nothing (the library sort does).
  for (let i = 1; i < keys.length; i += 1) {
    const key = keys[i] as string;
    let j = i - 1;
    while (j >= 0 && (keys[j] as string) > key) {
      keys[j + 1] = keys[j] as string;
      j -= 1;
    }
    keys[j + 1] = key;
  }
  return keys;
}

/**
 * A 128-bit non-cryptographic hash of a string's UTF-16 code units: four 32-bit lanes, each
 * multiply-xor mixed per code unit and cross-fed, then avalanched (murmur3's fmix32). Stable across
 * runtimes (only `Math.imul` and 32-bit arithmetic), synchronous, well under a µs for an envelope.
 */
export function hash128(text: string): string {
  const hash = new Hash128();
  hash.text(text);
  return hash.digest();
}

/** What `JSON.stringify` would make of a value once its `toJSON` (if any) has run: its JSON-able self, or undefined when skipped. */
function jsonable(value: unknown): unknown {
  if (typeof value === "object" && value !== null && typeof (value as { toJSON?: unknown }).toJSON === "function") {
    return jsonable((value as { toJSON: () => unknown }).toJSON());
  }
  return value;
}

/** True for what an object skips and an array renders `null`: undefined, functions, symbols. */
function skipped(value: unknown): boolean {
  return value === undefined || typeof value === "function" || typeof value === "symbol";
}

/**
 * Feeds the canonical JSON of `value` (already through `jsonable`, and not `skipped`) to the hash:
 * exactly the text `canonicalJson` would build, walked in the same order. Throws for a BigInt or a
 * cycle (`ancestors` holds the objects being walked).
 */
function feed(hash: Hash128, value: unknown, ancestors: object[]): void {
  switch (typeof value) {
    case "string":
      hash.jsonString(value);
      return;
    case "number":
      hash.text(Number.isFinite(value) ? String(value) : "null");
      return;
    case "boolean":
      hash.text(value ? "true" : "false");
      return;
    case "bigint":
      throw new TypeError("BigInt has no JSON form");
  }
  if (value === null) {
    hash.text("null");
    return;
  }
  const object = value as object;
  if (ancestors.includes(object)) throw new TypeError("cycle");
  ancestors.push(object);
  if (Array.isArray(object)) {
    if (object.length === 0) hash.listed = true;
    hash.text("[");
    for (let i = 0; i < object.length; i += 1) {
      if (i > 0) hash.text(",");
      // A hole renders as nothing, as `canonicalJson`'s `map(…).join(",")` renders it.
      if (i in object) feedItem(hash, object[i], ancestors);
    }
    hash.text("]");
  } else {
    const record = object as Record<string, unknown>;
    const keys = Object.keys(record);
    if (isIndexList(keys)) {
      // `{}` or `{"0":…,"1":…}`: PHP's list, as the `h2:` form writes it.
      hash.listed = true;
      hash.text("[");
      for (let i = 0; i < keys.length; i += 1) {
        if (i > 0) hash.text(",");
        feedItem(hash, record[keys[i] as string], ancestors);
      }
      hash.text("]");
      ancestors.pop();
      return;
    }
    hash.text("{");
    let first = true;
    for (const key of sortedKeys(keys)) {
      const item = jsonable(record[key]);
      if (skipped(item)) continue;
      if (!first) hash.text(",");
      first = false;
      hash.jsonString(key);
      hash.text(":");
      feed(hash, item, ancestors);
    }
    hash.text("}");
  }
  ancestors.pop();
}

/** One item of a list: its JSON, or `null` for what an array renders so (undefined, a function, a symbol). */
function feedItem(hash: Hash128, value: unknown, ancestors: object[]): void {
  const item = jsonable(value);
  if (skipped(item)) hash.text("null");
  else feed(hash, item, ancestors);
}

/**
 * The default fingerprint: the 128-bit hash of the canonical JSON of `{ job, data }`, as `h1:`; or,
 * for a payload holding an empty array or an object PHP decodes to a list, of its PHP-stable form
 * (`phpStableJson`) as `h2:`.
 */
export function defaultFingerprint(message: unknown): string | undefined {
  const record = isPlainRecord(message) ? message : { data: message };
  const job = record.job;
  const data = record.data;
  try {
    const hash = new Hash128();
    const ancestors: object[] = [];
    // `{ job, data }` with its keys sorted: "data" before "job", either left out when it has no JSON form.
    hash.text("{");
    const dataJson = jsonable(data);
    if (!skipped(dataJson)) {
      hash.text('"data":');
      feed(hash, dataJson, ancestors);
    }
    const jobJson = jsonable(job);
    if (!skipped(jobJson)) {
      hash.text(skipped(dataJson) ? '"job":' : ',"job":');
      feed(hash, jobJson, ancestors);
    }
    hash.text("}");
    return `${hash.listed ? "h2" : "h1"}:${hash.digest()}`;
  } catch {
    // A BigInt, a cycle, or a toJSON / getter that threw: no JSON form, so no fingerprint.
    return undefined;
  }
}

/**
 * An answer of a fingerprinter, settled: a string of at most `MAX_FINGERPRINT_LENGTH`, hashed down
 * when longer (as `f:` + the hash: still a function's answer, so never compared with a default
 * hash, see `fingerprintsDiffer`); else none.
 */
function settleFingerprint(value: unknown): string | undefined {
  if (typeof value !== "string" || value === "") return undefined;
  return value.length <= MAX_FINGERPRINT_LENGTH ? value : `f:${hash128(value)}`;
}

function none(): undefined {
  return undefined;
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
  try {
    const value = fingerprinter(message);
    // Synchronous fingerprints (the default) stay synchronous: no event-loop turn per message.
    return value instanceof Promise ? value.then(settleFingerprint, none) : settleFingerprint(value);
  } catch {
    return undefined;
  }
}

/**
 * A hash in the default form — `h<version>:` and 22 base64url characters — as its version prefix
 * (`h1:`), or undefined for any other string (a fingerprint function's own answer).
 */
const HASH_FORM = /^(h[1-9]\d{0,2}):[\w-]{22}$/;

function hashVersion(fingerprint: string): string | undefined {
  return HASH_FORM.exec(fingerprint)?.[1];
}

/**
 * True when a stored fingerprint and a message's disagree. A side without one matches anything, and
 * so do two fingerprints of different kinds: hashes of two versions (`h1:…` and a later `h2:…`), or
 * a default hash and a fingerprint function's own answer. Either pair fingerprints the same message
 * as different strings, so across a deploy that changes the default hash or turns a `fingerprint`
 * function on or off — while old and new consumers both run, and for records written before it — a
 * redelivery would otherwise read as a conflict and go to the DLQ. The price is that an id reused
 * across such a change is not caught (the behaviour without fingerprints). Two hashes of one version,
 * and two answers of a fingerprint function, are compared as they are.
 */
export function fingerprintsDiffer(stored: string | undefined, received: string | undefined): boolean {
  if (stored === undefined || received === undefined || stored === received) return false;
  return hashVersion(stored) === hashVersion(received);
}
