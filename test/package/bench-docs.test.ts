/**
 * The docs' benchmark figures are generated, not typed (scripts/bench-docs.ts, bench/sections.ts):
 * every marked section of every file in BENCH_DOC_FILES must be exactly what the last run's
 * results.json renders — a hand-edited figure, or a run whose docs were not regenerated, fails here.
 * Also: the proof page and the README show every section, and the generator refuses what it cannot render.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { BENCH_SECTIONS } from "../../bench/sections.js";
import { BENCH_DOC_FILES, markedSections, readResults, renderBenchDoc, staleSections } from "../../scripts/bench-docs.js";

const root = join(import.meta.dirname, "..", "..");
const results = readResults();

describe("the marked benchmark sections", () => {
  for (const file of BENCH_DOC_FILES) {
    it(`${file}: every section is what bench/results/results.json says (npm run bench:docs regenerates them)`, () => {
      const text = readFileSync(join(root, file), "utf8");
      expect(markedSections(text, file).length).toBeGreaterThan(0);
      expect(staleSections(text, results, file)).toEqual([]);
      expect(renderBenchDoc(text, results, file)).toBe(text);
    });
  }

  it("the docs show every section there is: the proof page all but the README's headline, the README the headline", () => {
    const names = (file: string) => markedSections(readFileSync(join(root, file), "utf8"), file).map((section) => section.name);
    expect(BENCH_DOC_FILES).toEqual(["README.md", "docs/proof/benchmark.md"]);
    expect(names("docs/proof/benchmark.md").sort()).toEqual(Object.keys(BENCH_SECTIONS).filter((name) => name !== "headline").sort());
    expect(names("README.md")).toContain("headline");
  });

  it("a figure edited by hand is stale; regenerating puts the run's back, and leaves the rest of the text alone", () => {
    const fresh = renderBenchDoc("intro\n<!-- bench:overhead -->\n<!-- /bench:overhead -->\noutro\n", results);
    const ours = results.overhead.figures.find((one) => one.kit === "ours");
    expect(ours).toBeDefined();
    const typed = fresh.replace(`| ours | ${ours?.description} |`, `| ours | ${ours?.description} (typed) |`);
    expect(typed).not.toBe(fresh);
    expect(staleSections(typed, results)).toEqual(["overhead"]);
    expect(renderBenchDoc(typed, results)).toBe(fresh);
    expect(fresh.startsWith("intro\n<!-- bench:overhead -->\n|")).toBe(true);
    expect(fresh.endsWith("|\n<!-- /bench:overhead -->\noutro\n")).toBe(true);
  });

  it("refuses an unknown section, a marker without its pair, and a section opened inside another", () => {
    expect(() => markedSections("<!-- bench:nope -->\n<!-- /bench:nope -->", "f.md")).toThrow('f.md: no benchmark section "nope"');
    expect(() => markedSections("<!-- bench:key -->\n", "f.md")).toThrow("f.md: <!-- bench:key --> is never closed");
    expect(() => markedSections("<!-- /bench:key -->", "f.md")).toThrow("closes a section that is not open");
    expect(() => markedSections("<!-- bench:key -->\n<!-- bench:run -->\n<!-- /bench:run -->\n<!-- /bench:key -->", "f.md")).toThrow("opens inside bench:key");
  });

  it("every section renders from the results (no section throws, none is empty)", () => {
    for (const [name, render] of Object.entries(BENCH_SECTIONS)) {
      const out = render(results);
      expect(out.length, name).toBeGreaterThan(0);
      expect(out, name).not.toContain("undefined");
    }
  });
});
