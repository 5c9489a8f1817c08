/**
 * Every `@example` of the public surface compiles: the examples of each entry module's exported
 * declarations (read by entry-docs.ts) and of the entry modules' own header comments are written
 * as one module each, with the prelude of example-prelude.ts, and type-checked (strict, NodeNext)
 * against the package's sources: `babelqueue-serverless/...` resolves to the entry file of that
 * subpath, exactly as package.json "exports" maps it. A diagnostic names the example and its line.
 *
 * The runtime entry points (sqsHandler, queueHandler, wrap, BatchEngine) and every store class must
 * have at least one example.
 *
 * What this is *not*: a run of the examples. They call "your code" (the prelude), never a backend.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { entryModules, readEntryDocs } from "./entry-docs.js";
import { EXAMPLE_PRELUDE } from "./example-prelude.js";

const root = join(import.meta.dirname, "..", "..");
const out = join(root, ".tmp", "docs-examples");

/** Names that must carry an `@example`: the runtime entry points and the store classes. */
const MUST_HAVE_EXAMPLE = [
  "sqsHandler",
  "queueHandler",
  "wrap",
  "BatchEngine",
  "InMemoryStore",
  "DynamoDBStore",
  "RedisStore",
  "UpstashRedisStore",
  "PostgresStore",
  "DurableObjectStore",
  "D1Store",
  "KVStore",
];

interface Example {
  readonly label: string;
  readonly code: string;
}

/** The fenced code of each `@example` in an entry file's header comment (its module doc). */
function headerExamples(file: string): string[] {
  const header = /^\/\*\*([\s\S]*?)\*\//.exec(readFileSync(file, "utf8"))?.[1] ?? "";
  const text = header.replace(/^[ \t]*\* ?/gm, "");
  const tags = text.split(/^@/m).filter((part) => part.startsWith("example"));
  return tags.flatMap((tag) => [...tag.matchAll(/```(?:ts|typescript)?\n([\s\S]*?)```/g)].map((match) => match[1] ?? ""));
}

function collectExamples(): Example[] {
  const docs = readEntryDocs(root);
  const examples: Example[] = [];
  const seen = new Set<string>();
  for (const name of docs.names) {
    // A declaration re-exported by two subpaths (RedisStore) is compiled once.
    const id = `${name.where}#${name.name}`;
    if (seen.has(id)) continue;
    seen.add(id);
    for (const [index, code] of name.examples.entries()) examples.push({ label: `${name.name} (${name.where}) example ${index + 1}`, code });
  }
  for (const { entry } of entryModules(root)) {
    for (const [index, code] of headerExamples(join(root, entry)).entries()) examples.push({ label: `${entry} header example ${index + 1}`, code });
  }
  return examples;
}

/** `babelqueue-serverless[/x]` → the entry source of that subpath. */
function subpathMapping(): Record<string, string[]> {
  const paths: Record<string, string[]> = {};
  for (const { subpath, entry } of entryModules(root)) {
    paths[subpath === "." ? "babelqueue-serverless" : `babelqueue-serverless/${subpath.slice(2)}`] = [resolve(root, entry)];
  }
  return paths;
}

const examples = collectExamples();
const docs = readEntryDocs(root);

describe("the API reference's examples", () => {
  it("every runtime entry point and store class has an @example", () => {
    const withExamples = new Set(docs.names.filter((name) => name.examples.length > 0).map((name) => name.name));
    expect(MUST_HAVE_EXAMPLE.filter((name) => !withExamples.has(name))).toEqual([]);
  });

  it(`all ${examples.length} examples compile against the package's types (strict)`, () => {
    expect(examples.length).toBeGreaterThanOrEqual(MUST_HAVE_EXAMPLE.length);
    rmSync(out, { recursive: true, force: true });
    mkdirSync(out, { recursive: true });
    const files = examples.map((example, index) => {
      const file = join(out, `example-${String(index).padStart(2, "0")}.ts`);
      // `export {}` keeps every example a module of its own (no name clashes between examples).
      writeFileSync(file, `${example.code}\nexport {};\n`);
      return file;
    });
    const prelude = join(out, "prelude.d.ts");
    writeFileSync(prelude, EXAMPLE_PRELUDE);
    const program = ts.createProgram([prelude, ...files], {
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      target: ts.ScriptTarget.ES2022,
      lib: ["lib.es2023.d.ts"],
      types: ["node"],
      strict: true,
      noUncheckedIndexedAccess: true,
      noImplicitOverride: true,
      esModuleInterop: true,
      skipLibCheck: true,
      noEmit: true,
      baseUrl: root,
      paths: subpathMapping(),
    });
    const problems = ts
      .getPreEmitDiagnostics(program)
      .filter((diagnostic) => diagnostic.file === undefined || diagnostic.file.fileName.startsWith(out))
      .map((diagnostic) => {
        const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n");
        if (diagnostic.file === undefined) return message;
        const index = files.indexOf(diagnostic.file.fileName);
        const { line } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start ?? 0);
        const label = index >= 0 ? examples[index]?.label : diagnostic.file.fileName;
        return `${label}, line ${line + 1}: ${message}`;
      });
    expect(problems).toEqual([]);
  });
});
