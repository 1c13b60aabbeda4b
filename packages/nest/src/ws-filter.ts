/**
 * `SluiceWsExceptionFilter`: Nest's `BaseWsExceptionFilter` answers with `client.emit(
 * "exception", …)`, which socket.io sends but a plain `ws` socket (@nestjs/platform-ws) only
 * emits to itself: the client never hears of a denial. This filter sends it — `{ "event":
 * "exception", "data": { status, code, message, limit, remaining, reset, retryAfter, policies } }`
 * as one JSON message, the shape WsAdapter's messages have — and hands every other exception to
 * Nest's own filter.
 */
import { type ArgumentsHost, Catch, type ExceptionFilter } from "@nestjs/common";
import { optional } from "./optional.js";

interface WsExceptionLike {
  getError(): string | object;
}

interface BaseFilterClass {
  new (): ExceptionFilter;
}

/** Sends rate-limit denials to `ws` clients; use with `@UseFilters(SluiceWsExceptionFilter)` on a gateway. */
@Catch()
export class SluiceWsExceptionFilter implements ExceptionFilter {
  private base: ExceptionFilter | undefined;

  catch(exception: unknown, host: ArgumentsHost): void {
    const client: unknown = host.switchToWs().getClient();
    const error = (exception as Partial<WsExceptionLike> | null)?.getError?.();
    const send = (client as { send?: unknown } | null)?.send;
    const isDenial =
      typeof error === "object" &&
      error !== null &&
      (error as { status?: unknown }).status === "error" &&
      typeof (error as { retryAfter?: unknown }).retryAfter === "number";
    // socket.io's `emit` reaches the client: Nest's filter does it.
    if (isDenial && typeof send === "function" && !("nsp" in (client as object))) {
      (send as (data: string) => void).call(
        client,
        JSON.stringify({ event: "exception", data: error }),
      );
      return;
    }
    if (this.base === undefined) {
      const { BaseWsExceptionFilter } = optional<{ BaseWsExceptionFilter: BaseFilterClass }>(
        "@nestjs/websockets",
        "SluiceWsExceptionFilter",
      );
      this.base = new BaseWsExceptionFilter();
    }
    this.base.catch(exception, host);
  }
}
