# redislock: build, test and install.
#
#   make            install missing Debian build packages, build
#                   redislock/core.so for Lua 5.4 (DEPS=no: no packages)
#   make test       install missing Debian packages, build, run the specs
#   make demo       contended counter against a throwaway redis-server
#   make demo-postgres  inventory on a throwaway PostgreSQL, holders frozen past
#                   their lease: the oversell with and without fences
#   make lint       luacheck on lua/ and spec/
#   make ctest      the C unit tests (test/c/), no server needed
#   make install    into $(DESTDIR)$(PREFIX) (LUA_LMOD / LUA_CMOD)
#   make sanitize   specs on an ASan+UBSan build of the core
#   make valgrind   specs under memcheck
#   make helgrind   watchdog and Sentinel specs under helgrind
#   make rock       luarocks make into a temp tree, then require it from there
#   make testnotls  the specs of a build without TLS (make TLS=no's core)
#   make test51     core specs on Lua 5.1 (LuaJIT/OpenResty's language)
#   make test52     the same specs on Lua 5.2 (and test53 on 5.3)
#   make torture    fault-injection run with a report (DURATION=300 for the long one;
#                   SENTINEL=1 over Sentinel, with failovers; REDLOCK=3 over
#                   three Redlock masters; RESOURCE=postgres: the resource
#                   store is PostgreSQL, docs/fencing-postgres.md's SQL)
#   make bench      benchmarks against raw hiredis baselines (bench/README.md):
#                   handoff, cycle, renew, watchdog CPU, callgrind, Redlock
#                   latency (the watchdog CPU run holds each lock count 30 s;
#                   BENCH_SHORT=1: 6 s)
#   make bench-plot PNGs of handoff latency and watchdog cost into bench/plots/
#   make fuzz       libFuzzer on the C core for FUZZ_SECONDS (30)
#   make ci-deps    install every Debian package CI's targets need, at once
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

PREFIX      ?= /usr/local
LUA_LMOD    ?= $(PREFIX)/share/lua/$(LUA_VERSION)
LUA_CMOD    ?= $(PREFIX)/lib/lua/$(LUA_VERSION)
BINDIR      ?= $(PREFIX)/bin
MANDIR      ?= $(PREFIX)/share/man

# TLS: yes, no, or auto (the default: yes when pkg-config finds OpenSSL).
TLS        ?= auto

# Debian packages each target needs (installed by tools/deps.sh if missing).
# PostgreSQL: the fenced-write specs on a real database (spec/31), `make torture
# RESOURCE=postgres` and `make demo-postgres`.
BUILD_DEPS  = pkg-config liblua$(LUA_VERSION)-dev libhiredis-dev lua$(LUA_VERSION) $(if $(filter no,$(TLS)),,libssl-dev)
TEST_DEPS   = $(BUILD_DEPS) redis-server redis-tools redis-sentinel iproute2 util-linux lua-busted lua-check lua-system lua-socket luarocks openssl \
              postgresql-15 lua-sql-postgres groff-base
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
BASE_CFLAGS = -std=c99 -fPIC -fvisibility=hidden -D_POSIX_C_SOURCE=200809L \
              $(WARN) $(HIREDIS_CFLAGS) $(CORE_INCLUDES)
ALL_CFLAGS  = $(BASE_CFLAGS) $(CFLAGS) $(LUA_CFLAGS)
ALL_LDFLAGS = -shared $(LDFLAGS)
LIBS        = $(HIREDIS_LIBS) $(TLS_LIBS) -lpthread -lm
SAN_FLAGS   = -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined

# ---- variants ----------------------------------------------------------------
# Each build lives in build/<variant>/: objects in obj/ with their dependency
# files (-MMD), the module as redislock/core.so (so that "./build/<v>/?.so"
# finds it). Only what changed is compiled again; `make -j` runs them in
# parallel. A variant is a Lua (lua5.1 ... lua5.4, luajit: its headers), or
# asan (Lua 5.4's headers, ASan + UBSan), or notls (Lua 5.4's, no TLS).
#   $(call variant_cflags,V): the flags that differ
variant_lua    = $(if $(filter asan notls,$(1)),$(LUA_PC),$(1))
variant_cflags = $(if $(filter $(LUA_PC),$(call variant_lua,$(1))),$(LUA_CFLAGS),$(shell $(PKG_CONFIG) --cflags $(call variant_lua,$(1)) 2>/dev/null)) \
                 $(if $(filter asan,$(1)),$(SAN_FLAGS),$(CFLAGS)) $(if $(filter notls,$(1)),,$(TLS_CFLAGS))
variant_libs   = $(if $(filter notls,$(1)),$(filter-out $(TLS_LIBS),$(LIBS)),$(LIBS))
VARIANTS = lua5.1 lua5.2 lua5.3 lua5.4 luajit asan notls $(LUA_PC)

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

.PHONY: all deps test-deps ci-deps test ctest specs lint demo demo-postgres install install-files uninstall clean sanitize valgrind helgrind rock torture bench bench-plot test51 test52 test53 testjit testnotls fuzz

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

# (the folder too: its time changes when a script is added or removed)
build/scripts_gen.h: tools/gen_scripts.lua $(SCRIPTS) $(SCRIPT_LIBS) lua/redislock/scripts lua/redislock/scripts/lib
	@mkdir -p build
	$(LUA) tools/gen_scripts.lua $@ $(SCRIPTS)

# The C unit tests (test/c/): parsers, command builders, the recovery
# rules, the connection's waits, checked on bytes written out in the test, without a server or Lua.
# Each links the core's layers without Lua (an archive: the linker takes
# what the test uses), plain, and with ASan + UBSan for make sanitize.
CTESTS       = native_cmd_test wd_heap_test reply_fast_test reply_guard_test script_answer_test exec_tries_test conn_wait_test recovery_test cluster_nodes_test hostport_test
CTEST_CFLAGS = -std=c99 -D_POSIX_C_SOURCE=200809L $(WARN) $(HIREDIS_CFLAGS) $(TLS_CFLAGS) $(CORE_INCLUDES)
CTEST_LIBS   = $(HIREDIS_LIBS) $(TLS_LIBS) -lpthread

build/$(LUA_PC)/test/%: test/c/%.c build/$(LUA_PC)/libcore_nolua.a $(wildcard test/c/*.h)
	@mkdir -p $(@D)
	$(CC) $(CTEST_CFLAGS) $(CFLAGS) -o $@ $< build/$(LUA_PC)/libcore_nolua.a $(CTEST_LIBS)

build/asan/test/%: test/c/%.c build/asan/libcore_nolua.a $(wildcard test/c/*.h)
	@mkdir -p $(@D)
	$(CC) $(CTEST_CFLAGS) $(SAN_FLAGS) -o $@ $< build/asan/libcore_nolua.a $(CTEST_LIBS)

ctest: deps
	@$(call locked,$(LUA_PC)) $(MAKE) --no-print-directory $(CTESTS:%=build/$(LUA_PC)/test/%)
	@for t in $(CTESTS); do build/$(LUA_PC)/test/$$t || exit 1; done

# The test command (README, .ci/run): ends with "N passed, N failed".
test: test-deps
	@$(MAKE) --no-print-directory all ctest
	@LUA="$(LUA)" BUSTED="$(BUSTED)" tools/run_specs.sh $(SPECS)

lint: test-deps
	luacheck -q $(wildcard lua spec bench bin tools test)
	@$(MAKE) --no-print-directory build/scripts_gen.h
	luacheck -q --no-config --std lua51 --read-globals redis KEYS ARGV --max-line-length 120 build/scripts
	@tools/check_layers.sh
	@tools/check_c_functions.sh

demo: test-deps
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

# The watchdog thread and the Sentinel follower thread under helgrind: data
# races and lock-order errors. The 10,000-lock spec (#heavy) is left out: it
# takes minutes under helgrind.
helgrind: test-deps
	@$(MAKE) --no-print-directory all
	@REDISLOCK_VALGRIND=1 LUA="valgrind -q --tool=helgrind --error-exitcode=98 --child-silent-after-fork=yes \
	 --suppressions=tools/helgrind.supp $(LUA)" BUSTED="$(BUSTED)" tools/run_specs.sh --exclude-tags=heavy \
	 spec/06-watchdog_spec.lua spec/19-sentinel_spec.lua

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
# valgrind runs bench/callgrind.lua, strace its syscall column. Each hold of
# bench/watchdog_cpu.lua lasts BENCH_SECONDS (30; BENCH_SHORT=1: 6).
BENCH_SECONDS ?= $(if $(BENCH_SHORT),6,30)
bench: test-deps
	@tools/deps.sh python3-redis valgrind strace
	@[ -d bench/peers/node_modules ] || ! command -v npm >/dev/null || \
	 (cd bench/peers && npm ci --no-audit --no-fund --silent) || \
	 echo "bench: npm ci failed in bench/peers; node-redlock will be skipped" >&2
	@$(MAKE) --no-print-directory all
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
	@echo; echo "== bench/redlock.lua: acquire+release over 1, 3 and 5 masters"
	@$(LUA) bench/redlock.lua

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
