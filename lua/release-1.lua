--[[
  Give up a claim so that a retry can run the handler again, only if the caller still owns it.

  Input:
    KEYS[1] record key
    ARGV[1] owner token of the caller

  Output:
    1 released
    0 not the owner, or already completed: nothing changed
]]
local rcall = redis.call
local key = KEYS[1]
local record = rcall('HMGET', key, 's', 'o')

if record[1] ~= 'p' or record[2] ~= ARGV[1] then
  return 0
end

rcall('DEL', key)
return 1
