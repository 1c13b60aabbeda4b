// Part of `npm run lint`: files that must never be committed — merge and patch leftovers
// (`*.orig`, `*.rej`, `*.BACKUP.*`, `*.LOCAL.*`, `*.REMOTE.*`, `*.BASE.*`). Lists them and fails.
import { execFileSync } from "node:child_process";

const tracked = execFileSync("git", ["ls-files"], { encoding: "utf8" }).split("\n");
const leftovers = tracked.filter((f) =>
  /\.(orig|rej)$|\.(BACKUP|LOCAL|REMOTE|BASE)\.[^/]+$/.test(f),
);
if (leftovers.length > 0) {
  console.error(
    `check-tree: merge or patch leftovers are committed; delete them (git rm):\n  ${leftovers.join("\n  ")}`,
  );
  process.exit(1);
}
console.log("check-tree: no merge or patch leftovers");
