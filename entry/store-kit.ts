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
 * abstract class MyStore implements ClaimingStore {
 *   readonly namespace = checkNamespace("orders");
 *   readonly windows = resolveWindows({});
 *   async claim(id: string, leaseMs?: number, fingerprint?: string): Promise<Claim> {
 *     const key = await storeKey(this.namespace, id, 512);
 *     const lease = checkMs("leaseMs", leaseMs ?? this.windows.leaseMs);
 *     return myBackendClaim(key, lease, checkFingerprint(fingerprint));
 *   }
 *   // … and your backend's release, seen, remember, forget
 *   abstract release(id: string, token: string): Promise<boolean>;
 *   abstract seen(id: string): Promise<boolean>;
 *   abstract remember(id: string, fingerprint?: string): Promise<void>;
 *   abstract forget(id: string): Promise<void>;
 * }
 * ```
 *
 * @module babelqueue-serverless/store-kit
 */
export * from "../src/store-kit/index.js";
