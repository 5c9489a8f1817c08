/**
 * The documentation site (VitePress): `npm run docs:build` generates the API reference from the
 * entry modules (TypeDoc → docs/api/, see typedoc.json) and builds the site into
 * docs/.vitepress/dist, offline. A dead internal link fails the build (VitePress's default, kept).
 *
 * Drafts: docs/drafts/ is never built (srcExclude), so a draft can never break the site.
 *
 * What this is *not*: the pages. They are the markdown files beside this folder; the API pages are
 * generated and never committed (.gitignore).
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { type DefaultTheme, defineConfig } from "vitepress";

const docs = join(dirname(fileURLToPath(import.meta.url)), "..");

/** The API reference's sidebar, as TypeDoc wrote it (absent before the first `npm run docs:api`). */
function apiSidebar(): DefaultTheme.SidebarItem[] {
  const file = join(docs, "api", "typedoc-sidebar.json");
  if (!existsSync(file)) return [];
  const items = JSON.parse(readFileSync(file, "utf8")) as DefaultTheme.SidebarItem[];
  return items.map((item) => ({ ...item, link: item.link?.replace(/\.md$/, "") }));
}

const gettingStarted: DefaultTheme.SidebarItem[] = [
  { text: "What it is", link: "/guide/introduction" },
  { text: "Install", link: "/guide/install" },
  { text: "wrap in any job runner", link: "/guide/wrap" },
  { text: "Lambda + SQS", link: "/guide/lambda-sqs" },
  { text: "Lambda + Kafka", link: "/guide/lambda-kafka" },
  { text: "Cloudflare Queues", link: "/guide/cloudflare-queues" },
  { text: "Local development", link: "/guide/local-development" },
];

const sidebar: DefaultTheme.SidebarItem[] = [
  { text: "Getting started", items: gettingStarted },
  {
    text: "Concepts",
    items: [
      { text: "The store contract", link: "/concepts/contract" },
      { text: "One message, decided once", link: "/concepts/decision" },
      { text: "Guarantees and honest limits", link: "/concepts/guarantees" },
      { text: "Transactional mode", link: "/concepts/transactional" },
      { text: "Clocks and skew", link: "/concepts/clocks" },
      { text: "Joining a BabelQueue fleet", link: "/concepts/fleet" },
    ],
  },
  {
    text: "Stores",
    items: [
      { text: "Choosing a store", link: "/stores/" },
      { text: "InMemoryStore", link: "/stores/in-memory" },
      { text: "DynamoDB", link: "/stores/dynamodb" },
      { text: "Redis and Upstash", link: "/stores/redis" },
      { text: "PostgreSQL", link: "/stores/postgres" },
      { text: "Durable Objects", link: "/stores/durable-objects" },
      { text: "D1", link: "/stores/d1" },
      { text: "Workers KV", link: "/stores/kv" },
    ],
  },
  {
    text: "Operating",
    items: [
      { text: "Observability", link: "/operating/observability" },
      { text: "The CLI", link: "/operating/cli" },
      { text: "Redrive and replay", link: "/operating/redrive-replay" },
      { text: "Changing shard counts", link: "/operating/shards" },
    ],
  },
  {
    text: "The proof",
    items: [
      { text: "What we measured", link: "/proof/" },
      { text: "Reliability", link: "/proof/reliability" },
      { text: "Benchmark against Powertools", link: "/proof/benchmark" },
      { text: "Test quality", link: "/proof/test-quality" },
    ],
  },
  { text: "API reference", link: "/api/", collapsed: true, items: apiSidebar() },
  {
    text: "Contributors",
    items: [
      { text: "Contributing", link: "/contributing/" },
      { text: "Architecture", link: "/ARCHITECTURE" },
    ],
  },
];

export default defineConfig({
  title: "babelqueue-serverless",
  description:
    "Exactly-once effects for serverless and edge queue consumers (SQS Lambda, Cloudflare Queues) over at-least-once delivery.",
  lang: "en-US",
  head: [["link", { rel: "icon", type: "image/svg+xml", href: "/favicon.svg" }]],
  srcExclude: ["drafts/**"],
  lastUpdated: false,
  // Explicit: the build fails on a dead internal link.
  ignoreDeadLinks: false,
  // The local search index and the API pages make chunks past Vite's 500 kB warning; they load lazily.
  vite: { build: { chunkSizeWarningLimit: 2_000 } },
  themeConfig: {
    nav: [
      { text: "Guide", link: "/guide/introduction", activeMatch: "^/guide/" },
      { text: "Stores", link: "/stores/", activeMatch: "^/stores/" },
      { text: "Operating", link: "/operating/observability", activeMatch: "^/operating/" },
      { text: "Proof", link: "/proof/", activeMatch: "^/proof/" },
      { text: "API", link: "/api/", activeMatch: "^/api/" },
    ],
    sidebar,
    search: { provider: "local" },
    outline: { level: [2, 3] },
    socialLinks: [{ icon: "github", link: "https://github.com/babelqueue/babelqueue-serverless" }],
    footer: { message: "MIT licensed.", copyright: "babelqueue-serverless contributors" },
  },
});
