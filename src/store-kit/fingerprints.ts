/**
 * The payload fingerprints stores keep (the `conflict` row of the decision table, docs/ARCHITECTURE.md), checked the same way by every
 * store before anything is written.
 *
 * A fingerprint is an opaque string of 1 to 64 characters that the engine computes from a message's
 * payload. A store stores it with the claim or the commit and hands it back on `done` / `in-flight`
 * answers; it never interprets it. `undefined` (or `null`, from untyped callers) means "none".
 *
 * What this is *not*: the fingerprint's computation (the engine owns that) nor a comparison — the
 * engine decides what a different fingerprint means.
 */
import { MAX_FINGERPRINT_LENGTH } from "../contract.js";
import { InvalidOptionError } from "../errors.js";

export { MAX_FINGERPRINT_LENGTH };

/** One fingerprint: a string of 1-64 characters, or undefined for none. Throws `InvalidOptionError`. */
export function checkFingerprint(fingerprint: unknown): string | undefined {
  if (fingerprint === undefined || fingerprint === null) return undefined;
  if (typeof fingerprint !== "string" || fingerprint.length === 0 || fingerprint.length > MAX_FINGERPRINT_LENGTH) {
    throw new InvalidOptionError("fingerprint", `must be a string of 1 to ${MAX_FINGERPRINT_LENGTH} characters`);
  }
  return fingerprint;
}

/**
 * The fingerprints of a batch, one per id (undefined where there is none). `fingerprints` may be
 * omitted (no fingerprints at all); when given it must have exactly `count` entries.
 */
export function checkFingerprints(fingerprints: readonly unknown[] | undefined, count: number): (string | undefined)[] {
  if (fingerprints === undefined || fingerprints === null) return new Array<undefined>(count).fill(undefined);
  if (!Array.isArray(fingerprints) || fingerprints.length !== count) {
    throw new InvalidOptionError("fingerprints", "must have one entry per id (undefined where there is none)");
  }
  return fingerprints.map(checkFingerprint);
}

/** `{ fingerprint }` when there is one, else `{}`: answers omit the field rather than carry undefined. */
export function withFingerprint(fingerprint: string | undefined | null): { fingerprint?: string } {
  return typeof fingerprint === "string" && fingerprint !== "" ? { fingerprint } : {};
}
