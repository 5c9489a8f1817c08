/**
 * `InMemoryStore`: a `ClaimingStore` in one process's memory — leases, fencing tokens,
 * retention, namespaces, the batch forms and an injectable clock.
 *
 * For tests, demos, and single-process consumers. Expiry is checked on every read, and
 * expired entries are swept as writes go on, so memory stays bounded by the live ids.
 *
 * What this is *not*: shared. Two Lambda instances or two Workers isolates each have their
 * own memory, so this store cannot dedupe across them; use DynamoDB, Upstash Redis or the
 * Durable Object store for that.
 */
import type { Claim, ClaimRef, ClaimingStore, StoreWindows } from "./contract.js";
import { InvalidOptionError } from "./errors.js";
import { checkNamespace } from "./keys.js";
import { checkMs, resolveWindows } from "./windows.js";

export interface InMemoryStoreOptions extends StoreWindows {
  /** Key prefix separating consumers that must each run their effect once. Default "". */
  namespace?: string;
  /** The clock, in epoch milliseconds. Default `Date.now`; tests inject a fake one. */
  now?: () => number;
  /** Fencing-token generator. Default `crypto.randomUUID`. */
  token?: () => string;
}

interface Entry {
  state: "in-flight" | "done";
  token: string;
  /** in-flight: the lease's end; done: the retention's end. */
  expiresAt: number;
}

const SWEEP_EVERY_WRITES = 1024;

export class InMemoryStore implements ClaimingStore {
  readonly namespace: string;
  readonly leaseMs: number;
  readonly retentionMs: number;
  readonly #entries = new Map<string, Entry>();
  readonly #now: () => number;
  readonly #token: () => string;
  #writes = 0;

  constructor(options: InMemoryStoreOptions = {}) {
    this.namespace = checkNamespace(options.namespace ?? "");
    ({ leaseMs: this.leaseMs, retentionMs: this.retentionMs } = resolveWindows(options));
    this.#now = options.now ?? Date.now;
    this.#token = options.token ?? (() => crypto.randomUUID());
  }

  /** Live entries (committed or in flight), for tests and metrics. */
  get size(): number {
    this.#sweep();
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
    for (const [key, entry] of this.#entries) if (entry.expiresAt <= now) this.#entries.delete(key);
  }

  #claimSync(id: string, leaseMs: number): Claim {
    const key = this.#key(id);
    const now = this.#now();
    const entry = this.#live(key, now);
    if (entry?.state === "done") return { status: "done" };
    if (entry?.state === "in-flight") return { status: "in-flight", retryAfterMs: entry.expiresAt - now };
    const token = this.#token();
    this.#entries.set(key, { state: "in-flight", token, expiresAt: now + leaseMs });
    this.#written();
    return { status: "claimed", token };
  }

  #rememberSync(id: string): void {
    const key = this.#key(id);
    this.#entries.set(key, { state: "done", token: "", expiresAt: this.#now() + this.retentionMs });
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

  async remember(id: string): Promise<void> {
    this.#rememberSync(id);
  }

  async rememberMany(ids: readonly string[]): Promise<void> {
    for (const id of ids) this.#rememberSync(id);
  }

  async forget(id: string): Promise<void> {
    this.#entries.delete(this.#key(id));
  }

  async claim(id: string, leaseMs?: number): Promise<Claim> {
    return this.#claimSync(id, checkMs("leaseMs", leaseMs ?? this.leaseMs));
  }

  async claimMany(ids: readonly string[], leaseMs?: number): Promise<Claim[]> {
    const lease = checkMs("leaseMs", leaseMs ?? this.leaseMs);
    return ids.map((id) => this.#claimSync(id, lease));
  }

  async release(id: string, token: string): Promise<boolean> {
    return this.#releaseSync(id, token);
  }

  async releaseMany(claims: readonly ClaimRef[]): Promise<void> {
    for (const claim of claims) this.#releaseSync(claim.id, claim.token);
  }
}
