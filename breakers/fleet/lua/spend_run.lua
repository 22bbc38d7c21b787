-- The spend rule's record of one agent run (loaded without the prelude: these are the run's keys,
-- not a tool's). KEYS[1] its model calls: a sorted set of "<event key>\t<micro-USD>" scored by
-- time; KEYS[2] its tools: a hash tool -> 'f' while every call to it failed, 's' once one
-- succeeded. Both carry the run's own hash tag, so the script touches one slot.
-- ARGV[1] now (ms), ARGV[2] the oldest time kept (ms), ARGV[3] the keys' TTL (ms), ARGV[4] JSON
-- {"m": [[event key, ts, micro-USD], ...], "t": [[tool, succeeded], ...]} in the batch's order.
-- Returns JSON {tool: {"add": [[event key, ts, micro-USD], ...]} | {"drop": true}}: the model
-- calls that now count towards each tool this run is failing on, or that the run's spend stops
-- counting towards a tool (a call to it succeeded). Logging a model call twice (a resent batch)
-- changes nothing here, and the tool's own set recognises its event key.
local LOG, TOOLS = KEYS[1], KEYS[2]
local now, oldest, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local batch = cjson.decode(ARGV[4])
local out = {}

local fresh = {}
for _, m in ipairs(batch.m or {}) do
  local ts = math.min(tonumber(m[2]), now) -- an agent's clock ahead of ours counts as now
  local micro = tonumber(m[3])
  if ts >= oldest then
    redis.call('ZADD', LOG, 'NX', ts, m[1] .. '\t' .. string.format('%d', micro))
    fresh[#fresh + 1] = { m[1], ts, micro }
  end
end
redis.call('ZREMRANGEBYSCORE', LOG, '-inf', '(' .. oldest)

local function logged()
  local raw = redis.call('ZRANGEBYSCORE', LOG, oldest, '+inf', 'WITHSCORES')
  local entries = {}
  for i = 1, #raw, 2 do
    local key, micro = string.match(raw[i], '^(.*)\t(%d+)$')
    if key then
      entries[#entries + 1] = { key, tonumber(raw[i + 1]), tonumber(micro) }
    end
  end
  return entries
end

for _, t in ipairs(batch.t or {}) do
  local tool, succeeded = t[1], t[2]
  local status = redis.call('HGET', TOOLS, tool)
  if succeeded then
    if status ~= 's' then
      redis.call('HSET', TOOLS, tool, 's')
      if status == 'f' then
        out[tool] = { drop = true }
      end
    end
  elseif not status then
    -- The run's first call to the tool failed: its whole spend so far counts towards it.
    redis.call('HSET', TOOLS, tool, 'f')
    out[tool] = { add = logged() }
  end
end

if #fresh > 0 then
  local tools = redis.call('HGETALL', TOOLS)
  for i = 1, #tools, 2 do
    if tools[i + 1] == 'f' and out[tools[i]] == nil then
      out[tools[i]] = { add = fresh }
    end
  end
end
redis.call('PEXPIRE', LOG, ttl)
redis.call('PEXPIRE', TOOLS, ttl)
return cjson.encode(out)
