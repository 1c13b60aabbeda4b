/** Your account (`#/account`): who you are, and changing your own password. */
import { ApiError } from "../api.js";
import { h, mount } from "../dom.js";
import { type Ctx, field, heading, input, titledForm } from "../ui.js";

/** `#/account`: your role and apps, and the password form. */
export function accountPage(ctx: Ctx): Promise<void> {
  const u = ctx.session.user;
  const current = input({
    name: "currentPassword",
    type: "password",
    autocomplete: "current-password",
  });
  const next = input({ name: "newPassword", type: "password", autocomplete: "new-password" });
  const again = input({ name: "repeat", type: "password", autocomplete: "new-password" });
  const form = titledForm(
    {
      class: "card",
      id: "password-form",
      title: "Change your password",
      submit: ["change-password", "Change password"],
    },
    async () => {
      if (next.value !== again.value) {
        throw new ApiError(400, "invalid_request", "Password not changed", [
          { path: "repeat", message: "does not match the new password" },
        ]);
      }
      await ctx.api.changePassword(current.value, next.value);
      for (const el of [current, next, again]) el.value = "";
      ctx.flash("Password changed. Your other sessions have ended; this one goes on.");
    },
    field("Current password", "currentPassword", current),
    field("New password", "newPassword", next, "At least 8 characters."),
    field("New password again", "repeat", again),
  );
  mount(
    ctx.main,
    heading("Your account"),
    h(
      "p",
      { id: "account-who" },
      h("strong", {}, u.username),
      ` · ${u.role}`,
      u.apps.length > 0 ? ` of ${u.apps.join(", ")}` : "",
    ),
    form,
    h(
      "p",
      { class: "muted small" },
      "Locked out? An admin sets a new password with ",
      h("code", {}, "PATCH /v1/admin/users/<name>"),
      ", or on the server (also for the last admin): ",
      h("code", {}, "npx sluice admin set-password --username <name>"),
      ".",
    ),
  );
  return Promise.resolve();
}
