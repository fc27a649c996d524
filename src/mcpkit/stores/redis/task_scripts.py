"""The Lua scripts of :class:`~mcpkit.stores.redis.RedisTaskStore`: the bounds on tasks kept, per caller and for
the whole store, applied atomically for every worker sharing it.

Every key they touch is in the ``{tasks}`` slot (one Redis Cluster node): the keys of the caller at hand come in
``KEYS``; those of another caller, whose record the store-wide bound evicts, are made from ``ARGV[1]``, the
``<prefix>{tasks}:`` base, and that caller's key part (kept with each record's bytes), so they share the slot.

KEYS, for every script: [1] the tasks in progress (all callers), [2] the caller's tasks in progress, [3] its index
(by creation), [4] its tasks kept (score: when the record goes), [5] their bytes (a hash; field ``*``: the sum),
[6] every task kept (by creation), [7] every task kept (score: when the record goes), [8] their bytes and owners
(a hash of ``"<bytes> <owner part>"``; field ``*``: the sum of the bytes).
"""

from __future__ import annotations

_LIB = """
local base = ARGV[1]
local function forget_owned(index, kept, sizes, id)
  redis.call('ZREM', kept, id)
  redis.call('ZREM', index, id)
  local size = redis.call('HGET', sizes, id)
  if size then
    redis.call('HDEL', sizes, id)
    redis.call('HINCRBY', sizes, '*', -tonumber(size))
  end
end
-- take a task off every count: the store's and its owner's (which may not be the caller at hand)
local function forget(id)
  redis.call('ZREM', KEYS[6], id)
  redis.call('ZREM', KEYS[7], id)
  local entry = redis.call('HGET', KEYS[8], id)
  if entry then
    local bytes, part = string.match(entry, '^(%d+) (.*)$')
    redis.call('HDEL', KEYS[8], id)
    redis.call('HINCRBY', KEYS[8], '*', -tonumber(bytes))
    forget_owned(base .. 'own:' .. part, base .. 'kept:' .. part, base .. 'size:' .. part, id)
  else  -- (kept before the store-wide count existed: the caller's own counts only)
    forget_owned(KEYS[3], KEYS[4], KEYS[5], id)
  end
end
local function weigh(id, bytes, part)
  local before = redis.call('HGET', KEYS[8], id)
  local was = before and tonumber(string.match(before, '^(%d+) ')) or 0
  redis.call('HSET', KEYS[8], id, bytes .. ' ' .. part)
  redis.call('HINCRBY', KEYS[8], '*', tonumber(bytes) - was)
end
local function forget_ended(now)
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[7], '-inf', now)) do forget(id) end
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now)) do forget(id) end
end
-- the oldest finished task kept (not `but`) in `order` (an index by creation), `counted` saying which are still
-- kept; tasks in progress are skipped (at most the caps on them), entries no longer kept dropped on the way
local function oldest_finished(order, counted, live, but)
  local start = 0
  while true do
    local ids = redis.call('ZRANGE', order, start, start + 63)
    if #ids == 0 then return nil end
    for _, id in ipairs(ids) do
      if not redis.call('ZSCORE', counted, id) then
        redis.call('ZREM', order, id)
        start = start - 1
      elseif id ~= but and not redis.call('ZSCORE', live, id) then
        return id
      end
    end
    start = start + #ids
  end
end
local function over_budget(budget, sizes, order, counted, live, but, evicted)
  while (tonumber(redis.call('HGET', sizes, '*')) or 0) > budget do
    local id = oldest_finished(order, counted, live, but)
    if not id then return end
    forget(id)
    table.insert(evicted, id)
  end
end
local function fit(but, evicted, max_owner_bytes, max_bytes)
  over_budget(max_owner_bytes, KEYS[5], KEYS[3], KEYS[4], KEYS[2], but, evicted)
  over_budget(max_bytes, KEYS[8], KEYS[6], KEYS[7], KEYS[1], but, evicted)
end
-- the owner's keys last as long as the record they count that goes last, the store's likewise (and at least
-- `ttl`): a task in progress keeps them past its time to live (it is still listed when its engine records it
-- stopped), and once every task has ended they go with the last record
local function keep_keys(now, ttl)
  for _, keys in ipairs({{4, 3, 5}, {7, 6, 8}}) do
    local last = redis.call('ZRANGE', KEYS[keys[1]], -1, -1, 'WITHSCORES')
    local keep = ttl
    if #last > 0 then keep = math.max(ttl, tonumber(last[2]) - now) end
    for i = keys[2], keys[3] do redis.call('PEXPIRE', KEYS[i], keep) end
  end
end
"""

#: ARGV: base, now, max live, max live per owner, id, expiry, created, index floor (entries older than this are
#: expired whatever they were), live sets' ttl ms, the kept keys' ttl ms (as long as the record may be kept), when
#: the record goes, its bytes, max kept per owner, max bytes per owner, the owner's key part, max kept, max bytes.
#: Returns {0, evicted ids...}, or {1} / {2}: a cap on tasks in progress; {3}: the owner's tasks kept at its bound,
#: none finished; {4}: the store's, none finished.
CREATE = (
    _LIB
    + """
local now = tonumber(ARGV[2])
local id = ARGV[5]
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return {1} end
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[4]) then return {2} end
forget_ended(now)
local evicted = {0}
if redis.call('ZCARD', KEYS[4]) >= tonumber(ARGV[13]) then
  local oldest = oldest_finished(KEYS[3], KEYS[4], KEYS[2], nil)
  if not oldest then return {3} end
  forget(oldest)
  table.insert(evicted, oldest)
end
if redis.call('ZCARD', KEYS[7]) >= tonumber(ARGV[16]) then
  local oldest = oldest_finished(KEYS[6], KEYS[7], KEYS[1], nil)
  if not oldest then return {4} end
  forget(oldest)
  table.insert(evicted, oldest)
end
redis.call('ZADD', KEYS[1], ARGV[6], id)
redis.call('ZADD', KEYS[2], ARGV[6], id)
redis.call('PEXPIRE', KEYS[1], ARGV[9])
redis.call('PEXPIRE', KEYS[2], ARGV[9])
redis.call('ZADD', KEYS[3], ARGV[7], id)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', ARGV[8])
redis.call('ZADD', KEYS[4], ARGV[11], id)
redis.call('HSET', KEYS[5], id, ARGV[12])
redis.call('HINCRBY', KEYS[5], '*', tonumber(ARGV[12]))
redis.call('ZADD', KEYS[6], ARGV[7], id)
redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', ARGV[8])
redis.call('ZADD', KEYS[7], ARGV[11], id)
weigh(id, ARGV[12], ARGV[15])
fit(id, evicted, tonumber(ARGV[14]), tonumber(ARGV[17]))
keep_keys(now, tonumber(ARGV[10]))
return evicted
"""
)

#: A task ended. ARGV: base, id, when the record goes now, its bytes now, max bytes per owner, the kept keys' ttl
#: ms, now, the owner's key part, max bytes. Returns the ids evicted.
ENDED = (
    _LIB
    + """
local id = ARGV[2]
redis.call('ZREM', KEYS[1], id)
redis.call('ZREM', KEYS[2], id)
if redis.call('ZSCORE', KEYS[4], id) then
  redis.call('ZADD', KEYS[4], ARGV[3], id)
  local before = tonumber(redis.call('HGET', KEYS[5], id)) or 0
  redis.call('HSET', KEYS[5], id, ARGV[4])
  redis.call('HINCRBY', KEYS[5], '*', tonumber(ARGV[4]) - before)
end
if redis.call('ZSCORE', KEYS[7], id) then
  redis.call('ZADD', KEYS[7], ARGV[3], id)
  weigh(id, ARGV[4], ARGV[8])
end
forget_ended(tonumber(ARGV[7]))
local evicted = {}
fit(id, evicted, tonumber(ARGV[5]), tonumber(ARGV[9]))
keep_keys(tonumber(ARGV[7]), tonumber(ARGV[6]))
return evicted
"""
)

#: A task deleted. ARGV: base, id.
FORGET = (
    _LIB
    + """
redis.call('ZREM', KEYS[1], ARGV[2])
redis.call('ZREM', KEYS[2], ARGV[2])
forget(ARGV[2])
return 0
"""
)
