/**
 * The documentation site, checked as a reader sees it: the built site (docs/.vitepress/dist, built
 * with `npm run docs:build` when it is missing or older than its sources) is served on a loopback
 * port and every page is loaded in headless Chromium (Debian's package, driven by playwright-core).
 *
 * Asserted: the top navigation and the sidebar lead where they say; the local search box finds a
 * store page; every page is reachable from the home page and no page has a console error or a failed
 * request; every internal link of every page answers 200, and every `#anchor` it points at exists on
 * the target page. Screenshots of the home page and of a store page are saved under
 * docs/.vitepress/dist/screenshots/.
 *
 * What this is *not*: a check of what the pages say (review does that) or of the network: Chromium runs
 * with its background networking off and only ever asks the loopback server.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { promisify } from "node:util";
import { type BrowserContext, type Page, chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type StaticSite, serveStatic } from "./static-server.js";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..", "..");
const dist = join(root, "docs", ".vitepress", "dist");
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const CHROMIUM_FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/**
 * Newest modification time under `dir`: of its files whose path passes `keep`, and of its folders
 * (a deleted page changes its folder's time).
 */
function newest(dir: string, keep: (path: string) => boolean = () => true): number {
  if (!existsSync(dir)) return 0;
  let latest = statSync(dir).mtimeMs;
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    const path = join(entry.parentPath, entry.name);
    if ((entry.isFile() && keep(path)) || (entry.isDirectory() && keep(`${path}/`))) latest = Math.max(latest, statSync(path).mtimeMs);
  }
  return latest;
}

/** True when the built site is older than a page, the site's config, typedoc.json or a source the API reference reads. */
function siteIsStale(): boolean {
  const built = join(dist, "index.html");
  if (!existsSync(built)) return true;
  // Generated or scratch (VitePress's dist, cache and .temp; TypeDoc's api/): only the config and its sidebar count of .vitepress.
  const vitepress = join(root, "docs", ".vitepress");
  const config = [join(vitepress, "config.ts"), join(vitepress, "sidebar.json")];
  const api = join(root, "docs", "api");
  const sources = Math.max(
    newest(join(root, "docs"), (path) => (config.includes(path) || !path.startsWith(vitepress)) && !path.startsWith(api)),
    ...["entry", "src", "stores", "handlers"].map((dir) => newest(join(root, dir), (path) => path.endsWith(".ts") || path.endsWith("/"))),
    statSync(join(root, "typedoc.json")).mtimeMs,
  );
  return sources > statSync(built).mtimeMs;
}

/** `npm run docs:build`, without blocking the test worker; rejects with the build's last output. */
async function buildSite(): Promise<void> {
  try {
    await run("npm", ["run", "docs:build"], { cwd: root, encoding: "utf8", timeout: 280_000, maxBuffer: 64 * 1024 * 1024 });
  } catch (error) {
    const { stdout = "", stderr = "", message } = error as { stdout?: string; stderr?: string; message: string };
    throw new Error(`npm run docs:build failed: ${message}\n${`${stdout}\n${stderr}`.slice(-4000)}`);
  }
}

/** Every page of the build, as the URL path a link uses (`/guide/install.html`, `/` for the home page). */
function builtPages(): string[] {
  return readdirSync(dist, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith(".html") && entry.name !== "404.html")
    .map((entry) => `/${relative(dist, join(entry.parentPath, entry.name)).split("\\").join("/")}`)
    .filter((path) => !path.startsWith("/screenshots/"))
    .map((path) => path.replace(/\/index\.html$/, "/"));
}

/** A page's URL path as the crawl keys it. */
function pageKey(url: URL): string {
  return url.pathname.endsWith("/") ? url.pathname : url.pathname.replace(/\/index\.html$/, "/");
}

interface PageVisit {
  readonly path: string;
  readonly errors: string[];
  readonly links: URL[];
}

let site: StaticSite;
let context: BrowserContext;
let profile: string;
/**
 * The text of the first h1 once one containing `text` has rendered (empty when none does within
 * 10 s, so the caller's expectation fails with what the page shows instead).
 */
async function firstHeading(page: Page, text: string): Promise<string> {
  const heading = page.locator("h1", { hasText: text }).first();
  try {
    await heading.waitFor({ state: "visible", timeout: 10_000 });
  } catch {
    return (await page.locator("h1").first().textContent()) ?? "";
  }
  return (await heading.textContent()) ?? "";
}

const visits = new Map<string, PageVisit>();

async function visit(page: Page, path: string): Promise<PageVisit> {
  const errors: string[] = [];
  const onConsole = (message: { type(): string; text(): string }) => {
    if (message.type() === "error") errors.push(`console: ${message.text()}`);
  };
  const onPageError = (error: Error) => errors.push(`page error: ${error.message}`);
  const onResponse = (response: { status(): number; url(): string }) => {
    if (response.status() >= 400) errors.push(`HTTP ${response.status()}: ${response.url()}`);
  };
  // A prefetch the next navigation cancels is aborted, not failed; a missing file shows as its HTTP status.
  const onFailed = (request: { url(): string; failure(): { errorText: string } | null }) => {
    const reason = request.failure()?.errorText ?? "?";
    if (reason !== "net::ERR_ABORTED") errors.push(`request failed: ${request.url()} (${reason})`);
  };
  page.on("console", onConsole);
  page.on("pageerror", onPageError);
  page.on("response", onResponse);
  page.on("requestfailed", onFailed);
  try {
    const response = await page.goto(`${site.origin}${path}`, { waitUntil: "load" });
    if (response?.status() !== 200) errors.push(`the page answered ${response?.status()}`);
    // `href` as the browser resolved it (the DOM lib is not in this program's types).
    const hrefs = await page.$$eval("a[href]", (anchors) => anchors.map((anchor) => (anchor as unknown as { href: string }).href));
    const links = hrefs.map((href) => new URL(href)).filter((url) => url.origin === site.origin);
    return { path, errors, links };
  } finally {
    page.off("console", onConsole);
    page.off("pageerror", onPageError);
    page.off("response", onResponse);
    page.off("requestfailed", onFailed);
  }
}

beforeAll(async () => {
  if (siteIsStale()) await buildSite();
  site = await serveStatic(dist);
  profile = mkdtempSync(join(tmpdir(), "bq-docs-chromium-"));
  context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_FLAGS,
    viewport: { width: 1280, height: 900 },
  });
  // Crawl from the home page: every internal link, breadth first.
  const page = context.pages()[0] ?? (await context.newPage());
  const queue = ["/"];
  while (queue.length > 0) {
    const path = queue.shift() as string;
    if (visits.has(path)) continue;
    const result = await visit(page, path);
    visits.set(path, result);
    for (const link of result.links) {
      const key = pageKey(link);
      if (!visits.has(key) && !queue.includes(key) && (key.endsWith(".html") || key.endsWith("/"))) queue.push(key);
    }
  }
}, 300_000);

afterAll(async () => {
  await context?.close();
  await site?.close();
  if (profile !== undefined) rmSync(profile, { recursive: true, force: true });
});

describe("the documentation site, in Chromium", () => {
  it("every built page is reachable from the home page, and there are the pages the sidebar promises", () => {
    const built = builtPages();
    expect(built.filter((path) => !visits.has(path))).toEqual([]);
    for (const path of [
      "/guide/lambda-sqs.html",
      "/guide/lambda-kafka.html",
      "/guide/cloudflare-queues.html",
      "/guide/wrap.html",
      "/stores/dynamodb.html",
      "/stores/redis.html",
      "/stores/postgres.html",
      "/stores/durable-objects.html",
      "/stores/d1.html",
      "/stores/kv.html",
      "/stores/in-memory.html",
      "/concepts/guarantees.html",
      "/concepts/transactional.html",
      "/concepts/clocks.html",
      "/concepts/fleet.html",
      "/operating/observability.html",
      "/operating/cli.html",
      "/operating/redrive-replay.html",
      "/operating/shards.html",
      "/proof/reliability.html",
      "/proof/benchmark.html",
      "/ARCHITECTURE.html",
      "/api/",
      "/api/babelqueue-serverless/lambda.html",
      "/api/babelqueue-serverless/metrics.html",
      "/api/babelqueue-serverless/tracing.html",
    ]) {
      expect(built, path).toContain(path);
    }
    // No draft is ever published.
    expect(built.filter((path) => path.startsWith("/drafts/"))).toEqual([]);
  });

  it("no page has a console error, a page error or a failed request", () => {
    const problems = [...visits.values()].flatMap((visit) => visit.errors.map((error) => `${visit.path}: ${error}`));
    expect(problems).toEqual([]);
  });

  it("every internal link answers 200, and every #anchor exists on its page", async () => {
    const targets = new Map<string, Set<string>>();
    for (const visit of visits.values()) {
      for (const link of visit.links) {
        const anchors = targets.get(link.pathname) ?? new Set<string>();
        if (link.hash.length > 1) anchors.add(decodeURIComponent(link.hash.slice(1)));
        targets.set(link.pathname, anchors);
      }
    }
    expect(targets.size).toBeGreaterThan(30);
    const broken: string[] = [];
    for (const [pathname, anchors] of targets) {
      const response = await fetch(`${site.origin}${pathname}`);
      const body = await response.text();
      if (response.status !== 200) {
        broken.push(`${pathname}: HTTP ${response.status}`);
        continue;
      }
      for (const anchor of anchors) {
        if (!body.includes(`id="${anchor}"`)) broken.push(`${pathname}#${anchor}: no such anchor`);
      }
    }
    expect(broken).toEqual([]);
  });

  it("the top navigation and the sidebar lead to the pages they name", async () => {
    const page = await context.newPage();
    try {
      await page.goto(`${site.origin}/`, { waitUntil: "load" });
      const nav = page.locator(".VPNavBar");
      for (const text of ["Guide", "Stores", "Operating", "Proof", "API"]) {
        await expect(nav.getByRole("link", { name: text, exact: true }).count()).resolves.toBe(1);
      }
      await nav.getByRole("link", { name: "Stores", exact: true }).click();
      await page.waitForURL(/\/stores\/$/);
      // VitePress routes on the client: the URL changes before the new page renders, so wait for its h1.
      await expect(firstHeading(page, "Choosing a store")).resolves.toContain("Choosing a store");
      const sidebar = page.locator(".VPSidebar");
      for (const text of ["Lambda + SQS", "Lambda + Kafka", "Cloudflare Queues", "Joining a BabelQueue fleet", "DynamoDB", "Durable Objects", "Redrive and replay", "Reliability"]) {
        await expect(sidebar.getByRole("link", { name: text, exact: true }).count()).resolves.toBeGreaterThanOrEqual(1);
      }
      await sidebar.getByRole("link", { name: "DynamoDB", exact: true }).click();
      await page.waitForURL(/\/stores\/dynamodb\.html$/);
      await expect(firstHeading(page, "DynamoDB")).resolves.toContain("DynamoDB");
    } finally {
      await page.close();
    }
  });

  it("the search box finds a store page", async () => {
    const page = await context.newPage();
    try {
      await page.goto(`${site.origin}/`, { waitUntil: "load" });
      await page.locator(".VPNavBarSearch button").first().click();
      const input = page.locator("input.search-input");
      await input.waitFor({ state: "visible" });
      await input.fill("Durable Object");
      const results = page.locator(".VPLocalSearchBox .results a");
      await results.first().waitFor({ state: "visible" });
      const hrefs = await results.evaluateAll((anchors) => anchors.map((anchor) => anchor.getAttribute("href") ?? ""));
      expect(hrefs.some((href) => href.includes("/stores/durable-objects"))).toBe(true);
      await page.keyboard.press("Enter");
      await page.waitForURL(/\/stores\/durable-objects\.html|\/guide\/|\/api\/|\/concepts\/|\/operating\//);
    } finally {
      await page.close();
    }
  });

  it("saves screenshots of the home page and a store page", async () => {
    const shots = join(dist, "screenshots");
    mkdirSync(shots, { recursive: true });
    const page = await context.newPage();
    try {
      for (const [path, name] of [
        ["/", "home.png"],
        ["/stores/dynamodb.html", "store-dynamodb.png"],
      ] as const) {
        await page.goto(`${site.origin}${path}`, { waitUntil: "load" });
        await page.screenshot({ path: join(shots, name), fullPage: false });
        expect(statSync(join(shots, name)).size).toBeGreaterThan(10_000);
      }
    } finally {
      await page.close();
    }
  });
});
