--[[
  Delete a record whatever its state and owner, as delete-1.lua does, and the steps recorded
  under its key: an operator freeing a key wants the next run to start from the first step.

  Input:
    KEYS[1] record key
    KEYS[2] steps key (see claim-2.lua)
    ARGV[1] as delete-1.lua

  Output:
    1 deleted a live record, or the steps of one that is gone (released, expired)
    0 neither: nothing changed
]]
local rcall = redis.call

-- delete-1.lua's text, as a function (see claim-2.lua).
local function deleteRecord()
  --- @include delete-1
end

local steps = rcall('DEL', KEYS[2])
if deleteRecord() == 1 or steps == 1 then
  return 1
end
return 0
