/**
 * The docs' benchmark figures are generated, not typed (scripts/bench-docs.ts, bench/sections.ts):
 * every marked section of every file in BENCH_DOC_FILES must be exactly what the last run's
 * results.json renders — a hand-edited figure, or a run whose docs were not regenerated, fails here.
 * Also: the proof page and the README show every section, and the generator refuses what it cannot render.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { bundleAreas } from "../../bench/bundle.js";
import { levelLabel, verdict } from "../../bench/report.js";
import { BENCH_SECTIONS } from "../../bench/sections.js";
import { sweepSteadyState } from "../../bench/sweep-model.js";
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

describe("what the generated lists and models say", () => {
  it("a level figure on which ours is behind says by how much; level or ahead by a hair says level", () => {
    const row = (ours: number, powertools: number) => ({ label: "x", unit: "ms", ours, powertools, reason: "" });
    expect(verdict(row(23.7, 22.8))).toBe("level");
    expect(levelLabel(row(23.7, 22.8))).toBe("Level, ours 4% behind, inside the 5% band");
    expect(levelLabel(row(22.8, 22.7))).toBe("Level");
    expect(levelLabel(row(101, 100))).toBe("Level, ours 1% behind, inside the 5% band");
    expect(levelLabel(row(27.9, 28.5))).toBe("Level");
    expect(verdict(row(18.8, 14.4))).toBe("ahead");
  });

  it("a bundle's bytes by area: per folder of the package, a top-level file alone, dependencies together, the fixture left out", () => {
    const areas = bundleAreas({
      "src/engine/batch.ts": { bytesInOutput: 500 },
      "src/engine/gate.ts": { bytesInOutput: 300 },
      "src/envelope.ts": { bytesInOutput: 200 },
      "stores/dynamodb/store.ts": { bytesInOutput: 900 },
      "node_modules/@upstash/redis/index.mjs": { bytesInOutput: 50 },
      "node_modules/uncrypto/index.mjs": { bytesInOutput: 25 },
      "bench/fixtures/lambda-ours.ts": { bytesInOutput: 120 },
      "entry/dynamodb.ts": { bytesInOutput: 0 },
    });
    expect(areas).toEqual([
      { area: "stores/dynamodb", bytes: 900 },
      { area: "src/engine", bytes: 800 },
      { area: "src/envelope.ts", bytes: 200 },
      { area: "node_modules", bytes: 75 },
    ]);
  });

  it("the Durable Object sweep model: walks, alarm runs and rows read per message at three arrival rates (4-day retention)", () => {
    const days4 = 4 * 24 * 60 * 60 * 1000;
    // One a minute: 5,760 live rows, a gap of 57.6 s but the next expiry a minute away; one alarm run and every row read per message.
    const slow = sweepSteadyState(1 / 60, days4);
    expect(slow.liveRows).toBeCloseTo(5760, 6);
    expect(slow.intervalSeconds).toBeCloseTo(60, 6);
    expect(slow.alarmRunsPerMessage).toBeCloseTo(1, 9);
    expect(slow.rowsReadPerMessage).toBeCloseTo(5760, 6);
    expect(slow.usdPerMillionMessages).toBeCloseTo(0.15 + 1 + 5.76, 6);
    // One a second: 345,600 rows, a walk every 3,456 s in 18 alarm runs of 20,000 rows: 100 rows read per message.
    const steady = sweepSteadyState(1, days4);
    expect(steady.intervalSeconds).toBeCloseTo(3456, 6);
    expect(steady.alarmRunsPerMessage).toBeCloseTo(18 / 3456, 9);
    expect(steady.rowsReadPerMessage).toBeCloseTo(100, 6);
    // A hundred a second: the gap is capped at one hour; 1,728 runs per walk.
    const busy = sweepSteadyState(100, days4);
    expect(busy.intervalSeconds).toBe(3600);
    expect(busy.alarmRunsPerMessage).toBeCloseTo(1728 / 360_000, 9);
    expect(busy.rowsReadPerMessage).toBeCloseTo(96, 6);
    expect(busy.usdPer30Days).toBeCloseTo((busy.usdPerMillionMessages / 1_000_000) * 100 * 30 * 24 * 3600, 6);
  });
});
