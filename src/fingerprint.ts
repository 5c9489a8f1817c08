/**
 * Payload fingerprints: what tells a redelivery of a message (same id, same content) from a
 * producer bug that reused an id for another message (same id, other content).
 *
 * The default fingerprint is the SHA-256 (base64url, 43 characters) of the canonical JSON —
 * object keys sorted at every depth — of the envelope's `job` and `data`. So a redelivery that
 * another SDK re-serialised, with other `attempts`, another `meta.lang` or another key order,
 * still matches; a different job or different data does not.
 *
 * What this is *not*: a content-addressed id. The dedupe key is still `meta.id`; the
 * fingerprint only checks that a reused id carries the same message. It is not a secret
 * either — a hash of the payload, stored next to the id.
 */
import { sha256Base64url } from "./keys.js";

/** A message's fingerprint, or undefined when it has none (then it matches any record). */
export type Fingerprinter<Message> = (message: Message) => string | undefined | Promise<string | undefined>;

/** Longest fingerprint a store must hold. */
export const MAX_FINGERPRINT_LENGTH = 64;

function isPlainRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** JSON with object keys sorted at every depth: equal for equal values whatever the key order. */
export function canonicalJson(value: unknown): string | undefined {
  return JSON.stringify(value, (_key, current: unknown) => {
    if (!isPlainRecord(current)) return current;
    const sorted: Record<string, unknown> = {};
    for (const key of Object.keys(current).sort()) {
      // defineProperty keeps a "__proto__" key an ordinary key, as JSON.parse made it.
      Object.defineProperty(sorted, key, { value: current[key], enumerable: true, writable: true, configurable: true });
    }
    return sorted;
  });
}

/** The default fingerprint: SHA-256 of the canonical JSON of `{ job, data }`. */
export async function defaultFingerprint(message: unknown): Promise<string | undefined> {
  const record = isPlainRecord(message) ? message : { data: message };
  const canonical = canonicalJson({ job: record.job, data: record.data });
  return canonical === undefined ? undefined : sha256Base64url(canonical);
}

/**
 * Runs a fingerprinter safely. An answer longer than `MAX_FINGERPRINT_LENGTH` is hashed down to
 * one; a throw, a cycle or a non-string answer means "no fingerprint" (the message is then checked
 * by id only, as before this feature) rather than a failed delivery.
 */
export async function fingerprintOf<Message>(fingerprinter: Fingerprinter<Message> | undefined, message: Message): Promise<string | undefined> {
  if (fingerprinter === undefined) return undefined;
  try {
    const value = await fingerprinter(message);
    if (typeof value !== "string" || value === "") return undefined;
    return value.length <= MAX_FINGERPRINT_LENGTH ? value : await sha256Base64url(value);
  } catch {
    return undefined;
  }
}

/** True when a stored fingerprint and a message's disagree. A side without one matches anything. */
export function fingerprintsDiffer(stored: string | undefined, received: string | undefined): boolean {
  return stored !== undefined && received !== undefined && stored !== received;
}
