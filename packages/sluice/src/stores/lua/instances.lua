-- instances.lua: heartbeat of one sluice Redis store and count of the live ones.
-- KEYS[1]  the instances ZSET (member: instance id, score: last seen, server time in ms)
-- ARGV[1]  this instance's id; ARGV[2] how long an instance counts as live after its last
--          heartbeat (ms); ARGV[3] "1" to leave (remove this instance) instead of heartbeating.
-- Returns the number of live instances. The key expires when nobody heartbeats any more.
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
if ARGV[3] == '1' then
  redis.call('ZREM', KEYS[1], ARGV[1])
else
  redis.call('ZADD', KEYS[1], now, ARGV[1])
  redis.call('PEXPIRE', KEYS[1], ttl)
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - ttl)
return redis.call('ZCARD', KEYS[1])
