/**
 * The small parts every store shares, pinned exactly: the fingerprint checks (src/store-kit/fingerprints.ts),
 * the window checks (src/store-kit/windows.ts), the store predicates (src/contract.ts), `txOf`
 * (src/transaction.ts), and InMemoryStore's own edges (expiry on read and sweep, release of a
 * committed id, a non-string id).
 */
import { describe, expect, it } from "vitest";
import { type Store, isClaimingStore, isTransactionalStore } from "../../src/contract.js";
import { BabelQueueServerlessError, InvalidOptionError } from "../../src/errors.js";
import { InMemoryStore } from "../../src/memory-store.js";
import { MAX_FINGERPRINT_LENGTH, checkFingerprint, checkFingerprints, withFingerprint } from "../../src/store-kit/fingerprints.js";
import { NoTransactionError, txOf } from "../../src/transaction.js";
import { checkMs, resolveWindows } from "../../src/store-kit/windows.js";
import { caught } from "../support/caught.js";

describe("store fingerprints", () => {
  it("checkFingerprint: none for undefined and null, a 1-64 character string as is", () => {
    expect(MAX_FINGERPRINT_LENGTH).toBe(64);
    expect(checkFingerprint(undefined)).toBeUndefined();
    expect(checkFingerprint(null)).toBeUndefined();
    expect(checkFingerprint("f")).toBe("f");
    expect(checkFingerprint("f".repeat(64))).toBe("f".repeat(64));
  });

  it("checkFingerprint: anything else is an InvalidOptionError naming the rule", () => {
    for (const bad of ["", "f".repeat(65), 42, {}, ["f"]]) {
      const error = caught(() => checkFingerprint(bad));
      expect(error).toBeInstanceOf(InvalidOptionError);
      expect(error).toMatchObject({
        code: "INVALID_OPTION",
        option: "fingerprint",
        message: 'option "fingerprint" must be a string of 1 to 64 characters',
      });
    }
  });

  it("checkFingerprints: one undefined per id when there are none, else each checked", () => {
    expect(checkFingerprints(undefined, 3)).toStrictEqual([undefined, undefined, undefined]);
    expect(checkFingerprints(null as unknown as undefined, 2)).toStrictEqual([undefined, undefined]);
    expect(checkFingerprints(undefined, 0)).toStrictEqual([]);
    expect(checkFingerprints(["a", undefined, null], 3)).toStrictEqual(["a", undefined, undefined]);
    expect(() => checkFingerprints(["a", ""], 2)).toThrow('option "fingerprint" must be a string of 1 to 64 characters');
  });

  it("checkFingerprints: a list of the wrong length, or not a list, is an InvalidOptionError", () => {
    for (const [bad, count] of [[["a"], 2], [[], 1], [["a", "b"], 1], ["ab", 2], [{ length: 1 }, 1]] as const) {
      const error = caught(() => checkFingerprints(bad as unknown as string[], count));
      expect(error).toBeInstanceOf(InvalidOptionError);
      expect(error).toMatchObject({
        option: "fingerprints",
        message: 'option "fingerprints" must have one entry per id (undefined where there is none)',
      });
    }
  });

  it("withFingerprint: the field only for a non-empty string", () => {
    expect(withFingerprint("f")).toStrictEqual({ fingerprint: "f" });
    expect(withFingerprint("")).toStrictEqual({});
    expect(withFingerprint(undefined)).toStrictEqual({});
    expect(withFingerprint(null)).toStrictEqual({});
  });
});

describe("windows", () => {
  it("checkMs returns a positive finite number and rejects anything else, naming the option", () => {
    expect(checkMs("leaseMs", 1)).toBe(1);
    expect(checkMs("leaseMs", 0.5)).toBe(0.5);
    for (const bad of [0, -1, Number.NaN, Number.POSITIVE_INFINITY, "5", null]) {
      const error = caught(() => checkMs("someMs", bad as number));
      expect(error).toBeInstanceOf(InvalidOptionError);
      expect(error).toMatchObject({ option: "someMs", message: 'option "someMs" must be a positive number of milliseconds' });
    }
  });

  it("resolveWindows applies the defaults and checks each window under its own name", () => {
    expect(resolveWindows({})).toStrictEqual({ leaseMs: 60_000, retentionMs: 345_600_000 });
    expect(resolveWindows({ leaseMs: 5, retentionMs: 7 })).toStrictEqual({ leaseMs: 5, retentionMs: 7 });
    expect(() => resolveWindows({ leaseMs: 0 })).toThrow('option "leaseMs" must be a positive number of milliseconds');
    expect(() => resolveWindows({ retentionMs: -1 })).toThrow('option "retentionMs" must be a positive number of milliseconds');
  });
});

describe("store predicates", () => {
  const fn = async () => undefined;
  const seenSet = { seen: fn, remember: fn, forget: fn };

  it("isClaimingStore needs both claim and release as functions", () => {
    expect(isClaimingStore({ ...seenSet, claim: fn, release: fn } as unknown as Store)).toBe(true);
    expect(isClaimingStore(seenSet as unknown as Store)).toBe(false);
    expect(isClaimingStore({ ...seenSet, claim: fn } as unknown as Store)).toBe(false);
    expect(isClaimingStore({ ...seenSet, release: fn } as unknown as Store)).toBe(false);
    expect(isClaimingStore({ ...seenSet, claim: fn, release: true } as unknown as Store)).toBe(false);
    expect(isClaimingStore(new InMemoryStore())).toBe(true);
  });

  it("isTransactionalStore needs a claiming store with transact as a function", () => {
    expect(isTransactionalStore({ ...seenSet, claim: fn, release: fn, transact: fn } as unknown as Store)).toBe(true);
    expect(isTransactionalStore({ ...seenSet, claim: fn, release: fn } as unknown as Store)).toBe(false);
    expect(isTransactionalStore({ ...seenSet, claim: fn, release: fn, transact: {} } as unknown as Store)).toBe(false);
    expect(isTransactionalStore({ ...seenSet, claim: fn, transact: fn } as unknown as Store)).toBe(false);
    expect(isTransactionalStore(new InMemoryStore())).toBe(false);
  });
});

describe("txOf", () => {
  it("returns the handle, whatever it is, when there is one", () => {
    const handle = { query: () => 1 };
    expect(txOf({ tx: handle })).toBe(handle);
    expect(txOf({ tx: 0 })).toBe(0);
    expect(txOf({ tx: false })).toBe(false);
    expect(txOf({ tx: "" })).toBe("");
  });

  it("throws NoTransactionError when there is none", () => {
    for (const context of [{}, { tx: undefined }, { tx: null }]) {
      const error = caught(() => txOf(context));
      expect(error).toBeInstanceOf(NoTransactionError);
      expect(error).toBeInstanceOf(BabelQueueServerlessError);
      expect(error).toMatchObject({
        name: "NoTransactionError",
        code: "NO_TRANSACTION",
        message:
          "ctx.tx is set only in transactional mode, for a message the engine claimed (a usable meta.id and the store reachable)",
      });
    }
  });
});

describe("InMemoryStore edges", () => {
  it("rejects an id that is not a string with InvalidOptionError", async () => {
    const store = new InMemoryStore();
    for (const call of [
      () => store.claim(42 as unknown as string),
      () => store.seen(42 as unknown as string),
      () => store.remember(undefined as unknown as string),
    ]) {
      const error = await call().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(InvalidOptionError);
      expect(error).toMatchObject({ option: "id", message: 'option "id" must be a string' });
    }
    expect(store.held).toBe(0);
  });

  it("names leaseMs when a claim's lease is bad", async () => {
    const store = new InMemoryStore();
    await expect(store.claim("a", 0)).rejects.toMatchObject({
      option: "leaseMs",
      message: 'option "leaseMs" must be a positive number of milliseconds',
    });
    await expect(store.claimMany(["a"], -1)).rejects.toMatchObject({ option: "leaseMs" });
  });

  /** A store on a settable clock (lease 10 ms, retention 20 ms) holding, from time 0, a claim of "a" and a commit of "b". */
  async function claimAndCommitAtZero() {
    const clock = { ms: 0 };
    const store = new InMemoryStore({ now: () => clock.ms, leaseMs: 10, retentionMs: 20 });
    await store.claim("a");
    await store.remember("b");
    return { store, clock };
  }

  it("drops an expired entry from memory when it is read, exactly at its end", async () => {
    const { store, clock } = await claimAndCommitAtZero();
    clock.ms = 9;
    expect(await store.seen("a")).toBe(false);
    expect(await store.seen("b")).toBe(true);
    expect(store.held).toBe(2);
    clock.ms = 10;
    expect(await store.inspect("a")).toBeNull();
    expect(store.held).toBe(1);
    clock.ms = 20;
    expect(await store.seen("b")).toBe(false);
    expect(store.held).toBe(0);
  });

  it("size sweeps what ends exactly now and keeps what ends later", async () => {
    const { store, clock } = await claimAndCommitAtZero();
    clock.ms = 10;
    expect(store.held).toBe(2);
    expect(store.size).toBe(1);
    expect(store.held).toBe(1);
    clock.ms = 19;
    expect(store.size).toBe(1);
    clock.ms = 20;
    expect(store.size).toBe(0);
  });

  it("release frees only an in-flight claim with its own token, never a committed id", async () => {
    const store = new InMemoryStore({ token: () => "tok" });
    await store.remember("done");
    expect(await store.release("done", "")).toBe(false);
    expect(await store.release("done", "tok")).toBe(false);
    await store.releaseMany([{ id: "done", token: "" }]);
    expect(await store.seen("done")).toBe(true);

    expect(await store.claim("busy")).toStrictEqual({ status: "claimed", token: "tok" });
    expect(await store.release("busy", "other")).toBe(false);
    expect(await store.release("absent", "tok")).toBe(false);
    expect(await store.release("busy", "tok")).toBe(true);
    expect(await store.inspect("busy")).toBeNull();
  });
});
