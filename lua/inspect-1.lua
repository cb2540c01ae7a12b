--[[
  Report a record's state without changing it (operators, support tools). Never replies with
  the body, only its size: unpacking the record reads it, which an operator call can afford.

  Input:
    KEYS[1] record key

  Output: { code, ... }
    0 absent     no live record
    1 pending    { 1, lease ms left }
    2 completed  { 2, meta, body bytes, ms since completion, ttl ms left }; the age is -1 for a
                 record written before completions carried their time (see claim-2.lua)
]]
local rcall = redis.call
local key = KEYS[1]
local value = rcall('GET', key)
if not value then
  return {0}
end

local ttl = rcall('PTTL', key)
local state, _, meta, body, completedAt = cmsgpack.unpack(value)
if state ~= 'c' and state ~= 'C' then
  return {1, ttl}
end
-- A body over 4 KiB lives apart (see claim-2.lua).
local bytes = state == 'C' and rcall('STRLEN', key .. ':b') or #body

local age = -1
if completedAt then
  local now = rcall('TIME')
  -- Never negative: after a failover the clock is another node's, possibly a little behind.
  age = math.max(now[1] * 1000 + math.floor(now[2] / 1000) - completedAt, 0)
end
return {2, meta, bytes, age, ttl}
