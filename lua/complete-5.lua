--[[
  Complete a resumable run: complete-4.lua, and the key's steps deleted in the same script, so a
  completed record never leaves steps a later run of the key would resume from. Completions of
  runs that are not resumable run complete-4.lua alone.

  Input:
    KEYS[1..4] as complete-4.lua
    KEYS[5] steps key (see claim-3.lua)
    ARGV[1..8] as complete-4.lua

  Output: as complete-4.lua (the steps are deleted only when it stored the response)
]]
local rcall = redis.call

-- complete-4.lua's text, as a function (see claim-3.lua).
local function completeRecord()
  --- @include complete-4
end

local done = completeRecord()
if done == 1 then
  rcall('DEL', KEYS[5])
end
return done
