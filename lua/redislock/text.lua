--- redislock.text: text that came from outside (metric labels, holder
-- labels) made safe to show: valid UTF-8, bounded, escaped for the place it
-- goes (a terminal line, a JSON string). Pure Lua, 5.1 to 5.4: no utf8
-- library, no goto.

local byte, sub, find = string.byte, string.sub, string.find
local concat = table.concat

local _M = {}

local REPLACEMENT = "\239\191\189"   -- U+FFFD

-- The length of the UTF-8 sequence that starts at i in s, or nil when the
-- bytes there are no valid sequence (overlong forms, surrogates and code
-- points above U+10FFFF are invalid, as RFC 3629 says).
local function seq_len(s, i)
  local c = byte(s, i)
  if c < 0x80 then return 1 end
  local n, lo, hi
  if c >= 0xC2 and c <= 0xDF then
    n = 2
  elseif c >= 0xE0 and c <= 0xEF then
    n = 3
    if c == 0xE0 then lo = 0xA0 elseif c == 0xED then hi = 0x9F end
  elseif c >= 0xF0 and c <= 0xF4 then
    n = 4
    if c == 0xF0 then lo = 0x90 elseif c == 0xF4 then hi = 0x8F end
  else
    return nil
  end
  for k = 1, n - 1 do
    local d = byte(s, i + k)
    if not d then return nil end
    local dlo, dhi = 0x80, 0xBF
    if k == 1 then dlo, dhi = lo or dlo, hi or dhi end
    if d < dlo or d > dhi then return nil end
  end
  return n
end

--- s as valid UTF-8, at most `max` bytes (whole characters; "..." ends a
-- cut): each byte that starts no valid sequence becomes U+FFFD.
-- syntax: t = text.utf8(s [, max])   -- max >= 4
function _M.utf8(s, max)
  s = tostring(s)
  -- never more than max + 4 bytes are looked at: a 10 MB label costs what
  -- a short one does (a sequence cut here lies past the final cut)
  if max and #s > max then s = sub(s, 1, max + 4) end
  if find(s, "[\128-\255]") then
    local out, i, n = {}, 1, #s
    while i <= n do
      local len = seq_len(s, i)
      if len then
        out[#out + 1] = sub(s, i, i + len - 1)
        i = i + len
      else
        out[#out + 1] = REPLACEMENT
        i = i + 1
      end
    end
    s = concat(out)
  end
  if max and #s > max then
    local j = max - 3
    -- back to a character's first byte
    while j > 0 and byte(s, j + 1) >= 0x80 and byte(s, j + 1) < 0xC0 do j = j - 1 end
    s = sub(s, 1, j) .. "..."
  end
  return s
end

--- s for a line of a terminal: valid UTF-8 (see utf8), with control bytes
-- and backslashes written as \xNN, so that a label can neither break the
-- line nor drive the terminal.
-- syntax: t = text.shown(s [, max])
function _M.shown(s, max)
  return (_M.utf8(s, max):gsub("[%c\\]", function(c) return string.format("\\x%02x", byte(c)) end))
end

local JSON_ESC = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f", ["\n"] = "\\n",
  ["\r"] = "\\r", ["\t"] = "\\t" }

--- s as a JSON string literal (quotes included): valid UTF-8 (see utf8),
-- control characters escaped.
function _M.json_string(s, max)
  return '"' .. _M.utf8(s, max):gsub('[%c"\\]', function(c)
    return JSON_ESC[c] or string.format("\\u%04x", byte(c))
  end) .. '"'
end

return _M
