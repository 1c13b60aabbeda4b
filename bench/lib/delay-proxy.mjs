// A TCP proxy on 127.0.0.1 that plays a WAN link: every chunk is delivered `delayMs` after it
// arrived, in each direction (so a request-reply pays 2 × delayMs more), in order. `cut()` plays
// a partition: the connections in place are destroyed and new ones are accepted but carry nothing
// (their bytes are held, never delivered) until `heal()`, which destroys them too, so that a
// client reconnects. Shared by the multi-region test (packages/sluice/test/redis) and bench case.
import { createConnection, createServer } from "node:net";

/**
 * Starts a proxy to `target` ({ host, port }) adding `delayMs` each way.
 * Resolves { port, cut(), heal(), close(), get connections() }.
 */
export function startDelayProxy(target, delayMs) {
  const live = new Set();
  let cutOff = false;
  const held = new Set();
  const server = createServer((client) => {
    client.on("error", () => {});
    if (cutOff) {
      // A partition: the connection opens (as a SYN through a dropped route would hang, not
      // fail) and nothing crosses it.
      held.add(client);
      client.on("close", () => held.delete(client));
      client.on("data", () => {});
      return;
    }
    const upstream = createConnection(target);
    upstream.on("error", () => client.destroy());
    client.on("error", () => upstream.destroy());
    const pair = { client, upstream };
    live.add(pair);
    const relay = (from, to) => {
      from.on("data", (chunk) => {
        const t = setTimeout(() => {
          if (!to.destroyed) to.write(chunk);
        }, delayMs);
        t.unref?.();
      });
      from.on("close", () => {
        setTimeout(() => to.destroy(), delayMs).unref?.();
        live.delete(pair);
      });
    };
    relay(client, upstream);
    relay(upstream, client);
  });
  return new Promise((resolve, reject) => {
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      resolve({
        port: server.address().port,
        get connections() {
          return live.size;
        },
        cut() {
          cutOff = true;
          for (const { client, upstream } of live) {
            client.destroy();
            upstream.destroy();
          }
          live.clear();
        },
        heal() {
          cutOff = false;
          for (const c of held) c.destroy();
          held.clear();
        },
        close() {
          for (const { client, upstream } of live) {
            client.destroy();
            upstream.destroy();
          }
          for (const c of held) c.destroy();
          return new Promise((done) => server.close(() => done()));
        },
      });
    });
  });
}
