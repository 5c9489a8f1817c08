/**
 * Every `pg.Pool` and `pg.Client` the project creates (cli/, bench/, examples/, scripts/, test/)
 * listens for `"error"`. pg emits it for a connection the server drops while the pool holds it idle
 * (a restart, a failover, `pg_terminate_backend`); with no listener, Node ends the process — as a
 * restarted PostgreSQL once ended `npm run bench`. Read from the sources, so a new pool without its
 * listener fails here before it fails in a run.
 *
 * What this is *not*: a check of users' code. docs/stores/postgres.md tells users what their pool needs.
 */
import { readFileSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";

const root = fileURLToPath(new URL("../../..", import.meta.url));

function sources(dir: string): string[] {
  return readdirSync(join(root, dir)).flatMap((entry) => {
    const path = join(dir, entry);
    if (statSync(join(root, path)).isDirectory()) return entry === "node_modules" ? [] : sources(path);
    return /\.(ts|mts|mjs|js)$/.test(entry) && !entry.endsWith(".d.ts") ? [path] : [];
  });
}

it("every pg Pool and Client created in cli/, bench/, examples/, scripts/ and test/ has an error listener", () => {
  const missing: string[] = [];
  let found = 0;
  for (const file of ["cli", "bench", "examples", "scripts", "test"].flatMap(sources)) {
    const text = readFileSync(join(root, file), "utf8");
    for (const match of text.matchAll(/\b(?:const|let)\s+(\w+)\s*=\s*new\s+pg\.(?:default\.)?(?:Pool|Client)\(/g)) {
      found += 1;
      const name = match[1] as string;
      if (!new RegExp(`\\b${name}\\.on\\(\\s*"error"`).test(text.slice(match.index))) missing.push(`${file}: ${name}`);
    }
  }
  expect(found).toBeGreaterThan(10);
  expect(missing).toEqual([]);
});
