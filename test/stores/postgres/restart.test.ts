/**
 * PostgreSQL restarting and failing over while batches run, on servers of the test's own
 * (test/setup/postgres.ts `startPostgres`: halt / resume / restart, a streaming standby promoted
 * with `pg_promote()`), through the batch engine and a `pg.Pool` with its `error` listener:
 *
 * - the consumer process never crashes (an idle pooled connection the server terminates is an
 *   `error` event on the pool; unheard it would end the process, as it once ended `npm run bench`);
 * - while the database is away, the store answers `StoreUnavailableError` and nothing is acked
 *   (fail-closed); the next batch after it is back succeeds on the same pool;
 * - nothing acked is missing from the store afterwards: every `ran` / `duplicate` id is committed —
 *   `commit-failed` (the handler ran, its commit could not be written; acked by design) is counted
 *   and reported, and in transactional mode cannot happen (the effect rolls back with the commit);
 * - a failover to a promoted standby: with synchronous replication no acked commit is lost; with
 *   asynchronous replication and a crashed primary the test counts the acked ids the new primary
 *   lost (printed, not asserted: it is what asynchronous replication allows).
 *
 * The consumer sees the database through a small TCP forwarder whose target moves to the standby,
 * as an endpoint (RDS, a DNS name, PgBouncer) moves in a real failover.
 */
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { BatchEngine } from "../../../src/engine/index.js";
import { StoreUnavailableError } from "../../../src/errors.js";
import { txOf } from "../../../src/transaction.js";
import { PostgresStore, createIdempotencyTable } from "../../../entry/postgres.js";
import { type RestartablePostgres, startPostgres } from "../../setup/postgres.js";
import { startTcpForwarder } from "../../support/tcp-forwarder.js";

const servers: RestartablePostgres[] = [];
afterAll(async () => {
  for (const server of servers) await server.stop().catch(() => undefined);
});

const body = (id: string) => ({ job: "orders.charge", trace_id: `t-${id}`, data: { id }, meta: { id, schema_version: 1 }, attempts: 0 });
/**
 * A claim made just before the database went away outlives it (the row is durable; its release
 * could not be sent): its redeliveries park until the lease ends. Short here, so the queue drains.
 */
const LEASE_MS = 3_000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface QueueRun {
  /** Every id, acked exactly once in the end. */
  readonly ids: string[];
  /** How each id's ack came: its result status. */
  readonly ackedAs: Map<string, string>;
  /** Failures while the database was away (not acked). */
  readonly unavailable: number;
  /** Failures of another kind (must be 0). */
  readonly otherFailures: unknown[];
  readonly batches: number;
}

/**
 * A queue of `count` messages consumed in batches of 10 by `engine` until every one is acked; an
 * unacked delivery goes back and comes again. `disrupt` runs (not awaited) once `after` batches are done.
 */
async function consume(engine: BatchEngine, count: number, tag: string, after: number, disrupt: () => Promise<void>): Promise<QueueRun> {
  const ids = Array.from({ length: count }, (_, i) => `${tag}-${i}`);
  const pending = ids.map((id) => ({ id, redeliveries: 0 }));
  const ackedAs = new Map<string, string>();
  let unavailable = 0;
  const otherFailures: unknown[] = [];
  let batches = 0;
  let disruption: Promise<void> | undefined;
  const deadline = Date.now() + 60_000;
  while (pending.length > 0 && Date.now() < deadline) {
    if (batches === after) disruption = disrupt();
    const batch = pending.splice(0, 10);
    batches += 1;
    const results = await engine.process(batch.map((m) => ({ body: body(m.id), redeliveries: m.redeliveries, context: {} })));
    results.forEach((result, i) => {
      const message = batch[i] as { id: string; redeliveries: number };
      if (result.ack) ackedAs.set(message.id, result.status);
      else {
        if (result.error instanceof StoreUnavailableError) unavailable += 1;
        else if (result.status !== "in-flight") otherFailures.push(result.error ?? result.status);
        pending.push({ id: message.id, redeliveries: message.redeliveries + 1 });
      }
    });
    if (results.some((r) => !r.ack)) await sleep(50);
  }
  await disruption;
  return { ids, ackedAs, unavailable, otherFailures, batches };
}

/** Ids of `ids` not committed (not `seen`) in `store`. */
async function uncommitted(store: PostgresStore, ids: readonly string[]): Promise<string[]> {
  const seen = await store.seenMany(ids);
  return ids.filter((_, i) => !seen[i]);
}

function newPool(port: number): { pool: pg.Pool; idleErrors: () => number } {
  let errors = 0;
  const pool = new pg.Pool({ connectionString: `postgres://postgres@127.0.0.1:${port}/postgres`, max: 10, connectionTimeoutMillis: 2_000 });
  pool.on("error", () => {
    errors += 1;
  });
  return { pool, idleErrors: () => errors };
}

describe("PostgreSQL restarted while batches run", () => {
  it("plain mode: no crash, StoreUnavailableError while it is down, nothing acked that is not committed, recovery on the next batch", async () => {
    const server = await startPostgres();
    servers.push(server);
    const { pool, idleErrors } = newPool(server.port);
    try {
      await createIdempotencyTable(pool);
      const store = new PostgresStore({ pool, namespace: "restart-plain", leaseMs: LEASE_MS });
      const effects = new Map<string, number>();
      const engine = new BatchEngine(store, async (_envelope, ctx) => {
        await sleep(2);
        effects.set(ctx.key as string, (effects.get(ctx.key as string) ?? 0) + 1);
      });
      // Keep some connections idle in the pool when the server goes: their termination is an "error" event.
      await Promise.all(Array.from({ length: 5 }, () => pool.query("SELECT pg_sleep(0.05)")));
      const run = await consume(engine, 300, "p", 5, async () => {
        await server.halt("fast");
        await sleep(800);
        await server.resume();
      });
      expect(run.ackedAs.size).toBe(300);
      expect(run.unavailable).toBeGreaterThan(0);
      expect(run.otherFailures).toEqual([]);
      expect(idleErrors()).toBeGreaterThan(0);
      const committedAcks = run.ids.filter((id) => run.ackedAs.get(id) !== "commit-failed");
      expect(await uncommitted(store, committedAcks)).toEqual([]);
      const commitFailed = run.ids.filter((id) => run.ackedAs.get(id) === "commit-failed");
      // An effect runs twice only where its commit could not be written (acked, reported commit-failed).
      const twice = run.ids.filter((id) => (effects.get(id) ?? 0) > 1);
      expect(twice.filter((id) => !commitFailed.includes(id))).toEqual([]);
      expect(run.ids.every((id) => (effects.get(id) ?? 0) >= 1)).toBe(true);
      console.log(
        `restart (plain): ${run.batches} batches, ${run.unavailable} deliveries answered StoreUnavailableError, ${idleErrors()} idle-connection errors heard, ` +
          `${commitFailed.length} commit-failed, ${twice.length} effects run twice`,
      );
      // The pool recovers by itself: a new batch on it succeeds at once.
      const [after] = await engine.process([{ body: body("after-restart"), context: {} }]);
      expect(after).toMatchObject({ status: "ran", ack: true });
    } finally {
      await pool.end();
    }
  }, 120_000);

  /** Transactional mode through a crash restart; `synchronousCommit` as the server runs it. */
  async function crashRestart(synchronousCommit: "on" | "off", tag: string) {
    const server = await startPostgres({ settings: { synchronous_commit: synchronousCommit } });
    servers.push(server);
    const { pool } = newPool(server.port);
    try {
      await createIdempotencyTable(pool);
      await pool.query("CREATE TABLE effects (message_id text NOT NULL)");
      const store = new PostgresStore<pg.PoolClient>({ pool, namespace: "restart-tx", leaseMs: LEASE_MS });
      const engine = new BatchEngine(
        store,
        async (_envelope, ctx) => {
          await txOf<pg.PoolClient>(ctx).query("INSERT INTO effects (message_id) VALUES ($1)", [ctx.key]);
        },
        { transactional: true },
      );
      const run = await consume(engine, 200, tag, 4, async () => {
        await server.restart("immediate"); // a crash and recovery, not a clean shutdown
      });
      const { rows } = await pool.query("SELECT message_id, count(*)::int AS n FROM effects GROUP BY message_id");
      return { run, lost: await uncommitted(store, run.ids), effects: rows as { message_id: string; n: number }[] };
    } finally {
      await pool.end();
    }
  }

  it("transactional mode, synchronous_commit on (PostgreSQL's default): every message's effect exactly once, even across a crash", async () => {
    const { run, lost, effects } = await crashRestart("on", "t");
    expect(run.ackedAs.size).toBe(200);
    expect(run.unavailable).toBeGreaterThan(0);
    expect(run.otherFailures).toEqual([]);
    expect([...run.ackedAs.values()].filter((status) => status === "commit-failed")).toEqual([]);
    expect(lost).toEqual([]);
    expect(effects.length).toBe(200);
    expect(effects.filter((row) => row.n !== 1)).toEqual([]);
  }, 120_000);

  it("synchronous_commit off: a crash may lose acked commits — with their effects (measured, not asserted)", async () => {
    const { run, lost, effects } = await crashRestart("off", "u");
    expect(run.ackedAs.size).toBe(200);
    const missing = run.ids.filter((id) => !effects.some((row) => row.message_id === id));
    console.log(`crash restart with synchronous_commit=off: ${lost.length} acked commits lost, ${missing.length} acked effects lost with them`);
    expect(missing.length).toBeLessThanOrEqual(lost.length);
  }, 120_000);
});

describe("PostgreSQL failed over to a promoted standby while batches run", () => {
  async function failover(replication: "synchronous" | "asynchronous", crash: boolean) {
    const primary = await startPostgres({ settings: { synchronous_commit: "on" } });
    servers.push(primary);
    const standby = await primary.startStandby();
    servers.push(standby);
    const admin = new pg.Client({ connectionString: primary.url });
    admin.on("error", () => {});
    await admin.connect();
    if (replication === "synchronous") {
      await admin.query("ALTER SYSTEM SET synchronous_standby_names = '*'");
      await admin.query("SELECT pg_reload_conf()");
    }
    await admin.end();
    const front = await startTcpForwarder(primary.port);
    const { pool, idleErrors } = newPool(front.port);
    try {
      await createIdempotencyTable(pool);
      const store = new PostgresStore({ pool, namespace: "failover", leaseMs: LEASE_MS });
      const engine = new BatchEngine(store, async () => {});
      const steps: string[] = [];
      const run = await consume(engine, 300, `f-${replication}`, 6, async () => {
        const t0 = Date.now();
        await primary.halt(crash ? "immediate" : "fast");
        steps.push(`halted ${Date.now() - t0} ms`);
        await standby.promote();
        steps.push(`promoted ${Date.now() - t0} ms`);
        front.moveTo(standby.port);
      });
      expect(run.ackedAs.size).toBe(300);
      expect(run.otherFailures).toEqual([]);
      const acked = run.ids.filter((id) => run.ackedAs.get(id) === "ran" || run.ackedAs.get(id) === "duplicate");
      const lost = await uncommitted(store, acked);
      const [after] = await engine.process([{ body: body(`after-${replication}`), context: {} }]);
      expect(after).toMatchObject({ status: "ran", ack: true });
      console.log(
        `failover (${replication} replication, primary ${crash ? "crashed" : "stopped"}): ${run.batches} batches, ${run.unavailable} deliveries answered StoreUnavailableError, ` +
          `${idleErrors()} idle-connection errors heard, ${lost.length} acked commits lost on the new primary (${steps.join(", ")})`,
      );
      return { run, lost };
    } finally {
      await pool.end();
      await front.close();
    }
  }

  it("synchronous replication, the primary crashed: no acked commit lost, the store recovers on the promoted standby", async () => {
    const { run, lost } = await failover("synchronous", true);
    expect(run.unavailable).toBeGreaterThan(0);
    expect(lost).toEqual([]);
  }, 120_000);

  it("asynchronous replication, the primary stopped cleanly: no acked commit lost (a fast shutdown ships all WAL first)", async () => {
    const { lost } = await failover("asynchronous", false);
    expect(lost).toEqual([]);
  }, 120_000);

  it("asynchronous replication, the primary crashed: measured, not asserted — what asynchronous replication allows to lose", async () => {
    const { run, lost } = await failover("asynchronous", true);
    expect(run.ackedAs.size).toBe(300);
    expect(lost.length).toBeGreaterThanOrEqual(0);
  }, 120_000);
});
