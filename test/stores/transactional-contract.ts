/**
 * The transactional contract suite: what every `TransactionalStore` (DynamoDB, PostgreSQL, D1) must
 * do in `transact(claim, work)`, beside the store contract suite (contract.ts). A store's test file
 * calls `testTransactionalStore` with a harness that writes one effect through the store's own
 * transaction handle and reads the committed effects back from the backend — effects are counted
 * from the database, never from a counter.
 *
 * Covered: the handler's writes and the commit land together; a throwing handler writes nothing and
 * leaves the claim to the engine; a lost fence (the lease expired and another delivery re-claimed)
 * writes nothing and says `FenceLostError`; and 50 concurrent deliveries of one id, with leases
 * expiring under slow handlers, leave exactly ONE effect.
 *
 * Runtime-neutral: it runs in Node and inside workerd (no `node:` imports, no fs).
 */
import { describe, expect, it } from "vitest";
import type { TransactionalStore } from "../../src/contract.js";
import { FenceLostError } from "../../src/errors.js";

export interface TransactionalHarness<Tx> {
  /** A fresh store in its own namespace. */
  make(namespace: string): TransactionalStore<Tx> | Promise<TransactionalStore<Tx>>;
  /** Adds (or makes) one effect write for `id`, tagged `tag`, through the transaction handle. */
  write(tx: Tx, id: string, tag: string): void | Promise<void>;
  /** The tags of the effects committed for `id`, read from the backend. */
  effects(id: string): Promise<string[]>;
  /** A lease (ms) the race's slow deliveries outlive; their handlers take twice as long. */
  raceLeaseMs: number;
  /** Rounds of the 50-delivery race (default 1). */
  raceRounds?: number;
}

let counter = 0;
const unique = (prefix: string) => `${prefix}-${Date.now().toString(36)}-${(counter += 1)}-${Math.random().toString(36).slice(2, 7)}`;
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A claim this caller owns, for `id`. */
async function owned<Tx>(store: TransactionalStore<Tx>, id: string, leaseMs?: number): Promise<{ id: string; token: string }> {
  const claim = await store.claim(id, leaseMs);
  if (claim.status !== "claimed") throw new Error(`expected to claim ${id}, got ${claim.status}`);
  return { id, token: claim.token };
}

export function testTransactionalStore<Tx>(name: string, harness: TransactionalHarness<Tx>): void {
  describe(`${name}: transactional contract`, () => {
    it("commits the handler's writes and the id together", async () => {
      const store = await harness.make(unique("txc"));
      const id = unique("commit");
      const claim = await owned(store, id);
      await store.transact(claim, async (tx) => harness.write(tx, id, "once"));
      expect(await harness.effects(id)).toEqual(["once"]);
      expect((await store.claim(id)).status).toBe("done");
      expect(await store.seen(id)).toBe(true);
    });

    it("a throwing handler writes nothing and leaves its claim in flight (the engine releases it)", async () => {
      const store = await harness.make(unique("txc"));
      const id = unique("throw");
      const claim = await owned(store, id);
      const boom = new Error("handler failed");
      const failure = await store
        .transact(claim, async (tx) => {
          await harness.write(tx, id, "never");
          throw boom;
        })
        .catch((error: unknown) => error);
      expect(failure).toBe(boom);
      expect(await harness.effects(id)).toEqual([]);
      expect((await store.claim(id)).status).toBe("in-flight");
      expect(await store.release(id, claim.token)).toBe(true);
    });

    it("a lost fence writes nothing: FenceLostError when another delivery re-claimed after the lease", async () => {
      const store = await harness.make(unique("txc"));
      const id = unique("fence");
      const stale = await owned(store, id, harness.raceLeaseMs);
      await sleep(harness.raceLeaseMs * 2);
      const next = await owned(store, id);
      const failure = await store.transact(stale, async (tx) => harness.write(tx, id, "stale")).catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(FenceLostError);
      expect(await harness.effects(id)).toEqual([]);
      await store.transact(next, async (tx) => harness.write(tx, id, "next"));
      expect(await harness.effects(id)).toEqual(["next"]);
    });

    it("an empty or foreign token is a lost fence, and nothing is written", async () => {
      const store = await harness.make(unique("txc"));
      const id = unique("foreign");
      await owned(store, id);
      for (const token of ["", "not-the-owner"]) {
        const failure = await store.transact({ id, token }, async (tx) => harness.write(tx, id, token)).catch((error: unknown) => error);
        expect(failure).toBeInstanceOf(FenceLostError);
      }
      expect(await harness.effects(id)).toEqual([]);
    });

    it("50 concurrent deliveries of one id, leases expiring under slow handlers, produce ONE effect", { timeout: 120_000 }, async () => {
      for (let round = 0; round < (harness.raceRounds ?? 1); round += 1) {
        const store = await harness.make(unique("txc"));
        const id = unique("race");
        const lease = harness.raceLeaseMs;
        let fenceLost = 0;
        let attempts = 0;
        const deliver = async (delivery: number): Promise<void> => {
          for (;;) {
            const claim = await store.claim(id, lease);
            if (claim.status === "done") return;
            if (claim.status === "in-flight") {
              await sleep(Math.max(5, claim.retryAfterMs));
              continue;
            }
            try {
              await store.transact({ id, token: claim.token }, async (tx) => {
                attempts += 1;
                await harness.write(tx, id, `delivery-${delivery}`);
                // The first owner, and every third delivery, outlive their lease: their commit must fail.
                await sleep(attempts === 1 || delivery % 3 === 0 ? lease * 2 : 1);
              });
              return;
            } catch (error) {
              if (!(error instanceof FenceLostError)) throw error;
              fenceLost += 1;
            }
          }
        };
        await Promise.all(Array.from({ length: 50 }, (_, i) => deliver(i)));
        expect(await harness.effects(id)).toHaveLength(1);
        expect(fenceLost).toBeGreaterThanOrEqual(1);
        expect((await store.claim(id)).status).toBe("done");
      }
    });
  });
}
