/**
 * The protocol between the Redis store and its script, as data: the operation codes, how an
 * operation rides in an integer, and the algorithm codes of a policy's spec. The TypeScript side
 * reads these tables (redis-keys.ts's OP_* constants, redis-codec.ts's encoding); the script's
 * header is generated from them (`luaProtocol`, written into lua/sluice.lua between its
 * "protocol" markers by scripts/embed-lua.mjs; lua-scripts.test.ts fails when the two differ). A
 * code changed here is changed in the script by the next build.
 *
 * This module imports nothing: the embed script loads it on its own.
 */

/** One operation the script performs. */
export interface OperationCode {
  /** Its number: `c = spec · OPS_PER_SPEC + code`. */
  readonly code: number;
  /** The name of its constant, here (redis-keys.ts) and in the script. */
  readonly constant: string;
  /** What it does and what it answers, one line (the script's header). */
  readonly summary: string;
}

/**
 * Every operation of the script, in code order; also the wire codes of the Durable Object store.
 * The arguments an operation carries after its code are in lua/sluice.lua's header.
 */
export const OPERATION_CODES = [
  {
    code: 0,
    constant: "OP_DECIDE",
    summary: "decide: charge the cost if every rule allows it; answers a decision",
  },
  { code: 1, constant: "OP_PEEK", summary: "peek: decide without charging; answers a decision" },
  {
    code: 2,
    constant: "OP_ADJUST",
    summary: "adjust: add the delta to every rule (a refund is negative); answers 1",
  },
  {
    code: 3,
    constant: "OP_RELEASE",
    summary: "release: give a concurrency permit back; answers 1 if it was held, else 0",
  },
  { code: 4, constant: "OP_RESET", summary: "reset: forget the key and its block; answers 1" },
  {
    code: 5,
    constant: "OP_SET",
    summary: "set count: every rule's window holds the count, for the window's length; answers 1",
  },
  {
    code: 6,
    constant: "OP_ALLOT",
    summary: "allot: give back, decide, and grant units ahead; answers the decision and grant",
  },
  {
    code: 7,
    constant: "OP_GIVE_BACK",
    summary: "give back: return an allotment's unused units; answers 1",
  },
] as const satisfies readonly OperationCode[];

/** How many operation codes one spec number spans: `c = spec · OPS_PER_SPEC + op`. */
export const OPS_PER_SPEC = 8;

/** One algorithm code of a policy's spec (the first letter of its keys' last part). */
export interface ScriptAlgorithmCode {
  readonly code: string;
  /** What decides under it. */
  readonly summary: string;
  /** Its state is one key read and written whole (the fast path takes it), not a ZSET. */
  readonly fixedSize: boolean;
}

/** The algorithm codes a spec names, as the script reads them. */
export const SCRIPT_ALGORITHM_CODES = [
  { code: "g", summary: "gcra", fixedSize: true },
  { code: "t", summary: "token-bucket, refilled continuously", fixedSize: true },
  {
    code: "i",
    summary: 'token-bucket refilled by interval (refill: "interval"; keys of its own)',
    fixedSize: true,
  },
  { code: "f", summary: "fixed-window, aligned to the clock", fixedSize: true },
  {
    code: "F",
    summary: 'fixed-window started by the first request (windowStart; keys named as "f")',
    fixedSize: true,
  },
  { code: "s", summary: "sliding-window", fixedSize: true },
  { code: "l", summary: "sliding-log (a ZSET)", fixedSize: false },
  { code: "c", summary: "concurrency (a ZSET of permits)", fixedSize: false },
] as const satisfies readonly ScriptAlgorithmCode[];

/** The first and last line of the generated part of lua/sluice.lua. */
export const LUA_PROTOCOL_BEGIN =
  "-- ─── protocol: generated from src/stores/redis-protocol.ts ───";
export const LUA_PROTOCOL_END = "-- ─── end of protocol ───";

/**
 * The script's protocol part: the tables above as Lua constants, with their meaning in comments,
 * between {@link LUA_PROTOCOL_BEGIN} and {@link LUA_PROTOCOL_END} (each on a line of its own).
 */
export function luaProtocol(): string {
  const lines: string[] = [
    LUA_PROTOCOL_BEGIN,
    "-- (scripts/embed-lua.mjs writes this part; edit the tables there, not these lines)",
    `-- Operation codes: c = spec * ${OPS_PER_SPEC} + op.`,
  ];
  for (const op of OPERATION_CODES) lines.push(`--   ${op.code}  ${op.summary}`);
  const names = OPERATION_CODES.map((op) => op.constant).join(", ");
  const codes = OPERATION_CODES.map((op) => op.code).join(", ");
  lines.push(`local ${names} = ${codes}`);
  lines.push(`local OPS_PER_SPEC = ${OPS_PER_SPEC}`);
  lines.push("-- Algorithm codes of a spec:");
  for (const a of SCRIPT_ALGORITHM_CODES) lines.push(`--   ${a.code}  ${a.summary}`);
  const fixed = SCRIPT_ALGORITHM_CODES.filter((a) => a.fixedSize)
    .map((a) => a.code)
    .join("");
  // A string, not a table: the script's body runs on every call, and a table is built each time.
  lines.push("-- Those whose state is one key read and written whole (the fast path's):");
  lines.push(`local FIXED_SIZE = '${fixed}'`);
  lines.push(LUA_PROTOCOL_END);
  return lines.join("\n") + "\n";
}
