--[[
  Store the response of a claimed key, only if the caller still owns its lease (fencing):
  a handler that outlived its lease must not overwrite the work of the owner that took over.
  Notifies waiting duplicates (see claim-1.lua), handing them the response.

  Input:
    KEYS[1] record key
    ARGV[1] owner token of the caller
    ARGV[2] response meta (status, headers, body type)
    ARGV[3] response body
    ARGV[4] result retention in milliseconds
    ARGV[5] how to notify waiters: 'PUBLISH', or 'SPUBLISH' on a Cluster

  Output:
    1 stored
    0 not the owner (lease expired, released or taken over): nothing changed
]]
local rcall = redis.call
local key = KEYS[1]
local value = rcall('GET', key)
if not value then
  return 0
end

local state, fingerprint, owner, waiting = cmsgpack.unpack(value)
if state ~= 'p' or owner ~= ARGV[1] then
  return 0
end

-- The completion time goes last, so that every reader of the first four values (claim-1.lua,
-- records written before it existed) is unaffected; inspect-1.lua derives the age from it.
-- TIME before a write is safe: scripts replicate their effects (Redis 5+; the only mode in 7).
local now = rcall('TIME')
local completedAt = now[1] * 1000 + math.floor(now[2] / 1000)
rcall('SET', key, cmsgpack.pack('c', fingerprint, ARGV[2], ARGV[3], completedAt), 'PX', ARGV[4])
if waiting == 1 then
  -- The message carries the response, so that a waiter with the same fingerprint replays it
  -- without another round trip: 'c', the byte lengths of fingerprint and meta (big-endian
  -- uint16, uint32), then fingerprint, meta and body. A body over 64 KiB is not sent (a bare
  -- 'c': waiters claim it), so that large responses never pile up in a subscriber's output
  -- buffer up to Redis's pubsub limit, which would disconnect it.
  if #ARGV[3] <= 65536 and #fingerprint < 65536 then
    rcall(ARGV[5], key,
      'c' .. struct.pack('>I2I4', #fingerprint, #ARGV[2]) .. fingerprint .. ARGV[2] .. ARGV[3])
  else
    rcall(ARGV[5], key, 'c')
  end
end
return 1
