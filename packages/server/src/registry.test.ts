import { memoryStore } from "sluice";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { Registry } from "./registry.js";
import type { Repository, Snapshot } from "./repository.js";

/** A repository whose revision reads wait until the test answers them. */
function slowRepo() {
  const pending: Array<(rev: number) => void> = [];
  const loaded: number[] = [];
  let stored = 0;
  const repo = {
    revision: () => new Promise<number>((resolve) => pending.push(resolve)),
    // No change log: every load reads the whole snapshot.
    changesSince: () => Promise.resolve(undefined),
    snapshot: (): Promise<Snapshot> => {
      loaded.push(stored);
      return Promise.resolve({
        revision: stored,
        policies: [],
        drafts: [],
        apps: [],
        envoyDomains: [],
        envoyDrafts: [],
        overrides: [],
        corrupt: [],
      });
    },
  };
  return {
    repo: repo as unknown as Repository,
    pending,
    loaded,
    commit: () => ++stored,
    current: () => stored,
  };
}

const tick = () => new Promise((r) => setImmediate(r));

describe("Registry.poll", () => {
  it("answers a call made during a check with a check that starts after it, shared by later calls", async () => {
    const r = slowRepo();
    const registry = new Registry({
      repo: r.repo,
      store: memoryStore(),
      logger: pino({ level: "silent" }),
      pollIntervalMs: 60_000,
    });
    await registry.reload();
    expect(r.loaded).toEqual([0]);
    const first = registry.poll();
    await tick();
    expect(r.pending).toHaveLength(1); // the first check is reading the revision
    r.commit(); // a change is committed meanwhile…
    const mine = registry.poll(); // …and its writer asks to see it
    const another = registry.poll();
    expect(another).toBe(mine);
    r.pending.shift()!(0); // the first check read the revision from before the commit
    await first;
    expect(registry.currentRevision).toBe(0); // so it found nothing to load
    await tick();
    expect(r.pending).toHaveLength(1); // the writer's check started after the first ended
    r.pending.shift()!(r.current());
    await mine;
    expect(registry.currentRevision).toBe(1);
    expect(r.loaded).toEqual([0, 1]);
  });
});
