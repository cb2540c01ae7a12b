--[[
  Claim an idempotency key, or report who holds it, in one round trip.

  Input:
    KEYS[1] record key (a hash: s state, o owner token, f fingerprint, m meta, b body)
    ARGV[1] owner token of the caller
    ARGV[2] request fingerprint ('' = do not compare)
    ARGV[3] lease in milliseconds

  Output: { code, lease ms left, meta, body }
    1 claimed      the caller now owns a fresh lease
    2 in progress  another owner holds the lease; element 2 is its remaining time
    3 mismatch     the key was first used with another fingerprint (wins over 2 and 4)
    4 completed    elements 3 and 4 are the stored response
]]
local rcall = redis.call
local key = KEYS[1]
local record = rcall('HMGET', key, 's', 'f', 'm', 'b')
local state, fingerprint = record[1], record[2]

if not state then
  rcall('HSET', key, 's', 'p', 'o', ARGV[1], 'f', ARGV[2])
  rcall('PEXPIRE', key, ARGV[3])
  return {1}
end

if ARGV[2] ~= '' and fingerprint and fingerprint ~= '' and fingerprint ~= ARGV[2] then
  return {3}
end

if state == 'c' then
  return {4, 0, record[3], record[4]}
end

return {2, rcall('PTTL', key)}
