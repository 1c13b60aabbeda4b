/**
 * Bad options and decorators are refused with an error naming the field (or the handler and
 * the policy), when the class is defined or when the module starts — never at a request.
 */
import "reflect-metadata";
import { Controller, Get, Module, type Type } from "@nestjs/common";
import { NestFactory } from "@nestjs/core";
import type { PolicyInput } from "sluice";
import { describe, expect, it } from "vitest";
import {
  RateLimit,
  RateLimitCost,
  SkipRateLimit,
  SluiceModule,
  type SluiceModuleOptions,
} from "../src/index.js";

const policies: PolicyInput[] = [
  { name: "api", algorithm: "gcra", rules: [{ limit: 10, period: "1s" }] },
];

/** The error starting an app context of `module` rejects with. */
async function startError(module: Type<unknown>): Promise<Error> {
  const started = await NestFactory.createApplicationContext(module, {
    logger: false,
    abortOnError: false,
  }).then(
    async (app) => {
      await app.close();
      return undefined;
    },
    (err: unknown) => err,
  );
  expect(started).toBeInstanceOf(Error);
  return started as Error;
}

function moduleWith(options: SluiceModuleOptions, controllers: Array<new () => unknown> = []) {
  @Module({ imports: [SluiceModule.forRoot(options)], controllers })
  class AppModule {}
  return AppModule;
}

describe("options", () => {
  it("refuses an unknown policy in @RateLimit at module init, naming the handler and the policy", async () => {
    @Controller()
    class CatsController {
      @Get()
      @RateLimit("nope")
      list(): string {
        return "cats";
      }
    }
    const err = await startError(moduleWith({ policies }, [CatsController]));
    expect(err.message).toContain('@RateLimit on CatsController.list: unknown policy "nope"');
    expect(err.message).toContain('(known: "api")');
  });

  it("refuses an unknown policy in @SkipRateLimit and a concurrency policy in @RateLimit", async () => {
    @Controller()
    class DogsController {
      @Get()
      @SkipRateLimit("api-typo")
      list(): string {
        return "dogs";
      }

      @Get("slow")
      @RateLimit({ name: "slots", algorithm: "concurrency", rules: [{ limit: 2, period: "30s" }] })
      slow(): string {
        return "slow";
      }
    }
    const err = await startError(moduleWith({ policies }, [DogsController]));
    expect(err.message).toContain(
      '@SkipRateLimit on DogsController.list: unknown policy "api-typo"',
    );
    expect(err.message).toContain(
      '@RateLimit on DogsController.slow: policy "slots" is a concurrency policy',
    );
  });

  it("refuses an inline policy that redefines a module policy's name", async () => {
    @Controller()
    class BirdsController {
      @Get()
      @RateLimit({ name: "api", algorithm: "fixed-window", rules: [{ limit: 1, period: "1m" }] })
      list(): string {
        return "birds";
      }
    }
    const err = await startError(moduleWith({ policies }, [BirdsController]));
    expect(err.message).toContain(
      '@RateLimit on BirdsController.list: policy "api" is defined twice',
    );
  });

  it("names every bad module option in one error", async () => {
    const err = await startError(
      moduleWith({
        policies: [
          ...policies,
          { name: "broken", algorithm: "gcra", rules: [{ limit: -1, period: "1s" }] },
        ],
        maxKeys: 0,
        headers: "draft" as never,
        defaultPolicies: ["api", "missing"],
        rpcIdentity: "",
        colour: "blue",
      } as SluiceModuleOptions),
    );
    expect(err.message).toMatch(/^Invalid SluiceModule options/);
    for (const field of [
      "policies[1]",
      "maxKeys: must be a positive integer (got 0)",
      "headers: must be one of github, ietf, both or false",
      'defaultPolicies[1]: unknown policy "missing" (known: "api")',
      "rpcIdentity: must be a non-empty field name",
      "colour: unknown option",
    ])
      expect(err.message).toContain(field);
  });

  it("refuses policies that are neither a list nor a connectPolicies client", async () => {
    const err = await startError(moduleWith({ policies: "api" as never }));
    expect(err.message).toContain(
      "policies: must be a list of policies or the client of connectPolicies",
    );
  });

  it("refuses bad decorator arguments where the class is defined", () => {
    expect(() => RateLimit("api", { cost: 0 })).toThrow(
      /options\.cost: must be a positive integer or a function \(got 0\)/,
    );
    expect(() => RateLimit("api", { weight: 2 } as never)).toThrow(
      /options\.weight: unknown option/,
    );
    expect(() => RateLimit("")).toThrow(/policy: must be a non-empty name/);
    expect(() => RateLimitCost(3 as never)).toThrow(/cost: must be a function/);
    expect(() => SkipRateLimit("")).toThrow(/policy: must be a policy name/);
  });
});
