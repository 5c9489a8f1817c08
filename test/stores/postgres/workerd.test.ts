/**
 * `PostgresStore` inside workerd, the Workers path (Hyperdrive hands a Worker a connection string;
 * `pg` connects over `cloudflare:sockets` with `nodejs_compat`): esbuild bundles a tiny Worker with
 * `pg` and the store, plain Miniflare runs it with `nodejs_compat`, and the Worker claims and
 * commits transactionally against the real PostgreSQL the global setup started on loopback.
 * The effects are counted from the database, from Node.
 */
import type { Miniflare } from "miniflare";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createIdempotencyTable } from "../../../entry/postgres.js";
import { startBundledWorker } from "../../support/bundled-worker.js";

const TABLE = "workerd_idempotency";
const EFFECTS = "workerd_effects";

const WORKER = `
import { Client } from "pg";
import { PostgresStore } from "./entry/postgres.ts";

export default {
  async fetch(request, env) {
    const q = new URL(request.url).searchParams;
    const id = q.get("id");
    const client = new Client({ connectionString: env.PG_URL });
    await client.connect();
    try {
      const store = new PostgresStore({ client, table: "${TABLE}", namespace: "workerd" });
      const claim = await store.claim(id, Number(q.get("lease") ?? 60000));
      if (claim.status !== "claimed") return Response.json({ claim });
      if (q.get("sleep")) await new Promise((resolve) => setTimeout(resolve, Number(q.get("sleep"))));
      try {
        await store.transact({ id, token: claim.token }, async (tx) => {
          await tx.query("INSERT INTO ${EFFECTS} (message_id) VALUES ($1)", [id]);
        });
      } catch (error) {
        return Response.json({ error: error.name });
      }
      return Response.json({ committed: true, after: await store.claim(id) });
    } finally {
      await client.end();
    }
  },
};
`;

const url = inject("postgresUrl");
const pool = new pg.Pool({ connectionString: url });
pool.on("error", () => {}); // an idle connection the server drops must not end the test process
let mf: Miniflare;

beforeAll(async () => {
  await createIdempotencyTable(pool, TABLE);
  await pool.query(`CREATE TABLE IF NOT EXISTS ${EFFECTS} (message_id text NOT NULL)`);
  mf = await startBundledWorker(WORKER, {
    bundle: {
      platform: "node",
      conditions: ["workerd", "worker"],
      external: ["cloudflare:sockets", "pg-native"],
      // pg is CommonJS: its require("events") etc. resolve through nodejs_compat's node:module.
      banner: { js: 'import { createRequire as __createRequire } from "node:module"; const require = __createRequire("/");' },
    },
    compatibilityFlags: ["nodejs_compat"],
    bindings: { PG_URL: url },
  });
}, 60_000);

afterAll(async () => {
  await mf?.dispose();
  await pool.end();
});

const call = async (query: string) => (await mf.dispatchFetch(`http://worker/?${query}`)).json() as Promise<Record<string, unknown>>;
const effectsOf = async (id: string) => (await pool.query(`SELECT count(*)::int AS n FROM ${EFFECTS} WHERE message_id = $1`, [id])).rows[0].n as number;

describe("PostgresStore in workerd (pg + nodejs_compat)", () => {
  it("claims and commits transactionally from a Worker: one effect row, then done", async () => {
    const id = `w-${Date.now()}`;
    expect(await call(`id=${id}`)).toEqual({ committed: true, after: { status: "done" } });
    expect(await call(`id=${id}`)).toEqual({ claim: { status: "done" } });
    expect(await effectsOf(id)).toBe(1);
  });

  it("refuses the commit of a Worker whose lease ran out: FenceLostError, no effect row", async () => {
    const id = `w-late-${Date.now()}`;
    expect(await call(`id=${id}&lease=100&sleep=250`)).toEqual({ error: "FenceLostError" });
    expect(await effectsOf(id)).toBe(0);
  });
});
