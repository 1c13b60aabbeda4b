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

/** A policy's grants, as its stored document holds them (the rest is not read here). */
const grantRow = z.object({ spec: jsonColumn(z.object({ apps: appListShape })) });

/** Names of the policies granted to an app. */
export async function policiesGrantedTo(trx: Db | Tx, app: string): Promise<string[]> {
  const rows = await trx
    .selectFrom("documents")
    .select(["kind", "name", "spec"])
    .where("kind", "=", "policy")
    .execute();
  return rows
    .filter((p) =>
      readRow("documents", { kind: p.kind, name: p.name }, grantRow, p).spec.apps.includes(app),
    )
    .map((p) => p.name);
}
