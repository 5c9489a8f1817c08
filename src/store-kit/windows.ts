/**
 * The two time windows of every store (the lease and the retention; docs/ARCHITECTURE.md, "The store contract"), validated and defaulted in one place so
 * every store documents and enforces the same rules.
 */
import { DEFAULT_LEASE_MS, DEFAULT_RETENTION_MS, type StoreWindows } from "../contract.js";
import { InvalidOptionError } from "../errors.js";

/** Checks a duration option: a finite number of milliseconds above zero. */
export function checkMs(option: string, value: number): number {
  if (typeof value !== "number" || !Number.isFinite(value) || value <= 0) {
    throw new InvalidOptionError(option, "must be a positive number of milliseconds");
  }
  return value;
}

/** A store's lease and retention with their defaults applied and checked. */
export function resolveWindows(options: StoreWindows): Required<StoreWindows> {
  return {
    leaseMs: checkMs("leaseMs", options.leaseMs ?? DEFAULT_LEASE_MS),
    retentionMs: checkMs("retentionMs", options.retentionMs ?? DEFAULT_RETENTION_MS),
  };
}
