/**
 * `babelqueue-serverless/store-kit`: what you need to write a store of your own, the same helpers
 * every store of this package uses (src/store-kit/): keys, windows, fingerprint checks, failure
 * wording and options checks. The contract's types (`Store`, `ClaimingStore`, `Claim`, …) are on
 * the package root.
 *
 * A store of your own should pass the contract suite (docs/ARCHITECTURE.md, "Adding a store").
 *
 * @example
 * ```ts
 * import type { Claim, ClaimingStore } from "babelqueue-serverless";
 * import { checkFingerprint, checkMs, checkNamespace, resolveWindows, storeKey } from "babelqueue-serverless/store-kit";
 *
 * class MyStore implements ClaimingStore {
 *   readonly namespace = checkNamespace("orders");
 *   readonly windows = resolveWindows({});
 *   async claim(id: string, leaseMs?: number, fingerprint?: string): Promise<Claim> {
 *     const key = await storeKey(this.namespace, id, 512);
 *     const lease = checkMs("leaseMs", leaseMs ?? this.windows.leaseMs);
 *     return myBackendClaim(key, lease, checkFingerprint(fingerprint));
 *   }
 *   // … release, seen, remember, forget
 * }
 * ```
 */
export * from "../src/store-kit/index.js";
