# redislock: build, test and install.
#
#   make            install missing Debian build packages, build
#                   redislock/core.so for Lua 5.4 (DEPS=no: no packages)
#   make test       install missing Debian packages, build, run the specs
#   make demo       contended counter against a throwaway redis-server
#   make demo-postgres  inventory on a throwaway PostgreSQL, holders frozen past
#                   their lease: the oversell with and without fences
#   make lint       luacheck on lua/ and spec/, the layers' includes (by
#                   path), every C function short (80 lines) and every Lua
#                   one (80 lines, 7 parameters), every repository path the
#                   docs and comments name, and the generated parts of
#                   docs/cli.md and docs/redislock.1
#   make docs       regenerate those parts from lua/redislock/cli_options.lua
#   make ctest      the C unit tests (test/c/), no server needed
#   make install    into $(DESTDIR)$(PREFIX) (LUA_LMOD / LUA_CMOD)
#   make sanitize   specs on an ASan+UBSan build of the core
#   make valgrind   specs under memcheck
#   make helgrind   watchdog and Sentinel specs under helgrind
#   make rock       luarocks make into a temp tree, then require it from there
#   make testnotls  the specs of a build without TLS (make TLS=no's core)
#   make test51     core specs on Lua 5.1 (LuaJIT/OpenResty's language)
#   make test52     the same specs on Lua 5.2 (and test53 on 5.3)
#   make test-valkey    core specs with every server a Valkey 8 (installed from
#                   bookworm-backports, pinned: tools/valkey.sh)
#   make test-hiredis1  core specs and C tests on a core built against Debian
#                   trixie's hiredis 1.2, unpacked into build/ (never installed)
#   make torture    fault-injection run with a report (DURATION=300 for the long one;
#                   SENTINEL=1 over Sentinel, with failovers; REDLOCK=3 over
#                   three Redlock masters; RESOURCE=postgres: the resource
#                   store is PostgreSQL, docs/fencing-postgres.md's SQL)
#   make bench      benchmarks against raw hiredis baselines (bench/README.md):
#                   handoff, cycle, renew, watchdog CPU, callgrind, Redlock
#                   latency, a lock per request in nginx under wrk (the
#                   watchdog CPU run holds each lock count 30 s;
#                   BENCH_SHORT=1: 6 s)
#   make bench-plot PNGs of handoff latency and watchdog cost into bench/plots/
#   make fuzz       libFuzzer on the C core for FUZZ_SECONDS (30)
#   make ci-deps    install every Debian package CI's targets need, at once
#
# Each target installs only the Debian packages it uses: `make` and `make
# install` the build's, `make lint` lua5.4 and luacheck, `make demo` a Redis
# and the spec helpers', `make test` everything its specs start.
#
# The spec targets run JOBS spec files at a time (tools/run_specs.sh; 4,
# make valgrind 1): make test JOBS=1 runs them one after another.
# Another Lua: make LUA_VERSION=5.1, or make LUA=luajit LUA_PC=luajit.
# Without TLS: make TLS=no (otherwise TLS is on when OpenSSL's headers are
# there, and `make` installs libssl-dev like the other build packages).

.DEFAULT_GOAL := all

LUA_VERSION ?= 5.4
LUA         ?= lua$(LUA_VERSION)
LUA_PC      ?= lua$(LUA_VERSION)
PKG_CONFIG  ?= pkg-config
BUSTED      ?= /usr/bin/busted
LUAC        ?= luac$(LUA_VERSION)

PREFIX      ?= /usr/local
LUA_LMOD    ?= $(PREFIX)/share/lua/$(LUA_VERSION)
LUA_CMOD    ?= $(PREFIX)/lib/lua/$(LUA_VERSION)
BINDIR      ?= $(PREFIX)/bin
MANDIR      ?= $(PREFIX)/share/man

# TLS: yes, no, or auto (the default: yes when pkg-config finds OpenSSL).
TLS        ?= auto

# Debian packages each target needs (installed by tools/deps.sh if missing),
# each target only what it uses: `make` the build's, `make lint` luacheck's,
# `make test` everything its specs run.
# SPEC_DEPS: what spec/helpers.lua and busted need, with no server (make
# test-valkey brings its own, tools/valkey.sh). PostgreSQL: the fenced-write
# specs on a real database (spec/31), `make torture RESOURCE=postgres` and
# `make demo-postgres`; luarocks: spec/07 and make rock; groff: spec/13's
# check of the man page.
# The Lua built for, by its pkg-config name: LuaJIT's headers and interpreter
# for LUA_PC=luajit (OpenResty's branch, as nginx's module uses), Lua 5.1's
# real package (liblua5.1-dev is only a virtual name dpkg never reports
# installed), else liblua5.x-dev.
LUA_PKGS    = $(if $(filter luajit,$(LUA_PC)),libluajit2-5.1-dev luajit2,$(if $(filter 5.1,$(LUA_VERSION)),liblua5.1-0-dev,liblua$(LUA_VERSION)-dev) lua$(LUA_VERSION))
BUILD_DEPS  = pkg-config $(LUA_PKGS) libhiredis-dev $(if $(filter no,$(TLS)),,libssl-dev)
LINT_DEPS   = lua$(LUA_VERSION) lua-check
SPEC_DEPS   = $(BUILD_DEPS) iproute2 util-linux lua-busted lua-system lua-socket openssl
REDIS_DEPS  = redis-server redis-tools redis-sentinel
DEMO_DEPS   = $(SPEC_DEPS) $(REDIS_DEPS)
TEST_DEPS   = $(SPEC_DEPS) $(REDIS_DEPS) lua-check luarocks postgresql-15 lua-sql-postgres groff-base
TEST51_DEPS = liblua5.1-0-dev lua5.1
TEST52_DEPS = liblua5.2-dev lua5.2
TEST53_DEPS = liblua5.3-dev lua5.3
TESTJIT_DEPS = libluajit2-5.1-dev luajit2 nginx-light libnginx-mod-http-lua lua-nginx-redis curl
FUZZ_DEPS   = clang libclang-rt-14-dev

LUA_CFLAGS  := $(shell $(PKG_CONFIG) --cflags $(LUA_PC) 2>/dev/null)
HIREDIS_CFLAGS := $(shell $(PKG_CONFIG) --cflags hiredis 2>/dev/null)
HIREDIS_LIBS   := $(shell $(PKG_CONFIG) --libs hiredis 2>/dev/null)

# OpenSSL (csrc/net/tls.c): -DREDISLOCK_TLS and libssl when on. The choice
# is written to build/tls.flag, which every object depends on, so that
# switching TLS= rebuilds them (the notls variant never has it).
TLS_ON := $(if $(filter no,$(TLS)),no,$(if $(filter yes,$(TLS)),yes,$(shell $(PKG_CONFIG) --exists openssl 2>/dev/null && echo yes || echo no)))
TLS_CFLAGS := $(if $(filter yes,$(TLS_ON)),-DREDISLOCK_TLS $(shell $(PKG_CONFIG) --cflags openssl 2>/dev/null))
TLS_LIBS   := $(if $(filter yes,$(TLS_ON)),$(shell $(PKG_CONFIG) --libs openssl 2>/dev/null || echo -lssl -lcrypto))
TLS_FLAG   := $(shell mkdir -p build && { [ "$$(cat build/tls.flag 2>/dev/null)" = "$(TLS_ON)" ] || echo "$(TLS_ON)" > build/tls.flag; } && echo build/tls.flag)

WARN     = -Wall -Wextra -Wstrict-prototypes -Wwrite-strings -Wshadow -Werror
CFLAGS  ?= -O2 -g

# ---- the core's sources: one list ------------------------------------------
# csrc/ by layer, from the bottom: base (clocks, RESP, tokens, slots), net
# (sockets and connections), cmd (scripts, native commands), exec (one
# request and its rules, driven by whoever sends it), topo (where keys
# live: Sentinel, Cluster, routing, the Redlock fan-out), watchdog (the
# renewal thread), binding (the Lua userdata and luaopen), process (the
# CLI's process control). `make lint` checks that each layer includes only
# headers of layers below it (tools/check_layers.sh). Every .c of a layer
# is built: adding a file needs no edit here.
LAYERS    = base net cmd exec topo watchdog binding process
# The files that hold test hooks (#ifdef REDISLOCK_TESTING: core._test_next_id,
# core.hist_bucket, core.testing, connect's native_assume): the specs load
# build/<variant>/testing/redislock/core.so, these compiled with the hooks;
# build/<variant>/redislock/core.so, the one installed, has none.
TESTING_SRCS = csrc/binding/core.c csrc/binding/client_connect.c
SRCS     := $(sort $(foreach l,$(LAYERS),$(wildcard csrc/$(l)/*.c)) $(wildcard csrc/*.c))
HDRS     := $(wildcard csrc/*.h csrc/*/*.h)
# The layers that never include lua.h: the C tests and the bench link these.
NOLUA_SRCS := $(filter-out csrc/binding/% csrc/process/%,$(SRCS))
CORE_INCLUDES = -Icsrc -Ibuild

# No -llua: the host (lua5.4, nginx, ...) provides the Lua symbols.
# (hiredis' flags are a variant's: see variant_hiredis_cflags)
BASE_CFLAGS = -std=c99 -fPIC -fvisibility=hidden -D_POSIX_C_SOURCE=200809L \
              $(WARN) $(CORE_INCLUDES)
ALL_CFLAGS  = $(BASE_CFLAGS) $(HIREDIS_CFLAGS) $(CFLAGS) $(LUA_CFLAGS)
ALL_LDFLAGS = -shared $(LDFLAGS)
LIBS        = $(HIREDIS_LIBS) $(TLS_LIBS) -lpthread -lm
SAN_FLAGS   = -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined

# ---- variants ----------------------------------------------------------------
# Each build lives in build/<variant>/: objects in obj/ with their dependency
# files (-MMD), the module as redislock/core.so (so that "./build/<v>/?.so"
# finds it). Only what changed is compiled again; `make -j` runs them in
# parallel. A variant is a Lua (lua5.1 ... lua5.4, luajit: its headers), or
# asan (Lua 5.4's headers, ASan + UBSan), notls (Lua 5.4's, no TLS), or
# hiredis1 (Lua 5.4's, against Debian trixie's hiredis 1.2 unpacked into
# build/hiredis1/root/ by tools/hiredis1.sh, found at run time through an
# rpath: never the system's hiredis).
#   $(call variant_cflags,V): the flags that differ
variant_lua    = $(if $(filter asan notls hiredis1,$(1)),$(LUA_PC),$(1))
variant_cflags = $(call variant_hiredis_cflags,$(1)) \
                 $(if $(filter $(LUA_PC),$(call variant_lua,$(1))),$(LUA_CFLAGS),$(shell $(PKG_CONFIG) --cflags $(call variant_lua,$(1)) 2>/dev/null)) \
                 $(if $(filter asan,$(1)),$(SAN_FLAGS),$(CFLAGS)) $(if $(filter notls,$(1)),,$(TLS_CFLAGS))
variant_libs   = $(if $(filter hiredis1,$(1)),$(HIREDIS1_LIBS) $(filter-out $(HIREDIS_LIBS),$(LIBS)),$(if $(filter notls,$(1)),$(filter-out $(TLS_LIBS),$(LIBS)),$(LIBS)))
variant_hiredis_cflags = $(if $(filter hiredis1,$(1)),$(HIREDIS1_CFLAGS),$(HIREDIS_CFLAGS))
VARIANTS = lua5.1 lua5.2 lua5.3 lua5.4 luajit asan notls hiredis1 $(LUA_PC)

# hiredis 1.x (make test-hiredis1): the headers and library tools/hiredis1.sh
# unpacked (their lib/<multiarch>/ is known once they are there).
HIREDIS1_ROOT   = build/hiredis1/root
HIREDIS1_LIBDIR = $(patsubst %/,%,$(dir $(firstword $(wildcard $(HIREDIS1_ROOT)/usr/lib/*/libhiredis.so.1.1.0))))
HIREDIS1_CFLAGS = -I$(HIREDIS1_ROOT)/usr/include/hiredis
HIREDIS1_LIBS   = -L$(HIREDIS1_LIBDIR) -Wl,-rpath,$(abspath $(HIREDIS1_LIBDIR)) -lhiredis

define core_variant
build/$(1)/obj/%.o: %.c build/scripts_gen.h $$(TLS_FLAG)
	@mkdir -p $$(@D)
	$$(CC) $$(BASE_CFLAGS) $(call variant_cflags,$(1)) -MMD -MP -c -o $$@ $$<

build/$(1)/redislock/core.so: $$(SRCS:%.c=build/$(1)/obj/%.o)
	@mkdir -p $$(@D)
	$$(CC) $(if $(filter asan,$(1)),$$(SAN_FLAGS)) $$(ALL_LDFLAGS) -o $$@ $$^ $(call variant_libs,$(1))

# the same with the test hooks (TESTING_SRCS compiled again with them)
build/$(1)/obj-testing/%.o: %.c build/scripts_gen.h $$(TLS_FLAG)
	@mkdir -p $$(@D)
	$$(CC) $$(BASE_CFLAGS) $(call variant_cflags,$(1)) -DREDISLOCK_TESTING -MMD -MP -c -o $$@ $$<

build/$(1)/testing/redislock/core.so: $$(filter-out $$(TESTING_SRCS:%.c=build/$(1)/obj/%.o),$$(SRCS:%.c=build/$(1)/obj/%.o)) \
                                      $$(TESTING_SRCS:%.c=build/$(1)/obj-testing/%.o)
	@mkdir -p $$(@D)
	$$(CC) $(if $(filter asan,$(1)),$$(SAN_FLAGS)) $$(ALL_LDFLAGS) -o $$@ $$^ $(call variant_libs,$(1))

build/$(1)/libcore_nolua.a: $$(NOLUA_SRCS:%.c=build/$(1)/obj/%.o)
	@rm -f $$@
	$$(AR) rcs $$@ $$^

-include $$(wildcard build/$(1)/obj/csrc/*.d build/$(1)/obj/csrc/*/*.d build/$(1)/obj-testing/csrc/*/*.d)
endef
$(foreach v,$(sort $(VARIANTS)),$(eval $(call core_variant,$(v))))

# Two makes building one variant at once (specs 13 and 14 install while
# .ci/run's targets build, each in a process of its own) would write the
# same objects: each build of a variant runs under that variant's lock.
locked = mkdir -p build && $(if $(shell command -v flock 2>/dev/null),flock build/.$(1).lock)

# The checkout's own module (the specs' and `make demo`'s): the build for
# LUA_PC with the test hooks, copied where "./?.so" finds it.
TARGET  = redislock/core.so
$(TARGET): build/$(LUA_PC)/testing/redislock/core.so
	@mkdir -p $(dir $@)
	cp $< $@.tmp && mv -f $@.tmp $@   # (a new file: a process may have the old one loaded)

SCRIPTS = $(sort $(wildcard lua/redislock/scripts/*.lua))
# the rules several scripts share, spliced in by tools/gen_scripts.lua
SCRIPT_LIBS = $(wildcard lua/redislock/scripts/lib/*.lua)
LUA_MODULES = $(filter-out lua/redislock/scripts/%,$(wildcard lua/redislock/*.lua))

.PHONY: all deps test-deps ci-deps test ctest specs lint docs demo demo-postgres test-valkey test-hiredis1 install install-files uninstall clean sanitize valgrind helgrind rock torture bench bench-plot test51 test52 test53 testjit testnotls fuzz

# DEPS=no: install no Debian packages (luarocks passes it: it brings the Lua
# headers itself, and may not run as root). Without it a plain `make` on a
# fresh Debian works: tools/deps.sh installs only what is missing, quietly,
# and the sub-make reads pkg-config's flags once the packages are there.
DEPS ?= yes
DEPS_SH = $(if $(filter no,$(DEPS)),:,tools/deps.sh)

all:
	@$(DEPS_SH) $(BUILD_DEPS)
	@$(call locked,$(LUA_PC)) $(MAKE) --no-print-directory $(TARGET)

deps:
	@tools/deps.sh $(BUILD_DEPS)

test-deps:
	@tools/deps.sh $(TEST_DEPS)

# What .ci/run needs, in one apt run before it starts targets side by side
# (two apt-gets at once fail on dpkg's lock).
ci-deps:
	@tools/deps.sh $(TEST_DEPS) $(TEST51_DEPS) $(TEST52_DEPS) $(TEST53_DEPS) $(TESTJIT_DEPS) $(FUZZ_DEPS)
	@tools/valkey.sh

# (the folder too: its time changes when a script is added or removed)
build/scripts_gen.h: tools/gen_scripts.lua $(SCRIPTS) $(SCRIPT_LIBS) lua/redislock/scripts lua/redislock/scripts/lib
	@mkdir -p build
	$(LUA) tools/gen_scripts.lua $@ $(SCRIPTS)

# The C unit tests (test/c/): parsers, command builders, the recovery
# rules, the connection's waits, checked on bytes written out in the test, without a server or Lua.
# Each links the core's layers without Lua (an archive: the linker takes
# what the test uses), plain, and with ASan + UBSan for make sanitize.
CTESTS       = native_cmd_test wd_heap_test reply_fast_test reply_guard_test script_answer_test exec_tries_test conn_wait_test \
               recovery_test cluster_nodes_test hostport_test topo_fork_test
CTEST_CFLAGS = -std=c99 -D_POSIX_C_SOURCE=200809L $(WARN) $(HIREDIS_CFLAGS) $(TLS_CFLAGS) $(CORE_INCLUDES)
CTEST_LIBS   = $(HIREDIS_LIBS) $(TLS_LIBS) -lpthread
# (make test-hiredis1's: the same tests against hiredis 1.x)
CTEST1_CFLAGS = $(filter-out $(HIREDIS_CFLAGS),$(CTEST_CFLAGS)) $(HIREDIS1_CFLAGS)
CTEST1_LIBS   = $(HIREDIS1_LIBS) $(TLS_LIBS) -lpthread

build/$(LUA_PC)/test/%: test/c/%.c build/$(LUA_PC)/libcore_nolua.a $(wildcard test/c/*.h)
	@mkdir -p $(@D)
	$(CC) $(CTEST_CFLAGS) $(CFLAGS) -o $@ $< build/$(LUA_PC)/libcore_nolua.a $(CTEST_LIBS)

build/asan/test/%: test/c/%.c build/asan/libcore_nolua.a $(wildcard test/c/*.h)
	@mkdir -p $(@D)
	$(CC) $(CTEST_CFLAGS) $(SAN_FLAGS) -o $@ $< build/asan/libcore_nolua.a $(CTEST_LIBS)

build/hiredis1/test/%: test/c/%.c build/hiredis1/libcore_nolua.a $(wildcard test/c/*.h)
	@mkdir -p $(@D)
	$(CC) $(CTEST1_CFLAGS) $(CFLAGS) -o $@ $< build/hiredis1/libcore_nolua.a $(CTEST1_LIBS)

ctest: deps
	@$(call locked,$(LUA_PC)) $(MAKE) --no-print-directory $(CTESTS:%=build/$(LUA_PC)/test/%)
	@for t in $(CTESTS); do build/$(LUA_PC)/test/$$t || exit 1; done

# The test command (README, .ci/run): ends with "N passed, N failed".
test: test-deps
	@$(MAKE) --no-print-directory all ctest
	@LUA="$(LUA)" BUSTED="$(BUSTED)" tools/run_specs.sh $(SPECS)

lint:
	@tools/deps.sh $(LINT_DEPS)
	luacheck -q $(wildcard lua spec bench bin tools test)
	@$(MAKE) --no-print-directory build/scripts_gen.h
	luacheck -q --no-config --std lua51 --read-globals redis KEYS ARGV --max-line-length 120 build/scripts
	@tools/check_layers.sh
	@tools/check_c_functions.sh
	@# (every Lua file but the specs' own: tools/check_functions.lua says why)
	@$(LUA) tools/check_functions.lua $(LUAC) lua bin/redislock tools bench spec test
	@$(LUA) tools/check_paths.lua
	@$(LUA) tools/gen_cli_docs.lua --check

# docs/cli.md's Options and Exit status tables and the man page's OPTIONS and
# EXIT STATUS, from the command line's own tables (lua/redislock/cli_options.lua),
# which `redislock help` lists too: edit there, then `make docs`.
docs:
	@tools/deps.sh lua$(LUA_VERSION)
	@$(LUA) tools/gen_cli_docs.lua

demo:
	@tools/deps.sh $(DEMO_DEPS)
	@$(MAKE) --no-print-directory all
	@$(LUA) tools/demo.lua

demo-postgres: test-deps
	@$(MAKE) --no-print-directory all
	@$(LUA) tools/demo_postgres.lua

# ASan+UBSan build of the core, loaded into the stock interpreter through
# LD_PRELOAD (the interpreter itself is not instrumented). Without the specs
# tagged #builds: they compile and install a core of their own (not this
# one) with the compiler under LD_PRELOAD, and `make test` runs them.

# (Targets that build run a sub-make after test-deps: on a fresh machine the
# pkg-config flags above were read before the packages were installed.)
sanitize: test-deps
	@$(call locked,asan) $(MAKE) --no-print-directory build/asan/testing/$(TARGET) $(CTESTS:%=build/asan/test/%)
	@for t in $(CTESTS); do build/asan/test/$$t || exit 1; done
	@LD_PRELOAD="$$($(CC) -print-file-name=libasan.so) $$($(CC) -print-file-name=libubsan.so)" \
	 ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	 REDISLOCK_CPATH="./build/asan/testing/?.so" LUA="$(LUA)" BUSTED="$(BUSTED)" tools/run_specs.sh --exclude-tags=builds $(SPECS)

# One spec file at a time unless JOBS says otherwise: memcheck keeps a core
# busy, and the specs' timings were set for one at a time under it.
valgrind: test-deps
	@$(MAKE) --no-print-directory all
	@REDISLOCK_VALGRIND=1 JOBS="$(or $(JOBS),1)" LUA="valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite --child-silent-after-fork=yes \
	 --suppressions=tools/valgrind.supp $(LUA)" BUSTED="$(BUSTED)" tools/run_specs.sh $(SPECS)

# The renewal thread and the topology thread under helgrind: data races and
# lock-order errors, with one client and with many sharing them (spec 42,
# 50). The 10,000-lock spec (#heavy) is left out: it takes minutes under
# helgrind.
helgrind: test-deps
	@$(MAKE) --no-print-directory all
	@REDISLOCK_VALGRIND=1 LUA="valgrind -q --tool=helgrind --error-exitcode=98 --child-silent-after-fork=yes \
	 --suppressions=tools/helgrind.supp $(LUA)" BUSTED="$(BUSTED)" tools/run_specs.sh --exclude-tags=heavy \
	 spec/06-watchdog_spec.lua spec/19-sentinel_spec.lua spec/42-sharing_spec.lua spec/50-renewal_thread_spec.lua

# The Jepsen-style torture run: workers, nemeses, checker, report.
# A short one is part of `make test` (spec/11-torture_spec.lua).
DURATION ?= 30
PROCS    ?= 8
torture: test-deps
	@$(MAKE) --no-print-directory all
	@$(LUA) test/torture/run.lua --duration $(DURATION) --procs $(PROCS) $(if $(SEED),--seed $(SEED)) \
	    $(if $(SENTINEL),--sentinel 1) $(if $(REDLOCK),--redlock $(REDLOCK)) $(if $(RESOURCE),--resource $(RESOURCE))

# The benchmarks (bench/README.md). The peers of bench/cycle.lua: redis-py
# from Debian, node-redlock from npm (pinned by bench/peers/package-lock.json);
# a peer that cannot be installed is skipped by the benchmark, which says so.
# valgrind runs bench/callgrind.lua and bench/server_instr.lua, strace
# callgrind.lua's syscall column. Each hold of bench/watchdog_cpu.lua lasts
# BENCH_SECONDS (30; BENCH_SHORT=1: 6).
BENCH_SECONDS ?= $(if $(BENCH_SHORT),6,30)
bench: test-deps
	@tools/deps.sh python3-redis valgrind strace wrk $(TESTJIT_DEPS)
	@[ -d bench/peers/node_modules ] || ! command -v npm >/dev/null || \
	 (cd bench/peers && npm ci --no-audit --no-fund --silent) || \
	 echo "bench: npm ci failed in bench/peers; node-redlock will be skipped" >&2
	@$(MAKE) --no-print-directory all
	@$(call locked,luajit) $(MAKE) --no-print-directory build/luajit/redislock/core.so
	@echo "== bench/handoff.lua: handoff under contention"
	@$(LUA) bench/handoff.lua
	@echo; echo "== bench/cycle.lua: one uncontended cycle, timed"
	@$(LUA) bench/cycle.lua
	@echo; echo "== bench/renew.lua: renewing 10,000 held locks"
	@$(LUA) bench/renew.lua
	@echo; echo "== bench/watchdog_cpu.lua: the watchdog's cost, $(BENCH_SECONDS) s per lock count"
	@$(LUA) bench/watchdog_cpu.lua $(BENCH_SECONDS)
	@echo; echo "== bench/callgrind.lua: one uncontended cycle, counted"
	@$(LUA) bench/callgrind.lua
	@echo; echo "== bench/server_instr.lua: redis-server's instructions per cycle and per renewal, counted"
	@$(LUA) bench/server_instr.lua
	@echo; echo "== bench/redlock.lua: acquire+release over 1, 3 and 5 masters"
	@$(LUA) bench/redlock.lua
	@echo; echo "== bench/nginx.lua: a lock per request in nginx, cosocket transport against lua-resty-redis by hand"
	@$(LUA) bench/nginx.lua

# The plots bench/README.md links, from the data files `make bench` leaves
# in bench/out/ (each benchmark that is missing its data runs first).
bench-plot: test-deps
	@tools/deps.sh gnuplot-nox
	@$(MAKE) --no-print-directory all
	@[ -f bench/out/handoff-spin-poll-x4.dat ] || $(LUA) bench/handoff.lua
	@[ -f bench/out/watchdog-cpu.dat ] || $(LUA) bench/watchdog_cpu.lua $(BENCH_SECONDS)
	@mkdir -p bench/plots
	@gnuplot bench/plot.gp
	@echo "bench-plot: bench/plots/handoff.png bench/plots/watchdog-cpu.png"

# The core as make TLS=no builds it, into build/notls/, under the specs
# that say what such a build does with rediss:// and tls.
testnotls: test-deps
	@$(call locked,notls) $(MAKE) --no-print-directory build/notls/testing/$(TARGET)
	@REDISLOCK_CPATH="./build/notls/testing/?.so" LUA="$(LUA)" BUSTED="$(BUSTED)" \
	 tools/run_specs.sh spec/04-arguments_spec.lua spec/30-tls_spec.lua

# Valkey 8 (Debian 12: from bookworm-backports, pinned, tools/valkey.sh)
# in place of Redis: every server the specs start is valkey-server or
# valkey-sentinel, and their client valkey-cli (SERVER=valkey, spec/helpers.lua;
# spec 01 checks INFO says Valkey 8). The specs where the server, not the
# client, decides: scripts and EVALSHA (01), AUTH, ACL and the handshake
# (02), the primitives' scripts (03, 16, 24, 25), pipelined renewals (06),
# BLPOP wake-ups (08), CLUSTER SLOTS/NODES and redirections (18),
# valkey-sentinel (19), command detection (21), TLS (30). About 90 s at
# JOBS=2.
VALKEY_SPECS = spec/01-core_spec.lua spec/02-connect_spec.lua spec/03-lock_spec.lua spec/06-watchdog_spec.lua \
               spec/08-waiting_spec.lua spec/16-fences_spec.lua spec/18-cluster_spec.lua spec/19-sentinel_spec.lua \
               spec/21-native_commands_spec.lua spec/24-rwlock_spec.lua spec/25-semaphore_spec.lua spec/30-tls_spec.lua

test-valkey:
	@tools/deps.sh $(SPEC_DEPS)
	@tools/valkey.sh
	@$(MAKE) --no-print-directory all
	@SERVER=valkey LUA="$(LUA)" BUSTED="$(BUSTED)" tools/run_specs.sh $(VALKEY_SPECS)

# hiredis 1.x (the system's is 0.14): Debian trixie's libhiredis-dev and
# libhiredis1.1.0, fetched and unpacked into build/hiredis1/root/ by
# tools/hiredis1.sh (never installed), the core and the C tests built
# against them into build/hiredis1/. Prints the hiredis the module was built
# with and the file it loaded (tools/hiredis_loaded.lua: both must be 1.x),
# runs the C tests, then the specs whose bytes go through hiredis' reader:
# replies of every shape (01, 21, 32), connections and errors (02), the
# watchdog's pipelines (06), Cluster's nested replies and redirections
# (18), Sentinel's (19), replies read over TLS (30).
HIREDIS1_SPECS = spec/01-core_spec.lua spec/02-connect_spec.lua spec/03-lock_spec.lua spec/06-watchdog_spec.lua \
                 spec/18-cluster_spec.lua spec/19-sentinel_spec.lua spec/21-native_commands_spec.lua \
                 spec/30-tls_spec.lua spec/32-errors_spec.lua

test-hiredis1:
	@tools/deps.sh $(SPEC_DEPS) $(REDIS_DEPS)
	@tools/hiredis1.sh build/hiredis1
	@$(call locked,hiredis1) $(MAKE) --no-print-directory build/hiredis1/testing/$(TARGET) $(CTESTS:%=build/hiredis1/test/%)
	@$(LUA) tools/hiredis_loaded.lua "./build/hiredis1/testing/?.so" 1
	@for t in $(CTESTS); do build/hiredis1/test/$$t || exit 1; done
	@REDISLOCK_CPATH="./build/hiredis1/testing/?.so" LUA="$(LUA)" BUSTED="$(BUSTED)" tools/run_specs.sh $(HIREDIS1_SPECS)

# Lua 5.1 (the language of LuaJIT and OpenResty): build the core against
# 5.1's headers into build/lua5.1/ and run the core specs on lua5.1.
COMPAT_SPECS = spec/01-core_spec.lua spec/03-lock_spec.lua spec/06-watchdog_spec.lua \
               spec/08-waiting_spec.lua spec/12-security_spec.lua spec/15-deadlines_spec.lua \
               spec/16-fences_spec.lua spec/17-consistency_spec.lua spec/22-metrics_spec.lua \
               spec/23-reentrant_spec.lua spec/24-rwlock_spec.lua spec/25-semaphore_spec.lua \
               spec/31-postgres_fences_spec.lua spec/32-errors_spec.lua

test51: test-deps
	@tools/deps.sh $(TEST51_DEPS)
	@$(call locked,lua5.1) $(MAKE) --no-print-directory build/lua5.1/testing/$(TARGET)
	@REDISLOCK_CPATH="./build/lua5.1/testing/?.so" LUA=lua5.1 BUSTED="$(BUSTED)" \
	 tools/run_specs.sh --exclude-tags=heavy $(COMPAT_SPECS)

# Lua 5.2 and 5.3: the same, each core in build/lua5.2/ or build/lua5.3/
# (`make test52`, `make test53`; CI runs both).

test52 test53: test-deps
	@tools/deps.sh $($(subst test5,TEST5,$@)_DEPS)
	@$(call locked,lua5.$(subst test5,,$@)) $(MAKE) --no-print-directory build/lua5.$(subst test5,,$@)/testing/$(TARGET)
	@REDISLOCK_CPATH="./build/lua5.$(subst test5,,$@)/testing/?.so" LUA=lua5.$(subst test5,,$@) BUSTED="$(BUSTED)" \
	 tools/run_specs.sh --exclude-tags=heavy $(COMPAT_SPECS)

# LuaJIT, as OpenResty-like hosts run it: the same specs, the core built
# against LuaJIT's headers into build/luajit/. OpenResty's branch (luajit2),
# the one Debian's nginx Lua module links: Debian's own luajit conflicts
# with it, so a machine can have only one of the two.

# It also runs the library inside nginx with its Lua module (test/hosts/).
testjit: test-deps
	@tools/deps.sh $(TESTJIT_DEPS)
	@$(call locked,luajit) $(MAKE) --no-print-directory build/luajit/testing/$(TARGET)
	@REDISLOCK_CPATH="./build/luajit/testing/?.so" LUA=luajit BUSTED="$(BUSTED)" \
	 tools/run_specs.sh --exclude-tags=heavy $(COMPAT_SPECS) test/hosts/nginx_spec.lua \
	 test/hosts/nginx_topology_spec.lua test/hosts/nginx_metrics_spec.lua test/hosts/nginx_tls_spec.lua

# libFuzzer over the C core's parsing of untrusted bytes (fuzz/README.md).
FUZZ_SECONDS ?= 30
fuzz: test-deps
	@tools/deps.sh $(FUZZ_DEPS)
	@$(MAKE) --no-print-directory build/scripts_gen.h
	@bash fuzz/run.sh $(FUZZ_SECONDS)

rock: test-deps
	@tools/rock_check.sh "$(LUA_VERSION)"

# bin/redislock gets the absolute path of the Lua it was built for, and the
# directories its modules go to, so it runs from any PREFIX with no LUA_PATH.
LUA_ABS = $(shell command -v $(firstword $(LUA)) 2>/dev/null || echo /usr/bin/env $(LUA))
INSTALL_PATHS = $(LUA_ABS)$(LUA_LMOD)$(LUA_CMOD)

# The core installed is the build for the Lua being installed (LUA_PC, with
# the LUA_CFLAGS luarocks gives), build/$(LUA_PC)/: `make install
# LUA_PC=luajit` must never install a build for another Lua.
install:
	@$(DEPS_SH) $(BUILD_DEPS)
	@$(call locked,$(LUA_PC)) $(MAKE) --no-print-directory install-files

install-files: build/$(LUA_PC)/redislock/core.so
	$(foreach c,' | & \ ],$(if $(findstring $(c),$(INSTALL_PATHS)),$(error install paths must not contain $(c))))
	install -d $(DESTDIR)$(LUA_CMOD)/redislock $(DESTDIR)$(LUA_LMOD)/redislock/scripts $(DESTDIR)$(BINDIR) \
	    $(DESTDIR)$(MANDIR)/man1
	install -m 0755 build/$(LUA_PC)/redislock/core.so $(DESTDIR)$(LUA_CMOD)/redislock/core.so
	install -m 0644 lua/redislock.lua $(DESTDIR)$(LUA_LMOD)/redislock.lua
	install -m 0644 $(patsubst lua/redislock/scripts/%,build/scripts/%,$(SCRIPTS)) $(DESTDIR)$(LUA_LMOD)/redislock/scripts/
	$(if $(LUA_MODULES),install -m 0644 $(LUA_MODULES) $(DESTDIR)$(LUA_LMOD)/redislock/)
	sed -e "s|^lua=lua5.4 .*|lua='$(LUA_ABS)'|" \
	    -e "s|^local LMOD, CMOD = nil, nil .*|local LMOD, CMOD = [==[$(LUA_LMOD)]==], [==[$(LUA_CMOD)]==]|" \
	    bin/redislock > $(DESTDIR)$(BINDIR)/redislock
	chmod 0755 $(DESTDIR)$(BINDIR)/redislock
	install -m 0644 docs/redislock.1 $(DESTDIR)$(MANDIR)/man1/redislock.1

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/redislock $(DESTDIR)$(MANDIR)/man1/redislock.1
	rm -rf $(DESTDIR)$(LUA_CMOD)/redislock $(DESTDIR)$(LUA_LMOD)/redislock
	rm -f $(DESTDIR)$(LUA_LMOD)/redislock.lua

clean:
	rm -rf build redislock
