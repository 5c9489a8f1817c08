/**
 * The operator CLI (`babelqueue-serverless inspect|forget`), in-process through `main` and once as
 * a real process, against DynamoDB Local, redis-server over TCP (ioredis), the Upstash REST bridge
 * in front of it, and PostgreSQL when this tree has the Postgres store: ids seeded through the
 * stores themselves, then looked at, dry-run, forgotten, and re-claimed to prove the replay.
 *
 * Stores that implement `inspect` report done / in-flight / absent with times and fingerprints;
 * the others fall back to `seen` (done / not-done). The assertions follow what the store offers,
 * and each store's expectation is stated once.
 */
import { spawnSync } from "node:child_process";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { Redis } from "ioredis";
import type { ClaimingStore } from "../../entry/index.js";
import { afterAll, beforeAll, describe, expect, inject, it, vi } from "vitest";
import { formatDuration, redact } from "../../cli/commands.js";
import { parseCommandLine } from "../../cli/config.js";
import { main } from "../../cli/main.js";
import { InMemoryStore } from "../../src/memory-store.js";
import { StoreUnavailableError } from "../../src/errors.js";
import { freePort, localClientConfig } from "../../scripts/dynamodb-local.mjs";
import { DynamoDBStore, createIdempotencyTable, idempotencyTableDefinition } from "../../entry/dynamodb.js";
import { PostgresStore, createIdempotencyTable as createPostgresTable } from "../../entry/postgres.js";
import { RedisStore, UpstashRedisStore, ioredisScriptClient } from "../../entry/upstash.js";

const endpoint = inject("dynamodbEndpoint");
const table = `idempotency-cli-${Date.now().toString(36)}`;
const redisUrl = `redis://127.0.0.1:${inject("redisPort")}`;
const upstashUrl = inject("upstashUrl");
const upstashToken = inject("upstashToken");
const AWS_SECRET = "cli-test-secret-access-key-0123456789";

let runs = 0;
const namespace = (name: string) => {
  runs += 1;
  return `cli-${name}-${Date.now().toString(36)}-${runs}`;
};

/** Runs the CLI in-process; returns its exit code and output. */
async function cli(argv: string[], env: Record<string, string | undefined> = {}, stdin = "") {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(argv, { out: (line) => out.push(line), err: (line) => err.push(line), readStdin: async () => stdin }, env);
  return { code, out: out.join("\n"), err: err.join("\n"), json: () => JSON.parse(out.join("\n")) as Record<string, unknown> };
}

const ioredis = new Redis(redisUrl, { lazyConnect: true });

beforeAll(async () => {
  await createIdempotencyTable(new DynamoDBClient(localClientConfig(endpoint)), idempotencyTableDefinition(table));
  // The CLI uses the AWS SDK's default credential chain, as an operator's shell does. DynamoDB
  // Local keeps one database per access key id, so it is the one the seeding client uses.
  vi.stubEnv("AWS_ACCESS_KEY_ID", "local");
  vi.stubEnv("AWS_SECRET_ACCESS_KEY", AWS_SECRET);
  vi.stubEnv("AWS_REGION", "us-east-1");
});

afterAll(async () => {
  vi.unstubAllEnvs();
  ioredis.disconnect();
});

/** A store over `memory` that records the ids it is asked to forget, with `inspect` as given. */
function recordingForgets(memory: InMemoryStore, inspect: (id: string) => ReturnType<InMemoryStore["inspect"]>) {
  const forgotten: string[] = [];
  const store = {
    seen: (id: string) => memory.seen(id),
    remember: (id: string) => memory.remember(id),
    forget: async (id: string) => {
      forgotten.push(id);
      await memory.forget(id);
    },
    inspect,
  };
  return { store, forgotten };
}

/** Seeds `done`, `in-flight` and leaves `absent` absent, through the store itself. */
async function seed(store: ClaimingStore): Promise<void> {
  const claim = await store.claim("order-done", 60_000);
  expect(claim.status).toBe("claimed");
  await store.remember("order-done");
  expect((await store.claim("order-in-flight", 60_000)).status).toBe("claimed");
}

interface Backend {
  readonly name: string;
  /** A store and the CLI flags + environment that reach the same records. */
  make(ns: string): { store: ClaimingStore; argv: string[]; env: Record<string, string>; secrets: string[] };
  /** Committed ids have no expiry (a BabelQueue layout's default): inspect shows "no expiry". */
  readonly keptForGood?: boolean;
}

const backends: Backend[] = [
  {
    name: "dynamodb (DynamoDB Local)",
    make: (ns) => ({
      store: new DynamoDBStore({ table, namespace: ns, clientConfig: localClientConfig(endpoint) }),
      argv: ["--store", "dynamodb", "--table", table, "--endpoint", endpoint, "--namespace", ns],
      env: {},
      secrets: [AWS_SECRET],
    }),
  },
  {
    name: "redis (redis-server over TCP, ioredis)",
    make: (ns) => ({
      store: new RedisStore({ client: ioredisScriptClient(ioredis), namespace: ns }),
      argv: ["--namespace", ns],
      env: { REDIS_URL: redisUrl },
      secrets: [],
    }),
  },
  {
    name: "upstash (REST bridge → redis-server)",
    make: (ns) => ({
      store: new UpstashRedisStore({ url: upstashUrl, token: upstashToken, namespace: ns }),
      argv: [],
      env: { UPSTASH_REDIS_REST_URL: upstashUrl, UPSTASH_REDIS_REST_TOKEN: upstashToken, BQ_NAMESPACE: ns },
      secrets: [upstashToken],
    }),
  },
  {
    name: 'redis, layout "babelqueue-php" (the PHP SDK\'s records; --layout, --prefix)',
    keptForGood: true,
    make: (ns) => ({
      store: new RedisStore({ client: ioredisScriptClient(ioredis), layout: "babelqueue-php", prefix: `bq:idem:${ns}:` }),
      argv: ["--layout", "babelqueue-php", "--prefix", `bq:idem:${ns}:`],
      env: { REDIS_URL: redisUrl },
      secrets: [],
    }),
  },
  {
    name: 'upstash, layout "babelqueue-go" (the Go SDK\'s records; BQ_LAYOUT)',
    keptForGood: true,
    make: (ns) => ({
      store: new UpstashRedisStore({ url: upstashUrl, token: upstashToken, layout: "babelqueue-go", prefix: `bq:idemp:${ns}:` }),
      argv: ["--prefix", `bq:idemp:${ns}:`],
      env: { UPSTASH_REDIS_REST_URL: upstashUrl, UPSTASH_REDIS_REST_TOKEN: upstashToken, BQ_LAYOUT: "babelqueue-go" },
      secrets: [upstashToken],
    }),
  },
];

describe.each(backends)("babelqueue-serverless on $name", (backend) => {
  it("inspect: done, in-flight and absent ids, as a table and as JSON; never a credential", async () => {
    const ns = namespace("inspect");
    const { store, argv, env, secrets } = backend.make(ns);
    await seed(store);
    const hasInspect = typeof store.inspect === "function";

    const human = await cli(["inspect", "order-done", "order-in-flight", "order-absent", ...argv], env);
    expect(human.code).toBe(0);
    const rows = human.out.split("\n");
    expect(rows[0]).toContain(ns);
    expect(rows[1]).toMatch(/^ID\s+STATUS\s+LEASE LEFT\s+RETENTION LEFT\s+FINGERPRINT$/);

    const json = await cli(["inspect", "order-done", "order-in-flight", "order-absent", "--json", ...argv], env);
    expect(json.code).toBe(0);
    const records = json.json().records as { id: string; status: string; source: string; leaseLeftMs?: number; retentionLeftMs?: number }[];
    if (hasInspect) {
      expect(records.map((r) => [r.id, r.status, r.source])).toEqual([
        ["order-done", "done", "inspect"],
        ["order-in-flight", "in-flight", "inspect"],
        ["order-absent", "absent", "inspect"],
      ]);
      if (backend.keptForGood) {
        expect(records[0]?.retentionLeftMs).toBeUndefined();
        expect(rows.find((row) => row.startsWith("order-done"))).toMatch(/done\s+-\s+no expiry\s+-$/);
      } else {
        expect(records[0]?.retentionLeftMs).toBeGreaterThan(3 * 86_400_000);
      }
      expect(records[1]?.leaseLeftMs).toBeGreaterThan(50_000);
      // DynamoDBStore counts on DynamoDB's clock: a cold store records a lease up to 3 s and a round trip
      // longer than asked, and reads it from the earliest that clock can read (docs/stores/dynamodb.md).
      expect(records[1]?.leaseLeftMs).toBeLessThanOrEqual(60_000 + 3_500);
      expect(rows.find((row) => row.startsWith("order-in-flight"))).toMatch(/in-flight\s+(1m )?\d+s\s+-/);
    } else {
      expect(records.map((r) => [r.id, r.status, r.source])).toEqual([
        ["order-done", "done", "seen"],
        ["order-in-flight", "not-done", "seen"],
        ["order-absent", "not-done", "seen"],
      ]);
      expect(human.out).toContain("this store has no inspect");
    }
    for (const secret of secrets) {
      expect(human.out + human.err + json.out).not.toContain(secret);
    }
  });

  it("forget: one id is forgotten (its next delivery runs again); several are a dry run until --yes", async () => {
    const ns = namespace("forget");
    const { store, argv, env } = backend.make(ns);
    await seed(store);
    expect((await store.claim("order-done")).status).toBe("done");

    const one = await cli(["forget", "order-done", ...argv], env);
    expect(one.code).toBe(0);
    expect(one.out).toContain("forgot order-done");
    // The deliberate replay: the id can be claimed again.
    expect((await store.claim("order-done", 60_000)).status).toBe("claimed");
    await store.remember("order-done");

    await store.remember("order-other");
    const dry = await cli(["forget", "order-done", "order-other", ...argv], env);
    expect(dry.code).toBe(0);
    expect(dry.out).toContain("dry run: would forget 2 id(s); nothing was changed");
    expect(await store.seen("order-done")).toBe(true);
    expect(await store.seen("order-other")).toBe(true);

    const forced = await cli(["forget", "-", "--yes", "--json", ...argv], env, "order-done\n\norder-other\n");
    expect(forced.code).toBe(0);
    expect((forced.json().results as { id: string; forgotten: boolean }[]).map((r) => [r.id, r.forgotten])).toEqual([
      ["order-done", true],
      ["order-other", true],
    ]);
    expect(await store.seen("order-done")).toBe(false);
    expect(await store.seen("order-other")).toBe(false);
  });

  it("forget of an id in flight right now needs --yes when the store can tell", async () => {
    const ns = namespace("in-flight");
    const { store, argv, env } = backend.make(ns);
    await seed(store);
    const hasInspect = typeof store.inspect === "function";
    const first = await cli(["forget", "order-in-flight", ...argv], env);
    if (hasInspect) {
      expect(first.code).toBe(1);
      expect(first.out).toContain("in flight");
      expect((await store.claim("order-in-flight")).status).toBe("in-flight");
      const forced = await cli(["forget", "order-in-flight", "--yes", ...argv], env);
      expect(forced.code).toBe(0);
    } else {
      // seen() cannot tell in flight from absent: a single id is forgotten as asked.
      expect(first.code).toBe(0);
    }
    expect((await store.claim("order-in-flight", 60_000)).status).toBe("claimed");
  });
});

describe("store failures and usage", () => {
  it("DynamoDB unreachable: exit 1, the error named, no credential printed", async () => {
    const port = await freePort();
    const result = await cli(["inspect", "x", "--store", "dynamodb", "--table", table, "--endpoint", `http://user:pa55word@127.0.0.1:${port}`]);
    expect(result.code).toBe(1);
    expect(result.out).toContain("error");
    expect(result.out).toContain("StoreUnavailableError");
    expect(result.out + result.err).not.toContain(AWS_SECRET);
    expect(result.out + result.err).not.toContain("pa55word");
  });

  it("forget's dry run with the store unreachable: exit 1 and the error shown, never a clean 'would forget'", async () => {
    const port = await freePort();
    const flags = ["--store", "dynamodb", "--table", table, "--endpoint", `http://127.0.0.1:${port}`];
    // Several ids (a dry run until --yes), and one id with --dry-run: neither could be looked up.
    const several = await cli(["forget", "a", "b", ...flags]);
    expect(several.code).toBe(1);
    expect(several.out).toContain("StoreUnavailableError");
    const dry = await cli(["forget", "a", "--dry-run", "--json", ...flags]);
    expect(dry.code).toBe(1);
    const [report] = dry.json().results as { id: string; forgotten: boolean; before?: string; error?: string }[];
    expect(report).toMatchObject({ id: "a", forgotten: false, before: "error" });
    expect(report?.error).toMatch(/^StoreUnavailableError: DynamoDBStore\.inspect failed/);
  });

  it("forget of one id the store could not look up (it may be in flight): a dry run that exits 1, unless --yes", async () => {
    // A store whose look-up fails while its delete works (mock: a throttled read, which Redis cannot produce on demand).
    const memory = new InMemoryStore();
    await memory.claim("busy", 60_000);
    const { store, forgotten } = recordingForgets(memory, async () => {
      throw new StoreUnavailableError("TestStore", "inspect", "throttled");
    });
    const run = async (argv: string[]) => {
      const out: string[] = [];
      const code = await main(argv, { out: (line) => out.push(line), err: (line) => out.push(line), readStdin: async () => "" }, { REDIS_URL: redisUrl }, async () => ({ store, label: "test", close: async () => undefined }));
      return { code, out: out.join("\n") };
    };
    const refused = await run(["forget", "busy"]);
    expect(refused.code).toBe(1);
    expect(refused.out).toContain("dry run");
    expect(forgotten).toEqual([]);
    expect((await run(["forget", "busy", "--yes"])).code).toBe(0);
    expect(forgotten).toEqual(["busy"]);
  });

  it("ids from stdin are taken verbatim: a space is part of an id, so forget never drops the trimmed one", async () => {
    const memory = new InMemoryStore();
    await memory.claim("order-x", 60_000);
    await memory.remember("order-x");
    const { store, forgotten } = recordingForgets(memory, (id) => memory.inspect(id));
    const out: string[] = [];
    const code = await main(
      ["forget", "-", "--yes", "--json"],
      { out: (line) => out.push(line), err: (line) => out.push(line), readStdin: async () => " order-x\r\norder-x \n\n\r\n" },
      { REDIS_URL: redisUrl },
      async () => ({ store, label: "test", close: async () => undefined }),
    );
    expect(code).toBe(0);
    expect(forgotten).toEqual([" order-x", "order-x "]);
    const results = (JSON.parse(out.join("\n")) as { results: { id: string; before: string }[] }).results;
    expect(results.map((result) => [result.id, result.before])).toEqual([
      [" order-x", "absent"],
      ["order-x ", "absent"],
    ]);
    expect(await memory.seen("order-x")).toBe(true);
  });

  it("a store option the store refuses (a namespace with ':', a bad table name) is a usage error: exit 2", async () => {
    const namespaced = await cli(["inspect", "x", "--namespace", "a:b"], { REDIS_URL: redisUrl });
    expect(namespaced.code).toBe(2);
    expect(namespaced.err).toContain("usage:");
    expect((await cli(["inspect", "x", "--store", "postgres", "--table", "bad table;"], { DATABASE_URL: "postgres://u@127.0.0.1:1/db" })).code).toBe(2);
  });

  it("Redis keys placed with hashTag or buckets: --hash-tag / --buckets find them; inspect and forget", async () => {
    for (const [placement, flags] of [
      [{ hashTag: true }, ["--hash-tag"]],
      [{ buckets: 8 }, ["--buckets", "8"]],
    ] as const) {
      const ns = namespace("placed");
      const consumer = new RedisStore({ client: ioredisScriptClient(ioredis), namespace: ns, ...placement });
      await consumer.remember("order-p", "fp-p");
      const env = { REDIS_URL: redisUrl };
      const found = await cli(["inspect", "order-p", "--namespace", ns, "--json", ...flags], env);
      expect((found.json().records as { status: string }[])[0]?.status, flags.join(" ")).toBe("done");
      expect((await cli(["forget", "order-p", "--namespace", ns, ...flags], env)).code).toBe(0);
      expect(await consumer.seen("order-p"), flags.join(" ")).toBe(false);
    }
    expect((await cli(["inspect", "x", "--buckets", "eight"], { REDIS_URL: redisUrl })).code).toBe(2);
    // Upstash takes no placement: a usage error naming the flag (before, the store refused an option the user never named).
    const upstashEnv = { UPSTASH_REDIS_REST_URL: upstashUrl, UPSTASH_REDIS_REST_TOKEN: upstashToken };
    for (const flags of [["--hash-tag"], ["--buckets", "16"], ["--previous-buckets", "4"]]) {
      const refused = await cli(["inspect", "x", ...flags], upstashEnv);
      expect(refused.code, flags.join(" ")).toBe(2);
      expect(refused.err, flags.join(" ")).toContain(`${flags[0]} is RedisStore's`);
      expect(refused.err).not.toContain(upstashToken);
    }
  });

  it("Upstash with a wrong token: exit 1, and neither token is printed", async () => {
    const wrong = "wrong-token-0123456789abcdef";
    const result = await cli(["inspect", "x"], { UPSTASH_REDIS_REST_URL: upstashUrl, UPSTASH_REDIS_REST_TOKEN: wrong });
    expect(result.code).toBe(1);
    expect(result.out + result.err).not.toContain(wrong);
    expect(result.out + result.err).not.toContain(upstashToken);
  });

  it("usage: help, unknown command, unknown flag, no store, no ids", async () => {
    expect((await cli([])).code).toBe(0);
    expect((await cli(["--help"])).out).toContain("usage:");
    const unknown = await cli(["purge", "x"]);
    expect(unknown.code).toBe(2);
    expect(unknown.err).toContain('unknown command "purge"');
    expect((await cli(["inspect", "x", "--bogus"])).code).toBe(2);
    const noStore = await cli(["inspect", "x"]);
    expect(noStore.code).toBe(2);
    expect(noStore.err).toContain("which store?");
    expect((await cli(["forget"], { REDIS_URL: redisUrl })).code).toBe(2);
    expect((await cli(["inspect", "-"], { REDIS_URL: redisUrl }, "\n\n")).code).toBe(2);
    const layout = await cli(["inspect", "x", "--layout", "babelqueue-ruby"], { REDIS_URL: redisUrl });
    expect(layout.code).toBe(2);
    expect(layout.err).toContain("--layout must be one of babelqueue-serverless, babelqueue-php, babelqueue-go");
    const namespaced = await cli(["inspect", "x", "--layout", "babelqueue-php", "--namespace", "orders"], { REDIS_URL: redisUrl });
    expect(namespaced.code).toBe(2);
    expect(namespaced.err).toContain("give --prefix, not --namespace");
    expect((await cli(["inspect", "x", "--store", "mongo"])).err).toContain("--store must be one of");
  });

  it("keeps a URL password it cannot decode or parse among the secrets to redact", () => {
    const secretsOf = (url: string) => parseCommandLine(["inspect", "x", "--url", url], {}).secrets;
    expect(secretsOf("postgres://u:p%zz@db.internal/app")).toContain("p%zz");
    expect(secretsOf("redis://u:s3cr@t@cache.internal:99999")).toContain("s3cr@t");
    expect(secretsOf("redis://u:pa%20ss@cache.internal")).toEqual(expect.arrayContaining(["pa%20ss", "pa ss"]));
    expect(secretsOf("redis://cache.internal")).toEqual([]);
  });

  it("redacts secrets and URL passwords; formats durations", () => {
    expect(redact("token abc123 at https://u:p4ss@host/x", ["abc123"])).toBe("token *** at https://***@host/x");
    expect([850, 42_000, 185_000, 7_800_000, 345_600_000 - 1000].map(formatDuration)).toEqual(["850ms", "42s", "3m 5s", "2h 10m", "3d 23h"]);
  });
});

describe("babelqueue-serverless on postgres", () => {
  it("inspect and forget through --store postgres --url", async () => {
    const postgresUrl = inject("postgresUrl");
    const pg = (await import("pg")).default;
    const pool = new pg.Pool({ connectionString: postgresUrl });
    pool.on("error", () => {}); // an idle connection the server drops must not end the test process
    try {
      await createPostgresTable(pool);
      const ns = namespace("pg");
      const store = new PostgresStore({ pool, namespace: ns });
      await seed(store);
      const result = await cli(["inspect", "order-done", "order-in-flight", "order-absent", "--json", "--namespace", ns], { DATABASE_URL: postgresUrl });
      expect(result.code).toBe(0);
      expect((result.json().records as { status: string }[]).map((r) => r.status)).toEqual(["done", "in-flight", "absent"]);
      expect((await cli(["forget", "order-done", "--namespace", ns, "--url", postgresUrl as string])).code).toBe(0);
      expect(await store.seen("order-done")).toBe(false);
    } finally {
      await pool.end();
    }
  });
});

describe("the executable", () => {
  it("runs as a process: ids from stdin, exit code, JSON on stdout", () => {
    const ns = namespace("process");
    const run = spawnSync("node_modules/.bin/tsx", ["bin/babelqueue-serverless.ts", "inspect", "-", "--json", "--namespace", ns], {
      input: "a\nb\n",
      env: { PATH: process.env.PATH, REDIS_URL: redisUrl },
      encoding: "utf8",
      timeout: 30_000,
    });
    expect(run.stderr).toBe("");
    expect(run.status).toBe(0);
    const records = (JSON.parse(run.stdout) as { records: { id: string }[] }).records;
    expect(records.map((r) => r.id)).toEqual(["a", "b"]);
    const usage = spawnSync("node_modules/.bin/tsx", ["bin/babelqueue-serverless.ts", "nope", "x"], { encoding: "utf8", timeout: 30_000, env: { PATH: process.env.PATH } });
    expect(usage.status).toBe(2);
  });
});
