/**
 * redis-server restarted while batches run (issue 19, item 3, the Redis part): a consumer keeps
 * processing batches through `RedisStore` over ioredis while the test kills its redis-server
 * (SIGKILL, no shutdown) and starts it again on the same port. The server keeps an AOF with
 * `appendfsync always`, so what it acknowledged survives the kill, as on a managed Redis with
 * persistence.
 *
 * Asserted: the consumer process never sees an unhandled error; every store failure is a
 * `StoreUnavailableError` (the handler not run, the delivery not acknowledged); every delivery
 * acknowledged as `ran` is committed after the restart; the store recovers by itself (ioredis
 * reconnects) — the batches after the restart all run; redelivering what was not acknowledged runs
 * each id once.
 */
import { Redis } from "ioredis";
import { afterAll, describe, expect, it } from "vitest";
import { RedisStore, ioredisScriptClient } from "../../../entry/redis.js";
import type { MessageResult } from "../../../src/decision.js";
import { StoreUnavailableError } from "../../../src/errors.js";
import { CountingConsumer, idRange, statusCounts } from "../../support/redis-batches.js";
import { type RedisNode, startRedisNode } from "../../support/redis-nodes.js";

let node: RedisNode | undefined;
afterAll(() => node?.stop());

describe("redis-server restarted mid-run", () => {
  it("fails the batches it must, acknowledges only what is committed, and recovers on the next batch", { timeout: 60_000 }, async () => {
    node = await startRedisNode({ persistent: true });
    const client = new Redis({ host: "127.0.0.1", port: node.port });
    // What every user of ioredis needs: a listener, or each reconnect attempt is logged as unhandled.
    let clientErrors = 0;
    client.on("error", () => {
      clientErrors += 1;
    });
    const store = new RedisStore({ client: ioredisScriptClient(client), namespace: "restart", timeoutMs: 1_000 });
    const effects = new Map<string, number>();
    // No commit retries: a commit that meets the outage is final after one timeout (commit-failed), so
    // the lanes go on and batches keep starting all through the outage.
    const consumer = new CountingConsumer(store, effects, { handlerMs: 5, commitRetries: 0 });
    const results: { at: number; result: MessageResult }[] = [];
    let next = 0;
    let restartedAt = Number.POSITIVE_INFINITY;
    let running = true;
    const slow: string[] = [];
    // Three consumers in parallel (as three Lambdas would be), so batches start all through the outage.
    const loops = [0, 1, 2].map(async (lane) => {
      await new Promise((resolve) => setTimeout(resolve, lane * 3));
      while (running) {
        const ids = idRange("r", 10, next);
        next += 10;
        const at = Date.now();
        const batchResults = await consumer.process(ids);
        if (Date.now() - at > 100) slow.push(`${at % 100000}+${Date.now() - at}:${JSON.stringify(statusCounts(batchResults))}`);
        for (const result of batchResults) results.push({ at, result });
      }
    });

    await new Promise((resolve) => setTimeout(resolve, 500));
    slow.push(`kill ${Date.now() % 100000}`);
    await node.kill();
    // Down for longer than the store's timeout: the batches meanwhile fail (ioredis' offline queue
    // would otherwise carry a shorter outage unnoticed).
    // 4 s: longer than a batch that meets the outage mid-commit takes to give up (about 2 s), so that
    // batches also START during the outage and fail at their claim.
    await new Promise((resolve) => setTimeout(resolve, 4_000));
    await node.restart();
    restartedAt = Date.now();
    slow.push(`restarted ${restartedAt % 100000}`);
    // Run on until batches that started after the restart went through.
    while (results.filter(({ at, result }) => at > restartedAt + 500 && result.status === "ran").length < 50) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    running = false;
    await Promise.all(loops);

    const statuses = statusCounts(results.map(({ result }) => result));
    const failed = results.filter(({ result }) => result.status === "failed").map(({ result }) => result);
    const ran = results.filter(({ result }) => result.status === "ran").map(({ result }) => result.key as string);
    const committed = await store.seenMany(ran);
    const notCommitted = ran.filter((_, i) => !committed[i]);
    const afterRestart = results.filter(({ at }) => at > restartedAt).map(({ result }) => result.status);
    // Redeliver what was never acknowledged: each runs once (the claims those failed steps may still
    // have landed were released behind them).
    const unacked = results.filter(({ result }) => !result.ack).map(({ result }) => result.key as string);
    const redelivery = await consumer.process(unacked);
    const twice = [...effects].filter(([, n]) => n > 1).map(([id]) => id);
    const commitFailed = new Set(results.filter(({ result }) => result.status === "commit-failed").map(({ result }) => result.key as string));
    console.info(
      `[redis restart] ${results.length} deliveries: ${JSON.stringify(statuses)}; acknowledged as ran but not committed: ${notCommitted.length}; ` +
        `client error events: ${clientErrors}; redelivery of the ${unacked.length} unacknowledged: ${JSON.stringify(statusCounts(redelivery))}`,
    );
    client.disconnect();
    console.info(slow.join(" | "));

    expect(failed.length).toBeGreaterThan(0);
    for (const result of failed) {
      expect(result.error).toBeInstanceOf(StoreUnavailableError);
      expect(result.handlerRan).toBe(false);
      expect(result.ack).toBe(false);
    }
    expect(notCommitted).toEqual([]);
    expect(afterRestart.length).toBeGreaterThan(0);
    expect(afterRestart.every((status) => status === "ran")).toBe(true);
    expect(statusCounts(redelivery)).toEqual({ ran: unacked.length });
    // A double effect is possible only for a commit that failed (acknowledged anyway, reported commit-failed).
    expect(twice.filter((id) => !commitFailed.has(id))).toEqual([]);
  });
});
