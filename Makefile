# redislock: build, test and install.
#
#   make            install missing Debian build packages, build
#                   redislock/core.so for Lua 5.4 (DEPS=no: no packages)
#   make test       install missing Debian packages, build, run the specs
#   make demo       contended counter against a throwaway redis-server
#   make lint       luacheck on lua/ and spec/
#   make ctest      the C unit tests (test/c/), no server needed
#   make install    into $(DESTDIR)$(PREFIX) (LUA_LMOD / LUA_CMOD)
#   make sanitize   specs on an ASan+UBSan build of the core
#   make valgrind   specs under memcheck
#   make helgrind   watchdog specs under helgrind
#   make rock       luarocks make into a temp tree, then require it from there
#   make test51     core specs on Lua 5.1 (LuaJIT/OpenResty's language)
#   make test52     the same specs on Lua 5.2 (and test53 on 5.3)
#   make torture    fault-injection run with a report (DURATION=300 for the long one;
#                   SENTINEL=1 over Sentinel, with failovers; REDLOCK=3 over
#                   three Redlock masters)
#   make bench      benchmarks against raw hiredis baselines (bench/README.md):
#                   handoff, cycle, renew, watchdog CPU, callgrind, Redlock
#                   latency (the watchdog CPU run holds each lock count 30 s, as
#                   issue 14 asks; BENCH_SHORT=1: 6 s)
#   make bench-plot PNGs of handoff latency and watchdog cost into bench/plots/
#   make fuzz       libFuzzer on the C core for FUZZ_SECONDS (30)
#
# Another Lua: make LUA_VERSION=5.1, or make LUA=luajit LUA_PC=luajit.

LUA_VERSION ?= 5.4
LUA         ?= lua$(LUA_VERSION)
LUA_PC      ?= lua$(LUA_VERSION)
PKG_CONFIG  ?= pkg-config
BUSTED      ?= /usr/bin/busted

PREFIX      ?= /usr/local
LUA_LMOD    ?= $(PREFIX)/share/lua/$(LUA_VERSION)
LUA_CMOD    ?= $(PREFIX)/lib/lua/$(LUA_VERSION)
BINDIR      ?= $(PREFIX)/bin

# Debian packages each target needs (installed by tools/deps.sh if missing).
BUILD_DEPS  = pkg-config liblua$(LUA_VERSION)-dev libhiredis-dev lua$(LUA_VERSION)
TEST_DEPS   = $(BUILD_DEPS) redis-server redis-tools redis-sentinel iproute2 util-linux lua-busted lua-check lua-system lua-socket luarocks

LUA_CFLAGS  := $(shell $(PKG_CONFIG) --cflags $(LUA_PC) 2>/dev/null)
HIREDIS_CFLAGS := $(shell $(PKG_CONFIG) --cflags hiredis 2>/dev/null)
HIREDIS_LIBS   := $(shell $(PKG_CONFIG) --libs hiredis 2>/dev/null)

WARN     = -Wall -Wextra -Wstrict-prototypes -Wwrite-strings -Wshadow -Werror
CFLAGS  ?= -O2 -g
# No -llua: the host (lua5.4, nginx, ...) provides the Lua symbols.
ALL_CFLAGS  = -std=c99 -fPIC -fvisibility=hidden -D_POSIX_C_SOURCE=200809L \
              $(WARN) $(CFLAGS) $(LUA_CFLAGS) $(HIREDIS_CFLAGS) -Ibuild
ALL_LDFLAGS = -shared $(LDFLAGS)
LIBS        = $(HIREDIS_LIBS) -lpthread -lm

SRCS    = csrc/core.c csrc/client.c csrc/client_connect.c csrc/client_quorum.c csrc/client_topo.c csrc/client_native.c csrc/client_wait.c csrc/luaval.c csrc/watch.c csrc/process.c csrc/process_signal.c csrc/process_fd.c csrc/process_leader.c \
          csrc/sock.c csrc/resolve.c csrc/resp.c csrc/reply_fast.c csrc/conn.c csrc/conn_wait.c csrc/conn_handshake.c csrc/conn_fork.c csrc/script.c csrc/script_load.c csrc/token.c \
          csrc/slot.c csrc/topo.c csrc/sentinel.c csrc/sentinel_watch.c csrc/cluster.c csrc/router.c csrc/route_wait.c csrc/fanout.c \
          csrc/native_cmd.c csrc/native_detect.c \
          csrc/watchdog.c csrc/wd_thread.c csrc/wd_link.c csrc/wd_sched.c \
          csrc/wd_ids.c csrc/wd_heap.c csrc/wd_loss.c csrc/wd_fork.c csrc/proc_id.c \
          csrc/counters.c csrc/evq.c csrc/wd_events.c csrc/client_events.c csrc/hist.c csrc/intr.c
HDRS    = $(wildcard csrc/*.h) build/scripts_gen.h
SCRIPTS = $(sort $(wildcard lua/redislock/scripts/*.lua))
LUA_MODULES = $(filter-out lua/redislock/scripts/%,$(wildcard lua/redislock/*.lua))

TARGET  = redislock/core.so

.PHONY: all deps test-deps test ctest specs lint demo install install-files uninstall clean sanitize valgrind helgrind rock torture bench bench-plot test51 test52 test53 testjit fuzz

# DEPS=no: install no Debian packages (luarocks passes it: it brings the Lua
# headers itself, and may not run as root). Without it a plain `make` on a
# fresh Debian works: tools/deps.sh installs only what is missing, quietly,
# and the sub-make reads pkg-config's flags once the packages are there.
DEPS ?= yes
DEPS_SH = $(if $(filter no,$(DEPS)),:,tools/deps.sh)

all:
	@$(DEPS_SH) $(BUILD_DEPS)
	@$(MAKE) --no-print-directory $(TARGET)

deps:
	@tools/deps.sh $(BUILD_DEPS)

test-deps:
	@tools/deps.sh $(TEST_DEPS)

build/scripts_gen.h: tools/gen_scripts.lua $(SCRIPTS)
	@mkdir -p build
	$(LUA) tools/gen_scripts.lua $@ $(SCRIPTS)

$(TARGET): $(SRCS) $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $(SRCS) $(LIBS)

# The C unit tests (test/c/): parsers and command builders, checked on
# bytes written out in the test, without a server or Lua.
CTEST_SRCS   = csrc/native_cmd.c csrc/native_detect.c csrc/slot.c csrc/script.c
CTEST_CFLAGS = -std=c99 -D_POSIX_C_SOURCE=200809L $(WARN) $(HIREDIS_CFLAGS) -Icsrc -Ibuild
CTEST_LIBS   = $(HIREDIS_LIBS) -lpthread

CONN_SRCS = csrc/conn.c csrc/conn_wait.c csrc/conn_handshake.c csrc/conn_fork.c csrc/reply_fast.c csrc/resp.c csrc/sock.c csrc/resolve.c csrc/proc_id.c \
            csrc/counters.c csrc/intr.c $(CTEST_SRCS)

# Each test and the core sources it links (plain, and with ASan + UBSan
# for make sanitize).
CTESTS                = native_cmd_test wd_heap_test reply_fast_test conn_wait_test
native_cmd_test_SRCS  = $(CTEST_SRCS)
wd_heap_test_SRCS     = csrc/wd_heap.c
reply_fast_test_SRCS  = $(CONN_SRCS)
conn_wait_test_SRCS   = $(CONN_SRCS)
CTEST_DEPS            = $(CONN_SRCS) csrc/wd_heap.c $(HDRS) $(wildcard test/c/*.h)

$(CTESTS:%=build/test/%): build/test/%: test/c/%.c $(CTEST_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CTEST_CFLAGS) $(CFLAGS) -o $@ $< $($*_SRCS) $(CTEST_LIBS)

$(CTESTS:%=build/asan/%): build/asan/%: test/c/%.c $(CTEST_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CTEST_CFLAGS) -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined \
	    -fno-sanitize-recover=undefined -o $@ $< $($*_SRCS) $(CTEST_LIBS)

ctest: deps
	@$(MAKE) --no-print-directory $(CTESTS:%=build/test/%)
	@for t in $(CTESTS); do build/test/$$t || exit 1; done

# The test command (README, .ci/run): ends with "N passed, N failed".
test: test-deps
	@$(MAKE) --no-print-directory all ctest
	@LUA="$(LUA)" BUSTED="$(BUSTED)" tools/run_specs.sh $(SPECS)

lint: test-deps
	luacheck -q $(wildcard lua spec bench bin tools test)

demo: test-deps
	@$(MAKE) --no-print-directory all
	@$(LUA) tools/demo.lua

# ASan+UBSan build of the core, loaded into the stock interpreter through
# LD_PRELOAD (the interpreter itself is not instrumented).
build/asan/$(TARGET): $(SRCS) $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -O1 -fno-omit-frame-pointer -fsanitize=address,undefined \
	    -fno-sanitize-recover=undefined $(ALL_LDFLAGS) -o $@ $(SRCS) $(LIBS)

# (Targets that build run a sub-make after test-deps: on a fresh machine the
# pkg-config flags above were read before the packages were installed.)
sanitize: test-deps
	@$(MAKE) --no-print-directory build/asan/$(TARGET) $(CTESTS:%=build/asan/%)
	@for t in $(CTESTS); do build/asan/$$t || exit 1; done
	@LD_PRELOAD="$$($(CC) -print-file-name=libasan.so) $$($(CC) -print-file-name=libubsan.so)" \
	 ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	 REDISLOCK_CPATH="./build/asan/?.so" LUA="$(LUA)" BUSTED="$(BUSTED)" tools/run_specs.sh $(SPECS)

valgrind: test-deps
	@$(MAKE) --no-print-directory all
	@REDISLOCK_VALGRIND=1 LUA="valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite --child-silent-after-fork=yes \
	 --suppressions=tools/valgrind.supp $(LUA)" BUSTED="$(BUSTED)" tools/run_specs.sh $(SPECS)

# The watchdog thread under helgrind: data races and lock-order errors. The
# 10,000-lock spec (#heavy) is left out: it takes minutes under helgrind.
helgrind: test-deps
	@$(MAKE) --no-print-directory all
	@REDISLOCK_VALGRIND=1 LUA="valgrind -q --tool=helgrind --error-exitcode=98 --child-silent-after-fork=yes \
	 --suppressions=tools/helgrind.supp $(LUA)" BUSTED="$(BUSTED)" tools/run_specs.sh --exclude-tags=heavy spec/06-watchdog_spec.lua

# The Jepsen-style torture run: workers, nemeses, checker, report.
# A short one is part of `make test` (spec/11-torture_spec.lua).
DURATION ?= 30
PROCS    ?= 8
torture: test-deps
	@$(MAKE) --no-print-directory all
	@$(LUA) test/torture/run.lua --duration $(DURATION) --procs $(PROCS) $(if $(SEED),--seed $(SEED)) \
	    $(if $(SENTINEL),--sentinel 1) $(if $(REDLOCK),--redlock $(REDLOCK))

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

# Lua 5.1 (the language of LuaJIT and OpenResty): build the core against
# 5.1's headers into build/lua5.1/ and run the core specs on lua5.1.
COMPAT_SPECS = spec/01-core_spec.lua spec/03-lock_spec.lua spec/06-watchdog_spec.lua \
               spec/08-waiting_spec.lua spec/12-security_spec.lua spec/15-deadlines_spec.lua \
               spec/16-fences_spec.lua spec/17-consistency_spec.lua spec/22-metrics_spec.lua \
               spec/23-reentrant_spec.lua spec/24-rwlock_spec.lua spec/25-semaphore_spec.lua \
               spec/29-errors_spec.lua
build/lua5.1/$(TARGET): $(SRCS) $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(filter-out $(LUA_CFLAGS),$(ALL_CFLAGS)) $$($(PKG_CONFIG) --cflags lua5.1) \
	    $(ALL_LDFLAGS) -o $@ $(SRCS) $(LIBS)

test51: test-deps
	@tools/deps.sh liblua5.1-0-dev lua5.1
	@$(MAKE) --no-print-directory build/lua5.1/$(TARGET)
	@REDISLOCK_CPATH="./build/lua5.1/?.so" LUA=lua5.1 BUSTED="$(BUSTED)" \
	 tools/run_specs.sh --exclude-tags=heavy $(COMPAT_SPECS)

# Lua 5.2 and 5.3: the same, each core in build/lua5.2/ or build/lua5.3/
# (`make test52`, `make test53`; CI runs both).
build/lua5.2/$(TARGET) build/lua5.3/$(TARGET): $(SRCS) $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(filter-out $(LUA_CFLAGS),$(ALL_CFLAGS)) $$($(PKG_CONFIG) --cflags $(word 2,$(subst /, ,$@))) \
	    $(ALL_LDFLAGS) -o $@ $(SRCS) $(LIBS)

test52 test53: test-deps
	@tools/deps.sh liblua5.$(subst test5,,$@)-dev lua5.$(subst test5,,$@)
	@$(MAKE) --no-print-directory build/lua5.$(subst test5,,$@)/$(TARGET)
	@REDISLOCK_CPATH="./build/lua5.$(subst test5,,$@)/?.so" LUA=lua5.$(subst test5,,$@) BUSTED="$(BUSTED)" \
	 tools/run_specs.sh --exclude-tags=heavy $(COMPAT_SPECS)

# LuaJIT, as OpenResty-like hosts run it: the same specs, the core built
# against LuaJIT's headers into build/luajit/. OpenResty's branch (luajit2),
# the one Debian's nginx Lua module links: Debian's own luajit conflicts
# with it, so a machine can have only one of the two.
build/luajit/$(TARGET): $(SRCS) $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(filter-out $(LUA_CFLAGS),$(ALL_CFLAGS)) $$($(PKG_CONFIG) --cflags luajit) \
	    $(ALL_LDFLAGS) -o $@ $(SRCS) $(LIBS)

# It also runs the library inside nginx with its Lua module (test/hosts/).
testjit: test-deps
	@tools/deps.sh libluajit2-5.1-dev luajit2 nginx-light libnginx-mod-http-lua lua-nginx-redis curl
	@$(MAKE) --no-print-directory build/luajit/$(TARGET)
	@REDISLOCK_CPATH="./build/luajit/?.so" LUA=luajit BUSTED="$(BUSTED)" \
	 tools/run_specs.sh --exclude-tags=heavy $(COMPAT_SPECS) test/hosts/nginx_spec.lua \
	 test/hosts/nginx_topology_spec.lua test/hosts/nginx_metrics_spec.lua

# libFuzzer over the C core's parsing of untrusted bytes (fuzz/README.md).
FUZZ_SECONDS ?= 30
fuzz: test-deps
	@tools/deps.sh clang libclang-rt-14-dev
	@$(MAKE) --no-print-directory build/scripts_gen.h
	@bash fuzz/run.sh $(FUZZ_SECONDS)

rock: test-deps
	@tools/rock_check.sh "$(LUA_VERSION)"

# bin/redislock gets the absolute path of the Lua it was built for, and the
# directories its modules go to, so it runs from any PREFIX with no LUA_PATH.
LUA_ABS = $(shell command -v $(firstword $(LUA)) 2>/dev/null || echo /usr/bin/env $(LUA))
INSTALL_PATHS = $(LUA_ABS)$(LUA_LMOD)$(LUA_CMOD)

# The core is compiled again for the Lua being installed (LUA_PC, or the
# LUA_CFLAGS luarocks gives), apart from the checkout's ./redislock/core.so:
# `make install LUA_PC=luajit` must never install a build for another Lua.
install:
	@$(DEPS_SH) $(BUILD_DEPS)
	@$(MAKE) --no-print-directory install-files

install-files: build/scripts_gen.h
	$(foreach c,' | & \ ],$(if $(findstring $(c),$(INSTALL_PATHS)),$(error install paths must not contain $(c))))
	@mkdir -p build/install
	$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o build/install/core.so $(SRCS) $(LIBS)
	install -d $(DESTDIR)$(LUA_CMOD)/redislock $(DESTDIR)$(LUA_LMOD)/redislock/scripts $(DESTDIR)$(BINDIR)
	install -m 0755 build/install/core.so $(DESTDIR)$(LUA_CMOD)/redislock/core.so
	install -m 0644 lua/redislock.lua $(DESTDIR)$(LUA_LMOD)/redislock.lua
	install -m 0644 $(SCRIPTS) $(DESTDIR)$(LUA_LMOD)/redislock/scripts/
	$(if $(LUA_MODULES),install -m 0644 $(LUA_MODULES) $(DESTDIR)$(LUA_LMOD)/redislock/)
	sed -e "s|^lua=lua5.4 .*|lua='$(LUA_ABS)'|" \
	    -e "s|^local LMOD, CMOD = nil, nil .*|local LMOD, CMOD = [==[$(LUA_LMOD)]==], [==[$(LUA_CMOD)]==]|" \
	    bin/redislock > $(DESTDIR)$(BINDIR)/redislock
	chmod 0755 $(DESTDIR)$(BINDIR)/redislock

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/redislock
	rm -rf $(DESTDIR)$(LUA_CMOD)/redislock $(DESTDIR)$(LUA_LMOD)/redislock
	rm -f $(DESTDIR)$(LUA_LMOD)/redislock.lua

clean:
	rm -rf build redislock
