/**
 * The policy file (YAML or JSON) for GitOps: `sluice policy export` writes it, `import` and
 * `validate` read it. Every document is validated before anything is written.
 *
 * ```yaml
 * version: 1
 * policies:
 *   - name: api
 *     algorithm: gcra
 *     rules: [{ limit: 100, period: 1m, burst: 20 }]
 *     apps: [web]
 * ```
 */
import type { ValidationIssue } from "sluice";
import { parse as parseYaml, stringify } from "yaml";
import { prefixIssues } from "./errors.js";
import { nestingIssue } from "./json-body.js";
import { type PolicyDocument, validatePolicyDocument } from "./model.js";

/** The file format version written and accepted. */
export const POLICY_FILE_VERSION = 1;

/** Writes policies as a YAML policy file. */
export function exportPolicyFile(policies: readonly PolicyDocument[]): string {
  return `# sluice policies (${policies.length}); import with: sluice policy import <file>\n${stringify({ version: POLICY_FILE_VERSION, policies })}`;
}

/**
 * Validates parsed policy-file content (`{ version?, policies: [...] }` or a bare list): every
 * document, with issues as `policies.<i>.<field>`, and names that appear twice.
 */
export function validatePolicyList(
  data: unknown,
): { docs: PolicyDocument[] } | { issues: ValidationIssue[] } {
  let list: unknown = data;
  const issues: ValidationIssue[] = [];
  if (typeof data === "object" && data !== null && !Array.isArray(data)) {
    const { version, policies, ...rest } = data as Record<string, unknown>;
    if (version !== undefined && version !== POLICY_FILE_VERSION)
      issues.push({ path: "version", message: `must be ${POLICY_FILE_VERSION}` });
    for (const k of Object.keys(rest))
      issues.push({ path: k, message: "unknown field (a policy file has version and policies)" });
    list = policies;
  }
  if (!Array.isArray(list))
    return {
      issues: [...issues, { path: "policies", message: "must be a list of policy documents" }],
    };
  const docs: PolicyDocument[] = [];
  const seen = new Map<string, number>();
  list.forEach((item, i) => {
    const name = (item as { name?: unknown } | null)?.name;
    if (typeof name === "string") {
      const first = seen.get(name);
      if (first !== undefined)
        issues.push({
          path: `policies.${i}.name`,
          message: `"${name}" is also defined at policies.${first}`,
        });
      else seen.set(name, i);
    }
    const r = validatePolicyDocument(item);
    if ("issues" in r) issues.push(...prefixIssues(r.issues, `policies.${i}`));
    else docs.push(r.doc);
  });
  return issues.length > 0 ? { issues } : { docs };
}

/** Parses and validates a policy file's text (YAML, which includes JSON). */
export function parsePolicyFile(
  text: string,
): { docs: PolicyDocument[] } | { issues: ValidationIssue[] } {
  const deep = nestingIssue(text);
  if (deep !== undefined) return { issues: [deep] };
  let data: unknown;
  try {
    data = parseYaml(text);
  } catch (err) {
    return { issues: [{ path: "", message: `not valid YAML/JSON: ${(err as Error).message}` }] };
  }
  return validatePolicyList(data);
}
