/**
 * The relation between policies and apps, checked from both sides: a policy may be granted
 * only to apps that exist (and an owner may own only those), and an app may not be deleted
 * while a policy is granted to it.
 */
import { z } from "zod";
import { invalid } from "../errors.js";
import type { Db, Tx } from "./common.js";
import { appListShape, jsonColumn, readRow } from "./rows.js";

/** The apps, among `apps`, that do not exist. */
export async function missingApps(trx: Db | Tx, apps: readonly string[]): Promise<string[]> {
  if (apps.length === 0) return [];
  const rows = await trx
    .selectFrom("apps")
    .select("name")
    .where("name", "in", [...apps])
    .execute();
  const found = new Set(rows.map((r) => r.name));
  return apps.filter((a) => !found.has(a));
}

/** Refuses (400 naming `<path>.<i>`) when one of `apps` does not exist. */
export async function checkAppsExist(
  trx: Db | Tx,
  apps: readonly string[],
  path: string,
): Promise<void> {
  const missing = await missingApps(trx, apps);
  if (missing.length > 0) {
    throw invalid(
      "Unknown app",
      missing.map((a) => ({
        path: `${path}.${apps.indexOf(a)}`,
        message: `unknown app "${a}" (create it first)`,
      })),
    );
  }
}

const grantRow = z.object({ apps: jsonColumn(appListShape) });

/** Names of the policies granted to an app. */
export async function policiesGrantedTo(trx: Db | Tx, app: string): Promise<string[]> {
  const rows = await trx.selectFrom("policies").select(["name", "apps"]).execute();
  return rows
    .filter((p) => readRow("policies", { name: p.name }, grantRow, p).apps.includes(app))
    .map((p) => p.name);
}
