#!/usr/bin/env node
// The `sluice` command. npm links a package's bin only when the file exists at `npm install`
// time, and dist/ is built after that, so this small committed file is the bin: it runs the
// built CLI (dist/cli.js), or says how to build it.
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const NOT_BUILT = "sluice is not built yet: run `npm run build` (or `npm start`) first";
const cli = new URL("../dist/cli.js", import.meta.url);

if (!existsSync(cli)) {
  process.stderr.write(`${NOT_BUILT}\n(missing ${fileURLToPath(cli)})\n`);
  process.exit(1);
}
try {
  await import(cli.href);
} catch (err) {
  // Half built: the CLI is there, but a module it loads (the sluice library's dist) is not.
  if (err?.code !== "ERR_MODULE_NOT_FOUND") throw err;
  process.stderr.write(`${NOT_BUILT}\n(${err.message})\n`);
  process.exit(1);
}
