/**
 * What an IdempotencyObject costs in SQLite rows — the unit Cloudflare bills Durable Object storage
 * in — read from workerd's own `rowsRead` / `rowsWritten` cursor counters, per operation; the same
 * operations on the layout earlier versions wrote (for the before/after figures); an object created
 * by an earlier version, read and drained by this one; and the sweep's chunked walk.
 */
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { storeKey } from "../../src/store-kit/keys.js";
import type { IdempotencyObject } from "../../stores/durable-object/object.js";
import { DurableObjectStore } from "../../stores/durable-object/store.js";
import { Sweeper, sweepGapMs } from "../../stores/durable-object/sweep.js";
import { RecordTable, type SqlLike } from "../../stores/durable-object/table.js";

interface Meter {
  rowsRead: number;
  rowsWritten: number;
  alarmsSet: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const stubOf = (name: string) => env.IDEMPOTENCY.get(env.IDEMPOTENCY.idFromName(name));

/**
 * Runs `work` on the object instance with its storage seen through a meter: every cursor the object
 * opens and every `setAlarm` it makes are counted (the same way bench/fixtures/worker-do-cost.ts does).
 */
async function metered<T>(name: string, work: (object: IdempotencyObject) => T | Promise<T>): Promise<{ result: T } & Meter> {
  return runInDurableObject(stubOf(name), async (instance: IdempotencyObject, state) => {
    const cursors: { rowsRead: number; rowsWritten: number }[] = [];
    let alarmsSet = 0;
    const storage = state.storage;
    const sql = new Proxy(storage.sql, {
      get: (real, property) =>
        property === "exec"
          ? (...args: Parameters<typeof real.exec>) => {
              const cursor = real.exec(...args);
              cursors.push(cursor);
              return cursor;
            }
          : Reflect.get(real, property),
    });
    const meteredStorage = new Proxy(storage, {
      get: (real, property) => {
        if (property === "sql") return sql;
        if (property === "setAlarm") return (...args: Parameters<typeof real.setAlarm>) => ((alarmsSet += 1), real.setAlarm(...args));
        const value = Reflect.get(real, property) as unknown;
        return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(real) : value;
      },
    });
    const ctx = (instance as unknown as { ctx: unknown }).ctx;
    Object.defineProperty(instance, "ctx", { value: { ...(ctx as object), storage: meteredStorage }, configurable: true, writable: true });
    try {
      const result = await work(instance);
      return {
        result,
        rowsRead: cursors.reduce((n, c) => n + c.rowsRead, 0),
        rowsWritten: cursors.reduce((n, c) => n + c.rowsWritten, 0),
        alarmsSet,
      };
    } finally {
      Object.defineProperty(instance, "ctx", { value: ctx, configurable: true, writable: true });
    }
  });
}

/** The table, index and statements of the layout versions before 0.2 wrote (object.ts as it was). */
const LEGACY_SCHEMA = [
  `CREATE TABLE entries (key TEXT PRIMARY KEY, status TEXT NOT NULL CHECK (status IN ('in-flight', 'done')),
     token TEXT, lease_until INTEGER, retain_until INTEGER, fingerprint TEXT)`,
  "CREATE INDEX entries_by_deadline ON entries (COALESCE(retain_until, lease_until))",
];
const LEGACY_CLAIM =
  "INSERT OR REPLACE INTO entries (key, status, token, lease_until, retain_until, fingerprint) VALUES (?, 'in-flight', ?, ?, NULL, ?)";
const LEGACY_COMMIT = `INSERT INTO entries (key, status, token, lease_until, retain_until, fingerprint) VALUES (?, 'done', NULL, NULL, ?, ?)
  ON CONFLICT (key) DO UPDATE SET status = 'done', token = NULL, lease_until = NULL, retain_until = excluded.retain_until,
  fingerprint = COALESCE(excluded.fingerprint, CASE WHEN COALESCE(entries.retain_until, entries.lease_until) > ? THEN entries.fingerprint END)`;

describe("IdempotencyObject: rows read and written (workerd's counters)", () => {
  it("per key: claim 1 written, commit 1, duplicate 0 (1 read), release 1, re-claim of an expired row 1, sweep 1", async () => {
    const name = `rows-${Date.now()}`;
    const keys = Array.from({ length: 10 }, (_, i) => `ns:rows-${i}`);
    const fingerprints = keys.map((key) => `fp-${key}`);
    // Warm-up: the table is created and the first alarm armed by a key outside the measured ones.
    await metered(name, (o) => o.claim(["ns:warm"], 60_000));

    const claim = await metered(name, (o) => o.claim(keys, 60_000, fingerprints));
    expect(claim.result.every((c) => c.status === "claimed")).toBe(true);
    const commit = await metered(name, (o) => o.remember(keys, 60_000));
    const duplicate = await metered(name, (o) => o.claim(keys, 60_000, fingerprints));
    expect(duplicate.result).toEqual(keys.map((_, i) => ({ status: "done", fingerprint: fingerprints[i] })));

    const held = keys.map((key) => `${key}-held`);
    const heldClaims = await metered(name, (o) => o.claim(held, 60_000));
    const release = await metered(name, (o) =>
      o.release(held.map((key, i) => ({ key, token: (heldClaims.result[i] as { token: string }).token }))),
    );
    expect(release.result).toEqual(held.map(() => true));

    const short = keys.map((key) => `${key}-short`);
    await metered(name, (o) => o.claim(short, 20));
    await sleep(40);
    const reclaim = await metered(name, (o) => o.claim(short, 20));
    expect(reclaim.result.every((c) => c.status === "claimed")).toBe(true);
    await sleep(40);
    const sweep = await metered(name, (o) => o.alarm());

    expect({ claim: claim.rowsWritten, commit: commit.rowsWritten, duplicate: duplicate.rowsWritten, release: release.rowsWritten }).toEqual({
      claim: 10,
      commit: 10,
      duplicate: 0,
      release: 10,
    });
    expect(duplicate.rowsRead).toBe(10);
    expect(reclaim.rowsWritten).toBe(10);
    // The sweep deleted the 10 expired claims (1 row written each) and re-armed (1 setAlarm): nothing else was written.
    expect(sweep.rowsWritten).toBe(10);
    expect(sweep.alarmsSet).toBe(1);
    expect(claim.alarmsSet + commit.alarmsSet + duplicate.alarmsSet).toBe(0);
    console.log(
      `[do-rows] per key, this layout: claim ${claim.rowsWritten / 10} written / ${claim.rowsRead / 10} read; commit ${commit.rowsWritten / 10} / ${commit.rowsRead / 10}; duplicate ${duplicate.rowsWritten / 10} / ${duplicate.rowsRead / 10}; release ${release.rowsWritten / 10} / ${release.rowsRead / 10}; re-claim of an expired row ${reclaim.rowsWritten / 10} / ${reclaim.rowsRead / 10}; sweep ${sweep.rowsWritten / 10} written / ${sweep.rowsRead} read for ${await stubOf(name).storedRows()} rows kept + 10 deleted`,
    );
  });

  it("the layout earlier versions wrote: claim 3 rows, commit 2 (the before figures)", async () => {
    const name = `rows-legacy-${Date.now()}`;
    const figures = await runInDurableObject(stubOf(name), (_instance, state) => {
      const sql = state.storage.sql;
      for (const statement of LEGACY_SCHEMA) sql.exec(statement);
      const count = (query: string, ...bindings: unknown[]) => {
        const cursor = sql.exec(query, ...bindings);
        cursor.toArray();
        return { read: cursor.rowsRead, written: cursor.rowsWritten };
      };
      const now = Date.now();
      return {
        claim: count(LEGACY_CLAIM, "ns:k", "t", now + 60_000, "fp"),
        commit: count(LEGACY_COMMIT, "ns:k", now + 60_000, null, now),
        reclaim: count(LEGACY_CLAIM, "ns:k", "t2", now + 60_000, "fp"),
        sweep: count("DELETE FROM entries WHERE COALESCE(retain_until, lease_until) <= ?", now + 120_000),
      };
    });
    expect(figures.claim.written).toBe(3);
    expect(figures.commit.written).toBe(2);
    console.log(
      `[do-rows] per key, the earlier layout: claim ${figures.claim.written} written; commit ${figures.commit.written}; re-claim (INSERT OR REPLACE) ${figures.reclaim.written}; sweep ${figures.sweep.written}`,
    );
  });
});

describe("IdempotencyObject: an object created by an earlier version", () => {
  it("answers from the old table, writes only the new one, and drops the old one once its rows are gone", async () => {
    const objectName = `upgrade-${Date.now()}`;
    const namespace = "upgrade";
    const stub = stubOf(`${objectName}/shard-0`);
    const key = (id: string) => storeKey(namespace, id, 512);
    const token = crypto.randomUUID();
    const now = Date.now();
    const keys = { done: await key("old-done"), held: await key("old-held"), committing: await key("old-committing"), expired: await key("old-expired") };
    await runInDurableObject(stub, (_instance, state) => {
      for (const statement of LEGACY_SCHEMA) state.storage.sql.exec(statement);
      const insert = "INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?)";
      state.storage.sql.exec(insert, keys.done, "done", null, null, now + 1_500, "fp-done");
      state.storage.sql.exec(insert, keys.held, "in-flight", token, now + 1_500, null, "fp-held");
      state.storage.sql.exec(insert, keys.committing, "in-flight", token, now + 60_000, null, "fp-committing");
      state.storage.sql.exec(insert, keys.expired, "in-flight", "t-old", now - 1, null, "fp-old");
    });
    const store = new DurableObjectStore(env.IDEMPOTENCY, { namespace, objectName });
    expect(await store.claim("old-done")).toStrictEqual({ status: "done", fingerprint: "fp-done" });
    expect(await store.claim("old-held")).toMatchObject({ status: "in-flight", fingerprint: "fp-held" });
    expect(await store.inspect("old-done")).toMatchObject({ status: "done", fingerprint: "fp-done" });
    expect(await store.release("old-held", "wrong-token")).toBe(false);
    expect(await store.release("old-held", token)).toBe(true);
    // A claim made before the upgrade is committed with its fingerprint, into the new table.
    await store.remember("old-committing");
    expect(await store.claim("old-committing")).toStrictEqual({ status: "done", fingerprint: "fp-committing" });
    // An expired old row is claimable; the claim goes to the new table.
    expect((await store.claim("old-expired", undefined, "fp-new")).status).toBe("claimed");
    const tables = () =>
      runInDurableObject(stub, (_instance, state) => ({
        records: state.storage.sql.exec<{ key: string }>("SELECT key FROM records ORDER BY key").toArray().map((r) => r.key),
        entries: state.storage.sql
          .exec<{ n: number }>("SELECT COUNT(*) AS n FROM sqlite_master WHERE name IN ('entries', 'entries_by_deadline')")
          .one().n,
      }));
    expect((await tables()).records).toEqual([keys.committing, keys.expired].sort());
    // Once the old rows expire, one sweep deletes them and drops the old table and its index.
    await sleep(1_600);
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect(await tables()).toEqual({ records: [keys.committing, keys.expired].sort(), entries: 0 });
    expect(await store.seen("old-committing")).toBe(true);
    expect(await store.seen("old-done")).toBe(false);
  });
});

describe("The sweep's walk", () => {
  it("walks the table in chunks, deletes only expired rows, and schedules the next walk from what it saw", async () => {
    const name = `walk-${Date.now()}`;
    const now = Date.now();
    const figures = await runInDurableObject(stubOf(name), (_instance, state) => {
      const table = new RecordTable(() => state.storage.sql as unknown as SqlLike);
      const sweeper = new Sweeper(table, 5);
      // 23 rows: every third expired, the others live for 10 s to 32 s.
      for (let i = 0; i < 23; i += 1) table.claim(`k-${String(i).padStart(2, "0")}`, "t", i % 3 === 0 ? now - 1 : now + 10_000 + i * 1_000, null);
      const runs = [];
      for (;;) {
        const run = sweeper.run(now, (work) => state.storage.transactionSync(work));
        runs.push(run);
        if (run.nextAt !== now) break;
      }
      return { runs, stored: table.stored() };
    });
    expect(figures.runs.map((run) => run.walked)).toEqual([5, 5, 5, 5, 3]);
    expect(figures.runs.reduce((n, run) => n + run.deleted, 0)).toBe(8);
    expect(figures.stored).toBe(15);
    // The earliest live deadline is k-01's (now + 11 s); 15 live rows make a gap of the 1 s minimum.
    expect(sweepGapMs(15)).toBe(1_000);
    expect(figures.runs.at(-1)?.nextAt).toBe(now + 11_000);
    expect(sweepGapMs(1_000_000)).toBe(60 * 60 * 1000);
  });
});
