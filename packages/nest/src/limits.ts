/**
 * `SluiceLimits`: the module's policies and what each handler is limited by. It resolves the
 * options, builds one limiter per policy over the store (or takes the `connectPolicies`
 * client's), and — when the module starts — reads every controller's, resolver's and gateway's
 * decorators, so a policy name that does not exist is refused then, naming the handler, and
 * not at the first request.
 */
import { Inject, Injectable, Logger, type OnModuleInit } from "@nestjs/common";
import { DiscoveryService, MetadataScanner } from "@nestjs/core";
import {
  type Decision,
  type Limiter,
  type Policy,
  type PolicyInput,
  ValidationError,
  createLimiter,
} from "sluice";
import { type HeaderList, rateLimitHeaders } from "sluice/http";
import {
  COST_METADATA,
  KEY_METADATA,
  RATE_LIMIT_METADATA,
  SKIP_METADATA,
  SLUICE_OPTIONS,
} from "./constants.js";
import { type Charge, type CombinedDecision, decideAll } from "./decide.js";
import type { CostEntry, RateLimitEntry, SkipEntry } from "./decorators.js";
import { type ResolvedOptions, known, policyProblem, resolveModuleOptions } from "./options.js";
import { preloadNestPeers } from "./optional.js";
import type { CostFunction, KeyFunction, SluiceModuleOptions } from "./types.js";

/** One policy of a handler, resolved. @internal */
export interface PlannedPolicy {
  readonly name: string;
  readonly limiter: Limiter;
  readonly key: KeyFunction | undefined;
  /** Its own cost (from `@RateLimit`), else undefined: the handler's `@RateLimitCost`, else 1. */
  readonly cost: number | CostFunction | undefined;
}

/** What a handler is limited by, resolved once. @internal */
export interface Plan {
  /** `Class.method`, for errors and events. */
  readonly handler: string;
  readonly policies: readonly PlannedPolicy[];
  readonly key: KeyFunction | undefined;
  readonly cost: CostEntry | undefined;
}

/** The metadata of a handler and its class, the handler's first. */
function both<T>(key: string, cls: object, handler: object): T[] {
  const own = (Reflect.getMetadata(key, handler) as T[] | undefined) ?? [];
  const inherited = (Reflect.getMetadata(key, cls) as T[] | undefined) ?? [];
  return [...own, ...inherited];
}

/** The policies and plans of the module; injectable, e.g. to decide by hand in a gateway's `handleConnection`. */
@Injectable()
export class SluiceLimits implements OnModuleInit {
  /** The resolved options. @internal */
  readonly options: ResolvedOptions;
  private readonly limiters = new Map<string, Limiter>();
  /** Inline policies by name, as given (two handlers may name one only with one definition). */
  private readonly inline = new Map<string, string>();
  private readonly plans = new WeakMap<object, WeakMap<object, Plan>>();
  private readonly logger = new Logger("SluiceModule");

  constructor(
    @Inject(SLUICE_OPTIONS) options: SluiceModuleOptions,
    @Inject(DiscoveryService) private readonly discovery: DiscoveryService,
    @Inject(MetadataScanner) private readonly scanner: MetadataScanner,
  ) {
    this.options = resolveModuleOptions(options);
  }

  /**
   * Reads every handler's decorators now: a bad one stops the app from starting. Then imports
   * the optional Nest packages the app has (optional.ts).
   */
  async onModuleInit(): Promise<void> {
    const problems: string[] = [];
    const wrappers = [...this.discovery.getControllers(), ...this.discovery.getProviders()];
    for (const wrapper of wrappers) {
      const instance: unknown = wrapper.instance;
      if (typeof instance !== "object" || instance === null) continue;
      const cls = (instance as { constructor: new (...args: never[]) => unknown }).constructor;
      const proto = Object.getPrototypeOf(instance) as object;
      for (const method of this.scanner.getAllMethodNames(proto)) {
        const handler: unknown = (proto as Record<string, unknown>)[method];
        if (typeof handler !== "function") continue;
        const decorated = [RATE_LIMIT_METADATA, SKIP_METADATA, KEY_METADATA, COST_METADATA].some(
          (key) =>
            Reflect.getMetadata(key, handler) !== undefined ||
            Reflect.getMetadata(key, cls) !== undefined,
        );
        if (!decorated) continue;
        try {
          this.planFor(cls, handler);
        } catch (err) {
          problems.push(err instanceof Error ? err.message : String(err));
        }
      }
    }
    if (problems.length > 0)
      throw new ValidationError(
        "SLUICE_ERR_OPTIONS",
        "Invalid rate limit decorators",
        problems.map((message) => ({ path: "", message })),
      );
    await preloadNestPeers();
  }

  /** The limiter of policy `name` (a module policy, an inline one, or the service's). */
  limiter(name: string): Limiter {
    let limiter = this.limiters.get(name);
    if (limiter !== undefined) return limiter;
    const { client, policies } = this.options;
    if (client !== undefined && client.has(name)) limiter = client.limiter(name);
    else {
      limiter = policies.get(name);
      if (limiter === undefined)
        throw new ValidationError("SLUICE_ERR_OPTIONS", "Unknown policy", [
          {
            path: "policy",
            message: `unknown policy "${name}" (known: ${known(policies, client)})`,
          },
        ]);
    }
    this.limiters.set(name, limiter);
    return limiter;
  }

  /**
   * Decides a request under several policies at once, all or nothing (see decide.ts): what
   * `@RateLimit` does, for code that decides by hand (a gateway's `handleConnection`).
   */
  decide(
    charges: ReadonlyArray<{ policy: string; key: string; cost?: number }>,
  ): Promise<CombinedDecision> {
    return Promise.resolve(
      decideAll(
        charges.map((c) => ({ limiter: this.limiter(c.policy), key: c.key, cost: c.cost ?? 1 })),
      ),
    );
  }

  /** The decisions' headers in the module's format (IETF lists joined over the policies). @internal */
  headersOf(decisions: readonly Decision[], limiters: readonly Limiter[]): HeaderList {
    const format = this.options.headers;
    if (format === false || decisions.length === 0) return [];
    const nowMs = this.options.clock();
    if (decisions.length === 1)
      return rateLimitHeaders(format, decisions[0]!, {
        nowMs,
        algorithm: limiters[0]!.policy.algorithm,
      });
    const out: HeaderList = [];
    if (format !== "ietf") {
      // GitHub's headers tell one limit: the policy with the least left.
      let least = 0;
      decisions.forEach((d, i) => {
        if (d.remaining < decisions[least]!.remaining) least = i;
      });
      out.push(
        ...rateLimitHeaders("github", decisions[least]!, {
          nowMs,
          algorithm: limiters[least]!.policy.algorithm,
        }),
      );
    }
    if (format !== "github") {
      // Structured-field lists: every policy's items, in one field each.
      const joined = new Map<string, string[]>();
      decisions.forEach((d, i) => {
        for (const [name, value] of rateLimitHeaders("ietf", d, {
          nowMs,
          algorithm: limiters[i]!.policy.algorithm,
        }))
          joined.set(name, [...(joined.get(name) ?? []), value]);
      });
      for (const [name, values] of joined) out.push([name, values.join(", ")]);
    }
    return out;
  }

  /** What a handler of `cls` is limited by; checked and cached. @internal */
  planFor(cls: object, handler: object): Plan {
    let byHandler = this.plans.get(cls);
    if (byHandler === undefined) {
      byHandler = new WeakMap();
      this.plans.set(cls, byHandler);
    }
    let plan = byHandler.get(handler);
    if (plan === undefined) {
      plan = this.buildPlan(cls, handler);
      byHandler.set(handler, plan);
    }
    return plan;
  }

  private buildPlan(cls: object, handler: object): Plan {
    const name = `${(cls as { name?: string }).name ?? "?"}.${(handler as { name?: string }).name ?? "?"}`;
    const where = (decorator: string) => `${decorator} on ${name}`;
    const skips = both<SkipEntry>(SKIP_METADATA, cls, handler);
    const skipAll = skips.includes(true);
    const { policies, client } = this.options;
    const exists = (p: string) =>
      (client !== undefined ? client.has(p) : policies.has(p)) || this.inline.has(p);
    for (const s of skips)
      if (s !== true && !exists(s) && !this.isInlineHere(cls, handler, s))
        throw new Error(
          `${where("@SkipRateLimit")}: unknown policy "${s}" (known: ${known(policies, client)})`,
        );
    const entries = both<RateLimitEntry>(RATE_LIMIT_METADATA, cls, handler);
    const planned: PlannedPolicy[] = [];
    const seen = new Set<string>();
    const add = (policyName: string, limiter: Limiter, entry: RateLimitEntry | undefined) => {
      if (seen.has(policyName)) return;
      seen.add(policyName);
      if (limiter.policy.algorithm === "concurrency")
        throw new Error(
          `${where("@RateLimit")}: policy "${policyName}" is a concurrency policy; a guard cannot hold its permit for the handler's run (take it in the handler with limiter.acquire)`,
        );
      if (skipAll || skips.includes(policyName)) return;
      planned.push({ name: policyName, limiter, key: entry?.key, cost: entry?.cost });
    };
    for (const entry of entries) {
      if (typeof entry.policy === "string") {
        if (!exists(entry.policy))
          throw new Error(
            `${where("@RateLimit")}: unknown policy "${entry.policy}" (known: ${known(policies, client)})`,
          );
        add(entry.policy, this.limiter(entry.policy), entry);
      } else {
        const limiter = this.inlineLimiter(entry.policy, where("@RateLimit"));
        add(limiter.policy.name, limiter, entry);
      }
    }
    for (const p of this.options.defaultPolicies) add(p, this.limiter(p), undefined);
    return {
      handler: name,
      policies: planned,
      key: (Reflect.getMetadata(KEY_METADATA, handler) ??
        Reflect.getMetadata(KEY_METADATA, cls)) as KeyFunction | undefined,
      cost: (Reflect.getMetadata(COST_METADATA, handler) ??
        Reflect.getMetadata(COST_METADATA, cls)) as CostEntry | undefined,
    };
  }

  /** Whether `name` is an inline policy of this handler itself (`@SkipRateLimit` may name it). */
  private isInlineHere(cls: object, handler: object, name: string): boolean {
    return both<RateLimitEntry>(RATE_LIMIT_METADATA, cls, handler).some(
      (e) => typeof e.policy !== "string" && e.policy.name === name,
    );
  }

  /** The limiter of a policy given inline; one definition per name. */
  private inlineLimiter(input: PolicyInput | Policy, where: string): Limiter {
    let made: Limiter;
    try {
      made = createLimiter({ store: this.options.store, policy: input });
    } catch (err) {
      throw new Error(`${where}: invalid policy: ${policyProblem(err)}`);
    }
    const policy = made.policy;
    const definition = JSON.stringify(policy);
    const before = this.inline.get(policy.name);
    const { policies, client } = this.options;
    if (
      (before === undefined &&
        (policies.has(policy.name) || (client !== undefined && client.has(policy.name)))) ||
      (before !== undefined && before !== definition)
    )
      throw new Error(
        `${where}: policy "${policy.name}" is defined twice, differently (an inline policy needs a name of its own)`,
      );
    if (before === undefined) {
      this.inline.set(policy.name, definition);
      this.limiters.set(policy.name, made);
    }
    return this.limiters.get(policy.name)!;
  }

  /** Logs a settle function's failure (the estimate stands). @internal */
  settleFailed(handler: string, err: unknown): void {
    this.logger.error(
      `@RateLimitCost settle on ${handler} failed; the estimate stands: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
}

export type { Charge, CombinedDecision };
