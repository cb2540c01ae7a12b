--[[
  List records by state, or count them (operators: IdempotencyStore.list and countRecords), from
  the listing index the other scripts keep (see listing-index.lua): never the keyspace. Reads the
  claims of each space whole (running, stuck and half-done records: few), and the completed
  records from their done lists a page at a time, found by time with a binary search. Writes
  nothing.

  No KEYS: the spaces are named in ARGV, and the records and steps their ids name are read too.
  On a single node there is one space. On a Cluster this runs on each master with the spaces of
  the slots it serves, which is why it declares no key: a script may read keys of several slots
  of its own node, which a script without flags may (Redis 6 and 7).

  Input:
    ARGV[1]  'list' or 'count'
    ARGV[2]  what precedes an id in a record key (the client's keyPrefix and the store's)
    ARGV[3]  state listed: running, stuck, half_done or completed ('count': ignored)
    ARGV[4]  stuckAfterMs: a live claim made longer ago is stuck ('': none)
    ARGV[5]  '=' and the route listed ('': every route)
    ARGV[6]  minAgeMs, ARGV[7] maxAgeMs ('': none)
    ARGV[8]  'newest' or 'oldest' first
    ARGV[9]  limit: at most this many items, and one more when more follow
    ARGV[10] the cursor's time and ARGV[11] its id: items after it only ('': from the start)
    ARGV[12] what the spaces' names start with: '<client's keyPrefix><prefix>ix'
    ARGV[13...] what each space's name goes on with, before ':': '' on a single node, its
             '{<tag>}' on a Cluster

  Output:
    list   { { since, id, leaseMsLeft or false, route or false, label or false,
               { index, name, ... }, meta or false, reported (0 or 1) }, ... } in order, at
           most limit + 1
    count  { running, stuck, half_done, completed }
]]
local rcall = redis.call
--- @include listing-index

local mode, records, wanted = ARGV[1], ARGV[2], ARGV[3]
local stuckAfter = tonumber(ARGV[4])
local wantedRoute = ARGV[5] ~= '' and string.sub(ARGV[5], 2) or nil
local now = nowMs()
-- The window of times: since <= newestTime (minAgeMs), since >= oldestTime (maxAgeMs).
local newestTime = ARGV[6] ~= '' and now - tonumber(ARGV[6]) or math.huge
local oldestTime = ARGV[7] ~= '' and now - tonumber(ARGV[7]) or -math.huge
local newest = ARGV[8] ~= 'oldest'
local limit = tonumber(ARGV[9])
local cursorTime, cursorId = tonumber(ARGV[10]), ARGV[11]
if newest and cursorTime then
  newestTime = math.min(newestTime, cursorTime)
elseif cursorTime then
  oldestTime = math.max(oldestTime, cursorTime)
end

-- Whether id a sorts after id b, byte by byte as sorted sets and the store's cursor order them
-- (Lua's < follows the server's locale).
local function greater(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x > y
    end
  end
  return #a > #b
end

-- Whether an item at (since, id) comes before another: the order pages go by.
local function before(since, id, otherSince, otherId)
  if since ~= otherSince then
    return (since > otherSince) == newest
  end
  return id ~= otherId and greater(id, otherId) == newest
end

-- Whether an item belongs on this page: its time in the window, after the cursor, its route.
local function onPage(since, id, itemRoute)
  if since > newestTime or since < oldestTime or (wantedRoute and itemRoute ~= wantedRoute) then
    return false
  end
  return not cursorTime or before(cursorTime, cursorId, since, id)
end

-- The steps recorded under id: { index, name, ... }; and what listing keeps with them.
local function stepsOf(id)
  local key = records .. id .. ':steps'
  local fields = {}
  for _, field in ipairs(rcall('HKEYS', key)) do
    if string.sub(field, 1, 2) == 'n:' then
      fields[#fields + 1] = field
    end
  end
  local names = {}
  if #fields > 0 then
    for i, name in ipairs(rcall('HMGET', key, unpack(fields))) do
      names[#names + 1] = string.sub(fields[i], 3)
      names[#names + 1] = name
    end
  end
  return names
end

local items, counts = {}, { running = 0, stuck = 0, half_done = 0, completed = 0 }

-- Counts an item of `state`, or keeps it when it is listed (its steps are read once the page
-- is cut: see the end).
local function found(state, since, id, lease, route, label, reported)
  counts[state] = counts[state] + 1
  if mode == 'list' and state == wanted and onPage(since, id, route) then
    items[#items + 1] = { since, id, lease, route, label, {}, false, reported }
  end
end

-- A claim's entry: running or stuck while its record lives; once its lease ran out (its process
-- died) or it was released, half done if it left steps, else stuck (died) or nothing (released).
-- A record completed by an older release of this package (which kept no index) leaves its entry
-- behind: not listed (pruneRuns forgets it).
local function entry(id, packed)
  local claimedAt, leaseEnd, route, label, released, reported = cmsgpack.unpack(packed)
  local head = rcall('GETRANGE', records .. id, 0, 1)
  if head == '\161p' then
    local held = stuckAfter and now - claimedAt > stuckAfter
    local lease = rcall('PTTL', records .. id)
    found(held and 'stuck' or 'running', claimedAt, id, lease, route, label, 0)
  elseif head == '' and rcall('EXISTS', records .. id .. ':steps') == 1 then
    found('half_done', released > 0 and released or leaseEnd, id, false, route, label, reported)
  elseif head == '' and released == 0 then
    found('stuck', claimedAt, id, leaseEnd - now, route, label, 0)
  end
end

-- The time a done list's element holds (see listing-index.lua), and its id.
local function element(value)
  return tonumber(string.sub(value, 1, 13)), string.sub(value, 14)
end

-- The first place in a done list whose completion time is `time` or later (binary search: the
-- list is in completion order).
local function firstFrom(done, size, time)
  local low, high = 0, size
  while low < high do
    local middle = math.floor((low + high) / 2)
    if element(rcall('LINDEX', done, middle)) < time then
      low = middle + 1
    else
      high = middle
    end
  end
  return low
end

-- A completed record as its done list names it, if it is still that completion (not deleted,
-- expired, nor completed anew since).
local function completedRecord(id, at)
  local value = rcall('GET', records .. id)
  if not value then
    return
  end
  local state, _, meta, _, completedAt, claim = cmsgpack.unpack(value)
  if (state == 'c' or state == 'C') and completedAt == at then
    local route, label = false, false
    if claim then
      route, label = select(3, cmsgpack.unpack(claim))
    end
    return meta, route, label
  end
end

-- The completed records of one done list on this page: those completed in the window (and
-- still kept), read from the window's newest (or oldest) end a batch at a time until the page
-- is full and the last completion time read is done with (ties are ordered by id). Newest
-- first, the reading stops at the first one too old, where a binary search finds the start of
-- the window oldest first.
local function completedRecords(done, ttl)
  local size = rcall('LLEN', done)
  local lowest = math.max(oldestTime, now - ttl + 1)
  local from = newest and 0 or firstFrom(done, size, lowest)
  local to = newestTime == math.huge and size - 1 or firstFrom(done, size, newestTime + 1) - 1
  local taken, last = 0, nil
  while from <= to do
    local batch
    if newest then
      batch = rcall('LRANGE', done, math.max(from, to - 63), to)
      to = to - #batch
    else
      batch = rcall('LRANGE', done, from, math.min(to, from + 63))
      from = from + #batch
    end
    for k = newest and #batch or 1, newest and 1 or #batch, newest and -1 or 1 do
      local at, id = element(batch[k])
      if (taken > limit and at ~= last) or at < lowest then
        return
      end
      local meta, route, label = completedRecord(id, at)
      if meta and onPage(at, id, route) then
        items[#items + 1] = { at, id, false, route, label, {}, meta, 0 }
        taken, last = taken + 1, at
      end
    end
  end
end

-- How many completed records a done list holds: those completed within its ttl. (One gone
-- another way than expiry or delete(), evicted or deleted by hand, is counted until its time
-- runs out; listing skips it.)
local function completedCount(done, ttl)
  local size = rcall('LLEN', done)
  return size - firstFrom(done, size, now - ttl + 1)
end

for i = 13, #ARGV do
  local space = ARGV[12] .. ARGV[i] .. ':'
  -- One probe skips a space without claims to list (on a Cluster, most of the thousands a
  -- node serves).
  if (mode == 'count' or wanted ~= 'completed') and rcall('EXISTS', space .. 'runs') == 1 then
    local runs = rcall('HGETALL', space .. 'runs')
    for j = 1, #runs, 2 do
      if runs[j] ~= '~' then
        entry(runs[j], runs[j + 1])
      end
    end
  end
  if mode == 'count' or wanted == 'completed' then
    for _, ttl in ipairs(rcall('SMEMBERS', space .. 'ttls')) do
      local done = space .. 'done:' .. ttl
      if mode == 'count' then
        counts.completed = counts.completed + completedCount(done, tonumber(ttl))
      else
        completedRecords(done, tonumber(ttl))
      end
    end
  end
end

if mode == 'count' then
  return { counts.running, counts.stuck, counts.half_done, counts.completed }
end
table.sort(items, function(a, b)
  return before(a[1], a[2], b[1], b[2])
end)
local page = {}
for i = 1, math.min(#items, limit + 1) do
  page[i] = items[i]
  -- The steps of the page's claims alone: an outage may leave thousands half done.
  if wanted ~= 'completed' then
    page[i][6] = stepsOf(page[i][2])
  end
end
return page
