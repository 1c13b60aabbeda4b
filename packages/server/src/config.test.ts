import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ConfigError, loadConfig, redactUrl } from "./config.js";

const dir = mkdtempSync(join(tmpdir(), "sluice-config-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function issuesOf(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    if (err instanceof ConfigError) return err.issues.map((i) => `${i.path}: ${i.message}`);
    throw err;
  }
  throw new Error("expected a ConfigError");
}

describe("loadConfig", () => {
  it("has zero-config defaults", () => {
    const c = loadConfig();
    expect(c).toMatchObject({
      port: 8080,
      host: "127.0.0.1",
      databaseUrl: undefined,
      redisUrl: undefined,
      memoryMaxKeys: 1_000_000,
      logLevel: "info",
      pollIntervalMs: 250,
      sessionTtlMs: 12 * 3_600_000,
      grpcPort: undefined,
      envoyHeaders: "ietf",
      workers: 1,
    });
    expect(c.dataDir).toBe(join(process.cwd(), ".sluice-data"));
    expect(Object.isFrozen(c)).toBe(true);
  });

  it("caps the memory counters with memoryMaxKeys, from a flag or SLUICE_MEMORY_MAX_KEYS", () => {
    expect(loadConfig({ env: { SLUICE_MEMORY_MAX_KEYS: "50000" } }).memoryMaxKeys).toBe(50_000);
    expect(issuesOf(() => loadConfig({ flags: { memoryMaxKeys: "0" } }))).toEqual([
      'memoryMaxKeys: must be an integer from 1 to 100000000 (got "0") (from --memory-max-keys)',
    ]);
  });

  it("turns the Envoy rate limit service on with grpcPort, from a flag or SLUICE_GRPC_PORT", () => {
    expect(loadConfig({ env: { SLUICE_GRPC_PORT: "8081" } }).grpcPort).toBe(8081);
    expect(
      loadConfig({ flags: { grpcPort: "0" }, env: { SLUICE_GRPC_PORT: "8081" } }).grpcPort,
    ).toBe(0);
    expect(loadConfig({ env: { SLUICE_ENVOY_HEADERS: "both" } }).envoyHeaders).toBe("both");
    expect(issuesOf(() => loadConfig({ flags: { grpcPort: "70000", envoyHeaders: "x" } }))).toEqual(
      [
        'grpcPort: must be an integer from 0 to 65535 (got "70000") (from --grpc-port)',
        "envoyHeaders: must be one of ietf, github, both, none (from --envoy-headers)",
      ],
    );
  });

  it("runs several workers with Redis counters (auto: one per core), and refuses them with memory counters", () => {
    const redisUrl = "redis://127.0.0.1:6379";
    expect(loadConfig({ env: { SLUICE_WORKERS: "4", REDIS_URL: redisUrl } }).workers).toBe(4);
    expect(loadConfig({ flags: { workers: "auto", redisUrl } }).workers).toBe(
      availableParallelism(),
    );
    expect(loadConfig({ flags: { workers: "1" } }).workers).toBe(1);
    expect(issuesOf(() => loadConfig({ flags: { workers: "0" } }))).toEqual([
      'workers: must be auto (one per core) or an integer from 1 to 256 (got "0") (from --workers)',
    ]);
    expect(issuesOf(() => loadConfig({ env: { SLUICE_WORKERS: "3" } }))).toEqual([
      "workers: 3 workers need counters in Redis (redisUrl, --redis-url): with memory counters each worker would count on its own and let every limit through 3 times; use 1 worker, or set redisUrl (from env SLUICE_WORKERS)",
    ]);
  });

  it("takes flags over env over the config file over defaults", () => {
    const file = join(dir, "c.yaml");
    writeFileSync(file, "port: 1000\nhost: 0.0.0.0\nlogLevel: warn\nsessionTtl: 2h\n");
    const c = loadConfig({
      file,
      env: { PORT: "2000", SLUICE_LOG_LEVEL: "error" },
      flags: { port: "3000" },
    });
    expect(c).toMatchObject({
      port: 3000,
      host: "0.0.0.0",
      logLevel: "error",
      sessionTtlMs: 7_200_000,
    });
    expect(loadConfig({ file, env: { PORT: "2000" } }).port).toBe(2000);
    expect(loadConfig({ env: { SLUICE_CONFIG: file } }).port).toBe(1000);
  });

  it("reads JSON config files and env names for every source", () => {
    const file = join(dir, "c.json");
    writeFileSync(file, JSON.stringify({ redisUrl: "redis://127.0.0.1:6380", trustProxy: true }));
    const c = loadConfig({
      file,
      env: { DATABASE_URL: "postgres://u:p@h/db", SLUICE_DATA_DIR: "/tmp/x" },
    });
    expect(c).toMatchObject({
      redisUrl: "redis://127.0.0.1:6380",
      trustProxy: true,
      databaseUrl: "postgres://u:p@h/db",
      dataDir: "/tmp/x",
    });
  });

  it("takes trustProxy in the library's forms: true/false, a hop count, IPs, CIDRs and names", () => {
    const trust = (v: unknown) => loadConfig({ values: { trustProxy: v } }).trustProxy;
    expect(trust(true)).toBe(true);
    expect(trust("false")).toBe(false);
    expect(trust(1)).toBe(1);
    expect(trust("2")).toBe(2);
    expect(trust("loopback, 10.0.0.0/8")).toEqual(["loopback", "10.0.0.0/8"]);
    expect(trust(["uniquelocal", "2001:db8::/32"])).toEqual(["uniquelocal", "2001:db8::/32"]);
    expect(loadConfig({ env: { SLUICE_TRUST_PROXY: "127.0.0.1" } }).trustProxy).toEqual([
      "127.0.0.1",
    ]);
    expect(loadConfig().trustProxy).toBe(false);
  });

  it("names each bad field and the source of its value", () => {
    const file = join(dir, "bad.yaml");
    writeFileSync(file, "port: 99999\nlogLevel: chatty\nfoo: 1\n");
    expect(issuesOf(() => loadConfig({ file }))).toEqual([
      `foo: unknown configuration key (from ${file}); known keys: port, host, dataDir, databaseUrl, redisUrl, memoryMaxKeys, logLevel, pollIntervalMs, shutdownTimeoutMs, sessionTtl, trustProxy, loginLimitPerUser, loginLimitPerIp, bodyLimit, maxBatch, headersTimeoutMs, requestTimeoutMs, keepAliveTimeoutMs, maxConnections, databaseTimeoutMs, readinessTimeoutMs, grpcPort, envoyHeaders, workers`,
      `port: must be an integer from 0 to 65535 (got 99999) (from ${file})`,
      `logLevel: must be one of fatal, error, warn, info, debug, trace, silent (from ${file})`,
    ]);
    expect(issuesOf(() => loadConfig({ env: { SLUICE_SESSION_TTL: "1s" } }))).toEqual([
      'sessionTtl: must be at least 1m (got "1s") (from env SLUICE_SESSION_TTL)',
    ]);
    expect(issuesOf(() => loadConfig({ flags: { trustProxy: "maybe" } }))).toEqual([
      'trustProxy: "maybe" is not an IP address, a CIDR or one of loopback, linklocal, uniquelocal (from --trust-proxy)',
    ]);
    expect(issuesOf(() => loadConfig({ values: { trustProxy: -1 } }))).toEqual([
      "trustProxy: must be true, false, a hop count (0, 1, 2…) or a list of proxy IPs, CIDRs or the names loopback, linklocal, uniquelocal (got -1) (from options)",
    ]);
    expect(
      issuesOf(() => loadConfig({ values: { headersTimeoutMs: 5000, requestTimeoutMs: 1000 } })),
    ).toEqual([
      "headersTimeoutMs: must not exceed requestTimeoutMs (1000) (got 5000) (from options)",
    ]);
    expect(issuesOf(() => loadConfig({ env: { REDIS_URL: "http://x" } }))[0]).toMatch(
      /^redisUrl: must be redis:\/\//,
    );
    expect(issuesOf(() => loadConfig({ env: { DATABASE_URL: "mongodb://h/db" } }))).toEqual([
      "databaseUrl: must be a postgres://, postgresql://, mysql:// or mariadb:// URL (from env DATABASE_URL)",
    ]);
    expect(issuesOf(() => loadConfig({ flags: { databaseUrl: "mysql://u:p@h:3306" } }))).toEqual([
      "databaseUrl: must name the database: mysql://user:password@host:3306/<database> (from --database-url)",
    ]);
  });

  it("takes MySQL and MariaDB URLs", () => {
    for (const url of ["mysql://u:p@h:3306/policies", "mariadb://u@h/policies?ssl=true"])
      expect(loadConfig({ env: { DATABASE_URL: url } }).databaseUrl).toBe(url);
  });

  it("reports an unreadable or malformed file", () => {
    expect(issuesOf(() => loadConfig({ file: join(dir, "missing.yaml") }))[0]).toMatch(
      /^config: cannot read/,
    );
    const file = join(dir, "list.yaml");
    writeFileSync(file, "- 1\n- 2\n");
    expect(issuesOf(() => loadConfig({ file }))[0]).toContain("must hold a mapping");
  });
});

describe("redactUrl", () => {
  it("hides passwords", () => {
    expect(redactUrl("postgres://user:secret@db:5432/x")).toBe("postgres://user:***@db:5432/x");
    expect(redactUrl("redis://127.0.0.1:6379")).toBe("redis://127.0.0.1:6379");
  });
});
