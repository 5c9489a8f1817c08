/**
 * D1Store inside workerd (Miniflare's local D1, the tables from the repo's migrations/): the shared
 * store contract suite, one D1 request per batch step, and transactional mode — the handler's
 * statements and the fenced commit in ONE db.batch, rolled back by D1 as a whole when the fence
 * does not hold or one of the handler's statements fails.
 */
import { applyD1Migrations, type D1Migration } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { FenceLostError, InvalidOptionError, StoreUnavailableError, TransactionConditionError } from "../../src/errors.js";
import { D1Store, type D1StoreOptions, type D1Transaction, d1IdempotencyTableSql } from "../../stores/d1.js";
import migration from "../../migrations/0001_babelqueue_idempotency.sql?raw";
import { testStore } from "../stores/contract.js";
import { testTransactionalStore } from "../stores/transactional-contract.js";

const bindings = env as unknown as { DB: D1Database; TEST_MIGRATIONS: D1Migration[] };
const db = bindings.DB;

beforeAll(async () => {
  await applyD1Migrations(db, bindings.TEST_MIGRATIONS);
  await db.batch([
    db.prepare("CREATE TABLE IF NOT EXISTS d1_effects (message_id TEXT NOT NULL, note TEXT NOT NULL)"),
    db.prepare("CREATE TABLE IF NOT EXISTS d1_accounts (id TEXT PRIMARY KEY, balance INTEGER NOT NULL CHECK (balance >= 0))"),
  ]);
});

let counter = 0;
const namespace = () => {
  counter += 1;
  return `d1-${Date.now().toString(36)}-${counter}`;
};
const store = (options: D1StoreOptions = {}) => new D1Store(db, { namespace: namespace(), ...options });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A statement wrapper that records each request the store sends. */
class Counted {
  constructor(
    readonly real: D1PreparedStatement,
    readonly sent: string[],
  ) {}
  bind(...values: unknown[]) {
    return new Counted(this.real.bind(...values), this.sent);
  }
  run() {
    this.sent.push("run");
    return this.real.run();
  }
  all() {
    this.sent.push("all");
    return this.real.all();
  }
}
/**
 * `failBatch(n)`: a scripted connection loss on the n-th transactional batch (claims' 2-statement batches pass):
 * "before" it ran, "after" it ran, or "late" — lost on the way, then landing just before the next batch.
 */
function countingDb(sent: string[], failBatch?: (attempt: number) => "before" | "after" | "late" | undefined, failure = "D1_ERROR: Network connection lost.") {
  let attempts = 0;
  let landing: D1PreparedStatement[] | undefined;
  return {
    prepare: (query: string) => new Counted(db.prepare(query), sent),
    batch: async (statements: unknown[]) => {
      sent.push(`batch(${statements.length})`);
      const real = statements.map((s) => (s instanceof Counted ? s.real : (s as D1PreparedStatement)));
      if (landing !== undefined) {
        await db.batch(landing).catch(() => undefined);
        landing = undefined;
      }
      if (statements.length !== 2) attempts += 1;
      const fault = statements.length === 2 ? undefined : failBatch?.(attempts);
      if (fault === "late") landing = real;
      if (fault === "before" || fault === "late") throw new Error(failure);
      const results = await db.batch(real);
      if (fault === "after") throw new Error(failure);
      return results;
    },
  };
}

testStore("D1Store", {
  claims: true,
  clock: "real",
  make: ({ namespace, leaseMs, retentionMs }) => new D1Store(db, { namespace, leaseMs, retentionMs }),
});

describe("D1Store specifics", () => {
  it("is created by the migration file, which is d1IdempotencyTableSql()", () => {
    const statements = migration.split("\n").filter((line) => !line.startsWith("--")).join("\n").trim();
    expect(statements).toBe(d1IdempotencyTableSql());
  });

  it("sends ONE D1 request per batch step, whatever the batch size", async () => {
    const sent: string[] = [];
    const s = new D1Store(countingDb(sent), { namespace: namespace() });
    const ids = Array.from({ length: 100 }, (_, i) => `m-${i}`);
    await s.remember("m-5", "fp-5");
    sent.length = 0;
    const claims = await s.claimMany(ids, undefined, ids.map((id) => `fp-${id}`));
    expect(sent).toEqual(["batch(2)"]);
    expect(claims.filter((c) => c.status === "claimed")).toHaveLength(99);
    expect(claims[5]).toEqual({ status: "done", fingerprint: "fp-5" });
    sent.length = 0;
    await s.rememberMany(ids.slice(0, 50));
    expect(sent).toEqual(["run"]);
    sent.length = 0;
    await s.releaseMany(claims.flatMap((c, i) => (c.status === "claimed" && i >= 50 ? [{ id: ids[i] as string, token: c.token }] : [])));
    expect(sent).toEqual(["run"]);
    sent.length = 0;
    expect((await s.seenMany(ids)).filter(Boolean)).toHaveLength(50);
    expect(sent).toEqual(["all"]);
    expect(await s.claim("m-0")).toEqual({ status: "done", fingerprint: "fp-m-0" });
    expect((await s.claim("m-99")).status).toBe("claimed");
  });

  it("keeps the claim's fingerprint, answers it with done / in-flight, and inspects an id", async () => {
    const s = store({ retentionMs: 3_600_000 });
    await s.claim("f", 30_000, "fp-1");
    expect(await s.claim("f")).toMatchObject({ status: "in-flight", fingerprint: "fp-1" });
    const held = await s.inspect("f");
    expect(held).toMatchObject({ status: "in-flight", fingerprint: "fp-1" });
    expect(held?.leaseLeftMs).toBeGreaterThan(25_000);
    await s.remember("f");
    expect(await s.claim("f")).toEqual({ status: "done", fingerprint: "fp-1" });
    expect(await s.recallMany(["f", "none"])).toEqual([{ seen: true, fingerprint: "fp-1" }, { seen: false }]);
    expect((await s.inspect("f"))?.retentionLeftMs).toBeGreaterThan(3_500_000);
    expect(await s.inspect("none")).toBeNull();
  });

  it("hashes ids holding NUL, and purges expired rows", async () => {
    const s = store({ retentionMs: 50 });
    expect(await s.key("a\u0000b")).toMatch(/:#[A-Za-z0-9_-]{43}$/);
    await s.remember("a\u0000b");
    expect(await s.seen("a\u0000b")).toBe(true);
    expect(await s.seen("a")).toBe(false);
    await sleep(120);
    expect(await s.purgeExpired()).toBeGreaterThanOrEqual(1);
  });
});

describe("D1Store transactional mode", () => {
  const effectsOf = async (messageId: string) =>
    (await db.prepare("SELECT note FROM d1_effects WHERE message_id = ? ORDER BY note").bind(messageId).all<{ note: string }>()).results.map((r) => r.note);
  const effect = (messageId: string, note: string) => db.prepare("INSERT INTO d1_effects (message_id, note) VALUES (?, ?)").bind(messageId, note);
  const owned = async (s: D1Store, id: string, leaseMs?: number) => {
    const claim = await s.claim(id, leaseMs);
    if (claim.status !== "claimed") throw new Error(`expected claimed, got ${claim.status}`);
    return { id, token: claim.token };
  };
  /** A store on a db that records what it is sent, holding a claim of a fresh `${prefix}-…` id; nothing recorded yet. */
  const ownedOnCountingDb = async (prefix: string) => {
    const sent: string[] = [];
    const s = new D1Store(countingDb(sent), { namespace: namespace() });
    const messageId = `${prefix}-${namespace()}`;
    const claim = await owned(s, messageId);
    sent.length = 0;
    return { sent, s, messageId, claim };
  };

  it("commits the handler's statements and the done record in ONE db.batch", async () => {
    const { sent, s, messageId, claim } = await ownedOnCountingDb("tx-ok");
    await s.transact({ ...claim, fingerprint: "fp-ok" }, async (tx) => {
      tx.add(tx.db.prepare("INSERT INTO d1_effects (message_id, note) VALUES (?, ?)").bind(messageId, "a"));
      tx.add(effect(messageId, "b"));
    });
    expect(sent).toEqual(["batch(4)"]);
    expect(await effectsOf(messageId)).toEqual(["a", "b"]);
    expect(await s.claim(messageId)).toEqual({ status: "done", fingerprint: "fp-ok" });
  });

  it("sends nothing when the handler throws", async () => {
    const { sent, s, messageId, claim } = await ownedOnCountingDb("tx-throw");
    const failure = new Error("handler failed (scripted)");
    await expect(
      s.transact(claim, async (tx) => {
        tx.add(effect(messageId, "a"));
        throw failure;
      }),
    ).rejects.toBe(failure);
    expect(sent).toEqual([]);
    expect(await effectsOf(messageId)).toEqual([]);
    expect((await s.inspect(messageId))?.status).toBe("in-flight");
  });

  it("a stale owner (lease over, id re-claimed): the fence fails and D1 rolls back the handler's statements that already ran", async () => {
    const s = store();
    const messageId = `tx-stale-${namespace()}`;
    const stale = await owned(s, messageId, 100);
    await sleep(200);
    const next = await owned(s, messageId);
    const failure = await s
      .transact(stale, async (tx) => {
        // The fence goes first in the batch: it fails before these run, and D1 rolls the batch back.
        tx.add(effect(messageId, "stale-1"), effect(messageId, "stale-2"));
      })
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(FenceLostError);
    expect(await effectsOf(messageId)).toEqual([]);
    expect((await s.inspect(messageId))?.status).toBe("in-flight");
    await s.transact(next, async (tx) => tx.add(effect(messageId, "owner")));
    expect(await effectsOf(messageId)).toEqual(["owner"]);
    // A forgotten id (no row at all) fails the fence too.
    const gone = await owned(s, `${messageId}-gone`);
    await s.forget(gone.id);
    await expect(s.transact(gone, async (tx) => tx.add(effect(gone.id, "x")))).rejects.toBeInstanceOf(FenceLostError);
    expect(await effectsOf(gone.id)).toEqual([]);
  });

  it("maps a failing statement of the handler to TransactionConditionError, rolling back the ones before it", async () => {
    const s = store();
    const messageId = `tx-check-${namespace()}`;
    await db.prepare("INSERT INTO d1_accounts (id, balance) VALUES (?, 10)").bind(messageId).run();
    const claim = await owned(s, messageId);
    const failure = await s
      .transact(claim, async (tx) => {
        tx.add(effect(messageId, "a"), tx.db.prepare("UPDATE d1_accounts SET balance = balance - 20 WHERE id = ?").bind(messageId));
      })
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(TransactionConditionError);
    expect(String((failure as Error).message)).toMatch(/CHECK constraint failed/);
    expect(await effectsOf(messageId)).toEqual([]);
    expect((await s.inspect(messageId))?.status).toBe("in-flight");
  });


  it("after a transient error (mock: D1 cannot lose a connection locally) reads the row back: committed → done, else resends", async () => {
    const lostAfter: string[] = [];
    const after = new D1Store(countingDb(lostAfter, (n) => (n === 1 ? "after" : undefined)), { namespace: namespace() });
    const a = `tx-lost-after-${namespace()}`;
    const claimA = await owned(after, a);
    lostAfter.length = 0;
    await after.transact(claimA, async (tx) => tx.add(effect(a, "once")));
    expect(lostAfter).toEqual(["batch(3)", "all"]); // not resent: the read-back found it committed
    expect(await effectsOf(a)).toEqual(["once"]);

    const lostBefore: string[] = [];
    const before = new D1Store(countingDb(lostBefore, (n) => (n <= 2 ? "before" : undefined)), { namespace: namespace() });
    const b = `tx-lost-before-${namespace()}`;
    const claimB = await owned(before, b);
    lostBefore.length = 0;
    await before.transact(claimB, async (tx) => tx.add(effect(b, "once")));
    expect(lostBefore).toEqual(["batch(3)", "all", "batch(3)", "all", "batch(3)"]);
    expect(await effectsOf(b)).toEqual(["once"]);

    // Lost on the way, read back still in flight, then landing before the resend: the resend's fence
    // fails because the first batch committed — committed, not a lost fence.
    const lostLate: string[] = [];
    const late = new D1Store(countingDb(lostLate, (n) => (n === 1 ? "late" : undefined)), { namespace: namespace() });
    const l = `tx-lost-late-${namespace()}`;
    const claimL = await owned(late, l);
    lostLate.length = 0;
    await late.transact(claimL, async (tx) => tx.add(effect(l, "once")));
    expect(lostLate.slice(0, 3)).toEqual(["batch(3)", "all", "batch(3)"]);
    expect(await effectsOf(l)).toEqual(["once"]);
    expect((await late.inspect(l))?.status).toBe("done");

    const never = new D1Store(countingDb([], () => "before"), { namespace: namespace(), maxTransactionRetries: 1 });
    const c = await owned(never, `tx-lost-always-${namespace()}`);
    await expect(never.transact(c, async (tx) => tx.add(effect(c.id, "never")))).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(await effectsOf(c.id)).toEqual([]);
  });

  it("a resend whose lost first send landed late is done, even when the handler's own statement now meets its own row (the fence goes first)", async () => {
    // Mock fault: the first batch's answer is lost and it lands just before the resend. Its INSERT of a
    // unique row would fail on the resend; before the fence went first, that read as the handler's
    // refusal (TransactionConditionError) although the batch had committed.
    const sent: string[] = [];
    const late = new D1Store(countingDb(sent, (n) => (n === 1 ? "late" : undefined)), { namespace: namespace() });
    const id = `tx-late-unique-${namespace()}`;
    const claim = await owned(late, id);
    sent.length = 0;
    await late.transact(claim, async (tx) => tx.add(tx.db.prepare("INSERT INTO d1_accounts (id, balance) VALUES (?, 10)").bind(id)));
    expect(sent.slice(0, 3)).toEqual(["batch(3)", "all", "batch(3)"]);
    expect((await late.inspect(id))?.status).toBe("done");
    expect((await db.prepare("SELECT balance FROM d1_accounts WHERE id = ?").bind(id).all()).results).toEqual([{ balance: 10 }]);
  });

  it("tx.add refuses what is not a prepared statement, and any use once the handler returned; a token option must give non-empty strings", async () => {
    const s = store();
    const id = `tx-misuse-${namespace()}`;
    const claim = await owned(s, id);
    // `.run()`'s promise: that statement already ran, outside the fence.
    const ran = await s
      .transact(claim, async (tx) => tx.add(effect(id, "ran").run() as unknown as D1PreparedStatement))
      .catch((error: unknown) => error);
    expect(ran).toBeInstanceOf(InvalidOptionError);
    expect((ran as Error).message).toMatch(/must be a prepared statement/);
    expect((await s.inspect(id))?.status).toBe("in-flight");
    await s.release(id, claim.token);

    // A write the handler did not await: it throws instead of being dropped from a committed batch.
    const again = await owned(s, id);
    let lateAdd: Promise<unknown> | undefined;
    await s.transact(again, async (tx) => {
      tx.add(effect(id, "awaited"));
      // Caught at once: the batch may still be in flight when it throws.
      lateAdd = sleep(0)
        .then(() => tx.add(effect(id, "not awaited")))
        .catch((error: unknown) => error);
    });
    const thrown = await lateAdd;
    expect(thrown).toBeInstanceOf(InvalidOptionError);
    expect((thrown as Error).message).toMatch(/used after the handler returned/);
    expect((await s.inspect(id))?.status).toBe("done");

    expect(() => new D1Store(db, { token: "abc" as unknown as () => string })).toThrow(InvalidOptionError);
    const empty = new D1Store(db, { namespace: namespace(), token: () => "" });
    await expect(empty.claim(`tx-empty-token-${namespace()}`)).rejects.toBeInstanceOf(InvalidOptionError);
  });

  // Mock fault: D1 has no way to raise an internal error on demand locally.
  const INTERNAL = "D1_ERROR: internal error; reference = 7a1f0c";

  it("an error D1 does not explain is not read as the handler's refusal: read back, committed → done; not committed → StoreUnavailableError, not resent", async () => {
    const landed: string[] = [];
    const after = new D1Store(countingDb(landed, (n) => (n === 1 ? "after" : undefined), INTERNAL), { namespace: namespace() });
    const a = `tx-internal-after-${namespace()}`;
    const claimA = await owned(after, a);
    landed.length = 0;
    await after.transact(claimA, async (tx) => tx.add(effect(a, "once")));
    expect(landed).toEqual(["batch(3)", "all"]);
    expect((await after.inspect(a))?.status).toBe("done");

    const refused: string[] = [];
    const before = new D1Store(countingDb(refused, () => "before", INTERNAL), { namespace: namespace() });
    const b = `tx-internal-before-${namespace()}`;
    const claimB = await owned(before, b);
    refused.length = 0;
    const failure = await before.transact(claimB, async (tx) => tx.add(effect(b, "never"))).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(StoreUnavailableError);
    expect(failure).not.toBeInstanceOf(TransactionConditionError);
    expect(refused).toEqual(["batch(3)", "all"]);
    expect(await effectsOf(b)).toEqual([]);
    expect((await before.inspect(b))?.status).toBe("in-flight");
  });
});

testTransactionalStore<D1Transaction>("D1Store", {
  make: (namespace) => new D1Store(db, { namespace }),
  write: (tx, id, tag) => void tx.add(db.prepare("INSERT INTO d1_effects (message_id, note) VALUES (?, ?)").bind(id, tag)),
  effects: async (id) =>
    ((await db.prepare("SELECT note FROM d1_effects WHERE message_id = ? ORDER BY note").bind(id).all<{ note: string }>()).results ?? []).map((row) => row.note),
  raceLeaseMs: 60,
});
