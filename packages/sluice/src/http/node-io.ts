/**
 * Helpers shared by the adapters whose responses are node:http `ServerResponse`s (node,
 * Express, Koa, Fastify): reading headers, watching the end of a response, writing outcomes.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Finish } from "./core.js";
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
