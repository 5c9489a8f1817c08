/**
 * `InMemoryStore`: a `ClaimingStore` in one process's memory — leases, fencing tokens,
 * retention, namespaces, payload fingerprints, the batch forms, `recallMany`, `inspect` and an
 * injectable clock.
 *
 * For tests, demos, and single-process consumers. Expiry is checked on every read, and
 * expired entries are swept as writes go on, so memory stays bounded by the live ids.
 *
 * What this is *not*: shared. Two Lambda instances or two Workers isolates each have their
 * own memory, so this store cannot dedupe across them; use DynamoDB, Upstash Redis or the
 * Durable Object store for that.
 */
import type { Claim, ClaimRef, ClaimingStore, IdRecord, Recall, StoreWindows } from "./contract.js";
import { InvalidOptionError } from "./errors.js";
import { checkNamespace } from "./store-kit/keys.js";
import { checkFingerprint, checkFingerprints, withFingerprint } from "./store-kit/fingerprints.js";
import { checkOptions, optionKeys } from "./store-kit/options.js";
import { checkMs, resolveWindows } from "./store-kit/windows.js";

export interface InMemoryStoreOptions extends StoreWindows {
  /** Key prefix separating consumers that must each run their effect once. Default "". */
  namespace?: string;
  /** The clock, in epoch milliseconds. Default `Date.now`; tests inject a fake one. */
  now?: () => number;
  /**
   * Fencing-token generator. Default: a random prefix per store (`crypto.randomUUID`, once) and a
   * counter, so every token of the store is unique and none costs a random draw.
   */
  token?: () => string;
}

interface Entry {
  state: "in-flight" | "done";
  token: string;
  /** in-flight: the lease's end; done: the retention's end. */
  expiresAt: number;
  /** The payload fingerprint of the claim or the commit, when one was given. */
  fingerprint: string | undefined;
}

const SWEEP_EVERY_WRITES = 1024;
const MEMORY_OPTION_KEYS = optionKeys<InMemoryStoreOptions>({ namespace: true, now: true, token: true, leaseMs: true, retentionMs: true });

export class InMemoryStore implements ClaimingStore {
  readonly namespace: string;
  readonly leaseMs: number;
  readonly retentionMs: number;
  readonly #entries = new Map<string, Entry>();
  readonly #now: () => number;
  readonly #token: () => string;
  #writes = 0;

  constructor(options: InMemoryStoreOptions = {}) {
    checkOptions(options, MEMORY_OPTION_KEYS, "InMemoryStore");
    this.namespace = checkNamespace(options.namespace ?? "");
    ({ leaseMs: this.leaseMs, retentionMs: this.retentionMs } = resolveWindows(options));
    this.#now = options.now ?? Date.now;
    if (options.token !== undefined) this.#token = options.token;
    else {
      const prefix = `${crypto.randomUUID()}:`;
      let counter = 0;
      this.#token = () => {
        counter += 1;
        return `${prefix}${counter}`;
      };
    }
  }

  /** Live entries (committed or in flight), for tests and metrics. */
  get size(): number {
    this.#sweep();
    return this.#entries.size;
  }

  /**
   * Entries held in memory right now, expired ones not yet swept included: what the memory bound
   * is about. Unlike `size`, reading it sweeps nothing.
   */
  get held(): number {
    return this.#entries.size;
  }

  #key(id: string): string {
    if (typeof id !== "string") throw new InvalidOptionError("id", "must be a string");
    // Map keys need no hashing; the namespace cannot contain ':', so the join is unambiguous.
    return `${this.namespace}:${id}`;
  }

  #live(key: string, now: number): Entry | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    if (entry.expiresAt <= now) {
      this.#entries.delete(key);
      return undefined;
    }
    return entry;
  }

  #written(): void {
    if (++this.#writes % SWEEP_EVERY_WRITES === 0) this.#sweep();
  }

  #sweep(): void {
    const now = this.#now();
    const entries = this.#entries;
    // forEach, not for…of: no [key, entry] pair allocated per entry (deleting while iterating is fine for a Map).
    entries.forEach((entry, key) => {
      if (entry.expiresAt <= now) entries.delete(key);
    });
  }

  #claimSync(id: string, leaseMs: number, fingerprint: string | undefined): Claim {
    const key = this.#key(id);
    const now = this.#now();
    const entry = this.#live(key, now);
    if (entry?.state === "done") return { status: "done", ...withFingerprint(entry.fingerprint) };
    if (entry?.state === "in-flight") {
      return { status: "in-flight", retryAfterMs: entry.expiresAt - now, ...withFingerprint(entry.fingerprint) };
    }
    const token = this.#token();
    this.#entries.set(key, { state: "in-flight", token, expiresAt: now + leaseMs, fingerprint });
    this.#written();
    return { status: "claimed", token };
  }

  /** The commit: keeps the live record's fingerprint when none is given. */
  #rememberSync(id: string, fingerprint: string | undefined): void {
    const key = this.#key(id);
    const now = this.#now();
    const kept = fingerprint ?? this.#live(key, now)?.fingerprint;
    this.#entries.set(key, { state: "done", token: "", expiresAt: now + this.retentionMs, fingerprint: kept });
    this.#written();
  }

  #releaseSync(id: string, token: string): boolean {
    const key = this.#key(id);
    const entry = this.#live(key, this.#now());
    if (entry === undefined || entry.state !== "in-flight" || entry.token !== token) return false;
    this.#entries.delete(key);
    return true;
  }

  async seen(id: string): Promise<boolean> {
    return this.#live(this.#key(id), this.#now())?.state === "done";
  }

  async seenMany(ids: readonly string[]): Promise<boolean[]> {
    const now = this.#now();
    return ids.map((id) => this.#live(this.#key(id), now)?.state === "done");
  }

  async recallMany(ids: readonly string[]): Promise<Recall[]> {
    const now = this.#now();
    return ids.map((id) => {
      const entry = this.#live(this.#key(id), now);
      return entry?.state === "done" ? { seen: true, ...withFingerprint(entry.fingerprint) } : { seen: false };
    });
  }

  async inspect(id: string): Promise<IdRecord | null> {
    const now = this.#now();
    const entry = this.#live(this.#key(id), now);
    if (entry === undefined) return null;
    const left = entry.expiresAt - now;
    return entry.state === "done"
      ? { status: "done", retentionLeftMs: left, ...withFingerprint(entry.fingerprint) }
      : { status: "in-flight", leaseLeftMs: left, ...withFingerprint(entry.fingerprint) };
  }

  async remember(id: string, fingerprint?: string): Promise<void> {
    this.#rememberSync(id, checkFingerprint(fingerprint));
  }

  async rememberMany(ids: readonly string[], fingerprints?: readonly (string | undefined)[]): Promise<void> {
    const checked = checkFingerprints(fingerprints, ids.length);
    for (const [i, id] of ids.entries()) this.#rememberSync(id, checked[i]);
  }

  async forget(id: string): Promise<void> {
    this.#entries.delete(this.#key(id));
  }

  async claim(id: string, leaseMs?: number, fingerprint?: string): Promise<Claim> {
    return this.#claimSync(id, checkMs("leaseMs", leaseMs ?? this.leaseMs), checkFingerprint(fingerprint));
  }

  async claimMany(ids: readonly string[], leaseMs?: number, fingerprints?: readonly (string | undefined)[]): Promise<Claim[]> {
    const lease = checkMs("leaseMs", leaseMs ?? this.leaseMs);
    const checked = checkFingerprints(fingerprints, ids.length);
    return ids.map((id, i) => this.#claimSync(id, lease, checked[i]));
  }

  async release(id: string, token: string): Promise<boolean> {
    return this.#releaseSync(id, token);
  }

  async releaseMany(claims: readonly ClaimRef[]): Promise<void> {
    for (const claim of claims) this.#releaseSync(claim.id, claim.token);
  }
}
