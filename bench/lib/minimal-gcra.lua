-- The ceiling's script: a minimal GCRA (GET, TIME, SET PX), one key per call.
-- KEYS[1] the key; ARGV[1] emission interval (ms); ARGV[2] tolerance τ (ms).
-- Returns {allowed (1/0), retry after (ms)}.
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local interval = tonumber(ARGV[1])
local tau = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
local new = tat + interval
if new - tau > now then return {0, new - tau - now} end
redis.call('SET', KEYS[1], new, 'PX', new - now)
return {1, 0}
