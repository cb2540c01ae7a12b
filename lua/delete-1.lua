--[[
  Delete a record whatever its state and owner (operators purging a response or freeing a
  stuck key). The owner of a deleted claim is fenced: its complete, extend and release find no
  record (or another owner's) and change nothing. Notifies the key's watchers, as release does,
  so that a waiting duplicate claims the key; always, not only when a waiter marked the record:
  an operator call can afford a message nobody reads.

  Input:
    KEYS[1] record key
    ARGV[1] how to notify waiters: 'PUBLISH', or 'SPUBLISH' on a Cluster

  Output:
    1 deleted
    0 no live record: nothing changed
]]
local rcall = redis.call
local key = KEYS[1]
if rcall('DEL', key) == 0 then
  return 0
end

rcall(ARGV[1], key, 'r')
return 1
