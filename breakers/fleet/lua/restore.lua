-- Writes a tool's state from the database (ARGV[7]: JSON of the state fields and policy) when
-- Redis has none or an older one (lower seq). Counters and leases start empty: they are not
-- kept in the database, and a half-open window simply grants its trial again.
-- Returns 1 when written, 0 when Redis already had this seq or newer.
local st, exists = load_state()
local saved = cjson.decode(ARGV[7])
if exists and num(st, 'seq', 0) >= tonumber(saved.seq) then
  return 0
end
redis.call('DEL', S, W, E)
local args = {}
for name, value in pairs(saved) do
  if value ~= cjson.null then
    args[#args + 1] = name
    args[#args + 1] = value
  end
end
redis.call('HSET', S, unpack(args))
return 1
