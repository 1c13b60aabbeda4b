/**
 * `sluice check` and `sluice key peek|reset`: one request decided, one key looked up or
 * unblocked, on the shared counters (Redis) under a stored policy.
 */
import type { Command } from "commander";
import type { Limiter } from "sluice";
import type { Repository } from "../repository.js";
import { DB_KEYS, addConfigOptions, configFrom, fail, withRepo } from "./options.js";

/** Registers `check`, `key peek` and `key reset`. */
export function keyCommands(cli: Command): void {
  addConfigOptions(
    cli
      .command("check <policy> <key>")
      .description(
        "decide one request against the shared counters (--redis-url) and print the decision (exit 0 allowed, 2 denied)",
      )
      .option("--cost <n>", "units to charge", "1")
      .option("--peek", "do not charge; show what a request of --cost units would get")
      .option(
        "--memory",
        "without Redis: decide on fresh counters in this process (what an unused key gets)",
      ),
    [...DB_KEYS, "redisUrl"],
  ).action(async (name: string, key: string, opts: Record<string, unknown>) => {
    const cost = Number(opts.cost);
    await withLimiter(opts, name, "check", async (limiter) => {
      const d = opts.peek ? await limiter.peek(key, { cost }) : await limiter.limit(key, { cost });
      process.stdout.write(`${JSON.stringify(d, null, 2)}\n`);
      process.exitCode = d.allowed ? 0 : 2;
    });
  });

  const keyCmd = cli
    .command("key")
    .description("look up and unblock one key of a policy on the shared counters (Redis)");
  addConfigOptions(
    keyCmd
      .command("peek <policy> <key>")
      .description(
        "what the key has left: the decision a cost-1 request would get (charges nothing)",
      ),
    [...DB_KEYS, "redisUrl"],
  ).action(async (name: string, key: string, opts: Record<string, unknown>) => {
    await withLimiter(opts, name, "key peek", async (limiter) => {
      const d = await limiter.peek(key);
      process.stdout.write(`${JSON.stringify(d, null, 2)}\n`);
    });
  });
  addConfigOptions(
    keyCmd
      .command("reset <policy> <key>")
      .description("unblock the key: reset its counters (recorded in the audit log)")
      .option("--actor <name>", "name recorded in the audit log", "cli"),
    [...DB_KEYS, "redisUrl"],
  ).action(async (name: string, key: string, opts: Record<string, unknown>) => {
    await withLimiter(opts, name, "key reset", async (limiter, repo) => {
      const before = await limiter.peek(key);
      await limiter.reset(key);
      const after = await limiter.peek(key);
      const brief = (d: typeof before) => ({
        allowed: d.allowed,
        remaining: d.remaining,
        retryAfterMs: d.retryAfterMs,
      });
      await repo.recordAudit(String(opts.actor), "key.reset", "policy", name, {
        key,
        counters: "redis",
        via: "cli",
        before: brief(before),
        after: brief(after),
      });
      process.stdout.write(
        `reset "${key}" under "${name}": ${after.remaining} of ${after.limit} left (was ${before.remaining}${before.allowed ? "" : ", denied"})\n`,
      );
    });
  });
}

/**
 * Runs `fn` with a limiter of the stored policy `name` on the shared counters (Redis). Without a
 * Redis URL it refuses: a service's memory counters live inside its own process, and fresh ones
 * here would say nothing about them — except for `check --memory`, which asks for exactly that.
 */
async function withLimiter(
  opts: Record<string, unknown>,
  name: string,
  command: string,
  fn: (limiter: Limiter, repo: Repository) => Promise<void>,
): Promise<void> {
  const config = configFrom(opts, [...DB_KEYS, "redisUrl"]);
  if (!config.redisUrl && !(command === "check" && opts.memory === true)) {
    fail(
      [
        `sluice ${command}: no Redis given (--redis-url or REDIS_URL).`,
        "A service with memory counters keeps them inside its own process: this command cannot",
        "see them, and fresh counters here would say nothing about them.",
        command === "check"
          ? "Pass --redis-url to decide on the shared counters, or --memory to try the policy on fresh counters in this process."
          : "Pass --redis-url to use the shared counters, or use the admin page or API of the node (its Keys page, GET /v1/admin/policies/{name}/key).",
      ].join("\n"),
    );
  }
  const { createLimiter, definePolicy, memoryStore } = await import("sluice");
  const { policyInputOf } = await import("sluice/service");
  const [{ openCounters }, { createMetrics }] = await Promise.all([
    import("../counters.js"),
    import("../metrics.js"),
  ]);
  await withRepo(config, async (repo) => {
    const rec = await repo.policies.get(name);
    if (!rec) fail(`unknown policy "${name}"`, 1);
    const counters = config.redisUrl
      ? openCounters({ redisUrl: config.redisUrl, metrics: createMetrics() })
      : { store: memoryStore(), close: () => Promise.resolve() };
    try {
      let storeError: unknown;
      const limiter = createLimiter({
        store: counters.store,
        policy: definePolicy(policyInputOf(rec.doc)),
        onError: (err) => (storeError ??= err),
      });
      await fn(limiter, repo);
      // `check` prints what the policy's onStoreError decided; the key commands report the failure.
      if (storeError !== undefined && command !== "check")
        fail(
          `sluice ${command}: the counter store failed: ${storeError instanceof Error ? storeError.message : String(storeError)}`,
        );
    } finally {
      await counters.close();
    }
  });
}
