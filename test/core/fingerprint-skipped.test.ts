/**
 * src/fingerprint.ts `defaultFingerprint`, the values the random property test does not generate:
 * functions and symbols (skipped in objects, `null` in arrays, as `JSON.stringify` does), non-finite
 * numbers (`null`), a string whose only escape is a backslash, and an object shared (not cyclic)
 * between two fields. Each must hash exactly the text `canonicalJson` builds.
 */
import { describe, expect, it } from "vitest";
import { canonicalJson, defaultFingerprint, hash128 } from "../../src/fingerprint.js";

const hashOf = (text: string) => `h1:${hash128(text)}`;

describe("defaultFingerprint: values outside the property test", () => {
  it("skips functions and symbols in an object, as JSON.stringify does", () => {
    const plain = defaultFingerprint({ job: "j", data: { a: 1 } });
    expect(defaultFingerprint({ job: "j", data: { a: 1, f: () => 1, s: Symbol("s") } })).toBe(plain);
    expect(defaultFingerprint({ job: "j", data: { a: 1, u: undefined } })).toBe(plain);
    expect(plain).toBe(hashOf('{"data":{"a":1},"job":"j"}'));
  });

  it("renders functions and symbols in an array as null", () => {
    expect(defaultFingerprint({ job: "j", data: { list: [() => 1, Symbol("s"), 2] } })).toBe(hashOf('{"data":{"list":[null,null,2]},"job":"j"}'));
  });

  it("leaves out a job or data that is a function or a symbol", () => {
    expect(defaultFingerprint({ job: () => "j", data: { a: 1 } })).toBe(hashOf('{"data":{"a":1}}'));
    expect(defaultFingerprint({ job: "j", data: Symbol("d") })).toBe(hashOf('{"job":"j"}'));
  });

  it("hashes a non-finite number as null", () => {
    for (const n of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
      expect(defaultFingerprint({ job: "j", data: { n } })).toBe(hashOf('{"data":{"n":null},"job":"j"}'));
    }
    expect(defaultFingerprint({ job: "j", data: { n: Number.NaN } })).toBe(defaultFingerprint({ job: "j", data: { n: null } }));
  });

  it("escapes a backslash in a string that needs no other escape", () => {
    const data = { path: "C:\\orders", "a\\b": 1 };
    expect(canonicalJson({ data, job: "j" })).toBe('{"data":{"a\\\\b":1,"path":"C:\\\\orders"},"job":"j"}');
    expect(defaultFingerprint({ job: "j", data })).toBe(hashOf(canonicalJson({ data, job: "j" }) as string));
    expect(defaultFingerprint({ job: "j", data })).not.toBe(defaultFingerprint({ job: "j", data: { path: "C:orders", ab: 1 } }));
  });

  it("hashes an object shared by two fields twice: shared is not a cycle", () => {
    const shared = { v: 1 };
    const data = { a: shared, b: [shared, { c: shared }] };
    expect(defaultFingerprint({ job: "j", data })).toBe(hashOf('{"data":{"a":{"v":1},"b":[{"v":1},{"c":{"v":1}}]},"job":"j"}'));
  });
});
