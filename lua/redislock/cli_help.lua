--- redislock.cli_help: the texts of `redislock --help` and `redislock help
-- COMMAND` (cli.lua prints them; the exit statuses they name are cli.EXIT).

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

options:
  --url URL                 Redis URL (default: $REDISLOCK_URL); repeated:
                            Redlock over those masters
  --url-file FILE           read the URL from FILE, so that a password is
                            not on the command line ($REDISLOCK_URL_FILE)
  --prefix P                key namespace
  --strict                  refuse a Redis whose maxmemory-policy may
                            evict the lock
  --tls-ca FILE, --tls-cert FILE, --tls-key FILE, --tls-server-name NAME,
  --tls-insecure            TLS settings for rediss:// (redislock --help)
  --ttl SECONDS             lease, renewed while the job runs (default 30)
  -n, --nonblock            do not wait for the lock (the default)
  -w, --wait, --timeout SECONDS
                            wait this long for the lock (default 0)
  -E, --conflict-exit-code N  exit status when not taken (default 1)
  -o, --close               hold the lock for COMMAND only, not for the
                            processes it leaves in the background
  --on-lost term|kill|ignore  what to do to the job if the lock is lost:
                            term (default): SIGTERM, then SIGKILL after
                            --kill-after; kill: SIGKILL; ignore: let it run
  --kill-after SECONDS      grace between SIGTERM and SIGKILL (default 10)
  --death-signal SIG        sent to COMMAND if redislock dies (default TERM)
  --fence-env NAME          also export the fence as $NAME
  --keep-env                pass REDISLOCK_URL and REDISLOCK_URL_FILE on
  --verbose                 say when the lock is taken, or who holds it
  --quiet                   say nothing when the lock is busy (the default)
  -h, --help                this help
  -V, --version             the version

exit status:
  COMMAND's own status, or 128+N when it died of signal N
  1    not taken (or the -E code)
  2    usage error; nothing was done
  69   Redis unreachable or refused the request
  75   the lock was lost while the job ran, and the job was stopped
       (with --on-lost ignore the status is COMMAND's own)
  126  COMMAND exists but could not be executed
  127  COMMAND not found]],

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
exit status: 0 held, 1 not held, 2 usage error, 69 Redis unreachable]],

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
exit status: 0 (also when none is held), 2 usage error, 69 Redis unreachable]],

  release = [[
usage: redislock release [--url URL] [--url-file FILE] [--prefix P] --token TOKEN NAME

Releases NAME if TOKEN is its holder's token (compare-and-delete).
exit status: 0 released, 1 not held by TOKEN, 2 usage error,
69 Redis unreachable]],

  ["break"] = [[
usage: redislock break [--url URL] [--url-file FILE] [--prefix P] --force NAME

Deletes the lock NAME whoever holds it. The holder learns of it at its next
renewal. Refuses without --force.
exit status: 0 deleted, 1 not held, 2 usage error, 69 Redis unreachable]],
}

return HELP
