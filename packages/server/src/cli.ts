/**
 * The `sluice` command: `serve`, `admin create-user|set-password`, `policy export|import|validate`,
 * `check`, `key peek|reset` — each group of commands in its module of ./cli/.
 */
import { Command } from "commander";
import { ZodError } from "zod";
import { adminCommands } from "./cli/admin.js";
import { keyCommands } from "./cli/keys.js";
import { fail, printIssues } from "./cli/options.js";
import { policyCommands } from "./cli/policy.js";
import { serveCommand } from "./cli/serve.js";
import { ConfigError } from "./config.js";
import { ApiError } from "./errors.js";

// The server, database drivers and Redis client load only for the commands that use them, so
// `--help` and `policy validate` start fast.

/** Builds the command-line program. */
export function program(): Command {
  const cli = new Command("sluice")
    .description("sluice: rate-limit decision service, policy store and admin")
    .showHelpAfterError()
    .configureHelp({ sortSubcommands: false });
  serveCommand(cli);
  adminCommands(cli);
  policyCommands(cli);
  keyCommands(cli);
  return cli;
}

async function main(): Promise<void> {
  try {
    await program().parseAsync(process.argv);
  } catch (err) {
    if (err instanceof ConfigError) fail(err.message);
    if (err instanceof ApiError && err.issues && err.subject !== undefined) {
      printIssues(err.subject, err.issues);
      process.exit(1);
    }
    if (err instanceof ApiError) fail(err.message);
    if (err instanceof ZodError) fail(err.message);
    fail(`sluice: ${err instanceof Error ? err.message : String(err)}`);
  }
}

void main();
