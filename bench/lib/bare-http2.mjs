// The gRPC baseline at the HTTP/2 ceiling: a bare node:http2 server answering every request
// with the same framed RateLimitResponse and `grpc-status: 0`, after reading the request body
// (never decoded). Prints "LISTENING <port>" when ready.
import http2 from "node:http2";
import { constantResponseFrame } from "./rls-proto.mjs";

const port = Number(process.argv[2] ?? 0);
const RESPONSE = constantResponseFrame();
const HEADERS = { ":status": 200, "content-type": "application/grpc" };
const TRAILERS = { "grpc-status": "0" };
const server = http2.createServer();
server.on("stream", (stream) => {
  stream.on("data", () => undefined);
  stream.on("end", () => {
    if (stream.destroyed) return;
    stream.respond(HEADERS, { waitForTrailers: true });
    stream.once("wantTrailers", () => stream.sendTrailers(TRAILERS));
    stream.end(RESPONSE);
  });
  stream.on("error", () => undefined);
});
server.listen(port, "127.0.0.1", () => {
  process.stdout.write(`LISTENING ${server.address().port}\n`);
});
process.on("SIGTERM", () => process.exit(0));
