-- luacheck configuration (make lint)
std = "max"
max_line_length = 120
files["spec/"] = { std = "+busted" }
files["test/hosts/"] = { std = "+busted" }
-- Inside nginx: the cosocket transport (and its hook in redislock.lua) reads ngx.
files["lua/redislock/cosocket.lua"] = { read_globals = { "ngx" } }
files["lua/redislock.lua"] = { read_globals = { "ngx" } }
files["lua/redislock/scripts/"] = { std = "lua51", read_globals = { "redis", "KEYS", "ARGV" } }
exclude_files = { "build/" }
