/**
 * Opens the store a `StoreConfig` names, importing its backend client only then: an operator who
 * uses DynamoDB never needs `ioredis` or `pg` installed, and the other way round.
 *
 *
 * What this is *not*: a connection pool for anything else. Each opened store is closed by the CLI
 * when the command is done.
 */
import type { Store } from "../src/contract.js";
import type { StoreConfig } from "./config.js";

export interface OpenedStore {
  readonly store: Store;
  /** What to print about the store: kind, table or host, namespace. Never a credential. */
  readonly label: string;
  close(): Promise<void>;
}

/** A backend package the chosen store needs is not installed. */
export class MissingPackageError extends Error {
  override readonly name = "MissingPackageError";
  constructor(kind: string, packages: string) {
    super(`the ${kind} store needs ${packages}: npm i ${packages}`);
  }
}

async function load<T>(kind: string, packages: string, importer: () => Promise<T>): Promise<T> {
  try {
    return await importer();
  } catch (error) {
    const code = (error as { code?: unknown })?.code;
    if (code === "ERR_MODULE_NOT_FOUND" || code === "MODULE_NOT_FOUND") throw new MissingPackageError(kind, packages);
    throw error;
  }
}

/** host[:port] of a URL, for labels (no user, no password, no path). */
function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return "(unparsable URL)";
  }
}

const ns = (namespace: string) => `namespace ${JSON.stringify(namespace)}`;

/** Where a Redis store's records are: its namespace, or in a BabelQueue layout the layout and its prefix. */
const redisWhere = (store: { layout: string; namespace: string; prefix: string }) =>
  store.layout === "babelqueue-serverless" ? ns(store.namespace) : `layout ${store.layout}, prefix ${JSON.stringify(store.prefix)}`;

export async function openStore(config: StoreConfig): Promise<OpenedStore> {
  switch (config.kind) {
    case "dynamodb": {
      const { DynamoDBStore } = await load("dynamodb", "@aws-sdk/client-dynamodb", () => import("../stores/dynamodb/store.js"));
      const store = new DynamoDBStore({
        table: config.table,
        namespace: config.namespace,
        clientConfig: {
          ...(config.endpoint === undefined ? {} : { endpoint: config.endpoint }),
          ...(config.region === undefined ? {} : { region: config.region }),
          maxAttempts: 3,
        },
        ...(config.keyAttribute === undefined ? {} : { keyAttribute: config.keyAttribute }),
      });
      const where = config.endpoint === undefined ? "" : ` at ${hostOf(config.endpoint)}`;
      return {
        store,
        label: `dynamodb table ${config.table}${where}, ${ns(config.namespace)}`,
        close: async () => store.client.destroy(),
      };
    }
    case "upstash": {
      const { UpstashRedisStore } = await load("upstash", "@upstash/redis", () => import("../stores/redis/upstash.js"));
      const store = new UpstashRedisStore({
        url: config.url,
        token: config.token,
        namespace: config.namespace,
        ...(config.prefix === undefined ? {} : { prefix: config.prefix }),
        ...(config.layout === undefined ? {} : { layout: config.layout }),
      });
      return { store, label: `upstash ${hostOf(config.url)}, ${redisWhere(store)}`, close: async () => undefined };
    }
    case "redis": {
      const [{ Redis }, { RedisStore, ioredisScriptClient }] = await Promise.all([
        load("redis", "ioredis", () => import("ioredis")),
        import("../stores/redis/store.js"),
      ]);
      const redis = new Redis(config.url, { lazyConnect: true, maxRetriesPerRequest: 1, enableOfflineQueue: true, retryStrategy: () => null });
      // Connection errors reach the command as a StoreUnavailableError; this only keeps ioredis quiet.
      redis.on("error", () => undefined);
      const store = new RedisStore({
        client: ioredisScriptClient(redis),
        namespace: config.namespace,
        ...(config.prefix === undefined ? {} : { prefix: config.prefix }),
        ...(config.layout === undefined ? {} : { layout: config.layout }),
        ...config.placement,
      });
      return {
        store,
        label: `redis ${hostOf(config.url)}, ${redisWhere(store)}`,
        close: async () => {
          redis.disconnect();
        },
      };
    }
    case "postgres": {
      const pg = await load("postgres", "pg", () => import("pg"));
      const { PostgresStore } = await import("../stores/postgres/store.js");
      const pool = new pg.default.Pool({ connectionString: config.url, max: 4, connectionTimeoutMillis: 5_000 });
      // An idle connection the server drops (a restart, a failover) emits "error" on the pool; unheard, it ends the process.
      pool.on("error", () => undefined);
      const store = new PostgresStore({
        pool,
        namespace: config.namespace,
        ...(config.table === undefined ? {} : { table: config.table }),
        ...(config.layout === undefined ? {} : { layout: config.layout }),
      });
      const database = (() => {
        try {
          return new URL(config.url).pathname.replace(/^\//, "");
        } catch {
          return "";
        }
      })();
      return {
        store,
        label: `postgres ${hostOf(config.url)}/${database} table ${store.table}${store.layout === "babelqueue-serverless" ? "" : ` (layout ${store.layout})`}, ${ns(config.namespace)}`,
        close: () => pool.end(),
      };
    }
  }
}
