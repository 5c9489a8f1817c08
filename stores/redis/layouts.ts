/**
 * The record layouts of the Redis stores (`layout` option): which keys an id lives under, which
 * scripts read and write them, and what `namespace`, `prefix`, `hashTag` and the retention mean.
 *
 *   - "babelqueue-serverless" (default): `{prefix}{namespace}:{id}` (`prefix` "bq:"), over-long ids hashed, values
 *     `i:<token>[:<fp>]` / `d[:<fp>]` (scripts.ts). Everything the store contract offers.
 *   - "babelqueue-php": the records of BabelQueue's PHP `RedisStore` — key `<prefix><id>` (`prefix`
 *     "bq:idem:", PHP's own default and its constructor argument), `'1'` in flight, `'2'` seen.
 *   - "babelqueue-go": the records of BabelQueue's Go `idempotency-redis` store — key `<prefix><id>`
 *     (`prefix` "bq:idemp:", Go's `DefaultPrefix` / `WithPrefix`), value `"1"` = done.
 *
 * In a BabelQueue layout the id is used verbatim, as the SDKs do: no namespace (refused — use
 * `prefix`, the SDK's own option, to separate consumers), no hashing of long ids, no hash tag. Our
 * side key, `<side prefix><id>`, holds an in-flight claim's token and fingerprint; the side prefix is
 * the prefix with its last character turned into `-lease:` ("bq:idem:" → "bq:idem-lease:"), so no SDK
 * key and no side key can ever be the same string. Committed ids are kept for good unless
 * `retentionMs` is given (the SDKs' default), then with that `PX`, which the SDKs read the same.
 *
 * What this is *not*: a migration between layouts. A store reads and writes one layout; records of
 * another are, for it, some other application's keys.
 */
import { InvalidOptionError } from "../../src/errors.js";
import { checkNamespace, storeKey } from "../../src/store-kit/keys.js";
import { resolveWindows } from "../../src/store-kit/windows.js";
import { GO_SCRIPTS, PHP_SCRIPTS } from "./scripts-babelqueue.js";
import { OWN_SCRIPTS, type RedisLayoutScripts } from "./scripts.js";

/** The record layouts a Redis store can read and write. */
export type RedisLayoutName = "babelqueue-serverless" | "babelqueue-php" | "babelqueue-go";

export const REDIS_LAYOUTS: readonly RedisLayoutName[] = ["babelqueue-serverless", "babelqueue-php", "babelqueue-go"];

/** Longest key the babelqueue-serverless layout writes, prefix and namespace included (UTF-8 bytes). */
export const MAX_REDIS_KEY_BYTES = 512;
const PREFIX_PATTERN = /^[A-Za-z0-9_.\-/:]{0,100}$/;
const DEFAULT_PREFIX: Readonly<Record<RedisLayoutName, string>> = { "babelqueue-serverless": "bq:", "babelqueue-php": "bq:idem:", "babelqueue-go": "bq:idemp:" };

/** What the layout is resolved from: the store's options. */
export interface RedisLayoutOptions {
  readonly layout?: RedisLayoutName;
  readonly prefix?: string;
  readonly namespace?: string;
  readonly hashTag?: boolean;
  readonly buckets?: number;
  readonly previousBuckets?: number;
  readonly retentionMs?: number;
}

/** A layout with its options applied: the keys of an id, the scripts, the retention. */
export interface RedisLayout {
  readonly name: RedisLayoutName;
  readonly prefix: string;
  readonly namespace: string;
  /** Retention of a committed id (ms); `Infinity`: kept for good (a BabelQueue layout's default). */
  readonly retentionMs: number;
  readonly scripts: RedisLayoutScripts;
  /** Keys per id in every script's KEYS: 1 (babelqueue-serverless), 2 (the SDK's key, then our side key). */
  readonly keysPerId: 1 | 2;
  /** The key the records of `id` are read from (the SDK's key in a BabelQueue layout). */
  key(id: string): Promise<string>;
  /** Every key of `id`, in the order the scripts take them. */
  keysOf(id: string): Promise<string[]>;
}

/** The side key prefix of a BabelQueue layout: the prefix with its last character turned into `-lease:`. */
export function sidePrefix(prefix: string): string {
  return `${prefix.slice(0, -1)}${prefix.endsWith("-") ? "_" : "-"}lease:`;
}

function checkId(id: string): string {
  if (typeof id !== "string") throw new InvalidOptionError("id", "must be a string");
  return id;
}

/** Checks the layout options and returns the layout. Throws `InvalidOptionError`. */
export function resolveRedisLayout(options: RedisLayoutOptions): RedisLayout {
  const name = options.layout ?? "babelqueue-serverless";
  if (!REDIS_LAYOUTS.includes(name)) throw new InvalidOptionError("layout", `must be one of ${REDIS_LAYOUTS.map((one) => `"${one}"`).join(", ")}`);
  const namespace = checkNamespace(options.namespace ?? "");
  const prefix = options.prefix ?? DEFAULT_PREFIX[name];
  if (typeof prefix !== "string" || !PREFIX_PATTERN.test(prefix)) {
    throw new InvalidOptionError("prefix", "must be 0-100 characters of A-Z a-z 0-9 _ . - / :");
  }
  const { retentionMs } = resolveWindows({ retentionMs: options.retentionMs });
  if (name === "babelqueue-serverless") return ownLayout(prefix, namespace, retentionMs);

  const sdk = name === "babelqueue-php" ? "PHP" : "Go";
  if (namespace !== "") {
    throw new InvalidOptionError("namespace", `is not part of the "${name}" layout: the ${sdk} SDK keys an id as <prefix><id>; give its prefix (prefix) instead`);
  }
  if (options.hashTag === true) throw new InvalidOptionError("hashTag", `cannot apply to the "${name}" layout: the ${sdk} SDK's keys carry no hash tag`);
  for (const option of ["buckets", "previousBuckets"] as const) {
    if (options[option] !== undefined) throw new InvalidOptionError(option, `cannot apply to the "${name}" layout: the ${sdk} SDK's keys carry no hash tag`);
  }
  if (prefix === "") throw new InvalidOptionError("prefix", `must not be empty in the "${name}" layout (the ${sdk} SDK's default is "${DEFAULT_PREFIX[name]}")`);
  const side = sidePrefix(prefix);
  return {
    name,
    prefix,
    namespace,
    retentionMs: options.retentionMs === undefined ? Number.POSITIVE_INFINITY : retentionMs,
    scripts: name === "babelqueue-php" ? PHP_SCRIPTS : GO_SCRIPTS,
    keysPerId: 2,
    key: async (id) => prefix + checkId(id),
    keysOf: async (id) => [prefix + checkId(id), side + id],
  };
}

/** Our own layout's plain keys; hash tags and buckets are the store's placement (buckets.ts). */
function ownLayout(prefix: string, namespace: string, retentionMs: number): RedisLayout {
  const key = (id: string) => storeKey(namespace, checkId(id), MAX_REDIS_KEY_BYTES, prefix);
  return {
    name: "babelqueue-serverless",
    prefix,
    namespace,
    retentionMs,
    scripts: OWN_SCRIPTS,
    keysPerId: 1,
    key,
    keysOf: async (id) => [await key(id)],
  };
}
