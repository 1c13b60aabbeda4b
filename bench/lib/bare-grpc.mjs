// The gRPC baseline of the library sluice served Envoy with before: a bare @grpc/grpc-js server
// (the server's .proto files through @grpc/proto-loader) whose ShouldRateLimit answers the same
// constant response as bare-http2.mjs. Prints "LISTENING <port>" when ready.
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { CONSTANT_RESPONSE } from "./rls-proto.mjs";
import { ROOT } from "./util.mjs";

const PROTO_DIR = join(ROOT, "packages/server/proto");
const port = Number(process.argv[2] ?? 0);
const definition = protoLoader.loadSync(join(PROTO_DIR, "envoy/service/ratelimit/v3/rls.proto"), {
  keepCase: false,
  longs: String,
  enums: Number,
  defaults: true,
  oneofs: true,
  includeDirs: [PROTO_DIR],
});
const server = new grpc.Server();
server.addService(definition["envoy.service.ratelimit.v3.RateLimitService"], {
  ShouldRateLimit: (_call, callback) => callback(null, CONSTANT_RESPONSE),
});
server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (err, bound) => {
  if (err) throw err;
  process.stdout.write(`LISTENING ${bound}\n`);
});
process.on("SIGTERM", () => process.exit(0));
