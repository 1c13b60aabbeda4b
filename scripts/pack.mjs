// `npm run pack`: writes an installable tarball of every published package into packs/ (ignored
// by git) — each package's `prepack` builds it first — and prints how to install them into an
// app. The README's "Install" section, and test/packaging.test.ts, which does what it says.
// SLUICE_PACK_BUILT=1 packs the packages as they are built now, without rebuilding (the test
// does so: the test command has just built them, and other tests read dist/ meanwhile).
import { execFileSync } from "node:child_process";
import { mkdirSync, readdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const packs = join(root, "packs");

mkdirSync(packs, { recursive: true });
for (const f of readdirSync(packs)) if (f.endsWith(".tgz")) rmSync(join(packs, f));
// --workspaces packs every package in the root's order (sluice, nest, api, admin, server): each one's build
// finds the ones it needs already built.
execFileSync("npm", ["pack", "--workspaces", "--pack-destination", packs, "--loglevel", "warn"], {
  cwd: root,
  stdio: ["ignore", "ignore", "inherit"],
});
const files = readdirSync(packs).filter((f) => f.endsWith(".tgz"));
const at = (name) => join(packs, files.find((f) => f.startsWith(`${name}-`)) ?? `${name}-?.tgz`);
console.log(`Wrote ${files.length} tarballs to ${packs}:
  ${files.join("\n  ")}

In your app's folder:
  npm install ${at("sluice")}          # the library
  npm install ${at("sluice")} ${at("sluice-nest")}   # and the NestJS module
  npm install ${at("sluice")} ${at("sluice-api")} ${at("sluice-admin")} ${at("sluice-server")}   # and the service (npx sluice serve)`);
