/**
 * The one envelope builder of the tests: a BabelQueue envelope (schema_version 1) for an id, as an
 * object or as the JSON body a queue carries. Each test passes only what it cares about (the job,
 * the data, meta fields, attempts); everything else has a fixed, valid default.
 *
 * What this is *not*: the conformance fixtures (support/conformance-data.ts has a real producer's
 * bytes) or a validator.
 */

/** What a test may set; `meta` fields are merged into `{ id, schema_version: 1 }`. */
export interface EnvelopeParts {
  readonly job?: string;
  /** Default: `trace-<id>` (or `trace` without an id). */
  readonly traceId?: string;
  /** Default: `{ id }` (or `{}` without an id). */
  readonly data?: Record<string, unknown>;
  readonly meta?: Record<string, unknown>;
  readonly attempts?: number;
  /** Extra top-level fields (e.g. `dead_letter`). */
  readonly extra?: Record<string, unknown>;
}

/**
 * An envelope object whose `meta.id` is `id` (no `meta.id` at all when `id` is undefined; a
 * non-string `id` is kept as it is, for tests of ids that are not usable keys).
 */
export function envelope(id: unknown, parts: EnvelopeParts = {}): Record<string, unknown> {
  return {
    job: parts.job ?? "urn:babel:test:job",
    trace_id: parts.traceId ?? (id === undefined ? "trace" : `trace-${String(id)}`),
    data: parts.data ?? (typeof id === "string" ? { id } : {}),
    meta: { ...(id === undefined ? {} : { id }), schema_version: 1, ...parts.meta },
    attempts: parts.attempts ?? 0,
    ...parts.extra,
  };
}

/** The same envelope as the JSON text a queue body carries. */
export function envelopeBody(id: unknown, parts: EnvelopeParts = {}): string {
  return JSON.stringify(envelope(id, parts));
}
