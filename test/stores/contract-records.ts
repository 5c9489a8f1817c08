/**
 * The store contract suite, part two: what a store keeps about an id beyond "seen" — the payload
 * fingerprint stored with a claim or a commit and handed back on `done` / `in-flight` answers, the
 * seen-set's `recallMany`, and the operator's `inspect`. Called by `testStore` (contract.ts)
 * inside its describe block; never on its own.
 *
 * A part runs only for the stores that have the feature: claim tests for claiming stores,
 * `recallMany` and `inspect` tests for stores that implement them (skipped, with the reason, for
 * the others).
 *
 * Runtime-neutral: it runs in Node and inside workerd (no `node:` imports, no fs).
 */
import { describe, expect, it } from "vitest";
import type { Claim, ClaimingStore, Store } from "../../src/contract.js";

/** What `testStore` hands this part: its factories, its clock and its windows. */
export interface RecordSuiteContext<S extends Store> {
  name: string;
  claims: boolean;
  fake: boolean;
  /** A window no test outlives (the default lease and retention of `make`). */
  long: number;
  /** A short window, for the tests that wait for it to pass. */
  short: number;
  scale: number;
  make(options?: { leaseMs?: number; retentionMs?: number }): Promise<S>;
  makeClaiming(options?: { leaseMs?: number; retentionMs?: number }): Promise<ClaimingStore>;
  advance(ms: number): Promise<void>;
  /** Waits past a `short` window. */
  pastShort(): Promise<void>;
  itRetention: typeof it | typeof it.skip;
  itLease: typeof it | typeof it.skip;
  /** Tests of a commit WITHOUT a fingerprint keeping the claim's (a store whose commit is a blind write skips them). */
  itKeepsFingerprint: typeof it | typeof it.skip;
  /** Tests of a committed id's fingerprint (a layout whose committed records have no room for one skips them). */
  itDoneFingerprint: typeof it | typeof it.skip;
  /** The store keeps committed ids forever: `inspect` answers `retentionLeftMs: Infinity`. */
  keepsForever?: boolean;
}

/** Fingerprints that would break a lossy transport or a naive value layout. */
const ODD_FINGERPRINTS: readonly string[] = [
  "sha256:3f1a9c",
  "a:b:c:",
  "123",
  "true",
  "null",
  '"quoted"',
  "{}",
  " spaced ",
  "ünïcødé ☕",
  "f".repeat(64),
];

/** The fields of an answer, sorted: a store must omit `fingerprint` when it has none, not send it empty. */
const fields = (value: object | null | undefined): string[] => Object.keys(value ?? {}).sort();

async function claimAll(store: ClaimingStore, ids: string[], fingerprints?: (string | undefined)[]): Promise<Claim[]> {
  if (store.claimMany) {
    // A healthy backend decides every id: a per-id `ClaimFailure` here is a test failure.
    return (await store.claimMany(ids, undefined, fingerprints)).map((answer) => {
      if (answer.status === "failed") throw new Error(`claimMany failed one id: ${String(answer.error)}`);
      return answer;
    });
  }
  return Promise.all(ids.map((id, i) => store.claim(id, undefined, fingerprints?.[i])));
}

async function rememberAll(store: Store, ids: string[], fingerprints?: (string | undefined)[]): Promise<void> {
  if (store.rememberMany) await store.rememberMany(ids, fingerprints);
  else for (const [i, id] of ids.entries()) await store.remember(id, fingerprints?.[i]);
}

export function testRecords<S extends Store>(ctx: RecordSuiteContext<S>): void {
  const { fake, long, itRetention, itLease, itKeepsFingerprint, itDoneFingerprint } = ctx;

  if (ctx.claims) {
    describe("fingerprints on claims", () => {
      it("claim stores the fingerprint and in-flight answers return it, odd ones exactly", async () => {
        const store = await ctx.makeClaiming();
        expect((await store.claim("f", undefined, "fp-A")).status).toBe("claimed");
        expect(await store.claim("f", undefined, "fp-other")).toMatchObject({ status: "in-flight", fingerprint: "fp-A" });
        const ids = ODD_FINGERPRINTS.map((_, i) => `odd-${i}`);
        await claimAll(store, ids, [...ODD_FINGERPRINTS]);
        const held = await claimAll(store, ids);
        expect(held.map((claim) => (claim.status === "in-flight" ? claim.fingerprint : claim.status))).toEqual(ODD_FINGERPRINTS);
      });

      itDoneFingerprint("claim stores the fingerprint; in-flight and done answers return it, and remember with it keeps it", async () => {
        const store = await ctx.makeClaiming();
        expect((await store.claim("f", undefined, "fp-A")).status).toBe("claimed");
        expect(await store.claim("f", undefined, "fp-other")).toMatchObject({ status: "in-flight", fingerprint: "fp-A" });
        // What the engine does: the commit carries the message's fingerprint.
        await store.remember("f", "fp-A");
        expect(await store.claim("f", undefined, "fp-other")).toStrictEqual({ status: "done", fingerprint: "fp-A" });
      });

      itKeepsFingerprint("remember without a fingerprint keeps the claim's", async () => {
        const store = await ctx.makeClaiming();
        expect((await store.claim("f", undefined, "fp-A")).status).toBe("claimed");
        const held = await store.claim("f", undefined, "fp-other");
        expect(held).toMatchObject({ status: "in-flight", fingerprint: "fp-A" });
        await store.remember("f");
        expect(await store.claim("f", undefined, "fp-other")).toStrictEqual({ status: "done", fingerprint: "fp-A" });
        expect(await store.seen("f")).toBe(true);
      });

      itKeepsFingerprint("batch forms: mixed fingerprints and undefined entries in one batch, each answered as stored", async () => {
        const store = await ctx.makeClaiming();
        const first = await claimAll(store, ["a", "b", "c"], ["fp-a", undefined, "fp-c"]);
        expect(first.map((claim) => claim.status)).toEqual(["claimed", "claimed", "claimed"]);
        const again = await claimAll(store, ["a", "b", "c", "d"]);
        expect(again.map((claim) => claim.status)).toEqual(["in-flight", "in-flight", "in-flight", "claimed"]);
        expect(again[0]).toMatchObject({ fingerprint: "fp-a" });
        expect(fields(again[1])).toEqual(["retryAfterMs", "status"]);
        expect(again[2]).toMatchObject({ fingerprint: "fp-c" });
        // The commit keeps the claim's fingerprint where none is passed, stores the passed one otherwise.
        await rememberAll(store, ["a", "b", "c", "d"], [undefined, "fp-b2", "fp-c2", undefined]);
        expect(await claimAll(store, ["a", "b", "c", "d"], ["x", "x", "x", "x"])).toStrictEqual([
          { status: "done", fingerprint: "fp-a" },
          { status: "done", fingerprint: "fp-b2" },
          { status: "done", fingerprint: "fp-c2" },
          { status: "done" },
        ]);
        // The single-id form answers the same.
        expect(await store.claim("b")).toStrictEqual({ status: "done", fingerprint: "fp-b2" });
      });

      it("a claim without a fingerprint answers none, in flight and done, even when a later claim passes one", async () => {
        const store = await ctx.makeClaiming();
        expect((await store.claim("n")).status).toBe("claimed");
        const held = await store.claim("n", undefined, "fp-late");
        expect(held.status).toBe("in-flight");
        expect(fields(held)).toEqual(["retryAfterMs", "status"]);
        await store.remember("n");
        expect(await store.claim("n", undefined, "fp-late")).toStrictEqual({ status: "done" });
      });

      itDoneFingerprint("remember with a fingerprint, claimed or not, is answered by the next claim", async () => {
        const store = await ctx.makeClaiming();
        await store.remember("never-claimed", "fp-R");
        expect(await store.claim("never-claimed")).toStrictEqual({ status: "done", fingerprint: "fp-R" });
        await store.claim("claimed", undefined, "fp-C");
        await store.remember("claimed", "fp-R2");
        expect(await store.claim("claimed")).toStrictEqual({ status: "done", fingerprint: "fp-R2" });
      });

      itDoneFingerprint("round-trips odd fingerprints exactly (separators, JSON look-alikes, unicode, 64 characters)", async () => {
        const store = await ctx.makeClaiming();
        const ids = ODD_FINGERPRINTS.map((_, i) => `odd-${i}`);
        await claimAll(store, ids, [...ODD_FINGERPRINTS]);
        const held = await claimAll(store, ids);
        expect(held.map((claim) => (claim.status === "in-flight" ? claim.fingerprint : claim.status))).toEqual(ODD_FINGERPRINTS);
        await rememberAll(store, ids, [...ODD_FINGERPRINTS]);
        const done = await claimAll(store, ids);
        expect(done.map((claim) => (claim.status === "done" ? claim.fingerprint : claim.status))).toEqual(ODD_FINGERPRINTS);
      });

      it("release still fences by token when the claim carries a fingerprint", async () => {
        const store = await ctx.makeClaiming();
        const claim = await store.claim("r", undefined, "fp-r");
        if (claim.status !== "claimed") throw new Error("expected claimed");
        expect(await store.release("r", "not-the-token")).toBe(false);
        expect(await store.release("r", `${claim.token}:fp-r`)).toBe(false);
        expect(await store.release("r", claim.token)).toBe(true);
        expect(await store.claim("r", undefined, "fp-r2")).toMatchObject({ status: "claimed" });
        expect(await store.claim("r")).toMatchObject({ status: "in-flight", fingerprint: "fp-r2" });
      });

      itLease("an expired claim's fingerprint goes with it", async () => {
        const store = await ctx.makeClaiming();
        await store.claim("e", ctx.short, "fp-old");
        await ctx.pastShort();
        expect((await store.claim("e", long, "fp-new")).status).toBe("claimed");
        expect(await store.claim("e")).toMatchObject({ status: "in-flight", fingerprint: "fp-new" });
      });
    });
  }

  describe("recallMany (seen-set with fingerprints)", () => {
    const recalling = async (): Promise<S & Required<Pick<Store, "recallMany">>> => {
      const store = await ctx.make();
      if (typeof store.recallMany !== "function") throw new Error("no recallMany");
      return store as S & Required<Pick<Store, "recallMany">>;
    };
    let has: boolean | undefined;
    const itRecall = (title: string, body: () => Promise<void>) =>
      it(title, async (test) => {
        has ??= typeof (await ctx.make()).recallMany === "function";
        if (!has) test.skip(`${ctx.name} has no recallMany`);
        await body();
      });

    itRecall("answers seen and the remembered fingerprint, per id and in order, like seenMany", async () => {
      const store = await recalling();
      await store.remember("r1", "fp-1");
      await store.remember("r2");
      await rememberAll(store, ["r3", "r4"], ["fp-3", undefined]);
      const ids = ["r1", "r2", "r3", "r4", "unknown", "r1"];
      const recalled = await store.recallMany(ids);
      expect(recalled).toStrictEqual([
        { seen: true, fingerprint: "fp-1" },
        { seen: true },
        { seen: true, fingerprint: "fp-3" },
        { seen: true },
        { seen: false },
        { seen: true, fingerprint: "fp-1" },
      ]);
      if (store.seenMany) expect(await store.seenMany(ids)).toEqual(recalled.map((r) => r.seen));
      expect(await store.recallMany([])).toEqual([]);
      await store.forget("r1");
      expect(await store.recallMany(["r1"])).toStrictEqual([{ seen: false }]);
    });

    itRecall("round-trips odd fingerprints exactly", async () => {
      const store = await recalling();
      const ids = ODD_FINGERPRINTS.map((_, i) => `odd-${i}`);
      await rememberAll(store, ids, [...ODD_FINGERPRINTS]);
      expect((await store.recallMany(ids)).map((r) => r.fingerprint)).toEqual(ODD_FINGERPRINTS);
    });

    itRecall("a later remember with another fingerprint replaces the first", async () => {
      const store = await recalling();
      await store.remember("k", "fp-k");
      await store.remember("k", "fp-k2");
      expect(await store.recallMany(["k"])).toStrictEqual([{ seen: true, fingerprint: "fp-k2" }]);
    });

    if (ctx.claims) {
      itRecall("an id in flight is not seen", async () => {
        const store = await recalling();
        await (store as unknown as ClaimingStore).claim("held", undefined, "fp-h");
        expect(await store.recallMany(["held"])).toStrictEqual([{ seen: false }]);
      });
    }
  });

  describe("inspect", () => {
    let has: boolean | undefined;
    const itInspect = (test: typeof it | typeof it.skip, title: string, body: () => Promise<void>) =>
      test(title, async (t) => {
        has ??= typeof (await ctx.make()).inspect === "function";
        if (!has) t.skip(`${ctx.name} has no inspect`);
        await body();
      });
    const inspectOf = (store: Store, id: string) => (store.inspect as NonNullable<Store["inspect"]>).call(store, id);

    itInspect(itDoneFingerprint, "is null for an unknown id and after forget; done with the retention left and the fingerprint", async () => {
      const store = await ctx.make();
      expect(await inspectOf(store, "unknown")).toBeNull();
      await store.remember("d", "fp-d");
      const done = await inspectOf(store, "d");
      expect(done).toMatchObject({ status: "done", fingerprint: "fp-d" });
      expect(fields(done)).toEqual(["fingerprint", "retentionLeftMs", "status"]);
      if (ctx.keepsForever) expect(done?.retentionLeftMs).toBe(Number.POSITIVE_INFINITY);
      else {
        expect(done?.retentionLeftMs).toBeGreaterThan(long / 2);
        expect(done?.retentionLeftMs).toBeLessThanOrEqual(long + 1000);
      }
      await store.remember("plain");
      expect(fields(await inspectOf(store, "plain"))).toEqual(["retentionLeftMs", "status"]);
      await store.forget("d");
      expect(await inspectOf(store, "d")).toBeNull();
    });

    if (ctx.claims) {
      itInspect(itDoneFingerprint, "in flight: the lease left (roughly the lease), the claim's fingerprint; then done; then null after forget", async () => {
        const lease = fake ? 60_000 : Math.round(5_000 * ctx.scale);
        const store = await ctx.makeClaiming();
        await store.claim("i", lease, "fp-i");
        const held = await inspectOf(store, "i");
        expect(held).toMatchObject({ status: "in-flight", fingerprint: "fp-i" });
        expect(fields(held)).toEqual(["fingerprint", "leaseLeftMs", "status"]);
        expect(held?.leaseLeftMs).toBeGreaterThan(lease / 2);
        expect(held?.leaseLeftMs).toBeLessThanOrEqual(lease + 1000);
        await store.claim("plain", lease);
        expect(fields(await inspectOf(store, "plain"))).toEqual(["leaseLeftMs", "status"]);
        await store.remember("i", "fp-i");
        const done = await inspectOf(store, "i");
        expect(done).toMatchObject({ status: "done", fingerprint: "fp-i" });
        expect(done?.retentionLeftMs).toBeGreaterThan(long / 2);
        await store.forget("i");
        expect(await inspectOf(store, "i")).toBeNull();
      });

      itInspect(itLease, "is null once the lease has expired", async () => {
        const store = await ctx.makeClaiming();
        await store.claim("x", ctx.short, "fp-x");
        await ctx.pastShort();
        expect(await inspectOf(store, "x")).toBeNull();
      });
    }

    itInspect(itRetention, "is null once the retention has expired", async () => {
      const store = await ctx.make({ retentionMs: ctx.short });
      await store.remember("r", "fp-r");
      expect((await inspectOf(store, "r"))?.status).toBe("done");
      await ctx.pastShort();
      expect(await inspectOf(store, "r")).toBeNull();
    });
  });
}
