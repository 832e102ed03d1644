-- luacheck configuration (make lint)
std = "max"
max_line_length = 120
files["spec/"] = { std = "+busted" }
files["test/hosts/"] = { std = "+busted" }
-- Inside nginx: the cosocket transport (and its hook in redislock.lua) reads ngx.
files["lua/redislock/cosocket.lua"] = { read_globals = { "ngx" } }
files["lua/redislock.lua"] = { read_globals = { "ngx" } }
-- bench/nginx.lua's locations run inside nginx too.
files["bench/nginx_app.lua"] = { read_globals = { "ngx" } }
-- The Redis-side scripts: the functions of scripts/lib/ reach them spliced
-- (tools/gen_scripts.lua), so read here as globals; `make lint` checks the
-- spliced scripts (build/scripts/) as Redis gets them, too.
files["lua/redislock/scripts/"] = {
  std = "lua51", read_globals = { "redis", "KEYS", "ARGV", "next_fence", "record_holder", "holder_of", "shares_of",
    "permit_members", "wake_waiters", "add_waiter", "drop_lapsed", "reenter", "new_grant", "leave_grant",
    "try_write", "set_leases", "share_holders", "reader_refused" },
}
files["lua/redislock/scripts/lib/"] = { std = "lua51", read_globals = { "redis" }, ignore = { "211" } }
exclude_files = { "build/" }
