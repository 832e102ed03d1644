--- redislock.cli_options: the command line's options and exit statuses (the
-- one table of each), its getopt-style parser and the NAME checks, for
-- cli.lua. A usage error is raised as { usage = msg }:
-- cli.main turns it into exit status 2 and a pointer to the command's help.

local _M = {}

-- Raises a usage error.
function _M.usage(msg)
  error({ usage = msg }, 0)
end

local usage = _M.usage

-- The command line's options and exit statuses: one table each, from which
-- the parser (spec_for), the help's option and exit-status lists
-- (cli_help.lua), docs/cli.md's Options and Exit status tables and the man
-- page's OPTIONS and EXIT STATUS (tools/gen_cli_docs.lua, `make docs`;
-- `make lint` fails when the committed docs differ) are all made.
--
-- An option: long (its name), aliases (more long names for it), short
-- (a letter), kind ("flag", "string", "number", "list": repeatable), key
-- (where parse stores it: long by default), arg (the value's name),
-- default (as the docs show it; nil: none), commands (nil: every command;
-- else the list of those that take it), text (one sentence or two,
-- markdown: `x` is code, [text](file) a link from docs/). Listed in the order the docs list them.
local OPTIONS = {
  { long = "url", kind = "list", arg = "URL", default = "`$REDISLOCK_URL`",
    text = "Redis URL (`redis://`, `unix://`, `redis+sentinel://h1:p1,h2:p2/MASTER`, " ..
      "`redis+cluster://h1:p1,h2:p2`); repeated: Redlock over those masters, with no fence" },
  { long = "url-file", kind = "string", arg = "FILE", default = "`$REDISLOCK_URL_FILE`",
    text = "read the URL(s) from FILE, one per line, so that a password is not on the command line" },
  { long = "prefix", kind = "string", arg = "P", text = "key namespace (the library's `prefix`)" },
  { long = "strict", kind = "flag", default = "off",
    text = "refuse a Redis whose `maxmemory-policy` may evict the lock" },
  { long = "tls-ca", kind = "string", arg = "FILE", default = "`$REDISLOCK_TLS_CA`",
    text = "for `rediss://`: verify the server against this CA, not the system's store" },
  { long = "tls-cert", kind = "string", arg = "FILE", default = "`$REDISLOCK_TLS_CERT`",
    text = "client certificate, for mutual TLS" },
  { long = "tls-key", kind = "string", arg = "FILE", default = "`$REDISLOCK_TLS_KEY`", text = "its key" },
  { long = "tls-server-name", kind = "string", arg = "NAME", default = "the URL's host",
    text = "the name to verify and send as SNI" },
  { long = "tls-insecure", kind = "flag", default = "off",
    text = "encrypt without verifying the server (warned about; see [docs/tls.md](tls.md))" },
  { long = "ttl", kind = "number", arg = "SECONDS", default = "`30`", commands = { "run" },
    text = "lease, renewed by the watchdog while the job runs" },
  { long = "nonblock", short = "n", kind = "flag", default = "on", commands = { "run" },
    text = "do not wait for the lock" },
  { long = "wait", aliases = { "timeout" }, short = "w", kind = "number", arg = "SECONDS", default = "`0`",
    commands = { "run" }, text = "wait this long for the lock" },
  { long = "conflict-exit-code", short = "E", kind = "number", arg = "N", default = "`1`", commands = { "run" },
    text = "exit status when not taken" },
  { long = "close", short = "o", kind = "flag", default = "off", commands = { "run" },
    text = "hold the lock for COMMAND only, not for the processes it leaves in the background" },
  { long = "on-lost", kind = "string", arg = "term|kill|ignore", default = "`term`", commands = { "run" },
    text = "what to do to the job if the lock is lost: `term`: SIGTERM, then SIGKILL after `--kill-after`; " ..
      "`kill`: SIGKILL; `ignore`: let it run" },
  { long = "kill-after", kind = "number", arg = "SECONDS", default = "`10`", commands = { "run" },
    text = "grace between SIGTERM and SIGKILL" },
  { long = "death-signal", kind = "string", arg = "SIG", default = "`TERM`", commands = { "run" },
    text = "sent to COMMAND if the guard dies: a signal's name or number" },
  { long = "fence-env", kind = "string", arg = "NAME", commands = { "run" },
    text = "also export the fence as `$NAME`" },
  { long = "keep-env", kind = "flag", default = "off", commands = { "run" },
    text = "pass `REDISLOCK_URL` and `REDISLOCK_URL_FILE` on to COMMAND" },
  { long = "verbose", kind = "flag", default = "off", commands = { "run" },
    text = "say when the lock is busy or taken, and the fence" },
  { long = "quiet", kind = "flag", default = "on", commands = { "run" },
    text = "say nothing when the lock is busy" },
  { long = "show-token", kind = "flag", default = "off", commands = { "status" },
    text = "print the holder's token (a secret)" },
  { long = "json", kind = "flag", default = "off", commands = { "status", "list" },
    text = "one JSON object, for scripts (see [docs/operator.md](operator.md))" },
  { long = "token", kind = "string", arg = "TOKEN", commands = { "release" }, text = "the holder's token" },
  { long = "force", kind = "flag", commands = { "break" }, text = "required: the lock is someone else's" },
  { long = "help", short = "h", kind = "flag", default = "",
    text = "the help of the command (also `redislock help COMMAND`)" },
  { long = "version", short = "V", kind = "flag", default = "", text = "the version" },
}
_M.OPTIONS = OPTIONS

-- The exit statuses: code (a number, or words for a row of the docs),
-- key (cli.EXIT's name for it), then what it means for every command
-- (all) or for each command that gives it (run, status, list, release,
-- break).
local EXITS = {
  { code = "COMMAND's", run = "COMMAND ran: its own status, or 128+N when it died of signal N" },
  { code = 0, status = "held", list = "listed (also when none is held)", release = "released", ["break"] = "deleted" },
  { code = 1, key = "conflict", run = "not taken within `--wait` (or the `-E` code)", status = "not held",
    release = "not held by TOKEN", ["break"] = "not held" },
  { code = 2, key = "usage", all = "usage error: bad option, number, URL, NAME or TLS file"
    .. " (`--tls-ca: cannot read FILE (...)`); nothing was locked or run" },
  { code = 69, key = "unavailable", all = "Redis unreachable, or it refused the request (auth, ACL, `--strict`)" },
  { code = 75, key = "lost", run = "the lock was lost while the job ran, and the job was stopped " ..
      "(with `--on-lost ignore` the status is COMMAND's own)" },
  { code = 126, key = "cannot_exec", run = "COMMAND exists but cannot be executed (permissions, not a program)" },
  { code = 127, key = "cannot_run", run = "COMMAND not found" },
  { code = "130, 143", run = "Ctrl-C (SIGINT) or SIGTERM while it waited for the lock: nothing was taken, " ..
      "and `run` died of that signal" },
}
_M.EXITS = EXITS
_M.COMMANDS = { "run", "status", "list", "release", "break" }

--- Whether option o is taken by command cmd.
function _M.takes(o, cmd)
  if not o.commands then return true end
  for _, c in ipairs(o.commands) do
    if c == cmd then return true end
  end
  return false
end

--- The parser's table for a command: long name -> kind or { kind, key = },
-- letter -> long name.
function _M.spec_for(cmd)
  local long, letters = {}, {}
  for _, o in ipairs(OPTIONS) do
    if _M.takes(o, cmd) then
      long[o.long] = o.key and { o.kind, key = o.key } or o.kind
      for _, a in ipairs(o.aliases or {}) do long[a] = { o.kind, key = o.key or o.long } end
      if o.short then letters[o.short] = o.long end
    end
  end
  return { long = long, short = letters }
end

local function set_option(opts, spec, name, shown, value, next_arg)
  local kind = spec.long[name]
  local key = name
  if type(kind) == "table" then kind, key = kind[1], kind.key end
  if kind == "flag" then
    if value then usage(shown .. " takes no value") end
    opts[key] = true
    return false
  end
  local used_next = false
  if value == nil then
    value = next_arg
    if value == nil then usage(shown .. " needs a value") end
    used_next = true
  end
  if kind == "list" then
    opts[key] = opts[key] or {}
    table.insert(opts[key], value)
    return used_next
  end
  if kind == "number" then
    local n = tonumber(value)
    if not n or n ~= n or n < 0 or n == math.huge then
      usage(shown .. ": not a non-negative number: " .. value)
    end
    value = n
  end
  opts[key] = value
  return used_next
end

-- Parses getopt-style options from args[first]: --name, --name=value,
-- --name value, -x, -xVALUE, -x VALUE, and clusters of flags (-no). Stops
-- at the first argument that is not an option, or after "--". Returns
-- opts and the rest of the arguments.
local function parse(args, first, spec)
  local opts, i = {}, first
  while i <= #args do
    local a = args[i]
    if a == "--" then
      i = i + 1
      break
    end
    if a:sub(1, 1) ~= "-" or a == "-" then break end
    if a:sub(1, 2) == "--" then
      local name, value = a:match("^%-%-([^=]+)=(.*)$")
      name = name or a:sub(3)
      if not spec.long[name] then usage("unknown option --" .. name) end
      if set_option(opts, spec, name, "--" .. name, value, args[i + 1]) then i = i + 1 end
    else
      local j = 2
      while j <= #a do
        local letter = a:sub(j, j)
        local name = spec.short[letter]
        if not name then usage("unknown option -" .. letter) end
        local kind = spec.long[name]
        if type(kind) == "table" then kind = kind[1] end
        if kind == "flag" then
          set_option(opts, spec, name, "-" .. letter)
          j = j + 1
        else
          local value = a:sub(j + 1)
          if value == "" then value = nil end
          if set_option(opts, spec, name, "-" .. letter, value, args[i + 1]) then i = i + 1 end
          break
        end
      end
    end
    i = i + 1
  end
  local rest = {}
  for j = i, #args do rest[#rest + 1] = args[j] end
  return opts, rest
end

-- NAME, checked: lock names that look like options are refused, so that a
-- misplaced option (`break --force -x`) never becomes a lock name.
local function check_name(name, cmd)
  if name == nil or name == "" then usage(cmd .. " needs a NAME") end
  if name:sub(1, 1) == "-" then
    usage("NAME must not start with '-' (options go before NAME): " .. name)
  end
  return name
end

local function one_name(rest, cmd)
  local name = check_name(rest[1], cmd)
  if rest[2] ~= nil then
    if rest[2]:sub(1, 1) == "-" then usage("options go before NAME: " .. rest[2]) end
    usage(cmd .. " takes exactly one NAME")
  end
  return name
end

_M.parse, _M.check_name, _M.one_name = parse, check_name, one_name

return _M
