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
export function pathOf(url: string | undefined): string {
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
export function setNodeHeaders(res: ServerResponse, headers: HeaderList): void {
  if (res.headersSent) return;
  for (const [name, value] of headers) res.setHeader(name, value);
}

/** Writes a rejection (status, headers, body) and ends the response. */
export function sendNodeReject(
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

/** Where a request stands, for {@link nodeRequestInput}: what the framework knows of it. */
export interface NodeRequestParts<Raw> {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  /** The framework's request object (the options' functions get it). */
  readonly raw: Raw;
  /** The URL as the framework sees it (Express: `originalUrl`, below a mount point too). */
  readonly url: string | undefined;
  /** The route pattern, when the framework knows it. */
  readonly route: string | undefined;
}

/**
 * The request as the core takes it, read from node:http: method, path, headers and peer; the
 * disconnect signal only when the core may make the request wait (`waits`).
 */
export function nodeRequestInput<Raw>(
  waits: boolean,
  { req, res, raw, url, route }: NodeRequestParts<Raw>,
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

/**
 * Carries out the core's outcome on a node:http response: `true` when the request goes on to its
 * handler (skipped, or passed with its headers set), `false` when it was answered here (rejected,
 * a failed option function, the fallback, or the client gone). `expose` hears the decision of a
 * pass or a fallback before either goes on (Express: `res.locals.rateLimit`).
 */
export async function settleNodeOutcome<Fallback>(
  outcome: Outcome<Fallback>,
  res: ServerResponse,
  serveFallback: (fallback: Fallback, decision: Decision) => unknown,
  expose: (decision: Decision) => void = () => undefined,
): Promise<boolean> {
  switch (outcome.kind) {
    case "skip":
      return true;
    case "pass":
      setNodeHeaders(res, outcome.headers);
      expose(outcome.decision);
      whenDone(res, outcome.finish);
      return true;
    case "reject":
    case "error":
      sendNodeReject(res, outcome.status, outcome.headers, outcome.body);
      return false;
    case "degrade":
      setNodeHeaders(res, outcome.headers);
      expose(outcome.decision);
      await serveFallback(outcome.fallback, outcome.decision);
      return false;
    case "aborted":
      res.destroy();
      return false;
  }
}
