/**
 * Transactional mode of `PostgresStore`, as a suite every layout runs (store.test.ts: this package's
 * own table; layouts.test.ts: the BabelQueue PHP and Go SDKs' tables): the handler's rows and the
 * commit land together or not at all, a stale or late owner commits nothing, a killed connection
 * leaves nothing, serialization failures re-run the whole transaction, the handler's own errors
 * come back as they are, and one shared client never lets a store call into an open transaction.
 *
 * It needs the tables `effects (message_id, note)` and `accounts (id, balance >= 0)` (created by
 * `createSuiteTables`) on the same database as the store.
 */
import pg from "pg";
import { describe, expect, it } from "vitest";
import { FenceLostError, InvalidOptionError, StoreUnavailableError, TransactionConditionError } from "../../../src/errors.js";
import type { PgQueryable, PostgresStore, PostgresStoreOptions } from "../../../entry/postgres.js";
import { testTransactionalStore } from "../transactional-contract.js";
import { countingPool } from "./support.js";

export interface TransactionSuite {
  /** The pool the suite's own queries (effects, accounts) use. */
  readonly pool: pg.Pool;
  /** One connected client, for the shared-client case. */
  readonly single: pg.Client;
  /** A fresh store of the layout under test, on `pool` unless the options name a `pool` or `client`. */
  open(options?: Partial<PostgresStoreOptions<pg.PoolClient>>): Promise<PostgresStore<pg.PoolClient>>;
}

/** The tables the suite writes its effects to. */
export async function createSuiteTables(pool: pg.Pool): Promise<void> {
  await pool.query("CREATE TABLE IF NOT EXISTS effects (message_id text NOT NULL, note text NOT NULL)");
  await pool.query("CREATE TABLE IF NOT EXISTS accounts (id text PRIMARY KEY, balance int NOT NULL CHECK (balance >= 0))");
}

let counter = 0;
const unique = () => {
  counter += 1;
  return `${Date.now().toString(36)}-${counter}-${Math.random().toString(36).slice(2, 6)}`;
};

export function testPostgresTransactions(name: string, { pool, single, open }: TransactionSuite): void {
  // What every TransactionalStore must do (the 50-delivery race included), then what is PostgreSQL's own.
  testTransactionalStore<pg.PoolClient>(name, {
    make: () => open(),
    write: async (tx, id, tag) => void (await tx.query("INSERT INTO effects (message_id, note) VALUES ($1, $2)", [id, tag])),
    effects: async (id) => (await pool.query("SELECT note FROM effects WHERE message_id = $1 ORDER BY note", [id])).rows.map((row) => row.note as string),
    raceLeaseMs: 40,
    raceRounds: 3,
  });
  describe(`${name}: transactional mode`, () => {
    const effectsOf = async (messageId: string): Promise<string[]> =>
      (await pool.query("SELECT note FROM effects WHERE message_id = $1 ORDER BY note", [messageId])).rows.map((row) => row.note as string);
    const owned = async (s: PostgresStore<pg.PoolClient>, id: string, leaseMs?: number, fingerprint?: string) => {
      const claim = await s.claim(id, leaseMs, fingerprint);
      if (claim.status !== "claimed") throw new Error(`expected claimed, got ${claim.status}`);
      return { id, token: claim.token, ...(fingerprint === undefined ? {} : { fingerprint }) };
    };
    const insertEffect = (tx: PgQueryable, messageId: string, note: string) =>
      tx.query("INSERT INTO effects (message_id, note) VALUES ($1, $2)", [messageId, note]);
    /** What `transact` rejects with when the handler writes effect "a" of the claim's id, then runs `sql` ($1 = that id). */
    const failedTransact = (s: PostgresStore<pg.PoolClient>, claim: Awaited<ReturnType<typeof owned>>, sql: string) =>
      s
        .transact(claim, async (tx) => {
          await insertEffect(tx, claim.id, "a");
          await tx.query(sql, [claim.id]);
        })
        .catch((error: unknown) => error);

    it("commits the handler's rows and the done record together, in BEGIN + the handler's + 2 statements", async () => {
      const sent: string[] = [];
      const s = await open({ pool: countingPool(pool, sent) });
      const messageId = `tx-ok-${unique()}`;
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
      const s = await open();
      const messageId = `tx-throw-${unique()}`;
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

    it("the handler's connection refuses release() and any query after the handler returned: nothing escapes the transaction", async () => {
      const s = await open();
      const messageId = `tx-lent-${unique()}`;
      const claim = await owned(s, messageId);
      // pg's habit, release(), mid-transaction: the connection would serve another message inside this transaction.
      const released = await s
        .transact(claim, async (tx) => {
          await insertEffect(tx, messageId, "a");
          (tx as unknown as pg.PoolClient).release();
        })
        .catch((error: unknown) => error);
      expect(released).toBeInstanceOf(InvalidOptionError);
      expect(await effectsOf(messageId)).toEqual([]);
      expect((await s.inspect(messageId))?.status).toBe("in-flight");
      expect(await s.release(messageId, claim.token)).toBe(true);

      // A query the handler did not await: it throws instead of landing after the commit (or in the next transaction).
      const again = await owned(s, messageId);
      let late: Promise<unknown> | undefined;
      await s.transact(again, async (tx) => {
        await insertEffect(tx, messageId, "b");
        late = new Promise((resolve) => setTimeout(resolve, 0)).then(() => insertEffect(tx, messageId, "late")).catch((error: unknown) => error);
      });
      const thrown = await late;
      expect(thrown).toBeInstanceOf(InvalidOptionError);
      expect((thrown as Error).message).toMatch(/used after the handler returned/);
      expect(await effectsOf(messageId)).toEqual(["b"]);
      expect((await s.inspect(messageId))?.status).toBe("done");
    });

    it("a stale owner (lease over, id re-claimed) commits nothing: FenceLostError, no rows", async () => {
      const s = await open();
      const messageId = `tx-stale-${unique()}`;
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
      const s = await open();
      const messageId = `tx-late-${unique()}`;
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

    it("a crash between the handler's writes and the commit (connection killed) leaves nothing, fails as the store's; the redelivery commits the only effect", async () => {
      const s = await open();
      const messageId = `tx-crash-${unique()}`;
      const first = await owned(s, messageId, 300);
      let handlerSaw: unknown;
      const failure = await s
        .transact(first, async (tx) => {
          await insertEffect(tx, messageId, "first");
          const { rows } = await tx.query("SELECT pg_backend_pid() AS pid");
          // The consumer "dies" here: the server drops its session, and the open transaction with it.
          await pool.query("SELECT pg_terminate_backend($1)", [rows[0].pid]);
          await tx.query("SELECT 1").catch((error: unknown) => {
            handlerSaw = error;
            throw error;
          });
        })
        .catch((error: unknown) => error);
      // The handler's statement failed with the driver's error; transact answers it as the database's
      // failure (StoreUnavailableError, the driver's error as cause), not as the handler's.
      expect(handlerSaw).toBeInstanceOf(Error);
      expect(handlerSaw).not.toBeInstanceOf(StoreUnavailableError);
      expect(failure).toBeInstanceOf(StoreUnavailableError);
      expect((failure as StoreUnavailableError).operation).toBe("transact");
      expect((failure as StoreUnavailableError).cause).toBeInstanceOf(Error);
      expect(await effectsOf(messageId)).toEqual([]);
      expect((await s.claim(messageId)).status).toBe("in-flight"); // the lease still holds the id
      await new Promise((resolve) => setTimeout(resolve, 400));
      const redelivery = await owned(s, messageId);
      await s.transact(redelivery, (tx) => insertEffect(tx, messageId, "redelivery").then(() => undefined));
      expect(await effectsOf(messageId)).toEqual(["redelivery"]);
      expect((await s.claim(messageId)).status).toBe("done");
    });

    it("re-runs the whole transaction after a real serialization failure (SERIALIZABLE write skew)", async () => {
      const s = await open({ isolation: "serializable" });
      const group = `skew-${unique()}`;
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
      const s = await open({ maxTransactionRetries: 2 });
      const messageId = `tx-exhaust-${unique()}`;
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

    it("names, never quotes, a handler's error that wrapped the serialization failure: no user text in the message or the cause", async () => {
      const s = await open({ maxTransactionRetries: 1 });
      const messageId = `tx-wrapped-${unique()}`;
      const claim = await owned(s, messageId);
      const failure = await s
        .transact(claim, async (tx) => {
          try {
            await tx.query("DO $$ BEGIN RAISE EXCEPTION 'conflict' USING ERRCODE = '40001'; END $$");
          } catch (error) {
            throw new Error("debit for alice@example.com failed", { cause: error });
          }
        })
        .catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(StoreUnavailableError);
      expect(String((failure as Error).message)).toMatch(/on every one of 2 attempts/);
      expect(String((failure as Error).message)).not.toContain("alice@example.com");
      expect(String(((failure as Error).cause as Error).message)).not.toContain("alice@example.com");
      expect(((failure as Error).cause as Error).name).toBe("Error");
    });

    it("rethrows the handler's own constraint violation as it is, and writes nothing", async () => {
      const s = await open();
      const messageId = `tx-check-${unique()}`;
      await pool.query("INSERT INTO accounts (id, balance) VALUES ($1, 10)", [messageId]);
      const claim = await owned(s, messageId);
      const failure = await failedTransact(s, claim, "UPDATE accounts SET balance = balance - 20 WHERE id = $1");
      expect(failure).toBeInstanceOf(pg.DatabaseError);
      expect((failure as pg.DatabaseError).code).toBe("23514");
      expect(await effectsOf(messageId)).toEqual([]);
    });

    it("maps a deferred constraint failing at COMMIT, and a swallowed failed statement, to TransactionConditionError", async () => {
      await pool.query("CREATE TABLE IF NOT EXISTS deferred_unique (v text UNIQUE DEFERRABLE INITIALLY DEFERRED)");
      const s = await open();
      const messageId = `tx-deferred-${unique()}`;
      const claim = await owned(s, messageId);
      const failure = await failedTransact(s, claim, "INSERT INTO deferred_unique (v) VALUES ($1), ($1)");
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
      const s = await open({ client: single as unknown as pg.PoolClient }); // the store only calls query() on it
      const messageId = `tx-single-${unique()}`;
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
}
