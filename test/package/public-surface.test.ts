/**
 * The public surface is a decision: each subpath's exported names (values and types, read from the
 * entry sources with the TypeScript compiler) equal the literal lists of surface.ts, and each name
 * that list calls deprecated carries `@deprecated` in its doc comment (so editors strike it through),
 * while no public name does.
 *
 * What this is *not*: the packed package's check (exports.test.ts loads the built tarball).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { SURFACE } from "./surface.js";
import { exportedNames } from "./surface-names.js";

const root = join(import.meta.dirname, "..", "..");
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { exports: Record<string, unknown> };

/** The entry source of a subpath: its `types` target, dist/entry/x.d.ts → entry/x.ts. */
function entryOf(subpath: string): string {
  const target = pkg.exports[subpath] as Record<string, unknown>;
  return String(target.types).replace(/^\.\/dist\//, "").replace(/\.d\.ts$/, ".ts");
}

const subpaths = Object.keys(pkg.exports).filter((subpath) => subpath !== "./package.json");
const names = exportedNames(root, subpaths.map(entryOf));
const render = (name: { name: string; value: boolean }) => (name.value ? name.name : `type ${name.name}`);
const sorted = (list: readonly string[]) => [...list].sort((a, b) => a.replace(/^type /, "").localeCompare(b.replace(/^type /, "")));

describe("the public surface", () => {
  it("every subpath of package.json has its list, and every list its subpath", () => {
    expect(subpaths.sort()).toEqual(Object.keys(SURFACE).sort());
  });

  for (const subpath of subpaths) {
    it(`${subpath}: exactly the listed names, the deprecated ones marked @deprecated`, () => {
      const exported = names.get(entryOf(subpath)) ?? [];
      const surface = SURFACE[subpath] ?? { public: [], deprecated: [] };
      expect(sorted(exported.filter((name) => !name.deprecated).map(render))).toEqual(sorted(surface.public));
      expect(sorted(exported.filter((name) => name.deprecated).map(render))).toEqual(sorted(surface.deprecated));
    });
  }

  it("counts: the root is small, and no subpath repeats the root", () => {
    const root = SURFACE["."];
    expect(root?.public.length).toBe(60);
    for (const [subpath, surface] of Object.entries(SURFACE)) {
      if (subpath === "." || subpath === "./store-kit") continue;
      expect(surface.public.filter((name) => root?.public.includes(name)), subpath).toEqual([]);
    }
  });
});
