/**
 * Copy-ready snippets, filled in with this service's address and the policy at hand: the curl
 * lines of the first steps and of a decision, and the library with `sluice/express` on the same
 * Redis (same policy name, so the same keys and one limit with the service).
 */
import type { PolicyDoc } from "./api.js";

/** Where the service is, as the browser reaches it. */
export function serviceBase(): string {
  return location.origin;
}

/** Quotes text for a POSIX shell (single quotes). */
export function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

/**
 * jq's filter for the field `field` of an answer, or — when the service refused the call — an
 * error with the service's message (jq prints it and exits 5; the variable stays empty).
 */
function fieldOrError(field: string): string {
  return `'.${field} // error(.error.message)'`;
}

/**
 * Signs in with curl and keeps the session token in `$TOKEN`; a refused sign-in prints the
 * service's message instead (and leaves `$TOKEN` empty).
 */
export function curlLogin(username: string): string {
  return [
    `TOKEN=$(curl -s ${serviceBase()}/v1/admin/login -H 'content-type: application/json' \\`,
    `  -d ${shellQuote(JSON.stringify({ username, password: "<your password>" }))} | jq -r ${fieldOrError("token")})`,
  ].join("\n");
}

/**
 * Creates an app with curl; its key goes to `$SLUICE_API_KEY`, or the service's message is
 * printed when it refuses.
 */
export function curlCreateApp(name: string): string {
  return [
    `SLUICE_API_KEY=$(curl -s ${serviceBase()}/v1/admin/apps -H "authorization: Bearer $TOKEN" \\`,
    `  -H 'content-type: application/json' -d ${shellQuote(JSON.stringify({ name }))} | jq -r ${fieldOrError("apiKey")})`,
  ].join("\n");
}

/** Creates a policy granted to `app` with curl. */
export function curlCreatePolicy(name: string, app: string): string {
  const doc = {
    name,
    algorithm: "gcra",
    rules: [{ limit: 100, period: "1m", burst: 20 }],
    apps: [app],
  };
  return [
    `curl -s ${serviceBase()}/v1/admin/policies -H "authorization: Bearer $TOKEN" \\`,
    `  -H 'content-type: application/json' -d ${shellQuote(JSON.stringify(doc))}`,
  ].join("\n");
}

/** One decision with curl, the app's key in `$SLUICE_API_KEY`. */
export function curlLimit(policy: string, key = "user:42"): string {
  return [
    `curl -si ${serviceBase()}/v1/limit -H "authorization: Bearer $SLUICE_API_KEY" \\`,
    `  -H 'content-type: application/json' -d ${shellQuote(JSON.stringify({ policy, key }))}`,
  ].join("\n");
}

/** The policy as the library takes it: the fields that decide, nothing of the service's. */
function libraryPolicy(doc: PolicyDoc): Record<string, unknown> {
  return {
    name: doc.name,
    algorithm: doc.algorithm ?? "gcra",
    rules: doc.rules,
    ...(doc.blockDuration !== undefined ? { blockDuration: doc.blockDuration } : {}),
    ...(doc.onStoreError !== undefined && doc.onStoreError !== "allow"
      ? { onStoreError: doc.onStoreError }
      : {}),
    ...(doc.shadow ? { shadow: true } : {}),
  };
}

/** A value as TypeScript source (keys unquoted where they may be). */
function ts(value: unknown): string {
  return JSON.stringify(value)
    .replace(/"([A-Za-z_$][\w$]*)":/g, "$1: ")
    .replace(/,(?=[{"\w])/g, ", ");
}

/**
 * An Express app limited by the library with the same policy, in plain JavaScript like the
 * other snippets. The page does not know which counters the service runs, so the wording holds
 * for both: on the service's Redis the same name means the same keys (one limit counted
 * together); a service on memory counters counts apart.
 */
export function expressSnippet(doc: PolicyDoc): string {
  return [
    `import express from "express";`,
    `import { Redis } from "ioredis";`,
    `import { createLimiter, redisStore } from "sluice";`,
    `import { rateLimit } from "sluice/express";`,
    ``,
    `// A copy of the policy "${doc.name}" as the service holds it now. Pointed at the Redis the`,
    `// service counts in (if it runs Redis counters), this app and the service use the same`,
    `// keys and count one limit; a service on memory counters counts apart. Changes made in the`,
    `// console do not reach this copy: the connectPolicies snippet follows them in this process.`,
    `const limiter = createLimiter({`,
    `  store: redisStore({ client: new Redis(process.env.REDIS_URL) }),`,
    `  policy: ${ts(libraryPolicy(doc))},`,
    `});`,
    ``,
    `const app = express();`,
    `app.use(rateLimit({ limiter, headers: "both" })); // keyed by client IP; see keys.user, keys.apiKey`,
    `app.get("/", (_req, res) => res.send("ok"));`,
    `app.listen(process.env.PORT ?? 3000);`,
  ].join("\n");
}

/**
 * An Express app enforcing the policy with the library, kept current by `connectPolicies`: it
 * loads the policies granted to the app's key and follows every console change within a
 * second, deciding in the app's process (no call to the service per request).
 */
export function expressConnectSnippet(policy: string): string {
  return [
    `import express from "express";`,
    `import { Redis } from "ioredis";`,
    `import { connectPolicies, redisStore } from "sluice";`,
    `import { rateLimit } from "sluice/express";`,
    ``,
    `// The policies granted to the app whose key is in SLUICE_API_KEY, enforced in this process`,
    `// and kept current: a change made in the console is in force here within a second. On the`,
    `// Redis the service counts in, this app and the service count one limit. A key the service`,
    `// refuses (401) rejects here, naming apiKey: the app does not start with a wrong key.`,
    `const policies = await connectPolicies({`,
    `  url: ${JSON.stringify(serviceBase())},`,
    `  apiKey: process.env.SLUICE_API_KEY,`,
    `  store: redisStore({ client: new Redis(process.env.REDIS_URL) }),`,
    `});`,
    ``,
    `const app = express();`,
    `app.use(rateLimit({ limiter: policies.limiter(${JSON.stringify(policy)}) }));`,
    `app.get("/", (_req, res) => res.send("ok"));`,
    `app.listen(process.env.PORT ?? 3000);`,
  ].join("\n");
}

/**
 * An Express app that asks the service for each decision (every console change applies at
 * once), with the app's key in `SLUICE_API_KEY`. Only a 200 answer with `allowed` is a decision
 * (allowed or denied, docs/server.md); every other answer is an error (`{ error: { code, message } }`: 400,
 * 401 for a wrong key, 403 for a policy not granted to the app, 404 for no such policy, 503),
 * and so is no answer in time. On those it fails open — the request goes on, and the reason is
 * logged at most once a minute — as the library does by default when its store fails; the
 * comment says where to fail closed instead.
 */
export function expressViaServiceSnippet(policy: string): string {
  return [
    `import express from "express";`,
    ``,
    `// Asks sluice for each request. When the service gives no decision (no answer within`,
    `// 500 ms, or an error: 401 a wrong SLUICE_API_KEY, 403 the policy is not granted to the`,
    `// app, 404 no such policy, 400, 503), this fails open: the request goes on and the reason`,
    `// is logged, at most once a minute. To fail closed instead, answer 503 where it says`,
    `// "fail open": return res.sendStatus(503);`,
    `let warnedAt = 0;`,
    `function noDecision(reason) {`,
    `  if (Date.now() - warnedAt < 60_000) return;`,
    `  warnedAt = Date.now();`,
    `  console.warn(\`sluice gave no decision, requests let through: \${reason}\`);`,
    `}`,
    ``,
    `const app = express();`,
    `app.use(async (req, res, next) => {`,
    `  let r;`,
    `  try {`,
    `    r = await fetch("${serviceBase()}/v1/limit", {`,
    `      method: "POST",`,
    `      headers: {`,
    `        authorization: \`Bearer \${process.env.SLUICE_API_KEY}\`,`,
    `        "content-type": "application/json",`,
    `      },`,
    `      body: JSON.stringify({ policy: ${JSON.stringify(policy)}, key: req.ip }),`,
    `      signal: AbortSignal.timeout(500),`,
    `    });`,
    `  } catch (err) {`,
    `    noDecision(String(err.cause ?? err));`,
    `    return next(); // fail open`,
    `  }`,
    `  const d = await r.json().catch(() => ({}));`,
    `  if (r.status !== 200 || typeof d.allowed !== "boolean") {`,
    `    noDecision(\`HTTP \${r.status}: \${d.error?.message ?? "not a decision"}\`);`,
    `    return next(); // fail open`,
    `  }`,
    `  if (d.allowed) return next();`,
    `  const retryAfter = r.headers.get("retry-after"); // seconds, on every denial that has a wait`,
    `  if (retryAfter) res.set("Retry-After", retryAfter);`,
    `  res.status(429).send("Too Many Requests");`,
    `});`,
    `app.get("/", (_req, res) => res.send("ok"));`,
    `app.listen(process.env.PORT ?? 3000);`,
  ].join("\n");
}
