import type { ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { PolicyInput } from "../../src/index.js";
import { allReady, forkWorker } from "../../../../test/support/workers.js";

const WORKER = fileURLToPath(new URL("./worker.ts", import.meta.url));

/** A pool of worker processes (see worker.ts) that fire limit() calls at the same key. */
export interface Workers {
  /** Each worker fires `perWorker` concurrent calls; resolves with the total allowed and reasons. */
  fire(
    policy: PolicyInput,
    key: string,
    perWorker: number,
    /** The client to decide through (test/support/redis-clients.ts); default the first. */
    client?: string,
  ): Promise<{ allowed: number; reasons: Record<string, number> }>;
  /**
   * Each worker `i` fires `perTick[i]` calls every `everyMs` for `forMs`; resolves with the
   * total admitted per window of `windowMs` (window index → count) and the reasons.
   */
  pace(
    policy: PolicyInput,
    key: string,
    perTick: readonly number[],
    options: { everyMs: number; forMs: number; windowMs: number },
  ): Promise<{ windows: Record<number, number>; reasons: Record<string, number> }>;
  stop(): Promise<void>;
}

/** Forks `envs.length` workers (one per env) and waits until each has connected to Redis. */
export async function startWorkers(envs: Array<Record<string, string>>): Promise<Workers> {
  const children: ChildProcess[] = envs.map((env) => forkWorker(WORKER, [], env));
  await allReady(children, (m) => typeof m === "object" && m !== null && "ready" in m);
  let seq = 0;
  return {
    async fire(policy, key, perWorker, client) {
      const id = ++seq;
      const answers = await Promise.all(
        children.map(
          (c) =>
            new Promise<{ allowed: number; reasons: Record<string, number> }>((resolve) => {
              c.on("message", function done(m: unknown) {
                const a = m as { id?: number; allowed: number; reasons: Record<string, number> };
                if (a.id === id) {
                  c.off("message", done);
                  resolve(a);
                }
              });
              c.send({ id, policy, key, n: perWorker, client });
            }),
        ),
      );
      const reasons: Record<string, number> = {};
      for (const a of answers)
        for (const [k, v] of Object.entries(a.reasons)) reasons[k] = (reasons[k] ?? 0) + v;
      return { allowed: answers.reduce((s, a) => s + a.allowed, 0), reasons };
    },
    async pace(policy, key, perTick, options) {
      const id = ++seq;
      const answers = await Promise.all(
        children.map(
          (c, i) =>
            new Promise<{ windows: Record<number, number>; reasons: Record<string, number> }>(
              (resolve) => {
                c.on("message", function done(m: unknown) {
                  const a = m as {
                    id?: number;
                    windows: Record<number, number>;
                    reasons: Record<string, number>;
                  };
                  if (a.id === id) {
                    c.off("message", done);
                    resolve(a);
                  }
                });
                c.send({ id, policy, key, n: perTick[i] ?? 0, pace: options });
              },
            ),
        ),
      );
      const windows: Record<number, number> = {};
      const reasons: Record<string, number> = {};
      for (const a of answers) {
        for (const [k, v] of Object.entries(a.windows))
          windows[Number(k)] = (windows[Number(k)] ?? 0) + v;
        for (const [k, v] of Object.entries(a.reasons)) reasons[k] = (reasons[k] ?? 0) + v;
      }
      return { windows, reasons };
    },
    async stop() {
      await Promise.all(
        children.map(
          (c) =>
            new Promise<void>((resolve) => {
              if (c.exitCode !== null) return resolve();
              const t = setTimeout(() => c.kill("SIGKILL"), 3000);
              c.once("exit", () => {
                clearTimeout(t);
                resolve();
              });
              c.send("exit");
            }),
        ),
      );
    },
  };
}
