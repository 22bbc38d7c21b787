-- The probe holding the lease ARGV[7] reports ARGV[8] ('1' healthy, '0' not).
-- A stale probe (its window is over, or its lease expired and was re-granted) decides nothing.
local st, exists = load_state()
if not exists then
  return cjson.encode({ missing = true })
end
local policy = load_policy(st)
local transitions = {}
if st.auto == 'half_open' and str(st, 'lh') == PROBE_HOLDER and str(st, 'lt') == ARGV[7] then
  local ok = ARGV[8] == '1'
  local outcome = 'failure'
  if ok then
    outcome = 'success'
  end
  local cause = { window = num(st, 'window', 0), holder = PROBE_HOLDER, outcome = outcome }
  transitions[1] = decide(st, ok, 'probe', policy, cause)
  save_state(st)
end
return cjson.encode({ transitions = transitions, state = public_state(st) })
