-- Applies accepted tool.call outcomes of one tool, in order, once each.
-- ARGV[7] dedupe TTL (ms); ARGV[8] a JSON array of quintuplets, flat (event id, voter: the
-- worker or token the quorum counts, outcome, trial true/false, holder: the worker that made
-- the call, whom a trial lease names; several workers on one token are one voter, many holders);
-- KEYS[3 + i] the dedupe key of the i-th event (same hash tag).
-- Returns {"missing": true} when the tool has no state here (new tool, or Redis lost its data):
-- the caller restores it from the database and calls again, so nothing is re-admitted silently.
local st, exists = load_state()
if not exists then
  return cjson.encode({ missing = true })
end
local policy = load_policy(st)
local ttl = tonumber(ARGV[7])
local applied, duplicates, transitions = 0, 0, {}
local changed = false

local function count(event_id, worker, outcome)
  if outcome == 'success' then
    if num(st, 'consec', 0) > 0 then
      clear_streak(st)
    end
    return
  end
  -- A degraded result (the call returned, a result check failed it) counts exactly like a
  -- retryable failure.
  if outcome ~= 'retryable' and outcome ~= 'degraded' then
    return
  end
  st.consec = num(st, 'consec', 0) + 1
  redis.call('HINCRBY', W, worker, 1)
  redis.call('RPUSH', E, event_id)
  redis.call('LTRIM', E, -STREAK_EVENTS_KEPT, -1)
  local distinct = redis.call('HLEN', W)
  if st.consec < policy.threshold or distinct < policy.min_workers then
    return
  end
  local raw = redis.call('HGETALL', W)
  local workers = {}
  for i = 1, #raw, 2 do
    workers[raw[i]] = tonumber(raw[i + 1])
  end
  local cause = {
    consecutive = st.consec,
    workers = workers,
    events = redis.call('LRANGE', E, 0, -1),
    threshold = policy.threshold,
    min_workers = policy.min_workers,
    last_outcome = outcome,
  }
  local reason = st.consec .. ' consecutive retryable failures from ' .. distinct .. ' workers'
  if outcome == 'degraded' then
    -- The streak's kinds are not kept (only its event ids): name the one that completed it.
    reason = st.consec .. ' consecutive failures from ' .. distinct
      .. ' workers, the last a degraded result'
  end
  clear_streak(st)
  st.cooldown = policy.cooldown
  transitions[#transitions + 1] = open(st, 'failures', cause, reason)
end

local function agent_trial(event_id, worker, outcome)
  if outcome == 'semantic' then
    clear_lease(st)
    return
  end
  if outcome ~= 'success' and outcome ~= 'retryable' and outcome ~= 'degraded' then
    return
  end
  local cause = {
    window = num(st, 'window', 0),
    holder = st.lh,
    outcome = outcome,
    event_id = event_id,
    worker = worker,
  }
  transitions[#transitions + 1] = decide(st, outcome == 'success', 'call', policy, cause)
end

local events = cjson.decode(ARGV[8])
for i = 0, #events / 5 - 1 do
  local event_id, worker, outcome = events[1 + 5 * i], events[2 + 5 * i], events[3 + 5 * i]
  local trial, holder = events[4 + 5 * i] == true, events[5 + 5 * i]
  if redis.call('SET', KEYS[4 + i], '1', 'NX', 'PX', ttl) then
    applied = applied + 1
    changed = true
    if st.auto == 'closed' then
      count(event_id, worker, outcome)
    elseif st.auto == 'half_open' and trial and str(st, 'lh') == AGENT_PREFIX .. holder
        and NOW <= num(st, 'lu', 0) then
      -- Only the call made under the live lease decides; the holder's late results of calls
      -- started before the trip, and a trial reported after the lease ran out, do not.
      agent_trial(event_id, worker, outcome)
    end
  else
    duplicates = duplicates + 1
  end
end
if #transitions > 0 then
  save_state(st)
elseif changed then
  -- Without a transition only the count (and a freed trial lease) can have moved.
  redis.call('HSET', S, 'consec', num(st, 'consec', 0), 'lh', str(st, 'lh'), 'lt', str(st, 'lt'),
    'lu', num(st, 'lu', 0))
end
return cjson.encode({ applied = applied, duplicates = duplicates, transitions = transitions })
