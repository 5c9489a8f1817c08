/**
 * `InMemoryStore`: a `ClaimingStore` in one process's memory — leases, fencing tokens,
 * retention, namespaces, payload fingerprints, the batch forms, `recallMany`, `inspect` and an
 * injectable clock.
 *
 * For tests, demos, and single-process consumers. Expiry is checked on every read, and
 * expired entries are swept as writes go on (every 1,024th write), so memory stays bounded by the
 * live ids. A sweep walks the map only when an entry may have expired: the store keeps the
 * earliest end of any entry written since the last walk, so a sweep costs nothing while every
 * lease and retention still runs (the common case), rather than a walk of every id.
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
import { tokenSource } from "./store-kit/tokens.js";
import { checkMs, resolveWindows } from "./store-kit/windows.js";

/** Options of `InMemoryStore`. */
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
// Stryker disable next-line BooleanLiteral: optionKeys reads only the keys; each `true` lets the compiler check the list against the options type
const MEMORY_OPTION_KEYS = optionKeys<InMemoryStoreOptions>({ namespace: true, now: true, token: true, leaseMs: true, retentionMs: true });

/**
 * A `ClaimingStore` in one process's memory: claims, leases, fencing tokens, retention,
 * fingerprints and the batch forms, with an injectable clock. For tests, demos and single-process
 * consumers; it does not dedupe across Lambda instances or Workers isolates.
 *
 * @example
 * ```ts
 * import { BatchEngine, InMemoryStore } from "babelqueue-serverless";
 *
 * let now = Date.now();
 * const store = new InMemoryStore({ namespace: "orders", leaseMs: 30_000, now: () => now });
 * const engine = new BatchEngine(store, async (envelope) => {
 *   await sendReceipt(envelope.data);
 * });
 * await engine.process([{ body: rawJson, context: {} }]);
 * now += 5 * 24 * 60 * 60 * 1000; // past the 4-day retention: the id is forgotten
 * ```
 */
export class InMemoryStore implements ClaimingStore {
  readonly namespace: string;
  readonly leaseMs: number;
  readonly retentionMs: number;
  readonly #entries = new Map<string, Entry>();
  readonly #now: () => number;
  readonly #token: () => string;
  #writes = 0;
  /** No entry ends before this (epoch ms): a lower bound, so a sweep before it has nothing to do. */
  #earliestEnd = Number.POSITIVE_INFINITY;

  constructor(options: InMemoryStoreOptions = {}) {
    checkOptions(options, MEMORY_OPTION_KEYS, "InMemoryStore");
    this.namespace = checkNamespace(options.namespace ?? "");
    ({ leaseMs: this.leaseMs, retentionMs: this.retentionMs } = resolveWindows(options));
    this.#now = options.now ?? Date.now;
    const prefix = `${crypto.randomUUID()}:`;
    let counter = 0;
    this.#token = tokenSource(options.token, () => {
      counter += 1;
      return `${prefix}${counter}`;
    });
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
    // The id itself: Map keys need no hashing, and the map is this store's alone (one namespace),
    // so a namespace prefix would only cost a string per call.
    return id;
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

  #written(expiresAt: number): void {
    if (expiresAt < this.#earliestEnd) this.#earliestEnd = expiresAt;
    if (++this.#writes % SWEEP_EVERY_WRITES === 0) this.#sweep();
  }

  #sweep(): void {
    const now = this.#now();
    if (now < this.#earliestEnd) return;
    const entries = this.#entries;
    let earliest = Number.POSITIVE_INFINITY;
    // forEach, not for…of: no [key, entry] pair allocated per entry (deleting while iterating is fine for a Map).
    entries.forEach((entry, key) => {
      if (entry.expiresAt <= now) entries.delete(key);
      else if (entry.expiresAt < earliest) earliest = entry.expiresAt;
    });
    this.#earliestEnd = earliest;
  }

  #claimSync(id: string, leaseMs: number, fingerprint: string | undefined, now: number): Claim {
    const key = this.#key(id);
    const entry = this.#live(key, now);
    if (entry?.state === "done") return { status: "done", ...withFingerprint(entry.fingerprint) };
    if (entry?.state === "in-flight") {
      return { status: "in-flight", retryAfterMs: entry.expiresAt - now, ...withFingerprint(entry.fingerprint) };
    }
    const token = this.#token();
    const expiresAt = now + leaseMs;
    this.#entries.set(key, { state: "in-flight", token, expiresAt, fingerprint });
    this.#written(expiresAt);
    return { status: "claimed", token };
  }

  /** The commit: keeps the live record's fingerprint when none is given. */
  #rememberSync(id: string, fingerprint: string | undefined, now: number): void {
    const key = this.#key(id);
    const live = this.#live(key, now);
    const expiresAt = now + this.retentionMs;
    if (live === undefined) this.#entries.set(key, { state: "done", token: "", expiresAt, fingerprint });
    else {
      // The claim's own entry becomes the record: one object per id, not one per write.
      live.state = "done";
      live.token = "";
      live.expiresAt = expiresAt;
      live.fingerprint = fingerprint ?? live.fingerprint;
    }
    this.#written(expiresAt);
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
    this.#rememberSync(id, checkFingerprint(fingerprint), this.#now());
  }

  async rememberMany(ids: readonly string[], fingerprints?: readonly (string | undefined)[]): Promise<void> {
    const checked = checkFingerprints(fingerprints, ids.length);
    const now = this.#now();
    for (let i = 0; i < ids.length; i += 1) this.#rememberSync(ids[i] as string, checked[i], now);
  }

  async forget(id: string): Promise<void> {
    this.#entries.delete(this.#key(id));
  }

  async claim(id: string, leaseMs?: number, fingerprint?: string): Promise<Claim> {
    return this.#claimSync(id, checkMs("leaseMs", leaseMs ?? this.leaseMs), checkFingerprint(fingerprint), this.#now());
  }

  async claimMany(ids: readonly string[], leaseMs?: number, fingerprints?: readonly (string | undefined)[]): Promise<Claim[]> {
    const lease = checkMs("leaseMs", leaseMs ?? this.leaseMs);
    const checked = checkFingerprints(fingerprints, ids.length);
    const now = this.#now();
    return ids.map((id, i) => this.#claimSync(id, lease, checked[i], now));
  }

  async release(id: string, token: string): Promise<boolean> {
    return this.#releaseSync(id, token);
  }

  async releaseMany(claims: readonly ClaimRef[]): Promise<void> {
    for (const claim of claims) this.#releaseSync(claim.id, claim.token);
  }
}
