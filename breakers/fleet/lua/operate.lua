-- An operator's fleet-wide action: ARGV[7] force_open | force_close | release | reset,
-- ARGV[8] the operator's reason. Returns the state before and after for the audit row.
local st, exists = load_state()
if not exists then
  return cjson.encode({ missing = true })
end
local policy = load_policy(st)
local action, reason = ARGV[7], ARGV[8]
local before = public_state(st)
local auto_from, forced_from = st.auto, st.forced
if action == 'force_open' then
  st.forced, st.fr = 'forced_open', 'forced open by an operator: ' .. reason
elseif action == 'force_close' then
  st.forced, st.fr = 'forced_closed', 'forced closed by an operator: ' .. reason
elseif action == 'release' then
  if st.forced == '' then
    return cjson.encode({ error = 'not_forced', before = before })
  end
  st.forced, st.fr = '', ''
elseif action == 'reset' then
  clear_streak(st)
  clear_lease(st)
  st.cooldown = policy.cooldown
  if st.auto ~= 'closed' then
    st.auto, st.ar = 'closed', 'reset by an operator: ' .. reason
  end
else
  return redis.error_reply('unknown action ' .. action)
end
local transitions = {}
if auto_from ~= st.auto or forced_from ~= st.forced then
  transitions[1] = transition(st, auto_from, forced_from, 'operator',
    { action = action, reason = reason })
end
save_state(st)
return cjson.encode({ transitions = transitions, before = before, after = public_state(st) })
