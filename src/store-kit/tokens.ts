/**
 * Claim tokens: the fence a claim hands out. `release` and a transactional commit name the claim
 * they act for by its token; a token that is not a non-empty string names no claim. Every store
 * (and the engine, reading a store's answer) reads tokens through these helpers, so "no token"
 * means the same everywhere: a release of it is a no-op that answers `false`, a transaction under
 * it fails with `FenceLostError` before anything is written.
 *
 * What this is *not*: token generation (each store draws its own random token) nor the comparison
 * with the token the backend holds — that is each store's conditional write.
 */
import { FenceLostError, InvalidOptionError } from "../errors.js";

/** True when `token` can name a claim: a non-empty string. */
export function isToken(token: unknown): token is string {
  return typeof token === "string" && token !== "";
}

/**
 * A store's token generator from its `token` option: `fallback` when none is given; a given one is
 * checked to be a function, and each token it draws to be one (`InvalidOptionError`), since a claim
 * under no token could never be released or fenced, and one under a repeated token not told apart.
 */
export function tokenSource(given: unknown, fallback: () => string): () => string {
  if (given === undefined) return fallback;
  if (typeof given !== "function") throw new InvalidOptionError("token", "must be a function returning a new random string");
  return () => {
    const drawn: unknown = given();
    if (!isToken(drawn)) throw new InvalidOptionError("token", "must return a non-empty string");
    return drawn;
  };
}

/** The claims of a `releaseMany` that hold a token, in order; the others hold nothing to release. */
export function heldClaims<T extends { readonly token: string }>(claims: readonly T[]): T[] {
  return claims.filter((claim) => isToken(claim?.token));
}

/** The token of a transaction's fence; throws `FenceLostError` (naming the id) when there is none. */
export function fenceToken(claim: { readonly id: string; readonly token: string } | undefined): string {
  if (!isToken(claim?.token)) throw new FenceLostError(String(claim?.id));
  return claim.token;
}
