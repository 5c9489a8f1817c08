/**
 * The BabelQueue conformance runner for the core: the manifest's `cases` block (accept/reject
 * and the fields a consumer reads) and `idempotency.dedup_key`, through the envelope decoder,
 * `wrap` and the batch engine. The `idempotency.sequences` cases run in the store contract suite,
 * against every store, in both modes.
 */
import { describe, expect, it } from "vitest";
import { BatchEngine } from "../../src/engine/index.js";
import { decodeEnvelope, messageId } from "../../src/envelope.js";
import { InvalidMessageError } from "../../src/errors.js";
import { InMemoryStore } from "../../src/memory-store.js";
import { wrap } from "../../src/wrap.js";
import { conformanceSkipReason, fixture, fixtureText, manifest } from "../support/conformance-data.js";

const skip = conformanceSkipReason();

describe("BabelQueue conformance: cases", () => {
  if (skip !== undefined || manifest === undefined) {
    it.skip(skip ?? "skipped", () => {});
    return;
  }
  for (const testCase of manifest.cases) {
    for (const form of ["JSON text", "bytes", "parsed object"] as const) {
      it(`${testCase.name} (${form}) is ${testCase.valid ? "accepted" : "rejected"}`, () => {
        const text = fixtureText(testCase.file);
        const body = form === "JSON text" ? text : form === "bytes" ? new TextEncoder().encode(text) : fixture(testCase.file);
        const decoded = decodeEnvelope(body);
        expect(decoded.ok).toBe(testCase.valid);
        if (!decoded.ok) {
          expect(decoded.reason.length).toBeGreaterThan(10);
          return;
        }
        const envelope = decoded.message;
        const expected = testCase.expect ?? {};
        expect(envelope.job).toBe(expected.urn);
        expect(envelope.data).toEqual(expected.data);
        expect(envelope.attempts).toBe(expected.attempts);
        expect(envelope.meta.lang).toBe(expected.lang);
        expect(envelope.meta.schema_version).toBe(expected.schema_version);
        if ("dead_letter" in expected) expect(envelope.dead_letter).toMatchObject(expected.dead_letter as object);
        else expect(envelope.dead_letter).toBeUndefined();
      });
    }

    it(`${testCase.name} through wrap: ${testCase.valid ? "runs" : "is reported invalid and not run"}`, async () => {
      let runs = 0;
      const deliver = wrap(new InMemoryStore(), () => {
        runs += 1;
      });
      const delivered = deliver(fixtureText(testCase.file));
      if (testCase.valid) await expect(delivered).resolves.toBeUndefined();
      else await expect(delivered).rejects.toBeInstanceOf(InvalidMessageError);
      expect(runs).toBe(testCase.valid ? 1 : 0);
    });
  }

  const cases = manifest.cases;
  it("rejections name the problem (schema version, identity)", () => {
    const reasons = cases
      .filter((c) => !c.valid)
      .map((c) => [c.name, decodeEnvelope(fixtureText(c.file))] as const);
    for (const [name, decoded] of reasons) {
      expect(decoded.ok).toBe(false);
      if (decoded.ok) continue;
      if (name.includes("schema-version")) expect(decoded.reason).toMatch(/schema_version/);
      if (name.includes("missing-urn")) expect(decoded.reason).toMatch(/'job' or 'urn'/);
    }
  });
});

describe("BabelQueue conformance: idempotency.dedup_key", () => {
  if (skip !== undefined || manifest === undefined) {
    it.skip(skip ?? "skipped", () => {});
    return;
  }
  const { envelope_file: file, expected_key: expectedKey } = manifest.idempotency.dedup_key;

  it("keys on meta.id verbatim", () => {
    const decoded = decodeEnvelope(fixtureText(file));
    expect(decoded.ok).toBe(true);
    if (decoded.ok) expect(messageId(decoded.message)).toBe(expectedKey);
  });

  it("dedupes byte-identical redeliveries to one effect, and never keys on trace_id", async () => {
    const store = new InMemoryStore();
    const keys: (string | undefined)[] = [];
    const engine = new BatchEngine(store, (_envelope, context) => {
      keys.push(context.key);
    });
    const same = fixtureText(file);
    const sameTrace = fixture(file);
    (sameTrace.meta as Record<string, unknown>).id = "another-id-same-trace";
    const results = await engine.process([{ body: same, context: {} }, { body: same, context: {} }, { body: sameTrace, context: {} }]);
    expect(results.map((r) => r.status)).toEqual(["ran", "duplicate", "ran"]);
    expect(keys).toEqual([expectedKey, "another-id-same-trace"]);
    expect(await store.seen(expectedKey)).toBe(true);
    const again = await engine.process([{ body: same, context: {} }]);
    expect(again[0]?.status).toBe("duplicate");
  });
});
