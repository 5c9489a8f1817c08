/**
 * PostgresStore's claim step against what other sessions do meanwhile, on a real PostgreSQL
 * (test/setup/postgres.ts), each interleaving forced with a second connection, not left to chance:
 *
 * - a claim step that fails after a statement of it committed wins (a second chunk of a step over
 *   10,000 ids, here stopped by `lock_timeout` on a row another session holds) releases those wins
 *   before it rejects: the contract's "nothing held for any id".
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { StoreUnavailableError } from "../../../src/errors.js";
import { POSTGRES_MAX_IDS_PER_STATEMENT, PostgresStore, createIdempotencyTable } from "../../../entry/postgres.js";

const url = inject("postgresUrl");
const pool = new pg.Pool({ connectionString: url, max: 10 });
pool.on("error", () => {}); // an idle connection the server drops must not end the test process
/** The other session: the holder whose commit is kept open, or the one holding a row lock. */
const holder = new pg.Client({ connectionString: url });
holder.on("error", () => {});

beforeAll(async () => {
  await holder.connect();
});
afterAll(async () => {
  await holder.end();
  await pool.end();
});

let tables = 0;
const freshTable = (prefix: string) => {
  tables += 1;
  return `${prefix}_${tables}_${Date.now().toString(36)}`;
};

describe("a claim step that fails after some of its statements committed wins", () => {
  it("a >10,000-id step whose second statement fails (lock_timeout on a row another session holds) rejects and holds none of the first 10,000", async () => {
    const table = freshTable("chunks");
    await createIdempotencyTable(pool, { table });
    const timed = new pg.Pool({ connectionString: url, max: 2, lock_timeout: 300 });
    timed.on("error", () => {});
    try {
      const store = new PostgresStore({ pool: timed, table, namespace: "n" });
      const ids = Array.from({ length: POSTGRES_MAX_IDS_PER_STATEMENT + 1 }, (_, i) => `id-${i}`);
      // The other session holds the last id (an uncommitted claim): the second statement waits on it, then times out.
      await holder.query("BEGIN");
      await new PostgresStore({ client: holder, table, namespace: "n" }).claim(ids[ids.length - 1] as string);
      const failure = await store.claimMany(ids).then(
        () => undefined,
        (error: unknown) => error,
      );
      await holder.query("ROLLBACK");
      expect(failure).toBeInstanceOf(StoreUnavailableError);
      expect((failure as Error).message).toMatch(/55P03|lock/);
      // The first statement's 10,000 wins were released: nothing of the step is held, every id claimable now.
      expect((await pool.query(`SELECT count(*)::int AS n FROM ${table}`)).rows[0].n).toBe(0);
      const again = await store.claimMany(ids.slice(0, 3));
      expect(again.map((claim) => claim.status)).toEqual(["claimed", "claimed", "claimed"]);
    } finally {
      await timed.end();
    }
  });
});
