/**
 * Vercel's Edge runtime (`edge-runtime`): a script that answers fetch events, as an Edge
 * function does. A POST with the configuration runs the suite; the results are the answer.
 */
import { type SuiteConfig, runSuite } from "./suite.js";

interface FetchEvent {
  readonly request: Request;
  respondWith(response: Promise<Response>): void;
}
declare function addEventListener(type: "fetch", listener: (event: FetchEvent) => void): void;

addEventListener("fetch", (event) => {
  event.respondWith(
    event.request
      .json()
      .then((config) => runSuite(config as SuiteConfig))
      .then((results) => Response.json(results)),
  );
});
