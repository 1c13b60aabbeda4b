/**
 * `sluice policy export|import|validate`: policy files (YAML, for GitOps) and the Envoy
 * reference rate limit service's files, to and from the database; `validate` touches none.
 */
import { mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import type { Command } from "commander";
import type { ValidationIssue } from "sluice";
import type { EnvoyDomainDocument } from "../envoy/config.js";
import { type PolicyDocument, takesAllotments } from "../model.js";
import { exportPolicyFile, parsePolicyFile } from "../policy-file.js";
import { DB_KEYS, addConfigOptions, configFrom, fail, printIssues, withRepo } from "./options.js";

/** Registers `policy export`, `policy import` and `policy validate`. */
export function policyCommands(cli: Command): void {
  const policy = cli
    .command("policy")
    .description(
      "export, import and validate policy files (YAML, for GitOps) and Envoy rate limit service files",
    );
  addConfigOptions(
    policy
      .command("export")
      .description(
        "write every policy as a YAML policy file (--envoy: every Envoy domain in the reference format)",
      )
      .option(
        "-o, --output <file|dir>",
        "write to a file instead of stdout (--envoy: a directory, created if missing, with one <domain>.yaml each; a path ending in .yaml/.yml is one file)",
      )
      .option("--envoy", "export the Envoy domains (the reference rate limit service's files)"),
    DB_KEYS,
  ).action(exportFiles);
  addConfigOptions(
    policy
      .command("import <file|dir>")
      .description(
        "validate every policy and Envoy domain in the file (or the directory's .yaml/.yml/.json files), then apply them in one transaction (nothing changes on any error)",
      )
      .option(
        "--prune",
        "delete what the import does not hold: policies if it holds policy files, Envoy domains if it holds Envoy files",
      )
      .option("--dry-run", "print what would change; change nothing")
      .option("--actor <name>", "name recorded in the audit log", "cli"),
    // redisUrl: whether the service counts in Redis, for the warning about `lease` alone.
    [...DB_KEYS, "redisUrl"],
  ).action(importFiles);
  policy
    .command("validate <file|dir>")
    .description(
      "check a policy file or Envoy rate limit service file (or a directory of them) without touching any database",
    )
    .action(validateFiles);
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/**
 * What `policy import` and `validate` read: one file (`-`: stdin) or every .yaml/.yml/.json file
 * of a directory, each a sluice policy file or an Envoy rate limit service file (it has `domain`).
 * Issues are prefixed with the file's name when a directory is read; so are the paths of
 * `withAllotments`, the policies that take allotments (`policies.<i>.lease`).
 */
async function readImport(path: string): Promise<
  | {
      policies: PolicyDocument[] | undefined;
      domains: EnvoyDomainDocument[] | undefined;
      withAllotments: string[];
    }
  | { issues: ValidationIssue[] }
> {
  const { looksLikeEnvoyFile, parseEnvoyFile } = await import("../envoy/config.js");
  const { parseAllDocuments } = await import("yaml");
  const dir = path !== "-" && isDirectory(path);
  const files = dir
    ? readdirSync(path)
        .filter((f) => /\.(ya?ml|json)$/i.test(f))
        .sort()
        .map((f) => join(path, f))
    : [path];
  if (dir && files.length === 0)
    return { issues: [{ path: "", message: "holds no .yaml, .yml or .json file" }] };
  let policies: PolicyDocument[] | undefined;
  let domains: EnvoyDomainDocument[] | undefined;
  const issues: ValidationIssue[] = [];
  const withAllotments: string[] = [];
  const policyFrom = new Map<string, string>();
  const domainFrom = new Map<string, string>();
  for (const file of files) {
    const text = readText(file);
    const at = (p: string) => (dir ? (p ? `${basename(file)}: ${p}` : basename(file)) : p);
    // Only to tell the two formats apart (the first document that holds something); each
    // parser then reports its own errors.
    let first: unknown;
    try {
      for (const d of parseAllDocuments(text)) {
        first = d.toJS();
        if (first !== null && first !== undefined) break;
      }
    } catch {
      first = undefined;
    }
    if (looksLikeEnvoyFile(first)) {
      const r = parseEnvoyFile(text);
      if ("issues" in r) {
        issues.push(...r.issues.map((i) => ({ ...i, path: at(i.path) })));
        continue;
      }
      for (const d of r.docs) {
        const seen = domainFrom.get(d.domain);
        if (seen !== undefined)
          issues.push({
            path: at("domain"),
            message: `duplicate domain '${d.domain}' (also in ${seen})`,
          });
        domainFrom.set(d.domain, basename(file));
      }
      domains = [...(domains ?? []), ...r.docs];
    } else {
      const r = parsePolicyFile(text);
      if ("issues" in r) {
        issues.push(...r.issues.map((i) => ({ ...i, path: at(i.path) })));
        continue;
      }
      r.docs.forEach((d, i) => {
        if (takesAllotments(d)) withAllotments.push(at(`policies.${i}.lease`));
      });
      for (const d of r.docs) {
        const seen = policyFrom.get(d.name);
        if (seen !== undefined && dir)
          issues.push({
            path: at("policies"),
            message: `policy "${d.name}" is also defined in ${seen}`,
          });
        policyFrom.set(d.name, basename(file));
      }
      policies = [...(policies ?? []), ...r.docs];
    }
  }
  return issues.length > 0 ? { issues } : { policies, domains, withAllotments };
}

function readText(file: string): string {
  try {
    return file === "-" ? readFileSync(0, "utf8") : readFileSync(file, "utf8");
  } catch (err) {
    return fail(`cannot read ${file}: ${(err as Error).message}`);
  }
}

/** `policy export`: every policy (or, with --envoy, every Envoy domain) as files. */
async function exportFiles(opts: Record<string, unknown>): Promise<void> {
  const config = configFrom(opts, DB_KEYS);
  const output = typeof opts.output === "string" ? opts.output : undefined;
  if (opts.envoy) {
    const { exportEnvoyYaml } = await import("../envoy/config.js");
    const docs = await withRepo(config, async (repo) =>
      (await repo.envoyDomains.list()).map((r) => r.doc),
    );
    // The reference service reads one domain per file: a directory unless a .yaml file is named.
    if (output !== undefined && (isDirectory(output) || !/\.ya?ml$/i.test(output))) {
      mkdirSync(output, { recursive: true });
      const used = new Set<string>();
      for (const d of docs) {
        const base = d.domain.replace(/[^A-Za-z0-9._-]/g, "_");
        let name = `${base}.yaml`;
        for (let i = 2; used.has(name); i++) name = `${base}-${i}.yaml`;
        used.add(name);
        writeFileSync(join(output, name), exportEnvoyYaml(d));
      }
      process.stdout.write(`wrote ${docs.length} domain file(s) to ${output}\n`);
      return;
    }
    const text = docs.map((d) => exportEnvoyYaml(d)).join("---\n");
    if (output !== undefined) {
      writeFileSync(output, text);
      process.stdout.write(`wrote ${docs.length} domain(s) to ${output}\n`);
    } else process.stdout.write(text);
    return;
  }
  const text = await withRepo(config, async (repo) =>
    exportPolicyFile((await repo.policies.list()).map((r) => r.doc)),
  );
  if (output !== undefined) writeFileSync(output, text);
  else process.stdout.write(text);
}

/** `policy import`: validates everything read, then applies it in one transaction. */
async function importFiles(path: string, opts: Record<string, unknown>): Promise<void> {
  const config = configFrom(opts, [...DB_KEYS, "redisUrl"]);
  const input = await readImport(path);
  if ("issues" in input) {
    printIssues(`${path}: import refused, nothing was changed`, input.issues);
    process.exit(1);
  }
  // Imported all the same (the document is shared, see policyWarnings in model.ts): said once
  // per policy with allotments when nothing configured here says the service counts in Redis.
  if (config.redisUrl === undefined)
    for (const at of input.withAllotments)
      process.stderr.write(
        `warning: ${at}: no Redis counters are configured here (redisUrl, --redis-url, REDIS_URL): a service on memory counters ignores lease in its own decisions; embedded clients (connectPolicies) whose store is Redis take allotments\n`,
      );
  const prune = opts.prune === true;
  const dry = opts.dryRun === true;
  const { policies, domains } = input;
  const plans = await withRepo(config, async (repo) =>
    dry
      ? {
          ...(policies ? { policies: await repo.policies.planImport(policies, prune) } : {}),
          ...(domains ? { domains: await repo.envoyDomains.planImport(domains, prune) } : {}),
        }
      : repo.importAll({ policies, domains }, String(opts.actor), { prune }),
  );
  const verb = dry ? "would " : "";
  const describePlan = (
    what: string,
    plan: { create: string[]; update: string[]; delete: string[]; unchanged: string[] },
  ) =>
    `${dry ? "dry run: " : ""}${what}${verb}create ${plan.create.length}, ${verb}update ${plan.update.length}, ${verb}delete ${plan.delete.length}, unchanged ${plan.unchanged.length}\n` +
    [
      ...plan.create.map((n) => `  + ${n}`),
      ...plan.update.map((n) => `  ~ ${n}`),
      ...plan.delete.map((n) => `  - ${n}`),
    ]
      .map((l) => `${l}\n`)
      .join("");
  if (plans.policies) process.stdout.write(describePlan("", plans.policies));
  if (plans.domains) process.stdout.write(describePlan("Envoy domains: ", plans.domains));
}

/** `policy validate`: checks files without touching any database. */
async function validateFiles(path: string): Promise<void> {
  const input = await readImport(path);
  if ("issues" in input) {
    printIssues(`${path} is invalid`, input.issues);
    process.exit(1);
  }
  const parts = [];
  const n = input.policies?.length;
  if (n !== undefined) parts.push(`${n} valid ${n === 1 ? "policy" : "policies"}`);
  const d = input.domains?.length;
  if (d !== undefined) parts.push(`${d} valid Envoy ${d === 1 ? "domain" : "domains"}`);
  process.stdout.write(`${path}: ${parts.join(", ")}\n`);
}
