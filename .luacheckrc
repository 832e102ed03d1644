-- luacheck configuration (make lint)
std = "max"
max_line_length = 120
files["spec/"] = { std = "+busted" }
files["lua/redislock/scripts/"] = { std = "lua51", read_globals = { "redis", "KEYS", "ARGV" } }
exclude_files = { "build/" }
