/**
 * The SQL databases the server's suites run against, as a list: every suite written with
 * {@link forEachDatabase} runs once per entry: SQLite, PostgreSQL and MariaDB (through the MySQL
 * dialect). To add a database, add an entry that starts a real server for the file and hands
 * out fresh, empty databases.
 */
import { afterAll, beforeAll, describe } from "vitest";
import type { DialectName } from "../src/index.js";
import { startMariaDb } from "../../../test/support/mariadb.js";
import { startPostgres } from "../../../test/support/postgres.js";

/** A started database server for one test file. */
export interface TestDatabase {
  /** Which database this is. */
  readonly name: DialectName;
  /**
   * A fresh, empty database for one service: its URL, or `undefined` for SQLite (each service
   * gets its own data directory, so it starts empty anyway).
   */
  fresh(): Promise<string | undefined>;
  /** Stops the server and removes its files. */
  stop(): Promise<void>;
}

/** One kind of database: how to start it for a file. */
export interface DatabaseKind {
  /** The server, in test names: `sqlite`, `postgres`, `mariadb`. */
  readonly title: string;
  readonly name: DialectName;
  start(): Promise<TestDatabase>;
}

/** Every SQL database the service supports. */
export const DATABASES: readonly DatabaseKind[] = [
  {
    title: "sqlite",
    name: "sqlite",
    start: () =>
      Promise.resolve({
        name: "sqlite",
        fresh: () => Promise.resolve(undefined),
        stop: () => Promise.resolve(),
      }),
  },
  {
    title: "postgres",
    name: "postgres",
    async start() {
      const server = await startPostgres();
      let n = 0;
      return {
        name: "postgres",
        fresh: () => server.createDatabase(`test_${++n}`),
        stop: () => server.stop(),
      };
    },
  },
  {
    title: "mariadb",
    name: "mysql",
    async start() {
      const server = await startMariaDb();
      let n = 0;
      return {
        name: "mysql",
        fresh: () => server.createDatabase(`test_${++n}`),
        stop: () => server.stop(),
      };
    },
  },
];

/**
 * Declares the suite once per database of {@link DATABASES} (or of those `where` picks, for a
 * suite about a property only some have), inside `describe("on <title>")`. The database server
 * starts before the suite's own `beforeAll` hooks and stops after it.
 */
export function forEachDatabase(
  suite: (database: () => TestDatabase) => void,
  where: (kind: DatabaseKind) => boolean = () => true,
): void {
  describe.each(DATABASES.filter(where))("on $title", (kind) => {
    let db: TestDatabase | undefined;
    beforeAll(async () => {
      db = await kind.start();
    });
    afterAll(async () => {
      await db?.stop();
    });
    suite(() => {
      if (!db) throw new Error(`${kind.name} did not start`);
      return db;
    });
  });
}
