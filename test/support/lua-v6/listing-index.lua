--[[
  The listing index (IdempotencyStore.list), as the scripts that keep it read and write it:
  included by the loader, not a command of its own. A record key `<prefix>{<hash>}` is listed in
  one index space: `<prefix>ix:` on a single node; on a Cluster `<prefix>ix{<tag>}:`, with a tag
  of the record's slot, so that a script touches keys of one slot only. A space holds:
    <space>runs        hash: per claim not completed nor deleted (running, stuck, half done),
                       MessagePack (claim time, lease end, route, label, release time or 0,
                       reported 1 or 0); field '~': where listing-prune.lua goes on
    <space>done:<ttl>  list: completed records kept <ttl> ms, in completion order, each its
                       completion time (13 digits) and id; pruned from the head, and
                       expiring with its newest record
    <space>ttls        set: the <ttl>s of the done lists
  Fields and ids are a record key's trailing `{<hash>}`. A pending record keeps its claim's entry
  (claim-2.lua), and its completed record what the entry carried, for listing. Times are ms
  since the epoch, Redis's clock.

  A first execution pays an HSET (claim), an HDEL, an RPUSH and a PEXPIRE (completion); a 409, a 422 and a
  replay nothing. Keys of one space share their slot, and so do the records and steps their ids
  name: a script given one of them (in KEYS) may touch the others (listing-prune.lua,
  delete-4.lua, list-0.lua). A script given the record key in place of its index keys (a key the
  index cannot hold: no trailing hash tag, or on a Cluster a prefix whose braces would move the
  index to another slot) keeps no index.
]]
local function listingId(key)
  return string.match(key, '{[^{}]*}$')
end

local function nowMs()
  local now = redis.call('TIME')
  return now[1] * 1000 + math.floor(now[2] / 1000)
end
