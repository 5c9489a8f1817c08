/**
 * PostgresStore in the BabelQueue SDKs' layouts, on a real PostgreSQL (test/setup/postgres.ts):
 *
 * - the store contract suite and the transactional suite in `"babelqueue-php"` and `"babelqueue-go"`;
 * - cross-writer tests: rows written with exactly the SDKs' statements (sdk-statements.ts; and, when
 *   this machine has `php` with pdo_pgsql, by real PHP through PDO, php-pdo-store.php) are read right
 *   by the store, and the store's rows satisfy the SDKs' reads — committed ids shared both ways,
 *   in-flight claims parking each other (PHP), our leases invisible to Go;
 * - tables of the wrong layout (the Go SDK's `babelqueue_idempotency` under this package's own
 *   layout, a PHP table without this store's columns, a Go table without its lease table, the
 *   former default name) fail with an error that names the fix, and `createIdempotencyTable` never
 *   alters them;
 * - the CLI's `inspect` / `forget` per layout.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { main } from "../../../cli/main.js";
import { POSTGRES_LAYOUT_NAMES } from "../../../cli/config.js";
import { BatchEngine } from "../../../src/engine/index.js";
import { FenceLostError, InvalidOptionError, StoreUnavailableError } from "../../../src/errors.js";
import {
  DEFAULT_POSTGRES_TABLE,
  DEFAULT_POSTGRES_TABLES,
  type PostgresLayout,
  PostgresStore,
  type PostgresStoreOptions,
  createIdempotencyTable,
  idempotencyTableSql,
} from "../../../entry/postgres.js";
import { POSTGRES_LAYOUTS } from "../../../stores/postgres/layouts.js";
import { renameSql } from "../../../stores/postgres/table-shape.js";
import { testStore } from "../contract.js";
import { GoPostgresStore, PhpPdoStore, goDdl, goWrap, phpClaimingDispatch, phpDdl } from "./sdk-statements.js";
import { createSuiteTables, testPostgresTransactions } from "./transactional-suite.js";

const url = inject("postgresUrl");
const pool = new pg.Pool({ connectionString: url, max: 30 });
pool.on("error", () => {}); // an idle connection the server drops must not end the test process
const single = new pg.Client({ connectionString: url });
single.on("error", () => {});

beforeAll(async () => {
  await single.connect();
  await createSuiteTables(pool);
});
afterAll(async () => {
  await single.end();
  await pool.end();
});

type SdkLayout = Exclude<PostgresLayout, "babelqueue-serverless">;
const SDK_LAYOUTS: readonly SdkLayout[] = ["babelqueue-php", "babelqueue-go"];

let tables = 0;
const tableByNamespace = new Map<string, string>();
/** A table of its own for every namespace the contract suite asks for (the SDKs separate consumers by table). */
function tableFor(layout: SdkLayout, namespace?: string): string {
  const known = namespace === undefined ? undefined : tableByNamespace.get(`${layout}/${namespace}`);
  if (known !== undefined) return known;
  tables += 1;
  const table = `${layout === "babelqueue-php" ? "php" : "go"}_t${tables}_${Date.now().toString(36)}`;
  if (namespace !== undefined) tableByNamespace.set(`${layout}/${namespace}`, table);
  return table;
}

async function openLayout(layout: SdkLayout, options: Partial<PostgresStoreOptions<pg.PoolClient>> = {}, namespace?: string) {
  const table = options.table ?? tableFor(layout, namespace);
  await createIdempotencyTable(pool, { layout, table });
  return new PostgresStore<pg.PoolClient>({ ...(options.client === undefined ? { pool } : {}), layout, table, ...options });
}

for (const layout of SDK_LAYOUTS) {
  testStore(`PostgresStore (layout ${layout})`, {
    claims: true,
    clock: "real",
    raceRounds: 5,
    keepsForever: layout === "babelqueue-php",
    make: ({ namespace, leaseMs, retentionMs }) =>
      openLayout(layout, { leaseMs, ...(layout === "babelqueue-php" ? {} : { retentionMs }) }, namespace),
  });

  testPostgresTransactions(`PostgresStore (layout ${layout})`, { pool, single, open: (options) => openLayout(layout, options) });
}

const body = (id: string) => ({ job: "orders.charge", trace_id: `t-${id}`, data: { id }, meta: { id, schema_version: 1 }, attempts: 0 });

describe("layout babelqueue-php: the PHP SDK's PdoStore and this store on one table", () => {
  const fresh = async () => {
    const table = tableFor("babelqueue-php");
    await pool.query(phpDdl(table)); // created by the PHP fleet, with PHP's own DDL
    await createIdempotencyTable(pool, { layout: "babelqueue-php", table });
    return { table, php: new PhpPdoStore(pool, table), ours: new PostgresStore({ pool, layout: "babelqueue-php", table }) };
  };
  const rowOf = async (table: string, id: string) => (await pool.query(`SELECT message_id, state, expires_at FROM ${table} WHERE message_id = $1`, [id])).rows[0];

  it("an id the PHP SDK committed is a duplicate here: the handler does not run, the delivery is acked", async () => {
    const { php, ours } = await fresh();
    expect(await phpClaimingDispatch(php, "order-1", () => undefined)).toBe("ran");
    expect(await ours.claim("order-1")).toEqual({ status: "done" });
    let runs = 0;
    const [result] = await new BatchEngine(ours, () => void (runs += 1)).process([{ body: body("order-1"), context: {} }]);
    expect(result).toMatchObject({ status: "duplicate", ack: true, key: "order-1" });
    expect(runs).toBe(0);
  });

  it("an id this store committed is skipped by the PHP SDK, and the row is exactly PHP's committed row", async () => {
    const { table, php, ours } = await fresh();
    const [result] = await new BatchEngine(ours, () => undefined).process([{ body: body("order-2"), context: {} }]);
    expect(result).toMatchObject({ status: "ran", ack: true });
    expect(await rowOf(table, "order-2")).toEqual({ message_id: "order-2", state: "seen", expires_at: null });
    expect(await php.seen("order-2")).toBe(true);
    let runs = 0;
    expect(await phpClaimingDispatch(php, "order-2", () => void (runs += 1))).toBe("skipped");
    expect(runs).toBe(0);
  });

  it("a PHP claim in flight parks this store's delivery until PHP's expires_at has passed, by PHP's strict rule", async () => {
    const { php, ours } = await fresh();
    expect(await php.claim("order-3", 120)).toBe(true);
    const held = await ours.claim("order-3");
    expect(held.status).toBe("in-flight");
    if (held.status === "in-flight") {
      expect(held.retryAfterMs).toBeGreaterThan(119_000 - 2_000);
      expect(held.retryAfterMs).toBeLessThanOrEqual(121_000);
    }
    const [result] = await new BatchEngine(ours, () => undefined).process([{ body: body("order-3"), context: {} }]);
    expect(result).toMatchObject({ status: "in-flight", ack: false });
    // PHP steals only when expires_at < time(): expires_at = now is still live, now - 1 is over.
    const nowS = Number((await pool.query("SELECT floor(extract(epoch FROM clock_timestamp()))::bigint AS s")).rows[0].s);
    await pool.query(`UPDATE ${php.table} SET expires_at = $1 WHERE message_id = 'order-3'`, [nowS + 1]);
    expect((await ours.claim("order-3")).status).toBe("in-flight");
    await pool.query(`UPDATE ${php.table} SET expires_at = $1 WHERE message_id = 'order-3'`, [nowS - 1]);
    expect((await ours.claim("order-3")).status).toBe("claimed");
  });

  it("this store's claim in flight parks the PHP SDK's delivery (claim lost, not seen → ClaimParkedException)", async () => {
    const { table, php, ours } = await fresh();
    const claim = await ours.claim("order-4", 30_000, "fp-4");
    expect(claim.status).toBe("claimed");
    const row = await rowOf(table, "order-4");
    expect(row.state).toBe("claimed");
    const nowS = Math.floor(Date.now() / 1000);
    expect(Number(row.expires_at)).toBeGreaterThanOrEqual(nowS + 29);
    expect(Number(row.expires_at)).toBeLessThanOrEqual(nowS + 32);
    let runs = 0;
    expect(await phpClaimingDispatch(php, "order-4", () => void (runs += 1))).toBe("parked");
    expect(runs).toBe(0);
    await ours.remember("order-4", "fp-4");
    expect(await phpClaimingDispatch(php, "order-4", () => void (runs += 1))).toBe("skipped");
    expect(await ours.claim("order-4")).toEqual({ status: "done", fingerprint: "fp-4" });
  });

  it("a claim the PHP SDK took over is PHP's: our stale token neither releases nor commits it, and PHP's commit carries no fingerprint of ours", async () => {
    const { table, php, ours } = await fresh();
    const stale = await ours.claim("order-5", 100, "fp-ours");
    if (stale.status !== "claimed") throw new Error("expected claimed");
    // Our lease is over; PHP's clock says our expires_at has passed too (PHP runs 5 s ahead here).
    await new Promise((resolve) => setTimeout(resolve, 150));
    const phpAhead = new PhpPdoStore(pool, table, () => Math.floor(Date.now() / 1000) + 5);
    expect(await phpAhead.claim("order-5", 600)).toBe(true);
    expect(await ours.release("order-5", stale.token)).toBe(false);
    expect((await rowOf(table, "order-5")).state).toBe("claimed");
    const held = await ours.claim("order-5", undefined, "fp-other");
    expect(held.status).toBe("in-flight");
    expect(held).not.toHaveProperty("fingerprint");
    await expect(ours.transact({ id: "order-5", token: stale.token }, async () => {})).rejects.toBeInstanceOf(FenceLostError);
    await php.remember("order-5");
    expect(await ours.claim("order-5")).toEqual({ status: "done" });
    expect(await ours.recallMany(["order-5"])).toEqual([{ seen: true }]);
  });

  it("an expired PHP claim is taken over by this store, and PHP's release (delete of a claimed row) is PHP's own, unfenced", async () => {
    const { table, php, ours } = await fresh();
    const past = new PhpPdoStore(pool, table, () => Math.floor(Date.now() / 1000) - 100);
    expect(await past.claim("order-6", 10)).toBe(true); // expired 90 s ago
    const claim = await ours.claim("order-6");
    expect(claim.status).toBe("claimed");
    expect(await php.claim("order-6", 60)).toBe(false); // ours is live for PHP too
    await ours.remember("order-6");
    await php.release("order-6"); // deletes only a claimed row
    expect(await php.seen("order-6")).toBe(true);
    await php.forget("order-6");
    expect((await ours.claim("order-6")).status).toBe("claimed");
  });

  it("transactional mode: a PHP commit landing while our transaction runs makes the fence fail, and our writes roll back", async () => {
    const { php, ours } = await fresh();
    const claim = await ours.claim("order-7");
    if (claim.status !== "claimed") throw new Error("expected claimed");
    const failure = await ours
      .transact({ id: "order-7", token: claim.token }, async (tx) => {
        await tx.query("INSERT INTO effects (message_id, note) VALUES ('order-7', 'ours')");
        await php.remember("order-7"); // PHP's Idempotent::wrap (no claim) commits meanwhile
      })
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(FenceLostError);
    expect((await pool.query("SELECT count(*)::int AS n FROM effects WHERE message_id = 'order-7'")).rows[0].n).toBe(0);
    expect(await ours.claim("order-7")).toEqual({ status: "done" });
  });

  it("ids a PHP row cannot hold are hashed, and not shared: past 255 characters (PHP itself cannot store them), NUL, the hashed form", async () => {
    const { table, php, ours } = await fresh();
    const long = "é".repeat(256);
    expect(await ours.key("é".repeat(255))).toBe("é".repeat(255));
    expect(await ours.key(long)).toMatch(/^#[A-Za-z0-9_-]{43}$/);
    expect(await ours.key("a\u0000b")).toMatch(/^#[A-Za-z0-9_-]{43}$/);
    const hashedForm = `#${"A".repeat(43)}`;
    expect(await ours.key(hashedForm)).toMatch(/^#[A-Za-z0-9_-]{43}$/);
    expect(await ours.key(hashedForm)).not.toBe(hashedForm);
    await ours.remember(long);
    expect(await ours.seen(long)).toBe(true);
    await expect(php.claim(long)).rejects.toMatchObject({ code: "22001" }); // value too long for varchar(255)
    expect((await pool.query(`SELECT count(*)::int AS n FROM ${table}`)).rows[0].n).toBe(1);
    // An id that merely starts with '#' is kept as PHP keeps it: shared both ways.
    expect(await ours.key("#order-42")).toBe("#order-42");
    await php.remember("#order-42");
    expect(await ours.seen("#order-42")).toBe(true);
  });

  it("keeps PHP's three columns as PHP's DDL made them, adds only nullable ones, and creates nothing when they are there", async () => {
    const { table } = await fresh();
    const { rows } = await pool.query(
      "SELECT column_name, data_type, character_maximum_length, is_nullable FROM information_schema.columns WHERE table_name = $1 ORDER BY ordinal_position",
      [table],
    );
    expect(rows).toEqual([
      { column_name: "message_id", data_type: "character varying", character_maximum_length: 255, is_nullable: "NO" },
      { column_name: "state", data_type: "character varying", character_maximum_length: 16, is_nullable: "NO" },
      { column_name: "expires_at", data_type: "bigint", character_maximum_length: null, is_nullable: "YES" },
      { column_name: "bqs_token", data_type: "text", character_maximum_length: null, is_nullable: "YES" },
      { column_name: "bqs_fingerprint", data_type: "text", character_maximum_length: null, is_nullable: "YES" },
      { column_name: "bqs_lease_until", data_type: "timestamp with time zone", character_maximum_length: null, is_nullable: "YES" },
    ]);
    expect(idempotencyTableSql(undefined, "babelqueue-php")).toContain("CREATE TABLE IF NOT EXISTS \"bq_idempotency\"");
  });

  const phpBinary = spawnSync("php", ["-r", "echo extension_loaded('pdo_pgsql') ? 'yes' : 'no';"], { encoding: "utf8" });
  const hasPhp = phpBinary.status === 0 && phpBinary.stdout === "yes";
  (hasPhp ? it : it.skip)("real PHP through PDO (pdo_pgsql): PHP's commit is done here, ours is skipped there, each side's claim parks the other", async () => {
    const { table, ours } = await fresh();
    const { hostname, port } = new URL(url);
    const script = fileURLToPath(new URL("./php-pdo-store.php", import.meta.url));
    const php = (op: string, id: string, ttl = "3600") => {
      const run = spawnSync("php", [script, hostname, port, table, op, id, ttl], { encoding: "utf8", timeout: 20_000 });
      if (run.status !== 0) throw new Error(`php ${op} failed: ${run.stderr}`);
      return JSON.parse(run.stdout) as unknown;
    };
    expect(php("dispatch", "p-1")).toBe("ran");
    expect(await ours.claim("p-1")).toEqual({ status: "done" });
    await ours.remember("p-2");
    expect(php("seen", "p-2")).toBe(true);
    expect(php("dispatch", "p-2")).toBe("skipped");
    expect(php("claim", "p-3", "60")).toBe(true);
    expect((await ours.claim("p-3")).status).toBe("in-flight");
    expect((await ours.claim("p-4")).status).toBe("claimed");
    expect(php("dispatch", "p-4")).toBe("parked");
    expect(php("claim", "p-4")).toBe(false);
  });
});

describe("layout babelqueue-go: the Go SDK's store and this store on one table", () => {
  const fresh = async (retentionMs?: number) => {
    const table = tableFor("babelqueue-go");
    await pool.query(goDdl(table)); // created by the Go fleet (Migrate)
    await createIdempotencyTable(pool, { layout: "babelqueue-go", table });
    const ours = new PostgresStore({ pool, layout: "babelqueue-go", table, ...(retentionMs === undefined ? {} : { retentionMs }) });
    return { table, go: new GoPostgresStore(pool, table), ours };
  };
  const rowOf = async (table: string, id: string) =>
    (await pool.query(`SELECT message_id, created_at, expires_at, extract(epoch FROM expires_at - now()) * 1000 AS left_ms FROM ${table} WHERE message_id = $1`, [id])).rows[0];

  it("an id the Go SDK remembered is a duplicate here", async () => {
    const { go, ours } = await fresh();
    expect(await goWrap(go, "job-1", () => undefined)).toBe("ran");
    expect(await ours.claim("job-1")).toEqual({ status: "done" });
    const [result] = await new BatchEngine(ours, () => undefined).process([{ body: body("job-1"), context: {} }]);
    expect(result).toMatchObject({ status: "duplicate", ack: true });
  });

  it("this store's commit is exactly Go's row (created_at, expires_at = the retention's end), and Go's Seen skips it", async () => {
    const { table, go, ours } = await fresh(3_600_000);
    const [result] = await new BatchEngine(ours, () => undefined).process([{ body: body("job-2"), context: {} }]);
    expect(result).toMatchObject({ status: "ran", ack: true });
    const row = await rowOf(table, "job-2");
    expect(row.created_at).toBeInstanceOf(Date);
    expect(Number(row.left_ms)).toBeGreaterThan(3_500_000);
    expect(Number(row.left_ms)).toBeLessThanOrEqual(3_600_000);
    expect(await go.seen("job-2")).toBe(true);
    let runs = 0;
    expect(await goWrap(go, "job-2", () => void (runs += 1))).toBe("skipped");
    expect(runs).toBe(0);
    const forever = new PostgresStore({ pool, layout: "babelqueue-go", table, retentionMs: Number.POSITIVE_INFINITY });
    await forever.remember("job-2b");
    expect((await rowOf(table, "job-2b")).expires_at).toBeNull();
    expect(await forever.inspect("job-2b")).toEqual({ status: "done", retentionLeftMs: Number.POSITIVE_INFINITY });
    // Without retentionMs: Go's default, no expiry (a 4-day row would run again on a Go worker on day 5).
    const byDefault = new PostgresStore({ pool, layout: "babelqueue-go", table });
    await byDefault.remember("job-2c");
    expect((await rowOf(table, "job-2c")).expires_at).toBeNull();
  });

  it("our in-flight claim is nowhere Go looks: Go's Seen is false and its table has no row; the lease sits in <table>_lease", async () => {
    const { table, go, ours } = await fresh();
    expect((await ours.claim("job-3", 30_000, "fp-3")).status).toBe("claimed");
    expect(await go.seen("job-3")).toBe(false);
    expect(await rowOf(table, "job-3")).toBeUndefined();
    const lease = (await pool.query(`SELECT token IS NOT NULL AS held, fingerprint FROM ${table}_lease WHERE message_id = 'job-3'`)).rows[0];
    expect(lease).toEqual({ held: true, fingerprint: "fp-3" });
    expect((await ours.claim("job-3")).status).toBe("in-flight");
    await ours.remember("job-3");
    expect(await go.seen("job-3")).toBe(true);
    expect(await ours.claim("job-3")).toEqual({ status: "done", fingerprint: "fp-3" });
  });

  it("a Go row past its TTL is claimable; Go's Forget + Remember leaves our old fingerprint unanswered", async () => {
    const { table, go, ours } = await fresh();
    const goTtl = new GoPostgresStore(pool, table, 50);
    await goTtl.remember("job-4");
    await new Promise((resolve) => setTimeout(resolve, 120));
    expect(await go.seen("job-4")).toBe(false);
    expect((await ours.claim("job-4", undefined, "fp-4")).status).toBe("claimed");
    await ours.remember("job-4");
    expect(await ours.claim("job-4")).toEqual({ status: "done", fingerprint: "fp-4" });
    await go.forget("job-4");
    expect((await ours.claim("job-4")).status).toBe("claimed");
    await go.remember("job-4"); // Go commits the id itself; our lease is still there
    expect(await ours.claim("job-4")).toEqual({ status: "done" });
    expect(await ours.recallMany(["job-4"])).toEqual([{ seen: true }]);
  });

  it("committing an id Go already committed leaves Go's row as it is", async () => {
    const { table, go, ours } = await fresh();
    await go.remember("job-5");
    const before = await rowOf(table, "job-5");
    await ours.remember("job-5", "fp-5");
    const after = await rowOf(table, "job-5");
    expect(after.created_at).toEqual(before.created_at);
    expect(after.expires_at).toEqual(before.expires_at);
  });

  it("transactional mode: a Go commit landing while our transaction runs makes the fence fail, and our writes roll back", async () => {
    const { go, ours } = await fresh();
    const claim = await ours.claim("job-6");
    if (claim.status !== "claimed") throw new Error("expected claimed");
    const failure = await ours
      .transact({ id: "job-6", token: claim.token }, async (tx) => {
        await tx.query("INSERT INTO effects (message_id, note) VALUES ('job-6', 'ours')");
        await go.remember("job-6");
      })
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(FenceLostError);
    expect((await pool.query("SELECT count(*)::int AS n FROM effects WHERE message_id = 'job-6'")).rows[0].n).toBe(0);
    expect(await ours.claim("job-6")).toEqual({ status: "done" });
  });

  it("ids past 2000 bytes are hashed (not shared); the Go SDK itself stores them up to PostgreSQL's btree limit", async () => {
    const { go, ours } = await fresh();
    expect(await ours.key("x".repeat(2000))).toBe("x".repeat(2000));
    expect(await ours.key("x".repeat(2001))).toMatch(/^#[A-Za-z0-9_-]{43}$/);
    await go.remember("y".repeat(2000));
    expect(await ours.claim("y".repeat(2000))).toEqual({ status: "done" });
  });
});

describe("a mixed-case table name in an SDK layout is the SDK's table (the SDKs' SQL leaves it unquoted: folded to lower case)", () => {
  it("Go WithTable(\"Go_Mixed_…\") and PHP's table option: one shared table per fleet, not a second one beside it", async () => {
    const stamp = Date.now().toString(36);
    // Go: the fleet's Migrate made go_mixed_<stamp>; its Remember committed job-m1.
    const goName = `Go_Mixed_${stamp}`;
    await pool.query(goDdl(goName));
    const go = new GoPostgresStore(pool, goName);
    expect(await goWrap(go, "job-m1", () => undefined)).toBe("ran");
    await createIdempotencyTable(pool, { layout: "babelqueue-go", table: goName });
    const ours = new PostgresStore({ pool, layout: "babelqueue-go", table: goName });
    expect(ours.table).toBe(goName.toLowerCase());
    expect(await ours.claim("job-m1")).toEqual({ status: "done" });
    await ours.remember("job-m2");
    expect(await go.seen("job-m2")).toBe(true);
    // PHP: the same, with PHP's DDL and commit.
    const phpName = `Php_Mixed_${stamp}`;
    await pool.query(phpDdl(phpName));
    const php = new PhpPdoStore(pool, phpName);
    expect(await phpClaimingDispatch(php, "order-m1", () => undefined)).toBe("ran");
    await createIdempotencyTable(pool, { layout: "babelqueue-php", table: phpName });
    expect(await new PostgresStore({ pool, layout: "babelqueue-php", table: phpName }).claim("order-m1")).toMatchObject({ status: "done" });
    // No quoted mixed-case twin was created for either.
    const { rows } = await pool.query("SELECT relname FROM pg_class WHERE relname = ANY($1)", [[goName, phpName, `${goName}_lease`]]);
    expect(rows).toEqual([]);
    // This package's own layout keeps a quoted name as given.
    expect(new PostgresStore({ pool, table: "Own_Mixed" }).table).toBe("Own_Mixed");
  });
});

describe("tables of the wrong layout: a clear error naming the fix, and no DDL on them", () => {
  /** A database of its own, for the default table names. */
  const database = async (name: string) => {
    await pool.query(`DROP DATABASE IF EXISTS ${name}`);
    await pool.query(`CREATE DATABASE ${name}`);
    const other = new pg.Pool({ connectionString: url.replace(/\/postgres$/, `/${name}`), max: 4 });
    other.on("error", () => {});
    return other;
  };

  it("the Go fleet's babelqueue_idempotency under this package's own layout: every statement fails as StoreUnavailableError naming layout babelqueue-go; createIdempotencyTable refuses", async () => {
    const db = await database("bq_clash_go");
    try {
      await db.query(goDdl("babelqueue_idempotency"));
      await new GoPostgresStore(db).remember("go-done");
      const clash = new PostgresStore({ pool: db, table: "babelqueue_idempotency" });
      const failure = await clash.claim("x").catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(StoreUnavailableError);
      expect((failure as Error).message).toContain(`table "babelqueue_idempotency" is the BabelQueue Go SDK's table (message_id, created_at, expires_at)`);
      expect((failure as Error).message).toContain(`pass layout: "babelqueue-go"`);
      expect((failure as Error).message).toContain(`"${DEFAULT_POSTGRES_TABLE}"`);
      await expect(new BatchEngine(clash, () => undefined).process([{ body: body("x"), context: {} }])).resolves.toMatchObject([{ status: "failed", ack: false }]);
      const refused = await createIdempotencyTable(db, { table: "babelqueue_idempotency" }).catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(InvalidOptionError);
      expect((await db.query("SELECT count(*)::int AS n FROM information_schema.columns WHERE table_name = 'babelqueue_idempotency'")).rows[0].n).toBe(3);
      // The defaults now coexist with it: ours in babelqueue_serverless_idempotency, shared through layout babelqueue-go.
      await createIdempotencyTable(db);
      await new PostgresStore({ pool: db }).remember("ours-only");
      await createIdempotencyTable(db, { layout: "babelqueue-go" });
      expect(await new PostgresStore({ pool: db, layout: "babelqueue-go" }).claim("go-done")).toEqual({ status: "done" });
      expect(await new GoPostgresStore(db).seen("ours-only")).toBe(false);
    } finally {
      await db.end();
    }
  });

  it("a table created under the former default name: the store and createIdempotencyTable say to rename it; after the rename every id is still done", async () => {
    const db = await database("bq_former");
    try {
      await db.query(idempotencyTableSql("babelqueue_idempotency"));
      const before = new PostgresStore({ pool: db, table: "babelqueue_idempotency", namespace: "orders" });
      await before.rememberMany(["a", "b"]);
      const upgraded = new PostgresStore({ pool: db, namespace: "orders" });
      const failure = await upgraded.claim("a").catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(StoreUnavailableError);
      expect((failure as Error).message).toContain("created under the default name of versions before 0.2");
      expect((failure as Error).message).toContain(renameSql());
      const refused = await createIdempotencyTable(db).catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(InvalidOptionError);
      expect((await db.query("SELECT to_regclass('babelqueue_serverless_idempotency') IS NULL AS missing")).rows[0].missing).toBe(true);
      await db.query(renameSql());
      await createIdempotencyTable(db);
      expect(await upgraded.claimMany(["a", "b", "c"])).toMatchObject([{ status: "done" }, { status: "done" }, { status: "claimed" }]);
      expect((await db.query("SELECT to_regclass('babelqueue_serverless_idempotency_expires_at_idx') IS NOT NULL AS renamed")).rows[0].renamed).toBe(true);
    } finally {
      await db.end();
    }
  });

  it("a PHP table without this store's columns, a Go table without its lease table, a PHP store on a Go table", async () => {
    const php = tableFor("babelqueue-php");
    await pool.query(phpDdl(php));
    const phpFailure = await new PostgresStore({ pool, layout: "babelqueue-php", table: php }).claim("x").catch((error: unknown) => error);
    expect(phpFailure).toBeInstanceOf(StoreUnavailableError);
    expect((phpFailure as Error).message).toContain("without this store's columns bqs_token, bqs_fingerprint, bqs_lease_until");
    const go = tableFor("babelqueue-go");
    await pool.query(goDdl(go));
    const goFailure = await new PostgresStore({ pool, layout: "babelqueue-go", table: go }).claim("x").catch((error: unknown) => error);
    expect((goFailure as Error).message).toContain(`the lease table "${go}_lease"`);
    const wrong = await new PostgresStore({ pool, layout: "babelqueue-php", table: go }).seen("x").catch((error: unknown) => error);
    expect((wrong as Error).message).toContain(`pass layout: "babelqueue-go"`);
    await expect(createIdempotencyTable(pool, { layout: "babelqueue-php", table: go })).rejects.toBeInstanceOf(InvalidOptionError);
    expect((await pool.query("SELECT count(*)::int AS n FROM information_schema.columns WHERE table_name = $1", [go])).rows[0].n).toBe(3);
  });
});

describe("layout options", () => {
  it("checks them", async () => {
    expect(POSTGRES_LAYOUT_NAMES).toEqual(POSTGRES_LAYOUTS);
    expect(DEFAULT_POSTGRES_TABLES).toEqual({ "babelqueue-serverless": "babelqueue_serverless_idempotency", "babelqueue-php": "bq_idempotency", "babelqueue-go": "babelqueue_idempotency" });
    expect(new PostgresStore({ pool, layout: "babelqueue-php" }).table).toBe("bq_idempotency");
    expect(new PostgresStore({ pool, layout: "babelqueue-php" }).retentionMs).toBe(Number.POSITIVE_INFINITY);
    expect(new PostgresStore({ pool, layout: "babelqueue-go" }).table).toBe("babelqueue_idempotency");
    // Go keeps an id for good without WithTTL: so does this layout unless told otherwise.
    expect(new PostgresStore({ pool, layout: "babelqueue-go" }).retentionMs).toBe(Number.POSITIVE_INFINITY);
    expect(new PostgresStore({ pool, layout: "babelqueue-go", retentionMs: 60_000 }).retentionMs).toBe(60_000);
    expect(new PostgresStore({ pool }).retentionMs).toBe(4 * 24 * 3_600_000);
    expect(new PostgresStore({ pool }).table).toBe("babelqueue_serverless_idempotency");
    expect(() => new PostgresStore({ pool, layout: "babelqueue-php", namespace: "orders" })).toThrow(/namespace.*must be ""/);
    expect(() => new PostgresStore({ pool, layout: "babelqueue-php", retentionMs: 60_000 })).toThrow(/retentionMs.*PHP SDK keeps a seen id forever/);
    expect(() => new PostgresStore({ pool, retentionMs: Number.POSITIVE_INFINITY })).toThrow(InvalidOptionError);
    expect(() => new PostgresStore({ pool, layout: "laravel" as PostgresLayout })).toThrow(/layout/);
    expect(() => new PostgresStore({ pool, layout: "babelqueue-go", table: "g".repeat(60) })).toThrow(/lease table/);
    await expect(createIdempotencyTable(pool, { layout: "babelqueue-go", tabel: "x" } as never)).rejects.toThrow(/tabel/);
  });
});

describe("the CLI per layout", () => {
  async function cli(argv: string[]) {
    const out: string[] = [];
    const err: string[] = [];
    const code = await main(argv, { out: (line) => out.push(line), err: (line) => err.push(line), readStdin: async () => "" }, { DATABASE_URL: url });
    return { code, out: out.join("\n"), err: err.join("\n") };
  }

  it("inspects and forgets PHP rows (--layout babelqueue-php --table), forever shown as such", async () => {
    const table = tableFor("babelqueue-php");
    await createIdempotencyTable(pool, { layout: "babelqueue-php", table });
    const php = new PhpPdoStore(pool, table);
    await php.remember("cli-done");
    await php.claim("cli-held", 600);
    const shown = await cli(["inspect", "cli-done", "cli-held", "cli-absent", "--layout", "babelqueue-php", "--table", table]);
    expect(shown.code).toBe(0);
    expect(shown.out).toContain(`table ${table} (layout babelqueue-php)`);
    expect(shown.out).toMatch(/cli-done\s+done\s+-\s+forever/);
    expect(shown.out).toMatch(/cli-held\s+in-flight\s+(9|10)m/);
    expect(shown.out).toMatch(/cli-absent\s+absent/);
    expect((await cli(["forget", "cli-done", "--layout", "babelqueue-php", "--table", table])).code).toBe(0);
    expect(await php.seen("cli-done")).toBe(false);
    // The store refuses the option: a usage mistake (exit 2), its reason shown.
    const refused = await cli(["inspect", "x", "--layout", "babelqueue-php", "--namespace", "orders"]);
    expect(refused.code).toBe(2);
    expect(refused.err).toContain('must be "" in the "babelqueue-php" layout');
    expect((await cli(["inspect", "x", "--layout", "mysql"])).code).toBe(2);
  });

  it("inspects and forgets Go rows (--layout babelqueue-go)", async () => {
    const table = tableFor("babelqueue-go");
    await createIdempotencyTable(pool, { layout: "babelqueue-go", table });
    const go = new GoPostgresStore(pool, table);
    await go.remember("cli-go");
    const shown = await cli(["inspect", "cli-go", "--layout", "babelqueue-go", "--table", table]);
    expect(shown.out).toMatch(/cli-go\s+done\s+-\s+forever/);
    expect((await cli(["forget", "cli-go", "--layout", "babelqueue-go", "--table", table])).code).toBe(0);
    expect(await go.seen("cli-go")).toBe(false);
  });
});
