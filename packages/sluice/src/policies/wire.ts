/**
 * What the sluice service sends an embedded client (`GET /v1/policies`: the policy set), what
 * the client keeps of it (the cache's content), and the errors (`SLUICE_ERR_POLICY_SOURCE`) it
 * raises when the service answers something else.
 */
import { z } from "zod";
import { SluiceError } from "../errors.js";

/** Thrown inside the client: the service answered, but not with what was asked. */
export function sourceError(message: string, cause?: unknown): SluiceError {
  return new SluiceError("SLUICE_ERR_POLICY_SOURCE", message, { cause });
}

/** A document of the set: the service's document minus its grants. Checked by `definePolicy`. */
const documentSchema = z.looseObject({ name: z.string() });

/** `GET /v1/policies`: the policies granted to the app. */
export const policySetSchema = z.object({
  app: z.string(),
  revision: z.number().int().min(0),
  policies: z.array(
    z.object({
      version: z.number().int().min(1),
      document: documentSchema,
      draft: z.object({ id: z.number().int().min(1), document: documentSchema }).optional(),
    }),
  ),
  /**
   * Per-key overrides of these policies: every one (`whole`), or those changed since the
   * client's revision (`rules` null: deleted). The rules are checked by `definePolicy`.
   */
  overrides: z
    .object({
      whole: z.boolean(),
      items: z.array(
        z.object({ policy: z.string(), key: z.string(), rules: z.array(z.unknown()).nullable() }),
      ),
    })
    .optional(),
});

/** A policy set as the service sends it. */
export type PolicySet = z.infer<typeof policySetSchema>;

/** The cache's content: the last set, and whom it was for. */
export const cacheSchema = z.object({
  format: z.literal("sluice-policy-cache"),
  version: z.literal(1),
  url: z.string(),
  keyId: z.string(),
  savedAt: z.string(),
  etag: z.string().optional(),
  set: policySetSchema,
});

/** A policy set from an answer's text; throws `SLUICE_ERR_POLICY_SOURCE` saying what is wrong. */
export function parseSet(text: string, from: string): PolicySet {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    throw sourceError(`${from} answered something that is not JSON`, err);
  }
  const r = policySetSchema.safeParse(data);
  if (!r.success) {
    const issue = r.error.issues[0]!;
    throw sourceError(
      `${from} answered something that is not a policy set: ${issue.path.join(".") || "the body"}: ${issue.message}`,
    );
  }
  return r.data;
}

/** The service's `error.message`, when the body has one. */
export function errorMessage(text: string): string | undefined {
  try {
    const m = (JSON.parse(text) as { error?: { message?: unknown } } | null)?.error?.message;
    return typeof m === "string" ? m : undefined;
  } catch {
    return undefined;
  }
}

/** The error for an answer with an unexpected status, with the service's message. */
export function statusError(
  url: string,
  what: string,
  res: { status: number; text: string },
): SluiceError {
  const said = errorMessage(res.text);
  return sourceError(
    `the sluice service at ${url} answered ${what} with ${res.status}${said ? `: ${said}` : ""}${res.status === 404 && !said ? " (is this a sluice service with embedded-client support?)" : ""}`,
  );
}

/** An error's message, and its cause's. */
export function causeMessage(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = (err as { cause?: unknown }).cause;
  return cause instanceof Error && cause.message
    ? `${err.message} (${cause.message})`
    : err.message;
}

/** Anything thrown, as the client reports it. */
export function toSourceError(err: unknown): SluiceError {
  return err instanceof SluiceError ? err : sourceErrorFrom("the policy client failed", err);
}

/** `what` went wrong because of `err`. */
export function sourceErrorFrom(what: string, err: unknown): SluiceError {
  return sourceError(`${what}: ${causeMessage(err)}`, err);
}
