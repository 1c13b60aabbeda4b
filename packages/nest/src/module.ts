/**
 * `SluiceModule`: the policies (from code or the sluice service), the guard, the settle
 * interceptor, and — unless `guard: "manual"` — both registered for every handler of the app.
 */
import { type DynamicModule, Module, type Provider } from "@nestjs/common";
import { APP_FILTER, APP_GUARD, APP_INTERCEPTOR, DiscoveryModule } from "@nestjs/core";
import { ValidationError } from "sluice";
import { SLUICE_OPTIONS } from "./constants.js";
import { SluiceGuard } from "./guard.js";
import { SluiceHttpExceptionFilter } from "./http-filter.js";
import { SluiceLimits } from "./limits.js";
import { SluiceInterceptor } from "./settle.js";
import type { SluiceModuleAsyncOptions, SluiceModuleOptions } from "./types.js";

function providers(guard: "global" | "manual"): Provider[] {
  // The filter catches only the guard's own 429s: registered whether or not the guard is global.
  const list: Provider[] = [
    SluiceLimits,
    SluiceGuard,
    SluiceInterceptor,
    { provide: APP_FILTER, useClass: SluiceHttpExceptionFilter },
  ];
  if (guard === "global")
    list.push(
      { provide: APP_GUARD, useExisting: SluiceGuard },
      { provide: APP_INTERCEPTOR, useExisting: SluiceInterceptor },
    );
  return list;
}

function guardMode(value: unknown, path: string): "global" | "manual" {
  if (value === undefined || value === "global") return "global";
  if (value === "manual") return "manual";
  throw new ValidationError("SLUICE_ERR_OPTIONS", "Invalid SluiceModule options", [
    { path, message: `must be "global" or "manual" (got ${String(value)})` },
  ]);
}

/**
 * Rate limits for a Nest app over sluice. Global: `SluiceGuard`, `SluiceInterceptor` and
 * `SluiceLimits` can be injected (and named in `@UseGuards`) anywhere.
 *
 * ```ts
 * SluiceModule.forRoot({
 *   policies: [{ name: "api", algorithm: "gcra", rules: [{ limit: 100, period: "1m" }] }],
 *   defaultPolicies: ["api"],
 * })
 * ```
 */
@Module({})
export class SluiceModule {
  /** The module with options known now. */
  static forRoot(options: SluiceModuleOptions): DynamicModule {
    const guard = guardMode((options as Partial<SluiceModuleOptions> | null)?.guard, "guard");
    return {
      module: SluiceModule,
      global: true,
      imports: [DiscoveryModule],
      providers: [{ provide: SLUICE_OPTIONS, useValue: options }, ...providers(guard)],
      exports: [SluiceLimits, SluiceGuard, SluiceInterceptor],
    };
  }

  /**
   * The module with options made by a factory (e.g. from `ConfigService`, or awaiting
   * `connectPolicies`). Whether the guard is global is known before the factory runs:
   * `guard` is an option of this call; the factory's options must not say otherwise.
   */
  static forRootAsync(options: SluiceModuleAsyncOptions): DynamicModule {
    const guard = guardMode(options.guard, "guard");
    if (typeof options.useFactory !== "function")
      throw new ValidationError("SLUICE_ERR_OPTIONS", "Invalid SluiceModule.forRootAsync options", [
        { path: "useFactory", message: "must be a function returning the module's options" },
      ]);
    const factory = async (...args: never[]): Promise<SluiceModuleOptions> => {
      const made = await options.useFactory(...args);
      const said = (made as Partial<SluiceModuleOptions> | null)?.guard;
      if (said !== undefined && said !== guard)
        throw new ValidationError("SLUICE_ERR_OPTIONS", "Invalid SluiceModule options", [
          {
            path: "guard",
            message: `the factory says "${String(said)}" but forRootAsync was given "${guard}": set it on forRootAsync`,
          },
        ]);
      return made;
    };
    return {
      module: SluiceModule,
      global: true,
      imports: [DiscoveryModule, ...((options.imports ?? []) as DynamicModule[])],
      providers: [
        {
          provide: SLUICE_OPTIONS,
          useFactory: factory,
          inject: [...(options.inject ?? [])] as never[],
        },
        ...providers(guard),
      ],
      exports: [SluiceLimits, SluiceGuard, SluiceInterceptor],
    };
  }
}
