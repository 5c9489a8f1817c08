/**
 * Per-id failures of a batch claim (contract.ts `ClaimFailure`): a `claimMany` answer may fail one id
 * alone. The gate records that entry as that id's store error — the decision table then retries it
 * (fail-closed) or runs it without dedupe (`onStoreError: "run"`) — and the batch's other ids go on
 * with their claims. On InMemoryStore behind a thin override: InMemoryStore never fails one id, a
 * throttled DynamoDB request does (test/stores/dynamodb/claim-failures.test.ts has that side).
 */
import { describe, expect, it } from "vitest";
import type { BatchClaim, ClaimingStore } from "../../src/contract.js";
import { BatchEngine } from "../../src/engine/index.js";
import { StoreUnavailableError } from "../../src/errors.js";
import type { EngineEvent } from "../../src/events.js";
import { InMemoryStore } from "../../src/memory-store.js";
import { claimingView } from "../support/store-views.js";

const envelope = (id: string) => JSON.stringify({ job: "urn:babel:claim-failures", trace_id: `trace-${id}`, data: {}, meta: { id, schema_version: 1 }, attempts: 0 });
const batch = (ids: string[], group?: string) =>
  ids.map((id) => ({ body: envelope(id), context: {}, messageId: `m-${id}`, ...(group === undefined ? {} : { group }) }));

/** A claiming store whose `claimMany` answers `failed` for the ids in `failing` (and claims the others for real). */
function failingIds(failing: ReadonlySet<string>, inner = new InMemoryStore()): { store: ClaimingStore; inner: InMemoryStore; error: StoreUnavailableError } {
  const error = new StoreUnavailableError("TestStore", "claimMany", "ProvisionedThroughputExceededException (simulated)");
  const store = claimingView({
    inner,
    batch: true,
    overrides: {
      claimMany: async (ids, lease, fingerprints): Promise<BatchClaim[]> => {
        const rest = ids.filter((id) => !failing.has(id));
        const decided = await inner.claimMany(rest, lease, fingerprints?.filter((_, i) => !failing.has(ids[i] as string)));
        let next = 0;
        return ids.map((id) => (failing.has(id) ? { status: "failed", error } : (decided[next++] as BatchClaim)));
      },
    },
  });
  return { store, inner, error };
}

describe("a claimMany entry that fails one id", () => {
  it("fails that id alone (not acked, handler not run, the store's error); the others run and commit", async () => {
    const { store, inner, error } = failingIds(new Set(["b"]));
    const ran: string[] = [];
    const events: EngineEvent[] = [];
    const engine = new BatchEngine(store, (_message, ctx) => void ran.push(ctx.key ?? ""), { observe: (event) => events.push(event) });
    const results = await engine.process(batch(["a", "b", "c"]));
    expect(results.map((r) => [r.key, r.status, r.ack, r.handlerRan])).toEqual([
      ["a", "ran", true, true],
      ["b", "failed", false, false],
      ["c", "ran", true, true],
    ]);
    expect(results[1]?.error).toBe(error);
    expect(results[1]?.dedupe).toBe("claim");
    expect(ran).toEqual(["a", "c"]);
    expect(await inner.seen("a")).toBe(true);
    expect(await inner.seen("c")).toBe(true);
    // Nothing is held for the failed id: its redelivery claims it.
    expect((await inner.claim("b")).status).toBe("claimed");
    // The claim step reports one failed id, with the store's error.
    const claimSteps = events.filter((e) => e.type === "store-step" && e.step === "claim");
    expect(claimSteps).toMatchObject([{ ids: 3, ok: false }]);
    expect(events.filter((e) => e.type === "store-error")).toEqual([{ type: "store-error", step: "claim", ids: 1, error }]);
  });

  it("runs that id without dedupe with onStoreError 'run', like any store error", async () => {
    const { store } = failingIds(new Set(["b"]));
    const ran: string[] = [];
    const results = await new BatchEngine(store, (_message, ctx) => void ran.push(ctx.key ?? ""), { onStoreError: "run" }).process(batch(["a", "b"]));
    expect(results.map((r) => [r.key, r.status, r.dedupe])).toEqual([
      ["a", "ran", "claim"],
      ["b", "ran", "none"],
    ]);
    expect(ran.sort()).toEqual(["a", "b"]);
  });

  it("leaves copies of the failed id in the batch unacknowledged and unrun, as a whole-step failure does", async () => {
    const { store } = failingIds(new Set(["b"]));
    let runs = 0;
    const results = await new BatchEngine(store, () => void (runs += 1)).process(batch(["b", "a", "b"]));
    expect(results.map((r) => [r.key, r.status, r.ack, r.handlerRan])).toEqual([
      ["b", "failed", false, false],
      ["a", "ran", true, true],
      ["b", "in-flight", false, false],
    ]);
    expect(runs).toBe(1);
    // The same batch when the whole claim step fails: the copy's answer is the same.
    const down = claimingView({ batch: true, overrides: { claimMany: async () => Promise.reject(new StoreUnavailableError("TestStore", "claimMany", "down")) } });
    const whole = await new BatchEngine(down, () => undefined).process(batch(["b", "a", "b"]));
    expect(whole[2]?.status).toBe(results[2]?.status);
  });

  it("stops a FIFO group at the failed id and keeps the group's order", async () => {
    const { store } = failingIds(new Set(["g2"]));
    const ran: string[] = [];
    const results = await new BatchEngine(store, (_message, ctx) => void ran.push(ctx.key ?? "")).process(batch(["g1", "g2", "g3"], "group-1"));
    expect(results.map((r) => [r.key, r.status, r.ack])).toEqual([
      ["g1", "ran", true],
      ["g2", "failed", false],
      ["g3", "failed", false],
    ]);
    expect(ran).toEqual(["g1"]);
  });

  it("treats a 'failed' entry without an error as a store error of the wrong shape", async () => {
    const store = claimingView({ batch: true, overrides: { claimMany: async () => [{ status: "failed" } as unknown as BatchClaim] } });
    const [result] = await new BatchEngine(store, () => undefined).process(batch(["x"]));
    expect(result).toMatchObject({ status: "failed", ack: false, handlerRan: false, key: "x" });
    expect((result?.error as Error).message).toMatch(/claimMany.*wrong shape/);
  });

  it("refuses 'failed' from the one-id claim: Claim has no such member (a malformed answer, still fail-closed)", async () => {
    const store = claimingView({ batch: false, overrides: { claim: async () => ({ status: "failed", error: new Error("x") }) as never } });
    const [result] = await new BatchEngine(store, () => undefined).process(batch(["y"]));
    expect(result).toMatchObject({ status: "failed", ack: false, handlerRan: false });
    expect((result?.error as Error).message).toMatch(/wrong shape/);
  });
});
