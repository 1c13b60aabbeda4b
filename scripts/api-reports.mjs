// The API reports: one file per public entry point of every published package, in api-reports/
// (`sluice.api.md`, `sluice-express.api.md`, …, `sluice-server.api.md`), written by API Extractor
// from the built type declarations. A change to what a package exports shows in the diff of its
// report, as code does.
//
//   node scripts/api-reports.mjs            checks: fails, naming them, when a report is stale
//                                           (`npm run lint` runs it; build first)
//   node scripts/api-reports.mjs --update   writes the reports anew (`npm run api:update`)
//
// The entry points are read from each package's `exports` (their `types`), so a new subpath
// gets its report without a change here. @sluice/admin exports no code and has none.
import { Extractor, ExtractorConfig } from "@microsoft/api-extractor";
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const reports = join(root, "api-reports");
const update = process.argv.includes("--update");
const PACKAGES = ["sluice", "nest", "api", "server"];

/** The `types` file an `exports` entry points at (its ESM condition's, else its own). */
function typesOf(target) {
  if (typeof target === "string") return target.endsWith(".d.ts") ? target : undefined;
  if (target && typeof target === "object") {
    if (typeof target.types === "string") return target.types;
    for (const v of Object.values(target)) {
      const t = typesOf(v);
      if (t) return t;
    }
  }
  return undefined;
}

/** Every public entry point: its package folder, declarations, and report name. */
function entryPoints() {
  const out = [];
  for (const dir of PACKAGES) {
    const folder = join(root, "packages", dir);
    const pkg = JSON.parse(readFileSync(join(folder, "package.json"), "utf8"));
    const unscoped = pkg.name.replace(/^@/, "").replace("/", "-");
    for (const [subpath, target] of Object.entries(pkg.exports ?? {})) {
      const types = typesOf(target);
      if (!types) continue;
      const name =
        subpath === "." ? unscoped : `${unscoped}-${subpath.slice(2).replace(/\//g, "-")}`;
      out.push({ folder, types: join(folder, types), name });
    }
  }
  return out;
}

const check = (message) => ({ logLevel: message, addToApiReportFile: false });

function configOf({ folder, types, name }) {
  return ExtractorConfig.prepare({
    configObjectFullPath: undefined,
    packageJsonFullPath: join(folder, "package.json"),
    configObject: {
      projectFolder: folder,
      mainEntryPointFilePath: types,
      compiler: {
        overrideTsconfig: {
          compilerOptions: {
            target: "ES2022",
            module: "NodeNext",
            moduleResolution: "NodeNext",
            lib: ["ES2023", "DOM"],
            types: ["node"],
            strict: true,
            skipLibCheck: true,
          },
          files: [types],
        },
      },
      apiReport: {
        enabled: true,
        reportFolder: reports,
        reportTempFolder: join(root, ".tmp", "api-reports"),
        reportFileName: name,
      },
      docModel: { enabled: false },
      dtsRollup: { enabled: false },
      tsdocMetadata: { enabled: false },
      newlineKind: "lf",
      messages: {
        compilerMessageReporting: { default: check("error") },
        extractorMessageReporting: {
          // Nothing in the report that moves when nothing public changed (no file positions):
          // only the note that an export uses a type its entry point does not export.
          default: check("none"),
          "ae-forgotten-export": { logLevel: "none", addToApiReportFile: true },
        },
        // TSDoc is checked by its readers, not here: sluice's comments are prose.
        tsdocMessageReporting: { default: check("none") },
      },
    },
  });
}

mkdirSync(reports, { recursive: true });
const entries = entryPoints();
const stale = [];
const failed = [];
for (const entry of entries) {
  if (!existsSync(entry.types)) {
    failed.push(`${entry.name}: ${entry.types} is not built (npm run build)`);
    continue;
  }
  const result = Extractor.invoke(configOf(entry), {
    localBuild: update,
    messageCallback(message) {
      // A stale report is said once, below, for every entry point.
      if (message.messageId === "console-api-report-changed") message.handled = true;
      if (message.messageId === "console-api-report-copied") message.handled = true;
      if (message.messageId?.startsWith("console-")) message.logLevel = "none";
    },
  });
  if (result.apiReportChanged && !update) stale.push(`${entry.name}.api.md`);
  else if (!result.succeeded) failed.push(`${entry.name}: API Extractor failed`);
}
// A report whose entry point is gone goes too.
const names = new Set(entries.map((e) => `${e.name}.api.md`));
for (const f of readdirSync(reports)) {
  if (names.has(f)) continue;
  if (update) rmSync(join(reports, f));
  else stale.push(`${f} (no such entry point any more)`);
}
if (failed.length > 0) {
  console.error(`API reports: ${failed.join("; ")}`);
  process.exit(1);
}
if (stale.length > 0) {
  console.error(
    `API reports are stale — the public API changed: ${stale.join(", ")}.\nReview the change, then run \`npm run api:update\` and commit api-reports/.`,
  );
  process.exit(1);
}
console.log(
  update
    ? `API reports written: ${entries.length} entry points in api-reports/`
    : `API reports up to date: ${entries.length} entry points`,
);
