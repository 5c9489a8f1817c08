/**
 * The documentation site (VitePress): `npm run docs:build` generates the API reference from the
 * entry modules (TypeDoc → docs/api/, see typedoc.json) and builds the site into
 * docs/.vitepress/dist, offline. A dead internal link fails the build (VitePress's default, kept).
 *
 * Drafts: docs/drafts/ is never built (srcExclude), so a draft can never break the site.
 *
 * The sidebar's pages are listed in sidebar.json beside this file; add a page there.
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

/**
 * The sidebar: the pages of each group, in reading order (sidebar.json, data only), with the API
 * reference's pages filled in under its entry (link `/api/`).
 */
const sidebar = (JSON.parse(readFileSync(join(docs, ".vitepress", "sidebar.json"), "utf8")) as DefaultTheme.SidebarItem[]).map((item) =>
  item.link === "/api/" ? { ...item, items: apiSidebar() } : item,
);

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
