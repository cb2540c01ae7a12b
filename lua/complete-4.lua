--[[
  Store the response of a claimed key, only if the caller still owns its lease (fencing):
  a handler that outlived its lease must not overwrite the work of the owner that took over.
  Notifies waiting duplicates (see claim-2.lua), handing them the response. In the listing index
  (see listing-index.lua) the claim's entry goes, and the record joins the completed ones.

  Input:
    KEYS[1] record key
    KEYS[2] the runs of the record's listing space (or KEYS[1]: no index)
    KEYS[3] its set of ttls
    KEYS[4] its completed records kept ARGV[4] ms (done:<ttl>)
    ARGV[1] owner token of the caller
    ARGV[2] response meta (status, headers, body type)
    ARGV[3] response body
    ARGV[4] result retention in milliseconds
    ARGV[5] how to notify waiters: 'PUBLISH', or 'SPUBLISH' on a Cluster
    ARGV[6] '1': add ARGV[4] to the set of ttls (the store does now and then: a ttl stays in
            the set while its done list lives)
    ARGV[7] the record's id in its listing space: the key's trailing {hash tag}
    ARGV[8] '1': a body over 4 KiB is stored apart, at the record key and ':b' (its slot); the
            record is then 'C', with 1 in its body's place (see claim-2.lua)

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

local state, fingerprint, owner, waiting, entry = cmsgpack.unpack(value)
if state ~= 'p' or owner ~= ARGV[1] then
  return 0
end

-- The completion time goes after the first four values, so that every reader of those
-- (claim-2.lua, records written before it existed) is unaffected; inspect-1.lua derives the age
-- from it. TIME before a write is safe: scripts replicate their effects (Redis 5+; the only mode
-- in 7). The claim's listing entry follows, for what it carried.
local time = rcall('TIME')
local completedAt = time[1] * 1000 + math.floor(time[2] / 1000)
local completed, body = 'c', ARGV[3]
if #body > 4096 and ARGV[8] == '1' then
  -- 1 in the body's place: the waiting flag's value, so that a release before script version 7,
  -- which does not know 'C', never marks it as a pending record a duplicate waits for.
  completed, body = 'C', 1
  rcall('SET', key .. ':b', ARGV[3], 'PX', ARGV[4])
end
local record = entry and cmsgpack.pack(completed, fingerprint, ARGV[2], body, completedAt, entry)
  or cmsgpack.pack(completed, fingerprint, ARGV[2], body, completedAt)
rcall('SET', key, record, 'PX', ARGV[4])
if KEYS[2] ~= key then
  -- Listed as completed (see listing-index.lua): one list per ttl, in completion order, so that
  -- its head expires first. One completion in 8 drops the expired head, up to 16 (listing skips
  -- them meanwhile).
  if entry then
    rcall('HDEL', KEYS[2], ARGV[7])
  end
  rcall('RPUSH', KEYS[4], completedAt .. ARGV[7])
  -- Every record it names expires with the newest at the latest: so does the list, so that an
  -- index nobody completes into any more does not outlive its records.
  rcall('PEXPIRE', KEYS[4], ARGV[4])
  if completedAt % 8 == 0 then
    local expired, head, oldest = 0, rcall('LRANGE', KEYS[4], 0, 15), completedAt - ARGV[4]
    while expired < #head and tonumber(string.sub(head[expired + 1], 1, 13)) <= oldest do
      expired = expired + 1
    end
    if expired > 0 then
      rcall('LTRIM', KEYS[4], expired, -1)
    end
  end
  if ARGV[6] == '1' then
    rcall('SADD', KEYS[3], ARGV[4])
  end
end
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
