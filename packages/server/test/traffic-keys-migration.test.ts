/**
 * Migration 0009 (top keys kept by slot of each node's sketch) on a database written as the
 * releases before it wrote it: migrated up to 0008, a summary row stored by key (its
 * `ident_hash`), then opened by this release. The table is made anew: the old rows (an hour of
 * observations at most) are gone, and the new rows are one per slot. On every SQL database.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "kysely";
import { afterAll, beforeAll, expect, it } from "vitest";
import { Repository, openDatabase } from "../src/index.js";
import { forEachDatabase } from "./databases.js";

forEachDatabase((database) => {
  let dataDir: string;
  beforeAll(() => {
    dataDir = mkdtempSync(join(tmpdir(), "sluice-0009-"));
  });
  afterAll(() => {
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("0009_traffic_key_slots: the table is made anew, one row per slot", async () => {
    const where = { databaseUrl: await database().fresh(), dataDir };
    const old = await openDatabase({ ...where, migrateUntil: "0008_documents" });
    await sql`insert into traffic_keys (policy, kind, node, minute, ident_hash, ident, hits, overcount, floor_hits)
      values ('api', 'requests', 'n1', 60, 'abc', 'user:1', 5, 0, 0)`.execute(old.db);
    await old.close();

    const migrated = await openDatabase(where);
    try {
      const table = (await migrated.db.introspection.getTables()).find(
        (t) => t.name === "traffic_keys",
      );
      expect(table?.columns.map((c) => c.name).sort()).toEqual([
        "floor_hits",
        "hits",
        "ident",
        "kind",
        "minute",
        "node",
        "overcount",
        "policy",
        "slot",
      ]);
      const traffic = new Repository(migrated).traffic;
      expect(await traffic.keyRows("api", "requests", 0)).toEqual([]);
      const row = {
        policy: "api",
        kind: "requests",
        node: "n1",
        minute: 60,
        overcount: 0,
      } as const;
      await traffic.putKeys([
        { ...row, slot: 0, key: "user:1", hits: 5, floor: 0 },
        { ...row, slot: 1, key: "user:2", hits: 3, floor: 0 },
      ]);
      // The slot's new key replaces the old one: the row holds whoever holds the slot.
      await traffic.putKeys([{ ...row, slot: 1, key: "user:3", hits: 4, overcount: 3, floor: 3 }]);
      const rows = await traffic.keyRows("api", "requests", 0);
      expect(rows.sort((a, b) => a.slot - b.slot)).toEqual([
        { ...row, slot: 0, key: "user:1", hits: 5, floor: 0 },
        { ...row, slot: 1, key: "user:3", hits: 4, overcount: 3, floor: 3 },
      ]);
    } finally {
      await migrated.close();
    }
  });
});
