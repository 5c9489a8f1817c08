/**
 * The Lua scripts of the Redis stores and the one way they are run: `EVALSHA`, falling back to
 * `EVAL` on `NOSCRIPT` (which also loads the script into the server's cache, so every later call
 * is an `EVALSHA` again).
 *
 * Every script takes many keys, so a whole batch is ONE command (one HTTP request over Upstash's
 * REST API, one round trip over TCP). The single-id forms are the same scripts with one key.
 *
 * Record layout, one string key per id:
 *   - in flight: value `i:<fencing token>`, `PX` = the lease;
 *   - committed: value `d`, `PX` = the retention.
 * Both windows are timed by the Redis server's clock. Redis never returns an expired key (it checks
 * the expiry on every access, not only in its background sweep), so an expired lease or retention
 * is gone for every script at the exact millisecond — no lazy TTL to work around.
 *
 * What this is *not*: a transport. It only needs something with `eval` and `evalsha` in the
 * `(script, keys, args)` shape (see `RedisScriptClient`).
 */

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
 * claim — KEYS: the ids' keys; ARGV[1]: lease (ms); ARGV[1+i]: the fresh token for KEYS[i].
 * Returns one integer per key: -1 claimed (with the token passed in), -2 done, >= 0 in flight
 * (the lease's remaining ms).
 */
export const CLAIM: RedisScript = {
  name: "claim",
  source: `local lease = ARGV[1]
local out = {}
for i, key in ipairs(KEYS) do
  local value = redis.call('GET', key)
  if not value then
    redis.call('SET', key, 'i:' .. ARGV[i + 1], 'PX', lease)
    out[i] = -1
  elseif value == 'd' then
    out[i] = -2
  else
    local left = redis.call('PTTL', key)
    if left < 0 then left = 0 end
    out[i] = left
  end
end
return out`,
};

/** remember — KEYS: the ids' keys; ARGV[1]: retention (ms). Unconditional commit. Returns #KEYS. */
export const REMEMBER: RedisScript = {
  name: "remember",
  source: `for _, key in ipairs(KEYS) do
  redis.call('SET', key, 'd', 'PX', ARGV[1])
end
return #KEYS`,
};

/**
 * release — KEYS: the ids' keys; ARGV[i]: the token for KEYS[i]. Compare-and-delete: deletes only
 * an in-flight record holding exactly that token. Returns 1 (deleted) or 0 per key.
 */
export const RELEASE: RedisScript = {
  name: "release",
  source: `local out = {}
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == 'i:' .. ARGV[i] then
    redis.call('DEL', key)
    out[i] = 1
  else
    out[i] = 0
  end
end
return out`,
};

/** seen — KEYS: the ids' keys. Returns 1 (committed, retention live) or 0 per key. */
export const SEEN: RedisScript = {
  name: "seen",
  source: `local out = {}
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == 'd' then out[i] = 1 else out[i] = 0 end
end
return out`,
};

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
