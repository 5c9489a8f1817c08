/// <reference types="vite/client" />
/**
 * BabelQueue's conformance data, read from `../shared/conformance` (relative to the project
 * root) at transform time through `import.meta.glob`, so the same module works in Node and
 * inside workerd (no `fs`). Never copied into the project.
 *
 * On a user's machine the folder is absent: `manifest` is undefined and the runners say they
 * were skipped. In CI (`CI` set) the folder must be there, and its absence fails the run.
 */
import { inject } from "vitest";

export interface ManifestCase {
  name: string;
  file: string;
  valid: boolean;
  description?: string;
  reason?: string;
  expect?: Record<string, unknown>;
}

export interface SequenceDelivery {
  meta_id: string;
  expect_effect: "run" | "skip";
  outcome?: "ok" | "throw";
  forget_before?: boolean;
}

export interface SequenceCase {
  name: string;
  description: string;
  deliveries: SequenceDelivery[];
  expected_effects: number;
}

export interface AttemptsCase {
  name: string;
  body_attempts: number;
  approximate_receive_count: string | null;
  expected_attempts: number;
}

export interface Manifest {
  cases: ManifestCase[];
  idempotency: {
    dedup_key: { envelope_file: string; key_field: string; expected_key: string };
    sequences: { cases: SequenceCase[] };
  };
  sqs: { attempts_reconciliation: { cases: AttemptsCase[] } };
}

/** One case of a `schema_version_gate` block: the property's value (or absent) and the verdict. */
export interface SchemaGateCase {
  value?: string;
  absent?: boolean;
  expect: "decode" | "reject";
}

export interface SchemaGateBlock {
  property: string;
  fixture: string;
  cases: SchemaGateCase[];
}

/** The newer upstream blocks (`manifest-next.json`): the SQS and Kafka schema gates, the Kafka binding. */
export interface NextManifest {
  sqs: { schema_version_gate: SchemaGateBlock };
  kafka: {
    property_projection: { envelope_file: string; headers: Record<string, string> };
    attempts_reconciliation: { cases: { name: string; body_attempts: number; header_attempts: number | null; expected_attempts: number }[] };
    schema_version_gate: SchemaGateBlock;
  };
}

const nextManifests = import.meta.glob<NextManifest>("../../../shared/conformance/manifest-next.json", {
  eager: true,
  import: "default",
});

/** manifest-next.json, or undefined when the conformance folder is absent. */
export const nextManifest: NextManifest | undefined = Object.values(nextManifests)[0];

const manifests = import.meta.glob<Manifest>("../../../shared/conformance/manifest.json", {
  eager: true,
  import: "default",
});
const fixtureFiles = import.meta.glob<Record<string, unknown>>("../../../shared/conformance/fixtures/*.json", {
  eager: true,
  import: "default",
});

/** The manifest, or undefined when the conformance folder is absent. */
export const manifest: Manifest | undefined = Object.values(manifests)[0];

/** A fixture by its manifest path (`fixtures/order-created.json`), as a fresh deep copy. */
export function fixture(file: string): Record<string, unknown> {
  const found = Object.entries(fixtureFiles).find(([path]) => path.endsWith(`/conformance/${file}`));
  if (found === undefined) throw new Error(`conformance fixture ${file} not found`);
  return structuredClone(found[1]);
}

/**
 * A BabelQueue order envelope for the handler and deploy tests: the conformance fixture
 * `order-created.json` when the conformance folder is there (a real producer's bytes), else one
 * written here to the same schema, so those tests also run on a machine without the folder. (In CI
 * the folder is required all the same: its absence fails the conformance runners.)
 */
export function sampleEnvelope(): Record<string, unknown> {
  const found = Object.entries(fixtureFiles).find(([path]) => path.endsWith("/conformance/fixtures/order-created.json"));
  if (found !== undefined) return structuredClone(found[1]);
  return {
    job: "urn:babel:orders:created",
    trace_id: "sample-trace-order-created",
    data: { order_id: 1001 },
    meta: { id: "sample-order-created", queue: "orders", lang: "node", schema_version: 1, created_at: 1767225600 },
    attempts: 0,
  };
}

/**
 * The sample envelope as the body a queue carries, with `meta.id` = `id` (no `meta.id` when `id` is
 * undefined) and `extra` top-level fields over it.
 */
export function sampleBody(id: string | undefined, extra: Record<string, unknown> = {}): string {
  const body = sampleEnvelope();
  const meta = body.meta as Record<string, unknown>;
  if (id === undefined) delete meta.id;
  else meta.id = id;
  return JSON.stringify({ ...body, ...extra });
}

/** The raw bytes of a fixture as the wire carries them (JSON text). */
export function fixtureText(file: string): string {
  return JSON.stringify(fixture(file));
}

declare module "vitest" {
  export interface ProvidedContext {
    /** True in CI: the conformance folder must be there. Provided by both vitest projects' configs. */
    conformanceRequired: boolean;
  }
}

// Through provide/inject rather than process.env, which workerd does not see.
const inCI = inject("conformanceRequired") === true;

/**
 * Why the conformance runners are skipped, or undefined when the data is present. Throws in CI,
 * where a missing folder means a broken checkout, not a user's machine.
 */
export function conformanceSkipReason(): string | undefined {
  if (manifest !== undefined && nextManifest !== undefined) return undefined;
  if (inCI) throw new Error("../shared/conformance/manifest.json is missing, and CI must run the conformance cases");
  return "skipped: ../shared/conformance is absent (it is present in CI)";
}
