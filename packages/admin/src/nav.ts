/**
 * The console's pages, as one list: each page is a module that renders into the page's main
 * area, and its entry here puts it in the navigation (in this order) and routes
 * `#/<path>/<rest…>` to it. To add a page: write `pages/<name>.ts` exporting its render
 * function, and add one entry to `PAGES` in `pages/index.ts`.
 */
import type { Role } from "./api.js";
import type { Ctx } from "./ui.js";

/** One page of the console. */
export interface PageModule {
  /** The route's first segment: `policies` for `#/policies/…`; `""` for `#/` (the overview). */
  readonly path: string;
  /** Its label in the navigation; without one the page is reached by links only. */
  readonly label?: string;
  /** Shown in the navigation to these roles only (default: every role); the API decides anyway. */
  readonly roles?: readonly Role[];
  /**
   * Renders the page into `ctx.main`. `rest` is the route after the first segment, each part
   * URI-decoded (`#/policies/api/edit` → `["api", "edit"]`); query parameters are in `ctx.query`.
   * A thrown error is shown in place of the page (a 401 returns to sign-in).
   */
  render(ctx: Ctx, rest: readonly string[]): Promise<void>;
}

/** The pages of the navigation a role sees, in order. */
export function navFor(pages: readonly PageModule[], role: Role): PageModule[] {
  return pages.filter((p) => p.label !== undefined && (!p.roles || p.roles.includes(role)));
}
