/**
 * BabelQueue's transport schema-version gate (conformance blocks `sqs.schema_version_gate` and
 * `kafka.schema_version_gate`): a transport property `bq-schema-version` — an SQS message attribute,
 * a Kafka record header — is read BEFORE the body is decoded, and compared as it is:
 *
 * - absent, empty, or only ASCII whitespace (space, `\t`, `\n`, `\v`, `\f`, `\r`) → decode as usual
 *   (the body's own `meta.schema_version` check still applies);
 * - exactly `"1"` → decode;
 * - anything else → rejected without decoding: `"2"`, `"01"`, `" 1"`, `"1 "`, and values made of
 *   non-ASCII whitespace (NBSP, U+0085, U+3000) or a byte order mark, which are NOT blank.
 *
 * No trim and no Unicode-aware blank check: either would accept values the conformance cases reject.
 * A rejected delivery is `invalid` (the poison / DLQ path), like any body that is not an accepted
 * envelope.
 *
 * What this is *not*: the body's check. `decodeEnvelope` checks `meta.schema_version` itself.
 */

/** The transport property BabelQueue producers set to the envelope's schema version. */
export const SCHEMA_VERSION_PROPERTY = "bq-schema-version";

/** The only schema version this package decodes. */
const SUPPORTED = "1";

/** Empty or only ASCII whitespace: space, \t, \n, \v, \f, \r. */
const ASCII_BLANK = /^[ \t\n\v\f\r]*$/;

/** A property value in a reason: JSON-quoted, non-ASCII escaped, at most 24 characters shown. */
function shown(value: string): string {
  const head = value.length > 24 ? `${value.slice(0, 24)}…` : value;
  return JSON.stringify(head).replace(/[^\x20-\x7e]/g, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/**
 * The gate's verdict for one delivery's `bq-schema-version` value (undefined when the property is
 * absent): undefined to decode as usual, or the reason it is rejected without decoding. A value that
 * is present but not a string (a binary attribute) is rejected.
 */
export function schemaVersionRejection(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "string") return `transport property ${SCHEMA_VERSION_PROPERTY} is not a string; the body was not decoded`;
  if (value === SUPPORTED || ASCII_BLANK.test(value)) return undefined;
  return `transport property ${SCHEMA_VERSION_PROPERTY} is ${shown(value)}; only "${SUPPORTED}" is supported, so the body was not decoded`;
}
