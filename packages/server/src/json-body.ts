/**
 * Request bodies: JSON parsed with errors that say what is wrong — bad JSON with the parser's
 * own words, and a `__proto__` (or `constructor.prototype`) key refused by its path rather than
 * called "not valid JSON". Only JSON (and YAML for the policy import) is accepted; anything
 * else, `text/plain` included, is answered 415 by the caller.
 */
import type { FastifyInstance } from "fastify";
import { ApiError, invalid } from "./errors.js";

/** Keys refused anywhere in a body: merged into an object, they would change its prototype. */
const FORBIDDEN = "__proto__";

/** The path of the first key that could poison a prototype, or undefined. */
export function prototypeKeyPath(value: unknown, path: string[] = []): string | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) {
      const found = prototypeKeyPath(item, [...path, String(i)]);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  for (const [key, child] of Object.entries(value)) {
    if (key === FORBIDDEN) return [...path, key].join(".");
    if (
      key === "constructor" &&
      typeof child === "object" &&
      child !== null &&
      Object.hasOwn(child, "prototype")
    )
      return [...path, key, "prototype"].join(".");
    const found = prototypeKeyPath(child, [...path, key]);
    if (found !== undefined) return found;
  }
  return undefined;
}

/**
 * Parses a JSON body, or throws a 400 that says exactly what is wrong with it. An empty body is
 * no body (undefined): a route whose body is optional takes it as such (`curl -X POST` with the
 * JSON content type and no data), and one that needs a body says "a JSON body is required".
 */
export function parseJsonBody(text: string): unknown {
  if (text.trim() === "") return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw invalid("Invalid body", [
      { path: "", message: `is not valid JSON: ${(err as Error).message}` },
    ]);
  }
  const bad = prototypeKeyPath(value);
  if (bad !== undefined) {
    throw invalid("Invalid body", [
      {
        path: bad,
        message: `a key named "${bad.endsWith("prototype") ? "constructor.prototype" : FORBIDDEN}" is refused (it could change the prototype of objects)`,
      },
    ]);
  }
  return value;
}

/**
 * Replaces Fastify's body parsers: JSON through {@link parseJsonBody}, and no `text/plain`
 * parser, so a body that is not JSON gets 415 instead of reaching a handler as a string.
 */
export function registerBodyParsers(app: FastifyInstance): void {
  app.removeContentTypeParser(["application/json", "text/plain"]);
  app.addContentTypeParser("application/json", { parseAs: "string" }, (_req, body, done) => {
    try {
      done(null, parseJsonBody(body as string));
    } catch (err) {
      done(err as ApiError, undefined);
    }
  });
}

/** The 415 for a body whose type is not accepted, naming the type that was sent. */
export function unsupportedMediaType(contentType: string | undefined): ApiError {
  return new ApiError(
    "unsupported_media_type",
    `Content-Type ${contentType ? `"${contentType}"` : "(none)"} is not accepted: send JSON with Content-Type: application/json (or YAML with application/yaml to import policies)`,
  );
}
