-- Shared by every fleet script (prepended by breakers/fleet/store.py). The rules mirror
-- tests/fleet/reference_model.py, the reference model; keep the two in step.
--
-- KEYS[1] the tool's state hash, KEYS[2] its streak workers (hash worker -> failures),
-- KEYS[3] its streak event ids (list); all three carry the same {tool} hash tag, so every
-- script touches one slot and runs unchanged on Redis Cluster.
-- Time is always ARGV[1], integer milliseconds from the caller's clock (tests inject it).
local S, W, E = KEYS[1], KEYS[2], KEYS[3]
local NOW = tonumber(ARGV[1])
local STREAK_EVENTS_KEPT = 100
local PROBE_HOLDER = 'probe'
local AGENT_PREFIX = 'agent:'

local function load_state()
  local raw = redis.call('HGETALL', S)
  local st = {}
  for i = 1, #raw, 2 do
    st[raw[i]] = raw[i + 1]
  end
  if st.auto == nil or st.auto == '' then
    st.auto = 'closed'
  end
  if st.forced == nil then
    st.forced = ''
  end
  return st, #raw > 0
end

local function num(st, name, default)
  local value = st[name]
  if value == nil or value == '' then
    return default
  end
  return tonumber(value)
end

local function str(st, name)
  local value = st[name]
  if value == nil then
    return ''
  end
  return value
end

-- Per-tool policy fields (p_*) override the defaults the caller sends from settings.
-- ARGV[2..6]: threshold, min_workers, cooldown_ms, max_cooldown_ms, trial mode.
local function load_policy(st)
  return {
    threshold = num(st, 'p_threshold', tonumber(ARGV[2])),
    min_workers = num(st, 'p_min_workers', tonumber(ARGV[3])),
    cooldown = num(st, 'p_cooldown', tonumber(ARGV[4])),
    max_cooldown = num(st, 'p_max_cooldown', tonumber(ARGV[5])),
    trial = (st['p_trial'] ~= nil and st['p_trial'] ~= '') and st['p_trial'] or ARGV[6],
  }
end

local function effective(auto, forced)
  if forced ~= '' then
    return forced
  end
  return auto
end

local function reason_of(st)
  if st.forced ~= '' then
    return str(st, 'fr')
  end
  return str(st, 'ar')
end

local function seconds(ms)
  if ms % 1000 == 0 then
    return string.format('%d', ms / 1000)
  end
  local text = string.format('%.3f', ms / 1000)
  return (string.gsub(text, '0+$', ''))
end

local function public_state(st)
  return {
    auto = str(st, 'auto'),
    forced = st.forced,
    state = effective(str(st, 'auto'), st.forced),
    consecutive = num(st, 'consec', 0),
    cooldown_ms = num(st, 'cooldown', 0),
    open_until = num(st, 'open_until', 0),
    window = num(st, 'window', 0),
    lease_holder = str(st, 'lh'),
    lease_token = str(st, 'lt'),
    lease_until = num(st, 'lu', 0),
    seq = num(st, 'seq', 0),
    since = num(st, 'since', 0),
    auto_reason = str(st, 'ar'),
    forced_reason = str(st, 'fr'),
  }
end

-- Records a change of (auto, forced): bumps seq, moves `since` when the effective state moved.
local function transition(st, auto_from, forced_from, kind, cause)
  local from_state = effective(auto_from, forced_from)
  local to_state = effective(st.auto, st.forced)
  st.seq = num(st, 'seq', 0) + 1
  st.changed_at = NOW -- when seq last moved: lets Celery's tick spot a transition never persisted
  if from_state ~= to_state then
    st.since = NOW
  end
  return {
    seq = st.seq,
    at = NOW,
    from_state = from_state,
    to_state = to_state,
    auto_from = auto_from,
    auto_to = st.auto,
    forced = st.forced,
    kind = kind,
    cause = cause,
    reason = reason_of(st),
    state = public_state(st),
  }
end

local function clear_streak(st)
  st.consec = 0
  redis.call('DEL', W, E)
end

local function clear_lease(st)
  st.lh, st.lt, st.lu = '', '', 0
end

local function open(st, kind, cause, reason)
  local auto_from, forced_from = st.auto, st.forced
  st.auto, st.ar = 'open', reason
  st.open_until = NOW + num(st, 'cooldown', 0)
  return transition(st, auto_from, forced_from, kind, cause)
end

-- half_open -> closed or open: the one trial (probe or agent call) has decided.
local function decide(st, ok, trial, policy, cause)
  clear_lease(st)
  if ok then
    local auto_from, forced_from = st.auto, st.forced
    st.auto = 'closed'
    st.cooldown = policy.cooldown
    clear_streak(st)
    st.ar = 'trial ' .. trial .. ' succeeded'
    return transition(st, auto_from, forced_from, 'trial', cause)
  end
  local current = num(st, 'cooldown', 0)
  if current == 0 then
    current = policy.cooldown
  end
  st.cooldown = math.min(current * 2, policy.max_cooldown)
  cause['cooldown_ms'] = st.cooldown
  local reason = 'trial ' .. trial .. ' failed; next cooldown ' .. seconds(st.cooldown) .. ' s'
  return open(st, 'trial', cause, reason)
end

local STATE_FIELDS = {
  'auto', 'forced', 'consec', 'cooldown', 'open_until', 'window', 'lh', 'lt', 'lu', 'seq',
  'since', 'ar', 'fr', 'changed_at',
}

local function save_state(st)
  local args = {}
  for _, name in ipairs(STATE_FIELDS) do
    local value = st[name]
    if value == nil then
      value = ''
    end
    args[#args + 1] = name
    args[#args + 1] = value
  end
  redis.call('HSET', S, unpack(args))
end
