/**
 * The batch engine and the decision table (docs/ARCHITECTURE.md: the decision table, the batch engine) on InMemoryStore. Store outages are
 * simulated by a wrapper that throws: InMemoryStore itself cannot be made unreachable, and the
 * real-backend outage tests live with each store.
 */
import { describe, expect, it } from "vitest";
import type { Claim, ClaimingStore, Store } from "../../src/contract.js";
import { BatchEngine, type Delivery, type EngineEvent } from "../../src/engine/index.js";
import { GroupBlockedError, InvalidMessageError, InvalidOptionError, StoreUnavailableError } from "../../src/errors.js";
import { InMemoryStore } from "../../src/memory-store.js";
import { wrap, wrapResult } from "../../src/wrap.js";
import { envelopeBody } from "../support/envelopes.js";

let counter = 0;
function envelope(id: string | undefined | number, extra: Record<string, unknown> = {}) {
  counter += 1;
  return envelopeBody(id, { job: "urn:babel:test:ran", traceId: `trace-${counter}`, data: { ...extra }, meta: { queue: "q", lang: "node", created_at: 0 } });
}
const deliveries = (bodies: unknown[], group?: (i: number) => string | undefined): Delivery<object>[] =>
  bodies.map((body, i) => ({ body, context: {}, ...(group?.(i) === undefined ? {} : { group: group(i) as string }) }));

/** Counts store calls by method name. */
function counted<S extends Store>(store: S): { store: S; calls: Record<string, number> } {
  const calls: Record<string, number> = {};
  const proxy = new Proxy(store, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown;
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        calls[String(property)] = (calls[String(property)] ?? 0) + 1;
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { store: proxy, calls };
}

/** The store's methods bound to it, with some replaced. */
function override(store: InMemoryStore, methods: Partial<ClaimingStore>): ClaimingStore {
  return {
    seen: (id) => store.seen(id),
    seenMany: (ids) => store.seenMany(ids),
    remember: (id, fingerprint) => store.remember(id, fingerprint),
    rememberMany: (ids, fingerprints) => store.rememberMany(ids, fingerprints),
    forget: (id) => store.forget(id),
    claim: (id, lease, fingerprint) => store.claim(id, lease, fingerprint),
    claimMany: (ids, lease, fingerprints) => store.claimMany(ids, lease, fingerprints),
    release: (id, token) => store.release(id, token),
    releaseMany: (claims) => store.releaseMany(claims),
    ...methods,
  };
}

/** Hides the batch forms, leaving only the per-id methods. */
function perIdOnly(store: ClaimingStore): ClaimingStore {
  return {
    seen: (id) => store.seen(id),
    remember: (id, fingerprint) => store.remember(id, fingerprint),
    forget: (id) => store.forget(id),
    claim: (id, lease, fingerprint) => store.claim(id, lease, fingerprint),
    release: (id, token) => store.release(id, token),
  };
}

/** A store whose chosen methods fail as an unreachable backend would. */
function failing<S extends Store>(store: S, methods: string[]): S {
  return new Proxy(store, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown;
      if (typeof value === "function" && methods.includes(String(property))) {
        return async () => {
          throw new StoreUnavailableError("test", String(property), "connection refused (simulated)");
        };
      }
      return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

describe("the decision table", () => {
  it("runs and commits a new message, then suppresses its duplicate", async () => {
    const store = new InMemoryStore();
    let runs = 0;
    const engine = new BatchEngine(store, () => void (runs += 1));
    const body = envelope("a");
    expect(await engine.process(deliveries([body]))).toMatchObject([{ status: "ran", ack: true, key: "a", dedupe: "claim", handlerRan: true }]);
    expect(await engine.process(deliveries([body]))).toMatchObject([{ status: "duplicate", ack: true, handlerRan: false }]);
    expect(runs).toBe(1);
  });

  it("parks a message whose id is in flight elsewhere, with the lease's remaining time", async () => {
    const store = new InMemoryStore();
    await store.claim("busy", 30_000);
    let runs = 0;
    const [result] = await new BatchEngine(store, () => void (runs += 1)).process(deliveries([envelope("busy")]));
    expect(result).toMatchObject({ status: "in-flight", ack: false, handlerRan: false });
    expect(result?.retryAfterMs).toBeGreaterThan(29_000);
    expect(runs).toBe(0);
  });

  it("releases the claim of a throwing handler so the redelivery runs at once", async () => {
    const store = new InMemoryStore();
    let fail = true;
    const engine = new BatchEngine(store, () => {
      if (fail) throw new Error("downstream 503");
    });
    const body = envelope("t");
    const [first] = await engine.process(deliveries([body]));
    expect(first).toMatchObject({ status: "failed", ack: false, handlerRan: true });
    expect((first?.error as Error).message).toBe("downstream 503");
    fail = false;
    expect((await engine.process(deliveries([body])))[0]?.status).toBe("ran");
  });

  it("fails open for a message without a usable meta.id: runs every time, no store call", async () => {
    const { store, calls } = counted(new InMemoryStore());
    let runs = 0;
    const engine = new BatchEngine(store, () => void (runs += 1));
    const results = await engine.process(deliveries([envelope(undefined), envelope(""), envelope(42)]));
    expect(results.map((r) => [r.status, r.dedupe, r.ack])).toEqual([
      ["ran", "none", true],
      ["ran", "none", true],
      ["ran", "none", true],
    ]);
    expect(runs).toBe(3);
    expect(calls).toEqual({});
    const failingRun = new BatchEngine(store, () => {
      throw new Error("x");
    });
    expect((await failingRun.process(deliveries([envelope(undefined)])))[0]).toMatchObject({ status: "failed", ack: false });
  });

  it("reports an invalid body, never runs it, and retries it unless asked to drop", async () => {
    let runs = 0;
    const handle = () => void (runs += 1);
    const retry = await new BatchEngine(new InMemoryStore(), handle).process(deliveries(["{oops", envelope("ok")]));
    expect(retry[0]).toMatchObject({ status: "invalid", ack: false, handlerRan: false });
    expect(retry[0]?.error).toBeInstanceOf(InvalidMessageError);
    expect(retry[1]?.status).toBe("ran");
    const drop = await new BatchEngine(new InMemoryStore(), handle, { onInvalid: "drop" }).process(deliveries(["{oops"]));
    expect(drop[0]).toMatchObject({ status: "invalid", ack: true });
    expect(runs).toBe(1);
  });

  it("acknowledges a successful run whose commit failed, and says so", async () => {
    const store = failing(new InMemoryStore(), ["remember", "rememberMany"]);
    const results = await new BatchEngine(store, () => {}).process(deliveries([envelope("c1"), envelope("c2")]));
    expect(results.map((r) => [r.status, r.ack, r.handlerRan])).toEqual([
      ["commit-failed", true, true],
      ["commit-failed", true, true],
    ]);
    expect(results[0]?.error).toBeInstanceOf(StoreUnavailableError);
  });

  it("a commit step rejecting with no reason is a failed commit, not a commit (batch form and per id)", async () => {
    const store = new InMemoryStore();
    const bare = override(store, { rememberMany: () => Promise.reject() });
    const results = await new BatchEngine(bare, () => {}, { commitRetries: 0 }).process(deliveries([envelope("u1"), envelope("u2")]));
    expect(results.map((r) => [r.status, r.ack])).toEqual([
      ["commit-failed", true],
      ["commit-failed", true],
    ]);
    expect(results[0]?.error).toBeInstanceOf(StoreUnavailableError);
    expect((await store.inspect("u1"))?.status).toBe("in-flight");
    const perId: ClaimingStore = {
      seen: (id) => store.seen(id),
      remember: () => Promise.reject(),
      forget: (id) => store.forget(id),
      claim: (id, leaseMs, fingerprint) => store.claim(id, leaseMs, fingerprint),
      release: (id, token) => store.release(id, token),
    };
    const one = await new BatchEngine(perId, () => {}, { commitRetries: 0 }).process(deliveries([envelope("u3")]));
    expect(one[0]).toMatchObject({ status: "commit-failed", ack: true });
    expect(one[0]?.error).toBeInstanceOf(StoreUnavailableError);
  });

  it("retries a failed commit step before reporting commit-failed", async () => {
    const store = new InMemoryStore();
    let failures = 2;
    const flaky = override(store, {
      rememberMany: async (ids: readonly string[]) => {
        if (failures-- > 0) throw new StoreUnavailableError("test", "rememberMany", "throttled (simulated)");
        return store.rememberMany(ids);
      },
    });
    const events: EngineEvent[] = [];
    const results = await new BatchEngine(flaky, () => {}, { observe: (e) => events.push(e) }).process(deliveries([envelope("cr1"), envelope("cr2")]));
    expect(results.map((r) => r.status)).toEqual(["ran", "ran"]);
    expect(await store.seen("cr1")).toBe(true);
    expect(events.filter((e) => e.type === "store-error")).toHaveLength(2);
    failures = 1;
    const noRetry = await new BatchEngine(flaky, () => {}, { commitRetries: 0 }).process(deliveries([envelope("cr3")]));
    expect(noRetry[0]?.status).toBe("commit-failed");
  });

  it("fails closed when the store is unreachable at the gate: not run, not acked", async () => {
    let runs = 0;
    const store = failing(new InMemoryStore(), ["claim", "claimMany", "seen", "seenMany"]);
    const results = await new BatchEngine(store, () => void (runs += 1)).process(deliveries([envelope("s1"), envelope("s2")]));
    expect(results.map((r) => [r.status, r.ack, r.handlerRan])).toEqual([
      ["failed", false, false],
      ["failed", false, false],
    ]);
    expect(results[0]?.error).toBeInstanceOf(StoreUnavailableError);
    expect(runs).toBe(0);
  });

  it("runs without dedupe when the store is unreachable and onStoreError is 'run'", async () => {
    let runs = 0;
    const store = failing(new InMemoryStore(), ["claim", "claimMany", "remember", "rememberMany"]);
    const results = await new BatchEngine(store, () => void (runs += 1), { onStoreError: "run" }).process(deliveries([envelope("s1")]));
    expect(results[0]).toMatchObject({ status: "commit-failed", ack: true, dedupe: "none", handlerRan: true });
    expect(runs).toBe(1);
  });

  it("uses seen-set mode for a store without claim: seen → skip, else run and remember on success only", async () => {
    const backing = new InMemoryStore();
    const store: Store = { seen: (id) => backing.seen(id), remember: (id) => backing.remember(id), forget: (id) => backing.forget(id) };
    let fail = true;
    const engine = new BatchEngine(store, () => {
      if (fail) throw new Error("x");
    });
    expect(engine.claimMode).toBe(false);
    expect((await engine.process(deliveries([envelope("v")])))[0]).toMatchObject({ status: "failed", dedupe: "seen-set" });
    expect(await backing.seen("v")).toBe(false);
    fail = false;
    expect((await engine.process(deliveries([envelope("v")])))[0]).toMatchObject({ status: "ran", dedupe: "seen-set" });
    expect((await engine.process(deliveries([envelope("v")])))[0]).toMatchObject({ status: "duplicate", dedupe: "seen-set" });
  });

  it("reads a seen-set answer of 1 / 0 (a Redis EXISTS reply) as seen / not seen, per id and in a batch; anything else is a store error", async () => {
    const ids = new Set<string>(["done-before"]);
    const reply = (id: string): unknown => (ids.has(id) ? 1 : 0);
    const remember = (id: string) => void ids.add(id);
    let runs = 0;
    const handle = () => void (runs += 1);
    // Plain JS stores, typed loosely on purpose: BabelQueue's Wrap reads any truthy answer.
    const perId = { seen: reply, remember, forget: (id: string) => void ids.delete(id) } as unknown as Store;
    const batched = { ...perId, seenMany: (keys: readonly string[]) => keys.map(reply) } as unknown as Store;
    for (const store of [perId, batched]) {
      runs = 0;
      const results = await new BatchEngine(store, handle).process(deliveries([envelope("done-before"), envelope(`new-${runs}-${ids.size}`)]));
      expect(results.map((r) => r.status)).toEqual(["duplicate", "ran"]);
      expect(runs).toBe(1);
    }
    for (const wrong of ["1", 2, null, undefined, "OK"]) {
      const store = { seen: () => wrong, remember, forget: () => undefined } as unknown as Store;
      const [result] = await new BatchEngine(store, handle).process(deliveries([envelope("w")]));
      expect(result).toMatchObject({ status: "failed", ack: false, handlerRan: false });
      expect((result?.error as Error).message).toMatch(/wrong shape/);
    }
  });

  it("reads a store answer of the wrong shape as a store error, not a crash", async () => {
    const store = new InMemoryStore();
    const broken = override(store, { claimMany: async () => [{ status: "maybe" } as unknown as Claim] });
    const [result] = await new BatchEngine(broken, () => {}).process(deliveries([envelope("w")]));
    expect(result).toMatchObject({ status: "failed", ack: false, handlerRan: false });
    expect((result?.error as Error).message).toMatch(/wrong shape/);
  });
});

describe("the batch engine", () => {
  it("spends one store step per phase for a batch when the store has batch forms", async () => {
    const { store, calls } = counted(new InMemoryStore());
    const engine = new BatchEngine(store, (_m, ctx) => {
      if (ctx.key?.startsWith("bad")) throw new Error("x");
    });
    const results = await engine.process(deliveries([...Array.from({ length: 8 }, (_, i) => envelope(`ok-${i}`)), envelope("bad-1"), envelope("bad-2")]));
    expect(results.filter((r) => r.status === "ran")).toHaveLength(8);
    expect(calls).toEqual({ claimMany: 1, rememberMany: 1, releaseMany: 1 });
    const dupes = counted(store);
    await new BatchEngine(dupes.store, () => {}).process(deliveries(Array.from({ length: 8 }, (_, i) => envelope(`ok-${i}`))));
    expect(dupes.calls).toEqual({ claimMany: 1 });
  });

  it("falls back to per-id calls in parallel when the store has no batch forms", async () => {
    const { store, calls } = counted(perIdOnly(new InMemoryStore()));
    await new BatchEngine(store, () => {}).process(deliveries(Array.from({ length: 5 }, (_, i) => envelope(`p-${i}`))));
    expect(calls).toEqual({ claim: 5, remember: 5 });
  });

  it("never lets a bad message fail its neighbours", async () => {
    const bodies = ["", "null", "[]", "{}", envelope("n1"), new Uint8Array([0xff]), envelope("n2"), { job: 1 }, envelope("n3")];
    let runs = 0;
    const results = await new BatchEngine(new InMemoryStore(), () => void (runs += 1)).process(deliveries(bodies));
    expect(results.map((r) => r.status)).toEqual(["invalid", "invalid", "invalid", "invalid", "ran", "invalid", "ran", "invalid", "ran"]);
    expect(runs).toBe(3);
  });

  it("runs a message once when the same id appears twice in one batch", async () => {
    let runs = 0;
    const engine = new BatchEngine(new InMemoryStore(), () => void (runs += 1));
    const results = await engine.process(deliveries([envelope("same"), envelope("same"), envelope("other")]));
    expect(results.map((r) => r.status)).toEqual(["ran", "duplicate", "ran"]);
    expect(runs).toBe(2);
    let attempt = 0;
    const flaky = new BatchEngine(new InMemoryStore(), () => {
      attempt += 1;
      throw new Error("x");
    });
    const failed = await flaky.process(deliveries([envelope("f"), envelope("f")]));
    expect(failed.map((r) => [r.status, r.ack])).toEqual([
      ["failed", false],
      ["in-flight", false],
    ]);
    expect(attempt).toBe(1);
  });

  it("bounds handler concurrency", async () => {
    let running = 0;
    let peak = 0;
    const engine = new BatchEngine(
      new InMemoryStore(),
      async () => {
        running += 1;
        peak = Math.max(peak, running);
        await new Promise((resolve) => setTimeout(resolve, 5));
        running -= 1;
      },
      { concurrency: 3 },
    );
    await engine.process(deliveries(Array.from({ length: 20 }, (_, i) => envelope(`c-${i}`))));
    expect(peak).toBe(3);
  });

  it("keeps FIFO order within a group and stops the group at its first failure", async () => {
    const order: string[] = [];
    const store = new InMemoryStore();
    const engine = new BatchEngine(store, async (_m, ctx) => {
      order.push(ctx.key as string);
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 3));
      if (ctx.key === "A2") throw new Error("x");
    });
    const keys = ["A1", "B1", "A2", "B2", "A3", "B3", "A4"];
    const results = await engine.process(deliveries(keys.map((k) => envelope(k)), (i) => (keys[i] as string)[0]));
    expect(results.map((r) => r.status)).toEqual(["ran", "ran", "failed", "ran", "failed", "ran", "failed"]);
    expect(results[4]?.handlerRan).toBe(false);
    expect(results[4]?.error).toBeInstanceOf(GroupBlockedError);
    expect(order.filter((k) => k.startsWith("A"))).toEqual(["A1", "A2"]);
    expect(order.filter((k) => k.startsWith("B"))).toEqual(["B1", "B2", "B3"]);
    // The blocked messages' claims were released: their redelivery runs at once.
    expect((await store.claim("A3")).status).toBe("claimed");
    expect((await store.claim("A2")).status).toBe("claimed");
  });

  it("lets a FIFO group pass a duplicate and stop at an invalid body that is retried", async () => {
    const store = new InMemoryStore();
    await store.remember("G1");
    const { store: watched, calls } = counted(store);
    const runs: string[] = [];
    const engine = new BatchEngine(watched, (_m, ctx) => void runs.push(ctx.key as string));
    const bodies = [envelope("G1"), envelope("G2"), "{bad", envelope("G3")];
    const results = await engine.process(deliveries(bodies, () => "g"));
    expect(results.map((r) => r.status)).toEqual(["duplicate", "ran", "invalid", "failed"]);
    expect(runs).toEqual(["G2"]);
    expect(calls.claimMany).toBe(1);
    expect(calls.releaseMany).toBeUndefined(); // G3 was never claimed: the invalid body blocked it first
  });

  it("hands the handler the reconciled attempts and the runtime context", async () => {
    const seen: unknown[] = [];
    const engine = new BatchEngine<unknown, { record: string }>(new InMemoryStore(), (_m, ctx) => void seen.push([ctx.record, ctx.attempts, ctx.key]));
    const body = JSON.parse(envelope("r")) as Record<string, unknown>;
    body.attempts = 2;
    await engine.process([
      { body: JSON.stringify(body), redeliveries: 4, context: { record: "r1" } },
      { body: envelope("q"), redeliveries: 0, context: { record: "r2" } },
    ]);
    expect(seen).toEqual([
      ["r1", 4, "r"],
      ["r2", 0, "q"],
    ]);
  });

  it("reads the body's attempts only as the message's own property: inherited ones are ignored, a throwing getter counts as none", async () => {
    const seen: [string, number][] = [];
    const inherited = Object.create({ attempts: 7 }) as Record<string, unknown>;
    const throwing = { meta: { id: "t" } } as Record<string, unknown>;
    Object.defineProperty(throwing, "attempts", { enumerable: true, get: () => { throw new Error("no attempts"); } });
    const bodies = new Map<string, unknown>([
      ["own", { meta: { id: "own" }, attempts: 3 }],
      ["inherited", Object.assign(inherited, { meta: { id: "inherited" } })],
      ["t", throwing],
    ]);
    const engine = new BatchEngine<Record<string, unknown>, object>(new InMemoryStore(), (_m, ctx) => void seen.push([ctx.key as string, ctx.attempts]), {
      parse: (body) => bodies.get(String(body)) as Record<string, unknown>,
      fingerprint: false,
    });
    const results = await engine.process([...bodies.keys()].map((body) => ({ body, redeliveries: 1, context: {} })));
    expect(results.map((r) => r.status)).toEqual(["ran", "ran", "ran"]);
    expect(seen).toEqual([
      ["own", 3],
      ["inherited", 1],
      ["t", 1],
    ]);
  });

  it("keeps the body's attempts only when they are a count above the redeliveries; anything else, or a message that is not an object, leaves the redeliveries", async () => {
    const seen = new Map<string, number>();
    const bodies = new Map<string, unknown>([
      ["higher", { attempts: 4 }],
      ["lower", { attempts: 1 }],
      ["text", { attempts: "5" }],
      ["fraction", { attempts: 2.5 }],
      ["negative", { attempts: -3 }],
      ["unsafe", { attempts: 2 ** 53 }],
      ["nan", { attempts: Number.NaN }],
      ["yes", { attempts: true }],
      ["number", 42],
      ["string", "plain text"],
      ["nothing", undefined],
    ]);
    // Every message is keyed by its body's name (the values are distinct), so even one that is not an object runs.
    const names = new Map([...bodies].map(([name, message]) => [message, name]));
    const engine = new BatchEngine<unknown, object>(new InMemoryStore(), (_m, ctx) => void seen.set(ctx.key as string, ctx.attempts), {
      parse: (body) => bodies.get(String(body)),
      key: (message) => names.get(message),
      fingerprint: false,
    });
    const results = await engine.process([...bodies.keys()].map((body) => ({ body, redeliveries: 2, context: {} })));
    expect(results.map((r) => r.status)).toEqual([...bodies.keys()].map(() => "ran"));
    expect(Object.fromEntries(seen)).toEqual({
      higher: 4,
      lower: 2,
      text: 2,
      fraction: 2,
      negative: 2,
      unsafe: 2,
      nan: 2,
      yes: 2,
      number: 2,
      string: 2,
      nothing: 2,
    });
  });

  it("takes a transport's authoritative attempts as they are (Kafka's bq-attempts), lower or higher; ignores one that is not a count", async () => {
    const seen: number[] = [];
    const engine = new BatchEngine<unknown, object>(new InMemoryStore(), (_m, ctx) => void seen.push(ctx.attempts));
    const body = (id: string) => JSON.stringify({ ...(JSON.parse(envelope(id)) as object), attempts: 5 });
    await engine.process([
      { body: body("a1"), attempts: 1, redeliveries: 7, context: {} },
      { body: body("a2"), attempts: 9, context: {} },
      { body: body("a3"), attempts: 0, context: {} },
      ...[-1, 1.5, Number.NaN, Number.MAX_SAFE_INTEGER + 1].map((attempts, i) => ({ body: body(`a-bad-${i}`), attempts, redeliveries: 2, context: {} })),
    ]);
    expect(seen).toEqual([1, 9, 0, 5, 5, 5, 5]);
  });

  it("accepts a custom parse and key for non-BabelQueue messages", async () => {
    let runs = 0;
    const engine = new BatchEngine<{ orderId: string }>(new InMemoryStore(), () => void (runs += 1), {
      parse: (body) => {
        const value = JSON.parse(String(body)) as { orderId?: unknown };
        if (typeof value.orderId !== "string") throw new InvalidMessageError("orderId missing");
        return { orderId: value.orderId };
      },
      key: (message) => `order:${message.orderId}`,
    });
    const results = await engine.process(deliveries(['{"orderId":"9"}', '{"orderId":"9"}', '{"x":1}', "not json at all"]));
    expect(results.map((r) => r.status)).toEqual(["ran", "duplicate", "invalid", "invalid"]);
    expect((results[2]?.error as InvalidMessageError).reason).toBe("orderId missing");
    expect((results[3]?.error as InvalidMessageError).reason).toBe("parse rejected the body (SyntaxError)");
    expect(runs).toBe(1);
  });

  it("reports every result and store error to observe, and ignores an observer that throws", async () => {
    const events: EngineEvent[] = [];
    const store = failing(new InMemoryStore(), ["releaseMany"]);
    const engine = new BatchEngine(store, () => {
      throw new Error("x");
    }, {
      observe: (event) => {
        events.push(event);
        throw new Error("observer bug");
      },
    });
    const results = await engine.process(deliveries([envelope("o1"), "{bad"]));
    expect(results.map((r) => r.status)).toEqual(["failed", "invalid"]);
    expect(events.map((e) => e.type)).toEqual(["batch-start", "result", "store-step", "result", "store-step", "store-error", "batch-end"]);
    expect(events.filter((e) => e.type === "store-step").map((e) => [e.step, e.ids, e.ok])).toEqual([
      ["claim", 1, true],
      ["release", 1, false],
    ]);
    expect(JSON.stringify(events.filter((e) => e.type === "store-error"))).not.toContain("trace-");
  });

  it("rejects bad options at construction, with typed errors", () => {
    const store = new InMemoryStore();
    expect(() => new BatchEngine(store, () => {}, { concurrency: 0 })).toThrow(InvalidOptionError);
    expect(() => new BatchEngine(store, () => {}, { commitRetries: -1 })).toThrow(/commitRetries/);
    expect(() => new BatchEngine(store, () => {}, { leaseMs: -1 })).toThrow(/leaseMs/);
    expect(() => new BatchEngine(store, () => {}, { onInvalid: "ignore" as "drop" })).toThrow(/onInvalid/);
    expect(() => new BatchEngine({} as Store, () => {})).toThrow(/store/);
    expect(() => new BatchEngine(store, undefined as unknown as () => void)).toThrow(/handle/);
  });

  it("handles an empty batch", async () => {
    const { store, calls } = counted(new InMemoryStore());
    expect(await new BatchEngine(store, () => {}).process([])).toEqual([]);
    expect(calls).toEqual({});
  });
});

describe("wrap", () => {
  it("decides one delivery as the engine does and passes the lease through", async () => {
    const store = new InMemoryStore();
    const thrown = new Error("x");
    const deliver = wrapResult(store, () => {
      throw thrown;
    });
    const result = await deliver(envelope("w1"), { leaseMs: 5_000, redeliveries: 1 });
    expect(result).toMatchObject({ status: "failed", ack: false, key: "w1", error: thrown });
    let attempts = -1;
    const lease = new InMemoryStore();
    await expect(
      wrap(lease, (_m, ctx) => {
        attempts = ctx.attempts;
        return lease.claim("w2").then((claim) => {
          if (claim.status !== "in-flight" || claim.retryAfterMs > 5_000) throw new Error(`lease not applied: ${JSON.stringify(claim)}`);
        });
      })(envelope("w2"), { leaseMs: 5_000, redeliveries: 3 }),
    ).resolves.toBeUndefined();
    expect(attempts).toBe(3);
  });
});

describe("a custom parse with the default key", () => {
  it("runs a message that is not an envelope (no meta, a number, null) without dedupe, as one with no usable id", async () => {
    let runs = 0;
    const engine = new BatchEngine<unknown>(new InMemoryStore(), () => void (runs += 1), { parse: (body) => JSON.parse(String(body)) as unknown });
    const results = await engine.process(['{"orderId":7}', "7", "null", '{"meta":"m-1"}', '{"meta":null}', '{"meta":{"id":"k-1"}}'].map((body) => ({ body, context: {} })));
    expect(results.map((r) => [r.status, r.ack, r.dedupe])).toEqual([
      ["ran", true, "none"],
      ["ran", true, "none"],
      ["ran", true, "none"],
      ["ran", true, "none"],
      ["ran", true, "none"],
      ["ran", true, "claim"],
    ]);
    expect(results[5]?.key).toBe("k-1");
    expect(runs).toBe(6);
  });

  it("reads meta as the message has it: a class instance's getter or an inherited meta still gives the key", async () => {
    class Order {
      constructor(readonly id: string) {}
      get meta() {
        return { id: this.id };
      }
    }
    const store = new InMemoryStore();
    const engine = new BatchEngine<unknown>(store, () => undefined, {
      parse: (body) => (String(body).startsWith("inherited:") ? Object.create({ meta: { id: String(body).slice(10) } }) : new Order(String(body))) as unknown,
    });
    const results = await engine.process(["o-1", "inherited:o-2"].map((body) => ({ body, context: {} })));
    expect(results.map((r) => [r.status, r.key, r.dedupe])).toEqual([
      ["ran", "o-1", "claim"],
      ["ran", "o-2", "claim"],
    ]);
    expect(await store.seen("o-1")).toBe(true);
  });
});
