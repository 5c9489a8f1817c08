/**
 * A static file server for the built documentation site, on a free loopback port: what a reader's
 * browser gets from any static host. `/x/` serves `x/index.html`, `/x` serves `x.html` when there is
 * one, a missing file answers 404 with the site's 404 page.
 *
 * What this is *not*: a development server (no rebuilds, no rewrites beyond those two).
 */
import { existsSync, readFileSync, statSync } from "node:fs";
import { type Server, createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { extname, join, normalize, sep } from "node:path";

const TYPES: Readonly<Record<string, string>> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".woff2": "font/woff2",
  ".ico": "image/x-icon",
};

/** The file a URL path names inside `root`, or undefined (never outside `root`). */
function fileOf(root: string, pathname: string): string | undefined {
  let path: string;
  try {
    path = decodeURIComponent(pathname);
  } catch {
    return undefined;
  }
  const candidate = normalize(join(root, path));
  if (candidate !== root && !candidate.startsWith(root + sep)) return undefined;
  const tries = path.endsWith("/") ? [join(candidate, "index.html")] : [candidate, `${candidate}.html`, join(candidate, "index.html")];
  return tries.find((file) => existsSync(file) && statSync(file).isFile());
}

export interface StaticSite {
  readonly origin: string;
  close(): Promise<void>;
}

/** Serves `root` on 127.0.0.1, on a port the system picks. */
export async function serveStatic(root: string): Promise<StaticSite> {
  const server: Server = createServer((request, response) => {
    const url = new URL(request.url ?? "/", "http://localhost");
    const file = fileOf(root, url.pathname);
    if (file === undefined) {
      const notFound = join(root, "404.html");
      response.writeHead(404, { "content-type": TYPES[".html"] ?? "text/html" });
      response.end(existsSync(notFound) ? readFileSync(notFound) : "not found");
      return;
    }
    response.writeHead(200, { "content-type": TYPES[extname(file)] ?? "application/octet-stream" });
    response.end(request.method === "HEAD" ? undefined : readFileSync(file));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
