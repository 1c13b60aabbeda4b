-- sluice.lua: every decision of the Redis store, many per call. Needs Redis 7.0 or later.
--
-- A line-by-line port of packages/sluice/src/evaluate.ts (evaluate, adjustState) and of
-- packages/sluice/src/algorithms/*.ts (gcra, token-bucket refilled continuously or by interval,
-- fixed-window in both its aligned and its first-request form, sliding-window, sliding-log,
-- concurrency), with the same EPS tolerance and the same ceil/floor rounding,
-- so that the Redis store decides exactly as the memory store does. When you change an
-- algorithm in TypeScript, change it here too; the conformance table runs against both.
-- (The TypeScript sliding-log keeps a running total in its state; here the log is read from a
-- ZSET already pruned, and summed.)
--
-- Input (KEYS/ARGV only):
--   ARGV[1]  now in epoch ms, or "" to read the Redis server clock (TIME)
--   ARGV[2]  pad: ms added to every relative expiry (PX); 0 in production, a margin when
--            tests inject time
--   ARGV[3]  shift: ms added to every absolute expiry (PXAT) so that it falls on the Redis
--            server's clock; 0 in production (now is the server clock), when time is injected
--            the distance from the injected clock to the real one, plus pad
--   ARGV[4]  deadline: the latest Redis server time (epoch ms, TIME) at which this call may still
--            run, or "" for none. The caller answers a call that has not come back by its
--            deadline itself (onStoreError); a call that reaches Redis later than that (a hung
--            server waking up, a command ioredis re-sends after reconnecting, a redirection
--            retried) changes nothing and answers the error SLUICE_EXPIRED <server time>.
--   ARGV[5]  number of policy specs S, then S specs:
--              algorithm code (the protocol part below), rule count n, blockMs (negative:
--              −blockMs with resetOnBlock, a block that forgets the key's counts), then
--              n × (limit, periodMs, burst); a calendar rule (fixed-window, policy.ts) sends
--              (limit, −windowStart, windowEnd): the edges of its window at the decision time
--              as the caller knows it, computed in TypeScript (calendar.ts)
--   then the operations until ARGV ends. Each is one integer c = spec·OPS_PER_SPEC + op (the
--   operation codes and the algorithm codes are the protocol part below, generated from the
--   TypeScript's tables) when its cost is 1 and it carries no member; else −c followed by the
--   cost (the delta for adjust, the count for set) and, for a concurrency decide and for a release, the permit id; for set, the
--   window's length in ms. An allot (6) is always −c, cost, asked, returned, returnedAt, epoch,
--   ttl, then for concurrency the node's member id; a give back (7) is always −c, returned,
--   returnedAt, epoch, ttl, then for concurrency the member id.
--   KEYS     per operation, in order: its n rule keys, then its block key when the spec has
--            blockMs > 0 or the op is a reset, then for an allot or give back the epoch key.
--
-- Allotments (see docs/leases.md; a policy's `lease` field turns them on): a node takes
-- capacity ahead of its requests and decides from it in memory. An allot op gives back what the
-- node returns (`returned` units taken at decision time `returnedAt`, only into the same window
-- for fixed-window, only from the same epoch), decides `cost` as a decide does, and, if that was
-- allowed, debits up to `asked` more units: at most half of what is left after the decision, so
-- that the last units are not all handed to one node. The epoch key holds the decision time at
-- which this Redis first served an allotment (it is gone when Redis lost its data): nothing is
-- allotted in the first `ttl` ms of an epoch, so that allotments taken from lost data and new
-- ones never add up to more than the limit.
-- Output: a flat array, per operation in order (then, last, the Redis server time in epoch ms,
-- which the caller uses to map its deadlines onto the server's clock):
--   decide/peek, one rule and no penalty (the common case):
--            allowed: remaining, resetAfterMs      denied: −(remaining + 1), resetAfterMs, retryAfterMs
--   decide/peek, otherwise: allowed (1/0), blockedForMs, then per rule allowed (1/0),
--            remaining, resetAfterMs, retryAfterMs
--   allot: the decide's output (as above), then granted units, the decision time, the epoch
--   adjust, reset, set, give back: 1; release: 1 when the permit was held and is now released,
--   else 0
--   any op that met unreadable state: one string, the message (nothing was written for it)
-- Each operation is atomic (the whole script is); operations run one after another.
--
-- The script is laid out as the TypeScript is. Per algorithm one block, the port of its file in
-- algorithms/ (decide, adjust) and how its state sits in Redis (read, write); `combine`, the port
-- of evaluate.ts's evaluate (every rule decided, all charged or none, the penalty block); one
-- encoder of a decision into the reply (`encode`). Every path decides through them: decide and
-- peek, the allot, and the fast path. The fast path is a guard in front: it takes the common
-- operations (decide and peek of single-rule, penalty-free policies with one-key state), where
-- combine is the rule's own decision, charged when allowed; it calls the algorithm's decide,
-- read and write and the encoder, and returns when the batch holds nothing else. What only the
-- rest needs (combine, adjust, release, reset, set, allotments) is made after it. Making a closure
-- costs every call (Redis runs the whole body each time), so only the functions of the
-- algorithms the batch uses are made.

if (redis.REDIS_VERSION_NUM or 0) < 0x070000 then
  return redis.error_reply('sluice needs Redis 7.0 or later (it keeps state in key expiries: PEXPIRETIME)')
end

-- ─── protocol: generated from src/stores/redis-protocol.ts ───
-- (scripts/embed-lua.mjs writes this part; edit the tables there, not these lines)
-- Operation codes: c = spec * 8 + op.
--   0  decide: charge the cost if every rule allows it; answers a decision
--   1  peek: decide without charging; answers a decision
--   2  adjust: add the delta to every rule (a refund is negative); answers 1
--   3  release: give a concurrency permit back; answers 1 if it was held, else 0
--   4  reset: forget the key and its block; answers 1
--   5  set count: every rule's window holds the count, for the window's length; answers 1
--   6  allot: give back, decide, and grant units ahead; answers the decision and grant
--   7  give back: return an allotment's unused units; answers 1
local OP_DECIDE, OP_PEEK, OP_ADJUST, OP_RELEASE, OP_RESET, OP_SET, OP_ALLOT, OP_GIVE_BACK = 0, 1, 2, 3, 4, 5, 6, 7
local OPS_PER_SPEC = 8
-- Algorithm codes of a spec:
--   g  gcra
--   t  token-bucket, refilled continuously
--   i  token-bucket refilled by interval (refill: "interval"; keys of its own)
--   f  fixed-window, aligned to the clock
--   F  fixed-window started by the first request (windowStart; keys named as "f")
--   s  sliding-window
--   l  sliding-log (a ZSET)
--   c  concurrency (a ZSET of permits)
-- Those whose state is one key read and written whole (the fast path's):
local FIXED_SIZE = 'gtifFs'
-- ─── end of protocol ───

local EPS = 1e-6
local floor, ceil, max, min, fmod = math.floor, math.ceil, math.max, math.min, math.fmod
local tonumber, fmt = tonumber, string.format
local call, pcall_ = redis.call, redis.pcall
-- JS `a % b` for a ≥ 0, b > 0 (fmod is exact).
local mod = fmod

-- ─── the call's time and policies ───

local t = call('TIME')
-- The server's own time, whatever time the decisions use.
local serverNow = tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000)
local now = serverNow
if ARGV[1] ~= '' then now = tonumber(ARGV[1]) end
local pad = tonumber(ARGV[2])
local shift = tonumber(ARGV[3])
if ARGV[4] ~= '' and serverNow > tonumber(ARGV[4]) then
  return redis.error_reply('SLUICE_EXPIRED ' .. serverNow)
end

-- Which algorithms the batch uses: only their functions are made (a closure costs each call).
local has = {}
local specs = {}
local a = 6
for s = 1, tonumber(ARGV[5]) do
  local alg = ARGV[a]
  local spec = { alg = alg, n = tonumber(ARGV[a + 1]), blockMs = tonumber(ARGV[a + 2]), rules = {} }
  if spec.blockMs < 0 then
    spec.blockMs = -spec.blockMs
    spec.resetOnBlock = true
  end
  a = a + 3
  for r = 1, spec.n do
    spec.rules[r] = { tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]) }
    a = a + 3
  end
  -- Its decisions are answered in the compact form (see the header).
  spec.compact = spec.n == 1 and spec.blockMs == 0
  -- Decided by the fast path: one rule, no penalty, fixed-size state (one key, not a ZSET).
  spec.fast = spec.compact and string.find(FIXED_SIZE, alg, 1, true) ~= nil
  has[alg] = true
  specs[s] = spec
end

-- ceilMs / floorUnits of algorithms/types.ts.
local function ceilMs(ms)
  if ms <= EPS then return 0 end
  return ceil(ms - EPS)
end
local function floorUnits(u)
  if u <= 0 then return 0 end
  return floor(u + EPS)
end
-- A number as text that reads back as the same double.
local function num(x)
  if x == floor(x) and x < 9007199254740992 and x > -9007199254740992 then return fmt('%d', x) end
  return fmt('%.17g', x)
end

local CORRUPT = {}

-- A string key holding `count` space-separated numbers (t, i, s and the penalty block).
local function read_string(key, count)
  local v = pcall_('GET', key)
  if type(v) == 'table' and v.err then return CORRUPT end
  if not v then return nil end
  if count == 1 then
    local x = tonumber(v)
    if x == nil then return CORRUPT end
    return { x }
  end
  local st = {}
  for part in string.gmatch(v, '%S+') do
    local x = tonumber(part)
    if x == nil then return CORRUPT end
    st[#st + 1] = x
  end
  if #st ~= count then return CORRUPT end
  return st
end

-- ─── the algorithms ───
--
-- Each decide returns allowed, remaining, resetAfterMs, retryAfterMs, next (nil: nothing to
-- keep), ttlMs; each adjust returns next, ttlMs. How the state sits in Redis:
-- g: the TAT (in µs) lives in the key's expiry: the key expires at the TAT rounded up to a
--    whole ms (+ shift), and its value is how many µs that is above the TAT (0–999): an integer
--    Redis shares, so the key costs no more than a plain counter's. (A value ≥ 1000, or with a
--    fraction, is a whole TAT in ms, as sluice 0.1 wrote it.)
-- f: the count is the value, and the window is the key's expiry: the key expires at the end of
--    the window it counts (+ shift). (A value "start count", or a 0.1 packed integer, is read too.)
--    A calendar rule's key too expires at the end of its window (the edges the caller sent).
-- F: as f; the window (whatever its start) is the one that ends at the key's expiry.
-- t, i, s: one string of space-separated numbers ("tokens last"; "tokens refilledAt expiresAt";
--    "start prev curr"), expiring with the state.
-- l: a ZSET scored by time, member "t" (cost 1) or "t:cost". c: a ZSET scored by expiry,
--    member "id" (cost 1) or "id:cost", the id a permit's (or a node's allotment member). Both
--    expire with the state.

local gcra_decide, gcra_adjust, read_gcra, write_gcra
local tb_decide, tb_adjust
local tbi_decide, tbi_adjust
local fw_decide, fw_adjust, read_fixed
local fwf_decide, fwf_adjust, read_fixed_first
local sw_decide, sw_adjust
local sl_decide, sl_adjust, read_log
local cc_maxExpiry, cc_decide, cc_adjust, read_permits
local entry, write_zset

if has.g then
  -- algorithms/gcra.ts. State {tat}, in whole µs; T rounded up to a whole µs (intervalUs).
  local function intervalUs(limit, period)
    local periodUs = period * 1000
    local q = floor(periodUs / limit)
    if q * limit >= periodUs then return q end
    return q + 1
  end
  -- ceilUsToMs of gcra.ts.
  local function ceilUsToMs(us)
    if us <= 0 then return 0 end
    return ceil(us / 1000)
  end
  gcra_decide = function(st, now, limit, period, burst, cost)
    local T = intervalUs(limit, period)
    local exact = (period * 1000) / limit / T
    local tau = T * burst
    local nowUs = now * 1000
    local tat = max(st and st[1] or nowUs, nowUs)
    local newTat = tat + cost * T
    local allowAt = newTat - tau
    if allowAt <= nowUs then
      local nxt = nil
      if newTat > nowUs then nxt = { newTat } end
      return true, max(0, floor((nowUs + tau - newTat) / T)), ceilMs(((newTat - nowUs) * exact) / 1000), 0, nxt,
        ceilUsToMs(newTat - nowUs)
    end
    -- Round up, otherwise a fast caller retries a fraction of a ms too early and is denied.
    return false, max(0, floor((nowUs + tau - tat) / T)), ceilMs(((tat - nowUs) * exact) / 1000),
      ceilUsToMs(allowAt - nowUs), st, ceilUsToMs(tat - nowUs)
  end
  gcra_adjust = function(st, now, limit, period, burst, delta)
    local nowUs = now * 1000
    local newTat = max(st and st[1] or nowUs, nowUs) + delta * intervalUs(limit, period)
    if newTat > nowUs then return { newTat }, ceilUsToMs(newTat - nowUs) end
    return nil, 0
  end

  -- The key expires at the TAT rounded up to a whole ms (+ shift); its value is how many µs
  -- that is above the TAT (0–999, an integer Redis shares).
  read_gcra = function(key, shift)
    local v = pcall_('GET', key)
    if type(v) == 'table' and v.err then return CORRUPT end
    if not v then return nil end
    local x = tonumber(v)
    if x == nil or x < 0 or x ~= floor(x) then
      -- sluice 0.1 kept the whole TAT in ms, fraction and all.
      if x ~= nil and x >= 1000 then return { ceil(x * 1000) } end
      return CORRUPT
    end
    if x >= 1000 then return { x * 1000 } end
    local e = call('PEXPIRETIME', key)
    if e < 0 then return CORRUPT end
    return { (e - shift) * 1000 - x }
  end

  write_gcra = function(key, tat, shift)
    local c = ceil(tat / 1000)
    call('SET', key, c * 1000 - tat, 'PXAT', c + shift)
  end
end

if has.t then
  -- algorithms/token-bucket.ts. State {tokens, lastRefillMs}.
  local function refill(st, now, burst, rate)
    if st == nil then return burst end
    local tokens = st[1] or burst
    local elapsed = max(0, now - (st[2] or now))
    return min(burst, tokens + elapsed * rate)
  end
  tb_decide = function(st, now, limit, period, burst, cost)
    local rate = limit / period
    local tokens = refill(st, now, burst, rate)
    if tokens >= cost - EPS then
      local left = tokens - cost
      local fullIn = (burst - left) / rate
      local nxt = nil
      if fullIn > EPS then nxt = { left, now } end
      return true, floorUnits(left), ceilMs(fullIn), 0, nxt, ceilMs(fullIn)
    end
    -- Tokens arrive at `rate`; the request passes once `cost` of them are there.
    return false, floorUnits(tokens), ceilMs((burst - tokens) / rate), ceilMs((cost - tokens) / rate), st,
      ceilMs((burst - tokens) / rate)
  end
  tb_adjust = function(st, now, limit, period, burst, delta)
    local rate = limit / period
    local left = min(burst, refill(st, now, burst, rate) - delta)
    local fullIn = (burst - left) / rate
    if fullIn > EPS then return { left, now }, ceilMs(fullIn) end
    return nil, ceilMs(fullIn)
  end
end

if has.i then
  -- algorithms/token-bucket.ts, tokenBucketInterval. State {tokens, refilledAt, expiresAt}.
  -- The bucket at `now`: the state caught up by whole periods since its anchor (live), else a
  -- full one anchored now (no state, or it expired).
  local function caught(st, now, limit, period, burst)
    if st == nil or not (now < st[3]) then return burst, now, false end
    local tokens, at = st[1], st[2]
    if now >= at + period then
      local steps = floor((now - at) / period)
      tokens = min(burst, tokens + steps * limit)
      at = at + steps * period
    end
    return tokens, at, true
  end
  -- How long whole refill steps take to bring `missing` tokens.
  local function refillMs(missing, limit, period)
    if missing > 0 then return ceil(missing / limit) * period end
    return 0
  end
  tbi_decide = function(st, now, limit, period, burst, cost)
    local tokens, at, live = caught(st, now, limit, period, burst)
    if tokens >= cost then
      local left = tokens - cost
      local full = refillMs(burst - left, limit, period)
      local nxt = nil
      if full > 0 then nxt = { left, at, now + full } end
      return true, floorUnits(left), max(0, at + full - now), 0, nxt, full
    end
    local ttl = 0
    if live then ttl = st[3] - now end
    -- The tokens come at the anchor's steps: the first step that brings `cost` of them.
    return false, floorUnits(tokens), at + refillMs(burst - tokens, limit, period) - now,
      at + refillMs(cost - tokens, limit, period) - now, st, ttl
  end
  tbi_adjust = function(st, now, limit, period, burst, delta)
    local tokens, at, live = caught(st, now, limit, period, burst)
    local left = min(burst, tokens - delta)
    local full = refillMs(burst - left, limit, period)
    if full > 0 then return { left, at, now + full }, full end
    -- Full: the key keeps its anchor and expiry (a fresh one has nothing to keep).
    if live then return { left, at, st[3] }, st[3] - now end
    return nil, 0
  end
end

if has.f then
  -- algorithms/fixed-window.ts. State {windowStart, count}.
  -- The window of a rule at `now`: aligned [k·P, (k+1)·P), or a calendar rule's, whose edges
  -- the caller sent as (−start, end) in place of (period, burst). The caller's idea of now can
  -- be a few ms off the server's near an edge: the count goes to the window it named.
  local function fw_window(now, period, burst)
    if period > 0 then
      local start = now - mod(now, period)
      return start, start + period
    end
    return -period, burst
  end
  fw_decide = function(st, now, limit, period, burst, cost)
    local start, wend = fw_window(now, period, burst)
    local count = 0
    if st ~= nil and st[1] == start then count = st[2] or 0 end
    local resetAfterMs = max(0, wend - now)
    if count + cost <= limit then
      local used = count + cost
      local nxt = nil
      if used > 0 then nxt = { start, used } end
      return true, limit - used, resetAfterMs, 0, nxt, resetAfterMs
    end
    -- The next window starts empty, and cost ≤ limit is validated, so the window end is exact.
    return false, max(0, limit - count), resetAfterMs, ceilMs(resetAfterMs), st, resetAfterMs
  end
  fw_adjust = function(st, now, limit, period, burst, delta)
    local start, wend = fw_window(now, period, burst)
    local count = 0
    if st ~= nil and st[1] == start then count = st[2] or 0 end
    local used = max(0, count + delta)
    if used > 0 then return { start, used }, max(0, wend - now) end
    return nil, max(0, wend - now)
  end

  -- fixed-window's sluice 0.1 form: (window index mod 2^32)·2^21 + count.
  local FW_COUNT = 2097152
  local FW_WINDOWS = 4294967296
  read_fixed = function(key, now, P, B, shift)
    local v = pcall_('GET', key)
    if type(v) == 'table' and v.err then return CORRUPT end
    if not v then return nil end
    if string.find(v, ' ', 1, true) then
      local a, b = string.match(v, '^(%S+) (%S+)$')
      a, b = tonumber(a), tonumber(b)
      if a == nil or b == nil then return CORRUPT end
      return { a, b }
    end
    local x = tonumber(v)
    if x == nil then return CORRUPT end
    local start, wend = fw_window(now, P, B)
    if P > 0 and x >= FW_COUNT then
      local w = floor(x / FW_COUNT)
      if w == mod(start / P, FW_WINDOWS) then return { start, x - w * FW_COUNT } end
    end
    -- The key expires at the end of the window it counts. MIGRATE (a reshard) and a restore
    -- re-base that expiry on the target's clock, so it can be off by the move's delay and the
    -- clocks' difference: the window is the one whose end is nearest (a key of the previous
    -- window ends P earlier). Another window's count is the same as no state (fw_decide would
    -- ignore it too). A count moved off its window's end is put back on it.
    local e = call('PEXPIRETIME', key) - shift
    local half = (wend - start) / 2
    if e <= wend - half or e >= wend + half then return nil end
    if e ~= wend then call('PEXPIREAT', key, wend + shift) end
    return { start, x }
  end
end

if has.F then
  -- algorithms/fixed-window.ts, fixedWindowFromFirstRequest. State {windowStart, count}.
  -- The window open at `now` (open, start, count), else a fresh one starting now.
  local function window(st, now, period)
    if st ~= nil and now < st[1] + period then return true, st[1], st[2] or 0 end
    return false, now, 0
  end
  fwf_decide = function(st, now, limit, period, burst, cost)
    local open, start, count = window(st, now, period)
    local wend = start + period
    if count + cost <= limit then
      local used = count + cost
      local nxt, reset = nil, 0
      if open or used > 0 then
        nxt = { start, used }
        reset = wend - now
      end
      return true, limit - used, reset, 0, nxt, wend - now
    end
    -- Denied only inside an open window (cost ≤ limit is validated): the next one starts empty.
    return false, max(0, limit - count), wend - now, ceilMs(wend - now), st, wend - now
  end
  fwf_adjust = function(st, now, limit, period, burst, delta)
    local open, start, count = window(st, now, period)
    local used = max(0, count + delta)
    if open or used > 0 then return { start, used }, start + period - now end
    return nil, start + period - now
  end

  read_fixed_first = function(key, P, shift)
    local v = pcall_('GET', key)
    if type(v) == 'table' and v.err then return CORRUPT end
    if not v then return nil end
    local x = tonumber(v)
    if x == nil then return CORRUPT end
    local e = call('PEXPIRETIME', key)
    if e < 0 then return CORRUPT end
    return { e - shift - P, x }
  end
end

if has.s then
  -- algorithms/sliding-window.ts. State {currentWindowStart, prev, curr}.
  local function counters(st, start, P)
    if st == nil then return 0, 0 end
    local s = st[1] or 0
    if s == start then return st[2] or 0, st[3] or 0 end
    if s == start - P then return st[3] or 0, 0 end
    return 0, 0
  end
  local function resetAfter(prev, curr, start, now, P)
    if curr > 0 then return start + 2 * P - now end
    if prev > 0 then return start + P - now end
    return 0
  end
  local function waitFor(prev, curr, cost, limit, elapsed, P)
    local room = limit - curr - cost
    if room >= 0 and prev > 0 then
      -- prev·(P − elapsed − t)/P ≤ room  ⇔  t ≥ P − elapsed − room·P/prev
      local t = P - elapsed - (room * P) / prev
      if t <= P - elapsed then return max(0, t) end
    end
    -- In the next window: curr·(P − s)/P + cost ≤ limit  ⇔  s ≥ P − (limit − cost)·P/curr
    local s = 0
    if curr > 0 then s = max(0, P - ((limit - cost) * P) / curr) end
    return P - elapsed + s
  end
  sw_decide = function(st, now, limit, P, burst, cost)
    local start = now - mod(now, P)
    local prev, curr = counters(st, start, P)
    local elapsed = now - start
    local estimate = (prev * (P - elapsed)) / P + curr
    if estimate + cost <= limit + EPS then
      local after = curr + cost
      local nxt = nil
      if prev > 0 or after > 0 then nxt = { start, prev, after } end
      return true, floorUnits(limit - estimate - cost), resetAfter(prev, after, start, now, P), 0, nxt,
        start + 2 * P - now
    end
    return false, floorUnits(limit - estimate), resetAfter(prev, curr, start, now, P),
      ceilMs(waitFor(prev, curr, cost, limit, elapsed, P)), st, start + 2 * P - now
  end
  sw_adjust = function(st, now, limit, P, burst, delta)
    local start = now - mod(now, P)
    local prev, curr = counters(st, start, P)
    curr = curr + delta
    prev = max(0, prev + min(0, curr))
    local after = max(0, curr)
    if prev > 0 or after > 0 then return { start, prev, after }, start + 2 * P - now end
    return nil, start + 2 * P - now
  end
end

if has.l then
  -- algorithms/sliding-log.ts. State {t1, cost1, t2, cost2, …}, already pruned to (now − P, now]
  -- by the read (ZRANGEBYSCORE), which is the port of `prune`. (The TypeScript keeps a running
  -- total in its state; here the log is summed.)
  local function append(live, now, cost)
    local n = #live
    if n > 0 and live[n - 1] == now then live[n] = live[n] + cost
    else live[n + 1] = now; live[n + 2] = cost end
  end
  sl_decide = function(st, now, limit, P, burst, cost)
    local live = {}
    for i = 1, #st do live[i] = st[i] end
    local used = 0
    for i = 2, #live, 2 do used = used + live[i] end
    if used + cost <= limit then
      if cost > 0 then append(live, now, cost) end
      local ttl = 0
      if #live > 0 then ttl = live[#live - 1] + P - now end
      local nxt = nil
      if #live > 0 then nxt = live end
      return true, limit - used - cost, ttl, 0, nxt, ttl
    end
    -- Entries leave the window at t + P, oldest first; wait until enough cost has left.
    local excess = used + cost - limit
    local freed, retry = 0, 0
    for i = 1, #live, 2 do
      freed = freed + live[i + 1]
      if freed >= excess then
        retry = live[i] + P - now
        break
      end
    end
    local last = live[#live - 1] or now
    return false, max(0, limit - used), last + P - now, ceilMs(retry), st, last + P - now
  end
  sl_adjust = function(st, now, limit, P, burst, delta)
    local live = {}
    for i = 1, #st do live[i] = st[i] end
    if delta > 0 then
      append(live, now, delta)
    else
      -- Refund from the newest entries backwards.
      local refund = -delta
      local i = #live - 1
      while i >= 1 and refund > 0 do
        local c = live[i + 1]
        local take = min(c, refund)
        live[i + 1] = c - take
        refund = refund - take
        i = i - 2
      end
      local kept = {}
      for j = 1, #live, 2 do
        if live[j + 1] ~= 0 then kept[#kept + 1] = live[j]; kept[#kept + 1] = live[j + 1] end
      end
      live = kept
    end
    if #live == 0 then return nil, 0 end
    return live, live[#live - 1] + P - now
  end

  -- Entries in (now − P, now]: the port of `prune`.
  read_log = function(key, now, P)
    local r = pcall_('ZRANGEBYSCORE', key, '(' .. num(now - P), '+inf')
    if type(r) == 'table' and r.err then return CORRUPT end
    local st = {}
    for i = 1, #r do
      local t, c = string.match(r[i], '^([^:]+):?(%d*)$')
      t = tonumber(t)
      if t == nil then return CORRUPT end
      st[#st + 1] = t
      st[#st + 1] = tonumber(c) or 1
    end
    return st
  end
end

if has.c then
  -- algorithms/concurrency.ts. State {permitId1, expiresAt1, cost1, …}, pruned to expiresAt > now
  -- by the read, in expiry order.
  cc_maxExpiry = function(live)
    local m = 0
    for i = 2, #live, 3 do m = max(m, live[i]) end
    return m
  end
  cc_decide = function(st, now, limit, P, burst, cost, permitId)
    local live = {}
    for i = 1, #st do live[i] = st[i] end
    local inFlight = 0
    for i = 3, #live, 3 do inFlight = inFlight + live[i] end
    if inFlight + cost <= limit then
      if cost > 0 then
        local n = #live
        live[n + 1] = permitId; live[n + 2] = now + P; live[n + 3] = cost
      end
      local ttl = cc_maxExpiry(live) - now
      local nxt = nil
      if #live > 0 then nxt = live end
      return true, limit - inFlight - cost, max(0, ttl), 0, nxt, max(0, ttl)
    end
    -- If nobody releases, permits free up as they expire, earliest first (the read is in
    -- expiry order, the port of the sort).
    local freed, retry = 0, 0
    for i = 1, #live, 3 do
      freed = freed + live[i + 2]
      if inFlight - freed + cost <= limit then
        retry = live[i + 1] - now
        break
      end
    end
    return false, max(0, limit - inFlight), cc_maxExpiry(live) - now, ceilMs(retry), st, cc_maxExpiry(live) - now
  end
  cc_adjust = function(st, now)
    -- Permits are not charged by amount; reservations do not apply to concurrency.
    local live = {}
    for i = 1, #st do live[i] = st[i] end
    if #live == 0 then return nil, 0 end
    return live, max(0, cc_maxExpiry(live) - now)
  end

  -- Permits expiring after now: the port of `prune`.
  read_permits = function(key, now)
    local r = pcall_('ZRANGEBYSCORE', key, '(' .. num(now), '+inf', 'WITHSCORES')
    if type(r) == 'table' and r.err then return CORRUPT end
    local st = {}
    for i = 1, #r, 2 do
      local id, c = string.match(r[i], '^([^:]+):?(%d*)$')
      local e = tonumber(r[i + 1])
      if id == nil or e == nil then return CORRUPT end
      st[#st + 1] = id
      st[#st + 1] = e
      st[#st + 1] = tonumber(c) or 1
    end
    return st
  end
end

if has.l or has.c then
  local EMPTY = {}
  -- A ZSET member: the time (sliding-log) or permit id (concurrency), with ":cost" when cost > 1.
  entry = function(x, c)
    if type(x) == 'number' then x = num(x) end
    if c == 1 then return x end
    return x .. ':' .. num(c)
  end

  -- `nxt` (not nil) into the ZSET that held `old`: entries are only ever changed at the newest
  -- end, so only the differing tail is rewritten.
  write_zset = function(alg, key, old, nxt, ttl, now, P)
    local w = 2
    if alg == 'c' then w = 3 end
    local i = 1
    while i <= #old and i <= #nxt and old[i] == nxt[i] and old[i + 1] == nxt[i + 1] and (w == 2 or old[i + 2] == nxt[i + 2]) do
      i = i + w
    end
    for j = i, #old, w do
      if alg == 'l' then call('ZREM', key, entry(old[j], old[j + 1]))
      else call('ZREM', key, entry(old[j], old[j + 2])) end
    end
    for j = i, #nxt, w do
      if alg == 'l' then call('ZADD', key, num(nxt[j]), entry(nxt[j], nxt[j + 1]))
      else call('ZADD', key, num(nxt[j + 1]), entry(nxt[j], nxt[j + 2])) end
    end
    -- Drop what left the window (the pruned part of the state).
    if alg == 'l' then call('ZREMRANGEBYSCORE', key, '-inf', num(now - P))
    else call('ZREMRANGEBYSCORE', key, '-inf', num(now)) end
    call('PEXPIRE', key, num(ttl + pad))
  end
end

local DECIDE = {
  g = gcra_decide, t = tb_decide, i = tbi_decide, f = fw_decide, F = fwf_decide, s = sw_decide, l = sl_decide,
  c = cc_decide
}
local STRING_LEN = { t = 2, i = 3, s = 3 }

-- A rule's state at `key` (period P), nil when there is none, CORRUPT when unreadable.
local function read_state(alg, key, now, P, B)
  if alg == 'g' then return read_gcra(key, shift) end
  if alg == 'f' then return read_fixed(key, now, P, B, shift) end
  if alg == 'F' then return read_fixed_first(key, P, shift) end
  if alg == 'l' then return read_log(key, now, P) end
  if alg == 'c' then return read_permits(key, now) end
  return read_string(key, STRING_LEN[alg])
end

-- Store `nxt` (nil: delete) for `ttl` ms; `old` is what was read (nil: nothing).
local function write_state(alg, key, old, nxt, ttl, now, P)
  if nxt == nil or ttl <= 0 then
    call('DEL', key)
  elseif alg == 'g' then
    write_gcra(key, nxt[1], shift)
  elseif alg == 'f' and P < 0 then
    -- A calendar rule: as f, expiring at the end of its window (ttl from now).
    call('SET', key, nxt[2], 'PXAT', now + ttl + shift)
  elseif alg == 'f' or alg == 'F' then
    call('SET', key, nxt[2], 'PXAT', nxt[1] + P + shift)
  elseif alg == 'l' or alg == 'c' then
    write_zset(alg, key, old or EMPTY, nxt, ttl, now, P)
  else
    local parts = {}
    for j = 1, #nxt do parts[j] = num(nxt[j]) end
    call('SET', key, table.concat(parts, ' '), 'PX', ttl + pad)
  end
end

-- ─── the reply ───

local nargs = #ARGV
local out = {}
local on = 0 -- #out, kept by hand (the # operator is not free on a growing table)
local k = 1

-- The outcome of the operation being decided, flat, 4 values per rule: allowed, remaining,
-- resetAfterMs, retryAfterMs. (Operations run one after another, so it is reused.)
local res = {}

-- The one encoder of a decision (res) into the reply (the header's Output): the compact form
-- for one rule without a penalty, else the full form.
local function encode(spec, allowed, blockedFor)
  if spec.compact then
    if allowed then
      out[on + 1] = res[2]; out[on + 2] = res[3]; on = on + 2
    else
      out[on + 1] = -(res[2] + 1); out[on + 2] = res[3]; out[on + 3] = res[4]; on = on + 3
    end
    return
  end
  if allowed then out[on + 1] = 1 else out[on + 1] = 0 end
  out[on + 2] = blockedFor
  on = on + 2
  for j = 1, 4 * spec.n, 4 do
    if res[j] then out[on + 1] = 1 else out[on + 1] = 0 end
    out[on + 2] = res[j + 1]; out[on + 3] = res[j + 2]; out[on + 4] = res[j + 3]
    on = on + 4
  end
end

-- An operation that met unreadable state answers one string (nothing was written for it).
local function unreadable(key)
  on = on + 1
  out[on] = 'sluice: unreadable state at key ' .. key
end

-- ─── the fast path: decide and peek of one-key policies (spec.fast) ───
--
-- A guard, not a second decision: one key read, the algorithm's decide, one write, the encoder.
-- At the first operation it does not take, the batch goes on below.

while a <= nargs do
  local c = tonumber(ARGV[a])
  local cost, next_a = 1, a + 1
  if c < 0 then
    c = -c
    cost = tonumber(ARGV[a + 1])
    next_a = a + 2
  end
  local op = c % OPS_PER_SPEC
  local spec = specs[(c - op) / OPS_PER_SPEC]
  if op > OP_PEEK or not spec.fast then break end
  a = next_a
  local key = KEYS[k]
  k = k + 1
  local alg, r = spec.alg, spec.rules[1]
  local st = read_state(alg, key, now, r[2], r[3])
  if st == CORRUPT then
    unreadable(key)
  else
    -- combine (below) for one rule without a penalty: the rule's decision, charged if allowed
    -- (no other rule can deny it, no block is read or started). Called through combine, this
    -- costs Redis ~10% more CPU per decision.
    local ok, rem, reset, retry, nxt, ttl = DECIDE[alg](st, now, r[1], r[2], r[3], cost)
    if ok and op == OP_DECIDE and cost > 0 then write_state(alg, key, st, nxt, ttl, now, r[2]) end
    res[1], res[2], res[3], res[4] = ok, rem, reset, retry
    encode(spec, ok, 0)
  end
end
if a > nargs then
  out[on + 1] = serverNow
  return out
end

-- ─── everything else ───

local ADJUST = {
  g = gcra_adjust, t = tb_adjust, i = tbi_adjust, f = fw_adjust, F = fwf_adjust, s = sw_adjust, l = sl_adjust,
  c = cc_adjust
}

-- One value of the reply.
local function emit(x)
  on = on + 1
  out[on] = x
end

-- The operation being decided, beside `res`: per rule its state as read, and what charging it
-- leaves (next state, ttlMs).
local states, nexts, ttls = {}, {}, {}

-- evaluate.ts evaluate over `states`: every rule decides; the request passes only if all pass,
-- and only then are all charged. A penalty block in force (blockUntil > 0) denies; a denial
-- that commits starts the policy's block. Fills res, nexts, ttls. Returns allowed,
-- blockedForMs, and what the store writes: 'charge' (each rule's next state), 'block' (the
-- penalty block; with resetOnBlock, the rules' states go), or nil (nothing).
local function combine(spec, blockUntil, cost, commit, permit)
  local decide, rules, n = DECIDE[spec.alg], spec.rules, spec.n
  local allowed = true
  for i = 1, n do
    local r = rules[i]
    local ok, rem, reset, retry, nxt, ttl = decide(states[i], now, r[1], r[2], r[3], cost, permit)
    local j = 4 * i
    res[j - 3], res[j - 2], res[j - 1], res[j] = ok, rem, reset, retry
    nexts[i], ttls[i] = nxt, ttl
    if not ok then allowed = false end
  end
  if not allowed or blockUntil > 0 then
    -- Nothing is charged: a rule that would have passed reports what it has now (cost 0),
    -- not what it would have had after the charge.
    for i = 1, n do
      local j = 4 * i
      if res[j - 3] then
        local r = rules[i]
        local _, rem, reset = decide(states[i], now, r[1], r[2], r[3], 0, permit)
        res[j - 2], res[j - 1] = rem, reset
      end
    end
  end
  if blockUntil > 0 then return false, blockUntil - now, nil end
  if allowed then
    if commit and cost > 0 then return true, 0, 'charge' end
    return true, 0, nil
  end
  if commit and spec.blockMs > 0 then
    -- resetOnBlock: the block replaces the counts, and no rule waits longer than it.
    if spec.resetOnBlock then
      for j = 4, 4 * n, 4 do res[j] = min(res[j], spec.blockMs) end
    end
    return false, spec.blockMs, 'block'
  end
  return false, 0, nil
end

-- Decide or peek (commit false) over `states`, the rules' keys from KEYS[base], the block key
-- `bkey`: combine, write what it says, answer.
local function decide_op(spec, base, bkey, blockUntil, cost, commit, permit)
  local allowed, blockedFor, write = combine(spec, blockUntil, cost, commit, permit)
  if write == 'charge' then
    local alg, rules = spec.alg, spec.rules
    for i = 1, spec.n do
      write_state(alg, KEYS[base + i - 1], states[i], nexts[i], ttls[i], now, rules[i][2])
    end
  elseif write == 'block' then
    call('SET', bkey, num(now + spec.blockMs), 'PX', num(spec.blockMs + pad))
    if spec.resetOnBlock then
      for i = 0, spec.n - 1 do call('DEL', KEYS[base + i]) end
    end
  end
  encode(spec, allowed, blockedFor)
end

-- Reads the states of the n rules keyed from KEYS[base] into `states`. Returns the key of the
-- last unreadable one, or nil.
local function read_states(spec, base)
  local bad = nil
  for i = 1, spec.n do
    local r = spec.rules[i]
    local st = read_state(spec.alg, KEYS[base + i - 1], now, r[2], r[3])
    if st == CORRUPT then bad = KEYS[base + i - 1] end
    states[i] = st
  end
  return bad
end

-- evaluate.ts adjustState: charge `cost` (negative refunds) to every rule.
local function adjust_op(spec, base, cost)
  local adjust = ADJUST[spec.alg]
  for i = 1, spec.n do
    local r = spec.rules[i]
    local nxt, ttl = adjust(states[i], now, r[1], r[2], r[3], cost)
    write_state(spec.alg, KEYS[base + i - 1], states[i], nxt, ttl, now, r[2])
  end
  emit(1)
end

-- concurrency.release: drop the permit if it is still there.
local function release_op(key, permit)
  local old = states[1]
  local live = {}
  for j = 1, #old, 3 do
    if old[j] ~= permit then
      live[#live + 1] = old[j]; live[#live + 1] = old[j + 1]; live[#live + 1] = old[j + 2]
    end
  end
  if #live == #old then
    emit(0)
    return
  end
  -- Members are unique, so ZREM by id is exact.
  for j = 1, #old, 3 do
    if old[j] == permit then call('ZREM', key, entry(old[j], old[j + 2])) end
  end
  if #live == 0 then call('DEL', key)
  else
    call('ZREMRANGEBYSCORE', key, '-inf', num(now))
    call('PEXPIRE', key, num(max(1, cc_maxExpiry(live) - now) + pad))
  end
  emit(1)
end

-- ─── allotments ───

-- The epoch: the decision time at which this Redis first served an allotment (kept 30 days past
-- the last allot op). Gone when Redis lost its data.
local function allotment_epoch(ekey)
  local e = tonumber(call('GET', ekey))
  if e == nil then
    e = now
    call('SET', ekey, num(e), 'PX', 2592000000)
  else
    call('PEXPIRE', ekey, 2592000000)
  end
  return e
end

-- Whether units taken at decision time `at` may go back into rule r's state now: fixed-window
-- only into the window they were taken from.
local function may_return(alg, P, at)
  if alg ~= 'f' then return true end
  return at - mod(at, P) == now - mod(now, P)
end

-- A concurrency allot or give back (one rule): the node's member holds its slots; give back,
-- decide and grant on it.
local function allot_member(op, spec, key, epoch, give, cost, asked, ret, lttl, member)
  local r = spec.rules[1]
  local old = states[1]
  local live = {}
  for i = 1, #old do live[i] = old[i] end
  local held = 0
  for j = 1, #live, 3 do
    if live[j] == member then
      held = live[j + 2]
      table.remove(live, j); table.remove(live, j); table.remove(live, j)
      break
    end
  end
  if give then held = max(0, held - ret) end
  local others = 0
  for i = 3, #live, 3 do others = others + live[i] end
  local ok = op == OP_ALLOT and others + held + cost <= r[1]
  local granted = 0
  if ok then
    held = held + cost
    if now >= epoch + lttl then
      granted = min(asked, floor((r[1] - others - held) / 2))
      held = held + granted
    end
  end
  if held > 0 then
    -- The member lives as long as a request's slot would (the rule's period) past the node's
    -- last call: a node that dies frees its slots when its requests' would have expired.
    live[#live + 1] = member; live[#live + 1] = now + max(lttl, r[2]); live[#live + 1] = held
  end
  local ttl = 0
  if #live > 0 then ttl = max(0, cc_maxExpiry(live) - now) end
  local nxt = nil
  if #live > 0 then nxt = live end
  write_state('c', key, old, nxt, ttl, now, r[2])
  if op == OP_GIVE_BACK then
    emit(1)
    return
  end
  if ok then
    res[1], res[2], res[3], res[4] = true, max(0, r[1] - others - held), max(0, cc_maxExpiry(live) - now), 0
  else
    -- Permits free up as they expire, earliest first (the port of cc_decide's retry).
    local _, rem, reset, retry = cc_decide(old, now, r[1], r[2], r[3], cost, member)
    res[1], res[2], res[3], res[4] = false, rem, reset, retry
  end
  encode(spec, ok, 0)
  emit(granted); emit(now); emit(epoch)
end

-- Allot (6) or give back (7) over `states` (allotments do not go with a penalty block).
local function allot_op(op, spec, base, ekey, cost, asked, ret, retAt, lepoch, lttl, member)
  local alg, n = spec.alg, spec.n
  local epoch = allotment_epoch(ekey)
  local give = ret > 0 and lepoch == epoch
  if alg == 'c' then
    allot_member(op, spec, KEYS[base], epoch, give, cost, asked, ret, lttl, member)
    return
  end
  -- gcra, token-bucket, fixed-window: give back (a refund), then decide, then debit the grant.
  local adjust = ADJUST[alg]
  for i = 1, n do
    local r = spec.rules[i]
    if give and states[i] ~= nil and may_return(alg, r[2], retAt) then
      states[i] = adjust(states[i], now, r[1], r[2], r[3], -ret)
    end
  end
  if op == OP_GIVE_BACK then
    for i = 1, n do
      local r = spec.rules[i]
      local st = states[i]
      local ttl = 0
      if st ~= nil then
        local _, t = adjust(st, now, r[1], r[2], r[3], 0)
        ttl = t
      end
      write_state(alg, KEYS[base + i - 1], nil, st, ttl, now, r[2])
    end
    emit(1)
    return
  end
  local allowed = combine(spec, 0, cost, false, nil)
  local granted = 0
  if allowed then
    local least = res[2]
    for j = 6, 4 * n, 4 do least = min(least, res[j]) end
    if now >= epoch + lttl then granted = min(asked, floor(least / 2)) end
    for i = 1, n do
      local r = spec.rules[i]
      local nxt, ttl = nexts[i], ttls[i]
      if granted > 0 then
        nxt, ttl = adjust(nxt, now, r[1], r[2], r[3], granted)
        local j = 4 * i
        res[j - 2] = res[j - 2] - granted
        local _, _, reset = DECIDE[alg](nxt, now, r[1], r[2], r[3], 0)
        res[j - 1] = reset
      end
      write_state(alg, KEYS[base + i - 1], nil, nxt, ttl, now, r[2])
    end
  elseif give then
    -- Nothing charged; what was given back is kept.
    for i = 1, n do
      local r = spec.rules[i]
      local st = states[i]
      if st ~= nil then
        local _, ttl = adjust(st, now, r[1], r[2], r[3], 0)
        write_state(alg, KEYS[base + i - 1], nil, st, ttl, now, r[2])
      end
    end
  end
  encode(spec, allowed, 0)
  emit(granted); emit(now); emit(epoch)
end

-- ─── the batch, from the first operation the fast path did not take ───

while a <= nargs do
  local c = tonumber(ARGV[a])
  a = a + 1
  local cost, member, windowMs = 1, '', 0
  local extended = c < 0
  if extended then
    c = -c
    cost = tonumber(ARGV[a])
    a = a + 1
  end
  local op = c % OPS_PER_SPEC
  local spec = specs[(c - op) / OPS_PER_SPEC]
  local alg, n = spec.alg, spec.n
  local asked, ret, retAt, lepoch, lttl = 0, 0, 0, 0, 0
  if op == OP_ALLOT then
    asked, ret, retAt = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
    lepoch, lttl = tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])
    a = a + 5
  elseif op == OP_GIVE_BACK then
    ret, retAt, lepoch, lttl = cost, tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
    cost = 0
    a = a + 3
  end
  if extended and (op == OP_RELEASE or (op == OP_DECIDE and alg == 'c') or (op >= OP_ALLOT and alg == 'c')) then
    member = ARGV[a]
    a = a + 1
  elseif op == OP_SET then
    windowMs = tonumber(ARGV[a])
    a = a + 1
  end
  local hasBlock = spec.blockMs > 0 or op == OP_RESET
  local base = k
  k = k + n
  local bkey = nil
  if hasBlock then
    bkey = KEYS[k]
    k = k + 1
  end
  local ekey = nil
  if op >= OP_ALLOT then
    ekey = KEYS[k]
    k = k + 1
  end

  if op == OP_RESET then
    -- reset: forget everything about the key.
    for i = 0, n - 1 do call('DEL', KEYS[base + i]) end
    call('DEL', bkey)
    emit(1)
  elseif op == OP_SET then
    -- set count (first-request fixed windows): every rule's window holds `cost` units and ends
    -- windowMs from now. The penalty block is left alone.
    for i = 0, n - 1 do
      if windowMs > 0 then call('SET', KEYS[base + i], cost, 'PXAT', now + windowMs + shift)
      else call('DEL', KEYS[base + i]) end
    end
    emit(1)
  else
    local bad = read_states(spec, base)
    local blockUntil = 0
    if bkey and not bad then
      local b = read_string(bkey, 1)
      if b == CORRUPT then bad = bkey elseif b and b[1] > now then blockUntil = b[1] end
    end
    if bad then
      unreadable(bad)
    elseif op <= OP_PEEK then
      decide_op(spec, base, bkey, blockUntil, cost, op == OP_DECIDE, member)
    elseif op == OP_ADJUST then
      adjust_op(spec, base, cost)
    elseif op == OP_RELEASE then
      release_op(KEYS[base], member)
    else
      allot_op(op, spec, base, ekey, cost, asked, ret, retAt, lepoch, lttl, member)
    end
  end
end
out[on + 1] = serverNow
return out
