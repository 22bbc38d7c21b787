-- Grants the one trial of the current half-open window. ARGV[7] holder ('probe' or
-- 'agent:<worker id>'), ARGV[8] token, ARGV[9] lease TTL (ms), ARGV[10] the window a probe was
-- sent for ('' for agents). Exactly one holder at a time: the lease is checked and taken in
-- this one atomic step (the SET NX of a lock, with its expiry on the caller's clock).
local st, exists = load_state()
if not exists then
  return cjson.encode({ missing = true })
end
local policy = load_policy(st)
local holder, token, ttl = ARGV[7], ARGV[8], tonumber(ARGV[9])

local function answer(granted)
  return cjson.encode({
    granted = granted,
    window = num(st, 'window', 0),
    lease_until = num(st, 'lu', 0),
    token = granted and str(st, 'lt') or '',
    state = public_state(st),
  })
end

if st.auto ~= 'half_open' then
  return answer(false)
end
if holder == PROBE_HOLDER then
  if policy.trial ~= 'probe' or tonumber(ARGV[10]) ~= num(st, 'window', 0) then
    return answer(false)
  end
elseif policy.trial ~= 'lease' or st.forced ~= '' then
  return answer(false)
end
if str(st, 'lh') ~= '' and NOW < num(st, 'lu', 0) then
  return answer(holder == st.lh and holder ~= PROBE_HOLDER)
end
st.lh, st.lt, st.lu = holder, token, NOW + ttl
redis.call('HSET', S, 'lh', st.lh, 'lt', st.lt, 'lu', st.lu)
return answer(true)
