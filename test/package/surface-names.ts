/**
 * Reads the public surface of an entry module with the TypeScript compiler: every exported name,
 * whether it is a value (present at run time) or only a type, and whether it is deprecated (every
 * declaration carries `@deprecated`, so an overload kept for compatibility does not count).
 *
 * What this is *not*: the list itself. The deliberate lists are literals in surface.ts.
 */
import { resolve } from "node:path";
import ts from "typescript";

export interface ExportedName {
  readonly name: string;
  readonly value: boolean;
  readonly deprecated: boolean;
}

function deprecatedDeclaration(declaration: ts.Declaration): boolean {
  return ts.getJSDocTags(declaration).some((tag) => tag.tagName.text === "deprecated");
}

/** The exports of each entry file (paths relative to `root`), by file. */
export function exportedNames(root: string, files: readonly string[]): Map<string, ExportedName[]> {
  const program = ts.createProgram(
    files.map((file) => resolve(root, file)),
    { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, target: ts.ScriptTarget.ES2022, strict: true, skipLibCheck: true, noEmit: true, types: ["node"] },
  );
  const checker = program.getTypeChecker();
  const out = new Map<string, ExportedName[]>();
  for (const file of files) {
    const source = program.getSourceFile(resolve(root, file));
    const module = source === undefined ? undefined : checker.getSymbolAtLocation(source);
    if (module === undefined) throw new Error(`${file}: not a module`);
    const names = checker.getExportsOfModule(module).map((symbol): ExportedName => {
      const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
      // The export's own declaration (`export const x`, `export type X`) or, for a re-export, the target's.
      const declarations = (symbol.flags & ts.SymbolFlags.Alias ? target.declarations : symbol.declarations) ?? [];
      const own = symbol.declarations ?? [];
      const deprecated =
        (own.length > 0 && own.every(deprecatedDeclaration)) || (declarations.length > 0 && declarations.every(deprecatedDeclaration));
      return { name: symbol.name, value: (target.flags & ts.SymbolFlags.Value) !== 0, deprecated };
    });
    out.set(file, names.sort((a, b) => a.name.localeCompare(b.name)));
  }
  return out;
}
