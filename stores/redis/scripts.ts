/**
 * The Lua scripts of the Redis stores and the one way they are run: `EVALSHA`, falling back to
 * `EVAL` on `NOSCRIPT` (which also loads the script into the server's cache, so every later call
 * is an `EVALSHA` again).
 *
 * Every script takes many keys, so a whole batch is ONE command (one HTTP request over Upstash's
 * REST API, one round trip over TCP). The single-id forms are the same scripts with one key.
 *
 * Record layout, one string key per id (`*` = only when the id has a payload fingerprint):
 *   - in flight: value `i:<fencing token>` + `:<fingerprint>`*, `PX` = the lease;
 *   - committed: value `d` + `:<fingerprint>`*, `PX` = the retention.
 * The fencing token is a UUID the store makes (never a `:`), so the first `:` after it starts the
 * fingerprint, whatever the fingerprint holds. Values written before fingerprints existed (`d`,
 * `i:<token>`) are the same layout without the optional part: they parse, and carry none.
 * Both windows are timed by the Redis server's clock. Redis never returns an expired key (it checks
 * the expiry on every access, not only in its background sweep), so an expired lease or retention
 * is gone for every script at the exact millisecond — no lazy TTL to work around.
 *
 * Replies carry a fingerprint as `:` + the fingerprint (`:` alone for none): a string that is never
 * valid JSON, so a client that JSON-parses replies (`@upstash/redis` does by default) hands it
 * back unchanged even when the fingerprint is `123` or `true`.
 *
 * What this is *not*: a transport. It only needs something with `eval` and `evalsha` in the
 * `(script, keys, args)` shape (see `RedisScriptClient`).
 */

import type { Claim, IdRecord } from "../../src/contract.js";
import { withFingerprint } from "../../src/store-kit/fingerprints.js";

/** The two methods the stores need from a Redis client, in `@upstash/redis`'s own shape. */
export interface RedisScriptClient {
  /** `EVAL script numkeys ...keys ...args`. */
  eval(script: string, keys: string[], args: string[]): Promise<unknown>;
  /** `EVALSHA sha1 numkeys ...keys ...args`. */
  evalsha(sha1: string, keys: string[], args: string[]): Promise<unknown>;
}

/** One script: its source and (lazily) its SHA-1. */
export interface RedisScript {
  readonly name: string;
  readonly source: string;
}

/**
 * The Lua prelude of every script: `parse(value)` → state (`'d'` committed, `'i'` in flight, nil
 * for no record), the fencing token (in flight), the fingerprint (`''` for none).
 */
const PARSE = `local function parse(value)
  if not value then return nil, nil, '' end
  if value == 'd' then return 'd', nil, '' end
  local head = string.sub(value, 1, 2)
  if head == 'd:' then return 'd', nil, string.sub(value, 3) end
  if head ~= 'i:' then return 'i', nil, '' end
  local rest = string.sub(value, 3)
  local colon = string.find(rest, ':', 1, true)
  if colon then return 'i', string.sub(rest, 1, colon - 1), string.sub(rest, colon + 1) end
  return 'i', rest, ''
end
`;

function withParse(name: string, body: string): RedisScript {
  return { name, source: PARSE + body };
}

/**
 * claim — KEYS: the ids' keys; ARGV[1]: lease (ms); ARGV[1+i]: the fresh token for KEYS[i];
 * ARGV[1+#KEYS+i] (optional): the fingerprint for KEYS[i], '' or absent for none.
 * Returns two entries per key: a code (-1 claimed with the token passed in, -2 done, >= 0 in
 * flight: the lease's remaining ms), then `:` + the stored fingerprint (of a done / in-flight record).
 */
export const CLAIM: RedisScript = withParse(
  "claim",
  `local lease = ARGV[1]
local n = #KEYS
local out = {}
for i, key in ipairs(KEYS) do
  local value = redis.call('GET', key)
  if not value then
    local fingerprint = ARGV[1 + n + i] or ''
    local record = 'i:' .. ARGV[i + 1]
    if fingerprint ~= '' then record = record .. ':' .. fingerprint end
    redis.call('SET', key, record, 'PX', lease)
    out[2 * i - 1] = -1
    out[2 * i] = ':'
  else
    local state, _, fingerprint = parse(value)
    if state == 'd' then
      out[2 * i - 1] = -2
    else
      local left = redis.call('PTTL', key)
      if left < 0 then left = 0 end
      out[2 * i - 1] = left
    end
    out[2 * i] = ':' .. fingerprint
  end
end
return out`,
);

/**
 * remember — KEYS: the ids' keys; ARGV[1]: retention (ms); ARGV[1+i] (optional): the fingerprint
 * for KEYS[i]. Unconditional commit; where no fingerprint is given it keeps the one the record
 * holds (the claim's). Returns #KEYS.
 */
export const REMEMBER: RedisScript = withParse(
  "remember",
  `for i, key in ipairs(KEYS) do
  local fingerprint = ARGV[1 + i] or ''
  if fingerprint == '' then
    local _, _, held = parse(redis.call('GET', key))
    fingerprint = held
  end
  if fingerprint == '' then
    redis.call('SET', key, 'd', 'PX', ARGV[1])
  else
    redis.call('SET', key, 'd:' .. fingerprint, 'PX', ARGV[1])
  end
end
return #KEYS`,
);

/**
 * release — KEYS: the ids' keys; ARGV[i]: the token for KEYS[i]. Compare-and-delete: deletes only
 * an in-flight record holding exactly that token. Returns 1 (deleted) or 0 per key.
 */
export const RELEASE: RedisScript = withParse(
  "release",
  `local out = {}
for i, key in ipairs(KEYS) do
  local state, token = parse(redis.call('GET', key))
  if state == 'i' and token == ARGV[i] then
    redis.call('DEL', key)
    out[i] = 1
  else
    out[i] = 0
  end
end
return out`,
);

/** seen — KEYS: the ids' keys. Returns 1 (committed, retention live) or 0 per key. */
export const SEEN: RedisScript = withParse(
  "seen",
  `local out = {}
for i, key in ipairs(KEYS) do
  if parse(redis.call('GET', key)) == 'd' then out[i] = 1 else out[i] = 0 end
end
return out`,
);

/**
 * inspect — KEYS[1]: one id's key. Returns { state (0 none, 1 in flight, 2 done), the remaining
 * ms of its window, `:` + its fingerprint }.
 */
export const INSPECT: RedisScript = withParse(
  "inspect",
  `local value = redis.call('GET', KEYS[1])
if not value then return {0, 0, ':'} end
local state, _, fingerprint = parse(value)
local left = redis.call('PTTL', KEYS[1])
if left < 0 then left = 0 end
if state == 'd' then return {2, left, ':' .. fingerprint} end
return {1, left, ':' .. fingerprint}`,
);

/** forget — KEYS: the ids' keys. Deletes whatever state. Returns the number deleted. */
export const FORGET: RedisScript = {
  name: "forget",
  source: `return redis.call('DEL', unpack(KEYS))`,
};

const shaCache = new Map<string, Promise<string>>();

/** SHA-1 of a script, hex, as Redis names it. Web Crypto: Node 20+ and workerd. */
export function scriptSha(script: RedisScript): Promise<string> {
  let sha = shaCache.get(script.source);
  if (sha === undefined) {
    sha = globalThis.crypto.subtle.digest("SHA-1", new TextEncoder().encode(script.source)).then((digest) =>
      Array.from(new Uint8Array(digest), (byte) => byte.toString(16).padStart(2, "0")).join(""),
    );
    shaCache.set(script.source, sha);
  }
  return sha;
}

/**
 * True for Redis's "script not in cache" reply, whichever client relays it: ioredis and node-redis
 * pass Redis's words on (`NOSCRIPT ...`), @upstash/redis too, or prefixed with `Command failed: `
 * when the command went through its auto-pipeline.
 */
export function isNoScript(error: unknown): boolean {
  return error instanceof Error && /^(?:Command failed: )?(?:ERR )?NOSCRIPT\b/.test(error.message);
}

/** Runs a script: `EVALSHA`, and `EVAL` only when the server answers `NOSCRIPT`. */
export async function runScript(client: RedisScriptClient, script: RedisScript, keys: string[], args: string[]): Promise<unknown> {
  const sha = await scriptSha(script);
  try {
    return await client.evalsha(sha, keys, args);
  } catch (error) {
    if (!isNoScript(error)) throw error;
    return client.eval(script.source, keys, args);
  }
}

// ---------------------------------------------------------------------------------------------
// Replies. Each reader throws on a shape its script never returns; the store reports that as an
// unexpected reply.

/** An integer of a reply (clients hand some back as strings). */
function integer(value: unknown): number {
  const number = typeof value === "string" ? Number(value) : value;
  if (typeof number !== "number" || !Number.isSafeInteger(number)) throw new Error("wrong shape");
  return number;
}

/** A `:`-prefixed fingerprint of a reply: the fingerprint, or undefined for none. */
function fingerprint(value: unknown): string | undefined {
  if (typeof value !== "string" || !value.startsWith(":")) throw new Error("wrong shape");
  return value.length > 1 ? value.slice(1) : undefined;
}

/** `n` integers (seen, release). */
export function readIntegers(reply: unknown, n: number): number[] {
  if (!Array.isArray(reply) || reply.length !== n) throw new Error("wrong shape");
  return reply.map(integer);
}

/** One claim answer per key (CLAIM), `tokens` being the ones the call passed in. */
export function readClaims(reply: unknown, tokens: readonly string[]): Claim[] {
  if (!Array.isArray(reply) || reply.length !== 2 * tokens.length) throw new Error("wrong shape");
  return tokens.map((token, i): Claim => {
    const code = integer(reply[2 * i]);
    if (code === -1) return { status: "claimed", token };
    const stored = withFingerprint(fingerprint(reply[2 * i + 1]));
    if (code === -2) return { status: "done", ...stored };
    if (code >= 0) return { status: "in-flight", retryAfterMs: code, ...stored };
    throw new Error("wrong shape");
  });
}

/** The record of one key (INSPECT), or null. */
export function readRecord(reply: unknown): IdRecord | null {
  if (!Array.isArray(reply) || reply.length !== 3) throw new Error("wrong shape");
  const state = integer(reply[0]);
  const left = integer(reply[1]);
  const stored = withFingerprint(fingerprint(reply[2]));
  if (state === 0) return null;
  if (state === 1) return { status: "in-flight", leaseLeftMs: left, ...stored };
  if (state === 2) return { status: "done", retentionLeftMs: left, ...stored };
  throw new Error("wrong shape");
}
