-- Replaces the per-tool policy fields (ARGV[7]: JSON of p_* fields; null removes one so the
-- settings default applies). Returns 0 when the tool has no state here: the caller restores it
-- from the database, which already holds the new policy.
local st, exists = load_state()
if not exists then
  return 0
end
local policy = cjson.decode(ARGV[7])
for name, value in pairs(policy) do
  if value == cjson.null then
    redis.call('HDEL', S, name)
  else
    redis.call('HSET', S, name, value)
  end
end
return 1
