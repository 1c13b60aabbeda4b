/**
 * Reserve/settle for `@RateLimitCost(estimate, { settle })`: the guard charges the estimate and
 * leaves its charges here, keyed by the request's arguments (the one array Nest hands both the
 * guard and the interceptors of a call); `SluiceInterceptor` reads them once the handler has
 * answered and charges the difference to the actual cost — a refund, or debt that later
 * requests wait out — as sluice's `limiter.reserve(…).settle(actual)` does.
 */
import {
  type CallHandler,
  type ExecutionContext,
  Inject,
  Injectable,
  type NestInterceptor,
} from "@nestjs/common";
import type { Decision } from "sluice";
import { type Observable, tap } from "rxjs";
import { type Charge, charged } from "./decide.js";
import { type Plan, SluiceLimits } from "./limits.js";

interface Pending {
  readonly plan: Plan;
  /** The charges made from `@RateLimitCost`'s estimate, and what was charged. */
  readonly charges: readonly Charge[];
}

const pending = new WeakMap<object, Pending>();

/** Leaves the guard's estimated charges for the interceptor. @internal */
export function rememberCharges(
  context: ExecutionContext,
  plan: Plan,
  charges: readonly Charge[],
  decisions: readonly Decision[],
): void {
  const estimated = charges.filter(
    (_, i) => plan.policies[i]!.cost === undefined && charged(decisions[i]!),
  );
  if (estimated.length > 0) pending.set(context.getArgs(), { plan, charges: estimated });
}

/**
 * Settles the cost of handlers with `@RateLimitCost(…, { settle })` once they have answered (for
 * a stream, with its last value). `SluiceModule` registers it globally; with
 * `guard: "manual"`, add `@UseInterceptors(SluiceInterceptor)` beside `@UseGuards(SluiceGuard)`.
 */
@Injectable()
export class SluiceInterceptor implements NestInterceptor {
  constructor(@Inject(SluiceLimits) private readonly limits: SluiceLimits) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const args = context.getArgs();
    const p = pending.get(args);
    if (p === undefined) return next.handle();
    pending.delete(args);
    const settle = p.plan.cost?.settle;
    if (settle === undefined) return next.handle();
    let last: unknown;
    return next.handle().pipe(
      tap({
        next: (value) => {
          last = value;
        },
        complete: () => {
          let actual: number;
          try {
            actual = settle(last, context);
            if (!Number.isSafeInteger(actual) || actual < 0)
              throw new Error(`settle returned ${String(actual)}, not a whole number ≥ 0`);
          } catch (err) {
            this.limits.settleFailed(p.plan.handler, err);
            return;
          }
          for (const c of p.charges) {
            const delta = actual - c.cost;
            if (delta !== 0)
              c.limiter.store.adjust(c.limiter.policy, c.key, delta).catch((err: unknown) => {
                this.limits.settleFailed(p.plan.handler, err);
              });
          }
        },
      }),
    );
  }
}
