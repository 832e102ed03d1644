--- redislock.cli: the `redislock` command, a cross-host flock(1).
--
-- Policy only: process mechanics (spawn, waitpid, signalfd, /proc) are in
-- the C core. `main(args, launch)` returns the exit status; bin/redislock
-- calls os.exit.
--
-- The job model of `run`, as flock(1) has it: the lock is held until every
-- process of the job is gone. COMMAND and every process it starts inherit
-- the write end of a pipe (REDISLOCK_FD); the guard keeps the lock until it
-- reads end-of-file there. `-o` leaves the pipe out: the lock then covers
-- COMMAND alone. The guard is the job's subreaper, so processes whose parent
-- exits stay its descendants, and a lost lock's signals reach all of them.
-- Should the guard itself die (SIGKILL), the job's group leader
-- (csrc/process/process_leader.c) passes that on to the job's process group.

local redislock = require "redislock"
local core = require "redislock.core"
local process = require "redislock.process"
local options = require "redislock.cli_options"
local lockmod = require "redislock.lock"
local errors = require "redislock.errors"
local holdermod = require "redislock.holder"
local textmod = require "redislock.text"

local usage, spec_for, parse = options.usage, options.spec_for, options.parse
local check_name, one_name = options.check_name, options.one_name

local _M = { _VERSION = redislock._VERSION }

-- Exit statuses by name (conflict, usage, unavailable, lost, cannot_exec,
-- cannot_run), from cli_options.EXITS, which the help and the docs are
-- made from.
local EXIT = {}
for _, e in ipairs(options.EXITS) do
  if e.key then EXIT[e.key] = e.code end
end
_M.EXIT = EXIT

local HELP = require "redislock.cli_help"

-- Every digit of a fence, on any Lua: tostring gives 5.1 and LuaJIT's
-- "1.7953298305222e+15" for a 16-digit fence.
-- (no fence over Redlock: "")
local function fence_string(fence)
  if fence == nil then return "" end
  return string.format("%.0f", fence)
end

local function say(io_out, ...)
  io_out:write(table.concat({ ... }), "\n")
end

local function fail(code, msg)
  say(io.stderr, "redislock: ", msg)
  return code
end

--- Connecting --------------------------------------------------------------

-- The URLs in a file: one per line (blank lines and lines starting with
-- "#" skipped); several name Redlock's masters.
local function read_url_file(path, what)
  local f, err = io.open(path, "rb")
  if not f then usage("cannot read " .. what .. ": " .. tostring(err)) end
  local text = f:read("*a") or ""
  f:close()
  local urls = {}
  for line in text:gmatch("[^\r\n]+") do
    local url = line:match("^%s*(.-)%s*$")
    if url ~= "" and url:sub(1, 1) ~= "#" then urls[#urls + 1] = url end
  end
  if #urls == 0 then usage(what .. " " .. path .. " holds no URL") end
  return urls
end

-- The URLs to use: --url (repeated: Redlock's masters), --url-file,
-- $REDISLOCK_URL (several separated by spaces), $REDISLOCK_URL_FILE, else
-- the local default. Raises a usage error; never shows a URL.
local function resolve_url(opts)
  if opts.url and opts["url-file"] then usage("give --url or --url-file, not both") end
  if opts.url then return opts.url end
  if opts["url-file"] then return read_url_file(opts["url-file"], "--url-file") end
  local env = os.getenv("REDISLOCK_URL")
  if env and env:find("%S") then
    local urls = {}
    for u in env:gmatch("%S+") do urls[#urls + 1] = u end
    return urls
  end
  local file = os.getenv("REDISLOCK_URL_FILE")
  if file and file ~= "" then return read_url_file(file, "$REDISLOCK_URL_FILE") end
  return { "redis://127.0.0.1:6379" }
end

-- connect's tls table from --tls-* (only with a rediss:// URL: given with
-- a plain one, they are a usage error in our words) or $REDISLOCK_TLS_*
-- (only for rediss:// URLs: the environment may name a CA for every
-- invocation), or nil; and where each field came from, for messages
-- ({ ca = "--tls-ca", ... }).
local TLS_FIELDS = { "ca", "cert", "key", "server_name", "verify" }   -- (the order the help lists them)
local TLS_OPTIONS = { ca = "--tls-ca", cert = "--tls-cert", key = "--tls-key",
  server_name = "--tls-server-name", verify = "--tls-insecure" }
local function tls_config(opts, urls)
  local tls = { ca = opts["tls-ca"], cert = opts["tls-cert"], key = opts["tls-key"],
    server_name = opts["tls-server-name"] }
  local from = {}
  for field, option in pairs(TLS_OPTIONS) do from[field] = option end
  if opts["tls-insecure"] then tls.verify = false end
  local rediss = false
  for _, u in ipairs(urls) do rediss = rediss or u:lower():match("^rediss") ~= nil end
  if not rediss then
    for _, field in ipairs(TLS_FIELDS) do
      -- (never the URL itself in a message: it may hold a password)
      local option = TLS_OPTIONS[field]
      if opts[option:sub(3)] then usage(option .. " needs a rediss:// URL: the one given is not TLS") end
    end
  end
  if rediss then
    for field, var in pairs({ ca = "REDISLOCK_TLS_CA", cert = "REDISLOCK_TLS_CERT", key = "REDISLOCK_TLS_KEY" }) do
      local v = os.getenv(var)
      if tls[field] == nil and v and v ~= "" then
        tls[field] = v
        from[field] = "$" .. var
      end
    end
  end
  if next(tls) ~= nil then return tls, from end
  return nil, from
end

-- A bad argument connect refused, said in the command line's words: the
-- URL (never shown: it may hold a password) or the option that gave a TLS
-- field ("--tls-ca: cannot read FILE (...)", "$REDISLOCK_TLS_CERT: ...").
local function connect_words(msg, from)
  msg = msg:match("redislock: (.*)$") or msg
  local arg, why = msg:match("^bad argument '([^']+)' to 'connect' %((.*)%)$")
  if not arg then return msg end
  local master = arg:match("^redlock%[(%d+)%]$")
  if arg == "url" or master then return "bad URL" .. (master and " #" .. master or "") .. ": " .. why end
  local field = arg:match("^tls%.([%w_]+)$") or arg:match("^redlock%[%d+%]%.tls%.([%w_]+)$")
  if not (field or arg == "tls" or arg:match("^redlock%[%d+%]%.tls$")) then return msg end
  why = why:gsub("tls%.([%w_]+)", function(f) return from[f] or "tls." .. f end)
  if field then return (from[field] or arg) .. ": " .. why end
  if why:match("^[-$]") then return why end
  return "the TLS options: " .. why
end

-- Connects: one URL (a Redis, redis+sentinel://, redis+cluster://, and
-- their rediss forms), or several: one lock over those independent masters
-- (Redlock). Returns client, or nil and the exit status.
local function connect(opts, urls)
  local tls, from = tls_config(opts, urls)
  local cfg = { prefix = opts.prefix, tls = tls }
  if #urls == 1 then cfg.url = urls[1] else cfg.redlock = urls end
  -- Only when asked: a library without the option refuses unknown ones.
  if opts.strict then cfg.strict = true end
  local ok, client, err = pcall(redislock.connect, cfg)
  if not ok then return nil, fail(EXIT.usage, connect_words(tostring(client), from)) end
  if not client then
    -- (the library names its own option: ours is --strict)
    local refused = tostring(err):gsub("%s*%[strict = true%]$", "")
    if refused ~= err then err = refused .. "; refused: --strict" end
    return nil, fail(EXIT.unavailable, err)
  end
  return client
end

local function warnings_of(client)
  if not client.warnings then return {} end
  return client:warnings() or {}
end

--- status, release, break -------------------------------------------------

--- The operator's view: status, list -----------------------------------------

-- A time on the server's clock (seconds since the epoch), as people and
-- scripts read it: 2024-05-01T12:00:00.123Z.
local function iso_time(t)
  local whole = math.floor(t)
  return os.date("!%Y-%m-%dT%H:%M:%S", whole) .. string.format(".%03dZ", math.floor((t - whole) * 1000))
end

-- A duration for people: "12.4 s".
local function seconds(x)
  return string.format("%.1f s", x)
end

-- JSON, for the --json outputs: a string (valid UTF-8, escaped), a number
-- (decimals: 3), true/false, null, and objects with their keys in `order`.
local function json_value(v, decimals)
  if v == nil then return "null" end
  if type(v) == "boolean" then return tostring(v) end
  if type(v) == "number" then return string.format("%." .. (decimals or 3) .. "f", v) end
  return textmod.json_string(v)
end

local function json_object(t, order, integers)
  local out = {}
  for _, k in ipairs(order) do
    out[#out + 1] = textmod.json_string(k) .. ":" .. json_value(t[k], integers and integers[k] and 0)
  end
  return "{" .. table.concat(out, ",") .. "}"
end

local STATUS_FIELDS = { "name", "held", "holder", "since", "held_for", "ttl", "fence", "waiters" }
local ROW_FIELDS = { "name", "kind", "holder", "since", "held_for", "ttl", "waiters", "fence" }
local INTEGERS = { fence = true, waiters = true }

local function cmd_status(args)
  local opts, rest = parse(args, 2, spec_for("status"))
  if opts.help then return say(io.stdout, HELP.status) or 0 end
  if opts.version then return say(io.stdout, "redislock ", redislock._VERSION) or 0 end
  local name = one_name(rest, "status")
  local client, code = connect(opts, resolve_url(opts))
  if not client then return code end
  local info, err = client:inspect(name)
  local warnings = warnings_of(client)
  client:close()
  if not info then return fail(EXIT.unavailable, err) end
  if opts.json then
    info.name = name
    local fields = { (table.unpack or unpack)(STATUS_FIELDS) } -- luacheck: ignore 143
    if opts["show-token"] then fields[#fields + 1] = "token" end
    say(io.stdout, json_object(info, fields, INTEGERS))
    return info.held and 0 or EXIT.conflict
  end
  say(io.stdout, "name: ", textmod.shown(name))
  say(io.stdout, "held: ", info.held and "yes" or "no")
  if info.holder then say(io.stdout, "holder: ", textmod.shown(info.holder, holdermod.MAX)) end
  if info.since then
    say(io.stdout, "since: ", iso_time(info.since),
      info.held_for and (" (held " .. seconds(info.held_for) .. ")") or "")
  end
  if info.ttl then say(io.stdout, "ttl: ", string.format("%.3f", info.ttl), " s") end
  say(io.stdout, "fence: ", fence_string(info.fence))
  if info.waiters then say(io.stdout, "waiters: ", string.format("%d", info.waiters)) end
  if opts["show-token"] and info.token then say(io.stdout, "token: ", info.token) end
  for _, w in ipairs(warnings) do say(io.stdout, "warning: ", w) end
  return info.held and 0 or EXIT.conflict
end

-- Rows as columns for people: padded to the widest cell, two spaces apart.
local function columns(rows)
  local widths = {}
  for _, row in ipairs(rows) do
    for i, cell in ipairs(row) do widths[i] = math.max(widths[i] or 0, #cell) end
  end
  local out = {}
  for _, row in ipairs(rows) do
    local cells = {}
    for i, cell in ipairs(row) do
      cells[i] = i < #row and cell .. string.rep(" ", widths[i] - #cell) or cell
    end
    out[#out + 1] = table.concat(cells, "  ")
  end
  return table.concat(out, "\n")
end

local function cmd_list(args)
  local opts, rest = parse(args, 2, spec_for("list"))
  if opts.help then return say(io.stdout, HELP.list) or 0 end
  if opts.version then return say(io.stdout, "redislock ", redislock._VERSION) or 0 end
  if rest[2] ~= nil then usage("list takes at most one PATTERN") end
  local pattern = rest[1] or "*"
  if pattern == "" then usage("PATTERN must not be empty") end
  local client, code = connect(opts, resolve_url(opts))
  if not client then return code end
  local rows, err = client:list(pattern)
  client:close()
  if not rows then return fail(EXIT.unavailable, err) end
  if opts.json then
    local out = {}
    for i, row in ipairs(rows) do out[i] = json_object(row, ROW_FIELDS, INTEGERS) end
    say(io.stdout, '{"locks":[', table.concat(out, ","), "]}")
    return 0
  end
  if #rows == 0 then return 0 end
  local lines = { { "NAME", "KIND", "HOLDER", "HELD", "TTL", "WAITERS" } }
  for _, row in ipairs(rows) do
    lines[#lines + 1] = {
      textmod.shown(row.name, 120), row.kind, row.holder and textmod.shown(row.holder, holdermod.MAX) or "-",
      row.held_for and seconds(row.held_for) or "-", row.ttl and seconds(row.ttl) or "-",
      string.format("%d", row.waiters or 0),
    }
  end
  say(io.stdout, columns(lines))
  return 0
end

local function cmd_release(args)
  local opts, rest = parse(args, 2, spec_for("release"))
  if opts.help then return say(io.stdout, HELP.release) or 0 end
  if opts.version then return say(io.stdout, "redislock ", redislock._VERSION) or 0 end
  local name = one_name(rest, "release")
  if not opts.token or opts.token == "" then usage("release needs --token TOKEN") end
  local client, code = connect(opts, resolve_url(opts))
  if not client then return code end
  local ok, err, kind = client:release_token(name, opts.token)
  client:close()
  if ok then return 0 end
  if kind == "not held" then return fail(EXIT.conflict, name .. ": not held by that token") end
  return fail(EXIT.unavailable, err)
end

local function cmd_break(args)
  local opts, rest = parse(args, 2, spec_for("break"))
  if opts.help then return say(io.stdout, HELP["break"]) or 0 end
  if opts.version then return say(io.stdout, "redislock ", redislock._VERSION) or 0 end
  local name = one_name(rest, "break")
  if not opts.force then
    return fail(EXIT.usage, "break deletes another process' lock: add --force to confirm")
  end
  local client, code = connect(opts, resolve_url(opts))
  if not client then return code end
  local ok, err, kind = client:break_lock(name)
  client:close()
  if ok then return 0 end
  if kind == "not held" then return fail(EXIT.conflict, name .. ": not held") end
  return fail(EXIT.unavailable, err)
end

--- run ----------------------------------------------------------------------

local RUN_SPEC = spec_for("run")

-- Signals passed on to the job when another process sends them to us.
local FORWARDED = { "HUP", "INT", "QUIT", "TERM", "USR1", "USR2" }

-- Checks everything before any connection is made: a usage error takes no
-- lock. Returns name, command, on_lost, conflict, death_signal.
local function check_run(opts, rest)
  local name = check_name(rest[1], "run")
  local from = 2
  if rest[2] == "--" then
    from = 3
  elseif rest[2] ~= nil and rest[2]:sub(1, 1) == "-" then
    usage("options go before NAME: " .. rest[2])
  end
  local command = {}
  for i = from, #rest do command[#command + 1] = rest[i] end
  if #command == 0 then usage("run needs a COMMAND after NAME --") end
  local on_lost = opts["on-lost"] or "term"
  if on_lost ~= "term" and on_lost ~= "kill" and on_lost ~= "ignore" then
    usage("--on-lost must be term, kill or ignore")
  end
  local conflict = opts["conflict-exit-code"] or EXIT.conflict
  if conflict ~= math.floor(conflict) or conflict > 255 then
    usage("--conflict-exit-code must be an integer 0-255")
  end
  -- (the library's range, in the same words: one minimum)
  if opts.ttl and not (opts.ttl >= lockmod.MIN_TTL and opts.ttl <= lockmod.MAX_TTL) then
    usage(string.format("--ttl must be between %g and %.0f seconds", lockmod.MIN_TTL, lockmod.MAX_TTL))
  end
  if opts.wait and opts.wait > 2 ^ 31 then usage("--wait must be at most 2147483648") end
  if opts.nonblock and opts.wait and opts.wait > 0 then usage("-n and -w exclude each other") end
  if opts["fence-env"] and not opts["fence-env"]:match("^[%a_][%w_]*$") then
    usage("--fence-env must be a variable name")
  end
  local death = opts["death-signal"] or "TERM"
  local death_signal = process.signum(tonumber(death) or death:upper())
  if not death_signal or death_signal == 0 then usage("--death-signal: no such signal: " .. death) end
  if opts.verbose and opts.quiet then usage("--verbose and --quiet exclude each other") end
  return name, command, on_lost, conflict, death_signal
end

-- A set of pids as a table pid -> true.
local function set_of(list)
  local s = {}
  for _, v in ipairs(list) do s[v] = true end
  return s
end

-- Waits for the job, forwarding signals and acting on a lost lock.
-- job: { pid = COMMAND, rfd = read end of the job pipe (nil with -o),
-- sfd = signalfd, self = our pid }. Returns COMMAND's exit status and
-- whether the lock was lost.
local function supervise(client, lock, job, opts)
  local on_lost = opts["on-lost"] or "term"
  local kill_after = opts["kill-after"] or 10
  local status               -- COMMAND's, once it has exited
  local open = job.rfd ~= nil  -- some process of the job still holds REDISLOCK_FD
  local lost_at, killed = nil, false

  -- The job: every descendant (we are their subreaper), or with -o,
  -- COMMAND alone.
  local function members()
    if not job.rfd then return status == nil and { job.pid } or {} end
    return process.descendants(job.self)
  end
  local function signal_job(sig)
    for _, pid in ipairs(members()) do process.kill(pid, sig) end
  end

  while status == nil or open do
    local wake = { client:fd() }
    if open then wake[2] = job.rfd end
    local tick = 0.25
    if lost_at and on_lost == "term" and not killed then
      tick = math.max(0.001, math.min(tick, lost_at + kill_after - core.monotime()))
    end
    local sig, from, origin = process.signal_wait(job.sfd, tick, wake)
    -- Pass on what another process sent us. Not what the terminal sent to
    -- the whole group (origin "kernel"): COMMAND has it already; nor what
    -- the job itself sent (`kill 0` in a job script reaches us too).
    if sig and sig ~= "CHLD" and origin == "process" and not set_of(process.descendants(job.self))[from] then
      if status == nil then
        process.kill(job.pid, sig)
      else
        signal_job(sig)
      end
    end
    -- Reap COMMAND, and the orphans we adopted as subreaper.
    while true do
      local pid, how, code = process.waitpid(-1, true)
      if not pid or pid == 0 then break end
      if pid == job.pid then status = how == "exited" and code or 128 + code end
      if pid == job.leader then job.leader = nil end   -- (killed with the job: gone)
    end
    if open and process.drain(job.rfd) then
      open = false
      process.close(job.rfd)
    end
    client:poll()
    if not lost_at and not lock:held() then
      lost_at = core.monotime()
      -- (the name quoted: a lock named "lost" must not read "lock lost lost")
      say(io.stderr, "redislock: the lock \"", textmod.shown(lock.name), "\" was lost (", tostring(lock.lost_reason),
        ")", on_lost == "ignore" and "; the job keeps running" or "; stopping the job")
      if on_lost == "term" then
        signal_job("TERM")
        signal_job("CONT")
      elseif on_lost == "kill" then
        signal_job("KILL")
        killed = true
      end
    end
    if lost_at and on_lost == "term" and not killed and core.monotime() - lost_at >= kill_after then
      signal_job("KILL")
      killed = true
    end
  end
  return status, lost_at ~= nil
end

-- A list of the signal numbers in a set from process.ignored_signals.
local function numbers_of(set)
  local list = {}
  for k in pairs(set) do
    if type(k) == "number" then list[#list + 1] = k end
  end
  return list
end

-- Takes the lock for the job of `run` (check_run's fields, and the
-- signals ignored at start). Ctrl-C (SIGINT) and SIGTERM end the wait at
-- once, as with flock: the library gives back whatever the wait may have
-- been granted, and we die of that signal (130, 143). From the signalfd
-- on, they are read there instead (and passed on to the job).
-- Returns the lock and the signalfd, or nil and the exit status (the
-- client closed then).
local function take(client, run, opts)
  local t0 = core.monotime()
  local ignored = run.ignored
  local watched = { "CHLD" }
  for _, sig in ipairs(FORWARDED) do
    if not ignored[sig] then watched[#watched + 1] = sig end
  end
  local stops = {}
  for _, sig in ipairs({ "INT", "TERM" }) do
    if not ignored[sig] then stops[#stops + 1] = sig end
  end
  process.stop_on(stops)
  -- Who holds it, for `status` and `list` elsewhere: this guard and its job
  local label = textmod.utf8(string.format("%s:%d %s", core.hostname() or "?", core.getpid(),
    table.concat(run.command, " ")), holdermod.MAX)
  local ok, lock, err, sfd = pcall(function()
    local l, e = client:acquire(run.name, { ttl = opts.ttl or 30, wait = opts.wait or 0, holder = label })
    -- Signals become readable on a signalfd; the child gets them unblocked.
    local fd = l and assert(process.signalfd(watched))
    process.stop_on(nil)
    return l, e, fd
  end)
  local stopped = process.stop_on(nil)
  if not ok then
    -- A lock the acquire got but could not hand back (the signal came as
    -- it returned) is registered with the client all the same.
    for _, l in pairs(client._locks or {}) do pcall(l.release, l) end
    client:close()
    if not stopped then error(lock, 0) end
    process.die_by(stopped)
    return nil, 128 + process.signum(stopped)
  end
  if not lock then
    local kind = errors.kind_of(err)
    if kind == "busy" or kind == "timeout" then
      -- Silent by default, like flock -n: cron mails whatever a job prints.
      if opts.verbose then
        local info = client:inspect(run.name)
        local by = info and info.holder and ("by " .. textmod.shown(info.holder, holdermod.MAX) ..
          (info.held_for and " for " .. seconds(info.held_for) or "")) or "elsewhere"
        say(io.stderr, "redislock: ", textmod.shown(run.name), " is held ", by, " (", kind, ")")
      end
      client:close()
      return nil, run.conflict
    end
    client:close()
    return nil, fail(EXIT.unavailable, err)
  end
  if opts.verbose then
    say(io.stderr, "redislock: took ", run.name, " (fence ", fence_string(lock.fence), ") after ",
      string.format("%.3f", core.monotime() - t0), " s")
    for _, w in ipairs(warnings_of(client)) do say(io.stderr, "redislock: warning: ", w) end
  end
  return lock, sfd
end

-- Runs the job of `run` holding `lock` (sfd: the signalfd take() made),
-- and releases it after. Returns the exit status.
local function guard(client, lock, sfd, run, opts)
  local rfd, wfd
  if not opts.close then
    assert(process.subreaper())
    rfd, wfd = assert(process.pipe())
  end

  local env = {
    REDISLOCK_NAME = run.name,
    REDISLOCK_TOKEN = lock.token,
    REDISLOCK_FENCE = fence_string(lock.fence),
  }
  -- (with -o, an outer guard's REDISLOCK_FD, if any, still holds for it)
  if wfd then env.REDISLOCK_FD = string.format("%d", wfd) end
  if not opts["keep-env"] then
    -- The URL may carry a password: the job does not need it.
    env.REDISLOCK_URL = false
    env.REDISLOCK_URL_FILE = false
  end
  if opts["fence-env"] then env[opts["fence-env"]] = fence_string(lock.fence) end
  -- The job's own process group, led by a process that passes our death
  -- on to all of it (csrc/process/process_leader.c); not at a terminal's prompt,
  -- where the job must stay in the terminal's foreground group.
  local death_signal = run.death_signal
  local leader = not process.foreground_tty() and process.job_leader(death_signal, opts["kill-after"] or 10) or nil
  local function end_leader(job)
    if job.leader then
      process.kill(job.leader, "KILL")
      process.waitpid(job.leader)
    end
  end
  local pid, why, code = process.spawn(run.command, env, { ignore = run.ignore, death_signal = death_signal,
    keep_fd = wfd, pgid = leader })
  if wfd then process.close(wfd) end
  local job = { pid = pid, rfd = rfd, sfd = sfd, self = core.getpid(), leader = leader }
  if not pid then
    end_leader(job)
    lock:release()
    client:close()
    return fail(code or EXIT.cannot_exec, why)
  end
  local status, lost = supervise(client, lock, job, opts)
  end_leader(job)
  if not lost then lock:release() end
  client:close()
  if lost and run.on_lost ~= "ignore" then return EXIT.lost end
  return status
end

local function cmd_run(args, launch)
  local opts, rest = parse(args, 2, RUN_SPEC)
  if opts.help then return say(io.stdout, HELP.run) or 0 end
  if opts.version then return say(io.stdout, "redislock ", redislock._VERSION) or 0 end
  local run = {}
  run.name, run.command, run.on_lost, run.conflict, run.death_signal = check_run(opts, rest)
  local url = resolve_url(opts)
  -- What was ignored when we started stays ignored, here and in COMMAND.
  -- The launcher read the kernel's list before lua.c put its own SIGINT
  -- handler in place; without it, SIGINT's first state is unknown.
  run.ignored = process.ignored_signals(launch and launch.sigign)
  -- (ignored from here on, the wait included)
  run.ignore = numbers_of(run.ignored)
  process.ignore_signals(run.ignore)
  local client, code = connect(opts, url)
  if not client then return code end
  local lock, sfd = take(client, run, opts)
  if not lock then return sfd end   -- (the exit status)
  return guard(client, lock, sfd, run, opts)
end

local COMMANDS = { run = cmd_run, status = cmd_status, list = cmd_list, release = cmd_release,
  ["break"] = cmd_break }

--- Runs the command line; returns the exit status.
-- syntax: status = cli.main(args [, launch])
-- launch: what bin/redislock's shell part found before Lua started:
-- { sigign = "hex mask of the signals ignored at start" }.
function _M.main(args, launch)
  local first = args[1]
  if first == nil or first == "--help" or first == "-h" or (first == "help" and args[2] == nil) then
    say(first and io.stdout or io.stderr, HELP.main)
    return first and 0 or EXIT.usage
  end
  if first == "--version" or first == "-V" then
    say(io.stdout, "redislock ", redislock._VERSION)
    return 0
  end
  if first == "help" then
    if HELP[args[2]] and args[2] ~= "main" and args[3] == nil then
      say(io.stdout, HELP[args[2]])
      return 0
    end
    return fail(EXIT.usage, "no help for '" .. table.concat(args, " ", 2) .. "' (see --help)")
  end
  local cmd = COMMANDS[first]
  if not cmd then return fail(EXIT.usage, "unknown command '" .. first .. "' (see --help)") end
  local ok, status = pcall(cmd, args, launch)
  if ok then return status end
  if type(status) == "table" and status.usage then
    return fail(EXIT.usage, status.usage .. " (see redislock help " .. first .. ")")
  end
  -- the library refused an argument we let through: still a usage error
  if type(status) == "string" and (status:find("redislock: bad argument", 1, true)
      or status:find("bad config field", 1, true)) then
    return fail(EXIT.usage, connect_words((status:gsub("^[^\n]-%.lua:%d+: ", "")), TLS_OPTIONS))
  end
  error(status, 0)
end

return _M
