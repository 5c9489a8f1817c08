/**
 * Store keys: how a (namespace, id) pair becomes one backend key, the same way in every store.
 *
 * Layout: `{namespace}:{id}`. It is unambiguous because a namespace may not contain `:`,
 * so the namespace always ends at the first colon, whatever the id holds (an id may itself
 * look like `other-namespace:x`).
 *
 * Any string id works. An id whose UTF-8 form is longer than the backend allows is replaced
 * by `#` + the base64url SHA-256 of the id (43 characters). Literal ids that begin with `#` are
 * hashed too, so a raw id can never collide with the hash of another one, and so are ids with a
 * lone surrogate, which UTF-8 backends would otherwise store as U+FFFD (hashed apart from every
 * well-formed id, see `illFormedBytes`).
 *
 * What this is *not*: an encoding a backend can reverse. Stores keep what they need to answer
 * the contract; nobody needs the id back from the key.
 */
import { InvalidOptionError } from "../errors.js";

const encoder = new TextEncoder();
const NAMESPACE_PATTERN = /^[A-Za-z0-9_.\-/]{0,200}$/;

/** Checks a namespace once, at store construction. Throws `InvalidOptionError`. */
export function checkNamespace(namespace: string): string {
  if (typeof namespace !== "string" || !NAMESPACE_PATTERN.test(namespace)) {
    throw new InvalidOptionError(
      "namespace",
      "must be 0-200 characters of A-Z a-z 0-9 _ . - / (no ':', which separates namespace and id)",
    );
  }
  return namespace;
}

/** UTF-8 length of a string, without allocating for pure-ASCII strings. */
export function utf8Length(value: string): number {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: an ASCII range test, control characters included on purpose.
  return /^[\x00-\x7f]*$/.test(value) ? value.length : encoder.encode(value).length;
}

function base64url(bytes: Uint8Array): string {
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** SHA-256 of a string, base64url without padding (43 characters). Web Crypto: Node 20+ and workerd. */
export async function sha256Base64url(value: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", isWellFormed(value) ? encoder.encode(value) : illFormedBytes(value));
  return base64url(new Uint8Array(digest));
}

/**
 * What an ill-formed string is hashed as. UTF-8 cannot carry a lone surrogate (it would become
 * U+FFFD and collide with other ids), so its lossless JSON escape is hashed instead, after a 0xFF
 * byte: no UTF-8 text holds one, so this input is never the UTF-8 of a well-formed id (the escape
 * alone is, e.g. of the id `"\ud800"` written out).
 */
function illFormedBytes(value: string): Uint8Array {
  const escaped = encoder.encode(JSON.stringify(value));
  const bytes = new Uint8Array(escaped.length + 1);
  bytes[0] = 0xff;
  bytes.set(escaped, 1);
  return bytes;
}

/** True when the string has no lone surrogate, i.e. survives UTF-8 unchanged. */
export function isWellFormed(value: string): boolean {
  // eslint-disable-next-line no-control-regex
  return !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(value);
}

/**
 * The id part of a key: the id itself when it fits in `maxIdBytes` UTF-8 bytes, does not begin
 * with `#` and survives UTF-8 unchanged; otherwise `#` + its SHA-256.
 */
export async function keyPart(id: string, maxIdBytes: number): Promise<string> {
  if (!id.startsWith("#") && utf8Length(id) <= maxIdBytes && isWellFormed(id)) return id;
  return `#${await sha256Base64url(id)}`;
}

/** What a backend's keys cannot hold. */
export interface StoreKeyOptions {
  /** Hash ids that contain NUL (U+0000), for backends whose text cannot hold it (PostgreSQL, SQLite/D1). Default false. */
  readonly hashNul?: boolean;
}

/**
 * The backend key of `id` in `namespace` (already checked with `checkNamespace`), such that
 * the whole key, `prefix` included, never exceeds `maxKeyBytes` UTF-8 bytes. Throws `InvalidOptionError`
 * for an id that is not a string.
 */
export async function storeKey(
  namespace: string,
  id: string,
  maxKeyBytes: number,
  prefix = "",
  options: StoreKeyOptions = {},
): Promise<string> {
  if (typeof id !== "string") throw new InvalidOptionError("id", "must be a string");
  const head = `${prefix}${namespace}:`;
  const room = maxKeyBytes - utf8Length(head);
  if (room < 44) throw new InvalidOptionError("namespace", `leaves no room for a key within ${maxKeyBytes} bytes`);
  // A backend whose text type cannot hold NUL (PostgreSQL, D1) keeps the hash of such an id instead.
  if (options.hashNul === true && id.includes("\u0000")) return head + (await keyPart(id, 0));
  return head + (await keyPart(id, room));
}
