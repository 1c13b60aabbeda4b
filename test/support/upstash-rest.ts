/**
 * A test fixture: a local HTTP server speaking Upstash's Redis REST protocol in front of a real
 * redis-server, so that clients built for Upstash (`@upstash/redis`, `@upstash/ratelimit`, a
 * runtime's `fetch`) run against a redis-server a test starts. Not a product: it serves
 * 127.0.0.1 only, for tests.
 *
 * The protocol, as Upstash documents it (https://upstash.com/docs/redis/features/restapi) and
 * `@upstash/redis` speaks it:
 *
 * - `POST /` with a JSON array body, `["SET", "k", "v"]`: one command; the answer is
 *   `{"result": …}` (200), or `{"error": "ERR …"}` (400) when Redis answers an error.
 * - `POST /pipeline` with an array of such arrays: the commands in order, not atomic; the answer
 *   is an array with one `{"result": …}` or `{"error": …}` per command (200).
 * - `POST /multi-exec`: the same, run as one MULTI/EXEC transaction; a transaction Redis aborts
 *   (EXECABORT) is one `{"error": …}` (400).
 * - Authentication: `Authorization: Bearer <token>` (or `?_token=<token>`); a missing or wrong
 *   token is 401 `{"error": "Unauthorized"}`.
 * - `Upstash-Encoding: base64` (which `@upstash/redis` sends by default): every string in a
 *   result, at any depth, is base64 of its bytes, except the status reply `OK`; integers are
 *   JSON numbers and nil is `null`. Without the header strings are UTF-8 text.
 * - Anything else (another path or method, a body that is not a command) is a 4xx `{"error"}`.
 *
 * - Upstash's own script flag `allow-key-locking` (on a `#!lua flags=` first line, which
 *   @upstash/ratelimit's scripts carry) is accepted: it is taken out of the script before
 *   redis-server (which refuses unknown flags) sees it, and the script stays known by the SHA1
 *   of the text the client sent (EVALSHA, SCRIPT LOAD's answer, SCRIPT EXISTS).
 *
 * Any other Redis command is forwarded as it is (through ioredis `callBuffer`, so binary values
 * keep their bytes); blocking commands would hold the fixture's one connection, so do not send
 * them.
 * `upstash-rest.test.ts` beside it drives it with `@upstash/redis`'s real client, so the fixture
 * cannot drift from the protocol.
 */
import { createHash } from "node:crypto";
import { type IncomingMessage, type ServerResponse, createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Redis } from "ioredis";

/** A running fixture. */
export interface UpstashRest {
  /** Base URL, e.g. `http://127.0.0.1:41234` (what `new Redis({ url })` of @upstash/redis takes). */
  readonly url: string;
  /** The token clients must send. */
  readonly token: string;
  /** Requests served so far, by path (`/`, `/pipeline`, `/multi-exec`, anything else as sent). */
  readonly requests: ReadonlyMap<string, number>;
  /** Stops the HTTP server and closes the Redis connection (not the redis-server). */
  stop(): Promise<void>;
}

/** Options of {@link startUpstashRest}. */
export interface UpstashRestOptions {
  /** The redis-server to forward to, e.g. `redis://127.0.0.1:6379`. */
  redisUrl: string;
  /** The token clients must send. Default `"test-token"`. */
  token?: string;
}

/** One reply of ioredis `callBuffer`, as it comes. */
type RawReply = Buffer | string | number | null | RawReply[];

/** A result as JSON carries it. */
type JsonResult = string | number | null | JsonResult[];

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** Starts the fixture on a free 127.0.0.1 port. */
export async function startUpstashRest(options: UpstashRestOptions): Promise<UpstashRest> {
  const token = options.token ?? "test-token";
  // RESP2, as Upstash's REST answers (ioredis 6 speaks RESP3 by default: pairs for scores).
  const redis = new Redis(options.redisUrl, { maxRetriesPerRequest: 1, protocol: 2 });
  const requests = new Map<string, number>();
  /** SHA1 of a script as the client sent it → SHA1 of the script redis-server runs. */
  const shas = new Map<string, string>();

  /** A command as redis-server takes it, and how to put its reply as the client expects it. */
  function forward(command: string[]): { args: string[]; reply: (r: unknown) => unknown } {
    const same = { args: command, reply: (r: unknown) => r };
    const name = command[0]!;
    const sub = command[1]?.toUpperCase();
    if ((name === "EVAL" || name === "EVAL_RO") && command[1] !== undefined) {
      const script = runnable(command[1], shas);
      return { args: [name, script, ...command.slice(2)], reply: same.reply };
    }
    if (name === "SCRIPT" && sub === "LOAD" && command[2] !== undefined) {
      const script = runnable(command[2], shas);
      return { args: ["SCRIPT", "LOAD", script], reply: () => sha1(command[2]!) };
    }
    if ((name === "EVALSHA" || name === "EVALSHA_RO") && command[1] !== undefined)
      return {
        args: [name, shas.get(command[1].toLowerCase()) ?? command[1], ...command.slice(2)],
        reply: same.reply,
      };
    if (name === "SCRIPT" && sub === "EXISTS")
      return {
        args: ["SCRIPT", "EXISTS", ...command.slice(2).map((h) => shas.get(h.toLowerCase()) ?? h)],
        reply: same.reply,
      };
    return same;
  }

  const server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0]!;
    requests.set(path, (requests.get(path) ?? 0) + 1);
    handle(req, path).then(
      ({ status, body }) => send(res, status, body),
      (err: unknown) => {
        if (err instanceof HttpError) send(res, err.status, { error: err.message });
        else send(res, 500, { error: err instanceof Error ? err.message : String(err) });
      },
    );
  });

  async function handle(
    req: IncomingMessage,
    path: string,
  ): Promise<{ status: number; body: unknown }> {
    if (!authorized(req, token)) throw new HttpError(401, "Unauthorized");
    if (req.method !== "POST")
      throw new HttpError(405, `${req.method ?? "?"} is not supported: POST a JSON array`);
    const base64 = String(req.headers["upstash-encoding"] ?? "").toLowerCase() === "base64";
    const body = await readJson(req);
    const encode = (reply: unknown): JsonResult => encodeReply(reply as RawReply, base64);
    if (path === "/") {
      const command = forward(toCommand(body, "the body"));
      try {
        const reply = await redis.callBuffer(command.args[0]!, ...command.args.slice(1));
        return { status: 200, body: { result: encode(command.reply(reply)) } };
      } catch (err) {
        throw new HttpError(400, redisMessage(err));
      }
    }
    if (path === "/pipeline" || path === "/multi-exec") {
      if (!Array.isArray(body) || body.length === 0)
        throw new HttpError(400, "ERR the body must be a non-empty array of commands");
      const commands = body.map((c, i) => forward(toCommand(c, `command ${i + 1}`)));
      const batch = path === "/pipeline" ? redis.pipeline() : redis.multi();
      for (const c of commands) void batch.callBuffer(c.args[0]!, ...c.args.slice(1));
      let replies: Array<[Error | null, unknown]> | null;
      try {
        replies = await batch.exec();
      } catch (err) {
        throw new HttpError(400, redisMessage(err));
      }
      if (replies === null) throw new HttpError(400, "ERR the transaction was aborted");
      return {
        status: 200,
        body: replies.map(([err, reply], i) =>
          err ? { error: redisMessage(err) } : { result: encode(commands[i]!.reply(reply)) },
        ),
      };
    }
    throw new HttpError(404, `ERR unknown path ${path}: use /, /pipeline or /multi-exec`);
  }

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    token,
    requests,
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      redis.disconnect();
    },
  };
}

function sha1(text: string): string {
  return createHash("sha1").update(text).digest("hex");
}

/**
 * The script redis-server can run: without Upstash's `allow-key-locking` flag (a first line
 * `#!lua flags=…`; the line stays, so line numbers in errors do too). Remembers the SHA1s.
 */
function runnable(script: string, shas: Map<string, string>): string {
  const m = /^#!lua[ \t]+flags=([^\n]*)/.exec(script);
  if (m === null) return script;
  const flags = m[1]!.split(",").map((f) => f.trim());
  if (!flags.includes("allow-key-locking")) return script;
  const kept = flags.filter((f) => f !== "allow-key-locking" && f !== "");
  const out =
    (kept.length > 0 ? `#!lua flags=${kept.join(",")}` : "#!lua") + script.slice(m[0].length);
  shas.set(sha1(script), sha1(out));
  return out;
}

function authorized(req: IncomingMessage, token: string): boolean {
  const header = req.headers.authorization;
  if (typeof header === "string" && header === `Bearer ${token}`) return true;
  const query = new URL(req.url ?? "/", "http://fixture").searchParams.get("_token");
  return query === token;
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  try {
    return JSON.parse(Buffer.concat(chunks).toString("utf8")) as unknown;
  } catch {
    throw new HttpError(400, "ERR failed to parse the body: it must be JSON");
  }
}

/**
 * A JSON command (`["SET", "k", 1]`) as Redis arguments: strings and numbers, as text. The
 * command name is upper-cased: ioredis transforms some commands' arguments and replies by their
 * lower-case name (HGETALL into an object, HSET from one), and the fixture forwards as sent.
 */
function toCommand(value: unknown, what: string): string[] {
  if (!Array.isArray(value) || value.length === 0)
    throw new HttpError(400, `ERR ${what} must be a non-empty JSON array, e.g. ["GET","key"]`);
  return value.map((arg: unknown, i) => {
    if (typeof arg === "string") return i === 0 ? arg.toUpperCase() : arg;
    if (typeof arg === "number" || typeof arg === "boolean") return String(arg);
    throw new HttpError(400, `ERR ${what}: argument ${i + 1} must be a string or a number`);
  });
}

/** A reply as Upstash sends it: strings base64 (but `OK`) when asked, at any depth. */
function encodeReply(reply: RawReply, base64: boolean): JsonResult {
  if (reply === null || typeof reply === "number") return reply;
  if (Array.isArray(reply)) return reply.map((r) => encodeReply(r, base64));
  const bytes = typeof reply === "string" ? Buffer.from(reply, "utf8") : reply;
  if (!base64) return bytes.toString("utf8");
  return bytes.length === 2 && bytes.toString("latin1") === "OK" ? "OK" : bytes.toString("base64");
}

function redisMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
  });
  res.end(text);
}
