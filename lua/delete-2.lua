--[[
  Delete a record whatever its state and owner, as delete-1.lua does, and the steps recorded
  under its key: an operator freeing a key wants the next run to start from the first step.

  Input:
    KEYS[1] record key
    KEYS[2] steps key (see claim-2.lua)
    ARGV[1] as delete-1.lua

  Output: as delete-1.lua (whether there was a live record; steps alone count for nothing)
]]
local rcall = redis.call

-- delete-1.lua's text, as a function (see claim-2.lua).
local function deleteRecord()
  --- @include delete-1
end

rcall('DEL', KEYS[2])
return deleteRecord()
