/**
 * The Lua scripts of the two BabelQueue layouts of the Redis stores (layouts.ts): the records
 * BabelQueue's PHP and Go SDKs read and write, with our extras beside them in a key those SDKs never
 * read. Facts from the SDKs' sources (PHP `BabelQueue/php-sdk` src/Idempotency/RedisStore.php,
 * Go `BabelQueue/babelqueue-go` idempotency-redis/redis.go; docs/concepts/fleet.md):
 *
 *   - "babelqueue-php": key `<prefix><id>` (PHP's default prefix `bq:idem:`). `'1'` = claimed,
 *     written `SET key 1 PX <ms> NX`; `'2'` = seen, written `SET key 2` (no expiry); seen = the value
 *     is `'2'`; release = a Lua compare-and-delete of `'1'`; forget = `DEL`.
 *   - "babelqueue-go": key `<prefix><id>` (Go's default prefix `bq:idemp:`). Any value = done, written
 *     `SETNX key 1` / `SET key 1 EX|PX <ttl> NX`; seen = `EXISTS`; forget = `DEL`. Go has no
 *     in-flight state: its key is only written after the effect.
 *
 * Our side key, `<side prefix><id>` (`bq:idem-lease:` / `bq:idemp-lease:` by default), holds an
 * in-flight claim's fencing token and payload fingerprint: `<token>[:<fingerprint>]`, `PX` = the
 * lease. In the PHP layout it sits beside PHP's `'1'` (written in the same script, with the same
 * lease), in the Go layout it IS the claim (Go's `EXISTS` never sees it). A commit writes the SDK's
 * own done record and deletes the side key. Committed records carry no fingerprint: the SDK's value
 * has no room for one, and a side key could not tell whether the SDK rewrote the record since.
 *
 * PHP's `'1'` has no token, and PHP's release deletes any `'1'`: our side key is trusted only while
 * it is "tied" to the `'1'` it was written with — both expire within `TIE_MS` of each other, which a
 * `'1'` PHP wrote later (PHP's lease is an hour by default) does not.
 *
 * KEYS, every script: `[main_1, side_1, main_2, side_2, …]`. Arguments and replies are the same as
 * the own layout's scripts (scripts.ts), so one store logic runs all three layouts; the claim's
 * redelivery hints (ARGV[2]) are not needed here (every claim reads the main keys with one `MGET`
 * first), and the commit's fingerprints are ignored. Retention: ARGV[1] of remember is the ms, or ''
 * for none (the SDKs' default: committed ids are kept for good).
 *
 * What this is *not*: a copy of the SDKs' code. Only their record formats and commands are matched.
 */
import { type RedisLayoutScripts, type RedisScript, withPrelude } from "./scripts.js";

/** How far apart (ms) the expiries of PHP's `'1'` and our side key may be and still be one claim. */
export const TIE_MS = 50;

/**
 * Prelude of both layouts: the ids' main and side keys, the side record, the tie check, and the
 * pieces several scripts share — a claim's reply pair, an in-flight id's fingerprint (PHP: from a
 * tied side key; Go: the side key itself) and the ids whose side key holds the delivery's token.
 */
const BABELQUEUE = `local n = #KEYS / 2
local function mains()
  local list = {}
  for i = 1, n do list[i] = KEYS[2 * i - 1] end
  return list
end
local function sides()
  local list = {}
  for i = 1, n do list[i] = KEYS[2 * i] end
  return list
end
local function lease(value)
  if not value then return nil, '' end
  local colon = string.find(value, ':', 1, true)
  if colon then return string.sub(value, 1, colon - 1), string.sub(value, colon + 1) end
  return value, ''
end
local function side(i)
  local fingerprint = ARGV[2 + n + i] or ''
  if fingerprint == '' then return ARGV[2 + i] end
  return ARGV[2 + i] .. ':' .. fingerprint
end
local function tied(main, sideKey, mainLeft)
  local sideLeft = redis.call('PTTL', sideKey)
  return mainLeft >= 0 and sideLeft >= 0 and math.abs(mainLeft - sideLeft) <= ${TIE_MS}
end
local function answer(out, i, left, fingerprint)
  out[2 * i - 1] = left
  out[2 * i] = ':' .. fingerprint
end
local function tiedFingerprint(main, sideKey, mainLeft)
  local held = redis.call('GET', sideKey)
  if held and tied(main, sideKey, mainLeft) then
    local _, stored = lease(held)
    return stored
  end
  return ''
end
local function sideLease(sideKey, held)
  local _, fingerprint = lease(held)
  local left = redis.call('PTTL', sideKey)
  if left < 0 then left = 0 end
  return left, fingerprint
end
local function owned()
  local held = mget(sides())
  local list, taken = {}, {}
  for i = 1, n do
    local token = lease(held[i])
    if token ~= nil and token == ARGV[i] and not taken[KEYS[2 * i]] then
      taken[KEYS[2 * i]] = true
      list[#list + 1] = i
    end
  end
  return list
end
`;

function babelqueue(name: string, body: string): RedisScript {
  return withPrelude(name, BABELQUEUE + body);
}

/** A claim: ONE `MGET` of the main keys, then `perId` (Lua, run for each `i`, with `values[i]` and `leaseMs`) answers the id with `answer`. */
function claimScript(name: string, perId: string): RedisScript {
  return babelqueue(
    name,
    `local leaseMs = ARGV[1]
local values = mget(mains())
local out = {}
for i = 1, n do
${perId}
end
return out`,
  );
}

/** A commit: `write(expiry)` — the SDK's own done record, `expiry` its `PX` when a retention is set — on every main key, then ONE `DEL` of our side keys. */
function rememberScript(name: string, write: (expiry: string) => string): RedisScript {
  return babelqueue(
    name,
    `local retention = ARGV[1]
for i = 1, n do
  if retention == '' then
    ${write("")}
  else
    ${write(", 'PX', retention")}
  end
end
del(sides())
return n`,
  );
}

/** Seen: ONE `MGET` of the main keys; `test` (Lua, over `values[i]`) says whether an id is done. */
function seenScript(name: string, test: string): RedisScript {
  return babelqueue(
    name,
    `local values = mget(mains())
local out = {}
for i = 1, n do
  if ${test} then out[i] = 1 else out[i] = 0 end
end
return out`,
  );
}

/** Inspect: one id, its main key `main` and side key `sideKey`; `body` answers `{state, PTTL, ':' .. fingerprint}`. */
function inspectScript(name: string, body: string): RedisScript {
  return babelqueue(name, `local main, sideKey = KEYS[1], KEYS[2]\n${body}`);
}

const FORGET_BOTH: RedisScript = { name: "forget", source: `return redis.call('DEL', unpack(KEYS))` };

/**
 * PHP claim: ONE `MGET` of the main keys; an absent one is claimed with PHP's own
 * `SET key 1 PX <lease> NX` and our side key; `'2'` is done; anything else is in flight (PHP's
 * `ClaimingDispatch` parks on it too), its lease left from `PTTL`, its fingerprint from a tied side key.
 */
const PHP_CLAIM = claimScript(
  "claim:babelqueue-php",
  `  local main, sideKey = KEYS[2 * i - 1], KEYS[2 * i]
  local value = values[i]
  local claimed = false
  if not value then
    if redis.call('SET', main, '1', 'PX', leaseMs, 'NX') then
      redis.call('SET', sideKey, side(i), 'PX', leaseMs)
      claimed = true
    else
      -- Absent when read, there now: the same id earlier in this batch. (MGET also answers nil for a
      -- key of another type; GET then fails with WRONGTYPE, and NX never overwrote it.)
      value = redis.call('GET', main)
    end
  end
  if claimed then
    answer(out, i, -1, '')
  elseif value == '2' then
    answer(out, i, -2, '')
  else
    local left = redis.call('PTTL', main)
    local held = redis.call('GET', sideKey)
    local isTied = held and tied(main, sideKey, left)
    if isTied and lease(held) == ARGV[2 + i] then
      -- Our own claim: this very call, run again (a transport that lost the answer sent it twice).
      answer(out, i, -1, '')
    else
      local fingerprint = ''
      if isTied then
        local _, stored = lease(held)
        fingerprint = stored
      end
      if left < 0 then left = 0 end
      answer(out, i, left, fingerprint)
    end
  end`,
);

/**
 * Go claim: ONE `MGET` of Go's keys; any value is done (Go's `EXISTS`, for the string values Go
 * writes). Otherwise the claim is our side key alone, `SET side <token>[:fp] NX PX <lease>`; a live
 * one is in flight (its `PTTL`, its fingerprint).
 */
const GO_CLAIM = claimScript(
  "claim:babelqueue-go",
  `  local sideKey = KEYS[2 * i]
  if values[i] then
    answer(out, i, -2, '')
  elseif redis.call('SET', sideKey, side(i), 'NX', 'PX', leaseMs) then
    answer(out, i, -1, '')
  else
    local held = redis.call('GET', sideKey)
    if held and lease(held) == ARGV[2 + i] then
      -- Our own claim: this very call, run again (a transport that lost the answer sent it twice).
      answer(out, i, -1, '')
    else
      answer(out, i, sideLease(sideKey, held))
    end
  end`,
);

/** PHP commit: PHP's own `SET key 2` (with `PX` only when a retention is set), then ONE `DEL` of our side keys. */
const PHP_REMEMBER = rememberScript("remember:babelqueue-php", (expiry) => `redis.call('SET', KEYS[2 * i - 1], '2'${expiry})`);

/** Go commit: Go's own `SET key 1 [PX <retention>] NX` (its `Remember`: never overwrites), then ONE `DEL` of our side keys. */
const GO_REMEMBER = rememberScript("remember:babelqueue-go", (expiry) => `redis.call('SET', KEYS[2 * i - 1], '1'${expiry}, 'NX')`);

/**
 * PHP release, fenced: our side key must hold the token, and the main key PHP's `'1'` tied to it;
 * then both go. A side key with the token but no such `'1'` (PHP committed or re-claimed the id) is
 * ours and goes alone; the answer is then 0.
 */
const PHP_RELEASE = babelqueue(
  "release:babelqueue-php",
  `local ids = owned()
local out, dropped, ownedMains = {}, {}, {}
for i = 1, n do out[i] = 0 end
for j, i in ipairs(ids) do
  ownedMains[j] = KEYS[2 * i - 1]
  dropped[j] = KEYS[2 * i]
end
local values = mget(ownedMains)
for j, i in ipairs(ids) do
  local main = KEYS[2 * i - 1]
  if values[j] == '1' and tied(main, KEYS[2 * i], redis.call('PTTL', main)) then
    dropped[#dropped + 1] = main
    out[i] = 1
  end
end
del(dropped)
return out`,
);

/** Go release: deletes our side key when it holds the token (Go's key is never touched). */
const GO_RELEASE = babelqueue(
  "release:babelqueue-go",
  `local out, dropped = {}, {}
for i = 1, n do out[i] = 0 end
for _, i in ipairs(owned()) do
  dropped[#dropped + 1] = KEYS[2 * i]
  out[i] = 1
end
del(dropped)
return out`,
);

/** PHP seen: ONE `MGET`; seen = the value is `'2'`, as PHP's `seen()`. */
const PHP_SEEN = seenScript("seen:babelqueue-php", "values[i] == '2'");

/** Go seen: ONE `MGET`; seen = the key holds a value (Go's `EXISTS`). */
const GO_SEEN = seenScript("seen:babelqueue-go", "values[i]");

/** PHP inspect: `'2'` done (its expiry, -1 for none); another value in flight (PTTL, a tied side key's fingerprint). */
const PHP_INSPECT = inspectScript(
  "inspect:babelqueue-php",
  `local value = redis.call('GET', main)
if not value then return {0, 0, ':'} end
local left = redis.call('PTTL', main)
if value == '2' then return {2, left, ':'} end
local fingerprint = tiedFingerprint(main, sideKey, left)
if left < 0 then left = 0 end
return {1, left, ':' .. fingerprint}`,
);

/** Go inspect: Go's key done (its expiry, -1 for none); else our side key in flight; else nothing. */
const GO_INSPECT = inspectScript(
  "inspect:babelqueue-go",
  `if redis.call('EXISTS', main) == 1 then return {2, redis.call('PTTL', main), ':'} end
local held = redis.call('GET', sideKey)
if not held then return {0, 0, ':'} end
local left, fingerprint = sideLease(sideKey, held)
return {1, left, ':' .. fingerprint}`,
);

export const PHP_SCRIPTS: RedisLayoutScripts = {
  claim: PHP_CLAIM,
  remember: PHP_REMEMBER,
  release: PHP_RELEASE,
  seen: PHP_SEEN,
  inspect: PHP_INSPECT,
  forget: FORGET_BOTH,
};

export const GO_SCRIPTS: RedisLayoutScripts = {
  claim: GO_CLAIM,
  remember: GO_REMEMBER,
  release: GO_RELEASE,
  seen: GO_SEEN,
  inspect: GO_INSPECT,
  forget: FORGET_BOTH,
};
