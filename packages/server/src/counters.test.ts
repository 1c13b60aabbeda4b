import { Cluster } from "ioredis";
import { describe, expect, it } from "vitest";
import { redisClientFromUrl } from "./counters.js";

/** Builds the client for a URL, reads its options, and disconnects before it connects anywhere. */
function inspect(url: string) {
  const client = redisClientFromUrl(url);
  client.on("error", () => {});
  try {
    if (client instanceof Cluster)
      return {
        kind: "cluster",
        nodes: (client as unknown as { startupNodes: unknown }).startupNodes,
      };
    return { kind: "redis", options: client.options };
  } finally {
    client.disconnect();
  }
}

describe("redisClientFromUrl", () => {
  it("understands standalone, Sentinel and Cluster URLs", () => {
    const standalone = inspect("redis://:pw@127.0.0.1:6390/2");
    expect(standalone).toMatchObject({
      kind: "redis",
      options: { host: "127.0.0.1", port: 6390, db: 2, password: "pw" },
    });
    const sentinel = inspect("redis-sentinel://:secret@10.0.0.1:26379,10.0.0.2/mymaster");
    expect(sentinel).toMatchObject({
      kind: "redis",
      options: {
        name: "mymaster",
        password: "secret",
        sentinels: [
          { host: "10.0.0.1", port: 26379 },
          { host: "10.0.0.2", port: 26379 },
        ],
      },
    });
    expect(inspect("10.0.0.1:7000,redis://10.0.0.2:7001")).toEqual({
      kind: "cluster",
      nodes: [
        { host: "10.0.0.1", port: 7000 },
        { host: "10.0.0.2", port: 7001 },
      ],
    });
    expect(() => redisClientFromUrl("redis-sentinel://nohost")).toThrow(/mastername/);
  });
});
