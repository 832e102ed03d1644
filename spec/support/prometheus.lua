--[[
spec/support/prometheus.lua -- a strict reader of the Prometheus text
exposition format (version 0.0.4), for specs: it raises at the first line
that is not HELP, TYPE or a sample, at a bad label escape, at a value that
is not a number, and at a sample whose family has no TYPE before it.

  local prometheus = require "spec.support.prometheus"
  local p = prometheus.parse(text)   -- { families = {...}, samples = {...} }
  prometheus.sample(p, "redislock_acquires_total", { reason = "x" })  -> value

Loadable on Lua 5.1.
]]

local M = {}

-- Parses Prometheus text: { families = { name = { type =, help = } },
-- samples = { { name =, labels = { k = v }, value = n } } }; raises at
-- the first line that is not valid exposition format.
function M.parse(text)
  assert(text:sub(-1) == "\n", "the text must end with a newline")
  local families, samples = {}, {}
  local n = 0
  for line in text:gmatch("([^\n]*)\n") do
    n = n + 1
    local where = "line " .. n .. ": " .. line
    -- the format is UTF-8 (checked where the interpreter can: 5.3 and up)
    if rawget(_G, "utf8") and utf8.len then assert(utf8.len(line), "not UTF-8, " .. where) end
    local hname, htext = line:match("^# HELP ([%a_:][%w_:]*) (.*)$")
    local tname, ttype = line:match("^# TYPE ([%a_:][%w_:]*) (%a+)$")
    if hname then
      families[hname] = families[hname] or {}
      assert(not families[hname].help, "second HELP, " .. where)
      families[hname].help = htext
    elseif tname then
      assert(ttype == "counter" or ttype == "gauge" or ttype == "histogram", where)
      families[tname] = families[tname] or {}
      assert(not families[tname].type, "second TYPE, " .. where)
      families[tname].type = ttype
    else
      local name, rest = line:match("^([%a_:][%w_:]*)(.*)$")
      assert(name, "not a sample, " .. where)
      local labels = {}
      if rest:sub(1, 1) == "{" then
        local i = 2
        while rest:sub(i, i) ~= "}" do
          local k = rest:match("^([%a_][%w_]*)=\"", i)
          assert(k, "bad label, " .. where)
          i = i + #k + 2
          local v = {}
          while true do
            local ch = rest:sub(i, i)
            assert(ch ~= "" and ch ~= "\n", "unterminated label value, " .. where)
            if ch == "\\" then
              local esc = rest:sub(i + 1, i + 1)
              assert(esc == "\\" or esc == "\"" or esc == "n", "bad escape, " .. where)
              v[#v + 1] = esc == "n" and "\n" or esc
              i = i + 2
            elseif ch == "\"" then
              i = i + 1
              break
            else
              v[#v + 1] = ch
              i = i + 1
            end
          end
          labels[k] = table.concat(v)
          if rest:sub(i, i) == "," then i = i + 1 end
        end
        rest = rest:sub(i + 1)
      end
      local value = rest:match("^ (%S+)$")
      assert(value, "bad value, " .. where)
      local v = value == "+Inf" and math.huge or value == "-Inf" and -math.huge or tonumber(value)
      assert(v or value == "NaN", "bad number, " .. where)
      -- the family it belongs to must have been declared before
      local family = name:gsub("_bucket$", ""):gsub("_sum$", ""):gsub("_count$", "")
      local f = families[name] or families[family]
      assert(f and f.type, "sample before its TYPE, " .. where)
      samples[#samples + 1] = { name = name, labels = labels, value = v }
    end
  end
  return { families = families, samples = samples }
end

-- The value of the sample `name` whose labels include `want`.
function M.sample(p, name, want)
  for _, s in ipairs(p.samples) do
    if s.name == name then
      local ok = true
      for k, v in pairs(want or {}) do ok = ok and s.labels[k] == v end
      if ok then return s.value end
    end
  end
end

return M
