/** `sluice admin create-user|set-password`: admin users, directly in the database. */
import type { Command } from "commander";
import { passwordChangeSchema, userCreateSchema } from "@sluice/api";
import { ApiError, zodIssues } from "../errors.js";
import { DB_KEYS, addConfigOptions, configFrom, fail, printIssues, withRepo } from "./options.js";

/** Registers `admin create-user` and `admin set-password`. */
export function adminCommands(cli: Command): void {
  const admin = cli.command("admin").description("manage admin users directly in the database");
  addConfigOptions(
    admin
      .command("create-user")
      .description("create an admin user (the first admin is made this way)")
      .requiredOption("--username <name>", "username")
      .option(
        "--password <password>",
        "password (at least 8 characters; or env SLUICE_ADMIN_PASSWORD)",
      )
      .option("--role <role>", "viewer | owner | admin", "admin")
      .option("--apps <apps>", "owner: comma-separated apps the user owns"),
    DB_KEYS,
  ).action(async (opts: Record<string, unknown>) => {
    const config = configFrom(opts, DB_KEYS);
    const input = {
      username: opts.username,
      password: opts.password ?? process.env.SLUICE_ADMIN_PASSWORD,
      role: opts.role,
      ...(typeof opts.apps === "string" ? { apps: opts.apps.split(",").filter(Boolean) } : {}),
    };
    const r = userCreateSchema.safeParse(input);
    if (!r.success) {
      printIssues(
        "Invalid user",
        zodIssues(r.error, "", input).map((i) => ({ ...i, path: `--${i.path}` })),
      );
      process.exit(1);
    }
    const user = await withRepo(config, (repo) =>
      repo.createUser({ ...r.data, apps: r.data.apps ?? [] }, "cli"),
    ).catch((err: unknown) => {
      // The database's refusals name fields (`apps.0`); here they are flags (`--apps`).
      if (!(err instanceof ApiError) || !err.issues) throw err;
      printIssues(
        err.subject ?? "Invalid user",
        err.issues.map((i) => ({ ...i, path: `--${i.path.split(".")[0] ?? ""}` })),
      );
      process.exit(1);
    });
    process.stdout.write(`created ${user.role} "${user.username}"\n`);
  });

  addConfigOptions(
    admin
      .command("set-password")
      .description(
        "set a user's password directly in the database (a locked-out admin); their sessions end",
      )
      .requiredOption("--username <name>", "username")
      .option(
        "--password <password>",
        "the new password (at least 8 characters; or env SLUICE_ADMIN_PASSWORD)",
      ),
    DB_KEYS,
  ).action(async (opts: Record<string, unknown>) => {
    const config = configFrom(opts, DB_KEYS);
    const password = opts.password ?? process.env.SLUICE_ADMIN_PASSWORD;
    const r = passwordChangeSchema.shape.newPassword.safeParse(password);
    if (!r.success) {
      printIssues(
        "Invalid password",
        zodIssues(r.error, "", password).map((i) => ({ ...i, path: "--password" })),
      );
      process.exit(1);
    }
    const username = String(opts.username);
    await withRepo(config, async (repo) => {
      if (!(await repo.getUser(username))) fail(`unknown user "${username}"`);
      await repo.updateUser(username, { password: r.data }, "cli", { via: "cli" });
    });
    process.stdout.write(`password of "${username}" set; their sessions have ended\n`);
  });
}
