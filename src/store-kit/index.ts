/**
 * The store kit: what every store of this package uses, and what you need to write your own
 * (`babelqueue-serverless/store-kit`). One place for each rule a store must follow the same way:
 *
 * - keys (keys.ts): `{prefix}{namespace}:{id}`, any string id, ids too long for the backend hashed to
 *   a fixed length, the namespace checked once;
 * - windows (windows.ts): the lease and the retention, defaulted and checked;
 * - fingerprints (fingerprints.ts): the opaque 1-64 character payload fingerprint, checked before
 *   anything is written, and omitted from answers that have none;
 * - failures (failures.ts): a backend's error as a `StoreUnavailableError` that carries no payload,
 *   key or secret; a batch step that failed for some ids only as a `PartialStepError`;
 * - options (options.ts): an options object that rejects keys it does not know;
 * - tokens (tokens.ts): a claim token is a non-empty string; without one a release is a no-op and a
 *   transaction a lost fence.
 *
 * The contract itself (`Store`, `ClaimingStore`, `Claim`, …) is on the package root; the types only a
 * store's author (or a direct caller of a batch form) meets (`BatchClaim`, `ClaimFailure`, `ClaimHints`,
 * `FencedClaim`, `IdRecord`, `Recall`) are here too. The contract
 * test suite every store passes is described in docs/ARCHITECTURE.md ("Adding a store").
 *
 * What this is *not*: a base class. A store is a plain class that calls these helpers, so each
 * backend's file reads top to bottom without inheritance.
 */
export type { BatchClaim, ClaimFailure, ClaimHints, FencedClaim, IdRecord, Recall } from "../contract.js";
export { type StoreKeyOptions, checkNamespace, keyPart, sha256Base64url, storeKey, utf8Length } from "./keys.js";
export { checkMs, resolveWindows } from "./windows.js";
export { answerPerKey } from "./copies.js";
export { MAX_FINGERPRINT_LENGTH, checkFingerprint, checkFingerprints, withFingerprint } from "./fingerprints.js";
export {
  type FailureOptions,
  type FailureWording,
  MAX_FAILURE_DETAIL,
  describeFailure,
  errorCode,
  httpStatus,
  scrubbedError,
  storeFailure,
  throwStepFailures,
} from "./failures.js";
export { type OptionKeys, checkOptions, optionKeys, unionKeys } from "./options.js";
export { fenceToken, heldClaims, isToken } from "./tokens.js";
export { PartialStepError } from "../errors.js";
