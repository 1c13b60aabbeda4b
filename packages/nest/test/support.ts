/**
 * What the suites of @sluice/nest share: a Nest app on 127.0.0.1 (a free port the OS picks),
 * closed after each test, and a fetch that reads an answer whole.
 */
import "reflect-metadata";
import type { AddressInfo } from "node:net";
import type { INestApplication, Type } from "@nestjs/common";
import { NestFactory } from "@nestjs/core";
import { FastifyAdapter } from "@nestjs/platform-fastify";
import { afterEach } from "vitest";

/** The HTTP platforms a suite runs on. */
export const PLATFORMS = ["express", "fastify"] as const;
export type Platform = (typeof PLATFORMS)[number];

const open: INestApplication[] = [];

afterEach(async () => {
  while (open.length > 0) await open.pop()!.close();
});

/** Starts `module` on `platform`, listening on 127.0.0.1; closed after the test. */
export async function startApp(
  module: Type<unknown>,
  platform: Platform = "express",
  prepare?: (app: INestApplication) => void,
): Promise<{ app: INestApplication; url: string; port: number }> {
  const app =
    platform === "fastify"
      ? await NestFactory.create(module, new FastifyAdapter(), {
          logger: false,
          abortOnError: false,
        })
      : await NestFactory.create(module, { logger: false, abortOnError: false });
  open.push(app);
  prepare?.(app);
  await app.listen(0, "127.0.0.1");
  const port = (app.getHttpServer().address() as AddressInfo).port;
  return { app, url: `http://127.0.0.1:${port}`, port };
}

/** A GET answer: status, headers and body text. */
export async function get(
  url: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; body: string }> {
  const res = await fetch(url, { headers });
  return { status: res.status, headers: res.headers, body: await res.text() };
}
