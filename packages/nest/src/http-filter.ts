/**
 * `SluiceHttpExceptionFilter`: sends a {@link RateLimitedException} as
 * `application/problem+json`. Nest's own filter would send the body as an object, which its
 * Express adapter answers as `application/json` whatever the guard set; the body handed over as
 * JSON text keeps the type. `SluiceModule` registers it for the app (`APP_FILTER`); it catches
 * nothing else.
 */
import { type ArgumentsHost, Catch, type ExceptionFilter, Inject } from "@nestjs/common";
import { HttpAdapterHost } from "@nestjs/core";
import { PROBLEM_CONTENT_TYPE } from "sluice/http";
import { RateLimitedException } from "./contexts.js";

/** Answers a rate-limited HTTP request with its problem details (status 429 or 503). */
@Catch(RateLimitedException)
export class SluiceHttpExceptionFilter implements ExceptionFilter {
  constructor(@Inject(HttpAdapterHost) private readonly adapterHost: HttpAdapterHost) {}

  catch(exception: RateLimitedException, host: ArgumentsHost): void {
    const adapter = this.adapterHost.httpAdapter;
    const response: unknown = host.switchToHttp().getResponse();
    adapter.setHeader(response, "Content-Type", PROBLEM_CONTENT_TYPE);
    adapter.reply(response, JSON.stringify(exception.getResponse()), exception.getStatus());
  }
}
