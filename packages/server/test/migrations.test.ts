/**
 * Migrations that fail: the error names the migration, the step and what was applied. On
 * SQLite and PostgreSQL a migration is one transaction, so nothing of a failed one is applied.
 * (On MySQL and MariaDB, where DDL is not transactional, see mariadb.test.ts: the steps done are
 * recorded and the next start resumes.)
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "kysely";
import { expect, it } from "vitest";
import { Repository, openDatabase } from "../src/index.js";
import { forEachDatabase } from "./databases.js";

forEachDatabase(
  (database) => {
    it("a failed step is named, and nothing of its migration is applied", async () => {
      const dataDir = mkdtempSync(join(tmpdir(), "sluice-migrate-"));
      const where = { databaseUrl: await database().fresh(), dataDir };
      try {
        // Another program's table where the eighth step of 0001 creates the audit log.
        const raw = await openDatabase({ ...where, migrate: false });
        await sql`create table audit (theirs integer)`.execute(raw.db);
        await raw.close();

        await expect(openDatabase(where)).rejects.toThrow(
          /^database migration 0001_initial failed at step 8 of 10 \(create table audit\): .*already exists.*; it ran in one transaction, so nothing of it was applied$/,
        );
        const after = await openDatabase({ ...where, migrate: false });
        const tables = (await after.db.introspection.getTables()).map((t) => t.name);
        expect(tables).toContain("audit");
        expect(tables).not.toContain("policies");
        expect(tables).not.toContain("sessions");

        await sql`drop table audit`.execute(after.db);
        await after.close();
        const migrated = await openDatabase(where);
        expect(await new Repository(migrated).revision()).toBe(0);
        await migrated.close();
      } finally {
        rmSync(dataDir, { recursive: true, force: true });
      }
    });
  },
  (kind) => kind.name !== "mysql",
);
