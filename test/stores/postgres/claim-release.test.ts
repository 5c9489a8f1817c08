/**
 * PostgresStore's claim step when a statement fails AFTER a claim statement of the same step
 * committed wins — the re-read of rows a concurrent writer committed, or the Go layout's settle:
 * the step rejects, and first releases (fenced by token) every claim it made, so that nothing stays
 * held for ids whose tokens the caller never got (the contract: a whole-step failure rejects "with
 * nothing held for any id"). A failed release never hides the step's own failure.
 *
 * Backend-free, over a scripted pool: a failure between two statements of one step cannot be
 * produced on demand by a real server (the >10,000-id case, where the second statement can be
 * stopped by a lock another session holds, runs on a real PostgreSQL in claim-races.test.ts).
 */
import { describe, expect, it } from "vitest";
import { InvalidOptionError, StoreUnavailableError } from "../../../src/errors.js";
import { type PgResult, PostgresStore } from "../../../entry/postgres.js";
import { type PostgresLayout, layoutStatements } from "../../../stores/postgres/layouts.js";

interface Sent {
  step: string;
  values: unknown[];
}

/**
 * A pool answering each statement of `layout` by its text: the claim wins the first key and leaves
 * the others unseen (NULL status: committed by a concurrent writer after it began); `fail` names the
 * steps that throw a connection error.
 */
function scriptedPool(layout: PostgresLayout, fail: ReadonlySet<string>) {
  const sql = layoutStatements(layout, layout === "babelqueue-serverless" ? "babelqueue_serverless_idempotency" : "t");
  const stepOf = (text: string) => (Object.entries(sql).find(([, statement]) => statement === text)?.[0] ?? text) as string;
  const sent: Sent[] = [];
  const query = async (text: string, values: unknown[] = []): Promise<PgResult> => {
    const step = stepOf(text);
    sent.push({ step, values });
    if (fail.has(step)) throw Object.assign(new Error(`${step}: Connection terminated unexpectedly`), { code: "ECONNRESET" });
    if (step === "claim") {
      const keys = values[0] as string[];
      return { rows: keys.map((_, i) => (i === 0 ? { ord: i + 1, won: true } : { ord: i + 1, won: false, status: null })), rowCount: keys.length };
    }
    return { rows: [], rowCount: 0 };
  };
  return { sent, pool: { query, connect: async () => ({ query, release() {} }) } };
}

const tokens = () => {
  let n = 0;
  return () => `tok-${++n}`;
};

describe("a claim step failing after its claim statement won", () => {
  it("the re-read fails: the step rejects with that failure, after one fenced release of every claim it made", async () => {
    const { sent, pool } = scriptedPool("babelqueue-serverless", new Set(["read"]));
    const store = new PostgresStore({ pool, namespace: "n", token: tokens() });
    const failure = await store.claimMany(["a", "b", "a"]).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(StoreUnavailableError);
    expect((failure as Error).message).toMatch(/read: Connection terminated/);
    expect(sent.map((s) => s.step)).toEqual(["claim", "read", "release"]);
    expect(sent[2]?.values).toEqual([
      ["n:a", "n:b"],
      ["tok-1", "tok-2"],
    ]);
  });

  it("layout babelqueue-go, the settle fails: the won claim is released, on one shared client too", async () => {
    const { sent, pool } = scriptedPool("babelqueue-go", new Set(["settle"]));
    const store = new PostgresStore({ client: { query: pool.query }, layout: "babelqueue-go", table: "t", token: tokens() });
    const failure = await store.claimMany(["a"]).catch((error: unknown) => error);
    expect((failure as Error).message).toMatch(/settle: Connection terminated/);
    expect(sent.map((s) => s.step)).toEqual(["claim", "settle", "release"]);
    expect(sent[2]?.values).toEqual([["a"], ["tok-1"]]);
  });

  it("a release that fails too does not hide the step's own failure", async () => {
    const { sent, pool } = scriptedPool("babelqueue-serverless", new Set(["read", "release"]));
    const store = new PostgresStore({ pool, namespace: "n", token: tokens() });
    const failure = await store.claimMany(["a", "b"]).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(StoreUnavailableError);
    expect((failure as Error).message).toMatch(/read: Connection terminated/);
    expect(sent.map((s) => s.step)).toEqual(["claim", "read", "release"]);
  });

  it("a step that succeeds releases nothing", async () => {
    const { sent, pool } = scriptedPool("babelqueue-serverless", new Set());
    const store = new PostgresStore({ pool, namespace: "n", token: tokens() });
    const answers = await store.claimMany(["a", "b"]);
    expect(answers[0]).toEqual({ status: "claimed", token: "tok-1" });
    expect(sent.map((s) => s.step)).not.toContain("release");
  });
});

describe("the one `client` is one session", () => {
  it("a pool given as `client` is refused at construction (BEGIN and COMMIT would go over different connections); a pg.Client-shaped one is taken", async () => {
    const query = async (): Promise<PgResult> => ({ rows: [], rowCount: 0 });
    const pool = { query, connect: async () => ({ query, release() {} }), totalCount: 0, idleCount: 0, waitingCount: 0 };
    const refused = (() => {
      try {
        new PostgresStore({ client: pool as never });
      } catch (error) {
        return error;
      }
      return undefined;
    })();
    expect(refused).toBeInstanceOf(InvalidOptionError);
    expect((refused as InvalidOptionError).option).toBe("client");
    expect((refused as Error).message).toMatch(/give it as `pool`/);
    // The same pool as `pool`, and a connected client (connect, no counts), are fine.
    expect(new PostgresStore({ pool }).table).toBe("babelqueue_serverless_idempotency");
    expect(new PostgresStore({ client: { query, connect: async () => undefined } }).table).toBe("babelqueue_serverless_idempotency");
    // A pool is all three: connect(), totalCount and idleCount; any two of them alone is not one.
    const connect = async () => undefined;
    for (const client of [{ query, totalCount: 0, idleCount: 0 }, { query, connect, totalCount: 0 }, { query, connect, idleCount: 0 }]) {
      expect(new PostgresStore({ client: client as never }).table, Object.keys(client).join()).toBe("babelqueue_serverless_idempotency");
    }
  });
});
