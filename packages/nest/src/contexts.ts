/**
 * The guard's context adapters: for each kind of Nest context (HTTP on Express or Fastify,
 * GraphQL, WebSocket gateways, microservices), whom a request counts for by default, how
 * headers reach its answer, and the error a denial becomes. Everything else is one path
 * (guard.ts). None reads a property of a kind it was not given: a GraphQL request never meets
 * `res.header` (nestjs/throttler #1437), a microservice never meets an HTTP request.
 */
import { HttpException, HttpStatus, type ExecutionContext } from "@nestjs/common";
import type { Decision } from "sluice";
import {
  type HeaderList,
  PROBLEM_CONTENT_TYPE,
  ceilSeconds,
  ipIdentity,
  parseIp,
  quotaExceededProblem,
  retryAfterSeconds,
  storeUnavailableProblem,
  violatedPolicies,
} from "sluice/http";
import { graphqlError, rpcException, wsException } from "./optional.js";
import type { ContextKind } from "./types.js";

/** The kind of `context`, or undefined for a kind the guard does not know (it lets it pass). */
export function kindOf(context: ExecutionContext): ContextKind | undefined {
  const type: string = context.getType();
  return type === "http" || type === "graphql" || type === "ws" || type === "rpc"
    ? type
    : undefined;
}

/** An object's property, when `value` is an object. */
function field(value: unknown, name: string): unknown {
  return typeof value === "object" && value !== null
    ? (value as Record<string, unknown>)[name]
    : undefined;
}

/** `ip:<address>` (an IPv6 address by its /64, as sluice's middleware counts), or `ip:unknown`. */
function ipKey(address: unknown): string {
  const parsed = typeof address === "string" ? parseIp(address) : undefined;
  return `ip:${parsed ? ipIdentity(parsed) : "unknown"}`;
}

/** An HTTP request's client address: Express's and Fastify's `ip` (their trust proxy applied). */
function requestIp(req: unknown): unknown {
  return field(req, "ip") ?? field(field(req, "socket"), "remoteAddress");
}

/**
 * Connections by object, each named once: `conn:<process>:<n>` (the process part keeps two
 * instances' connections apart in a shared store). Forgotten with the connection.
 */
const connections = new WeakMap<object, string>();
const processTag = globalThis.crypto.randomUUID().slice(0, 8);
let connectionCount = 0;

function connectionKey(socket: object): string {
  // socket.io names its sockets; a `ws` socket is named here.
  const id = field(socket, "id");
  if (typeof id === "string" && id !== "") return `conn:${id}`;
  let name = connections.get(socket);
  if (name === undefined) {
    name = `conn:${processTag}:${++connectionCount}`;
    connections.set(socket, name);
  }
  return name;
}

/**
 * The GraphQL context object of a resolver call (`context` of `(root, args, context, info)`):
 * for HTTP the app's context (`{ req }`), for a graphql-ws subscription graphql-ws's own context
 * (`{ connectionParams, extra: { socket, request } }`) when the app's `context` hands it on.
 */
export function graphqlContext(context: ExecutionContext): unknown {
  return context.getArgByIndex(2);
}

/** The subscription's socket (graphql-ws over `ws`), when the context carries it. */
function subscriptionSocket(gql: unknown): object | undefined {
  const socket = field(field(gql, "extra"), "socket") ?? field(field(gql, "extra"), "connection");
  return typeof socket === "object" && socket !== null ? socket : undefined;
}

/**
 * A microservice request's caller, from `name`: gRPC metadata (`get(name)`), the transport's
 * headers (NATS, RabbitMQ, Kafka), then the payload; else a TCP caller's address.
 */
function rpcIdentity(context: ExecutionContext, name: string): string {
  const rpc = context.switchToRpc();
  const data: unknown = rpc.getData();
  const ctx: unknown = rpc.getContext();
  const get = field(ctx, "get");
  let found: unknown;
  if (typeof get === "function") {
    const values: unknown = (get as (key: string) => unknown).call(ctx, name);
    found = Array.isArray(values) ? values[0] : values;
  }
  const headersOf = field(ctx, "getHeaders");
  if (found === undefined && typeof headersOf === "function") {
    const headers: unknown = (headersOf as () => unknown).call(ctx);
    const headerGet = field(headers, "get");
    found =
      typeof headerGet === "function"
        ? (headerGet as (key: string) => unknown).call(headers, name)
        : field(headers, name);
  }
  if (found === undefined || found === null || found === "") found = field(data, name);
  if (typeof found === "string" && found !== "") return `id:${found}`;
  if (typeof found === "number" || typeof found === "bigint") return `id:${String(found)}`;
  const socketRef = field(ctx, "getSocketRef");
  if (typeof socketRef === "function") {
    const ref: unknown = (socketRef as () => unknown).call(ctx);
    return ipKey(field(field(ref, "socket"), "remoteAddress"));
  }
  return "id:unknown";
}

/** A microservice request's pattern as text (an object pattern as its JSON). */
function rpcPattern(context: ExecutionContext): string {
  const ctx: unknown = context.switchToRpc().getContext();
  const getPattern = field(ctx, "getPattern");
  const pattern: unknown =
    typeof getPattern === "function" ? (getPattern as () => unknown).call(ctx) : undefined;
  if (typeof pattern === "string") return pattern;
  if (pattern !== undefined) return JSON.stringify(pattern);
  return `${context.getClass().name}.${context.getHandler().name}`;
}

/** Whom a request counts for when nothing else says: see `KeyFunction`. */
export function defaultIdentity(
  kind: ContextKind,
  context: ExecutionContext,
  rpcField: string,
): string {
  switch (kind) {
    case "http":
      return ipKey(requestIp(context.switchToHttp().getRequest()));
    case "graphql": {
      const gql = graphqlContext(context);
      const socket = subscriptionSocket(gql);
      if (socket !== undefined) return connectionKey(socket);
      return ipKey(requestIp(field(gql, "req") ?? field(gql, "request")));
    }
    case "ws": {
      const client: unknown = context.switchToWs().getClient();
      return typeof client === "object" && client !== null ? connectionKey(client) : "conn:unknown";
    }
    case "rpc":
      return `rpc:${rpcPattern(context)}:${rpcIdentity(context, rpcField)}`;
  }
}

/** Sets headers on an HTTP answer: Express's response (`setHeader`) or Fastify's reply (`header`). */
export function setHeaders(context: ExecutionContext, headers: HeaderList): void {
  if (headers.length === 0) return;
  const res: unknown = context.switchToHttp().getResponse();
  const setHeader = field(res, "setHeader");
  const header = field(res, "header");
  // Express's response is Node's ServerResponse; Fastify's reply has `header` (and `raw`).
  const set =
    typeof header === "function" && field(res, "raw") !== undefined
      ? (header as (n: string, v: string) => void)
      : typeof setHeader === "function"
        ? (setHeader as (n: string, v: string) => void)
        : undefined;
  if (set === undefined) return;
  for (const [name, value] of headers) set.call(res, name, value);
}

/** The numbers every non-HTTP denial carries: the reported (longest-waiting) denial's. */
export interface DenialNumbers {
  /** The denying rule's limit. */
  readonly limit: number;
  /** Units left under it (0 when denied by its count). */
  readonly remaining: number;
  /** Seconds until the key is whole again. */
  readonly reset: number;
  /** Seconds until a retry can pass. */
  readonly retryAfter: number;
  /** The denying policies, as in `RateLimit-Policy`. */
  readonly policies: readonly string[];
}

/** The numbers of a denial (`decisions`: the denials, the longest wait first). */
export function denialNumbers(decisions: readonly Decision[]): DenialNumbers {
  const d = decisions[0]!;
  return {
    limit: d.limit,
    remaining: Math.max(0, Math.floor(d.remaining)),
    reset: ceilSeconds(d.resetAfterMs),
    retryAfter: retryAfterSeconds(d),
    policies: decisions.flatMap((x) => violatedPolicies(x)),
  };
}

/**
 * The 429 (or 503) of an HTTP denial: an `HttpException` whose response is the problem
 * details body (RFC 9457, the IETF draft's `quota-exceeded`). Nest's exception filter sends it;
 * the guard has set `Content-Type: application/problem+json`, `Retry-After` and the rate-limit
 * headers on the response.
 */
export class RateLimitedException extends HttpException {
  /** The denials, the longest wait first. */
  readonly decisions: readonly Decision[];

  constructor(decisions: readonly Decision[]) {
    const d = decisions[0]!;
    const unavailable = d.reason === "store-error";
    if (unavailable) {
      super(storeUnavailableProblem(d), HttpStatus.SERVICE_UNAVAILABLE);
    } else {
      const problem = quotaExceededProblem(d);
      const violated = decisions.flatMap((x) => violatedPolicies(x));
      super(
        {
          ...problem,
          detail: `Rate limit exceeded (${violated.join(", ")}); retry in ${problem.retryAfter} s.`,
          "violated-policies": violated,
        },
        HttpStatus.TOO_MANY_REQUESTS,
      );
    }
    this.decisions = decisions;
  }
}

/**
 * The error a denial becomes in `kind`'s context: HTTP's {@link RateLimitedException}; for
 * GraphQL a `GraphQLError` with `extensions: { code, retryAfter, limit, remaining, reset,
 * policies }`; for WebSockets a `WsException` and for microservices an `RpcException`, each
 * carrying `{ status: "error", code, message, limit, remaining, reset, retryAfter, policies }`.
 */
export function denialError(
  kind: ContextKind,
  decisions: readonly Decision[],
  graphqlCode: string,
): Error {
  if (kind === "http") return new RateLimitedException(decisions);
  const numbers = denialNumbers(decisions);
  const unavailable = decisions[0]!.reason === "store-error";
  const message = unavailable
    ? "Rate limit cannot be checked: its store is unavailable"
    : `Rate limit exceeded (${numbers.policies.join(", ")}); retry in ${numbers.retryAfter} s.`;
  const code = unavailable ? "RATE_LIMIT_UNAVAILABLE" : graphqlCode;
  if (kind === "graphql") return graphqlError(message, { code, ...numbers });
  const error = { status: "error", code, message, ...numbers };
  return kind === "ws" ? wsException(error) : rpcException(error);
}

/** The content type the guard sets before a 429 leaves (Nest's JSON reply keeps it). */
export const DENIAL_CONTENT_TYPE = PROBLEM_CONTENT_TYPE;
