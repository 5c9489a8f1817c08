/**
 * `npm run bench:docs`: regenerates the marked benchmark sections of the docs from the last run
 * (bench/results/results.json). A section is
 *
 *   <!-- bench:overhead -->
 *   …generated, never edited by hand…
 *   <!-- /bench:overhead -->
 *
 * and its content is `BENCH_SECTIONS.overhead(results)` (bench/sections.ts). `npm run bench` calls
 * this after every run; test/package/bench-docs.test.ts fails when a file's sections differ from
 * what results.json says. `--check` only reports the stale sections (exit 1 when there are some).
 *
 * The files are listed once, in `BENCH_DOC_FILES`: the README and the site's proof page.
 *
 * What this is *not*: a measurement. It renders what results.json holds, whatever run made it.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { BenchResults } from "../bench/report.js";
import { BENCH_SECTIONS } from "../bench/sections.js";

/** The markdown files (from the repository root) whose `<!-- bench:NAME -->` sections are generated. */
export const BENCH_DOC_FILES: readonly string[] = ["README.md", "docs/proof/benchmark.md"];

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const RESULTS_FILE = join(ROOT, "bench", "results", "results.json");

const MARKER = /<!-- (\/?)bench:([a-z0-9-]+) -->/g;

/** One marked section of a file: its name and where its content sits between the two markers. */
interface Marked {
  readonly name: string;
  /** Offsets of the content: just after the opening marker, just before the closing one. */
  readonly from: number;
  readonly to: number;
}

/** The marked sections of a markdown text, in order. Throws for an unknown name, or a marker without its pair. */
export function markedSections(text: string, where = "the text"): Marked[] {
  const sections: Marked[] = [];
  let open: { name: string; from: number } | undefined;
  for (const match of text.matchAll(MARKER)) {
    const [marker, closing, name] = match as unknown as [string, string, string];
    const at = match.index as number;
    if (closing === "") {
      if (open !== undefined) throw new Error(`${where}: <!-- bench:${name} --> opens inside bench:${open.name}, which is not closed`);
      if (!Object.hasOwn(BENCH_SECTIONS, name)) throw new Error(`${where}: no benchmark section "${name}" (sections: ${Object.keys(BENCH_SECTIONS).join(", ")})`);
      open = { name, from: at + marker.length };
    } else {
      if (open === undefined || open.name !== name) throw new Error(`${where}: <!-- /bench:${name} --> closes a section that is not open`);
      sections.push({ name, from: open.from, to: at });
      open = undefined;
    }
  }
  if (open !== undefined) throw new Error(`${where}: <!-- bench:${open.name} --> is never closed`);
  return sections;
}

/** A section's content as it must stand between its markers (on lines of its own). */
function content(name: string, results: BenchResults): string {
  return `\n${(BENCH_SECTIONS[name] as (results: BenchResults) => string)(results)}\n`;
}

/** The text with every marked section regenerated from `results`. */
export function renderBenchDoc(text: string, results: BenchResults, where?: string): string {
  let out = "";
  let last = 0;
  for (const section of markedSections(text, where)) {
    out += text.slice(last, section.from) + content(section.name, results);
    last = section.to;
  }
  return out + text.slice(last);
}

/** The names of the sections whose content differs from what `results` says. */
export function staleSections(text: string, results: BenchResults, where?: string): string[] {
  return markedSections(text, where)
    .filter((section) => text.slice(section.from, section.to) !== content(section.name, results))
    .map((section) => section.name);
}

export function readResults(file = RESULTS_FILE): BenchResults {
  return JSON.parse(readFileSync(file, "utf8")) as BenchResults;
}

/** Regenerates every file of `BENCH_DOC_FILES` from `results`; returns the files it changed. */
export function writeBenchDocs(results: BenchResults, files: readonly string[] = BENCH_DOC_FILES): string[] {
  const changed: string[] = [];
  for (const file of files) {
    const path = join(ROOT, file);
    const text = readFileSync(path, "utf8");
    const next = renderBenchDoc(text, results, file);
    if (next === text) continue;
    writeFileSync(path, next);
    changed.push(file);
  }
  return changed;
}

// As a script: `tsx scripts/bench-docs.ts [--check]`.
if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const results = readResults();
  if (process.argv.includes("--check")) {
    let stale = 0;
    for (const file of BENCH_DOC_FILES) {
      const names = staleSections(readFileSync(join(ROOT, file), "utf8"), results, file);
      stale += names.length;
      if (names.length > 0) console.error(`${file}: stale benchmark sections: ${names.join(", ")} (run npm run bench:docs)`);
    }
    process.exit(stale > 0 ? 1 : 0);
  }
  const changed = writeBenchDocs(results);
  console.log(changed.length === 0 ? "benchmark sections already up to date" : `regenerated: ${changed.join(", ")}`);
}
