#!/bin/sh
# check_c_functions.sh: no C function of the core longer than MAX lines
# (80: STYLE.md; a longer one is doing two things). A function's length
# counts the lines between its opening brace's line and its closing one.
# Braces are counted outside comments, strings and character constants;
# a top-level block is a function when what precedes its "{" since the
# last top-level ";" or "}" has a "(" and no "=" (an initializer).
# Prints each breach as "file:line: name is N lines" and exits 1 if there
# is any. Run by `make lint`.
set -eu
cd "$(dirname "$0")/.."
MAX=${MAX:-80}
awk -v max="$MAX" '
    function strip(s) {   # comments, strings and character constants out
        if (incomment) {
            if (index(s, "*/") == 0) return ""
            s = substr(s, index(s, "*/") + 2); incomment = 0
        }
        gsub(/\\./, "", s)
        gsub(/"[^"]*"/, "\"\"", s)
        gsub(/\047[^\047]*\047/, "0", s)
        gsub(/\/\*([^*]|\*+[^*\/])*\*+\//, " ", s)
        sub(/\/\/.*/, "", s)
        if (index(s, "/*")) { s = substr(s, 1, index(s, "/*") - 1); incomment = 1 }
        return s
    }
    FNR == 1 { depth = 0; head = ""; incomment = 0 }
    {
        s = strip($0)
        if (depth == 0 && s ~ /^#/) next
        for (i = 1; i <= length(s); i++) {
            c = substr(s, i, 1)
            if (c == "{") {
                if (depth == 0) {
                    fn = (head ~ /\(/ && head !~ /=/)
                    if (fn) {
                        start = FNR; name = head
                        sub(/\(.*/, "", name); gsub(/[[:space:]]+$/, "", name); sub(/.*[ *]/, "", name)
                    }
                }
                depth++
            } else if (c == "}") {
                depth--
                if (depth == 0) {
                    if (fn && FNR - start - 1 > max) {
                        printf "%s:%d: %s is %d lines (at most %d)\n", FILENAME, start, name, FNR - start - 1, max
                        bad = 1
                    }
                    fn = 0; head = ""
                }
            } else if (depth == 0) {
                if (c == ";") head = ""; else head = head c
            }
        }
        if (depth == 0) head = head " "
    }
    END { exit bad }
' csrc/*/*.c
