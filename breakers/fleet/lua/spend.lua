-- The spend rule of one tool: counts the model spend of runs whose calls to it all failed, and
-- opens the tool once that spend, within the window, reaches the amount on evidence from at
-- least min_workers voters (the consecutive rule's quorum). Counted only while the automatic
-- breaker is closed, like the streak.
-- KEYS[4] the counted model calls: a sorted set of "<event key>\t<micro-USD>\t<run>\t<voter>"
-- scored by the model call's time; KEYS[5] their sum (micro-USD); KEYS[6] entries per voter;
-- KEYS[7] entries per run (all with the tool's hash tag). The three sums are kept as entries come
-- and go, so a call costs the entries it adds or expires, not the whole window.
-- ARGV[7] default amount (micro-USD, 0: off), ARGV[8] default window (ms), ARGV[9] the stale
-- margin (ms) before the tool's last change, ARGV[10] the tool's name (for the reason),
-- ARGV[11] the most entries kept, ARGV[12] JSON [[run, voter, drop, [[event key, ts, micro]]]].
local st, exists = load_state()
if not exists then
  return cjson.encode({ missing = true })
end
local Z, TOTAL, VOTERS, RUNS = KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local policy = load_policy(st)
local amount = num(st, 'p_spend_amount', tonumber(ARGV[7]))
local window = num(st, 'p_spend_window', tonumber(ARGV[8]))

local function clear()
  redis.call('DEL', Z, TOTAL, VOTERS, RUNS)
end

if amount <= 0 or st.auto ~= 'closed' then
  -- Off, or out already: what was counted belongs to the time before (an open clears it too).
  clear()
  return cjson.encode({ transitions = {}, spend = 0, workers = 0 })
end
-- Spend from before the tool's last change (a late event) must not re-open what just closed.
local cutoff = math.max(NOW - window, num(st, 'since', 0) - tonumber(ARGV[9]))

local function split(member)
  return string.match(member, '^(.-)\t(%d+)\t(.-)\t(.*)$')
end

local function less(hash, field)
  if redis.call('HINCRBY', hash, field, -1) <= 0 then
    redis.call('HDEL', hash, field)
  end
end

local function remove(member)
  local _, micro, run, voter = split(member)
  if run and redis.call('ZREM', Z, member) == 1 then
    redis.call('DECRBY', TOTAL, micro)
    less(VOTERS, voter)
    less(RUNS, run)
  end
end

local added = false
for _, op in ipairs(cjson.decode(ARGV[12])) do
  local run, voter, drop, entries = op[1], op[2], op[3], op[4]
  if drop then
    if redis.call('HEXISTS', RUNS, run) == 1 then
      for _, member in ipairs(redis.call('ZRANGE', Z, 0, -1)) do
        local _, _, owner = split(member)
        if owner == run then
          remove(member)
        end
      end
    end
  else
    for _, e in ipairs(entries) do
      local ts = math.min(tonumber(e[2]), NOW)
      if ts >= cutoff then
        local micro = string.format('%d', e[3])
        local member = e[1] .. '\t' .. micro .. '\t' .. run .. '\t' .. voter
        if redis.call('ZADD', Z, 'NX', ts, member) == 1 then
          redis.call('INCRBY', TOTAL, micro)
          redis.call('HINCRBY', VOTERS, voter, 1)
          redis.call('HINCRBY', RUNS, run, 1)
          added = true
        end
      end
    end
  end
end
for _, member in ipairs(redis.call('ZRANGEBYSCORE', Z, '-inf', '(' .. cutoff)) do
  remove(member)
end
local extra = redis.call('ZCARD', Z) - tonumber(ARGV[11])
if extra > 0 then
  for _, member in ipairs(redis.call('ZRANGE', Z, 0, extra - 1)) do
    remove(member)
  end
end

local total = tonumber(redis.call('GET', TOTAL) or '0')
local voters = redis.call('HLEN', VOTERS)
-- Only new spend can open it: a drop or an expiry only ever lowers the sum.
if not added or total < amount or voters < policy.min_workers then
  return cjson.encode({ transitions = {}, spend = total, workers = voters })
end

-- It opens: the evidence, read once.
local runs, run_count, workers, spend_of, run_list = {}, 0, {}, {}, {}
for _, member in ipairs(redis.call('ZRANGE', Z, 0, -1)) do
  local _, micro, run, voter = split(member)
  if run then
    spend_of[voter] = (spend_of[voter] or 0) + tonumber(micro)
    workers[voter] = workers[voter] or 0
    if not runs[run] then
      runs[run], run_count, workers[voter] = true, run_count + 1, workers[voter] + 1
      if #run_list < STREAK_EVENTS_KEPT then
        run_list[#run_list + 1] = run
      end
    end
  end
end
local function plural(n, word)
  if n == 1 then
    return n .. ' ' .. word
  end
  return n .. ' ' .. word .. 's'
end
local window_text = seconds(window) .. ' s'
if window % 60000 == 0 then
  window_text = string.format('%d min', window / 60000)
end
local workers_usd = {}
for voter, micro in pairs(spend_of) do
  workers_usd[voter] = micro / 1000000
end
local cause = {
  rule = 'spend',
  spend_usd = total / 1000000,
  amount_usd = amount / 1000000,
  window_seconds = window / 1000,
  runs = run_count,
  run_keys = run_list,
  workers = workers,
  workers_spend_usd = workers_usd,
  min_workers = policy.min_workers,
}
local reason = string.format(
  'spend rule: $%.2f burned in %s (%s) whose calls to %s all failed, within %s',
  total / 1000000, plural(run_count, 'run'), plural(voters, 'worker'), ARGV[10], window_text)
clear()
clear_streak(st)
st.cooldown = policy.cooldown
local opened = open(st, 'spend', cause, reason)
save_state(st)
return cjson.encode({ transitions = { opened }, spend = total, workers = voters })
