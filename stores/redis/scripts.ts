/**
 * The Lua scripts of the Redis stores and the one way they are run: `EVALSHA`, falling back to
 * `EVAL` on `NOSCRIPT` (which also loads the script into the server's cache, so every later call
 * is an `EVALSHA` again).
 *
 * Every script takes many keys, so a whole batch is ONE command (one HTTP request over Upstash's
 * REST API, one round trip over TCP). The single-id forms are the same scripts with one key.
 *
 * What a script costs on Upstash pay-as-you-go: the `EVALSHA` plus every command it runs (Upstash's
 * own rate-limit SDK prices its scripts so — upstash/docs `redis/sdks/ratelimit-ts/costs.mdx`:
 * "EVAL, INCR, PEXPIRE" = 3 commands; `redis/overall/billing.mdx`: every command of a pipeline or
 * transaction is billed), while a multi-key `MGET` / `DEL` counts once ("For billing purposes, this
 * counts as a single command", upstash/docs `redis/sdks/ts/commands/string`). So the scripts read
 * a whole batch with one `MGET`, write each id with exactly one command, and run `PTTL` only for an
 * answer that needs it. bench/cost-redis.ts counts them the same way (Redis's `INFO commandstats`).
 *
 * Record layout of the store's own layout (the BabelQueue layouts: scripts-babelqueue.ts), one
 * string key per id (`*` = only when the id has a payload fingerprint):
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
 * Helpers every script may use (Lua, prepended to its source):
 *   - `parse(value)` → state (`'d'` committed, `'i'` in flight, nil for no record), the fencing token
 *     (in flight), the fingerprint (`''` for none);
 *   - `mget(keys)` / `del(keys)`: ONE `MGET` / `DEL` for many keys (in slices of 1000, Lua's `unpack`
 *     limit), because Upstash bills a multi-key command once, whatever its key count.
 */
const PRELUDE = `local function parse(value)
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
local function mget(keys)
  local values = {}
  for first = 1, #keys, 1000 do
    local part = redis.call('MGET', unpack(keys, first, math.min(first + 999, #keys)))
    for j = 1, #part do values[first + j - 1] = part[j] end
  end
  return values
end
local function del(keys)
  for first = 1, #keys, 1000 do redis.call('DEL', unpack(keys, first, math.min(first + 999, #keys))) end
end
`;

/** A script with the prelude (`parse`, `mget`, `del`) in front of its body. */
export function withPrelude(name: string, body: string): RedisScript {
  return { name, source: PRELUDE + body };
}

/**
 * claim — KEYS: the ids' keys; ARGV[1]: lease (ms); ARGV[2]: the redelivery hints, one character per
 * key (`1` = redelivered), or '' for none; ARGV[2+i]: the fresh token for KEYS[i];
 * ARGV[2+#KEYS+i] (optional): the fingerprint for KEYS[i], '' or absent for none.
 * Returns two entries per key: a code (-1 claimed with the token passed in, -2 done, >= 0 in
 * flight: the lease's remaining ms), then `:` + the stored fingerprint (of a done / in-flight record).
 *
 * Billed commands (Upstash bills the EVALSHA plus every command the script runs): a first delivery
 * is ONE `SET key record NX PX lease`, which claims a new id outright; the ids it did not claim and
 * the redeliveries (likely committed already) are read with ONE `MGET` for the whole batch; an
 * absent one is then claimed with its `SET NX`, and only an in-flight one costs a `PTTL`. So a batch
 * of N new messages costs 1 + N, a batch of N committed redeliveries 1 + 1.
 * `SET ... NX GET` (Redis 7.0+) would answer a first delivery that finds a record in the same command,
 * but Upstash documents its reply as null "when a condition prevents the write" — a null that would
 * read as "claimed" — so no answer here depends on it: a `SET NX` reply (`OK` or null) means the same
 * on every server.
 */
export const CLAIM: RedisScript = withPrelude(
  "claim",
  `local lease = ARGV[1]
local hints = ARGV[2]
local n = #KEYS
local out = {}
local function record(i)
  local fingerprint = ARGV[2 + n + i] or ''
  if fingerprint == '' then return 'i:' .. ARGV[2 + i] end
  return 'i:' .. ARGV[2 + i] .. ':' .. fingerprint
end
local function found(i, value)
  local state, token, fingerprint = parse(value)
  if state == 'i' and token == ARGV[2 + i] then
    -- Our own record: this very call, run again (a transport that lost the answer sent it twice).
    out[2 * i - 1] = -1
    out[2 * i] = ':'
    return
  end
  if state == 'd' then
    out[2 * i - 1] = -2
  else
    local left = redis.call('PTTL', KEYS[i])
    if left < 0 then left = 0 end
    out[2 * i - 1] = left
  end
  out[2 * i] = ':' .. fingerprint
end
local unread, unreadKeys = {}, {}
for i = 1, n do
  if string.sub(hints, i, i) ~= '1' and redis.call('SET', KEYS[i], record(i), 'NX', 'PX', lease) then
    out[2 * i - 1] = -1
    out[2 * i] = ':'
  else
    unread[#unread + 1] = i
    unreadKeys[#unreadKeys + 1] = KEYS[i]
  end
end
local values = mget(unreadKeys)
for j, i in ipairs(unread) do
  if values[j] then
    found(i, values[j])
  elseif redis.call('SET', KEYS[i], record(i), 'NX', 'PX', lease) then
    out[2 * i - 1] = -1
    out[2 * i] = ':'
  else
    -- Absent when read, there now: the same id earlier in this batch. (MGET also answers nil for a
    -- key of another type; GET then fails with WRONGTYPE, and NX never overwrote it.)
    found(i, redis.call('GET', KEYS[i]))
  end
end
return out`,
);

/**
 * remember — KEYS: the ids' keys; ARGV[1]: retention (ms); ARGV[1+i] (optional): the fingerprint
 * for KEYS[i]. Unconditional commit: ONE `SET key d[:fp] PX retention` per id given its fingerprint
 * (the engine always gives it); the ids given none keep the one their record holds (the claim's),
 * read with ONE `MGET` for all of them. Returns #KEYS.
 */
export const REMEMBER: RedisScript = withPrelude(
  "remember",
  `local retention = ARGV[1]
local unknown, unknownKeys = {}, {}
for i, key in ipairs(KEYS) do
  local fingerprint = ARGV[1 + i] or ''
  if fingerprint == '' then
    unknown[#unknown + 1] = i
    unknownKeys[#unknownKeys + 1] = key
  else
    redis.call('SET', key, 'd:' .. fingerprint, 'PX', retention)
  end
end
local values = mget(unknownKeys)
for j, i in ipairs(unknown) do
  local _, _, held = parse(values[j])
  if held == '' then
    redis.call('SET', KEYS[i], 'd', 'PX', retention)
  else
    redis.call('SET', KEYS[i], 'd:' .. held, 'PX', retention)
  end
end
return #KEYS`,
);

/**
 * release — KEYS: the ids' keys; ARGV[i]: the token for KEYS[i]. Compare-and-delete: deletes only
 * an in-flight record holding exactly that token. ONE `MGET`, then ONE `DEL` of the owned keys.
 * Returns 1 (deleted) or 0 per key (a key listed twice is deleted once).
 */
export const RELEASE: RedisScript = withPrelude(
  "release",
  `local values = mget(KEYS)
local out, owned, taken = {}, {}, {}
for i, key in ipairs(KEYS) do
  local state, token = parse(values[i])
  if state == 'i' and token == ARGV[i] and not taken[key] then
    taken[key] = true
    owned[#owned + 1] = key
    out[i] = 1
  else
    out[i] = 0
  end
end
del(owned)
return out`,
);

/** seen — KEYS: the ids' keys. ONE `MGET`. Returns 1 (committed, retention live) or 0 per key. */
export const SEEN: RedisScript = withPrelude(
  "seen",
  `local values = mget(KEYS)
local out = {}
for i = 1, #KEYS do
  if parse(values[i]) == 'd' then out[i] = 1 else out[i] = 0 end
end
return out`,
);

/**
 * inspect — KEYS[1]: one id's key. Returns { state (0 none, 1 in flight, 2 done), the remaining
 * ms of its window (-1: none), `:` + its fingerprint }.
 */
export const INSPECT: RedisScript = withPrelude(
  "inspect",
  `local value = redis.call('GET', KEYS[1])
if not value then return {0, 0, ':'} end
local state, _, fingerprint = parse(value)
local left = redis.call('PTTL', KEYS[1])
if left < -1 then left = 0 end
if state == 'd' then return {2, left, ':' .. fingerprint} end
return {1, left, ':' .. fingerprint}`,
);

/** forget — KEYS: every key of the ids. Deletes whatever state, in ONE `DEL`. Returns the number deleted. */
export const FORGET: RedisScript = {
  name: "forget",
  source: `return redis.call('DEL', unpack(KEYS))`,
};

/** The scripts of one record layout, by operation (the own layout's: `OWN_SCRIPTS`; the BabelQueue ones: scripts-babelqueue.ts). */
export interface RedisLayoutScripts {
  readonly claim: RedisScript;
  readonly remember: RedisScript;
  readonly release: RedisScript;
  readonly seen: RedisScript;
  readonly inspect: RedisScript;
  readonly forget: RedisScript;
}

/** The store's own layout. */
export const OWN_SCRIPTS: RedisLayoutScripts = { claim: CLAIM, remember: REMEMBER, release: RELEASE, seen: SEEN, inspect: INSPECT, forget: FORGET };

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

/**
 * Runs a script: `EVALSHA`, and `EVAL` only when the server answers `NOSCRIPT` — and, with
 * `abandoned`, only while it answers false.
 */
export async function runScript(client: RedisScriptClient, script: RedisScript, keys: string[], args: string[], abandoned?: () => boolean): Promise<unknown> {
  const sha = await scriptSha(script);
  try {
    return await client.evalsha(sha, keys, args);
  } catch (error) {
    // NOSCRIPT: the script did not run; once the caller gave up, it must not run late either.
    if (!isNoScript(error) || abandoned?.() === true) throw error;
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

/** A count a script answers (a commit's ids, a DEL's keys): an integer from `min` to `max`, else the reply is not Redis's. */
export function readCount(reply: unknown, min: number, max: number): number {
  const count = integer(reply);
  if (count < min || count > max) throw new Error("wrong shape");
  return count;
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
  // -1: the record has no expiry (a BabelQueue layout keeps committed ids for good, as its SDK does).
  if (state === 1) return { status: "in-flight", ...(left < 0 ? {} : { leaseLeftMs: left }), ...stored };
  if (state === 2) return { status: "done", ...(left < 0 ? {} : { retentionLeftMs: left }), ...stored };
  throw new Error("wrong shape");
}
