/** Per-key overrides on the Redis store: a real redis-server for the file, time injected. */
import { afterAll, describe } from "vitest";
import { redisForSuite } from "../../../../test/support/redis-suite.js";
import { Owned } from "../redis/helpers.js";
import { overrideCases } from "./shared.js";

const redis = redisForSuite();
const owned = new Owned();
afterAll(() => owned.close());
const run = Date.now().toString(36);
let seq = 0;

describe("per-key overrides, Redis store", () => {
  overrideCases(() => {
    const time = { t: 1_700_000_000_000 };
    const store = owned.store({ client: redis.client, heartbeatMs: 0, now: () => time.t });
    return { store, time, name: `ovr${run}-${++seq}` };
  });
});
