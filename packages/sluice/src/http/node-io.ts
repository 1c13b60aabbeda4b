/**
 * Helpers shared by the adapters whose responses are node:http `ServerResponse`s (node,
 * Express, Koa, Fastify): reading headers, watching the end of a response, writing outcomes.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Decision } from "../decision.js";
import type { Finish, Outcome, RequestInput } from "./core.js";
import type { HeaderList } from "./headers.js";

/** Reads a request header case-insensitively; repeated headers are joined with `, `. */
export function nodeHeader(req: IncomingMessage): (name: string) => string | undefined {
  return (name) => {
    const v = req.headers[name.toLowerCase()];
    return Array.isArray(v) ? v.join(", ") : v;
  };
}

/** The path of a request URL, without the query string. */
function pathOf(url: string | undefined): string {
  if (!url) return "/";
  const q = url.indexOf("?");
  return q < 0 ? url : url.slice(0, q);
}

/** An `AbortSignal` that aborts when the client disconnects before the response is complete. */
export function disconnectSignal(res: ServerResponse): AbortSignal {
  const ac = new AbortController();
  const onClose = () => {
    if (!res.writableFinished) ac.abort();
  };
  if (res.destroyed || res.socket?.destroyed) ac.abort();
  else res.once("close", onClose);
  return ac.signal;
}

/** Calls `finish` once, with the status when the response was sent completely, `undefined` when the connection closed first. */
export function whenDone(res: ServerResponse, finish: Finish): void {
  if (res.writableFinished) {
    finish(res.statusCode);
    return;
  }
  res.once("finish", () => finish(res.statusCode));
  res.once("close", () => finish(res.writableFinished ? res.statusCode : undefined));
}

/** Sets every header of the list, unless the headers are already sent. */
function setNodeHeaders(res: ServerResponse, headers: HeaderList): void {
  if (res.headersSent) return;
  for (const [name, value] of headers) res.setHeader(name, value);
}

/** Writes a rejection (status, headers, body) and ends the response. */
function sendNodeReject(
  res: ServerResponse,
  status: number,
  headers: HeaderList,
  body: string,
): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  res.statusCode = status;
  setNodeHeaders(res, headers);
  res.setHeader("Content-Length", Buffer.byteLength(body));
  res.end(body);
}

/**
 * The request as the core takes it, read from node:http: method, path, headers and peer; the
 * disconnect signal only when the core may make the request wait (`waits`). `raw` is the
 * framework's request object (the options' functions get it), `url` the URL as the framework
 * sees it (Express: `originalUrl`, below a mount point too), `route` the route pattern when the
 * framework knows it.
 */
export function nodeRequestInput<Raw>(
  waits: boolean,
  req: IncomingMessage,
  res: ServerResponse,
  raw: Raw,
  url: string | undefined,
  route: string | undefined,
): RequestInput<Raw> {
  return {
    method: req.method ?? "GET",
    path: pathOf(url),
    route,
    header: nodeHeader(req),
    peer: req.socket.remoteAddress,
    raw,
    signal: waits ? disconnectSignal(res) : undefined,
  };
}

/** A `degrade` fallback of the node:http adapters (node, Express): `(req, res, decision)`. */
type NodeOutcomeFallback<Req, Res> = (req: Req, res: Res, decision: Decision) => unknown;

/**
 * Carries out the core's outcome on a node:http response: `true` when the request goes on to its
 * handler (skipped, or passed with its headers set), `false` when it was answered here (rejected,
 * a failed option function, the fallback, or the client gone). Only the fallback is waited for:
 * that answer alone is a promise, so a request that passes or is rejected pays for none. `expose`
 * hears the decision of a pass or a fallback before either goes on (Express:
 * `res.locals.rateLimit`).
 */
export function settleNodeOutcome<Req, Res extends ServerResponse>(
  outcome: Outcome<NodeOutcomeFallback<Req, Res>>,
  req: Req,
  res: Res,
  expose?: (res: Res, decision: Decision) => void,
): boolean | Promise<boolean> {
  switch (outcome.kind) {
    case "skip":
      return true;
    case "pass":
      setNodeHeaders(res, outcome.headers);
      expose?.(res, outcome.decision);
      whenDone(res, outcome.finish);
      return true;
    case "reject":
    case "error":
      sendNodeReject(res, outcome.status, outcome.headers, outcome.body);
      return false;
    case "degrade":
      return serveFallback(outcome.fallback, req, res, outcome.headers, outcome.decision, expose);
    case "aborted":
      res.destroy();
      return false;
  }
}

/** The `degrade` branch of {@link settleNodeOutcome}: headers, `expose`, then the fallback, waited for. */
async function serveFallback<Req, Res extends ServerResponse>(
  fallback: NodeOutcomeFallback<Req, Res>,
  req: Req,
  res: Res,
  headers: HeaderList,
  decision: Decision,
  expose: ((res: Res, decision: Decision) => void) | undefined,
): Promise<false> {
  setNodeHeaders(res, headers);
  expose?.(res, decision);
  await fallback(req, res, decision);
  return false;
}
