/**
 * The gate and run phases as units (src/engine/gate.ts, src/engine/run.ts), called directly with
 * hand-built `EngineSettings` (plus the batch's `emit`): what `decode` makes of a delivery, which items `fingerprintAll`
 * fingerprints, which `markCopiesAndBlocked` sends to the store, how `gate` records each store
 * answer (a malformed one included), the lanes of `lanesOf` and what `invoke` tells an
 * interceptor. Mutation testing found these pinned only through whole batches, loosely.
 * On InMemoryStore, and on thin wrappers of it where a store must answer what InMemoryStore never does.
 */
import { describe, expect, it } from "vitest";
import type { ClaimingStore, Store } from "../../src/contract.js";
import { DEFAULT_POLICY, type DecisionPolicy } from "../../src/decision.js";
import type { Envelope } from "../../src/envelope.js";
import { InvalidMessageError, StoreUnavailableError } from "../../src/errors.js";
import type { EngineEvent, RunInfo } from "../../src/events.js";
import { decode, fingerprintAll, gate, markCopiesAndBlocked } from "../../src/engine/gate.js";
import { type EngineSettings, defaultKey, defaultParse, engineSettings } from "../../src/engine/settings.js";
import { settleEach, storeStep } from "../../src/engine/store-step.js";
import { invoke, lanesOf, runLanes } from "../../src/engine/run.js";
import type { Delivery, Item } from "../../src/engine/types.js";
import { InMemoryStore } from "../../src/memory-store.js";
import { claimingView, seenSetView } from "../support/store-views.js";
import { envelopeBody } from "../support/envelopes.js";

const body = (id: string, extra: Record<string, unknown> = {}) => envelopeBody(id, { job: "urn:babel:phases", extra });

/** What the phases read: the engine's settings, and the batch's `emit`. */
type PhaseDeps<M> = EngineSettings<M, object> & { readonly emit: (event: EngineEvent) => void };

function depsWith<M = Envelope>(over: Partial<PhaseDeps<M>> = {}, policy: DecisionPolicy = DEFAULT_POLICY) {
  const events: EngineEvent[] = [];
  const deps: PhaseDeps<M> = {
    ...engineSettings<M, object>(new InMemoryStore(), () => undefined, { fingerprint: false }),
    policy,
    emit: (event) => events.push(event),
    parse: defaultParse as unknown as (b: unknown) => M,
    key: defaultKey,
    fingerprint: undefined,
    ...over,
  };
  return { deps, events };
}

const delivery = (b: unknown, extra: Partial<Delivery<object>> = {}): Delivery<object> => ({ body: b, context: {}, ...extra });

function items<M>(deps: PhaseDeps<M>, deliveries: Delivery<object>[]): Item<M, object>[] {
  return deliveries.map((d, i) => decode(deps, d, i));
}

describe("decode", () => {
  it("a good body: its message, key, reconciled attempts, no dedupe yet, waiting", () => {
    const { deps } = depsWith();
    const item = decode(deps, delivery(body("a", { attempts: 2 }), { redeliveries: 1 }), 3);
    expect({ ...item, message: undefined, delivery: undefined }).toStrictEqual({
      index: 3,
      delivery: undefined,
      message: undefined,
      key: "a",
      attempts: 2,
      dedupe: "none",
      stage: "waiting",
    });
    expect((item.message as Envelope).meta.id).toBe("a");
  });

  it("a parser's own error is reported by kind only; an InvalidMessageError by its reason", () => {
    const secret = "card 4111-1111";
    const { deps } = depsWith<unknown>({
      parse: () => {
        throw new RangeError(secret);
      },
    });
    const item = decode(deps, delivery("x"), 0);
    expect(item.result?.status).toBe("invalid");
    expect((item.result?.error as InvalidMessageError).reason).toBe("parse rejected the body (RangeError)");
    expect(JSON.stringify(item.result)).not.toContain("4111");
    const thrownString = decode(depsWith<unknown>({ parse: () => { throw "nope"; } }).deps, delivery("x"), 0);
    expect((thrownString.result?.error as InvalidMessageError).reason).toBe("parse rejected the body (string)");
    const own = decode(depsWith<unknown>({ parse: () => { throw new InvalidMessageError("'job' is missing"); } }).deps, delivery("x"), 0);
    expect((own.result?.error as InvalidMessageError).reason).toBe("'job' is missing");
  });

  it("a key function that throws makes the message invalid, named by the error's kind, under the policy", () => {
    const thrower = (error: unknown) => () => {
      throw error;
    };
    const { deps } = depsWith({ key: thrower(new TypeError("id of card 4111")) });
    const item = decode(deps, delivery(body("a")), 0);
    expect(item.result).toMatchObject({ status: "invalid", ack: false, handlerRan: false });
    expect((item.result?.error as InvalidMessageError).reason).toBe("the key function threw (TypeError)");
    expect(item.message).toBeUndefined();
    const dropped = decode(depsWith({ key: thrower(42) }, { ...DEFAULT_POLICY, onInvalid: "drop" }).deps, delivery(body("a")), 0);
    expect(dropped.result).toMatchObject({ status: "invalid", ack: true });
    expect((dropped.result?.error as InvalidMessageError).reason).toBe("the key function threw (number)");
  });

  it("only a non-empty string is a key", () => {
    for (const [key, expected] of [["k", "k"], ["", undefined], [undefined, undefined], [7, undefined]] as const) {
      const { deps } = depsWith({ key: () => key as unknown as string });
      const item = decode(deps, delivery(body("a")), 0);
      expect(item.key).toBe(expected);
      expect(item.result).toBeUndefined();
      expect(item.message).toBeDefined();
    }
  });

  it("a parser may return a primitive or null: attempts come from the runtime alone", () => {
    for (const message of [null, "text", 5]) {
      const { deps } = depsWith<unknown>({ parse: () => message, key: () => "k" });
      const item = decode(deps, delivery("raw", { redeliveries: 2 }), 0);
      expect([item.message, item.key, item.attempts, item.result]).toEqual([message, "k", 2, undefined]);
    }
  });

  it("the body's attempts count only when a positive safe integer", () => {
    const { deps } = depsWith<unknown>({ parse: (b) => b, key: () => "k" });
    for (const [attempts, expected] of [[3, 3], [0, 0], [-2, 0], [2.5, 0], ["4", 0], [Number.MAX_SAFE_INTEGER + 2, 0]] as const) {
      expect(decode(deps, delivery({ attempts }), 0).attempts).toBe(expected);
    }
    // An inherited `attempts` is not the body's own.
    expect(decode(deps, delivery(Object.create({ attempts: 9 })), 0).attempts).toBe(0);
  });
});

describe("fingerprintAll", () => {
  it("fingerprints only keyed, valid messages; nothing at all without a fingerprinter", async () => {
    const seen: unknown[] = [];
    const { deps } = depsWith({ fingerprint: (m: Envelope) => { seen.push(m.meta.id); return `fp-${m.meta.id}`; }, key: (m) => (m.meta.id === "nokey" ? undefined : m.meta.id) });
    const list = items(deps, [delivery(body("a")), delivery("not json"), delivery(body("nokey")), delivery(body("b"))]);
    await fingerprintAll(deps, list);
    expect(list.map((item) => item.fingerprint)).toEqual(["fp-a", undefined, undefined, "fp-b"]);
    expect(seen).toEqual(["a", "b"]);

    const none = depsWith().deps;
    const plain = items(none, [delivery(body("a"))]);
    await fingerprintAll(none, plain);
    expect("fingerprint" in (plain[0] as object)).toBe(false);
  });

  it("awaits an async fingerprinter for every item before it resolves", async () => {
    const { deps } = depsWith({ fingerprint: async (m: Envelope) => { await new Promise((r) => setTimeout(r, m.meta.id === "a" ? 20 : 1)); return `async-${m.meta.id}`; } });
    const list = items(deps, [delivery(body("a")), delivery(body("b"))]);
    await fingerprintAll(deps, list);
    expect(list.map((item) => item.fingerprint)).toEqual(["async-a", "async-b"]);
  });
});

describe("markCopiesAndBlocked", () => {
  it("sends first copies to the gate, marks later copies, and gives keyless messages their own gate", () => {
    const { deps } = depsWith({ key: (m) => (m.meta.id === "none" ? undefined : m.meta.id) });
    const list = items(deps, [delivery(body("a")), delivery(body("b")), delivery(body("a")), delivery(body("none")), delivery(body("a"))]);
    const gated = markCopiesAndBlocked(list);
    expect(gated.map((item) => item.index)).toEqual([0, 1]);
    expect(list.map((item) => item.firstCopy)).toEqual([undefined, undefined, 0, undefined, 0]);
    expect(list.map((item) => item.gate)).toEqual([undefined, undefined, undefined, { kind: "no-key" }, undefined]);
  });

  it("an unacknowledged invalid body blocks the rest of its FIFO group only; an acknowledged one blocks nothing", () => {
    const retry = depsWith().deps;
    const list = items(retry, [
      delivery(body("a"), { group: "g" }),
      delivery("bad", { group: "g" }),
      delivery(body("b"), { group: "g" }),
      delivery(body("c"), { group: "h" }),
      delivery("bad"),
      delivery(body("d")),
    ]);
    expect(markCopiesAndBlocked(list).map((item) => item.index)).toEqual([0, 3, 5]);
    expect(list[2]?.gate).toBeUndefined();

    const drop = depsWith({}, { ...DEFAULT_POLICY, onInvalid: "drop" }).deps;
    const dropped = items(drop, [delivery("bad", { group: "g" }), delivery(body("b"), { group: "g" })]);
    expect(markCopiesAndBlocked(dropped).map((item) => item.index)).toEqual([1]);
  });
});

const claimingWith = (overrides: Partial<ClaimingStore>) => claimingView({ batch: false, overrides });

async function gated(store: Store, ids: string[], fingerprints: (string | undefined)[] = []) {
  const { deps, events } = depsWith({ store });
  const list = items(deps, ids.map((id) => delivery(body(id))));
  list.forEach((item, i) => {
    if (fingerprints[i] !== undefined) item.fingerprint = fingerprints[i];
  });
  await gate(deps, deps.emit, list, 1_000);
  return { list, events };
}

describe("gate, claim mode", () => {
  it("records each claim; only a won claim gives the item a token", async () => {
    const inner = new InMemoryStore({ token: () => "tok" });
    await inner.remember("done-id", "fp-done");
    await inner.claim("busy", 60_000);
    const { list, events } = await gated(inner, ["done-id", "busy", "new"]);
    expect(list.map((item) => item.gate?.kind === "claim" && item.gate.claim.status)).toEqual(["done", "in-flight", "claimed"]);
    expect(list.map((item) => item.token)).toEqual([undefined, undefined, "tok"]);
    expect((list[0]?.gate as { claim: { fingerprint?: string } }).claim.fingerprint).toBe("fp-done");
    expect(events.filter((e) => e.type !== "store-step")).toEqual([]);
    const step = events[0] as Extract<EngineEvent, { type: "store-step" }>;
    expect([step.type, step.step, step.ids, step.ok]).toEqual(["store-step", "claim", 3, true]);
    expect(step.durationMs).toBeGreaterThanOrEqual(0);
    expect(step.durationMs).toBeLessThan(60_000);
  });

  it("a claim answer of the wrong shape is a store error of that id, named as such", async () => {
    const answers: unknown[] = [
      null,
      "claimed",
      { status: "claimed", token: "" },
      { status: "claimed", token: "t", fingerprint: 5 },
      { status: "in-flight", retryAfterMs: Number.NaN },
      { status: "in-flight" },
      { status: "gone" },
      { status: "in-flight", retryAfterMs: 0 },
      { status: "done" },
    ];
    const store = claimingWith({ claim: async (id) => answers[Number(id)] as never });
    const { list, events } = await gated(store, answers.map((_, i) => String(i)));
    const kinds = list.map((item) => item.gate?.kind);
    expect(kinds).toEqual(["store-error", "store-error", "store-error", "store-error", "store-error", "store-error", "store-error", "claim", "claim"]);
    const error = (list[0]?.gate as { error: StoreUnavailableError }).error;
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect([error.operation, error.message]).toEqual(["claim", "store.claim failed: returned an answer of the wrong shape"]);
    expect(list[0]?.gate).toMatchObject({ kind: "store-error", mode: "claim" });
    // Malformed answers are the engine's finding, not store errors the store reported: the step itself succeeded.
    expect(events.map((e) => e.type)).toEqual(["store-step"]);
  });

  it("a store that throws for one id fails that id alone, and the step reports the first error", async () => {
    const boom = new Error("down");
    const store = claimingWith({ claim: async (id) => { if (id === "b") throw boom; return { status: "claimed", token: `t-${id}` }; } });
    const { list, events } = await gated(store, ["a", "b"]);
    expect(list.map((item) => item.gate?.kind)).toEqual(["claim", "store-error"]);
    expect(list[1]?.gate).toEqual({ kind: "store-error", mode: "claim", error: boom });
    expect(events.map((e) => (e.type === "store-step" ? [e.type, e.step, e.ids, e.ok] : e))).toEqual([
      ["store-step", "claim", 2, false],
      { type: "store-error", step: "claim", ids: 1, error: boom },
    ]);
  });
});

describe("gate, seen-set mode", () => {
  const seenOnly = seenSetView;

  it("recallMany: the stored fingerprint is kept when there is one, and no fingerprint field when not", async () => {
    const inner = new InMemoryStore();
    await inner.remember("a", "fp-a");
    await inner.remember("b");
    const { list, events } = await gated(seenOnly(inner, { recallMany: (ids) => inner.recallMany(ids) }), ["a", "b", "c"]);
    expect(list.map((item) => item.gate)).toStrictEqual([
      { kind: "seen", seen: true, fingerprint: "fp-a" },
      { kind: "seen", seen: true },
      { kind: "seen", seen: false },
    ]);
    expect(events.map((e) => e.type === "store-step" && [e.step, e.ids, e.ok])).toEqual([["seen", 3, true]]);
  });

  it("seenMany's booleans become recalls; per-id seen when there is no batch form", async () => {
    const inner = new InMemoryStore();
    await inner.remember("a", "fp-a");
    const viaMany = await gated(seenOnly(inner, { seenMany: (ids) => inner.seenMany(ids) }), ["a", "b"]);
    expect(viaMany.list.map((item) => item.gate)).toStrictEqual([{ kind: "seen", seen: true }, { kind: "seen", seen: false }]);
    const perId = await gated(seenOnly(inner), ["a", "b"]);
    expect(perId.list.map((item) => item.gate)).toStrictEqual([{ kind: "seen", seen: true }, { kind: "seen", seen: false }]);
    expect(perId.events.map((e) => e.type === "store-step" && e.step)).toEqual(["seen"]);
  });

  it("a recall of the wrong shape is a seen-set store error", async () => {
    const answers: unknown[] = [null, 1, { seen: "yes" }, { seen: true, fingerprint: 3 }, { seen: false }, { seen: true, fingerprint: "f" }];
    const store = seenOnly(new InMemoryStore(), { recallMany: async () => answers as never });
    const { list } = await gated(store, answers.map((_, i) => String(i)));
    expect(list.map((item) => item.gate?.kind)).toEqual(["store-error", "store-error", "store-error", "store-error", "seen", "seen"]);
    const error = (list[0]?.gate as { error: StoreUnavailableError }).error;
    expect([error.operation, error.message]).toEqual(["seen", "store.seen failed: returned an answer of the wrong shape"]);
    expect(list[0]?.gate).toMatchObject({ kind: "store-error", mode: "seen-set" });
  });

  it("nothing to gate: no store step at all", async () => {
    const { deps, events } = depsWith();
    await gate(deps, deps.emit, [], 1_000);
    expect(events).toEqual([]);
  });
});

describe("storeStep and settleEach", () => {
  it("a batch form that throws or answers the wrong length fails every id with one error", async () => {
    const { deps, events } = depsWith();
    const boom = new Error("boom");
    const thrown = await storeStep(deps.emit, "commit", 2, async () => { throw boom; }, () => 0);
    expect(thrown).toEqual([{ ok: false, error: boom }, { ok: false, error: boom }]);
    const short = await storeStep(deps.emit, "release", 2, async () => [1], () => 0);
    expect(short.map((a) => !a.ok && (a.error as Error).message)).toEqual(["store.releaseMany failed: returned an answer of the wrong shape", "store.releaseMany failed: returned an answer of the wrong shape"]);
    const good = await storeStep(deps.emit, "seen", 2, async () => [1, 2], () => 0);
    expect(good).toEqual([{ ok: true, value: 1 }, { ok: true, value: 2 }]);
    expect(events.map((e) => (e.type === "store-step" ? `${e.step}:${e.ids}:${e.ok}` : `${e.type}:${e.type === "store-error" ? e.ids : ""}`))).toEqual([
      "commit:2:false",
      "store-error:2",
      "release:2:false",
      "store-error:2",
      "seen:2:true",
    ]);
  });

  it("settleEach catches a synchronous throw as well as a rejection", async () => {
    const error = new Error("sync");
    expect(await settleEach([() => 1, () => { throw error; }, async () => Promise.reject(error)])).toEqual([
      { ok: true, value: 1 },
      { ok: false, error },
      { ok: false, error },
    ]);
  });
});

describe("lanesOf and runLanes", () => {
  it("one lane per ungrouped runnable message, one per group in order; copies and decided ungrouped messages get none", () => {
    const { deps } = depsWith();
    const list = items(deps, [
      delivery(body("a")),
      delivery(body("g1"), { group: "g" }),
      delivery("bad"),
      delivery(body("a")),
      delivery("bad", { group: "g" }),
      delivery(body("h1"), { group: "h" }),
      delivery(body("g2"), { group: "g" }),
    ]);
    markCopiesAndBlocked(list);
    expect(lanesOf(list).map((lane) => lane.map((item) => item.index))).toEqual([[0], [1, 4, 6], [5]]);
  });

  it("runs at most `limit` lanes at once, blocks a lane's rest at its first refusal, and starts nothing once stopped", async () => {
    let running = 0;
    let peak = 0;
    const order: string[] = [];
    const blocked: string[][] = [];
    await runLanes(
      [["a1", "a2", "a3"], ["b1"], ["c1"], ["d1"]],
      2,
      () => false,
      async (item) => {
        running += 1;
        peak = Math.max(peak, running);
        await new Promise((r) => setTimeout(r, 2));
        running -= 1;
        order.push(item);
        return item !== "a2";
      },
      (rest) => blocked.push([...rest]),
    );
    expect(peak).toBe(2);
    expect(order.sort()).toEqual(["a1", "a2", "b1", "c1", "d1"]);
    expect(blocked).toEqual([["a3"]]);

    let stop = false;
    const ran: string[] = [];
    await runLanes([["x1", "x2"], ["y1"]], 1, () => stop, async (item) => { ran.push(item); stop = true; return true; }, () => {});
    expect(ran).toEqual(["x1"]);
  });
});

describe("invoke", () => {
  function oneItem(extra: Partial<Delivery<object>> = {}, message: unknown = undefined) {
    const { deps } = depsWith<unknown>(message === undefined ? {} : { parse: () => message, key: () => "k" });
    return decode(deps, delivery(body("a"), { context: { runtime: "ctx" }, ...extra }), 4);
  }

  it("the handler gets the runtime's context with the engine's facts; an interceptor gets the run's info", async () => {
    const item = oneItem({ messageId: "m-1", headers: { traceparent: "00-abc" }, redeliveries: 1 });
    const contexts: unknown[] = [];
    const infos: RunInfo[] = [];
    const outcome = await invoke((_m, context) => void contexts.push(context), async (run, info) => { infos.push(info); await run(); }, item);
    expect(outcome).toEqual({ ok: true });
    expect(contexts).toStrictEqual([{ runtime: "ctx", key: "a", attempts: 1, dedupe: "none" }]);
    expect(infos).toStrictEqual([{ index: 4, key: "a", attempts: 1, messageId: "m-1", headers: { traceparent: "00-abc" }, traceId: "trace-a" }]);
  });

  it("the info has no messageId, headers or traceId fields when the delivery and the message have none", async () => {
    const infoOf = async (item: Item<unknown, object>) => {
      let seen: RunInfo | undefined;
      await invoke(() => {}, async (run, info) => { seen = info; await run(); }, item);
      return seen;
    };
    expect(await infoOf(oneItem())).toStrictEqual({ index: 4, key: "a", attempts: 0, traceId: "trace-a" });
    for (const message of [null, "text", { trace_id: "   " }, { trace_id: 12 }, Object.create({ trace_id: "inherited" })]) {
      expect(await infoOf(oneItem({}, message))).toStrictEqual({ index: 4, key: "k", attempts: 0 });
    }
    expect(await infoOf(oneItem({}, { trace_id: " spaced " }))).toStrictEqual({ index: 4, key: "k", attempts: 0, traceId: " spaced " });
  });

  it("a throwing handler is an outcome, not a throw; its time is measured either way", async () => {
    const error = new Error("card declined");
    const item = oneItem();
    const outcome = await invoke(async () => { await new Promise((r) => setTimeout(r, 15)); throw error; }, undefined, item);
    expect(outcome).toEqual({ ok: false, error });
    expect(item.handlerMs).toBeGreaterThanOrEqual(10);
    expect(item.handlerMs).toBeLessThan(10_000);
    const tx = { handle: 1 };
    const seen: unknown[] = [];
    await invoke((_m, context) => void seen.push(context.tx), undefined, item, { tx });
    expect(seen).toEqual([tx]);
  });
});
