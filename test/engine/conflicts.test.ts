/**
 * Issue 10's semantics: payload conflicts on a reused id (fingerprints), `wrap` rejecting like
 * BabelQueue's `Wrap`, and seen-set stores whose methods answer synchronously.
 */
import { describe, expect, it } from "vitest";
import type { Store } from "../../src/contract.js";
import { BatchEngine } from "../../src/engine/index.js";
import {
  InFlightError,
  InvalidMessageError,
  PayloadConflictError,
  StoreUnavailableError,
} from "../../src/errors.js";
import { canonicalJson, defaultFingerprint, fingerprintsDiffer, hash128 } from "../../src/fingerprint.js";
import { InMemoryStore } from "../../src/memory-store.js";
import { wrap, wrapResult } from "../../src/wrap.js";
import { envelopeBody } from "../support/envelopes.js";

const SECRET = "4111-1111-1111-1111";

function envelope(id: string, data: Record<string, unknown>, extra: { job?: string; attempts?: number; lang?: string } = {}): string {
  return envelopeBody(id, { job: extra.job ?? "urn:babel:shop:charge", traceId: "t", data, meta: { lang: extra.lang ?? "node" }, attempts: extra.attempts ?? 0 });
}
const one = (body: unknown) => [{ body, context: {} }];

describe("payload fingerprints", () => {
  it("are equal for the same job and data whatever the key order, attempts or meta", async () => {
    const a = await defaultFingerprint({ job: "j", data: { x: 1, y: { b: 2, a: [1, { d: 4, c: 3 }] } }, meta: { lang: "go" }, attempts: 0 });
    const b = await defaultFingerprint({ attempts: 3, meta: { lang: "php" }, data: { y: { a: [1, { c: 3, d: 4 }], b: 2 }, x: 1 }, job: "j" });
    expect(a).toBe(b);
    expect(a).toMatch(/^h1:[A-Za-z0-9_-]{22}$/);
    expect(await defaultFingerprint({ job: "j", data: { x: 2 } })).not.toBe(await defaultFingerprint({ job: "j", data: { x: 1 } }));
    expect(await defaultFingerprint({ job: "k", data: { x: 1 } })).not.toBe(await defaultFingerprint({ job: "j", data: { x: 1 } }));
    expect(canonicalJson(JSON.parse('{"b":1,"__proto__":{"z":1},"a":[2,1]}'))).toBe('{"__proto__":{"z":1},"a":[2,1],"b":1}');
  });

  it("hash128 is stable, spreads, and tells near-identical payloads apart", () => {
    // Pinned: a change of the algorithm would turn every stored fingerprint into a conflict.
    expect(hash128("")).toBe("7TJ-706u8nTH5hq4LH4w-A");
    expect(hash128('{"data":{"amount":5},"job":"charge"}')).toBe("gryawj7HgE0lpfqJS1GVRw");
    expect(defaultFingerprint({ job: "j", data: { x: 1 }, meta: { id: "any" } })).toBe("h1:RjNyBS-qOOYVeEr5K2XhrQ");
    const seen = new Set<string>();
    for (let i = 0; i < 50_000; i += 1) seen.add(hash128(`{"data":{"order":${i},"amount":1299},"job":"orders.charge"}`));
    expect(seen.size).toBe(50_000);
    // One code unit changed anywhere changes about half of the 128 bits.
    const bits = (text: string) => [...text].map((ch) => "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".indexOf(ch).toString(2).padStart(6, "0")).join("");
    const base = "x".repeat(200);
    for (const at of [0, 99, 199]) {
      const flipped = `${base.slice(0, at)}y${base.slice(at + 1)}`;
      const [p, q] = [bits(hash128(base)), bits(hash128(flipped))];
      const differing = [...p].filter((bit, i) => bit !== q[i]).length;
      expect(differing).toBeGreaterThan(40);
      expect(differing).toBeLessThan(92);
    }
    expect(hash128("ab")).not.toBe(hash128("ba"));
    expect(hash128("a")).not.toBe(hash128("a\u0000"));
    expect(fingerprintsDiffer("x", "y")).toBe(true);
    expect(fingerprintsDiffer("x", "x")).toBe(false);
    expect(fingerprintsDiffer(undefined, "y")).toBe(false);
    expect(fingerprintsDiffer("x", undefined)).toBe(false);
  });

  it("a redelivery re-serialised by another SDK is a duplicate, not a conflict", async () => {
    let runs = 0;
    const engine = new BatchEngine(new InMemoryStore(), () => void (runs += 1));
    await engine.process(one(envelope("r", { amount: 5, currency: "EUR" })));
    const again = await engine.process(one(JSON.stringify({ attempts: 2, meta: { lang: "php", schema_version: 1, id: "r" }, data: { currency: "EUR", amount: 5 }, trace_id: "other", job: "urn:babel:shop:charge" })));
    expect(again[0]).toMatchObject({ status: "duplicate", ack: true, key: "r" });
    expect(runs).toBe(1);
  });

  it("a reused id with another payload is a conflict: not run, not acked, named by key and never by payload", async () => {
    let runs = 0;
    const store = new InMemoryStore();
    const engine = new BatchEngine(store, () => void (runs += 1));
    await engine.process(one(envelope("order-1", { card: "1111" })));
    const [reused] = await engine.process(one(envelope("order-1", { card: SECRET })));
    expect(reused).toMatchObject({ status: "conflict", ack: false, handlerRan: false, key: "order-1", dedupe: "claim" });
    const error = reused?.error as PayloadConflictError;
    expect(error).toBeInstanceOf(PayloadConflictError);
    expect(error).toMatchObject({ code: "PAYLOAD_CONFLICT", key: "order-1", state: "done" });
    expect(error.message).toContain("order-1");
    expect(`${error.message} ${JSON.stringify(error)}`).not.toContain(SECRET);
    expect(runs).toBe(1);
    // The stored record is untouched: the original payload is still a duplicate.
    expect((await engine.process(one(envelope("order-1", { card: "1111" }))))[0]?.status).toBe("duplicate");
  });

  it("acks a conflict with onConflict: drop, and reports an in-flight conflict too", async () => {
    const store = new InMemoryStore();
    await store.claim("busy", 60_000, await defaultFingerprint({ job: "urn:babel:shop:charge", data: { n: 1 } }));
    const dropping = new BatchEngine(store, () => undefined, { onConflict: "drop" });
    const [dropped] = await dropping.process(one(envelope("busy", { n: 2 })));
    expect(dropped).toMatchObject({ status: "conflict", ack: true, handlerRan: false });
    expect((dropped?.error as PayloadConflictError).state).toBe("in-flight");
    const [parked] = await new BatchEngine(store, () => undefined).process(one(envelope("busy", { n: 1 })));
    expect(parked).toMatchObject({ status: "in-flight", ack: false });
    expect(() => new BatchEngine(store, () => undefined, { onConflict: "ack" as "drop" })).toThrow(/onConflict/);
  });

  it("a record whose hash is of another version is a duplicate (a deploy that changes the default hash), one of the same version a conflict", async () => {
    const store = new InMemoryStore();
    const later = `h2:${"Q".repeat(22)}`;
    await store.remember("across-deploy", later);
    await store.claim("running-elsewhere", 60_000, later);
    await store.remember("same-version", `h1:${"Q".repeat(22)}`);
    let runs = 0;
    const engine = new BatchEngine(store, () => void (runs += 1));
    const results = await engine.process([
      { body: envelope("across-deploy", { n: 1 }), context: {} },
      { body: envelope("running-elsewhere", { n: 1 }), context: {} },
      { body: envelope("same-version", { n: 1 }), context: {} },
    ]);
    expect(results.map((result) => [result.key, result.status, result.ack])).toEqual([
      ["across-deploy", "duplicate", true],
      ["running-elsewhere", "in-flight", false],
      ["same-version", "conflict", false],
    ]);
    expect(runs).toBe(0);
    // The stored records are untouched.
    expect((await store.inspect("across-deploy"))?.fingerprint).toBe(later);
    expect(await store.inspect("running-elsewhere")).toMatchObject({ status: "in-flight", fingerprint: later });
  });

  it("a record written without a fingerprint matches anything; fingerprint: false turns the check off", async () => {
    const store = new InMemoryStore();
    await store.remember("old");
    const [old] = await new BatchEngine(store, () => undefined).process(one(envelope("old", { any: 1 })));
    expect(old?.status).toBe("duplicate");
    let runs = 0;
    const off = new BatchEngine(store, () => void (runs += 1), { fingerprint: false });
    await off.process(one(envelope("x", { v: 1 })));
    expect((await off.process(one(envelope("x", { v: 2 }))))[0]?.status).toBe("duplicate");
    expect(await store.inspect("x")).toMatchObject({ status: "done" });
    expect((await store.inspect("x"))?.fingerprint).toBeUndefined();
    expect(runs).toBe(1);
  });

  it("a message BabelQueue's PHP SDK re-encoded ({} as [], {\"0\":…} as a list) is a duplicate, not a conflict", async () => {
    // PHP decodes a body into arrays (json_decode(…, true)) and a redrive re-encodes it: an empty
    // object comes back as [], an object keyed 0…n-1 as a list. Same meta.id, same message.
    const store = new InMemoryStore();
    let runs = 0;
    const engine = new BatchEngine(store, () => void (runs += 1));
    const first = await engine.process(one(envelope("php", { order: 1042, options: {}, lines: { "0": "a", "1": "b" }, tags: [] })));
    const redriven = await engine.process(one(envelope("php", { order: 1042, options: [], lines: ["a", "b"], tags: [] }, { attempts: 0, lang: "php" })));
    expect([first[0]?.status, redriven[0]?.status]).toEqual(["ran", "duplicate"]);
    expect(runs).toBe(1);
    expect((await store.inspect("php"))?.fingerprint).toMatch(/^h2:[A-Za-z0-9_-]{22}$/);
    // Another payload under the same id is still a conflict in the h2: form.
    expect((await engine.process(one(envelope("php", { order: 1043, options: [], lines: ["a", "b"], tags: [] }))))[0]?.status).toBe("conflict");
  });

  it("a deploy that turns a fingerprint function on: records of the default hash are not compared with its answers", async () => {
    const store = new InMemoryStore();
    await new BatchEngine(store, () => undefined).process(one(envelope("switch", { v: 1 })));
    const custom = new BatchEngine(store, () => undefined, { fingerprint: (m) => `v${String((m.data as { v: number }).v)}` });
    expect((await custom.process(one(envelope("switch", { v: 1 }))))[0]?.status).toBe("duplicate");
  });

  it("takes a fingerprint function of the message, hashing an over-long answer", async () => {
    const store = new InMemoryStore();
    const engine = new BatchEngine(store, () => undefined, { fingerprint: (m) => `v${String((m.data as { v: number }).v)}`.repeat(40) });
    await engine.process(one(envelope("f", { v: 1, noise: 1 })));
    expect((await store.inspect("f"))?.fingerprint).toMatch(/^f:[A-Za-z0-9_-]{22}$/);
    expect((await engine.process(one(envelope("f", { v: 1, noise: 2 }))))[0]?.status).toBe("duplicate");
    expect((await engine.process(one(envelope("f", { v: 2 }))))[0]?.status).toBe("conflict");
    const throwing = new BatchEngine(new InMemoryStore(), () => undefined, {
      fingerprint: () => {
        throw new Error("bug");
      },
    });
    expect((await throwing.process(one(envelope("t", {}))))[0]?.status).toBe("ran");
  });

  it("a second copy in one batch with another payload is a conflict; the same payload shares the first copy's fate", async () => {
    let runs = 0;
    const engine = new BatchEngine(new InMemoryStore(), () => void (runs += 1));
    const results = await engine.process([
      ...one(envelope("c", { n: 1 })),
      ...one(envelope("c", { n: 1 }, { attempts: 1 })),
      ...one(envelope("c", { n: 2 })),
    ]);
    expect(results.map((r) => [r.status, r.ack])).toEqual([
      ["ran", true],
      ["duplicate", true],
      ["conflict", false],
    ]);
    expect(runs).toBe(1);
  });

  it("after a conflicting first copy, a later copy that matches the stored payload is a plain duplicate", async () => {
    const store = new InMemoryStore();
    let runs = 0;
    const engine = new BatchEngine(store, () => void (runs += 1));
    await engine.process(one(envelope("m", { n: 1 })));
    const results = await engine.process([...one(envelope("m", { n: 2 })), ...one(envelope("m", { n: 1 })), ...one(envelope("m", { n: 3 }))]);
    expect(results.map((r) => [r.status, r.ack])).toEqual([
      ["conflict", false],
      ["duplicate", true],
      ["conflict", false],
    ]);
    expect((results[2]?.error as PayloadConflictError).state).toBe("done");
    expect(runs).toBe(1);
  });

  it("seen-set stores with recallMany report conflicts; without it, by id only", async () => {
    const backing = new InMemoryStore();
    const recalling: Store = {
      seen: (id) => backing.seen(id),
      remember: (id, fp) => backing.remember(id, fp),
      forget: (id) => backing.forget(id),
      recallMany: (ids) => backing.recallMany(ids),
    };
    const engine = new BatchEngine(recalling, () => undefined);
    expect(engine.claimMode).toBe(false);
    await engine.process(one(envelope("s", { n: 1 })));
    expect((await backing.recallMany(["s"]))[0]?.fingerprint).toMatch(/^h1:[A-Za-z0-9_-]{22}$/);
    expect((await engine.process(one(envelope("s", { n: 2 }))))[0]).toMatchObject({ status: "conflict", dedupe: "seen-set", ack: false });
    const plain: Store = { seen: (id) => backing.seen(id), remember: (id) => backing.remember(id), forget: (id) => backing.forget(id) };
    expect((await new BatchEngine(plain, () => undefined).process(one(envelope("s", { n: 2 }))))[0]?.status).toBe("duplicate");
  });
});

describe("wrap: resolves when the delivery may be acked, rejects otherwise", () => {
  it("resolves for a run, a duplicate, a dropped invalid body and a commit that failed after the effect", async () => {
    const store = new InMemoryStore();
    const deliver = wrap(store, () => undefined);
    await expect(deliver(envelope("w", {}))).resolves.toBeUndefined();
    await expect(deliver(envelope("w", {}))).resolves.toBeUndefined();
    await expect(wrap(store, () => undefined, { onInvalid: "drop" })("{not json")).resolves.toBeUndefined();
    const noCommit: Store = { seen: () => false, remember: () => Promise.reject(new Error("down")), forget: () => undefined };
    await expect(wrap(noCommit, () => undefined, { commitRetries: 0 })(envelope("cf", {}))).resolves.toBeUndefined();
  });

  it("rejects with the handler's own error", async () => {
    const mine = new TypeError("card declined");
    await expect(
      wrap(new InMemoryStore(), () => {
        throw mine;
      })(envelope("h", {})),
    ).rejects.toBe(mine);
  });

  it("rejects with typed errors: in flight, store unavailable, invalid body, payload conflict", async () => {
    const store = new InMemoryStore();
    await store.claim("held", 30_000);
    const inFlight = await wrap(store, () => undefined)(envelope("held", {})).catch((e: unknown) => e);
    expect(inFlight).toBeInstanceOf(InFlightError);
    expect(inFlight).toMatchObject({ code: "IN_FLIGHT", key: "held" });
    expect((inFlight as InFlightError).retryAfterMs).toBeGreaterThan(25_000);

    const rawFailure = new Error("ECONNREFUSED");
    const down: Store = { seen: () => Promise.reject(rawFailure), remember: () => undefined, forget: () => undefined };
    const unavailable = await wrap(down, () => undefined)(envelope("d", {})).catch((e: unknown) => e);
    expect(unavailable).toBeInstanceOf(StoreUnavailableError);
    expect((unavailable as StoreUnavailableError).cause).toBe(rawFailure);

    await expect(wrap(store, () => undefined)('{"job":1}')).rejects.toBeInstanceOf(InvalidMessageError);

    await wrap(store, () => undefined)(envelope("p", { a: 1 }));
    await expect(wrap(store, () => undefined)(envelope("p", { a: 2 }))).rejects.toBeInstanceOf(PayloadConflictError);
  });

  it("wrapResult keeps the MessageResult form", async () => {
    const result = await wrapResult(new InMemoryStore(), () => undefined)(envelope("r", {}), { messageId: "m-1" });
    expect(result).toMatchObject({ status: "ran", ack: true, key: "r", dedupe: "claim", handlerRan: true });
  });

  it("works with a seen-set store whose methods answer synchronously (BabelQueue's InMemoryStore shape)", async () => {
    const ids = new Set<string>();
    const syncStore: Store = {
      seen: (id) => ids.has(id),
      remember: (id) => void ids.add(id),
      forget: (id) => void ids.delete(id),
    };
    let runs = 0;
    const deliver = wrap(syncStore, () => void (runs += 1));
    await deliver(envelope("s1", {}));
    await deliver(envelope("s1", {}));
    expect(runs).toBe(1);
    expect([...ids]).toEqual(["s1"]);
    const throwing: Store = {
      seen: () => {
        throw new Error("sync failure");
      },
      remember: () => undefined,
      forget: () => undefined,
    };
    await expect(wrap(throwing, () => undefined)(envelope("s2", {}))).rejects.toBeInstanceOf(StoreUnavailableError);
  });
});
