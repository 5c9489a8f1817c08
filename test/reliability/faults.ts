/**
 * Store fault injection for the reliability suite: errors before the backend is reached,
 * errors after it applied the call (the response was lost), timeouts, latency spikes, and a
 * whole outage switch.
 *
 * This is a wrapper, not a mock: every call that is not failed goes to the real store. It exists
 * because a real backend cannot be made to lose a response *after* applying a write on demand;
 * plain outages of the real backends are tested with the backends themselves.
 *
 * A transactional store's `transact` is wrapped too: an error or a timeout before it fails with
 * nothing run or written; a lost response comes after the handler ran and the transaction committed.
 */
import type { Claim, ClaimHints, ClaimRef, ClaimingStore, FencedClaim, Store, TransactionalStore } from "../../src/contract.js";
import { isClaimingStore, isTransactionalStore } from "../../src/contract.js";
import { StoreUnavailableError } from "../../src/errors.js";

export interface FaultRates {
  /** Fails before the backend is reached. */
  error?: number;
  /** Reaches the backend, then loses the answer (the write took effect). */
  lostResponse?: number;
  /** Hangs for `timeoutMs`, then fails (unknown whether the write took effect: it did not). */
  timeout?: number;
  /** Answers correctly after `spikeMs`. */
  spike?: number;
  timeoutMs?: number;
  spikeMs?: number;
}

export interface FaultSwitch {
  /** While true every call fails before reaching the backend. */
  down: boolean;
  /** Faults injected so far, by kind. */
  readonly injected: Record<string, number>;
  /** Store calls seen so far. */
  calls: number;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export function withFaults<S extends Store>(store: S, rates: FaultRates, random: () => number): { store: S; faults: FaultSwitch } {
  const faults: FaultSwitch = { down: false, injected: {}, calls: 0 };
  const count = (kind: string) => {
    faults.injected[kind] = (faults.injected[kind] ?? 0) + 1;
  };
  const guard = async <T>(operation: string, call: () => Promise<T>): Promise<T> => {
    faults.calls += 1;
    if (faults.down) {
      count("outage");
      throw new StoreUnavailableError("faulty", operation, "store is down (outage)");
    }
    const roll = random();
    let edge = rates.error ?? 0;
    if (roll < edge) {
      count("error");
      throw new StoreUnavailableError("faulty", operation, "injected error");
    }
    edge += rates.lostResponse ?? 0;
    if (roll < edge) {
      count("lost-response");
      await call();
      throw new StoreUnavailableError("faulty", operation, "injected lost response");
    }
    edge += rates.timeout ?? 0;
    if (roll < edge) {
      count("timeout");
      await sleep(rates.timeoutMs ?? 100);
      throw new StoreUnavailableError("faulty", operation, "injected timeout");
    }
    edge += rates.spike ?? 0;
    if (roll < edge) {
      count("spike");
      await sleep(rates.spikeMs ?? 50);
    }
    return call();
  };
  const base: Store = {
    seen: (id) => guard("seen", async () => store.seen(id)),
    remember: (id, fingerprint) => guard("remember", async () => store.remember(id, fingerprint)),
    forget: (id) => guard("forget", async () => store.forget(id)),
    ...(store.seenMany ? { seenMany: (ids: readonly string[]) => guard("seenMany", () => (store.seenMany as NonNullable<Store["seenMany"]>).call(store, ids)) } : {}),
    ...(store.rememberMany ? { rememberMany: (ids: readonly string[], fingerprints?: readonly (string | undefined)[]) => guard("rememberMany", () => (store.rememberMany as NonNullable<Store["rememberMany"]>).call(store, ids, fingerprints)) } : {}),
  };
  if (!isClaimingStore(store)) return { store: base as S, faults };
  const claiming: ClaimingStore = {
    ...base,
    claim: (id: string, leaseMs?: number, fingerprint?: string): Promise<Claim> => guard("claim", () => store.claim(id, leaseMs, fingerprint)),
    release: (id: string, token: string) => guard("release", () => store.release(id, token)),
    ...(store.claimMany
      ? {
          claimMany: (ids: readonly string[], leaseMs?: number, fingerprints?: readonly (string | undefined)[], hints?: ClaimHints) =>
            guard("claimMany", () => (store.claimMany as NonNullable<ClaimingStore["claimMany"]>).call(store, ids, leaseMs, fingerprints, hints)),
        }
      : {}),
    ...(store.releaseMany
      ? { releaseMany: (claims: readonly ClaimRef[]) => guard("releaseMany", () => (store.releaseMany as NonNullable<ClaimingStore["releaseMany"]>).call(store, claims)) }
      : {}),
  };
  if (!isTransactionalStore(store)) return { store: claiming as unknown as S, faults };
  const transactional: TransactionalStore<unknown> = {
    ...claiming,
    transact: (claim: FencedClaim, work: (tx: unknown) => Promise<void>) => guard("transact", () => store.transact(claim, work)),
  };
  return { store: transactional as unknown as S, faults };
}
