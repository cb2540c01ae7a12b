--[[
  Claim an idempotency key, or report who holds it, in one round trip; a claim that takes the key
  enters the listing index (see listing-index.lua) with what operators list it by.

  A record is one string (GET/SET): a MessagePack sequence, so that a small completed response
  costs one allocation, not a hash table.
    pending:   'p', fingerprint, owner token, waiting (1 when a duplicate waits to be notified),
               its listing entry (see listing-index.lua; missing before script version 6, and
               for a key the index cannot hold)
    completed: 'c', fingerprint, meta, body, completion time (ms since the epoch, Redis's clock;
               missing in records written before script version 5), the listing entry of its
               claim (as pending)
               or 'C', the same with 1 in the body's place: a body over 4 KiB lives apart, at
               the record key and ':b' (since script version 7; complete-4.lua)

  The app claims most keys without this script (redis-idempotency.store.ts): SET NX PX GET with
  a pending record it packs itself (redis-records.ts), which replies the record in the way
  (bounded by storing large bodies apart), then HSET of the listing entry. This script claims
  for a duplicate that waits (which marks the record), for a resumable run (claim-3.lua) and
  where a key's body could not live apart.

  Readers unpack the values they need and ignore any that follow, so a value appended at the
  end changes no reader.

  State and fingerprint come first, so a 409 or 422 reads only the record's first bytes
  (GETRANGE): what a cheap request costs Redis never grows with the stored body. Only a replay,
  or a pending record (which holds no body), is read whole. Neither touches the index: only a
  claim that takes the key does.

  Input:
    KEYS[1] record key
    KEYS[2] the runs of the record's listing space (or KEYS[1]: no index)
    ARGV[1] owner token of the caller
    ARGV[2] request fingerprint ('' = do not compare)
    ARGV[3] lease in milliseconds
    ARGV[4] '1' when the caller waits for the outcome: completion and release then publish to
            the channel named like the key
    ARGV[5] route, ARGV[6] label: what operators list the claim by ('' and '': none)
    ARGV[7] the record's id in its listing space: the key's trailing {hash tag}
    ARGV[8] '1': prune the index (listing-prune.lua) if the claim takes the key; it also does in
            one claim in 128 of its own

  Output: { code, lease ms left, meta, body }
    1 claimed      the caller now owns a fresh lease
    2 in progress  another owner holds the lease; element 2 is its remaining time
    3 mismatch     the key was first used with another fingerprint (wins over 2 and 4)
    4 completed    elements 3 and 4 are the stored response
  A pending record of the caller's own token is this claim sent again (ioredis resends a command
  whose reply was lost with its connection): 1, claimed, as the first send answered.
]]
local rcall = redis.call
local key = KEYS[1]
-- A record is never empty, so '' is a missing key.
local head = rcall('GETRANGE', key, 0, 127)

-- Takes the key: a pending record of the caller's.
local function take()
  if KEYS[2] == key then
    rcall('SET', key, cmsgpack.pack('p', ARGV[2], ARGV[1], 0), 'PX', ARGV[3])
    return {1}
  end
  -- Listed (see listing-index.lua). A retry of a stuck claim or of a half-done run takes its
  -- entry over: running again, its reported mark cleared.
  local time = rcall('TIME')
  local now = time[1] * 1000 + math.floor(time[2] / 1000)
  local entry = cmsgpack.pack(now, now + ARGV[3], ARGV[5], ARGV[6], 0, 0)
  rcall('SET', key, cmsgpack.pack('p', ARGV[2], ARGV[1], 0, entry), 'PX', ARGV[3])
  rcall('HSET', KEYS[2], ARGV[7], entry)
  if now % 128 == 0 or ARGV[8] == '1' then
    local runs, id = KEYS[2], ARGV[7]
    --- @include listing-prune
  end
  return {1}
end

if head == '' then
  return take()
end

-- The first two values, from the head alone; a fingerprint too long for it (custom adapters)
-- fails to unpack here and is compared below, from the whole record.
local ok, _, headState, headFingerprint = pcall(cmsgpack.unpack_limit, head, 2)
if ok and ARGV[2] ~= '' and headFingerprint ~= '' and headFingerprint ~= ARGV[2] then
  return {3}
end
if ok and headState == 'p' and ARGV[4] ~= '1' then
  local whole, _, _, _, owner = pcall(cmsgpack.unpack_limit, head, 3)
  if whole and owner == ARGV[1] then
    return {1}
  end
  if whole then
    return {2, rcall('PTTL', key)}
  end
end

local state, fingerprint, third, fourth, fifth = cmsgpack.unpack(rcall('GET', key))

if ARGV[2] ~= '' and fingerprint ~= '' and fingerprint ~= ARGV[2] then
  return {3}
end

if state == 'c' then
  return {4, 0, third, fourth}
end
if state == 'C' then
  local body = rcall('GET', key .. ':b')
  if body then
    return {4, 0, third, body}
  end
  -- Its body is gone (evicted: the larger key of the two): so is the record, and the key is
  -- free, as it would be had Redis evicted the record.
  rcall('DEL', key)
  return take()
end

if third == ARGV[1] then
  return {1}
end

if ARGV[4] == '1' and fourth ~= 1 then
  -- The listing entry stays, for the completion.
  local waiting = fifth and cmsgpack.pack('p', fingerprint, third, 1, fifth)
    or cmsgpack.pack('p', fingerprint, third, 1)
  rcall('SET', key, waiting, 'KEEPTTL')
end
return {2, rcall('PTTL', key)}
