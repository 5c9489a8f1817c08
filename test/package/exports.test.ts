/**
 * The package as a user installs it: `npm pack` (which builds through `prepack`) into a temp dir,
 * the tarball unpacked into an empty app's node_modules next to the declared peer dependencies
 * only (linked from this repo's node_modules), then, in fresh Node 22 processes:
 * - every subpath of the exports map `import`s, and `require()`s (require(esm), Node >= 22.12),
 *   with exactly the run-time names surface.ts lists for it (and its source module has);
 * - `/cloudflare` loads in plain Node (no `cloudflare:workers`), `/cloudflare/durable-object`
 *   does not (it is workerd-only, and says so by failing on the `cloudflare:` scheme), and the
 *   `workerd` condition resolves `/cloudflare` to the entry that adds `IdempotencyObject`;
 * - a Node program (ESM and CommonJS files, strict, no skipLibCheck) and a Worker program
 *   (`@cloudflare/workers-types`, bundler resolution) type-check against the installed types.
 *
 * What this is *not*: a registry or git install (that would download every devDependency for the
 * `prepare` build); the README's Install section and the lead's release check cover that.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SURFACE, type Surface, valueNames } from "./surface.js";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
  name: string;
  exports: Record<string, string | Record<string, unknown>>;
  peerDependencies: Record<string, string>;
  files: string[];
};
const node = join(root, "node_modules", ".bin", "node");
const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
const scratch = mkdtempSync(join(tmpdir(), "bq-exports-"));
const app = join(scratch, "app");

/** Subpaths that only workerd can load (they import `cloudflare:workers`). */
const WORKERD_ONLY = new Set(["./cloudflare/durable-object"]);
const subpaths = Object.keys(pkg.exports).filter((subpath) => subpath !== "./package.json");
const specifier = (subpath: string) => (subpath === "." ? pkg.name : `${pkg.name}/${subpath.slice(2)}`);

/** The source module a subpath's `import` target was compiled from (dist/x/y.js → x/y.ts). */
function sourceOf(subpath: string): string {
  const target = pkg.exports[subpath] as Record<string, unknown>;
  return join(root, String(target.import).replace(/^\.\/dist\//, "").replace(/\.js$/, ".ts"));
}

function run(command: string, args: string[], cwd = app) {
  const result = spawnSync(command, args, { cwd, encoding: "utf8", timeout: 120_000, env: { ...process.env, NODE_OPTIONS: "" } });
  return { status: result.status, out: `${result.stdout}\n${result.stderr}`, stdout: result.stdout };
}

/** Runtime export names of `spec` as a fresh Node process sees them, loaded with import or require. */
function exportsVia(mode: "import" | "require", spec: string) {
  const code =
    mode === "import"
      ? `const m = await import(${JSON.stringify(spec)}); console.log("KEYS " + JSON.stringify(Object.keys(m).filter((k) => m[k] !== undefined).sort()));`
      : `const m = require(${JSON.stringify(spec)}); console.log("KEYS " + JSON.stringify(Object.keys(m).filter((k) => m[k] !== undefined).sort()));`;
  const args = mode === "import" ? ["--input-type=module", "-e", code] : ["--input-type=commonjs", "-e", code];
  const result = run(node, args);
  const line = result.stdout.split("\n").find((l) => l.startsWith("KEYS "));
  return { ...result, keys: line ? (JSON.parse(line.slice(5)) as string[]) : undefined };
}

function link(name: string) {
  const to = join(app, "node_modules", name);
  mkdirSync(dirname(to), { recursive: true });
  symlinkSync(join(root, "node_modules", name), to, "dir");
}

beforeAll(() => {
  mkdirSync(join(app, "node_modules", pkg.name), { recursive: true });
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
  const pack = run("npm", ["pack", "--json", "--pack-destination", scratch], root);
  if (pack.status !== 0) throw new Error(`npm pack failed:\n${pack.out}`);
  const [{ filename }] = JSON.parse(pack.stdout.slice(pack.stdout.indexOf("["))) as [{ filename: string }];
  const untar = run("tar", ["-xzf", join(scratch, filename), "-C", join(app, "node_modules", pkg.name), "--strip-components=1"]);
  if (untar.status !== 0) throw new Error(`tar failed:\n${untar.out}`);
  // Only what a user adds next to the package: its declared peers, Node's types and TypeScript.
  for (const peer of Object.keys(pkg.peerDependencies)) link(peer);
  link("@types/node");
}, 180_000);

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe("the packed package, installed into an empty app", () => {
  it("ships dist, the README, LICENSE and CHANGELOG, and no sources, tests or maps", () => {
    const files = run("find", [".", "-type", "f"], join(app, "node_modules", pkg.name))
      .stdout.split("\n")
      .filter(Boolean)
      .map((file) => file.slice(2))
      .sort();
    expect(files).toEqual(expect.arrayContaining(["CHANGELOG.md", "LICENSE", "README.md", "package.json", "dist/entry/index.js", "dist/entry/index.d.ts"]));
    expect(files.filter((file) => !file.startsWith("dist/"))).toEqual(["CHANGELOG.md", "LICENSE", "README.md", "package.json"]);
    expect(files.filter((file) => /\.map$|\.test\.|^dist\/(test|scripts|bench|examples)\//.test(file))).toEqual([]);
    for (const subpath of subpaths) {
      const target = pkg.exports[subpath] as Record<string, unknown>;
      for (const condition of ["types", "import", "default"]) {
        expect(files, `${subpath} → ${condition}`).toContain(String(target[condition]).slice(2));
      }
    }
  });

  for (const subpath of subpaths.filter((s) => !WORKERD_ONLY.has(s))) {
    it(`${specifier(subpath)}: import and require() in plain Node give exactly the listed run-time names`, async () => {
      const source = valueNames(SURFACE[subpath] as Surface);
      expect(source.length).toBeGreaterThan(0);
      expect(Object.keys(await import(sourceOf(subpath))).sort()).toEqual(source);
      const viaImport = exportsVia("import", specifier(subpath));
      expect(viaImport.status, viaImport.out).toBe(0);
      expect(viaImport.keys).toEqual(source);
      const viaRequire = exportsVia("require", specifier(subpath));
      expect(viaRequire.status, viaRequire.out).toBe(0);
      expect(viaRequire.keys).toEqual(source);
    });
  }

  it("/cloudflare is the Node-safe entry: handler, stores, no Durable Object class", () => {
    const { status, out, keys } = exportsVia("import", specifier("./cloudflare"));
    expect(status, out).toBe(0);
    expect(keys).toEqual(expect.arrayContaining(["queueHandler", "DurableObjectStore", "KVStore", "parkDelaySeconds"]));
    expect(keys).not.toContain("IdempotencyObject");
  });

  it("/cloudflare/durable-object is workerd-only: Node refuses its `cloudflare:` import", () => {
    const { status, out } = exportsVia("import", specifier("./cloudflare/durable-object"));
    expect(status).not.toBe(0);
    expect(out).toMatch(/ERR_UNSUPPORTED_ESM_URL_SCHEME[\s\S]*cloudflare:/);
  });

  it("the workerd condition resolves /cloudflare to the entry that adds IdempotencyObject", () => {
    const resolveWith = (conditions: string[]) =>
      run(node, [
        ...conditions.map((condition) => `--conditions=${condition}`),
        "--input-type=module",
        "-e",
        `console.log(import.meta.resolve(${JSON.stringify(specifier("./cloudflare"))}))`,
      ]);
    const plain = resolveWith([]);
    expect(plain.status, plain.out).toBe(0);
    expect(plain.stdout.trim()).toMatch(/\/dist\/entry\/cloudflare\.js$/);
    const workerd = resolveWith(["workerd"]);
    expect(workerd.status, workerd.out).toBe(0);
    expect(workerd.stdout.trim()).toMatch(/\/dist\/entry\/cloudflare-workerd\.js$/);
    const code = readFileSync(join(app, "node_modules", pkg.name, "dist", "entry", "cloudflare-workerd.js"), "utf8");
    expect(code).toMatch(/export \* from "\.\/cloudflare\.js"/);
    expect(code).toMatch(/IdempotencyObject/);
  });

  it("type-checks a Node program (ESM and CommonJS files) against every Node-loadable subpath, strict, without skipLibCheck", () => {
    const dir = join(app, "node-program");
    mkdirSync(dir, { recursive: true });
    const nodeSubpaths = subpaths.filter((s) => !WORKERD_ONLY.has(s));
    writeFileSync(
      join(dir, "index.ts"),
      [
        `import { sqsHandler } from "babelqueue-serverless/lambda";`,
        `import { DynamoDBStore } from "babelqueue-serverless/dynamodb";`,
        `import { queueHandler, KVStore } from "babelqueue-serverless/cloudflare";`,
        `import { InMemoryStore, wrap } from "babelqueue-serverless";`,
        ...nodeSubpaths.map((s, i) => `import * as all${i} from ${JSON.stringify(specifier(s))};`),
        // A missing peer's types turn into any under skipLibCheck: these calls fail to compile if they did.
        `type IsAny<T> = 0 extends 1 & T ? true : false;`,
        `const notAny = <T>(value: T, ok: IsAny<T> extends false ? true : never) => { void value; void ok; };`,
        `export const lambda = sqsHandler({ store: new DynamoDBStore({ table: "t" }), handle: async (envelope, ctx) => { notAny(envelope.job, true); notAny(ctx.record, true); notAny(ctx.lambdaContext, true); } });`,
        `export const worker = queueHandler<{ KV: import("babelqueue-serverless/cloudflare").SeenSetKV }>({ store: (env) => new KVStore(env.KV), handle: async (envelope) => { void envelope.job; } });`,
        `export const local = wrap(new InMemoryStore(), async () => undefined);`,
        `export const modules = [${nodeSubpaths.map((_, i) => `all${i}`).join(", ")}];`,
      ].join("\n"),
    );
    writeFileSync(
      join(dir, "legacy.cts"),
      `import lambda = require("babelqueue-serverless/lambda");\nimport core = require("babelqueue-serverless");\nexport const handler: typeof lambda.sqsHandler = lambda.sqsHandler;\nexport const store = new core.InMemoryStore();\n`,
    );
    writeFileSync(
      join(dir, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: { module: "nodenext", moduleResolution: "nodenext", target: "es2022", strict: true, noEmit: true, skipLibCheck: false, types: ["node"] },
        files: ["index.ts", "legacy.cts"],
      }),
    );
    const check = run(node, [tsc, "-p", dir]);
    expect(check.status, check.out).toBe(0);
  }, 60_000);

  /** Writes a Worker module and a tsconfig (workers types, bundler resolution) into `name`, runs tsc. */
  function checkWorkerProgram(name: string, lines: string[], extraOptions: Record<string, unknown> = {}) {
    const dir = join(app, name);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "index.ts"), lines.join("\n"));
    writeFileSync(
      join(dir, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          module: "esnext",
          moduleResolution: "bundler",
          target: "es2022",
          lib: ["es2023"],
          strict: true,
          noEmit: true,
          skipLibCheck: true,
          types: ["@cloudflare/workers-types"],
          ...extraOptions,
        },
        files: ["index.ts"],
      }),
    );
    return run(node, [tsc, "-p", dir]);
  }

  const consumer = [
    `interface Env { IDEMPOTENCY: DurableObjectNamespace<IdempotencyObject> }`,
    `export default {`,
    `  queue: queueHandler<Env>({ store: (env) => new DurableObjectStore(env.IDEMPOTENCY), handle: async (envelope, ctx) => { void envelope.job; void ctx.message.id; } }),`,
    `} satisfies ExportedHandler<Env>;`,
  ];

  it("type-checks a Worker program with @cloudflare/workers-types: the class from /cloudflare/durable-object", () => {
    const check = checkWorkerProgram("worker-program", [
      `import { DurableObjectStore, queueHandler } from "babelqueue-serverless/cloudflare";`,
      `import type { IdempotencyObject } from "babelqueue-serverless/cloudflare/durable-object";`,
      `export { IdempotencyObject } from "babelqueue-serverless/cloudflare/durable-object";`,
      ...consumer,
    ]);
    expect(check.status, check.out).toBe(0);
  }, 60_000);

  it("types the class on /cloudflare only under customConditions [workerd], as the 0.1.0 import did", () => {
    const legacy = [
      `import { DurableObjectStore, queueHandler, type IdempotencyObject } from "babelqueue-serverless/cloudflare";`,
      `export { IdempotencyObject } from "babelqueue-serverless/cloudflare";`,
      ...consumer,
    ];
    const withCondition = checkWorkerProgram("worker-workerd-condition", legacy, { customConditions: ["workerd"] });
    expect(withCondition.status, withCondition.out).toBe(0);
    const without = checkWorkerProgram("worker-no-condition", legacy);
    expect(without.status).not.toBe(0);
    expect(without.out).toMatch(/TS2305|TS2724|has no exported member.*IdempotencyObject/);
  }, 60_000);
});
