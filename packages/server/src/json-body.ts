/**
 * Request bodies: JSON parsed with errors that say what is wrong — bad JSON with the parser's
 * own words, a body nested too deep refused before anything walks it, and a `__proto__` (or
 * `constructor.prototype`) key refused by its path rather than called "not valid JSON". Only
 * JSON (and YAML for the policy import) is accepted; anything else, `text/plain` included, is
 * answered 415 by the caller.
 */
import type { FastifyInstance } from "fastify";
import secureJson from "secure-json-parse";
import type { ValidationIssue } from "sluice";
import { type ApiError, invalid } from "./errors.js";

/**
 * How deep objects and arrays may nest in a body. Real documents nest a few levels (an Envoy
 * domain's descriptors a dozen or so); code that walks a value recursively (`JSON.stringify`,
 * schemas of trees) runs out of stack some thousands of levels down.
 */
export const MAX_NESTING = 100;

/** Keys refused anywhere in a body: merged into an object, they would change its prototype. */
const FORBIDDEN = "__proto__";

/**
 * The issue of a JSON (or YAML flow-style) text whose objects and arrays nest more than
 * {@link MAX_NESTING} levels deep, or undefined. One pass over the characters, skipping
 * double-quoted strings; texts too short to be that deep are not looked at.
 */
export function nestingIssue(text: string): ValidationIssue | undefined {
  if (text.length <= 2 * MAX_NESTING) return undefined;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // a backslash escapes the next character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > MAX_NESTING)
        return {
          path: "",
          message: `is nested more than ${MAX_NESTING} levels deep (objects and arrays)`,
        };
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return undefined;
}

/**
 * The path of the first key that could poison a prototype, or undefined (for the message of a
 * body refused as such: its nesting is bounded by then).
 */
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
 * Prototype keys are refused by Fastify's own parser, secure-json-parse, which looks for them
 * only in a body whose text holds one.
 */
export function parseJsonBody(text: string): unknown {
  if (text.trim() === "") return undefined;
  const deep = nestingIssue(text);
  if (deep !== undefined) throw invalid("Invalid body", [deep]);
  let value: unknown;
  try {
    value = secureJson.parse(text, null, { protoAction: "error", constructorAction: "error" });
  } catch (err) {
    if (!(err instanceof SyntaxError) || !err.message.startsWith("Object contains forbidden"))
      throw invalid("Invalid body", [
        { path: "", message: `is not valid JSON: ${(err as Error).message}` },
      ]);
    const bad = prototypeKeyPath(JSON.parse(text)) ?? "";
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
