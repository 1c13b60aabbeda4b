import { afterAll, beforeAll, describe } from "vitest";
import type { RedisStore } from "../../src/index.js";
import { CLIENTS } from "../../../../test/support/redis-clients.js";
import { type RedisServer, startRedis } from "../../../../test/support/redis.js";
import { clientForSuite } from "../../../../test/support/redis-suite.js";
import { runConformance } from "../conformance/run.js";
import { Owned } from "./helpers.js";

// One server for the file and one client of each kind (test/support/redis-clients.ts); each
// scenario gets its own store (and unique policy name). The deny cache and leases live in the
// store, apart from the client: they are played on the first client only.
let server: RedisServer;

beforeAll(async () => {
  server = await startRedis();
});

afterAll(async () => {
  await server.stop();
});

describe.each(CLIENTS)("$name", (kind) => {
  const c = clientForSuite(kind, () => kind.standalone(server.url));
  const owned = new Owned();
  afterAll(() => owned.close());

  function make(now: () => number, denyCache: boolean): RedisStore {
    return owned.store({ client: c.client, now, heartbeatMs: 0, denyCache });
  }

  runConformance(`redis standalone (${kind.name})`, (now) => make(now, false));
  if (kind === CLIENTS[0]) {
    runConformance("redis standalone (deny cache on)", (now) => make(now, true));
    runConformance("redis standalone", (now) => make(now, false), { lease: true });
  }
});
