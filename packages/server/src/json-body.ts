/**
 * Request bodies: JSON parsed with errors that say what is wrong — bad JSON with the parser's
 * own words, a body nested too deep refused before anything walks it, and a `__proto__` (or
 * `constructor.prototype`) key refused by its path rather than called "not valid JSON". Only
 * JSON (and YAML for the policy import) is accepted; anything else, `text/plain` included, is
 * answered 415 by the caller.
 */
import { isUtf8 } from "node:buffer";
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
 * A character no UTF-8 text holds: half of a surrogate pair. JSON may still write one as an
 * escape (`"\ud800"`), and a UTF-8 encoder (Redis's keys, a database) writes it as U+FFFD.
 */
export const LONE_SURROGATE = /\p{Cs}/u;

/** What is wrong with a string holding bytes that are not UTF-8, or a lone surrogate. */
export const NOT_UTF8 =
  "is not valid UTF-8: bytes that encode no character, or a lone surrogate (\\ud800–\\udfff), would be stored as U+FFFD, the same for every such text";

/**
 * Every string (and field name) of a parsed body that holds a lone surrogate, as issues: a
 * field name's is its object's path.
 */
export function illFormedText(value: unknown, path: string[] = []): ValidationIssue[] {
  if (typeof value === "string")
    return LONE_SURROGATE.test(value) ? [{ path: path.join("."), message: NOT_UTF8 }] : [];
  if (typeof value !== "object" || value === null) return [];
  if (Array.isArray(value))
    return value.flatMap((item, i) => illFormedText(item, [...path, String(i)]));
  const issues: ValidationIssue[] = [];
  for (const [key, child] of Object.entries(value)) {
    if (LONE_SURROGATE.test(key))
      issues.push({ path: path.join("."), message: `${NOT_UTF8} (in the name of a field)` });
    issues.push(...illFormedText(child, [...path, key]));
  }
  return issues;
}

/**
 * Parses a JSON body from its bytes, as {@link parseJsonBody} its text. JSON is UTF-8 (RFC
 * 8259): bytes that are not would be read as U+FFFD, so that distinct keys — any strings —
 * became one. Such a body is refused, naming each field that holds them: each invalid sequence
 * is read as a lone surrogate, which no UTF-8 text holds, and looked for once parsed. A body
 * that is UTF-8 (nearly all) costs one validation pass over its bytes.
 */
export function parseJsonBytes(bytes: Buffer): unknown {
  if (isUtf8(bytes)) return parseJsonBody(bytes.toString("utf8"));
  const value = parseJsonBody(decodeMarkingInvalid(bytes));
  const issues = illFormedText(value);
  throw invalid("Invalid body", issues.length > 0 ? issues : [{ path: "", message: NOT_UTF8 }]);
}

/**
 * UTF-8 decoding where each invalid sequence (a byte that starts none, or a start without the
 * bytes it needs) becomes one lone surrogate (U+DFFF) instead of U+FFFD, so the strings that
 * held one can be told apart once parsed.
 */
function decodeMarkingInvalid(bytes: Buffer): string {
  // Node's own decoding writes U+FFFD for an invalid sequence, as it does for EF BF BD (U+FFFD
  // written out): valid runs are decoded as they are, each invalid sequence marked.
  let out = "";
  let start = 0;
  let i = 0;
  while (i < bytes.length) {
    const length = sequenceLength(bytes, i);
    if (length > 0) {
      i += length;
      continue;
    }
    out += bytes.toString("utf8", start, i);
    out += "\udfff";
    i += invalidLength(bytes, i);
    start = i;
  }
  return out + bytes.toString("utf8", start);
}

/** The length of the valid UTF-8 sequence at `i`, or 0 when the bytes there are not one. */
function sequenceLength(b: Buffer, i: number): number {
  const c = b[i]!;
  if (c < 0x80) return 1;
  const cont = (k: number, lo = 0x80, hi = 0xbf) => {
    const x = b[i + k];
    return x !== undefined && x >= lo && x <= hi;
  };
  if (c >= 0xc2 && c <= 0xdf) return cont(1) ? 2 : 0;
  if (c === 0xe0) return cont(1, 0xa0) && cont(2) ? 3 : 0;
  if ((c >= 0xe1 && c <= 0xec) || c === 0xee || c === 0xef) return cont(1) && cont(2) ? 3 : 0;
  if (c === 0xed) return cont(1, 0x80, 0x9f) && cont(2) ? 3 : 0; // not a surrogate
  if (c === 0xf0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (c >= 0xf1 && c <= 0xf3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (c === 0xf4) return cont(1, 0x80, 0x8f) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

/** How many bytes from `i` make one invalid sequence: a lead byte and the continuation bytes after it. */
function invalidLength(b: Buffer, i: number): number {
  let n = 1;
  while (n < 4 && i + n < b.length && (b[i + n]! & 0xc0) === 0x80) n++;
  return n;
}

/**
 * Replaces Fastify's body parsers: JSON through {@link parseJsonBytes}, and no `text/plain`
 * parser, so a body that is not JSON gets 415 instead of reaching a handler as a string.
 */
export function registerBodyParsers(app: FastifyInstance): void {
  app.removeContentTypeParser(["application/json", "text/plain"]);
  app.addContentTypeParser("application/json", { parseAs: "buffer" }, (_req, body, done) => {
    try {
      done(null, parseJsonBytes(body as Buffer));
    } catch (err) {
      done(err as ApiError, undefined);
    }
  });
}
