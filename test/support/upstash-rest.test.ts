/**
 * The Upstash REST fixture, driven by `@upstash/redis`'s real client (and by plain fetch where
 * the client hides the wire), so that it cannot drift from the protocol the client speaks.
 */
import { createHash } from "node:crypto";
import { Redis as UpstashRedis } from "@upstash/redis";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RedisServer, startRedis } from "./redis.js";
import { type UpstashRest, startUpstashRest } from "./upstash-rest.js";

let server: RedisServer;
let rest: UpstashRest;
let direct: Redis;

beforeAll(async () => {
  server = await startRedis();
  rest = await startUpstashRest({ redisUrl: server.url });
  direct = new Redis(server.url);
});

afterAll(async () => {
  direct?.disconnect();
  await rest?.stop();
  await server?.stop();
});

/** The real client as applications make it (base64 responses, the default). */
function client(options: { responseEncoding?: false } = {}): UpstashRedis {
  return new UpstashRedis({ url: rest.url, token: rest.token, retry: false, ...options });
}

async function post(path: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(rest.url + path, {
    method: "POST",
    headers: { authorization: `Bearer ${rest.token}`, ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as unknown };
}

describe("the Upstash REST fixture, through @upstash/redis", () => {
  it("runs single commands on the real redis-server (strings, numbers, JSON, nil, unicode)", async () => {
    const r = client();
    expect(await r.set("fx:a", "hello")).toBe("OK");
    expect(await r.get("fx:a")).toBe("hello");
    expect(await direct.get("fx:a")).toBe("hello");
    expect(await r.incrby("fx:n", 5)).toBe(5);
    expect(await r.get("fx:missing")).toBeNull();
    await r.set("fx:obj", { a: 1, b: ["x"] });
    expect(await r.get("fx:obj")).toEqual({ a: 1, b: ["x"] });
    await r.set("fx:u", "žluťoučký 🐎");
    expect(await r.get("fx:u")).toBe("žluťoučký 🐎");
    expect(await r.ping()).toBe("PONG");
  });

  it("answers arrays, hashes, sorted sets with scores and TTLs", async () => {
    const r = client();
    await r.hset("fx:h", { f1: "v1", f2: 2 });
    expect(await r.hgetall("fx:h")).toEqual({ f1: "v1", f2: 2 });
    await r.zadd("fx:z", { score: 1, member: "one" }, { score: 2.5, member: "two" });
    expect(await r.zrange("fx:z", 0, -1, { withScores: true })).toEqual(["one", 1, "two", 2.5]);
    await r.set("fx:ttl", "x", { px: 60_000 });
    const ttl = await r.pttl("fx:ttl");
    expect(ttl).toBeGreaterThan(59_000);
    expect(ttl).toBeLessThanOrEqual(60_000);
  });

  it("runs scripts: EVALSHA of an unknown script is Redis's NOSCRIPT error, EVAL loads it", async () => {
    const r = client();
    const script = "return {KEYS[1], tonumber(ARGV[1]) + 1, 'x'}";
    const sha = await r.scriptLoad(script);
    expect(await r.evalsha(sha, ["k"], [41])).toEqual(["k", 42, "x"]);
    await direct.script("FLUSH");
    await expect(r.evalsha(sha, ["k"], [1])).rejects.toThrow(/NOSCRIPT/);
    expect(await r.eval(script, ["k"], [1])).toEqual(["k", 2, "x"]);
  });

  it("accepts Upstash's script flag allow-key-locking, keeping the script's own SHA1", async () => {
    const r = client();
    const script = "#!lua flags=allow-key-locking\nreturn redis.call('INCRBY', KEYS[1], ARGV[1])";
    const sha = createHash("sha1").update(script).digest("hex");
    await direct.script("FLUSH");
    await expect(r.evalsha(sha, ["fx:lk"], [2])).rejects.toThrow(/NOSCRIPT/);
    expect(await r.eval(script, ["fx:lk"], [2])).toBe(2);
    expect(await r.evalsha(sha, ["fx:lk"], [3])).toBe(5);
    expect(await r.scriptExists(sha)).toEqual([1]);
    await direct.script("FLUSH");
    expect(await r.scriptLoad(script)).toBe(sha);
    expect(await r.evalsha(sha, ["fx:lk"], [1])).toBe(6);
    // Other flags stay: a no-writes script may not write.
    const ro = "#!lua flags=allow-key-locking,no-writes\nreturn redis.call('SET', KEYS[1], 1)";
    await expect(r.eval(ro, ["fx:ro"], [])).rejects.toThrow(/Write commands are not allowed/);
  });

  it("pipelines: one request, every command's own result or error", async () => {
    const r = client();
    await direct.set("fx:str", "text");
    const before = rest.requests.get("/pipeline") ?? 0;
    const p = r.pipeline();
    p.set("fx:p1", "1");
    p.incr("fx:p1");
    p.incr("fx:str");
    p.get("fx:p1");
    await expect(p.exec()).rejects.toThrow(
      /Command 3 \[ incr \] failed: ERR value is not an integer/,
    );
    expect(rest.requests.get("/pipeline")).toBe(before + 1);
    const q = r.pipeline();
    q.incr("fx:p1");
    q.incr("fx:str");
    const kept = await q.exec({ keepErrors: true });
    expect(kept[0]).toEqual({ error: undefined, result: 3 });
    expect(kept[1]!.error).toMatch(/not an integer/);
  });

  it("runs multi-exec as one transaction", async () => {
    const r = client();
    const tx = r.multi();
    tx.set("fx:t", "5");
    tx.incrby("fx:t", 2);
    tx.get("fx:t");
    expect(await tx.exec()).toEqual(["OK", 7, 7]);
    expect(rest.requests.get("/multi-exec")).toBeGreaterThanOrEqual(1);
  });

  it("answers without base64 when the client asks for plain strings", async () => {
    const r = client({ responseEncoding: false });
    await r.set("fx:plain", "žluť");
    expect(await r.get("fx:plain")).toBe("žluť");
    expect(await r.mget("fx:plain", "fx:none")).toEqual(["žluť", null]);
  });

  it("refuses a wrong token; the client reports Upstash's error", async () => {
    const r = new UpstashRedis({ url: rest.url, token: "wrong", retry: false });
    await expect(r.get("fx:a")).rejects.toThrow(/Unauthorized/);
  });

  it("reports Redis errors as the client expects them (UpstashError with Redis's message)", async () => {
    await expect(client().incr("fx:a")).rejects.toThrow(/ERR value is not an integer/);
  });
});

describe("the Upstash REST fixture, on the wire", () => {
  it("encodes every string but OK in base64 when asked, and leaves numbers and nil alone", async () => {
    await direct.del("fx:l");
    await direct.rpush("fx:l", "a", "bé");
    expect(await post("/", ["SET", "fx:w", "v"], { "upstash-encoding": "base64" })).toEqual({
      status: 200,
      body: { result: "OK" },
    });
    expect(await post("/", ["LRANGE", "fx:l", 0, -1], { "upstash-encoding": "base64" })).toEqual({
      status: 200,
      body: { result: [Buffer.from("a").toString("base64"), Buffer.from("bé").toString("base64")] },
    });
    expect(await post("/", ["LRANGE", "fx:l", 0, -1])).toEqual({
      status: 200,
      body: { result: ["a", "bé"] },
    });
    expect(await post("/", ["GET", "fx:none"])).toEqual({ status: 200, body: { result: null } });
    expect(await post("/", ["LLEN", "fx:l"])).toEqual({ status: 200, body: { result: 2 } });
  });

  it("answers errors in Upstash's shape: {error} with 400, 401, 404 or 405", async () => {
    expect(await post("/", ["INCR", "fx:l"])).toEqual({
      status: 400,
      body: { error: expect.stringMatching(/WRONGTYPE/) },
    });
    expect(await post("/", "not json")).toEqual({
      status: 400,
      body: { error: expect.stringMatching(/JSON/) },
    });
    expect(await post("/", [])).toEqual({
      status: 400,
      body: { error: expect.stringMatching(/non-empty JSON array/) },
    });
    expect(await post("/", ["GET", { k: 1 }])).toEqual({
      status: 400,
      body: { error: expect.stringMatching(/argument 2/) },
    });
    expect(await post("/nope", ["GET", "k"])).toEqual({
      status: 404,
      body: { error: expect.stringMatching(/unknown path/) },
    });
    expect(await post("/", ["GET", "k"], { authorization: "Bearer nope" })).toEqual({
      status: 401,
      body: { error: "Unauthorized" },
    });
    const get = await fetch(`${rest.url}/?_token=${rest.token}`);
    expect(get.status).toBe(405);
    expect(await get.json()).toEqual({ error: expect.stringMatching(/POST/) });
  });

  it("takes the token as ?_token= too", async () => {
    const res = await fetch(`${rest.url}/?_token=${rest.token}`, {
      method: "POST",
      body: JSON.stringify(["PING"]),
    });
    expect(await res.json()).toEqual({ result: "PONG" });
  });

  it("aborts a multi-exec Redis refuses (EXECABORT) with one error", async () => {
    expect(await post("/multi-exec", [["SET", "fx:m", "1"], ["NOSUCHCOMMAND"]])).toEqual({
      status: 400,
      body: { error: expect.stringMatching(/EXECABORT|unknown command/) },
    });
    expect(await direct.exists("fx:m")).toBe(0);
    expect(await post("/pipeline", [])).toEqual({
      status: 400,
      body: { error: expect.stringMatching(/non-empty array/) },
    });
  });
});
