/**
 * PostgresStore's claim step against what other sessions do meanwhile, on a real PostgreSQL
 * (test/setup/postgres.ts), each interleaving forced with a second connection, not left to chance:
 *
 * - layout babelqueue-go: a claim that waits for the lease row while the holder's commit (remember,
 *   or transactional mode's fenced commit) is in flight must answer `done` once that commit lands —
 *   the claim's snapshot cannot see the Go row the commit wrote, its takeover rule sees a freed lease;
 * - a claim step that fails after a statement of it committed wins (a second chunk of a step over
 *   10,000 ids, here stopped by `lock_timeout` on a row another session holds) releases those wins
 *   before it rejects: the contract's "nothing held for any id".
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { StoreUnavailableError } from "../../../src/errors.js";
import { type PgQueryable, POSTGRES_MAX_IDS_PER_STATEMENT, PostgresStore, createIdempotencyTable } from "../../../entry/postgres.js";
import { createSuiteTables } from "./transactional-suite.js";

const url = inject("postgresUrl");
const pool = new pg.Pool({ connectionString: url, max: 10 });
pool.on("error", () => {}); // an idle connection the server drops must not end the test process
/** The other session: the holder whose commit is kept open, or the one holding a row lock. */
const holder = new pg.Client({ connectionString: url });
holder.on("error", () => {});

beforeAll(async () => {
  await holder.connect();
  await createSuiteTables(pool);
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

/** Resolves once a backend other than ours waits for a lock in a statement that mentions `marker`. */
async function waitUntilBlocked(marker: string): Promise<void> {
  for (let i = 0; i < 500; i += 1) {
    const { rows } = await pool.query(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid() AND position($1 in query) > 0",
      [marker],
    );
    if (rows[0].n > 0) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`no statement on ${marker} ever waited for a lock`);
}

describe("layout babelqueue-go: a claim waiting on a lease whose holder is committing", () => {
  const open = async () => {
    const table = freshTable("go_race");
    await createIdempotencyTable(pool, { layout: "babelqueue-go", table });
    // `ours`: the redelivery's consumer. `theirs`: the holder's consumer, on a connection whose transaction we keep open.
    const ours = new PostgresStore({ pool, layout: "babelqueue-go", table });
    return { table, ours };
  };
  const leaseOf = async (table: string, id: string) =>
    (await pool.query(`SELECT token, fingerprint, done_at IS NOT NULL AS marked FROM ${table}_lease WHERE message_id = $1`, [id])).rows[0];
  const goRows = async (table: string, id: string) => (await pool.query(`SELECT count(*)::int AS n FROM ${table} WHERE message_id = $1`, [id])).rows[0].n;

  /** The holder's commit runs inside `holder`'s open transaction; the redelivery's claim starts, waits, then the commit lands. */
  async function race(table: string, ours: PostgresStore, commit: () => Promise<void>, fingerprint?: string) {
    await holder.query("BEGIN");
    try {
      await commit();
    } catch (error) {
      await holder.query("ROLLBACK");
      throw error;
    }
    const redelivery = ours.claimMany(["x", "y"], 60_000, [fingerprint, undefined]);
    try {
      await waitUntilBlocked(`${table}_lease`);
    } finally {
      await holder.query("COMMIT");
    }
    return redelivery;
  }

  it("remember with a fingerprint (the lease row becomes the done mark): the redelivery is done with the holder's fingerprint, the mark untouched", async () => {
    const { table, ours } = await open();
    const first = await ours.claim("x", 60_000, "fp-x");
    expect(first.status).toBe("claimed");
    const theirs = new PostgresStore({ client: holder, layout: "babelqueue-go", table });
    const answers = await race(table, ours, () => theirs.rememberMany(["x"], ["fp-x"]), "fp-y");
    expect(answers[0]).toEqual({ status: "done", fingerprint: "fp-x" });
    expect(answers[1]?.status).toBe("claimed");
    expect(await goRows(table, "x")).toBe(1);
    // The holder's done mark is untouched (its fingerprint, not the redelivery's): x answers done with it from now on.
    expect(await leaseOf(table, "x")).toEqual({ token: null, fingerprint: "fp-x", marked: true });
    expect(await ours.claim("x", 60_000, "fp-y")).toEqual({ status: "done", fingerprint: "fp-x" });
    expect(await ours.inspect("x")).toMatchObject({ status: "done", fingerprint: "fp-x" });
  });

  it("remember without a fingerprint (the lease row is deleted): the redelivery's fresh lease is given back, and it is done", async () => {
    const { table, ours } = await open();
    expect((await ours.claim("x")).status).toBe("claimed");
    const theirs = new PostgresStore({ client: holder, layout: "babelqueue-go", table });
    const answers = await race(table, ours, () => theirs.rememberMany(["x"]));
    expect(answers[0]).toEqual({ status: "done" });
    expect(answers[1]?.status).toBe("claimed");
    expect(await leaseOf(table, "x")).toBeUndefined();
    expect(await ours.claim("x")).toEqual({ status: "done" });
  });

  it("transactional mode, between the fenced commit and COMMIT: the redelivery is done, and the holder's effect is the only one", async () => {
    const { table, ours } = await open();
    const first = await ours.claim("x", 60_000, "fp-x");
    if (first.status !== "claimed") throw new Error("expected claimed");
    // The holder's transaction, stopped at its COMMIT until the redelivery's claim waits on the lease row.
    let release = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let atCommit = () => {};
    const reachedCommit = new Promise<void>((resolve) => {
      atCommit = resolve;
    });
    const gated: PgQueryable = {
      query: async (text, values) => {
        if (text === "COMMIT") {
          atCommit();
          await gate;
        }
        return holder.query(text, values);
      },
    };
    const theirs = new PostgresStore({ client: gated, layout: "babelqueue-go", table });
    const transaction = theirs.transact({ id: "x", token: first.token, fingerprint: "fp-x" }, async (tx) => {
      await tx.query("INSERT INTO effects (message_id, note) VALUES ($1, 'holder')", [`${table}/x`]);
    });
    await reachedCommit;
    const redelivery = ours.claimMany(["x"], 60_000, ["fp-x"]);
    try {
      await waitUntilBlocked(`${table}_lease`);
    } finally {
      release();
    }
    await transaction;
    expect(await redelivery).toEqual([{ status: "done", fingerprint: "fp-x" }]);
    expect((await pool.query("SELECT note FROM effects WHERE message_id = $1", [`${table}/x`])).rows).toEqual([{ note: "holder" }]);
    expect(await leaseOf(table, "x")).toEqual({ token: null, fingerprint: "fp-x", marked: true });
  });
});

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
