--[[
  Report a record's state, as inspect-1.lua does, and for a pending or absent record the steps
  recorded under its key (their index and name; never their results), so that an operator sees
  how far a running, crashed or released run got.

  Input:
    KEYS[1] record key
    KEYS[2] steps key (see claim-3.lua)

  Output: as inspect-1.lua; absent and pending replies end with { index, name, ... } (any order)
]]
local rcall = redis.call

-- inspect-1.lua's text, as a function (see claim-3.lua).
local function inspectRecord()
  --- @include inspect-1
end

local reply = inspectRecord()
if reply[1] == 2 then
  return reply
end

local names = {}
for _, field in ipairs(rcall('HKEYS', KEYS[2])) do
  if string.sub(field, 1, 2) == 'n:' then
    names[#names + 1] = string.sub(field, 3)
    names[#names + 1] = rcall('HGET', KEYS[2], field)
  end
end
reply[#reply + 1] = names
return reply
