/**
 * Thin views of an InMemoryStore for engine tests: the same store seen through the shape of
 * another kind of backend — a claiming store with or without its batch forms, or a seen-set store —
 * with single methods overridden where a test needs a store to answer what InMemoryStore never does
 * (a wrong shape, a failure of one id, a step that never returns).
 *
 * What this is *not*: a mock backend. Every method not overridden is InMemoryStore's own.
 */
import type { ClaimingStore, Store } from "../../src/contract.js";
import { InMemoryStore } from "../../src/memory-store.js";

/**
 * A claiming store over `inner`. `batch: true` keeps the batch forms (`claimMany`, `rememberMany`,
 * `releaseMany`); false leaves only the per-id methods, so the engine takes its per-id fallbacks.
 */
export function claimingView(options: { inner?: InMemoryStore; batch: boolean; overrides?: Partial<ClaimingStore> }): ClaimingStore {
  const inner = options.inner ?? new InMemoryStore();
  const perId: ClaimingStore = {
    seen: (id) => inner.seen(id),
    remember: (id, fp) => inner.remember(id, fp),
    forget: (id) => inner.forget(id),
    claim: (id, lease, fp) => inner.claim(id, lease, fp),
    release: (id, token) => inner.release(id, token),
  };
  const batch: Partial<ClaimingStore> = options.batch
    ? {
        rememberMany: (ids, fps) => inner.rememberMany(ids, fps),
        claimMany: (ids, lease, fps) => inner.claimMany(ids, lease, fps),
        releaseMany: (claims) => inner.releaseMany(claims),
      }
    : {};
  return { ...perId, ...batch, ...options.overrides };
}

/** A seen-set store (no claim) over `inner`: seen / remember / forget, plus what `extra` adds. */
export function seenSetView(inner: InMemoryStore, extra: Partial<Store> = {}): Store {
  return {
    seen: (id) => inner.seen(id),
    remember: (id, fp) => inner.remember(id, fp),
    forget: (id) => inner.forget(id),
    ...extra,
  };
}

/**
 * A store whose `property` throws on ACCESS (not on call): the engine itself fails while it looks
 * at the store, which no real backend can make it do — what the runtime handlers must survive.
 */
export function throwingOnAccess<S extends object>(store: S, property: string): S {
  return new Proxy(store, {
    get(target, key, receiver) {
      if (key === property) throw new Error("unexpected");
      const value = Reflect.get(target, key, receiver) as unknown;
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/** A claiming view of `inner` with batch forms that records the ids of every commit step (`rememberMany`). */
export function recordingCommits(inner = new InMemoryStore()): { inner: InMemoryStore; store: ClaimingStore; commits: string[][] } {
  const commits: string[][] = [];
  const store = claimingView({
    inner,
    batch: true,
    overrides: {
      rememberMany: async (ids, fps) => {
        commits.push([...ids]);
        await inner.rememberMany(ids, fps);
      },
    },
  });
  return { inner, store, commits };
}
