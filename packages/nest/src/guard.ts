/**
 * `SluiceGuard`: the one guard, for every kind of context. Per request: the handler's plan
 * (limits.ts) → each policy's key and cost → one all-or-nothing decision (decide.ts) → on HTTP
 * the rate-limit headers; a denial becomes its context's error (contexts.ts).
 */
import { type CanActivate, type ExecutionContext, Inject, Injectable } from "@nestjs/common";
import { ValidationError } from "sluice";
import { retryAfterSeconds } from "sluice/http";
import {
  DENIAL_CONTENT_TYPE,
  defaultIdentity,
  denialError,
  kindOf,
  setHeaders,
} from "./contexts.js";
import type { Charge } from "./decide.js";
import { decideAll } from "./decide.js";
import { type Plan, SluiceLimits } from "./limits.js";
import { rememberCharges } from "./settle.js";
import type { ContextKind, CostFunction, KeyFunction } from "./types.js";

/** A key function's result, checked: a string, or undefined to fall through. */
function keyResult(found: unknown, plan: Plan, source: string): string | undefined {
  if (found === undefined || found === null || found === "") return undefined;
  if (typeof found !== "string")
    throw new ValidationError("SLUICE_ERR_KEY", `Invalid rate limit key on ${plan.handler}`, [
      { path: source, message: `must return a string or undefined (got ${typeof found})` },
    ]);
  return found;
}

/**
 * What each execution context was answered. Nest runs a call's guards in one pass over one
 * context, the app's global ones first: where SluiceGuard is both global and named on a
 * controller or gateway (Nest 12 runs global guards on gateways too, where Nest 10 and 11 did
 * not and the guide names it), the second answers as the first did instead of charging again.
 */
const answered = new WeakMap<ExecutionContext, Promise<boolean>>();

/** Limits every handler it guards by its `@RateLimit` policies and the module's defaults. */
@Injectable()
export class SluiceGuard implements CanActivate {
  constructor(@Inject(SluiceLimits) private readonly limits: SluiceLimits) {}

  canActivate(context: ExecutionContext): Promise<boolean> {
    let answer = answered.get(context);
    if (answer === undefined) {
      answer = this.decide(context);
      answered.set(context, answer);
    }
    return answer;
  }

  /** The decision of one call: its plan's charges, decided at once, all or nothing. */
  private async decide(context: ExecutionContext): Promise<boolean> {
    const kind = kindOf(context);
    if (kind === undefined) return true;
    const plan = this.limits.planFor(context.getClass(), context.getHandler());
    if (plan.policies.length === 0) return true;
    const charges = await this.charges(kind, context, plan);
    const result = await decideAll(charges);
    const limiters = charges.map((c) => c.limiter);
    if (result.allowed) {
      if (kind === "http") setHeaders(context, this.limits.headersOf(result.decisions, limiters));
      if (plan.cost?.settle !== undefined)
        rememberCharges(context, plan, charges, result.decisions);
      return true;
    }
    const o = this.limits.options;
    if (kind === "http") {
      const first = result.decisions[0]!;
      const denying = charges.filter((c) => c.limiter.policy.name === first.policy);
      setHeaders(context, [
        ...this.limits.headersOf([first], denying.length > 0 ? [denying[0]!.limiter] : limiters),
        ["Retry-After", String(retryAfterSeconds(first))],
        ["Content-Type", DENIAL_CONTENT_TYPE],
      ]);
    }
    if (o.onDenied !== undefined) {
      try {
        o.onDenied({ kind, handler: plan.handler, decisions: result.decisions });
      } catch {
        // A hook observes; it never changes the answer.
      }
    }
    throw denialError(kind, result.decisions, o.errorCode);
  }

  /** Each policy's share of this request: its key and its cost. */
  private async charges(
    kind: ContextKind,
    context: ExecutionContext,
    plan: Plan,
  ): Promise<Charge[]> {
    const o = this.limits.options;
    let fallbackKey: string | undefined;
    const sharedKey = async (): Promise<string> => {
      if (fallbackKey === undefined) {
        fallbackKey =
          (plan.key !== undefined
            ? keyResult(await plan.key(context), plan, "@RateLimitKey")
            : undefined) ??
          (o.key !== undefined ? keyResult(await o.key(context), plan, "key") : undefined) ??
          defaultIdentity(kind, context, o.rpcIdentity);
      }
      return fallbackKey;
    };
    let sharedCost: number | undefined;
    const costOf = async (cost: number | CostFunction | undefined, source: string) => {
      if (typeof cost === "number") return cost;
      if (cost !== undefined) return checkCost(await cost(context), plan, source);
      if (plan.cost === undefined) return 1;
      sharedCost ??= checkCost(await plan.cost.cost(context), plan, "@RateLimitCost");
      return sharedCost;
    };
    const out: Charge[] = [];
    for (const p of plan.policies) {
      const own: KeyFunction | undefined = p.key;
      const key =
        (own !== undefined
          ? keyResult(await own(context), plan, `@RateLimit("${p.name}").key`)
          : undefined) ?? (await sharedKey());
      out.push({
        limiter: p.limiter,
        key,
        cost: await costOf(p.cost, `@RateLimit("${p.name}").cost`),
      });
    }
    return out;
  }
}

function checkCost(cost: unknown, plan: Plan, source: string): number {
  if (typeof cost !== "number" || !Number.isSafeInteger(cost) || cost < 1)
    throw new ValidationError("SLUICE_ERR_COST", `Invalid rate limit cost on ${plan.handler}`, [
      { path: source, message: `must return a positive integer (got ${String(cost)})` },
    ]);
  return cost;
}
