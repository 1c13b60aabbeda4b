// h2load (nghttp2's HTTP/2 load generator, written in C): installed from Debian's
// nghttp2-client when missing; one timed run; the CPU time of a server's process tree.
import { readFileSync, readdirSync } from "node:fs";
import { aptInstall, run, which } from "./util.mjs";

/**
 * The path of h2load, installing Debian's `nghttp2-client` with apt-get when it is missing.
 * Resolves `{ path }`, or `{ reason }` when it is not there and could not be installed.
 */
export async function ensureH2load(log = console.error) {
  let path = await which("h2load");
  if (path) return { path };
  if (process.platform !== "linux" || !(await which("apt-get")))
    return { reason: "h2load is not installed (Debian/Ubuntu: apt-get install nghttp2-client)" };
  await aptInstall(["nghttp2-client"], log);
  path = await which("h2load");
  return path
    ? { path }
    : { reason: "h2load is not installed and apt-get could not install nghttp2-client" };
}

/**
 * One h2load run of `durationS` seconds: `clients` connections, each with `streams` requests in
 * flight, POSTing the file `data` to `url` with `headers`. Resolves requests/s and the counts
 * h2load reports (it sees HTTP statuses, not gRPC ones).
 */
export async function h2load({ path, url, data, headers = [], clients, streams, durationS }) {
  const args = ["-c", String(clients), "-m", String(streams), "-D", String(durationS), "-d", data];
  for (const h of headers) args.push("-H", h);
  args.push(url);
  const r = await run(path, args);
  const out = r.stdout;
  const finished = /finished in ([\d.]+)s, ([\d.]+) req\/s/.exec(out);
  const requests =
    /requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout/.exec(
      out,
    );
  const status = /status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx/.exec(out);
  if (r.code !== 0 || !finished || !requests || !status)
    throw new Error(`h2load failed (exit ${r.code}): ${(r.stderr || out).trim().slice(-400)}`);
  return {
    rps: Number(finished[2]),
    seconds: Number(finished[1]),
    done: Number(requests[3]),
    succeeded: Number(requests[4]),
    failed: Number(requests[5]) + Number(requests[6]) + Number(requests[7]),
    non2xx: Number(status[2]) + Number(status[3]) + Number(status[4]),
    command: `h2load ${args.map((a) => (/\s/.test(a) ? `'${a}'` : a)).join(" ")}`,
  };
}

/** Clock ticks per second of /proc/<pid>/stat's times. */
let ticks;
async function clockTicks() {
  ticks ??= Number((await run("getconf", ["CLK_TCK"])).stdout.trim()) || 100;
  return ticks;
}

/** The process `pid` and its descendants (Linux: /proc/<pid>/task/<tid>/children). */
function tree(pid) {
  const out = [pid];
  for (let i = 0; i < out.length; i++) {
    let tids = [];
    try {
      tids = readdirSync(`/proc/${out[i]}/task`);
    } catch {
      continue;
    }
    for (const tid of tids) {
      try {
        const kids = readFileSync(`/proc/${out[i]}/task/${tid}/children`, "utf8").trim();
        if (kids) out.push(...kids.split(/\s+/).map(Number));
      } catch {
        // The thread or process ended meanwhile.
      }
    }
  }
  return out;
}

/**
 * User + system CPU time (ms) of the process `pid` and every process below it (a server's
 * workers), from /proc/<pid>/stat; undefined where /proc is not there.
 */
export async function treeCpuMs(pid) {
  const hz = await clockTicks();
  let total = 0;
  let seen = false;
  for (const p of tree(pid)) {
    let stat;
    try {
      stat = readFileSync(`/proc/${p}/stat`, "utf8");
    } catch {
      continue;
    }
    // Fields after the command name (which may hold spaces, in parentheses): utime is the 14th
    // field of the line, stime the 15th.
    const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    total += Number(rest[11]) + Number(rest[12]);
    seen = true;
  }
  return seen ? (total * 1000) / hz : undefined;
}
