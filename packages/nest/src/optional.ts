/**
 * The optional peers — `graphql`, `@nestjs/websockets`, `@nestjs/microservices` — loaded when a
 * request of their kind first comes, so an HTTP-only app installs none of them. They are
 * required from the app's node_modules (the one copy the app's Nest uses: `instanceof` holds).
 */
import { createRequire } from "node:module";

const load = createRequire(import.meta.url);
const cache = new Map<string, unknown>();

/** The module `name`, or an error saying which package the kind of request needs. */
export function optional<T>(name: string, needed: string): T {
  let m = cache.get(name);
  if (m === undefined) {
    try {
      m = load(name) as unknown;
    } catch (err) {
      throw new Error(`@sluice/nest: ${needed} needs the package "${name}" (npm install ${name})`, {
        cause: err,
      });
    }
    cache.set(name, m);
  }
  return m as T;
}

/** `graphql`'s GraphQLError, as far as it is used here. */
export interface GraphQLErrorClass {
  new (
    message: string,
    options: { extensions: Record<string, unknown> },
  ): Error & { readonly extensions: Record<string, unknown> };
}

/** An error class of @nestjs/websockets or @nestjs/microservices (`WsException`, `RpcException`). */
export interface NestErrorClass {
  new (error: string | object): Error & { getError(): string | object };
}

/** `new GraphQLError(message, { extensions })`. */
export function graphqlError(message: string, extensions: Record<string, unknown>): Error {
  const { GraphQLError } = optional<{ GraphQLError: GraphQLErrorClass }>(
    "graphql",
    "a GraphQL rate limit",
  );
  return new GraphQLError(message, { extensions });
}

/** `new WsException(error)`. */
export function wsException(error: object): Error {
  const { WsException } = optional<{ WsException: NestErrorClass }>(
    "@nestjs/websockets",
    "a WebSocket rate limit",
  );
  return new WsException(error);
}

/** `new RpcException(error)`. */
export function rpcException(error: object): Error {
  const { RpcException } = optional<{ RpcException: NestErrorClass }>(
    "@nestjs/microservices",
    "a microservice rate limit",
  );
  return new RpcException(error);
}
