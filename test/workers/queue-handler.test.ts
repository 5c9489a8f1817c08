/**
 * queueHandler inside workerd: a REAL Miniflare queue (producer `env.QUEUE` → the consumer in
 * ./worker.ts, with max_retries and a dead-letter queue) and, for exact ack/retry/delay
 * assertions, `createMessageBatch` + `getQueueResult`.
 */
import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { CONSUMER_WALL_TIME_MS, MAX_RETRY_DELAY_SECONDS, parkDelaySeconds, queueHandler } from "../../handlers/cloudflare-queue.js";
import { DurableObjectStore } from "../../stores/durable-object/store.js";
import { KVStore } from "../../stores/kv.js";
import { InMemoryStore } from "../../src/memory-store.js";
import { QUEUE_NAMESPACE, logFor } from "./worker.js";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
let runs = 0;
const newRun = () => `run${Date.now().toString(36)}${(runs += 1)}`;

function envelope(id: string | undefined, data: Record<string, unknown> = {}, attempts = 0) {
  return {
    job: "urn:babel:test:job",
    trace_id: `trace-${id ?? "none"}`,
    data,
    meta: { ...(id === undefined ? {} : { id }), queue: "bq-test-jobs", lang: "node", schema_version: 1, created_at: 1 },
    attempts,
  };
}

async function eventually<T>(read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 15_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > end) return value;
    await sleep(50);
  }
}

describe("queueHandler over a real Miniflare queue", () => {
  it("runs each meta.id's effect once across duplicates, dead-letters a handler that keeps throwing, and an invalid body", async () => {
    const run = newRun();
    const ids = Array.from({ length: 12 }, (_, i) => `${run}/order-${i}`);
    // Every id sent 1-3 times, some copies as JSON strings, some as objects; plus one poison message and one invalid body.
    const sends: Promise<unknown>[] = [];
    ids.forEach((id, i) => {
      for (let copy = 0; copy <= i % 3; copy += 1) {
        const body = envelope(id, { mode: "ok" });
        sends.push(env.QUEUE.send(copy % 2 === 0 ? body : JSON.stringify(body), { contentType: copy % 2 === 0 ? "json" : "text" }));
      }
    });
    const poison = `${run}/poison`;
    sends.push(env.QUEUE.send(envelope(poison, { mode: "throw" }), { contentType: "json" }));
    const invalid = `${run}/not-an-envelope {`;
    sends.push(env.QUEUE.send(invalid, { contentType: "text" }));
    await Promise.all(sends);

    const log = logFor(env, run);
    const counts = await eventually(
      () => log.counts(),
      (c) => Object.keys(c.effect ?? {}).length === ids.length && c["dead-letter"]?.[poison] === 1 && c["dead-letter"]?.[invalid] === 1,
    );
    for (const id of ids) expect(counts.effect?.[id], id).toBe(1);
    // max_retries = 2: three attempts, each ran the handler, then the dead-letter queue took it.
    expect(counts.attempt?.[poison]).toBe(3);
    expect(counts.effect?.[poison]).toBeUndefined();
    expect(counts["dead-letter"]?.[poison]).toBe(1);
    // The invalid body never reached the handler and was not acknowledged: it was retried into the DLQ.
    expect(counts["dead-letter"]?.[invalid]).toBe(1);
    // Redeliveries of committed ids are suppressed for good.
    await env.QUEUE.send(envelope(ids[0] as string, { mode: "ok" }), { contentType: "json" });
    await sleep(500);
    expect((await log.counts()).effect?.[ids[0] as string]).toBe(1);
  });
});

describe("queueHandler: an in-flight park over a real Miniflare queue", () => {
  it("is retried with the lease's remaining time as its delay, then runs once", async () => {
    const run = newRun();
    const id = `${run}/parked`;
    // Another delivery (elsewhere) holds a 2-second lease on the id.
    const holder = await new DurableObjectStore(env.IDEMPOTENCY, { namespace: QUEUE_NAMESPACE, shards: 2 }).claim(id, 2_000);
    expect(holder.status).toBe("claimed");
    const sent = Date.now();
    await env.QUEUE.send(envelope(id, { mode: "ok" }), { contentType: "json" });
    const log = logFor(env, run);
    await sleep(800);
    // Parked, not run, not acknowledged: batches are immediate here, so only the delay holds it back.
    expect((await log.counts()).attempt?.[id]).toBeUndefined();
    const counts = await eventually(() => log.counts(), (c) => c.effect?.[id] === 1, 10_000);
    expect(counts.effect?.[id]).toBe(1);
    expect(Date.now() - sent).toBeGreaterThanOrEqual(1_500);
  });
});

describe("queueHandler: acknowledgements, retries and delays (createMessageBatch)", () => {
  const make = (options: { onInvalid?: "retry" | "drop" } = {}) => {
    const handled: { id: string | undefined; attempts: number; hasEnv: boolean; queue: string; messageId: string }[] = [];
    const namespace = `mb-${newRun()}`;
    const handler = queueHandler<Cloudflare.Env>({
      store: (e) => new DurableObjectStore(e.IDEMPOTENCY, { namespace }),
      handle: (message, ctx) => {
        handled.push({ id: ctx.key, attempts: ctx.attempts, hasEnv: ctx.env === env, queue: ctx.queue, messageId: ctx.message.id });
        if (message.data.mode === "throw") throw new Error("scripted");
      },
      ...options,
    });
    return { handler, handled };
  };
  const message = (id: string, body: unknown, attempts = 1) => ({ id, timestamp: new Date(), attempts, body });

  /**
   * Runs a batch made by createMessageBatch and reads back acks and retries with getQueueResult.
   * That helper does not record `delaySeconds`, so each message is seen through a thin recorder
   * that notes the options of `retry()` and forwards the call unchanged.
   */
  async function deliver(handler: ReturnType<typeof queueHandler<Cloudflare.Env>>, messages: ReturnType<typeof message>[]) {
    const batch = createMessageBatch("bq-test-jobs", messages);
    const ctx = createExecutionContext();
    const delays = new Map<string, number | undefined>();
    const recorded = {
      queue: batch.queue,
      messages: batch.messages.map((m) => ({
        id: m.id,
        body: m.body,
        attempts: m.attempts,
        ack: () => m.ack(),
        retry: (options?: { delaySeconds?: number }) => {
          delays.set(m.id, options?.delaySeconds);
          m.retry(options);
        },
      })),
    };
    await handler(recorded, env, ctx);
    const result = await getQueueResult(batch, ctx);
    return {
      ...result,
      retryMessages: result.retryMessages.map((r: { msgId: string }) => (delays.get(r.msgId) === undefined ? { msgId: r.msgId } : { msgId: r.msgId, delaySeconds: delays.get(r.msgId) })),
    };
  }

  it("acks ran and duplicate messages, retries failures, and reconciles attempts", async () => {
    const { handler, handled } = make();
    const result = await deliver(handler, [
      message("m1", envelope("a", { mode: "ok" }, 1), 4),
      message("m2", JSON.stringify(envelope("a", { mode: "ok" }))),
      message("m3", envelope("b", { mode: "throw" }, 7), 2),
      message("m4", envelope(undefined, { mode: "ok" })),
    ]);
    expect(result.outcome).toBe("ok");
    expect(result.explicitAcks.sort()).toEqual(["m1", "m2", "m4"]);
    expect(result.retryMessages).toEqual([{ msgId: "m3" }]);
    expect(handled).toEqual([
      { id: "a", attempts: 3, hasEnv: true, queue: "bq-test-jobs", messageId: "m1" },
      { id: "b", attempts: 7, hasEnv: true, queue: "bq-test-jobs", messageId: "m3" },
      { id: undefined, attempts: 0, hasEnv: true, queue: "bq-test-jobs", messageId: "m4" },
    ]);
  });

  it("parks an in-flight id with a delay derived from the other delivery's lease", async () => {
    const namespace = `park-${newRun()}`;
    const store = new DurableObjectStore(env.IDEMPOTENCY, { namespace });
    const other = await store.claim("busy", 90_000);
    expect(other.status).toBe("claimed");
    const handler = queueHandler<Cloudflare.Env>({
      store: (e) => new DurableObjectStore(e.IDEMPOTENCY, { namespace }),
      handle: () => {
        throw new Error("must not run while another delivery holds the lease");
      },
    });
    const result = await deliver(handler, [message("p1", envelope("busy")), message("p2", envelope("busy"))]);
    expect(result.explicitAcks).toEqual([]);
    expect(result.retryMessages).toHaveLength(2);
    for (const retry of result.retryMessages) {
      expect(retry.delaySeconds).toBeGreaterThanOrEqual(85);
      expect(retry.delaySeconds).toBeLessThanOrEqual(90);
    }
  });

  it("a park's delay comes from the lease even with retryDelaySeconds; a copy parked behind a failed first copy gets retryDelaySeconds", async () => {
    const namespace = `park-delay-${newRun()}`;
    const store = new DurableObjectStore(env.IDEMPOTENCY, { namespace });
    expect((await store.claim("busy", 30_000)).status).toBe("claimed");
    const handler = queueHandler<Cloudflare.Env>({
      store: (e) => new DurableObjectStore(e.IDEMPOTENCY, { namespace }),
      handle: (message) => {
        if (message.data.mode === "throw") throw new Error("scripted");
      },
      retryDelaySeconds: 7,
    });
    const result = await deliver(handler, [
      message("b1", envelope("busy")),
      message("f1", envelope("flaky", { mode: "throw" })),
      message("f2", envelope("flaky", { mode: "throw" })),
    ]);
    expect(result.explicitAcks).toEqual([]);
    const delays = Object.fromEntries(result.retryMessages.map((r: { msgId: string; delaySeconds?: number }) => [r.msgId, r.delaySeconds]));
    // The lease's remaining time, rounded up: never back before the other delivery's lease ends.
    expect(delays.b1).toBeGreaterThanOrEqual(29);
    expect(delays.b1).toBeLessThanOrEqual(30);
    // The failed first copy released its claim: its copy has no lease to wait for.
    expect(delays).toMatchObject({ f1: 7, f2: 7 });
  });

  it("claims with a lease covering the consumer's 15-minute wall time by default", async () => {
    const namespace = `lease-${newRun()}`;
    const handler = queueHandler<Cloudflare.Env>({
      store: (e) => new DurableObjectStore(e.IDEMPOTENCY, { namespace }),
      handle: async () => {
        // While this handler runs, a second delivery elsewhere sees the id in flight for ~15 minutes.
        const seen = await new DurableObjectStore(env.IDEMPOTENCY, { namespace }).claim("long");
        expect(seen.status).toBe("in-flight");
        if (seen.status === "in-flight") expect(seen.retryAfterMs).toBeGreaterThan(CONSUMER_WALL_TIME_MS - 60_000);
      },
    });
    const result = await deliver(handler, [message("l1", envelope("long"))]);
    expect(result.explicitAcks).toEqual(["l1"]);
  });

  it("does not ack an invalid body by default, and drops it when asked", async () => {
    const { handler } = make();
    const kept = await deliver(handler, [message("i1", "{ not json"), message("i2", { job: "x" })]);
    expect(kept.explicitAcks).toEqual([]);
    expect(kept.retryMessages.map((r: { msgId: string }) => r.msgId).sort()).toEqual(["i1", "i2"]);
    const { handler: dropping } = make({ onInvalid: "drop" });
    const dropped = await deliver(dropping, [message("i3", "{ not json")]);
    expect(dropped.explicitAcks).toEqual(["i3"]);
  });

  it("retries every message, without throwing, when the store cannot even be built", async () => {
    const handler = queueHandler<Cloudflare.Env>({
      store: () => {
        throw new Error("no binding");
      },
      handle: () => undefined,
      retryDelaySeconds: 5,
    });
    const result = await deliver(handler, [message("s1", envelope("x")), message("s2", "garbage")]);
    expect(result.outcome).toBe("ok");
    expect(result.retryMessages).toEqual([
      { msgId: "s1", delaySeconds: 5 },
      { msgId: "s2", delaySeconds: 5 },
    ]);
  });

  it("retries fail-closed when the store is down at the claim, or runs without dedupe when asked", async () => {
    // A store outage no local backend produces on demand (mock, on purpose).
    const down = { seen: () => Promise.reject(new Error("down")), remember: () => Promise.reject(new Error("down")), forget: async () => undefined };
    let runsCount = 0;
    const closed = queueHandler<Cloudflare.Env>({ store: () => down, handle: () => void (runsCount += 1) });
    const r1 = await deliver(closed, [message("d1", envelope("d"))]);
    expect(r1.retryMessages).toEqual([{ msgId: "d1" }]);
    expect(runsCount).toBe(0);
    const open = queueHandler<Cloudflare.Env>({ store: () => down, handle: () => void (runsCount += 1), onStoreError: "run" });
    const r2 = await deliver(open, [message("d2", envelope("d"))]);
    expect(r2.explicitAcks).toEqual(["d2"]);
    expect(runsCount).toBe(1);
  });

  it("works in seen-set mode over KV", async () => {
    let effects = 0;
    const namespace = `kvq-${newRun()}`;
    const handler = queueHandler<Cloudflare.Env>({
      store: (e) => new KVStore(e.SEEN, { namespace }),
      handle: () => void (effects += 1),
    });
    const first = await deliver(handler, [message("k1", envelope("k"))]);
    const second = await deliver(handler, [message("k2", envelope("k"))]);
    expect(first.explicitAcks).toEqual(["k1"]);
    expect(second.explicitAcks).toEqual(["k2"]);
    expect(effects).toBe(1);
  });

  it("acks each message the moment its commit landed, while a neighbour of the batch still hangs", async () => {
    const namespace = `early-${newRun()}`;
    const store = new DurableObjectStore(env.IDEMPOTENCY, { namespace });
    let release!: () => void;
    const hung = new Promise<void>((resolve) => (release = resolve));
    const handler = queueHandler<Cloudflare.Env>({
      store: (e) => new DurableObjectStore(e.IDEMPOTENCY, { namespace }),
      handle: async (_message, ctx) => {
        if (ctx.key === "slow") await hung;
        if (ctx.key === "bad") throw new Error("scripted");
      },
    });
    const settled: { id: string; how: "ack" | "retry"; committed: boolean; slowDone: boolean }[] = [];
    let slowDone = false;
    const checks: Promise<void>[] = [];
    const messages = ["a", "b", "c", "bad", "slow"].map((key) => {
      const id = `msg-${key}`;
      const note = (how: "ack" | "retry") => {
        const entry = { id, how, committed: false, slowDone };
        settled.push(entry);
        // Acked means committed: the store already holds the id at the moment of the ack.
        checks.push(store.seen(key).then((seen) => void (entry.committed = seen)));
      };
      return { id, timestamp: new Date(), attempts: 1, body: envelope(key), ack: () => note("ack"), retry: () => note("retry") };
    });
    const done = handler({ queue: "bq-test-jobs", messages }, env, createExecutionContext());
    await eventually(async () => settled.length, (n) => n === 4, 5_000);
    expect(settled.map((s) => [s.id, s.how, s.slowDone]).sort()).toEqual([
      ["msg-a", "ack", false],
      ["msg-b", "ack", false],
      ["msg-bad", "retry", false],
      ["msg-c", "ack", false],
    ]);
    await Promise.all(checks);
    expect(settled.filter((s) => s.how === "ack").every((s) => s.committed)).toBe(true);
    slowDone = true;
    release();
    await done;
    expect(settled.map((s) => s.id)).toContain("msg-slow");
    expect(settled.filter((s) => s.id === "msg-slow")).toEqual([expect.objectContaining({ how: "ack", slowDone: true })]);
    // Each message settled exactly once.
    expect(settled).toHaveLength(5);
  });

  it("retries with Cloudflare's 12-hour delay limit at most, which the queue accepts", async () => {
    expect(MAX_RETRY_DELAY_SECONDS).toBe(43_200);
    const namespace = `long-${newRun()}`;
    const store = new DurableObjectStore(env.IDEMPOTENCY, { namespace });
    expect((await store.claim("long", 20 * 3600 * 1000)).status).toBe("claimed");
    const handler = queueHandler<Cloudflare.Env>({
      store: (e) => new DurableObjectStore(e.IDEMPOTENCY, { namespace }),
      handle: () => undefined,
    });
    const result = await deliver(handler, [message("l1", envelope("long"))]);
    expect(result.outcome).toBe("ok");
    expect(result.retryMessages).toEqual([{ msgId: "l1", delaySeconds: 43_200 }]);
    expect(() => queueHandler({ store: () => new InMemoryStore(), handle: () => undefined, retryDelaySeconds: 43_201 })).toThrow(/43200/);
  });

  it("validates its options when built", () => {
    const store = () => new InMemoryStore();
    expect(() => queueHandler({ store, handle: () => undefined, retryDelaySeconds: -1 })).toThrow(/retryDelaySeconds/);
    expect(() => queueHandler({ store, handle: () => undefined, concurrency: 0 })).toThrow(/concurrency/);
    expect(() => queueHandler({ store, handle: () => undefined, leaseMs: 0 })).toThrow(/leaseMs/);
    expect(() => queueHandler({ store: undefined as never, handle: () => undefined })).toThrow(/store/);
  });

  it("clamps park delays to Cloudflare's limit", () => {
    expect(parkDelaySeconds(0)).toBe(0);
    expect(parkDelaySeconds(1)).toBe(1);
    expect(parkDelaySeconds(1500)).toBe(2);
    expect(parkDelaySeconds(10 * 24 * 3600 * 1000)).toBe(MAX_RETRY_DELAY_SECONDS);
  });
});

describe("DurableObjectStore: 50 concurrent claims from 50 separate store instances", () => {
  it("gives exactly one claimed, with several shards", async () => {
    const namespace = `race-${newRun()}`;
    const claims = await Promise.all(
      Array.from({ length: 50 }, () => new DurableObjectStore(env.IDEMPOTENCY, { namespace, shards: 4, objectName: "race" }).claim("one-id")),
    );
    expect(claims.filter((c) => c.status === "claimed")).toHaveLength(1);
    expect(claims.filter((c) => c.status === "in-flight")).toHaveLength(49);
  });
});

