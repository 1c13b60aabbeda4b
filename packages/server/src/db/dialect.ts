/** Which SQL dialect a database speaks: `mysql` is MySQL and MariaDB. */
export type DialectName = "sqlite" | "postgres" | "mysql";
