/**
 * D1 transactional mode through the ENGINE and the reliability broker, inside workerd: the
 * handler adds statements through `ctx.tx`, the engine commits each claimed message as one
 * `db.batch`, and effects are counted from D1 — never from a counter.
 */
import { applyD1Migrations, type D1Migration } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BatchEngine } from "../../src/engine/index.js";
import { FenceLostError } from "../../src/errors.js";
import { txOf } from "../../src/transaction.js";
import { seededRandom } from "../../scripts/storm.js";
import { D1Store, type D1Transaction } from "../../stores/d1.js";
import { type SimulationReport, formatSimulationTable, formatWindowTable, simulate } from "../reliability/simulate.js";

const bindings = env as unknown as { DB: D1Database; TEST_MIGRATIONS: D1Migration[] };
const db = bindings.DB;

beforeAll(async () => {
  await applyD1Migrations(db, bindings.TEST_MIGRATIONS);
  await db.prepare("CREATE TABLE IF NOT EXISTS d1_tx_effects (message_id TEXT NOT NULL, run TEXT NOT NULL)").run();
});

const envelope = (id: string) => JSON.stringify({ job: "urn:babel:tx:effect", trace_id: `t-${id}`, data: { id }, meta: { id, schema_version: 1 }, attempts: 0 });

const write = (tag: string) => async (id: string, tx: unknown) => {
  const t = txOf<D1Transaction>({ tx });
  t.add(t.db.prepare("INSERT INTO d1_tx_effects (message_id, run) VALUES (?, ?)").bind(id, tag));
};

async function effects(tag: string): Promise<Map<string, number>> {
  const { results } = await db.prepare("SELECT message_id, count(*) AS n FROM d1_tx_effects WHERE run = ? GROUP BY message_id").bind(tag).all<{ message_id: string; n: number }>();
  return new Map(results.map((row) => [row.message_id, Number(row.n)]));
}

describe("D1Store transactional mode through the engine", () => {
  it("commits the handler's statements with the id; a throwing handler writes nothing; a stale owner writes nothing", async () => {
    const tag = `e-${Date.now().toString(36)}`;
    const store = new D1Store(db, { namespace: tag });
    const engine = new BatchEngine(store, async (_m, ctx) => {
      await write(tag)(ctx.key as string, ctx.tx);
      if (ctx.key === "bad") throw new Error("must roll back");
    }, { transactional: true });
    const results = await engine.process(["a", "b", "bad"].map((id) => ({ body: envelope(id), context: {} })));
    expect(results.map((r) => [r.status, r.ack])).toEqual([
      ["ran", true],
      ["ran", true],
      ["failed", false],
    ]);
    expect(Object.fromEntries(await effects(tag))).toEqual({ a: 1, b: 1 });

    const stale = new BatchEngine(store, async (_m, ctx) => {
      await write(tag)(ctx.key as string, ctx.tx);
      await new Promise((resolve) => setTimeout(resolve, 400));
      await store.claim(ctx.key as string, 60_000);
    }, { transactional: true, leaseMs: 200 });
    const [lost] = await stale.process([{ body: envelope("stale"), context: {} }]);
    expect(lost?.error).toBeInstanceOf(FenceLostError);
    expect(lost?.ack).toBe(false);
    expect((await effects(tag)).has("stale")).toBe(false);
  });
});

describe("reliability in transactional mode on D1 (workerd): effects counted from D1", () => {
  const reports: SimulationReport[] = [];
  const mixes = [
    { faultMix: "crashes at 3 points + handler failures (tx)", handlerFailure: 0.05, crash: { beforeEffect: 0.05, afterEffectBeforeCommit: 0.1, afterCommitBeforeAck: 0.05 } },
    { faultMix: "killed at a random moment mid-batch (tx)", kill: 0.3, killWithinMs: 60, handlerMs: [0, 50] as const },
    { faultMix: "one handler hangs past the deadline (tx)", hang: 0.15, invocationMs: 1_250, deadlineMarginMs: 600, handlerMs: [0, 20] as const },
  ];
  mixes.forEach((mix, m) => {
    it(`D1Store (tx): ${mix.faultMix}: 0 lost, 0 repeated`, { timeout: 300_000 }, async () => {
      const tag = `rel-${m}-${Date.now().toString(36)}`;
      const report = await simulate({
        ...mix,
        store: "D1Store (tx, workerd)",
        backend: new D1Store(db, { namespace: tag }),
        random: seededRandom(6_000 + m),
        messages: 100,
        leaseMs: 1_500,
        visibilityMs: 1_800,
        transactional: { write: write(tag), count: async () => effects(tag) },
      });
      reports.push(report);
      expect(report.lost).toBe(0);
      expect(report.effects).toBe(report.messages);
      expect(report.duplicates.unexplained + report.duplicates.crashWindow + report.duplicates.commitFailed).toBe(0);
    });
  });
  afterAll(() => {
    console.log(`\nReliability in transactional mode on D1 (100 messages per mix)\n${formatSimulationTable(reports)}\n\n${formatWindowTable(reports)}\n`);
  });
});
