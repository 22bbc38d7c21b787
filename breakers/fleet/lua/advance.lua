-- open -> half_open once the cooldown has elapsed; Celery's tick calls it for due tools.
-- Several ticks at once (a duplicated beat) are harmless: only the first one moves the state.
local st, exists = load_state()
if not exists then
  return cjson.encode({ missing = true })
end
local policy = load_policy(st)
local transitions = {}
if st.auto == 'open' and NOW >= num(st, 'open_until', 0) then
  local auto_from, forced_from = st.auto, st.forced
  st.auto = 'half_open'
  st.window = num(st, 'window', 0) + 1
  clear_lease(st)
  local trial = 'call'
  if policy.trial == 'probe' then
    trial = 'probe'
  end
  st.ar = 'cooldown of ' .. seconds(num(st, 'cooldown', 0)) .. ' s elapsed; one trial ' .. trial
  local cause = { cooldown_ms = num(st, 'cooldown', 0), window = st.window, trial = policy.trial }
  transitions[1] = transition(st, auto_from, forced_from, 'cooldown', cause)
  save_state(st)
end
return cjson.encode({
  transitions = transitions,
  state = public_state(st),
  trial = policy.trial,
})
