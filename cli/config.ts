/**
 * The operator CLI's command line: which command, which ids, which store, from flags first and
 * the environment second. Parsing never touches a backend.
 *
 *   babelqueue-serverless inspect <id…|-> [store flags] [--json]
 *   babelqueue-serverless forget  <id…|-> [store flags] [--yes] [--dry-run] [--json]
 *
 * Store flags (environment in brackets):
 *   --store dynamodb|upstash|redis|postgres                    [BQ_STORE; else inferred from what is set]
 *   --namespace N                                              [BQ_NAMESPACE; default ""]
 *   dynamodb: --table T [BQ_TABLE, IDEMPOTENCY_TABLE] --endpoint URL [AWS_ENDPOINT_URL_DYNAMODB,
 *             AWS_ENDPOINT_URL] --region R [AWS_REGION, AWS_DEFAULT_REGION] --key-attribute A
 *             (credentials: the AWS SDK's default chain, never a flag)
 *   upstash:  --url URL [UPSTASH_REDIS_REST_URL] --token T [UPSTASH_REDIS_REST_TOKEN; prefer the variable]
 *   redis:    --url redis://… [REDIS_URL]   (ioredis)        --prefix P (default "bq:")
 *   upstash and redis: --layout babelqueue-serverless|babelqueue-php|babelqueue-go [BQ_LAYOUT] — the store's
 *             `layout`; a BabelQueue layout takes no namespace (its --prefix defaults to the SDK's)
 *             --hash-tag, --buckets N, --previous-buckets N — the consumers' `hashTag`, `buckets`,
 *             `previousBuckets`: without them the CLI looks for keys where those consumers never wrote
 *   postgres: --url postgres://… [DATABASE_URL]   (pg)       --table T (default: the layout's)
 *             --layout babelqueue-serverless|babelqueue-php|babelqueue-go [BQ_LAYOUT; default the first]
 *
 * What this is *not*: a place that prints a credential. `secrets` lists every value that must
 * never appear in output (tokens, URL passwords); the CLI redacts them from every message.
 */
import { parseArgs } from "node:util";
import type { RedisLayoutName } from "../stores/redis/layouts.js";

export type StoreKind = "dynamodb" | "upstash" | "redis" | "postgres";
export const STORE_KINDS: readonly StoreKind[] = ["dynamodb", "upstash", "redis", "postgres"];
const REDIS_LAYOUTS: readonly RedisLayoutName[] = ["babelqueue-serverless", "babelqueue-php", "babelqueue-go"];

/** Where a Redis store's consumers put their keys (`hashTag`, `buckets`, `previousBuckets`), when they set it. */
export interface RedisPlacementFlags {
  readonly hashTag?: boolean;
  readonly buckets?: number;
  readonly previousBuckets?: number;
}

/** `--hash-tag`, `--buckets N`, `--previous-buckets N`: whole numbers are checked here, their ranges by the store. */
function redisPlacement(flags: Record<string, string | boolean | undefined>): RedisPlacementFlags {
  const count = (name: string): number | undefined => {
    const value = flags[name];
    if (value === undefined) return undefined;
    if (typeof value !== "string" || !/^[0-9]+$/.test(value)) throw new UsageError(`--${name} must be a whole number`);
    return Number(value);
  };
  const buckets = count("buckets");
  const previousBuckets = count("previous-buckets");
  return {
    ...(flags["hash-tag"] === true ? { hashTag: true } : {}),
    ...(buckets === undefined ? {} : { buckets }),
    ...(previousBuckets === undefined ? {} : { previousBuckets }),
  };
}

export interface CliConfig {
  readonly command: "inspect" | "forget" | "help";
  /** Ids as given; "-" means "read ids from stdin, one per line". */
  readonly ids: readonly string[];
  readonly json: boolean;
  readonly yes: boolean;
  readonly dryRun: boolean;
  readonly store: StoreConfig | undefined;
  /** Values that must never be printed. */
  readonly secrets: readonly string[];
}

export type StoreConfig =
  | { readonly kind: "dynamodb"; readonly namespace: string; readonly table: string; readonly endpoint?: string; readonly region?: string; readonly keyAttribute?: string }
  | { readonly kind: "upstash"; readonly namespace: string; readonly url: string; readonly token: string; readonly prefix?: string; readonly layout?: RedisLayoutName }
  | { readonly kind: "redis"; readonly namespace: string; readonly url: string; readonly prefix?: string; readonly layout?: RedisLayoutName; readonly placement: RedisPlacementFlags }
  | { readonly kind: "postgres"; readonly namespace: string; readonly url: string; readonly table?: string; readonly layout?: PostgresLayoutName };

/** The table layouts of the Postgres store (its `layout` option). */
export const POSTGRES_LAYOUT_NAMES = ["babelqueue-serverless", "babelqueue-php", "babelqueue-go"] as const;
export type PostgresLayoutName = (typeof POSTGRES_LAYOUT_NAMES)[number];

/** A mistake in the command line: printed with the usage, exit code 2. */
export class UsageError extends Error {
  override readonly name = "UsageError";
}

export const USAGE = `babelqueue-serverless: look at or forget idempotency records

usage:
  babelqueue-serverless inspect <id…> [store] [--json]
  babelqueue-serverless forget  <id…> [store] [--yes] [--dry-run] [--json]
  (an id of "-" reads ids from stdin, one per line)

store (flags, or the environment in brackets):
  --store dynamodb|upstash|redis|postgres        [BQ_STORE, else inferred]
  --namespace N                                  [BQ_NAMESPACE] (the store's namespace option)
  dynamodb  --table T [BQ_TABLE, IDEMPOTENCY_TABLE]  --endpoint URL [AWS_ENDPOINT_URL_DYNAMODB]
            --region R [AWS_REGION]  --key-attribute A   (credentials: the AWS SDK's default chain)
  upstash   --url URL [UPSTASH_REDIS_REST_URL]  token: [UPSTASH_REDIS_REST_TOKEN] (or --token)
  redis     --url redis://… [REDIS_URL]  --prefix P     (needs ioredis)
  upstash, redis: --layout babelqueue-serverless|babelqueue-php|babelqueue-go [BQ_LAYOUT]  (the records of BabelQueue's
            PHP or Go SDK: no --namespace; --prefix defaults to the SDK's, bq:idem: or bq:idemp:)
            --hash-tag  --buckets N  --previous-buckets N   (as the consumers set hashTag, buckets, previousBuckets;
            a Redis Cluster is reached through one node: a key on another node fails, never reads absent)
  postgres  --url postgres://… [DATABASE_URL]  --table T (needs pg)
            --layout babelqueue-serverless|babelqueue-php|babelqueue-go [BQ_LAYOUT]
            (the BabelQueue PHP / Go SDK's table: ids are meta.id itself, no --namespace)

forget drops an id whatever its state, so its next delivery runs the effect again. With more than
one id it only shows what it would do unless --yes is given; an id that is in flight right now
needs --yes too.`;

type Env = Readonly<Record<string, string | undefined>>;

function pick(...values: (string | undefined)[]): string | undefined {
  return values.find((value) => typeof value === "string" && value !== "");
}

/** The password of a URL, when it has one (to redact it). */
function urlSecrets(url: string | undefined): string[] {
  if (url === undefined) return [];
  let password: string | undefined;
  try {
    password = new URL(url).password;
  } catch {
    // Not a URL to WHATWG (a bad port, an unescaped "@"), yet a driver may still echo it: the
    // userinfo's password is everything between its first ":" and the authority's last "@".
    password = /^[a-z][a-z0-9+.-]*:\/\/[^:/?#@]*:([^/?#]*)@/i.exec(url)?.[1];
  }
  if (password === undefined || password === "") return [];
  const secrets = [password];
  try {
    const decoded = decodeURIComponent(password);
    if (decoded !== password) secrets.push(decoded);
  } catch {
    // Malformed percent-encoding ("p%zz"): the password as written is still a secret.
  }
  return secrets;
}

function inferKind(flags: Record<string, string | boolean | undefined>, env: Env): StoreKind | undefined {
  const explicit = pick(flags.store as string | undefined, env.BQ_STORE);
  if (explicit !== undefined) {
    if (!(STORE_KINDS as readonly string[]).includes(explicit)) throw new UsageError(`--store must be one of ${STORE_KINDS.join(", ")}`);
    return explicit as StoreKind;
  }
  // A layout names a Redis or PostgreSQL store (DynamoDB has none): --table then means a SQL table.
  const layout = pick(flags.layout as string | undefined, env.BQ_LAYOUT) !== undefined;
  if (!layout && pick(flags.table as string | undefined, env.BQ_TABLE, env.IDEMPOTENCY_TABLE) !== undefined && flags.url === undefined) return "dynamodb";
  const url = flags.url as string | undefined;
  if (url !== undefined) {
    if (/^rediss?:\/\//.test(url)) return "redis";
    if (/^postgres(ql)?:\/\//.test(url)) return "postgres";
    if (/^https:\/\//.test(url)) return "upstash";
  }
  if (pick(env.UPSTASH_REDIS_REST_URL) !== undefined) return "upstash";
  if (pick(env.REDIS_URL) !== undefined) return "redis";
  if (pick(env.DATABASE_URL) !== undefined) return "postgres";
  return undefined;
}

/** The Redis layout of --layout / BQ_LAYOUT, checked against the namespace (a BabelQueue layout has none). */
function redisLayout(flag: string | undefined, env: Env, namespace: string): RedisLayoutName | undefined {
  const layout = pick(flag, env.BQ_LAYOUT);
  if (layout === undefined) return undefined;
  if (!(REDIS_LAYOUTS as readonly string[]).includes(layout)) throw new UsageError(`--layout must be one of ${REDIS_LAYOUTS.join(", ")}`);
  if (layout !== "babelqueue-serverless" && namespace !== "") {
    throw new UsageError(`--layout ${layout} keys ids as the BabelQueue SDK does, <prefix><id>: give --prefix, not --namespace (or BQ_NAMESPACE)`);
  }
  return layout as RedisLayoutName;
}

function storeConfig(flags: Record<string, string | boolean | undefined>, env: Env): { store: StoreConfig; secrets: string[] } {
  const kind = inferKind(flags, env);
  if (kind === undefined) throw new UsageError("which store? give --store (or --table, --url, or the environment variables below)");
  const namespace = pick(flags.namespace as string | undefined, env.BQ_NAMESPACE) ?? "";
  const flag = (name: string) => flags[name] as string | undefined;
  if (kind === "dynamodb" && pick(flag("layout")) !== undefined) throw new UsageError("--layout is an option of the redis, upstash and postgres stores");
  switch (kind) {
    case "dynamodb": {
      const table = pick(flag("table"), env.BQ_TABLE, env.IDEMPOTENCY_TABLE);
      if (table === undefined) throw new UsageError("dynamodb needs --table (or BQ_TABLE)");
      const endpoint = pick(flag("endpoint"), env.AWS_ENDPOINT_URL_DYNAMODB, env.AWS_ENDPOINT_URL);
      const region = pick(flag("region"), env.AWS_REGION, env.AWS_DEFAULT_REGION);
      const keyAttribute = flag("key-attribute");
      return {
        store: {
          kind,
          namespace,
          table,
          ...(endpoint === undefined ? {} : { endpoint }),
          ...(region === undefined ? {} : { region }),
          ...(keyAttribute === undefined ? {} : { keyAttribute }),
        },
        secrets: [...urlSecrets(endpoint), ...[env.AWS_SECRET_ACCESS_KEY, env.AWS_SESSION_TOKEN].filter((s): s is string => typeof s === "string" && s !== "")],
      };
    }
    case "upstash": {
      const url = pick(flag("url"), env.UPSTASH_REDIS_REST_URL);
      const token = pick(flag("token"), env.UPSTASH_REDIS_REST_TOKEN);
      if (url === undefined || token === undefined) throw new UsageError("upstash needs --url and a token (UPSTASH_REDIS_REST_URL, UPSTASH_REDIS_REST_TOKEN)");
      // UpstashRedisStore takes no placement options (one endpoint, no Cluster slots to spread over).
      for (const name of ["hash-tag", "buckets", "previous-buckets"]) {
        if (flags[name] !== undefined) throw new UsageError(`--${name} is RedisStore's (a Redis Cluster's key placement); upstash does not take it`);
      }
      const prefix = flag("prefix");
      const layout = redisLayout(flag("layout"), env, namespace);
      return {
        store: { kind, namespace, url, token, ...(prefix === undefined ? {} : { prefix }), ...(layout === undefined ? {} : { layout }) },
        secrets: [token, ...urlSecrets(url)],
      };
    }
    case "redis": {
      const url = pick(flag("url"), env.REDIS_URL);
      if (url === undefined) throw new UsageError("redis needs --url redis://… (or REDIS_URL)");
      const prefix = flag("prefix");
      const layout = redisLayout(flag("layout"), env, namespace);
      return {
        store: { kind, namespace, url, ...(prefix === undefined ? {} : { prefix }), ...(layout === undefined ? {} : { layout }), placement: redisPlacement(flags) },
        secrets: urlSecrets(url),
      };
    }
    case "postgres": {
      const url = pick(flag("url"), env.DATABASE_URL);
      if (url === undefined) throw new UsageError("postgres needs --url postgres://… (or DATABASE_URL)");
      const table = flag("table");
      const layout = pick(flag("layout"), env.BQ_LAYOUT);
      if (layout !== undefined && !(POSTGRES_LAYOUT_NAMES as readonly string[]).includes(layout)) {
        throw new UsageError(`--layout must be one of ${POSTGRES_LAYOUT_NAMES.join(", ")}`);
      }
      const layoutPart = layout === undefined ? {} : { layout: layout as PostgresLayoutName };
      return { store: { kind, namespace, url, ...(table === undefined ? {} : { table }), ...layoutPart }, secrets: [...urlSecrets(url), ...[env.PGPASSWORD].filter((s): s is string => typeof s === "string" && s !== "")] };
    }
  }
}

/** Parses a command line (without `node` and the script). Throws `UsageError`. */
export function parseCommandLine(argv: readonly string[], env: Env): CliConfig {
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({
      args: [...argv],
      allowPositionals: true,
      strict: true,
      options: {
        store: { type: "string" },
        namespace: { type: "string" },
        table: { type: "string" },
        endpoint: { type: "string" },
        region: { type: "string" },
        "key-attribute": { type: "string" },
        url: { type: "string" },
        token: { type: "string" },
        prefix: { type: "string" },
        layout: { type: "string" },
        "hash-tag": { type: "boolean" },
        buckets: { type: "string" },
        "previous-buckets": { type: "string" },
        json: { type: "boolean" },
        yes: { type: "boolean", short: "y" },
        "dry-run": { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
    });
  } catch (error) {
    // parseArgs names the unknown flag; it never echoes a flag's value.
    throw new UsageError(error instanceof Error ? error.message : "bad arguments");
  }
  const flags = parsed.values as Record<string, string | boolean | undefined>;
  const [command, ...ids] = parsed.positionals;
  const base = { json: flags.json === true, yes: flags.yes === true, dryRun: flags["dry-run"] === true };
  if (flags.help === true || command === undefined || command === "help") {
    return { command: "help", ids: [], store: undefined, secrets: [], ...base };
  }
  if (command !== "inspect" && command !== "forget") throw new UsageError(`unknown command "${command}" (inspect or forget)`);
  if (ids.length === 0) throw new UsageError(`${command} needs at least one id (or "-" to read them from stdin)`);
  const { store, secrets } = storeConfig(flags, env);
  return { command, ids, store, secrets, ...base };
}
