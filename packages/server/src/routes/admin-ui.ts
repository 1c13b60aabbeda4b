/**
 * Serves the admin web page — the built files of `@sluice/admin` (index.html, app.js, app.css)
 * — at `/admin/`. `/admin` redirects to `/admin/`. Only regular files inside the dist folder
 * are served: paths with `..`, NUL bytes or anything resolving outside it are refused (404).
 */
import { existsSync } from "node:fs";
import { readFile, realpath, stat } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, extname, join, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import type { FastifyPluginAsync, FastifyReply } from "fastify";

/** Content types of the files the admin build produces. */
const CONTENT_TYPES: Readonly<Record<string, string>> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".map": "application/json; charset=utf-8",
  ".json": "application/json; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".txt": "text/plain; charset=utf-8",
};

/** The page loads only its own files and talks only to this service. */
const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/** Options of {@link adminUi}. */
export interface AdminUiOptions {
  /** The folder holding the built page; default: `@sluice/admin`'s `dist`, found next to this package. */
  dir?: string;
}

/**
 * Where the built admin page is: `@sluice/admin/dist` resolved as a package, else the
 * workspace's `packages/admin/dist` relative to this file (from `dist/cli.js` or from source).
 * `undefined` when it has not been built.
 */
export function findAdminDist(): string | undefined {
  const candidates: string[] = [];
  try {
    const pkg = createRequire(import.meta.url).resolve("@sluice/admin/package.json");
    candidates.push(join(dirname(pkg), "dist"));
  } catch {
    // Not installed as a package; try the workspace layout.
  }
  candidates.push(
    fileURLToPath(new URL("../../admin/dist", import.meta.url)),
    fileURLToPath(new URL("../../../admin/dist", import.meta.url)),
  );
  return candidates.find((d) => existsSync(join(d, "index.html")));
}

const notBuilt = (reply: FastifyReply) =>
  reply
    .code(404)
    .type("text/plain; charset=utf-8")
    .send("The admin page is not built: run `npm run build` (it builds packages/admin).\n");

/** The Fastify plugin serving the admin page at `/admin/`. */
const adminUi: FastifyPluginAsync<AdminUiOptions> = async (app, options) => {
  const configured = options.dir ?? findAdminDist();
  const root = configured && existsSync(configured) ? await realpath(configured) : undefined;

  const send = async (reply: FastifyReply, name: string) => {
    if (!root) return notBuilt(reply);
    // Refuse anything that could leave the folder before touching the file system.
    if (name.includes("\0") || name.split(/[\\/]/).some((seg) => seg === "..")) {
      return reply.callNotFound();
    }
    const file = resolve(root, name);
    if (!file.startsWith(root + sep)) return reply.callNotFound();
    let real: string;
    try {
      real = await realpath(file);
      if (!real.startsWith(root + sep) || !(await stat(real)).isFile()) return reply.callNotFound();
    } catch {
      return reply.callNotFound();
    }
    const body = await readFile(real);
    return reply
      .type(CONTENT_TYPES[extname(real).toLowerCase()] ?? "application/octet-stream")
      .header("cache-control", "no-cache")
      .header("x-content-type-options", "nosniff")
      .header("content-security-policy", CSP)
      .header("referrer-policy", "no-referrer")
      .send(body);
  };

  app.get("/admin", async (req, reply) => {
    const q = req.url.indexOf("?");
    return reply.redirect(`/admin/${q >= 0 ? req.url.slice(q) : ""}`, 301);
  });
  app.get("/admin/", async (_req, reply) => send(reply, "index.html"));
  app.get("/admin/*", async (req, reply) => {
    const name = (req.params as { "*"?: string })["*"] ?? "";
    return send(reply, name === "" ? "index.html" : name);
  });
};

export default adminUi;
