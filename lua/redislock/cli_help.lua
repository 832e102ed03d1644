--- redislock.cli_help: the texts of `redislock --help` and `redislock help
-- COMMAND` (cli.lua prints them). Each command's options and exit statuses
-- are listed from cli_options' tables, as the docs are (tools/gen_cli_docs.lua
-- uses the same words through _M.names and _M.note); the prose is here.

local options = require "redislock.cli_options"

local WIDTH, COLUMN = 76, 28

-- text without markdown's code marks, a link as its text
local function plain(text)
  return (text:gsub("%[([^%]]*)%]%([^)]*%)", "%1"):gsub("`", ""))
end

-- Words of `text` filled into lines of at most WIDTH, the first starting
-- at column `at` (0-based), every other at `indent`.
local function fill(text, at, indent)
  local lines, line, col = {}, "", at
  for word in text:gmatch("%S+") do
    if line ~= "" and col + 1 + #word > WIDTH then
      lines[#lines + 1] = line
      line, col = string.rep(" ", indent) .. word, indent + #word
    else
      line = line == "" and word or line .. " " .. word
      col = col + (line == word and 0 or 1) + #word
    end
  end
  lines[#lines + 1] = line
  return table.concat(lines, "\n")
end

--- An option's names as typed, short letter first, its value's name after
-- the last: "-w, --wait, --timeout SECONDS". mark(s) marks each name.
local function names(o, mark)
  mark = mark or function(x) return x end
  local list = {}
  if o.short then list[#list + 1] = mark("-" .. o.short) end
  list[#list + 1] = mark("--" .. o.long)
  for _, a in ipairs(o.aliases or {}) do list[#list + 1] = mark("--" .. a) end
  return table.concat(list, ", "), o.arg
end

--- What an option's text adds about its default, in markdown: " (default:
-- `30`)", " (the default)" for a flag that is on unless told, or "".
local function note(o)
  if o.kind == "flag" then return o.default == "on" and " (the default)" or "" end
  if o.default and o.default ~= "" then return " (default: " .. o.default .. ")" end
  return ""
end

local function option_lines(cmd)
  local out = {}
  for _, o in ipairs(options.OPTIONS) do
    if options.takes(o, cmd) then
      local n, arg = names(o)
      local head = "  " .. n .. (arg and " " .. arg or "")
      local text = plain(o.text .. note(o))
      if #head + 2 > COLUMN then
        out[#out + 1] = head
        out[#out + 1] = string.rep(" ", COLUMN) .. fill(text, COLUMN, COLUMN)
      else
        out[#out + 1] = head .. string.rep(" ", COLUMN - #head) .. fill(text, COLUMN, COLUMN)
      end
    end
  end
  return table.concat(out, "\n")
end

--- What exit status e means for command cmd (markdown), or nil.
local function exit_meaning(e, cmd)
  return e.all or e[cmd]
end

local function exit_lines(cmd)
  local rows, width = {}, 0
  for _, e in ipairs(options.EXITS) do
    local meaning = exit_meaning(e, cmd)
    if meaning then
      rows[#rows + 1] = { tostring(e.code), plain(meaning) }
      width = math.max(width, #rows[#rows][1])
    end
  end
  local out = {}
  for i, r in ipairs(rows) do
    out[i] = "  " .. r[1] .. string.rep(" ", width + 2 - #r[1]) .. fill(r[2], width + 4, width + 4)
  end
  return table.concat(out, "\n")
end

-- The options and exit statuses of a command, as its help ends.
local function lists(cmd)
  return "options:\n" .. option_lines(cmd) .. "\n\nexit status:\n" .. exit_lines(cmd)
end

local HELP = {
  main = [[
usage: redislock [-h|--help] [-V|--version] COMMAND [ARGS]
       redislock help COMMAND

Redis locks from the shell: run a job on one host only.

commands:
  run      run a command while holding a lock
  status   show whether a lock is held, and by whom
  list     show every lock held now, and by whom
  release  release a lock with its holder's token
  break    delete a stuck lock

Every command takes --url URL or --url-file FILE (default: $REDISLOCK_URL,
then the file named by $REDISLOCK_URL_FILE, then redis://127.0.0.1:6379).
A URL is redis://, unix://, redis+sentinel://h1:p1,h2:p2/MASTER or
redis+cluster://h1:p1,h2:p2; several (--url repeated, one per line of the
file, or separated by spaces in $REDISLOCK_URL) are independent masters
that one lock spans (Redlock: no fence, REDISLOCK_FENCE is empty).
Every command also takes --prefix P (key namespace) and --strict (refuse
a Redis that may evict keys).

TLS: rediss://, rediss+sentinel://, rediss+cluster:// URLs, verified
against the system's CA store unless --tls-ca FILE ($REDISLOCK_TLS_CA);
--tls-cert FILE and --tls-key FILE ($REDISLOCK_TLS_CERT, $REDISLOCK_TLS_KEY)
for a server that wants a client certificate; --tls-server-name NAME to
check another name than the URL's host; --tls-insecure to encrypt without
verifying. A file that cannot be read or loaded: exit 2; a server that
cannot be verified: exit 69; either way nothing is run.
`redislock help COMMAND` or `redislock COMMAND -h` for details.]],

  run = [[
usage: redislock run [options] NAME [--] COMMAND [ARG...]

Runs COMMAND while holding the lock NAME, renewed by the watchdog, like
flock(1) across hosts. Options go before NAME. COMMAND gets REDISLOCK_NAME,
REDISLOCK_TOKEN, REDISLOCK_FENCE and REDISLOCK_FD in its environment, and
not REDISLOCK_URL or REDISLOCK_URL_FILE (unless --keep-env).

The lock is held until COMMAND and every process it started have exited
(they all inherit the fd $REDISLOCK_FD, as with flock's lock file); -o
releases it when COMMAND itself exits.

Signals: HUP, INT, QUIT, TERM, USR1 and USR2 sent to this process by pid
are passed on to COMMAND (to what is left of the job once COMMAND has
exited). Those a terminal sends to the whole foreground group (^C, ^\,
hangup) reached COMMAND already and are not sent again. A signal ignored
when redislock started (nohup, `cmd &` in sh) stays ignored in COMMAND.
If redislock itself dies, even by SIGKILL, COMMAND gets --death-signal,
and outside a terminal's prompt so does every process of the job's own
process group (then SIGKILL after --kill-after); one that left the group
(setsid) does not.
SIGINT (Ctrl-C) or SIGTERM while waiting for the lock end the wait at
once: nothing is left taken, and redislock dies of that signal (130, 143).

]] .. lists("run"),

  status = [[
usage: redislock status [--url URL] [--url-file FILE] [--prefix P] [--strict]
                        [--json] [--show-token] NAME

Prints whether NAME is held, by whom (holder: the label its holder chose,
by default HOST:PID, and `redislock run` adds its command) and since when
(the server's clock), its remaining ttl, its fence counter, how many wait
for it, and any warning about the server (such as an eviction policy that
can drop locks). The holder's token is a secret and shown only with
--show-token. --json: one JSON object (name, held, holder, since, held_for,
ttl, fence, waiters; times in seconds).

]] .. lists("status"),

  list = [[
usage: redislock list [--url URL] [--url-file FILE] [--prefix P] [--strict]
                      [--json] [PATTERN]

Prints every lock held now whose name matches PATTERN (a glob: * ? [abc];
default *), one line per holder: NAME, KIND (lock; write and read for a
read-write lock; permit for a semaphore), HOLDER, how long it has been held,
the ttl left, and how many wait. Found with SCAN (never KEYS), on every
master of a Cluster; over several --url (Redlock), the locks a majority
holds. --json: {"locks": [{name, kind, holder, since, held_for, ttl,
waiters, fence}, ...]}, times in seconds. No token is ever shown.

]] .. lists("list"),

  release = [[
usage: redislock release [--url URL] [--url-file FILE] [--prefix P] --token TOKEN NAME

Releases NAME if TOKEN is its holder's token (compare-and-delete).

]] .. lists("release"),

  ["break"] = [[
usage: redislock break [--url URL] [--url-file FILE] [--prefix P] --force NAME

Deletes the lock NAME whoever holds it. The holder learns of it at its next
renewal. Refuses without --force.

]] .. lists("break"),
}

HELP._names, HELP._note, HELP._exit_meaning, HELP._plain = names, note, exit_meaning, plain
return HELP
