/**
 * The optional peers — `graphql`, `@nestjs/websockets`, `@nestjs/microservices` — loaded when a
 * request of their kind first comes, so an HTTP-only app installs none of them. They are
 * required from the app's node_modules (the one copy the app's Nest uses: `instanceof` holds).
 * Nest 12's packages are ES modules only, which `require` loads from Node 20.19 on: the module
 * imports the two Nest ones at start ({@link preloadNestPeers}), so they are found on any Node 20.
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

/** The optional Nest packages, imported at start where the app has them. */
const NEST_PEERS = ["@nestjs/websockets", "@nestjs/microservices"];

/**
 * Imports the optional Nest packages the app has (`import()`: Nest 12's are ES modules only;
 * Nest 10 and 11's are CommonJS, and `import()` of those gives the module `require` gives). One
 * missing is left for the request that needs it to name.
 */
export async function preloadNestPeers(): Promise<void> {
  await Promise.all(
    NEST_PEERS.map(async (name) => {
      if (cache.has(name)) return;
      try {
        cache.set(name, (await import(name)) as unknown);
      } catch {
        // Not installed (an app without gateways or microservices): said when a request needs it.
      }
    }),
  );
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
