-- The docs' examples and claims, checked against real processes: what a
-- reader pastes must work, and what the tables say must be true. The front
-- page is README.md, the reference is in docs/ (spec/support/docs.lua reads
-- both).
local helpers = require "spec.helpers"
local docs = require "spec.support.docs"

local quote = helpers.quote
-- make as a user types it: not with the LUA that `make test` exports to
-- its specs (nor `make sanitize`'s "valgrind ... lua5.4"), nor its flags.
local MAKE = "env -u LUA -u MAKEFLAGS -u MAKELEVEL make --no-print-directory"
local blocks = docs.blocks

local function write(path, text, mode)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  if mode then helpers.sh("chmod " .. mode .. " " .. quote(path)) end
end

local function lines(text)
  local out = {}
  for line in text:gmatch("[^\n]+") do out[#out + 1] = line end
  return out
end

describe("docs", function()
  local srv, prefix

  setup(function()
    srv = helpers.start_redis()
  end)
  teardown(function() srv:stop() end)

  -- `make install` into a prefix of our own, once.
  local function installed()
    if not prefix then
      prefix = helpers.tmpdir()
      local out, code = helpers.sh(MAKE .. " install PREFIX=" .. quote(prefix) .. " 2>&1")
      assert(code == 0, out)
    end
    return prefix
  end

  describe("README.md, the front page", function()
    it("is at most 20 KB, names make test, and links every file of docs/", function()
      local readme = docs.read("README.md")
      assert.is_true(#readme <= 20 * 1024, "README.md has " .. #readme .. " bytes")
      assert.truthy(readme:find("make test", 1, true))
      for _, path in ipairs(docs.files()) do
        if path ~= "README.md" then
          assert.truthy(readme:find("](" .. path .. ")", 1, true) or readme:find("](" .. path .. "#", 1, true),
            "README.md does not link " .. path)
        end
      end
    end)

    it("its Quick start runs as pasted: make, a Redis on 6379, LUA_PATH and LUA_CPATH, the file #builds", function()
      local sh, code
      for _, b in ipairs(blocks(docs.section("README.md", "Quick start"))) do
        if b.info == "sh" and not sh then sh = b.body end
        if b.info == "lua" and not code then code = b.body end
      end
      assert.truthy(sh, "no sh block")
      assert.truthy(code, "no lua block")
      local cmds = {}
      for _, line in ipairs(lines(sh)) do cmds[#cmds + 1] = (line:gsub("%s+#.*$", "")) end
      -- exactly four steps, each run here as the reader would
      assert.equal(4, #cmds, sh)
      assert.equal("make", cmds[1])
      local server_args = assert(cmds[2]:match("^redis%-server (.*)$"), cmds[2])
      local exports = assert(cmds[3]:match("^export (.+)$"), cmds[3])
      assert.equal("lua5.4 quickstart.lua", cmds[4])
      assert.matches("^%-%- quickstart%.lua\n", code)
      local root = helpers.sh("pwd"):gsub("%s+$", "")
      -- 1. make, in the checkout
      local out, status = helpers.sh(MAKE .. " 2>&1")
      assert(status == 0, out)
      -- 2. the Redis it starts, on a port of ours instead of 6379
      local args, words = {}, {}
      for w in server_args:gmatch("%S+") do words[#words + 1] = w end
      local i = 1
      while i <= #words do
        local w = words[i]
        if w == "--port" then
          assert.equal("6379", words[i + 1])
          i = i + 2
        elseif w == "--bind" or w == "--daemonize" then
          i = i + 2   -- start_redis binds to loopback and stays in the foreground
        else
          args[#args + 1] = w
          i = i + 1
        end
      end
      local server = helpers.start_redis { args = args }
      -- 3. the search paths it exports, $PWD being the checkout
      local env = { "env -u LUA_PATH_5_4 -u LUA_CPATH_5_4" }
      local n = 0
      for name, value in exports:gmatch('([%w_]+)="([^"]*)"') do
        assert.truthy(name == "LUA_PATH" or name == "LUA_CPATH", name)
        env[#env + 1] = name .. "=" .. quote((value:gsub("%$PWD", root)))
        n = n + 1
      end
      assert.equal(2, n, exports)
      -- 4. the file, from elsewhere, with our server's address
      local dir = helpers.tmpdir()
      local n_url
      code, n_url = code:gsub("redis://127%.0%.0%.1:6379/0", server.url .. "/0")
      assert.equal(1, n_url, "the Quick start's URL changed")
      write(dir .. "/quickstart.lua", code)
      out, status = helpers.sh("cd " .. quote(dir) .. " && " .. table.concat(env, " ") .. " lua5.4 quickstart.lua 2>&1")
      server:stop()
      assert.equal(0, status, out)
      assert.matches("^fence\t%d+\ntrue\twork done under fence %d+\nheld\ttrue\n$", out)
      -- and what it says of make install: /usr/local is on lua5.4's own paths
      out = helpers.sh("env -u LUA_PATH -u LUA_CPATH -u LUA_PATH_5_4 -u LUA_CPATH_5_4 lua5.4 -e " ..
        quote("print(package.path) print(package.cpath)"))
      assert.truthy(out:find("/usr/local/share/lua/5.4/?.lua", 1, true), out)
      assert.truthy(out:find("/usr/local/lib/lua/5.4/?.so", 1, true), out)
    end)
  end)

  it("every relative link of README.md and docs/ reaches a file, and a heading that exists", function()
    -- Files other branches are writing, linked ahead of their merge.
    local coming = { ["docs/tls.md"] = true, ["docs/errors.md"] = true, ["docs/operator.md"] = true,
      ["docs/fencing-postgres.md"] = true }
    -- GitHub's heading anchors: lower case, only letters, digits, spaces,
    -- hyphens and underscores kept, spaces made hyphens, repeats numbered.
    local anchors = {}
    local function anchors_of(path)
      if not anchors[path] then
        local set, seen = {}, {}
        for _, h in ipairs(docs.headings(assert(helpers.read_file(path)))) do
          local slug = h[3]:lower():gsub("[^%w _-]", ""):gsub(" ", "-")
          if seen[slug] then
            seen[slug] = seen[slug] + 1
            slug = slug .. "-" .. seen[slug]
          else
            seen[slug] = 0
          end
          set[slug] = true
        end
        anchors[path] = set
      end
      return anchors[path]
    end
    local checked = 0
    for _, path in ipairs(docs.files()) do
      local text = docs.read(path):gsub("\n```.-\n```", "")   -- links in code blocks are code
      local dir = path:match("^(.*)/") or ""
      for target in text:gmatch("%]%(([^)%s]+)%)") do
        if not target:match("^%a+:") then
          local file, anchor = target:match("^([^#]*)#?(.*)$")
          local full = file == "" and path or (dir == "" and file or dir .. "/" .. file)
          full = full:gsub("[^/]+/%.%./", ""):gsub("/$", "")
          if not coming[full] then
            local f = io.open(full)
            assert.truthy(f, path .. ": " .. target .. " (" .. full .. ") does not exist")
            f:close()
            if anchor ~= "" then
              assert.truthy(full:match("%.md$"), path .. ": an anchor into " .. full)
              assert.truthy(anchors_of(full)[anchor], path .. ": " .. full .. " has no heading #" .. anchor)
            end
            checked = checked + 1
          end
        end
      end
    end
    assert.is_true(checked >= 40, checked .. " links checked")
  end)

  it("cli.md's Options and the man page's OPTIONS list exactly the options of redislock's help", function()
    local function options_in(text)
      local set = {}
      for opt in text:gmatch("(%-%-?%a[%w-]*)") do set[opt] = true end
      return set
    end
    local function sorted(set)
      local list = {}
      for k in pairs(set) do list[#list + 1] = k end
      table.sort(list)
      return table.concat(list, " ")
    end
    -- what the command itself says it takes
    local help = {}
    for _, cmd in ipairs({ "run", "status", "release", "break" }) do
      local text = helpers.sh(quote(helpers.lua_bin) .. " bin/redislock help " .. cmd .. " 2>&1")
      for opt in text:gmatch("[%s%[](%-%-?%a[%w-]*)") do help[opt] = true end
    end
    -- cli.md: the first column of its Options table
    local first_cells = {}
    for row in docs.section("cli.md", "Options"):gmatch("\n| (`.-) | ") do first_cells[#first_cells + 1] = row end
    -- the man page: the tags of the .TP paragraphs under OPTIONS
    local man = assert(helpers.read_file("docs/redislock.1"))
    local man_options = assert(man:match("\n%.SH OPTIONS\n(.-)\n%.SH "))
    local tags = {}
    for tag in man_options:gmatch("\n%.TP\n([^\n]+)") do tags[#tags + 1] = (tag:gsub("\\%-", "-")) end
    assert.is_true(#first_cells >= 20 and #tags >= 20)
    assert.equal(sorted(help), sorted(options_in(table.concat(first_cells, "\n"))))
    assert.equal(sorted(help), sorted(options_in(table.concat(tags, "\n"))))
    -- and the same exit statuses as the code
    local statuses = docs.section("cli.md", "Exit status")
    local man_statuses = assert(man:match("\n%.SH EXIT STATUS\n(.-)\n%.SH "))
    for _, code in pairs(require("redislock.cli").EXIT) do
      assert.truthy(statuses:find("\n| " .. code .. " |", 1, true), "cli.md's Exit status has no " .. code)
      assert.truthy(man_statuses:find("\n.B " .. code .. "\n", 1, true), "the man page's EXIT STATUS has no " .. code)
    end
  end)

  describe("cli.md: Guarding cron jobs", function()
    it("the crontab example runs as cron runs it: PATH=/usr/bin:/bin, no LUA_PATH, silent #builds", function()
      local cron
      for _, b in ipairs(blocks(docs.section("cli.md", "A cron job on every host"))) do
        if b.info == "crontab" then cron = b.body end
      end
      assert.truthy(cron, "no crontab block")
      local dir = helpers.tmpdir()
      local root = installed()
      -- the job it names, under the prefix we installed to
      local marker = dir .. "/ran"
      local env, jobs = {}, {}
      for _, line in ipairs(lines(cron)) do
        if not line:match("^%s*#") then
          local name, value = line:match("^([%w_]+)=(.*)$")
          if name then
            env[#env + 1] = { name, value }
          else
            local command = line:match("^%S+ %S+ %S+ %S+ %S+ (.+)$")
            assert.truthy(command, "not a crontab line: " .. line)
            jobs[#jobs + 1] = command
          end
        end
      end
      assert.equal(1, #jobs)
      local command = jobs[1]
      -- every program is named by an absolute path: cron's PATH has no /usr/local/bin
      assert.matches("^/", command)
      command = command:gsub("/usr/local/", root .. "/")
      local job = command:match("%-%- (/%S+)$")
      assert.truthy(job, "the job is not an absolute path: " .. command)
      helpers.sh("mkdir -p " .. quote(job:match("^(.*)/")))
      write(job, "#!/bin/sh\necho \"fence=$REDISLOCK_FENCE url_file=${REDISLOCK_URL_FILE-unset}\" > " ..
        quote(marker) .. "\nsleep 1\n", "755")
      -- the crontab's variables, the URL file in a place of ours
      local assignments = { "PATH=/usr/bin:/bin", "SHELL=/bin/sh", "HOME=/", "LOGNAME=root" }
      for _, kv in ipairs(env) do
        local value = kv[2]
        if kv[1] == "REDISLOCK_URL_FILE" then
          write(dir .. "/url", srv.url .. "\n")
          value = dir .. "/url"
        end
        assignments[#assignments + 1] = kv[1] .. "=" .. quote(value)
      end
      local cron_cmd = "cd / && env -i " .. table.concat(assignments, " ") .. " /bin/sh -c " .. quote(command)
      -- two hosts fire at once: one runs the job, the other exits 1, silently
      local a = helpers.spawn(cron_cmd)
      assert(helpers.wait_until(function() return helpers.read_file(marker) end, 10, 0.02), a:stderr())
      local b = helpers.spawn(cron_cmd)
      assert.equal(1, b:wait(10))
      assert.equal("", b:stdout() .. b:stderr())
      assert.equal(0, a:wait(10))
      assert.equal("", a:stdout() .. a:stderr())
      assert.matches("^fence=%d+ url_file=unset\n$", helpers.read_file(marker))
    end)

    describe("the flock comparison table", function()
      local rows

      setup(function()
        rows = {}
        local text = docs.section("cli.md", "Compared with flock(1)")
        for line in text:gmatch("\n(|[^\n]+)") do
          local cells = {}
          for cell in line:gmatch("|([^|]*)") do cells[#cells + 1] = cell:match("^%s*(.-)%s*$") end
          rows[#rows + 1] = cells
        end
      end)

      local function run_help()
        local out = helpers.sh(quote(helpers.lua_bin) .. " bin/redislock run --help")
        return out
      end

      it("has a row for every option of this machine's flock", function()
        local help = helpers.sh("flock --help 2>&1")
        local firsts = {}
        for _, r in ipairs(rows) do firsts[#firsts + 1] = r[1] end
        local all = table.concat(firsts, "\n")
        local n = 0
        for opts in help:gmatch("\n%s+(%-[^\n]-)%s%s+%S") do
          for opt in opts:gmatch("%-%-?[%w-]+") do
            n = n + 1
            assert.truthy(all:find("`" .. opt .. "`", 1, true) or all:find("`" .. opt .. " ", 1, true),
              "flock's " .. opt .. " has no row")
          end
        end
        assert.is_true(n >= 15, "flock --help listed only " .. n .. " options")
      end)

      it("names only options that redislock run has, and has none it says are missing", function()
        local help = run_help()
        for _, r in ipairs(rows) do
          local ours = r[2] or ""
          if ours == "none" then
            -- what flock calls it is refused by run
            local opt = r[1]:match("`(%-%-?[%w-]+)")
            if opt and opt:sub(1, 2) ~= "--" or opt == "--shared" or opt == "--command" or opt == "--no-fork" then
              local _, code = helpers.sh(quote(helpers.lua_bin) .. " bin/redislock run " .. opt ..
                " x -- true >/dev/null 2>&1")
              assert.equal(2, code, opt .. " is said to be missing, but run takes it")
            end
          elseif ours:match("^`%-") and r[1] ~= "behaviour" then
            for opt in ours:gmatch("`(%-%-?[%w-]+)") do
              assert.truthy(help:find(opt, 1, true), "run --help does not list " .. opt)
            end
          end
        end
      end)

      it("states exit statuses that both commands really give", function()
        local dir = helpers.tmpdir()
        local function code_of(cmd)
          local _, code = helpers.sh("cd " .. quote(dir) .. " && " .. cmd .. " >/dev/null 2>&1")
          return code
        end
        local rl = "REDISLOCK_URL=" .. quote(srv.url) .. " " .. quote(helpers.lua_bin) .. " " ..
          quote(helpers.sh("pwd"):gsub("%s+$", "") .. "/bin/redislock")
        local function row(name)
          for _, r in ipairs(rows) do if r[1] == name then return r end end
          error("no row " .. name)
        end
        assert.equal(row("usage error")[2], tostring(code_of("flock --no-such-option f true")))
        assert.matches("^2", row("usage error")[3])
        assert.equal(2, code_of(rl .. " run --no-such-option f -- true"))
        assert.matches("^69", row("COMMAND cannot be run")[2])
        assert.equal(69, code_of("flock f ./no-such-command"))
        assert.equal(127, code_of(rl .. " run f -- ./no-such-command"))
        assert.matches("^127 not found, 126 not executable", row("COMMAND cannot be run")[3])
        assert.equal(126, code_of(rl .. " run f -- /etc/passwd"))
        assert.matches("^1, silent", row("not taken")[2])
        local holder = helpers.spawn("cd " .. quote(dir) .. " && flock f sleep 3")
        assert(helpers.wait_until(function() return code_of("flock -n f true") == 1 end, 5, 0.02))
        assert.equal("", helpers.sh("cd " .. quote(dir) .. " && flock -n f true 2>&1"))
        holder:stop()
      end)
    end)
  end)

  it("says fences are doubles on Lua 5.2 wherever it says so of 5.1 and LuaJIT", function()
    local n = 0
    for _, name in ipairs(docs.files()) do
      for para in (docs.read(name) .. "\n\n"):gmatch("(.-)\n\n") do
        if para:find("%.0f", 1, true) and para:find("LuaJIT", 1, true) then
          n = n + 1
          assert.truthy(para:find("5.2", 1, true), name .. ": no 5.2 in: " .. para)
        end
      end
    end
    assert.is_true(n >= 2)
    local out, code = helpers.sh("lua5.2 -e 'print(tostring(1795424810233426), string.format(\"%.0f\", " ..
      "1795424810233426))' 2>/dev/null")
    if code == 0 then assert.equal("1.7954248102334e+15\t1795424810233426\n", out) end
  end)

  describe("operations.md: Operating Redis for locks", function()
    local text

    setup(function() text = docs.section("operations.md", "Operating Redis for locks") end)

    it("covers the eviction policy, persistence, fence counters and what to monitor", function()
      for _, needle in ipairs({ "maxmemory-policy", "noeviction", "strict = true", "--strict",
        "client:warnings()", "appendfsync", "restart", "longest ttl", "fence_ttl", "60 s",
        "Acquire failure rate", "Hold time against ttl", "Losses, by reason", "evicted_keys" }) do
        assert.truthy(text:find(needle, 1, true), "nothing on " .. needle)
      end
    end)

    it("its redis.conf lines are accepted by redis-server and mean what it says", function()
      local conf
      for _, b in ipairs(blocks(text)) do
        if b.body:find("maxmemory-policy", 1, true) then conf = b.body end
      end
      assert.truthy(conf)
      local args, want = {}, {}
      for _, line in ipairs(lines(conf)) do
        local name, value = line:match("^([%w-]+)%s+(%S+)%s*$")
        if name then
          args[#args + 1] = "--" .. name
          args[#args + 1] = value
          want[name] = value
        end
      end
      local server = helpers.start_redis { args = args }
      for name, value in pairs(want) do
        assert.equal(name .. "\n" .. value, server:cli_raw("CONFIG", "GET", name))
      end
      assert.equal("noeviction", want["maxmemory-policy"])
      server:stop()
    end)

    it("under allkeys-lru a held lock is evicted within seconds; under noeviction it stays", function()
      local redislock = require "redislock"
      local core = require "redislock.core"
      local filler = ("x"):rep(10000)
      local function fill(server)
        local admin = assert(core.connect { host = "127.0.0.1", port = server.port })
        local refused = 0
        for i = 1, 3000 do
          local ok = admin:command("SET", "filler:" .. i, filler)
          if not ok then refused = refused + 1 end
          if i % 20 == 0 and admin:command("EXISTS", "{evict}") == 0 then
            admin:close()
            return "evicted", refused
          end
        end
        admin:close()
        return "kept", refused
      end
      for _, case in ipairs({ { "allkeys-lru", "evicted" }, { "noeviction", "kept" } }) do
        local server = helpers.start_redis { args = { "--maxmemory", "2mb", "--maxmemory-policy", case[1] } }
        local client = assert(redislock.connect { url = server.url })
        local lock = assert(client:acquire("evict", { ttl = 30 }))
        local what, refused = fill(server)
        assert.equal(case[2], what, case[1])
        if what == "evicted" then
          -- a second client is granted the name the first still holds
          local other = assert(redislock.connect { url = server.url })
          assert.truthy(other:acquire("evict", { ttl = 30 }))
          other:close()
        else
          assert.is_true(refused > 0)   -- writes were refused instead
          assert.is_true(lock:held())
        end
        client:close()
        server:stop()
      end
    end)
  end)

  it("make lint's path check passes this tree and names a path that does not exist", function()
    local out, code = helpers.sh("lua5.4 tools/check_paths.lua 2>&1")
    assert.equal(0, code, out)
    local dir = helpers.tmpdir()
    write(dir .. "/stale.md", "see csrc/topo.c and lua/redislock/scripts/acquire.lua,\n" ..
      "not scripts/acquire.lua; /usr/include/hiredis/hiredis.h and build/lua5.1/ are not ours\n")
    out, code = helpers.sh("lua5.4 tools/check_paths.lua " .. quote(dir .. "/stale.md") .. " 2>&1")
    assert.equal(1, code, out)
    assert.truthy(out:find(":1: csrc/topo.c does not exist", 1, true), out)
    assert.truthy(out:find(":2: scripts/acquire.lua does not exist", 1, true), out)
    assert.equal(2, select(2, out:gsub("does not exist", "")), out)
  end)

  it("make docs makes cli.md's and the man page's tables from cli_options.lua, and --check sees a change", function()
    local root = helpers.sh("pwd"):gsub("%s+$", "")
    local dir = helpers.tmpdir()
    helpers.sh("mkdir -p " .. quote(dir .. "/lua/redislock") .. " " .. quote(dir .. "/docs"))
    for _, f in ipairs({ "lua/redislock/cli_options.lua", "lua/redislock/cli_help.lua", "docs/cli.md",
                         "docs/redislock.1" }) do
      write(dir .. "/" .. f, assert(helpers.read_file(f)))
    end
    local gen = "cd " .. quote(dir) .. " && lua5.4 " .. quote(root .. "/tools/gen_cli_docs.lua")
    local out, code = helpers.sh(gen .. " --check 2>&1")
    assert.equal(0, code, out)   -- what is committed is what make docs makes
    local opts = helpers.read_file(dir .. "/lua/redislock/cli_options.lua")
    local changed, n = opts:gsub('text = "grace between SIGTERM and SIGKILL"', 'text = "grace, then SIGKILL"')
    assert.equal(1, n)
    write(dir .. "/lua/redislock/cli_options.lua", changed)
    out, code = helpers.sh(gen .. " --check 2>&1")
    assert.equal(1, code, out)
    assert.truthy(out:find("docs/cli.md: the generated options differ", 1, true), out)
    assert.truthy(out:find("docs/redislock.1: the generated options differ", 1, true), out)
    out, code = helpers.sh(gen .. " 2>&1")
    assert.equal(0, code, out)
    local md = helpers.read_file(dir .. "/docs/cli.md")
    assert.truthy(md:find("| `--kill-after SECONDS` | `10` | grace, then SIGKILL |", 1, true))
    assert.truthy(helpers.read_file(dir .. "/docs/redislock.1"):find("\nGrace, then SIGKILL (default: \\fB10\\fR).\n",
      1, true))
    out, code = helpers.sh(gen .. " --check 2>&1")
    assert.equal(0, code, out)
  end)

  it("make and make lint install only what they use (no server, no PostgreSQL, no groff)", function()
    for _, target in ipairs({ "all", "lint", "docs" }) do
      local out = helpers.sh(MAKE .. " -n " .. target .. " 2>&1")
      local installs = {}
      for line in out:gmatch("[^\n]+") do
        if line:find("tools/deps.sh", 1, true) then installs[#installs + 1] = line end
      end
      assert.is_true(#installs >= 1, target .. ": " .. out)
      for _, line in ipairs(installs) do
        for _, pkg in ipairs({ "postgresql", "groff", "redis-server", "lua-busted", "luarocks" }) do
          assert.is_nil(line:find(pkg, 1, true), target .. " installs " .. pkg .. ": " .. line)
        end
      end
    end
  end)

  it("the Lua in the nginx example writes no global", function()
    local conf
    for _, b in ipairs(blocks(docs.section("nginx.md", "Inside nginx"))) do
      if b.info == "nginx" then conf = b.body end
    end
    assert.truthy(conf)
    local n = 0
    for start in conf:gmatch("_by_lua_block%s*{()") do
      -- the block's body: up to the brace that closes it
      local depth, i = 1, start
      while depth > 0 do
        local c = conf:sub(i, i)
        assert(c ~= "", "unbalanced braces")
        if c == "{" then depth = depth + 1 elseif c == "}" then depth = depth - 1 end
        i = i + 1
      end
      local path = helpers.tmpdir() .. "/block.lua"
      write(path, conf:sub(start, i - 2))
      local out, code = helpers.sh("luacheck " .. quote(path) .. " --no-color --std ngx_lua --only 1 2>&1")
      assert.equal(0, code, out)
      n = n + 1
    end
    assert.is_true(n >= 2)
  end)
end)
