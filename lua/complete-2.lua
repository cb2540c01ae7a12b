--[[
  Complete a resumable run: complete-1.lua, and the key's steps deleted in the same script, so a
  completed record never leaves steps a later run of the key would resume from. Completions of
  runs that are not resumable run complete-1.lua alone.

  Input:
    KEYS[1] record key
    KEYS[2] steps key (see claim-2.lua)
    ARGV[1..5] as complete-1.lua

  Output: as complete-1.lua (the steps are deleted only when it stored the response)
]]
local rcall = redis.call

-- complete-1.lua's text, as a function (see claim-2.lua).
local function completeRecord()
  --- @include complete-1
end

local done = completeRecord()
if done == 1 then
  rcall('DEL', KEYS[2])
end
return done
