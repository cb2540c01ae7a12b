--[[
  Store the response of a claimed key, only if the caller still owns its lease (fencing):
  a handler that outlived its lease must not overwrite the work of the owner that took over.

  Input:
    KEYS[1] record key
    ARGV[1] owner token of the caller
    ARGV[2] response meta (status, headers, body type)
    ARGV[3] response body
    ARGV[4] result retention in milliseconds

  Output:
    1 stored
    0 not the owner (lease expired, released or taken over): nothing changed
]]
local rcall = redis.call
local key = KEYS[1]
local record = rcall('HMGET', key, 's', 'o')

if record[1] ~= 'p' or record[2] ~= ARGV[1] then
  return 0
end

rcall('HSET', key, 's', 'c', 'm', ARGV[2], 'b', ARGV[3])
rcall('PEXPIRE', key, ARGV[4])
return 1
