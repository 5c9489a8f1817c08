/**
 * The API reference has something to say about every public name: each exported declaration of
 * every entry module (one per subpath of package.json "exports") has a doc comment, and so has
 * every property of every exported `…Options` interface, inherited ones included (read with the
 * TypeScript compiler by entry-docs.ts, as test/package/surface-names.ts reads the surface).
 *
 * What this is *not*: a check of what the comments say (review does that), nor of the examples
 * (examples.test.ts compiles those).
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readEntryDocs } from "./entry-docs.js";

const root = join(import.meta.dirname, "..", "..");
const { names, options } = readEntryDocs(root);

describe("doc comments of the public surface", () => {
  it("reads every subpath's exports and the options interfaces", () => {
    expect(new Set(names.map((name) => name.subpath)).size).toBeGreaterThanOrEqual(9);
    expect(names.length).toBeGreaterThan(150);
    expect(new Set(options.map((option) => option.options))).toContain("SqsHandlerOptions");
    expect(options.length).toBeGreaterThan(100);
  });

  it("every exported declaration has a doc comment", () => {
    const undocumented = names.filter((name) => name.doc.trim() === "").map((name) => `${name.subpath} ${name.name} (${name.where})`);
    expect(undocumented).toEqual([]);
  });

  it("every property of an exported Options interface has a doc comment", () => {
    const undocumented = options
      .filter((option) => option.doc.trim() === "")
      .map((option) => `${option.subpath} ${option.options}.${option.property} (${option.where})`);
    expect(undocumented).toEqual([]);
  });

  it("no doc comment holds `{{`: the site's pages are Vue templates, which would read it as an expression", () => {
    const interpolated = [...names.map((name) => ({ at: `${name.subpath} ${name.name}`, doc: name.doc })), ...options.map((option) => ({ at: `${option.options}.${option.property}`, doc: option.doc }))]
      .filter((entry) => entry.doc.includes("{{"))
      .map((entry) => entry.at);
    expect(interpolated).toEqual([]);
  });
});
