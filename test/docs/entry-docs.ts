/**
 * Reads the doc comments of the public surface with the TypeScript compiler: for every entry module
 * (one per subpath of package.json "exports"), each exported name with its doc comment, its
 * `@example` blocks, and — for an exported `…Options` interface — each of its properties (inherited
 * ones included) with theirs.
 *
 * What this is *not*: the check. doc-comments.test.ts asserts that nothing is undocumented, and
 * examples.test.ts compiles the examples.
 */
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import ts from "typescript";

/** One public declaration as a reader of the API reference sees it. */
export interface DocumentedName {
  /** The subpath it is exported from (".", "./lambda", …). */
  readonly subpath: string;
  /** The entry file (relative to the root). */
  readonly entry: string;
  readonly name: string;
  /** The doc comment's text and tags, as written (empty when there is none). */
  readonly doc: string;
  /** Code of each `@example` block (the fenced code only). */
  readonly examples: readonly string[];
  /** Where the documented declaration lives (relative path: line). */
  readonly where: string;
}

/** One property of an exported `…Options` interface. */
export interface DocumentedOption {
  readonly subpath: string;
  readonly options: string;
  readonly property: string;
  readonly doc: string;
  readonly where: string;
}

export interface EntryDocs {
  readonly names: readonly DocumentedName[];
  readonly options: readonly DocumentedOption[];
}

/** Every public subpath and its entry source: `types` target dist/entry/x.d.ts → entry/x.ts. */
export function entryModules(root: string): { subpath: string; entry: string }[] {
  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { exports: Record<string, unknown> };
  return Object.entries(pkg.exports)
    .filter(([subpath]) => subpath !== "./package.json")
    .map(([subpath, target]) => ({
      subpath,
      entry: String((target as Record<string, unknown>).types)
        .replace(/^\.\/dist\//, "")
        .replace(/\.d\.ts$/, ".ts"),
    }));
}

/** The whole doc comment of a declaration, text and tags, or "" (an overload set: the first one that has one). */
function docOf(checker: ts.TypeChecker, symbol: ts.Symbol, declarations: readonly ts.Declaration[]): string {
  const text = ts.displayPartsToString(symbol.getDocumentationComment(checker)).trim();
  const tags = symbol
    .getJsDocTags(checker)
    .map((tag) => `@${tag.name} ${ts.displayPartsToString(tag.text ?? [])}`.trim())
    .join("\n");
  if (text !== "" || tags !== "") return [text, tags].filter((part) => part !== "").join("\n");
  // Doc comments on a declaration the symbol does not merge (e.g. `export const x: typeof y = y`).
  for (const declaration of declarations) {
    const comments = ts.getJSDocCommentsAndTags(declaration);
    if (comments.length > 0) return comments.map((comment) => comment.getText()).join("\n");
  }
  return "";
}

/** The code inside the fenced blocks of every `@example` tag. */
function examplesOf(checker: ts.TypeChecker, symbol: ts.Symbol): string[] {
  return symbol
    .getJsDocTags(checker)
    .filter((tag) => tag.name === "example")
    .flatMap((tag) => {
      const text = ts.displayPartsToString(tag.text ?? []);
      return [...text.matchAll(/```(?:ts|typescript)?\n([\s\S]*?)```/g)].map((match) => match[1] ?? "");
    });
}

function whereOf(root: string, declaration: ts.Declaration | undefined): string {
  if (declaration === undefined) return "?";
  const source = declaration.getSourceFile();
  const { line } = source.getLineAndCharacterOfPosition(declaration.getStart());
  return `${source.fileName.slice(root.length + 1)}:${line + 1}`;
}

/** Reads every entry module's public declarations and their doc comments. */
export function readEntryDocs(root: string): EntryDocs {
  const entries = entryModules(root);
  const program = ts.createProgram(
    entries.map(({ entry }) => resolve(root, entry)),
    {
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      target: ts.ScriptTarget.ES2022,
      strict: true,
      skipLibCheck: true,
      noEmit: true,
      types: ["node"],
    },
  );
  const checker = program.getTypeChecker();
  const names: DocumentedName[] = [];
  const options: DocumentedOption[] = [];
  for (const { subpath, entry } of entries) {
    const source = program.getSourceFile(resolve(root, entry));
    const module = source === undefined ? undefined : checker.getSymbolAtLocation(source);
    if (module === undefined) throw new Error(`${entry}: not a module`);
    for (const symbol of checker.getExportsOfModule(module)) {
      const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
      const declarations = target.declarations ?? [];
      const doc = docOf(checker, target, declarations) || docOf(checker, symbol, symbol.declarations ?? []);
      names.push({
        subpath,
        entry,
        name: symbol.name,
        doc,
        examples: examplesOf(checker, target),
        where: whereOf(root, declarations[0]),
      });
      const isOptionsInterface =
        symbol.name.endsWith("Options") && declarations.some((declaration) => ts.isInterfaceDeclaration(declaration));
      if (!isOptionsInterface) continue;
      const type = checker.getDeclaredTypeOfSymbol(target);
      for (const property of checker.getPropertiesOfType(type)) {
        options.push({
          subpath,
          options: symbol.name,
          property: property.name,
          doc: docOf(checker, property, property.declarations ?? []),
          where: whereOf(root, property.declarations?.[0]),
        });
      }
    }
  }
  return { names, options };
}
