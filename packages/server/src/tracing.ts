/**
 * Server spans of the service's decision doors (OpenTelemetry), made only when the service was
 * given a tracer (`ServiceOptions.tracer`; `sluice serve` gives one when it exports traces): the
 * doors check that once, when they are built, and do no span work at all otherwise.
 *
 * Each request gets one span of kind SERVER, a child of the caller's when it sends a W3C
 * `traceparent` (read with the API's propagator: the SDK's, registered by `sluice serve`). The
 * decision goes on it with sluice's {@link annotateSpan}: the policy, result, rule, remaining and
 * reset, and a `ratelimit.denied` event on a denial. Keys never go on a span.
 *
 * The span is not made the active context while the request is decided: the limiter marks its
 * denials (and `warnAt` crossings) on the active span, and a policy's draft decides beside it,
 * so an active span would get a denial twice, or the draft's. The door marks each span itself,
 * once, with the decision it answered.
 */
import {
  type Attributes,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  propagation,
} from "@opentelemetry/api";
import type { IncomingHttpHeaders, ServerResponse } from "node:http";
import type { IncomingHttpHeaders as Http2Headers, ServerHttp2Stream } from "node:http2";
import { type Decision, RATELIMIT_ATTRIBUTES, annotateSpan } from "sluice";

/** The event of one decision among several answered together (a batch item, an Envoy descriptor). */
export const DECISION_EVENT = "ratelimit.decision";
/** On a {@link DECISION_EVENT}: the item's (or descriptor's) place in the request. */
export const INDEX_ATTRIBUTE = "ratelimit.index";

/** Whether a decision counts as a denial on a span (as `annotateSpan` counts it). */
function denied(d: Decision): boolean {
  return !d.allowed || d.reason === "shadow";
}

/**
 * A span for a request of the decision API (`POST <route>`), ended when its response is sent
 * or its connection closes, with the status code.
 */
export function httpServerSpan(
  tracer: Tracer,
  route: string,
  headers: IncomingHttpHeaders,
  res: ServerResponse,
): Span {
  const parent = propagation.extract(ROOT_CONTEXT, headers);
  const span = tracer.startSpan(
    `POST ${route}`,
    {
      kind: SpanKind.SERVER,
      attributes: {
        "http.request.method": "POST",
        "http.route": route,
        "url.path": route,
        "url.scheme": "http",
      },
    },
    parent,
  );
  res.once("close", () => {
    if (res.writableFinished) {
      const status = res.statusCode;
      span.setAttribute("http.response.status_code", status);
      if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
    } else
      span.setStatus({
        code: SpanStatusCode.ERROR,
        message: "the connection closed before the answer was sent",
      });
    span.end();
  });
  return span;
}

/** gRPC status codes that make a server span an error (OpenTelemetry's semantic conventions). */
const GRPC_SERVER_ERRORS = new Set([2, 4, 12, 13, 14, 15]);

/**
 * A span for a gRPC call (`<service>/<method>`), ended when its stream closes, with the
 * `grpc-status` it was answered (from the trailers, or the headers of a Trailers-Only answer).
 */
export function grpcServerSpan(
  tracer: Tracer,
  service: string,
  method: string,
  headers: Http2Headers,
  stream: ServerHttp2Stream,
): Span {
  const parent = propagation.extract(ROOT_CONTEXT, headers);
  const span = tracer.startSpan(
    `${service}/${method}`,
    {
      kind: SpanKind.SERVER,
      attributes: { "rpc.system": "grpc", "rpc.service": service, "rpc.method": method },
    },
    parent,
  );
  stream.once("close", () => {
    const status = (stream.sentTrailers?.["grpc-status"] ?? stream.sentHeaders["grpc-status"]) as
      string | number | undefined;
    if (status === undefined) {
      span.setStatus({
        code: SpanStatusCode.ERROR,
        message: "the call ended before it was answered",
      });
    } else {
      const code = Number(status);
      span.setAttribute("rpc.grpc.status_code", code);
      if (GRPC_SERVER_ERRORS.has(code)) span.setStatus({ code: SpanStatusCode.ERROR });
    }
    span.end();
  });
  return span;
}

/** A decision's attributes as an event of several (the span attributes' keys, and its index). */
function decisionEvent(d: Decision, index: number): Attributes {
  const attributes: Attributes = {
    [INDEX_ATTRIBUTE]: index,
    [RATELIMIT_ATTRIBUTES.POLICY]: d.policy,
    [RATELIMIT_ATTRIBUTES.RESULT]: denied(d) ? "denied" : "allowed",
    [RATELIMIT_ATTRIBUTES.RULE]: d.rule,
    [RATELIMIT_ATTRIBUTES.REMAINING]: d.remaining,
    [RATELIMIT_ATTRIBUTES.RESET_MS]: d.resetAfterMs,
  };
  if (d.reason !== undefined) attributes[RATELIMIT_ATTRIBUTES.REASON] = d.reason;
  if (denied(d)) attributes[RATELIMIT_ATTRIBUTES.RETRY_AFTER_MS] = d.retryAfterMs;
  return attributes;
}

/**
 * Several decisions answered together (a batch, an Envoy request's descriptors): each one a
 * {@link DECISION_EVENT} with its index, and the span's attributes (and `ratelimit.denied` event)
 * those of `deciding` — the one that decided the answer — when there is one.
 */
export function annotateDecisions(
  span: Span,
  decisions: ReadonlyArray<Decision | undefined>,
  deciding: Decision | undefined,
): void {
  if (!span.isRecording()) return;
  for (let i = 0; i < decisions.length; i++) {
    const d = decisions[i];
    if (d !== undefined) span.addEvent(DECISION_EVENT, decisionEvent(d, i));
  }
  if (deciding !== undefined) annotateSpan(span, deciding);
}

/**
 * The decision of a batch that speaks for it: its first denial, else the one with the least
 * remaining (the first of those).
 */
export function decidingOf(decisions: readonly Decision[]): Decision | undefined {
  let chosen: Decision | undefined;
  for (const d of decisions) {
    if (!d.allowed) return d;
    if (chosen === undefined || d.remaining < chosen.remaining) chosen = d;
  }
  return chosen;
}

/** A single decision on a span (sluice's {@link annotateSpan}), unless the span records nothing. */
export function annotateDecision(span: Span, d: Decision): void {
  if (span.isRecording()) annotateSpan(span, d);
}

/** The policy of a request without a decision (a permit's release) on its span. */
export function annotatePolicy(span: Span, policy: string): void {
  if (span.isRecording()) span.setAttribute(RATELIMIT_ATTRIBUTES.POLICY, policy);
}
