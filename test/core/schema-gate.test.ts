/**
 * src/schema-gate.ts, pinned: what is blank (ASCII whitespace only), what decodes (exactly "1"),
 * and the reason a rejection reports (the value escaped and shortened, never the body). The
 * conformance cases run through the runtime handlers (test/handlers/).
 */
import { describe, expect, it } from "vitest";
import { schemaVersionRejection } from "../../src/schema-gate.js";

describe("schemaVersionRejection", () => {
  it("absent, empty or ASCII-blank, and exactly \"1\": decode", () => {
    for (const value of [undefined, "", " ", "\t", "\n\v\f\r", " \t ", "1"]) expect(schemaVersionRejection(value)).toBeUndefined();
  });

  it("anything else is rejected, Unicode whitespace and a BOM included", () => {
    for (const value of ["2", "01", "x", " 1", "1 ", "\t1\n", "\u00a0", "\u0085", "\u3000", "\ufeff", "\u00a01", "1\u3000", "1.0"]) {
      expect(schemaVersionRejection(value), JSON.stringify(value)).toBeDefined();
    }
  });

  it("the reason quotes the value escaped and at most 24 characters", () => {
    expect(schemaVersionRejection("2")).toBe('transport property bq-schema-version is "2"; only "1" is supported, so the body was not decoded');
    expect(schemaVersionRejection("\u00a0")).toBe('transport property bq-schema-version is "\\u00a0"; only "1" is supported, so the body was not decoded');
    expect(schemaVersionRejection("9".repeat(40))).toBe(`transport property bq-schema-version is "${"9".repeat(24)}\\u2026"; only "1" is supported, so the body was not decoded`);
  });

  it("a value that is not a string is rejected", () => {
    expect(schemaVersionRejection({ binaryValue: "MQ==" })).toBe("transport property bq-schema-version is not a string; the body was not decoded");
    expect(schemaVersionRejection(1)).toBeDefined();
  });
});
