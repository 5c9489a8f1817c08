/**
 * Large batches on PostgreSQL (SQS with a batching window: up to 10,000 records a batch): a whole
 * batch is ONE statement per store step — its ids travel as one `text[]` parameter — and a step
 * larger than `POSTGRES_MAX_IDS_PER_STATEMENT` (10,000) is split into statements of 10,000, answered
 * in order. Correctness and statement counts only; time and memory per message are measured by
 * bench/postgres-large-batch.ts, never asserted.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { BatchEngine } from "../../../src/engine/index.js";
import { POSTGRES_MAX_IDS_PER_STATEMENT, PostgresStore, createIdempotencyTable } from "../../../entry/postgres.js";
import { countingPool } from "./support.js";

const pool = new pg.Pool({ connectionString: inject("postgresUrl"), max: 10 });
pool.on("error", () => {}); // an idle connection the server drops must not end the test process

beforeAll(() => createIdempotencyTable(pool));
afterAll(() => pool.end());

const body = (id: string) => ({ job: "orders.charge", trace_id: `t-${id}`, data: { id }, meta: { id, schema_version: 1 }, attempts: 0 });
const ids = (count: number, tag: string) => Array.from({ length: count }, (_, i) => `${tag}-${i}`);

describe("PostgresStore with large batches", () => {
  it("a 10,000-record batch: one claim statement, every message runs once and is committed, its redelivery is one statement", async () => {
    expect(POSTGRES_MAX_IDS_PER_STATEMENT).toBe(10_000);
    const sent: string[] = [];
    const store = new PostgresStore({ pool: countingPool(pool, sent), namespace: `large-${Date.now().toString(36)}` });
    const runs = new Map<string, number>();
    const engine = new BatchEngine(
      store,
      async (_envelope, ctx) => {
        runs.set(ctx.key as string, (runs.get(ctx.key as string) ?? 0) + 1);
      },
      { concurrency: 100 },
    );
    const batch = ids(10_000, "m");
    const results = await engine.process(batch.map((id) => ({ body: body(id), context: {} })));
    expect(results.filter((result) => result.status === "ran" && result.ack)).toHaveLength(10_000);
    expect(sent[0]).toBe("INSERT"); // the claim of all 10,000
    expect(sent.length).toBeLessThan(30); // one claim + the group commits
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
    sent.length = 0;
    expect((await store.seenMany(batch)).every(Boolean)).toBe(true);
    expect(sent).toEqual(["SELECT"]);
    sent.length = 0;
    const again = await engine.process(batch.map((id) => ({ body: body(id), redeliveries: 1, context: {} })));
    expect(again.filter((result) => result.status === "duplicate" && result.ack)).toHaveLength(10_000);
    expect(sent).toEqual(["INSERT"]);
  }, 120_000);

  it("a 25,000-id step is three statements of at most 10,000, answered in order", async () => {
    const sent: string[] = [];
    const store = new PostgresStore({ pool: countingPool(pool, sent), namespace: `split-${Date.now().toString(36)}` });
    const step = ids(25_000, "s");
    await store.remember("s-10000", "fp-done");
    const held = await store.claim("s-24999");
    expect(held.status).toBe("claimed");
    sent.length = 0;
    const claims = await store.claimMany(step);
    expect(sent).toEqual(["INSERT", "INSERT", "INSERT"]);
    expect(claims[10_000]).toEqual({ status: "done", fingerprint: "fp-done" });
    expect(claims[24_999]?.status).toBe("in-flight");
    expect(claims.filter((claim) => claim.status === "claimed")).toHaveLength(24_998);
    sent.length = 0;
    const owned = claims.flatMap((claim, i) => (claim.status === "claimed" && i >= 20_000 ? [{ id: step[i] as string, token: claim.token }] : []));
    await store.releaseMany(owned);
    await store.rememberMany(step.slice(0, 20_000));
    expect(sent).toEqual(["DELETE", "INSERT", "INSERT"]);
    sent.length = 0;
    const seen = await store.seenMany(step);
    expect(sent).toEqual(["SELECT", "SELECT", "SELECT"]);
    expect(seen.slice(0, 20_000).every(Boolean)).toBe(true);
    expect(seen.slice(20_000).some(Boolean)).toBe(false);
    expect((await store.claimMany(step.slice(20_000, 24_999))).every((claim) => claim.status === "claimed")).toBe(true);
  }, 120_000);
});
