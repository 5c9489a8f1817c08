/**
 * PostgresStore on a real PostgreSQL 15 (started by test/setup/postgres.ts): the shared store
 * contract suite over a pg.Pool and over one pg.Client, then what only this store has — one
 * statement per batch step, fingerprints, inspect, the database's clock, hashed keys — and
 * transactional mode: the handler's rows and the commit land together or not at all.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { InvalidOptionError, StoreUnavailableError } from "../../../src/errors.js";
import { DEFAULT_POSTGRES_TABLE, PostgresStore, type PostgresStoreOptions, createIdempotencyTable, idempotencyTableSql } from "../../../entry/postgres.js";
import { testStore } from "../contract.js";
import { countingPool } from "./support.js";
import { createSuiteTables, testPostgresTransactions } from "./transactional-suite.js";

const url = inject("postgresUrl");
const pool = new pg.Pool({ connectionString: url, max: 30 });
pool.on("error", () => {}); // an idle connection killed by a test (pg asks every pool user for this listener)
const single = new pg.Client({ connectionString: url });
single.on("error", () => {}); // a connection the server drops must not end the test process

beforeAll(async () => {
  await single.connect();
  await createIdempotencyTable(pool);
  await createIdempotencyTable(pool); // idempotent
  await createSuiteTables(pool);
});
afterAll(async () => {
  await single.end();
  await pool.end();
});

let counter = 0;
const namespace = () => {
  counter += 1;
  return `pg-${Date.now().toString(36)}-${counter}`;
};

function store(options: Partial<PostgresStoreOptions<pg.PoolClient>> = {}): PostgresStore<pg.PoolClient> {
  return new PostgresStore<pg.PoolClient>({ pool, namespace: namespace(), ...options });
}

testStore("PostgresStore (pg.Pool)", {
  claims: true,
  clock: "real",
  raceRounds: 10,
  make: ({ namespace, leaseMs, retentionMs }) => new PostgresStore({ pool, namespace, leaseMs, retentionMs }),
});

testStore("PostgresStore (one pg.Client)", {
  claims: true,
  clock: "real",
  make: ({ namespace, leaseMs, retentionMs }) => new PostgresStore({ client: single, namespace, leaseMs, retentionMs }),
});

describe("PostgresStore transact: a BEGIN that failed on the client's side (mock: pg's query_timeout, which fires while the BEGIN still runs)", () => {
  it("leaves no connection inside an open transaction for the next caller", async () => {
    const one = new pg.Pool({ connectionString: url, max: 1 });
    one.on("error", () => {});
    let timedOut = 0;
    // The BEGIN reaches the server; its caller is failed at once, as pg does when query_timeout fires.
    const timingOut = {
      query: (text: string, values?: unknown[]) => one.query(text, values),
      connect: async () => {
        const connection = await one.connect();
        return new Proxy(connection, {
          get(target, property) {
            if (property === "query") {
              return (text: unknown, values?: unknown[]) => {
                if (typeof text === "string" && text.startsWith("BEGIN") && timedOut === 0) {
                  timedOut += 1;
                  void target.query(text).catch(() => undefined);
                  return Promise.reject(new Error("Query read timeout"));
                }
                return target.query(text as string, values);
              };
            }
            const value = Reflect.get(target, property, target);
            return typeof value === "function" ? value.bind(target) : value;
          },
        });
      },
    };
    try {
      const store = new PostgresStore({ pool: timingOut as never, namespace: `begin-timeout-${Date.now().toString(36)}` });
      const claim = await store.claim("begin-1");
      if (claim.status !== "claimed") throw new Error("expected claimed");
      const failure = await store.transact({ id: "begin-1", token: claim.token }, async () => undefined).catch((error: unknown) => error);
      expect(timedOut).toBe(1);
      expect(failure).toBeInstanceOf(StoreUnavailableError);
      // The pool's one connection (or its replacement) is outside any transaction: SAVEPOINT refuses.
      await expect(one.query("SAVEPOINT probe")).rejects.toThrow(/transaction block/);
      // And the next claim commits for real: another connection sees it.
      await store.remember("begin-2");
      expect(await new PostgresStore({ pool, namespace: store.namespace }).seen("begin-2")).toBe(true);
    } finally {
      await one.end();
    }
  });
});

describe("PostgresStore transact on one client: a BEGIN timed out on the client's side, and its ROLLBACK dropped too (mock: pg's query_timeout)", () => {
  it("the ROLLBACK is owed to the next turn: nothing later runs inside the BEGIN that landed", async () => {
    const one = new pg.Client({ connectionString: url });
    one.on("error", () => {});
    await one.connect();
    let faults = 0;
    // BEGIN reaches the server but its caller fails at once; the ROLLBACK queued behind it times out unsent.
    const timingOut = new Proxy(one, {
      get(target, property) {
        if (property === "query") {
          return (text: unknown, values?: unknown[]) => {
            if (typeof text === "string" && text.startsWith("BEGIN") && faults === 0) {
              faults += 1;
              void target.query(text).catch(() => undefined);
              return Promise.reject(new Error("Query read timeout"));
            }
            if (text === "ROLLBACK" && faults === 1) {
              faults += 1;
              return Promise.reject(new Error("Query read timeout"));
            }
            return target.query(text as string, values);
          };
        }
        const value = Reflect.get(target, property, target);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    try {
      const store = new PostgresStore({ client: timingOut as never, namespace: `begin-one-${Date.now().toString(36)}` });
      const claim = await store.claim("one-1");
      if (claim.status !== "claimed") throw new Error("expected claimed");
      await expect(store.transact({ id: "one-1", token: claim.token }, async () => undefined)).rejects.toBeInstanceOf(StoreUnavailableError);
      expect(faults).toBe(2);
      // The next call sends the owed ROLLBACK first: its commit is a real one, seen on another connection.
      await store.remember("one-2");
      expect(await new PostgresStore({ pool, namespace: store.namespace }).seen("one-2")).toBe(true);
      await expect(one.query("SAVEPOINT probe")).rejects.toThrow(/transaction block/);
    } finally {
      await one.end();
    }
  });
});

describe("PostgresStore on PostgreSQL", () => {
  it("runs ONE statement per batch step, whatever the batch size", async () => {
    const sent: string[] = [];
    const s = new PostgresStore({ pool: countingPool(pool, sent), namespace: namespace() });
    const ids = Array.from({ length: 100 }, (_, i) => `m-${i}`);
    await s.remember("m-5");
    sent.length = 0;
    const claims = await s.claimMany(ids, undefined, ids.map((id) => `fp-${id}`));
    expect(sent).toEqual(["INSERT"]);
    expect(claims.filter((c) => c.status === "claimed")).toHaveLength(99);
    expect(claims[5]).toEqual({ status: "done" });
    sent.length = 0;
    await s.rememberMany(ids.slice(0, 50));
    expect(sent).toEqual(["INSERT"]);
    sent.length = 0;
    const owned = claims.flatMap((c, i) => (c.status === "claimed" && i >= 50 ? [{ id: ids[i] as string, token: c.token }] : []));
    await s.releaseMany(owned);
    expect(sent).toEqual(["DELETE"]);
    sent.length = 0;
    const seen = await s.seenMany(ids);
    expect(sent).toEqual(["SELECT"]);
    expect(seen.filter(Boolean)).toHaveLength(50);
    sent.length = 0;
    expect((await s.claim("m-0")).status).toBe("done");
    expect((await s.claim("m-99")).status).toBe("claimed");
    expect((await s.claim("m-99")).status).toBe("in-flight");
    expect(sent).toEqual(["INSERT", "INSERT", "INSERT"]);
  });

  it("answers a batch holding one id twice: claimed once, the copy in-flight", async () => {
    const s = store();
    const answers = await s.claimMany(["dup", "other", "dup"]);
    expect(answers.map((a) => a.status)).toEqual(["claimed", "claimed", "in-flight"]);
    await s.rememberMany(["dup", "dup"], [undefined, "fp-dup"]);
    expect(await s.claim("dup")).toEqual({ status: "done", fingerprint: "fp-dup" });
  });

  it("stores the claim's fingerprint, returns it with done and in-flight, and keeps it when remember has none", async () => {
    const s = store();
    expect((await s.claim("f", 60_000, "fp-1")).status).toBe("claimed");
    const held = await s.claim("f", 60_000, "fp-2");
    expect(held).toMatchObject({ status: "in-flight", fingerprint: "fp-1" });
    await s.remember("f");
    expect(await s.claim("f")).toEqual({ status: "done", fingerprint: "fp-1" });
    expect(await s.recallMany(["f", "absent"])).toEqual([{ seen: true, fingerprint: "fp-1" }, { seen: false }]);
    await s.remember("f", "fp-3");
    expect(await s.claim("f")).toEqual({ status: "done", fingerprint: "fp-3" });
    await s.remember("plain");
    expect(await s.claim("plain")).toEqual({ status: "done" });
    expect(await s.recallMany(["plain"])).toEqual([{ seen: true }]);
  });

  it("inspects an id: in-flight with the lease left, done with the retention left, null when absent", async () => {
    const s = store({ retentionMs: 3_600_000 });
    expect(await s.inspect("i")).toBeNull();
    await s.claim("i", 30_000, "fp");
    const inFlight = await s.inspect("i");
    expect(inFlight).toMatchObject({ status: "in-flight", fingerprint: "fp" });
    expect(inFlight?.leaseLeftMs).toBeGreaterThan(25_000);
    expect(inFlight?.leaseLeftMs).toBeLessThanOrEqual(30_000);
    await s.remember("i");
    const done = await s.inspect("i");
    expect(done).toMatchObject({ status: "done", fingerprint: "fp" });
    expect(done?.retentionLeftMs).toBeGreaterThan(3_500_000);
  });

  it("decides leases by the database's clock, not the caller's", async () => {
    const s = store();
    await s.claim("clock", 60_000);
    const [row] = (await pool.query(`SELECT extract(epoch FROM expires_at - clock_timestamp()) * 1000 AS left FROM ${DEFAULT_POSTGRES_TABLE} WHERE key = $1`, [await s.key("clock")])).rows;
    expect(Number(row.left)).toBeGreaterThan(55_000);
    expect(Number(row.left)).toBeLessThanOrEqual(60_000);
    // A lease the database considers over is claimable, whatever the caller's clock says.
    await pool.query(`UPDATE ${DEFAULT_POSTGRES_TABLE} SET expires_at = clock_timestamp() - interval '1 second' WHERE key = $1`, [await s.key("clock")]);
    expect((await s.claim("clock")).status).toBe("claimed");
  });

  it("hashes ids that text cannot hold (NUL) or that are too long, and never mixes them up", async () => {
    const s = store();
    expect(await s.key("a\u0000b")).toMatch(/^pg-[^:]+:#[A-Za-z0-9_-]{43}$/);
    expect(await s.key("x".repeat(2000))).toMatch(/:#[A-Za-z0-9_-]{43}$/);
    expect(await s.key("plain")).toBe(`${s.namespace}:plain`);
    await s.remember("a\u0000b");
    expect(await s.seen("a\u0000b")).toBe(true);
    expect(await s.seen("a\u0000c")).toBe(false);
    expect(await s.seen("ab")).toBe(false);
  });

  it("purges expired rows and leaves live ones", async () => {
    const s = store({ retentionMs: 50 });
    await s.rememberMany(["p1", "p2"]);
    await s.claim("p3", 60_000);
    await new Promise((resolve) => setTimeout(resolve, 120));
    expect(await s.purgeExpired()).toBeGreaterThanOrEqual(2);
    const keys = await Promise.all(["p1", "p2", "p3"].map((id) => s.key(id)));
    const { rows } = await pool.query(`SELECT key FROM ${DEFAULT_POSTGRES_TABLE} WHERE key = ANY($1)`, [keys]);
    expect(rows.map((row) => row.key)).toEqual([keys[2]]);
  });

  it("creates the table in another schema with the same DDL", async () => {
    await pool.query("CREATE SCHEMA IF NOT EXISTS other");
    await createIdempotencyTable(pool, "other.dedupe");
    const s = store({ table: "other.dedupe" });
    await s.remember("x");
    expect((await pool.query("SELECT count(*)::int AS n FROM other.dedupe")).rows[0].n).toBe(1);
    expect(idempotencyTableSql("other.dedupe")).toContain('CREATE TABLE IF NOT EXISTS "other"."dedupe"');
  });

  it("fails as unavailable, without values, when the database cannot answer", async () => {
    const s = store({ table: "missing_table" });
    const failure = await s.claim("secret-id").catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(StoreUnavailableError);
    expect(String((failure as Error).message)).toMatch(/PostgresStore\.claim failed: table "missing_table" does not exist: create it with createIdempotencyTable\(.*\(42P01\)$/);
    expect(String((failure as Error).message)).not.toContain("secret-id");
    const down = new pg.Pool({ connectionString: "postgres://postgres@127.0.0.1:1/postgres", connectionTimeoutMillis: 500 });
    down.on("error", () => {});
    await expect(new PostgresStore({ pool: down }).seen("x")).rejects.toBeInstanceOf(StoreUnavailableError);
    await down.end();
  });

  it("rejects bad options", () => {
    expect(() => new PostgresStore({} as PostgresStoreOptions)).toThrow(InvalidOptionError);
    expect(() => new PostgresStore({ pool, client: single })).toThrow(/exactly one/);
    expect(() => new PostgresStore({ pool, table: "bad name" })).toThrow(/table/);
    expect(() => new PostgresStore({ pool, table: 'x"; DROP TABLE y; --' })).toThrow(/table/);
    expect(() => new PostgresStore({ pool, namespace: "a:b" })).toThrow(/namespace/);
    expect(() => new PostgresStore({ pool, maxTransactionRetries: -1 })).toThrow(/maxTransactionRetries/);
    expect(() => new PostgresStore({ pool, isolation: "chaos" as "serializable" })).toThrow(/isolation/);
  });
});

testPostgresTransactions("PostgresStore", {
  pool,
  single,
  open: async (options = {}) => new PostgresStore<pg.PoolClient>({ ...(options.client === undefined ? { pool } : {}), namespace: namespace(), ...options }),
});
