/**
 * A separate OS process of the Envoy tests: `node --import tsx envoy-worker.ts`, forked with
 * IPC. On `{ id, address, request, n }` it fires `n` concurrent ShouldRateLimit calls at the
 * gRPC server `address` (a new channel per message, as a separate Envoy would open) and answers
 * `{ id, codes }` (how many of each overall code), or `{ id, error }`.
 */
import { type TestRequest, rlsClient } from "./envoy-client.js";

interface Task {
  id: number;
  address: string;
  request: TestRequest;
  n: number;
}

process.send!({ ready: true });
process.on("message", (msg: Task | "exit") => {
  if (msg === "exit") process.exit(0);
  void (async () => {
    const client = rlsClient(msg.address);
    try {
      const answers = await Promise.all(
        Array.from({ length: msg.n }, () =>
          client.shouldRateLimit(msg.request, { deadlineMs: 30_000 }),
        ),
      );
      const codes: Record<string, number> = {};
      for (const a of answers) codes[a.overallCode] = (codes[a.overallCode] ?? 0) + 1;
      process.send!({ id: msg.id, codes });
    } catch (err) {
      process.send!({ id: msg.id, error: String(err) });
    } finally {
      client.close();
    }
  })();
});
