/**
 * The codec of the Redis store: what one script call carries and what it answers, apart from
 * how it travels (redis.ts) — pure functions of the operations. Its numbers are lua/sluice.lua's
 * header: the operation codes (redis-protocol.ts, from which the script's constants are
 * generated), a policy's spec (algorithm code, rule count,
 * block, then limit, period and burst per rule), each operation's arguments, and each reply's
 * form; a change here is a change there.
 */
import type { RuleDecision } from "../decision.js";
import { SluiceError, StoreError } from "../errors.js";
import type { Policy } from "../policy.js";
import type { StoreDecision } from "../store.js";
import type { Queued } from "./remote-calls.js";
import type { AllotmentReply } from "./redis-allotments.js";
import {
  OP_ALLOT,
  OP_DECIDE,
  OP_PEEK,
  OP_RELEASE,
  OP_RESET,
  OP_SET,
  keyCode,
  scriptCode,
} from "./redis-keys.js";
import { OPS_PER_SPEC } from "./redis-protocol.js";

/** Per-policy data computed once: key names and the script's spec arguments. */
export interface PolicyInfo {
  /** `<prefix><policy>:{` — the identifier's tag follows. */
  readonly head: string;
  /** `}:<code><rule>` per rule. */
  readonly ruleSuffixes: readonly string[];
  /** `}:<code>b`: the penalty block's key. */
  readonly blockSuffix: string;
  /** The policy's spec, as the script reads it. */
  readonly spec: ReadonlyArray<string | number>;
  /** One rule, no penalty: the script answers decide/peek in its compact form. */
  readonly compact: boolean;
  /** Whether a rule counts per calendar window: its spec is completed per call (`nowMs`). */
  readonly calendar: boolean;
}

/** What one operation is, as the codec needs it. */
export interface Operation extends Queued {
  readonly op: number;
  readonly policy: Policy;
  readonly info: PolicyInfo;
  /** The identifier's hash tag. */
  readonly tag: string;
  /** The cost (the delta for adjust, the count for set, the units returned for give back). */
  readonly cost: number;
  /**
   * A member of a concurrency key's sorted set: a decide's new permit id, the permit id a
   * release frees, or an allotment op's node member; else "".
   */
  readonly member: string;
  /** An allotment or give back's numbers after the cost (lua/sluice.lua's header). */
  readonly args: readonly number[] | undefined;
  /** For a set count: the window's length (ms). */
  readonly windowMs: number;
}

/** What one operation answers: a decision, true/false, an allotment's reply, or its own error. */
export type OperationResult = StoreDecision | boolean | AllotmentReply | SluiceError;

/** The per-policy data of `policy` under `prefix`. */
export function policyInfo(policy: Policy, prefix: string): PolicyInfo {
  const code = keyCode(policy);
  const spec: Array<string | number> = [
    scriptCode(policy),
    policy.rules.length,
    // Negative: a block that forgets the key's counts (see lua/sluice.lua).
    policy.resetOnBlock ? -policy.blockMs : policy.blockMs,
  ];
  for (const r of policy.rules) spec.push(r.limit, r.periodMs, r.burst);
  return {
    head: `${prefix}${policy.name}:{`,
    ruleSuffixes: policy.rules.map((_, i) => `}:${code}${i}`),
    blockSuffix: `}:${code}b`,
    spec,
    compact: policy.rules.length === 1 && policy.blockMs === 0,
    calendar: policy.rules.some((r) => r.calendar !== undefined),
  };
}

/**
 * Pushes `policy`'s spec at `nowMs`: a calendar rule's (period, burst) become (−start, end), its
 * window's edges then (lua/sluice.lua's header).
 */
function pushCalendarSpec(
  out: Array<string | number>,
  info: PolicyInfo,
  policy: Policy,
  nowMs: number,
) {
  const at = out.length;
  for (const a of info.spec) out.push(a);
  policy.rules.forEach((r, i) => {
    const c = r.calendar;
    if (c === undefined) return;
    out[at + 3 + 3 * i + 1] = -c.startAt(nowMs);
    out[at + 3 + 3 * i + 2] = c.endAt(nowMs);
  });
}

/** The call's own arguments, before the specs (lua/sluice.lua, ARGV[1] to ARGV[4]). */
export interface CallHeader {
  /** The injected time (epoch ms) as text, or "" for the server's clock. */
  readonly now: string;
  readonly ttlPadMs: number;
  readonly shiftMs: number;
  /** The server-time deadline, or "". */
  readonly deadline: string;
  /**
   * The time the decisions are at as the caller knows it (epoch ms): the injected time, else
   * the server's clock as the clock offsets estimate it. Calendar rules' windows are taken at it.
   */
  readonly nowMs: number;
  /** The allotment epoch's key (of this Redis, or of the batch's slot). */
  readonly epochKey: string;
}

/** The keys and arguments of one script call carrying `batch`. */
export function encodeCall(
  batch: readonly Operation[],
  header: CallHeader,
): { keys: string[]; argv: Array<string | number> } {
  const keys: string[] = [];
  let specCount = 0;
  const specArgs: Array<string | number> = [];
  const opArgs: Array<string | number> = [];
  // Spec numbers of this call, by policy (a batch usually holds one or two policies).
  let lastPolicy: Policy | undefined;
  let lastIndex = 0;
  let specIndex: Map<Policy, number> | undefined;
  for (const p of batch) {
    const info = p.info;
    let idx: number | undefined;
    if (p.policy === lastPolicy) idx = lastIndex;
    else {
      idx = specIndex?.get(p.policy);
      if (idx === undefined) {
        idx = ++specCount;
        (specIndex ??= new Map()).set(p.policy, idx);
        if (info.calendar) pushCalendarSpec(specArgs, info, p.policy, header.nowMs);
        else for (const a of info.spec) specArgs.push(a);
      }
      lastPolicy = p.policy;
      lastIndex = idx;
    }
    const base = info.head + p.tag;
    const suffixes = info.ruleSuffixes;
    for (let i = 0; i < suffixes.length; i++) keys.push(base + suffixes[i]!);
    if (p.policy.blockMs > 0 || p.op === OP_RESET) keys.push(base + info.blockSuffix);
    const code = idx * OPS_PER_SPEC + p.op;
    if (p.args !== undefined) {
      // An allotment or give back: the epoch key, its numbers, and a concurrency node's member.
      keys.push(header.epochKey);
      opArgs.push(-code, p.cost);
      for (const x of p.args) opArgs.push(x);
      if (p.member !== "") opArgs.push(p.member);
    } else if (p.op === OP_SET) opArgs.push(-code, p.cost, p.windowMs);
    else if (p.cost === 1 && p.member === "") opArgs.push(code);
    else {
      opArgs.push(-code, p.cost);
      if (p.op === OP_RELEASE || (p.op === OP_DECIDE && p.member !== "")) opArgs.push(p.member);
    }
  }
  const argv: Array<string | number> = [
    header.now,
    header.ttlPadMs,
    header.shiftMs,
    header.deadline,
    specCount,
  ];
  for (const a of specArgs) argv.push(a);
  for (const a of opArgs) argv.push(a);
  return { keys, argv };
}

/** The server's time (epoch ms) a reply carries last, when it is one of the script's. */
export function serverTimeOf(reply: unknown): number | undefined {
  return Array.isArray(reply) && typeof reply[reply.length - 1] === "number"
    ? (reply[reply.length - 1] as number)
    : undefined;
}

export function decodeReply(
  batch: readonly Operation[],
  reply: unknown,
): OperationResult[] | StoreError {
  if (!Array.isArray(reply) || reply.length === 0)
    return new StoreError("SLUICE_ERR_STORE", "Unexpected reply from the sluice script");
  const n = reply.length - 1;
  // Read every result first: a reply that does not match the batch settles nobody with a
  // guess (an earlier operation's answer could belong to another).
  const results = new Array<OperationResult>(batch.length);
  let i = 0;
  let b = 0;
  for (; b < batch.length; b++) {
    const p = batch[b]!;
    if (i >= n) break;
    const first = reply[i] as unknown;
    if (typeof first === "string") {
      results[b] = new SluiceError("SLUICE_ERR_CORRUPT_STATE", first);
      i++;
      continue;
    }
    if (typeof first !== "number") break;
    if (p.op === OP_DECIDE || p.op === OP_PEEK || p.op === OP_ALLOT) {
      const rules = p.policy.rules;
      let d: StoreDecision;
      if (p.info.compact) {
        const rule = rules[0]!;
        const allowed = first >= 0;
        if (i + (allowed ? 2 : 3) > n) break;
        const rd: RuleDecision = {
          limit: rule.limit,
          periodMs: rule.periodMs,
          burst: rule.burst,
          allowed,
          remaining: allowed ? first : -first - 1,
          resetAfterMs: reply[i + 1] as number,
          retryAfterMs: allowed ? 0 : (reply[i + 2] as number),
        };
        i += allowed ? 2 : 3;
        d = { allowed, rules: [rd], blockedForMs: 0 };
      } else {
        const count = rules.length;
        if (i + 2 + count * 4 > n) break;
        const rds = new Array<RuleDecision>(count);
        for (let r = 0; r < count; r++) {
          const at = i + 2 + r * 4;
          const rule = rules[r]!;
          rds[r] = {
            limit: rule.limit,
            periodMs: rule.periodMs,
            burst: rule.burst,
            allowed: reply[at] === 1,
            remaining: reply[at + 1] as number,
            resetAfterMs: reply[at + 2] as number,
            retryAfterMs: reply[at + 3] as number,
          };
        }
        d = { allowed: first === 1, rules: rds, blockedForMs: reply[i + 1] as number };
        i += 2 + count * 4;
      }
      if (p.op === OP_ALLOT) {
        // Then: granted units, the decision time, the epoch.
        if (i + 3 > n) break;
        results[b] = {
          decision: d,
          granted: reply[i] as number,
          at: reply[i + 1] as number,
          epoch: reply[i + 2] as number,
        };
        i += 3;
        continue;
      }
      results[b] = d;
    } else {
      results[b] = first === 1;
      i++;
    }
  }
  if (b < batch.length || i !== n) {
    return new StoreError(
      "SLUICE_ERR_STORE",
      `Unreadable reply from the sluice script: ${n} values for ${batch.length} operation(s)`,
    );
  }
  return results;
}
