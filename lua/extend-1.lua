--[[
  Renew the lease of a running handler (heartbeat), only if the caller still owns it.

  Input:
    KEYS[1] record key
    ARGV[1] owner token of the caller
    ARGV[2] new lease in milliseconds, counted from now

  Output:
    1 extended
    0 not the owner, or already completed: nothing changed
]]
local rcall = redis.call
local key = KEYS[1]
local value = rcall('GET', key)
if not value then
  return 0
end

local state, _, owner = cmsgpack.unpack(value)
if state ~= 'p' or owner ~= ARGV[1] then
  return 0
end

rcall('PEXPIRE', key, ARGV[2])
return 1
