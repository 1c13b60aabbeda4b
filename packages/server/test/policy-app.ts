/**
 * An app process of platform.test.ts, driven over IPC. `SLUICE_APP_MODE=embedded` decides in
 * this process with `connectPolicies` on the shared Redis (the platform's embedded client);
 * `SLUICE_APP_MODE=http` asks the service (`POST /v1/limit`). It answers the test's commands:
 *
 * - `burst { policy, key, n }`: n decisions at once; answers how many were allowed;
 * - `decide { policy, key }`: one decision; answers it, or the error's code and message;
 * - `limitOf { policy }` (embedded): the first rule's limit in force, or null when not granted;
 * - `status` (embedded): the client's status.
 */
import { Redis } from "ioredis";
import { type PolicyClient, connectPolicies, isSluiceError, redisStore } from "sluice";

interface Command {
  readonly id: number;
  readonly cmd: "burst" | "decide" | "limitOf" | "status";
  readonly policy?: string;
  readonly key?: string;
  readonly n?: number;
}

const env = (name: string): string => {
  const v = process.env[name];
  if (!v) throw new Error(`policy-app: ${name} is not set`);
  return v;
};
const mode = env("SLUICE_APP_MODE");
const url = env("SLUICE_URL");
const apiKey = env("SLUICE_KEY");
const send = (message: unknown) => process.send?.(message);

let policies: PolicyClient | undefined;
let redis: Redis | undefined;

async function decideOne(policy: string, key: string): Promise<unknown> {
  if (policies) {
    try {
      return await policies.limit(policy, key);
    } catch (err) {
      if (isSluiceError(err)) return { error: err.code, message: err.message };
      throw err;
    }
  }
  const res = await fetch(`${url}/v1/limit`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({ policy, key }),
  });
  const body = (await res.json()) as Record<string, unknown>;
  return res.ok ? body : { error: (body.error as { code: string }).code, status: res.status };
}

async function handle(c: Command): Promise<unknown> {
  switch (c.cmd) {
    case "burst": {
      const results = await Promise.all(
        Array.from({ length: c.n! }, () => decideOne(c.policy!, c.key!)),
      );
      const failed = results.filter((r) => (r as { error?: string }).error !== undefined);
      if (failed.length > 0) throw new Error(`burst: ${JSON.stringify(failed[0])}`);
      return results.filter((r) => (r as { allowed: boolean }).allowed).length;
    }
    case "decide":
      return decideOne(c.policy!, c.key!);
    case "limitOf":
      return policies!.has(c.policy!) ? policies!.limiter(c.policy!).policy.rules[0]!.limit : null;
    case "status": {
      const s = policies!.status();
      return { ...s, lastError: s.lastError?.message };
    }
  }
}

process.on("message", (c: Command) => {
  handle(c).then(
    (result) => send({ id: c.id, result }),
    (err: unknown) => send({ id: c.id, error: err instanceof Error ? err.message : String(err) }),
  );
});
process.on("disconnect", () => {
  void (async () => {
    await policies?.close();
    redis?.disconnect();
    process.exit(0);
  })();
});

if (mode === "embedded") {
  redis = new Redis(env("REDIS_URL"), { maxRetriesPerRequest: 1 });
  redis.on("error", () => {});
  policies = await connectPolicies({
    url,
    apiKey,
    store: redisStore({ client: redis }),
    waitMs: 10_000,
    // A service stopped for good: retry often, so the test sees the client keep going.
    retryMaxMs: 1000,
    host: `app-${process.pid}`,
    ...(process.env.SLUICE_CACHE_FILE ? { cacheFile: process.env.SLUICE_CACHE_FILE } : {}),
    onError: () => {},
  });
}
send({ ready: true, status: policies?.status() ?? null });
