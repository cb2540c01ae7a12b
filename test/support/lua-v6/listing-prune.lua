--[[
  Forgets the listing entries nothing lists any more (see listing-index.lua), a few at a time as
  claims go by: claim-2.lua runs this text in one claim in 128, on eight entries, so that a
  first execution rarely pays for it and entries never pile up. Forgotten: a released run whose
  steps expired, a claim whose process died without steps more than a day ago
  (STUCK_RETENTION_MS in redis-listing.ts), a record completed by an older release of this
  package (which kept no index). Half-done runs stay while their steps do. Included by the
  loader in a block where `runs` (the runs hash), `key` (the record key, its id `id`) and `now`
  are set.
]]
local prefix = string.sub(key, 1, #key - #id)
local scan = redis.call('HSCAN', runs, redis.call('HGET', runs, '~') or '0', 'COUNT', 8)
redis.call('HSET', runs, '~', scan[1])
for i = 1, #scan[2], 2 do
  local old = scan[2][i]
  if old ~= '~' then
    local claimedAt, _, _, _, released = cmsgpack.unpack(scan[2][i + 1])
    local head = redis.call('GETRANGE', prefix .. old, 0, 1)
    if head == '\161c' or (head == '' and redis.call('EXISTS', prefix .. old .. ':steps') == 0
        and (released > 0 or claimedAt < now - 86400000)) then
      redis.call('HDEL', runs, old)
    end
  end
end
