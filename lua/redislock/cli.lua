--- redislock.cli: the `redislock` command, a cross-host flock(1).
--
-- Policy only: process mechanics (spawn, waitpid, signalfd) are in the C
-- core. `main(args)` returns the exit status; bin/redislock calls os.exit.

local redislock = require "redislock"
local core = require "redislock.core"

local _M = { _VERSION = redislock._VERSION }

-- Exit statuses, documented in --help and the README.
local EXIT = {
  conflict = 1,        -- not taken (run: --conflict-exit-code); status: not held
  usage = 2,           -- bad arguments, bad URL, bad numbers
  unavailable = 69,    -- Redis unreachable, refused, or answered an error
  lost = 75,           -- run: the lock was lost while COMMAND ran
  cannot_run = 127,    -- run: COMMAND could not be started
}
_M.EXIT = EXIT

local HELP = {
  main = [[
usage: redislock [--version] [--help] COMMAND [ARGS]

Redis locks from the shell: run a job on one host only.

commands:
  run      run a command while holding a lock
  status   show whether a lock is held
  release  release a lock with its holder's token
  break    delete a stuck lock

Every command takes --url URL (default: $REDISLOCK_URL, then
redis://127.0.0.1:6379) and --prefix P (key namespace).
`redislock COMMAND --help` for details.]],

  run = [[
usage: redislock run [options] NAME -- COMMAND [ARG...]

Runs COMMAND while holding the lock NAME, renewed by the watchdog, like
flock(1) across hosts. COMMAND gets REDISLOCK_NAME, REDISLOCK_TOKEN and
REDISLOCK_FENCE in its environment. SIGINT, SIGTERM and SIGHUP are
forwarded to it. The lock is released when COMMAND ends.

options:
  --url URL                 Redis URL (default: $REDISLOCK_URL)
  --prefix P                key namespace
  --ttl SECONDS             lease, renewed while COMMAND runs (default 30)
  --wait SECONDS            wait this long for the lock (default 0: try once)
  --conflict-exit-code N    exit status when not taken (default 1)
  --on-lost term|kill|ignore  what to do to COMMAND if the lock is lost
                            (default term: SIGTERM, then SIGKILL after
                            --kill-after)
  --kill-after SECONDS      grace between SIGTERM and SIGKILL (default 10)
  --fence-env NAME          also export the fence as $NAME
  --quiet                   no message when the lock is not taken

exit status:
  COMMAND's own status, or 128+N when it died of signal N
  1    not taken (or --conflict-exit-code)
  2    usage error
  69   Redis unreachable or refused the request
  75   the lock was lost while COMMAND ran (COMMAND was stopped
       unless --on-lost ignore)
  127  COMMAND could not be started]],

  status = [[
usage: redislock status [--url URL] [--prefix P] [--show-token] NAME

Prints whether NAME is held, its remaining ttl and its fence counter.
The holder's token is a secret and shown only with --show-token.
exit status: 0 held, 1 not held, 2 usage error, 69 Redis unreachable]],

  release = [[
usage: redislock release [--url URL] [--prefix P] --token TOKEN NAME

Releases NAME if TOKEN is its holder's token (compare-and-delete).
exit status: 0 released, 1 not held by TOKEN, 2 usage error,
69 Redis unreachable]],

  ["break"] = [[
usage: redislock break [--url URL] [--prefix P] --force NAME

Deletes the lock NAME whoever holds it. The holder learns of it at its next
renewal. Refuses without --force.
exit status: 0 deleted, 1 not held, 2 usage error, 69 Redis unreachable]],
}

-- Every digit of a fence, on any Lua: tostring gives 5.1 and LuaJIT's
-- "1.7953298305222e+15" for a 16-digit fence.
local function fence_string(fence)
  return string.format("%.0f", fence)
end

local function say(io_out, ...)
  io_out:write(table.concat({ ... }), "\n")
end

local function fail(code, msg)
  say(io.stderr, "redislock: ", msg)
  return code
end

-- Parses options (given as a table of name -> kind: "flag", "string",
-- "number") until the first non-option or "--". Returns opts, rest.
local function parse(args, first, spec)
  local opts, i = {}, first
  while i <= #args do
    local a = args[i]
    if a == "--" then
      i = i + 1
      break
    end
    if a:sub(1, 2) ~= "--" or a == "-" then break end
    local name, value = a:match("^%-%-([%w-]+)=(.*)$")
    name = name or a:sub(3)
    local kind = spec[name]
    if not kind then error({ usage = "unknown option --" .. name }) end
    if kind == "flag" then
      if value then error({ usage = "--" .. name .. " takes no value" }) end
      opts[name] = true
    else
      if not value then
        i = i + 1
        value = args[i]
        if value == nil then error({ usage = "--" .. name .. " needs a value" }) end
      end
      if kind == "number" then
        local n = tonumber(value)
        if not n or n ~= n or n < 0 or n == math.huge then
          error({ usage = "--" .. name .. ": not a non-negative number: " .. value })
        end
        value = n
      end
      opts[name] = value
    end
    i = i + 1
  end
  local rest = {}
  for j = i, #args do rest[#rest + 1] = args[j] end
  return opts, rest
end

local COMMON = { url = "string", prefix = "string", help = "flag" }

local function with_common(extra)
  local spec = {}
  for k, v in pairs(COMMON) do spec[k] = v end
  for k, v in pairs(extra) do spec[k] = v end
  return spec
end

-- Connects with --url or $REDISLOCK_URL. Returns client or nil, code.
local function connect(opts)
  local url = opts.url or os.getenv("REDISLOCK_URL")
  if url == "" then url = nil end
  local ok, client, err = pcall(redislock.connect, {
    url = url or "redis://127.0.0.1:6379",
    prefix = opts.prefix,
  })
  if not ok then
    return nil, fail(EXIT.usage, (tostring(client):gsub("^redislock: ", "")))
  end
  if not client then return nil, fail(EXIT.unavailable, err) end
  return client
end

local function one_name(rest, cmd)
  if #rest ~= 1 or rest[1] == "" then
    error({ usage = cmd .. " takes exactly one NAME" })
  end
  return rest[1]
end

--- redislock status
local function cmd_status(args)
  local opts, rest = parse(args, 2, with_common({ ["show-token"] = "flag" }))
  if opts.help then
    say(io.stdout, HELP.status)
    return 0
  end
  local name = one_name(rest, "status")
  local client, code = connect(opts)
  if not client then return code end
  local info, err = client:inspect(name)
  client:close()
  if not info then return fail(EXIT.unavailable, err) end
  say(io.stdout, "name: ", name)
  say(io.stdout, "held: ", info.held and "yes" or "no")
  if info.ttl then say(io.stdout, "ttl: ", string.format("%.3f", info.ttl), " s") end
  say(io.stdout, "fence: ", fence_string(info.fence))
  if opts["show-token"] and info.token then say(io.stdout, "token: ", info.token) end
  return info.held and 0 or EXIT.conflict
end

--- redislock release
local function cmd_release(args)
  local opts, rest = parse(args, 2, with_common({ token = "string" }))
  if opts.help then
    say(io.stdout, HELP.release)
    return 0
  end
  local name = one_name(rest, "release")
  if not opts.token or opts.token == "" then error({ usage = "release needs --token TOKEN" }) end
  local client, code = connect(opts)
  if not client then return code end
  local ok, err = client:release_token(name, opts.token)
  client:close()
  if ok then return 0 end
  if err == "not held" then return fail(EXIT.conflict, name .. ": not held by that token") end
  return fail(EXIT.unavailable, err)
end

--- redislock break
local function cmd_break(args)
  local opts, rest = parse(args, 2, with_common({ force = "flag" }))
  if opts.help then
    say(io.stdout, HELP["break"])
    return 0
  end
  local name = one_name(rest, "break")
  if not opts.force then
    return fail(EXIT.usage, "break deletes another process' lock: add --force to confirm")
  end
  local client, code = connect(opts)
  if not client then return code end
  local ok, err = client:break_lock(name)
  client:close()
  if ok then return 0 end
  if err == "not held" then return fail(EXIT.conflict, name .. ": not held") end
  return fail(EXIT.unavailable, err)
end

local FORWARDED = { TERM = true, INT = true, HUP = true }

-- Waits for the child, forwarding signals and acting on a lost lock.
-- Returns the exit status and whether the lock was lost.
local function supervise(client, lock, pid, sfd, opts)
  local on_lost = opts["on-lost"] or "term"
  local kill_after = opts["kill-after"] or 10
  local lost_at, killed = nil, false
  while true do
    local sig = core.signal_wait(sfd, 0.02)
    if sig and FORWARDED[sig] then core.kill(pid, sig) end
    client:poll()
    if not lost_at and not lock:held() then
      lost_at = core.monotime()
      say(io.stderr, "redislock: lock ", lock.name, " lost (", tostring(lock.lost_reason), ")",
        on_lost == "ignore" and "; COMMAND keeps running" or "; stopping COMMAND")
      if on_lost == "term" then
        core.kill(pid, "TERM")
      elseif on_lost == "kill" then
        core.kill(pid, "KILL")
        killed = true
      end
    end
    if lost_at and on_lost == "term" and not killed and core.monotime() - lost_at >= kill_after then
      core.kill(pid, "KILL")
      killed = true
    end
    local done, how, code = core.waitpid(pid, true)
    if done and done ~= 0 then
      local status = how == "exited" and code or 128 + code
      return status, lost_at ~= nil
    end
  end
end

--- redislock run
local function cmd_run(args)
  local opts, rest = parse(args, 2, with_common({
    ttl = "number", wait = "number", ["conflict-exit-code"] = "number",
    ["on-lost"] = "string", ["kill-after"] = "number", ["fence-env"] = "string",
    quiet = "flag",
  }))
  if opts.help then
    say(io.stdout, HELP.run)
    return 0
  end
  local name = rest[1]
  if not name or name == "" then error({ usage = "run needs NAME -- COMMAND" }) end
  local command = {}
  local start = rest[2] == "--" and 3 or 2
  for i = start, #rest do command[#command + 1] = rest[i] end
  if #command == 0 then error({ usage = "run needs a COMMAND after NAME --" }) end
  local on_lost = opts["on-lost"] or "term"
  if on_lost ~= "term" and on_lost ~= "kill" and on_lost ~= "ignore" then
    error({ usage = "--on-lost must be term, kill or ignore" })
  end
  local conflict = opts["conflict-exit-code"] or EXIT.conflict
  if conflict ~= math.floor(conflict) or conflict > 255 then
    error({ usage = "--conflict-exit-code must be an integer 0-255" })
  end
  if opts.ttl and not (opts.ttl >= 0.001 and opts.ttl <= 2 ^ 31) then
    error({ usage = "--ttl must be between 0.001 and 2147483648" })
  end
  if opts.wait and opts.wait > 2 ^ 31 then error({ usage = "--wait must be at most 2147483648" }) end
  if opts["fence-env"] and not opts["fence-env"]:match("^[%a_][%w_]*$") then
    error({ usage = "--fence-env must be a variable name" })
  end

  local client, code = connect(opts)
  if not client then return code end
  local lock, err = client:acquire(name, { ttl = opts.ttl or 30, wait = opts.wait or 0 })
  if not lock then
    client:close()
    if err == "busy" or err == "timeout" then
      if not opts.quiet then say(io.stderr, "redislock: ", name, " is held elsewhere (", err, ")") end
      return conflict
    end
    return fail(EXIT.unavailable, err)
  end

  local env = {
    REDISLOCK_NAME = name,
    REDISLOCK_TOKEN = lock.token,
    REDISLOCK_FENCE = fence_string(lock.fence),
  }
  if opts["fence-env"] then env[opts["fence-env"]] = fence_string(lock.fence) end
  -- Signals become readable on a signalfd; the child gets them unblocked.
  local sfd = assert(core.signalfd({ "TERM", "INT", "HUP", "CHLD" }))
  local pid
  pid, err = core.spawn(command, env)
  if not pid then
    lock:release()
    client:close()
    return fail(EXIT.cannot_run, err)
  end
  local status, lost = supervise(client, lock, pid, sfd, opts)
  if not lost then lock:release() end
  client:close()
  if lost and on_lost ~= "ignore" then return EXIT.lost end
  return status
end

local COMMANDS = { run = cmd_run, status = cmd_status, release = cmd_release, ["break"] = cmd_break }

--- Runs the command line; returns the exit status.
-- syntax: status = cli.main(args)
function _M.main(args)
  local first = args[1]
  if first == nil or first == "--help" or first == "-h" or first == "help" then
    say(first and io.stdout or io.stderr, HELP.main)
    return first and 0 or EXIT.usage
  end
  if first == "--version" then
    say(io.stdout, "redislock ", redislock._VERSION)
    return 0
  end
  local cmd = COMMANDS[first]
  if not cmd then return fail(EXIT.usage, "unknown command '" .. first .. "' (see --help)") end
  local ok, status = pcall(cmd, args)
  if ok then return status end
  if type(status) == "table" and status.usage then
    return fail(EXIT.usage, status.usage .. " (see redislock " .. first .. " --help)")
  end
  -- the library refused an argument we let through: still a usage error
  if type(status) == "string" and status:find("redislock: bad argument", 1, true) then
    return fail(EXIT.usage, status:match("(redislock: bad argument.*)$"):gsub("^redislock: ", ""))
  end
  error(status, 0)
end

return _M
