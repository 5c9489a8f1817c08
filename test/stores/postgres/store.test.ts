/**
 * PostgresStore on a real PostgreSQL 15 (started by test/setup/postgres.ts): the shared store
 * contract suite over a pg.Pool and over one pg.Client, then what only this store has — one
 * statement per batch step, fingerprints, inspect, the database's clock, hashed keys — and
 * transactional mode: the handler's rows and the commit land together or not at all.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { FenceLostError, InvalidOptionError, StoreUnavailableError, TransactionConditionError } from "../../../src/errors.js";
import { type PgPoolLike, type PgQueryable, PostgresStore, type PostgresStoreOptions, createIdempotencyTable, idempotencyTableSql } from "../../../entry/postgres.js";
import { testStore } from "../contract.js";
import { testTransactionalStore } from "../transactional-contract.js";

const url = inject("postgresUrl");
const pool = new pg.Pool({ connectionString: url, max: 30 });
pool.on("error", () => {}); // an idle connection killed by a test (pg asks every pool user for this listener)
const single = new pg.Client({ connectionString: url });

beforeAll(async () => {
  await single.connect();
  await createIdempotencyTable(pool);
  await createIdempotencyTable(pool); // idempotent
  await pool.query("CREATE TABLE IF NOT EXISTS effects (message_id text NOT NULL, note text NOT NULL)");
  await pool.query("CREATE TABLE IF NOT EXISTS accounts (id text PRIMARY KEY, balance int NOT NULL CHECK (balance >= 0))");
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

/** A pool that records the first word of every statement it (or a connection it lent) runs. */
function countingPool(sent: string[]): PgPoolLike<pg.PoolClient> {
  // A statement's kind: the data-changing verb it holds (a claim is a CTE around an INSERT), else its first word.
  const word = (text: string) => /\b(INSERT|UPDATE|DELETE)\b/.exec(text)?.[1] ?? /^\s*(BEGIN|COMMIT|ROLLBACK)\b/.exec(text)?.[1] ?? "SELECT";
  return {
    query: (text: string, values?: unknown[]) => {
      sent.push(word(text));
      return pool.query(text, values);
    },
    connect: async () => {
      const connection = await pool.connect();
      // A stand-in, not a patch of the pooled client (pg.Pool drives its clients with callbacks).
      const counted = {
        query: (text: string, values?: unknown[]) => {
          sent.push(word(text));
          return connection.query(text, values);
        },
        release: (error?: Error | boolean) => connection.release(error),
      };
      return counted as unknown as pg.PoolClient;
    },
  };
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

describe("PostgresStore on PostgreSQL", () => {
  it("runs ONE statement per batch step, whatever the batch size", async () => {
    const sent: string[] = [];
    const s = new PostgresStore({ pool: countingPool(sent), namespace: namespace() });
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
    const [row] = (await pool.query(`SELECT extract(epoch FROM expires_at - clock_timestamp()) * 1000 AS left FROM babelqueue_idempotency WHERE key = $1`, [await s.key("clock")])).rows;
    expect(Number(row.left)).toBeGreaterThan(55_000);
    expect(Number(row.left)).toBeLessThanOrEqual(60_000);
    // A lease the database considers over is claimable, whatever the caller's clock says.
    await pool.query(`UPDATE babelqueue_idempotency SET expires_at = clock_timestamp() - interval '1 second' WHERE key = $1`, [await s.key("clock")]);
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
    const { rows } = await pool.query("SELECT key FROM babelqueue_idempotency WHERE key = ANY($1)", [keys]);
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
    expect(String((failure as Error).message)).toMatch(/PostgresStore\.claim failed: .*does not exist \(42P01\)/);
    expect(String((failure as Error).message)).not.toContain("secret-id");
    const down = new pg.Pool({ connectionString: "postgres://postgres@127.0.0.1:1/postgres", connectionTimeoutMillis: 500 });
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

describe("PostgresStore transactional mode", () => {
  const effectsOf = async (messageId: string): Promise<string[]> =>
    (await pool.query("SELECT note FROM effects WHERE message_id = $1 ORDER BY note", [messageId])).rows.map((row) => row.note as string);
  const owned = async (s: PostgresStore<pg.PoolClient>, id: string, leaseMs?: number, fingerprint?: string) => {
    const claim = await s.claim(id, leaseMs, fingerprint);
    if (claim.status !== "claimed") throw new Error(`expected claimed, got ${claim.status}`);
    return { id, token: claim.token, ...(fingerprint === undefined ? {} : { fingerprint }) };
  };
  const insertEffect = (tx: PgQueryable, messageId: string, note: string) =>
    tx.query("INSERT INTO effects (message_id, note) VALUES ($1, $2)", [messageId, note]);

  it("commits the handler's rows and the done record together, in BEGIN + the handler's + 2 statements", async () => {
    const sent: string[] = [];
    const s = new PostgresStore({ pool: countingPool(sent), namespace: namespace() });
    const messageId = `tx-ok-${namespace()}`;
    const claim = await owned(s, messageId, 60_000, "fp-ok");
    sent.length = 0;
    await s.transact(claim, async (tx) => {
      await insertEffect(tx, messageId, "a");
      await insertEffect(tx, messageId, "b");
    });
    expect(sent).toEqual(["BEGIN", "INSERT", "INSERT", "UPDATE", "COMMIT"]);
    expect(await effectsOf(messageId)).toEqual(["a", "b"]);
    expect(await s.claim(messageId)).toEqual({ status: "done", fingerprint: "fp-ok" });
    expect(await s.inspect(messageId)).toMatchObject({ status: "done", fingerprint: "fp-ok" });
  });

  it("writes nothing when the handler throws, and leaves the claim to be released", async () => {
    const s = store();
    const messageId = `tx-throw-${namespace()}`;
    const claim = await owned(s, messageId);
    const failure = new Error("handler failed (scripted)");
    await expect(
      s.transact(claim, async (tx) => {
        await insertEffect(tx, messageId, "a");
        throw failure;
      }),
    ).rejects.toBe(failure);
    expect(await effectsOf(messageId)).toEqual([]);
    expect((await s.inspect(messageId))?.status).toBe("in-flight");
    expect(await s.release(messageId, claim.token)).toBe(true);
    // The connection went back to the pool clean: the next transaction on it commits.
    const again = await owned(s, messageId);
    await s.transact(again, (tx) => insertEffect(tx, messageId, "retry").then(() => undefined));
    expect(await effectsOf(messageId)).toEqual(["retry"]);
  });

  it("a stale owner (lease over, id re-claimed) commits nothing: FenceLostError, no rows", async () => {
    const s = store();
    const messageId = `tx-stale-${namespace()}`;
    const stale = await owned(s, messageId, 100);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const next = await owned(s, messageId, 60_000);
    const failure = await s.transact(stale, (tx) => insertEffect(tx, messageId, "stale").then(() => undefined)).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(FenceLostError);
    expect((failure as FenceLostError).key).toBe(messageId);
    expect(await effectsOf(messageId)).toEqual([]);
    expect((await s.inspect(messageId))?.status).toBe("in-flight");
    await s.transact(next, (tx) => insertEffect(tx, messageId, "owner").then(() => undefined));
    expect(await effectsOf(messageId)).toEqual(["owner"]);
    expect((await s.claim(messageId)).status).toBe("done");
  });

  it("an owner whose lease ran out during the handler commits nothing, even when nobody re-claimed yet", async () => {
    const s = store();
    const messageId = `tx-late-${namespace()}`;
    const claim = await owned(s, messageId, 100);
    await expect(
      s.transact(claim, async (tx) => {
        await insertEffect(tx, messageId, "late");
        await new Promise((resolve) => setTimeout(resolve, 200));
      }),
    ).rejects.toBeInstanceOf(FenceLostError);
    expect(await effectsOf(messageId)).toEqual([]);
    await expect(s.transact({ id: messageId, token: "" }, async () => {})).rejects.toBeInstanceOf(FenceLostError);
  });

  it("a crash between the handler's writes and the commit (connection killed) leaves nothing; the redelivery commits the only effect", async () => {
    const s = store();
    const messageId = `tx-crash-${namespace()}`;
    const first = await owned(s, messageId, 300);
    const failure = await s
      .transact(first, async (tx) => {
        await insertEffect(tx, messageId, "first");
        const { rows } = await tx.query("SELECT pg_backend_pid() AS pid");
        // The consumer "dies" here: the server drops its session, and the open transaction with it.
        await pool.query("SELECT pg_terminate_backend($1)", [rows[0].pid]);
        await tx.query("SELECT 1");
      })
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(Error);
    expect(await effectsOf(messageId)).toEqual([]);
    expect((await s.claim(messageId)).status).toBe("in-flight"); // the lease still holds the id
    await new Promise((resolve) => setTimeout(resolve, 400));
    const redelivery = await owned(s, messageId);
    await s.transact(redelivery, (tx) => insertEffect(tx, messageId, "redelivery").then(() => undefined));
    expect(await effectsOf(messageId)).toEqual(["redelivery"]);
    expect((await s.claim(messageId)).status).toBe("done");
  });


  it("re-runs the whole transaction after a real serialization failure (SERIALIZABLE write skew)", async () => {
    const s = store({ isolation: "serializable" });
    const group = `skew-${namespace()}`;
    const claims = [await owned(s, `${group}-m1`), await owned(s, `${group}-m2`)];
    let release: () => void = () => {};
    const bothRead = new Promise<void>((resolve) => {
      release = resolve;
    });
    let runs = 0;
    let reads = 0;
    // "Only the first message of the group writes": both read 0 rows, both insert — write skew,
    // which SERIALIZABLE refuses (40001) to one of them; its re-run sees the other's row.
    const firstWriterOnly = (note: string) => async (tx: pg.PoolClient) => {
      runs += 1;
      const { rows } = await tx.query("SELECT count(*)::int AS n FROM effects WHERE message_id = $1", [group]);
      reads += 1;
      if (reads === 2) release();
      if (runs <= 2) await bothRead;
      if (rows[0].n === 0) await insertEffect(tx, group, note);
    };
    await Promise.all([s.transact(claims[0] as never, firstWriterOnly("m1")), s.transact(claims[1] as never, firstWriterOnly("m2"))]);
    expect(runs).toBe(3);
    expect(await effectsOf(group)).toHaveLength(1);
    expect((await s.claim(`${group}-m1`)).status).toBe("done");
    expect((await s.claim(`${group}-m2`)).status).toBe("done");
  });

  it("gives up with StoreUnavailableError after maxTransactionRetries serialization failures or deadlocks", async () => {
    const s = store({ maxTransactionRetries: 2 });
    const messageId = `tx-exhaust-${namespace()}`;
    const claim = await owned(s, messageId);
    let runs = 0;
    const failure = await s
      .transact(claim, async (tx) => {
        runs += 1;
        await insertEffect(tx, messageId, `run-${runs}`);
        // PostgreSQL itself raising the SQLSTATE, as a conflicting transaction would make it.
        await tx.query(`DO $$ BEGIN RAISE EXCEPTION 'conflict' USING ERRCODE = '${runs % 2 ? "40001" : "40P01"}'; END $$`);
      })
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(StoreUnavailableError);
    expect(String((failure as Error).message)).toMatch(/on every one of 3 attempts/);
    expect(runs).toBe(3);
    expect(await effectsOf(messageId)).toEqual([]);
    expect((await s.inspect(messageId))?.status).toBe("in-flight");
  });

  it("rethrows the handler's own constraint violation as it is, and writes nothing", async () => {
    const s = store();
    const messageId = `tx-check-${namespace()}`;
    await pool.query("INSERT INTO accounts (id, balance) VALUES ($1, 10)", [messageId]);
    const claim = await owned(s, messageId);
    const failure = await s
      .transact(claim, async (tx) => {
        await insertEffect(tx, messageId, "a");
        await tx.query("UPDATE accounts SET balance = balance - 20 WHERE id = $1", [messageId]);
      })
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(pg.DatabaseError);
    expect((failure as pg.DatabaseError).code).toBe("23514");
    expect(await effectsOf(messageId)).toEqual([]);
  });

  it("maps a deferred constraint failing at COMMIT, and a swallowed failed statement, to TransactionConditionError", async () => {
    await pool.query("CREATE TABLE IF NOT EXISTS deferred_unique (v text UNIQUE DEFERRABLE INITIALLY DEFERRED)");
    const s = store();
    const messageId = `tx-deferred-${namespace()}`;
    const claim = await owned(s, messageId);
    const failure = await s
      .transact(claim, async (tx) => {
        await insertEffect(tx, messageId, "a");
        await tx.query("INSERT INTO deferred_unique (v) VALUES ($1), ($1)", [messageId]);
      })
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(TransactionConditionError);
    expect(String((failure as Error).message)).toMatch(/deferred constraint.*23505/);
    expect(await effectsOf(messageId)).toEqual([]);
    expect((await s.inspect(messageId))?.status).toBe("in-flight");
    const swallowed = await s
      .transact(claim, async (tx) => {
        await insertEffect(tx, messageId, "b");
        await tx.query("SELECT 1/0").catch(() => undefined);
      })
      .catch((error: unknown) => error);
    expect(swallowed).toBeInstanceOf(TransactionConditionError);
    expect(await effectsOf(messageId)).toEqual([]);
  });

  it("over one pg.Client, keeps every other store call out of an open transaction", async () => {
    const s = new PostgresStore({ client: single, namespace: namespace() });
    const messageId = `tx-single-${namespace()}`;
    const claim = await s.claim(messageId);
    if (claim.status !== "claimed") throw new Error("expected claimed");
    let entered: () => void = () => {};
    const inside = new Promise<void>((resolve) => {
      entered = resolve;
    });
    const transaction = s.transact({ id: messageId, token: claim.token }, async (tx) => {
      await insertEffect(tx, messageId, "a");
      entered();
      await new Promise((resolve) => setTimeout(resolve, 50));
      throw new Error("rolled back (scripted)");
    });
    await inside;
    // Issued while the transaction is open: it must run after it, not inside it (and be rolled back with it).
    const other = s.claim("other-message");
    await expect(transaction).rejects.toThrow("rolled back");
    expect((await other).status).toBe("claimed");
    expect((await s.inspect("other-message"))?.status).toBe("in-flight");
    expect(await effectsOf(messageId)).toEqual([]);
  });
});

testTransactionalStore<pg.PoolClient>("PostgresStore", {
  make: (namespace) => new PostgresStore<pg.PoolClient>({ pool, namespace }),
  write: async (tx, id, tag) => void (await tx.query("INSERT INTO effects (message_id, note) VALUES ($1, $2)", [id, tag])),
  effects: async (id) => (await pool.query("SELECT note FROM effects WHERE message_id = $1 ORDER BY note", [id])).rows.map((row) => row.note as string),
  raceLeaseMs: 40,
  raceRounds: 3,
});
