# Hearth build. `make` builds ./hearth only; see README for the other targets.
CC       ?= cc
# $(CXX) (make's default: g++) builds common/regex.cc, the shim over RE2, which has no
# C API, and links the binaries, so libstdc++ comes along.
PKGS      = libmicrohttpd sqlite3 libzstd libprotobuf-c jansson zlib libcurl libcrypto re2 libdw libelf libdebuginfod libpq snappy libarchive libnghttp2 libssl
CFLAGS_BASE = -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -I. -Ibuild/gen
CXXFLAGS_BASE = -std=c++17 -Wall -Wextra -Werror -I.
# The release build compiles assert() out (-DNDEBUG); the asan, tsan, fuzz and oom
# builds keep the invariant checks on (CONTRIBUTING.md, "Habits the code keeps").
OPT      ?= -O2 -g -DNDEBUG
# The targets that build before they run (test*, run, bench*, fuzz-regress) compile on
# every core: their sub-make gets -j. A plain `make` stays serial unless asked.
BUILD_JOBS ?= -j$(shell nproc 2>/dev/null || echo 2)
# Integration test workers (run.py -j). More than the cores: a test spends much of its time
# waiting on servers it started, so two workers kept 2 cores only about 1.4 busy.
TEST_JOBS ?= 3
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lpthread -lm

PROTOS   = wire/profile.proto wire/push.proto wire/querier.proto wire/settings.proto wire/otlp_profiles.proto wire/debuginfo.proto wire/adhocprofiles.proto wire/prompb.proto wire/recording_rules.proto wire/parca_profilestore.proto wire/parca_debuginfo.proto wire/jfr_labels.proto
GEN_C    = $(patsubst %.proto,build/gen/%.pb-c.c,$(PROTOS))
GEN_H    = $(GEN_C:.c=.h)

# Everything but main.c (the subcommand dispatch at the top), which only the binaries link.
LIB_SRC  = $(wildcard common/*.c wire/*.c ingest/*.c storage/*.c catalog/*.c remote/*.c query/*.c symbolize/*.c cli/*.c server/*.c) $(wildcard common/*.cc)
UNIT_SRC = $(wildcard tests/unit/*.c)

# Three build flavours share the source list: release (./hearth), asan (./hearth-asan) and
# tsan (./hearth-tsan, ThreadSanitizer, for the threads MHD, the cutter and scrapers run).
REL_DIR  = build/rel
ASAN_DIR = build/asan
ASAN_FLAGS = -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
TSAN_DIR = build/tsan
TSAN_FLAGS = -O1 -g -fsanitize=thread

objs = $(patsubst %.cc,$(1)/%.o,$(patsubst %.c,$(1)/%.o,$(GEN_C:build/gen/%=%) $(LIB_SRC)))

.PHONY: all deps test-deps run test test-unit test-integration test-asan test-tsan bench clean fmt bench-fleet bench-cluster install fuzz fuzz-build fuzz-regress test-valgrind
all: hearth

deps:
	@deploy/install-deps.sh build
test-deps:
	@deploy/install-deps.sh test

# Generated sources are kept (not intermediates), so a build does not regenerate them.
.SECONDARY: $(GEN_C) $(GEN_H)
build/gen/%.pb-c.c build/gen/%.pb-c.h: %.proto
	@mkdir -p build/gen
	protoc-c --c_out=build/gen $<

$(REL_DIR)/%.o: %.c $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(OPT) $(PKG_CFLAGS) -MMD -MP -c $< -o $@
$(REL_DIR)/%.o: build/gen/%.c $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(OPT) $(PKG_CFLAGS) -Wno-unused-parameter -c $< -o $@
$(REL_DIR)/%.o: %.cc
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_BASE) $(OPT) $(PKG_CFLAGS) -MMD -MP -c $< -o $@
$(ASAN_DIR)/%.o: %.c $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(ASAN_FLAGS) $(PKG_CFLAGS) -MMD -MP -c $< -o $@
$(ASAN_DIR)/%.o: build/gen/%.c $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(ASAN_FLAGS) $(PKG_CFLAGS) -Wno-unused-parameter -c $< -o $@
$(ASAN_DIR)/%.o: %.cc
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_BASE) $(ASAN_FLAGS) $(PKG_CFLAGS) -MMD -MP -c $< -o $@

$(TSAN_DIR)/%.o: %.c $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(TSAN_FLAGS) $(PKG_CFLAGS) -MMD -MP -c $< -o $@
$(TSAN_DIR)/%.o: build/gen/%.c $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(TSAN_FLAGS) $(PKG_CFLAGS) -Wno-unused-parameter -c $< -o $@
$(TSAN_DIR)/%.o: %.cc
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_BASE) $(TSAN_FLAGS) $(PKG_CFLAGS) -MMD -MP -c $< -o $@

# Linked by the C++ driver so libstdc++ (and the C++ parts of the sanitizer runtimes) come along.
hearth: $(call objs,$(REL_DIR)) $(REL_DIR)/main.o
	$(CXX) $(OPT) -o $@ $^ $(PKG_LIBS)
hearth-asan: $(call objs,$(ASAN_DIR)) $(ASAN_DIR)/main.o
	$(CXX) $(ASAN_FLAGS) -o $@ $^ $(PKG_LIBS)
hearth-tsan: $(call objs,$(TSAN_DIR)) $(TSAN_DIR)/main.o
	$(CXX) $(TSAN_FLAGS) -o $@ $^ $(PKG_LIBS)

build/rel/unit-tests: $(call objs,$(REL_DIR)) $(patsubst %.c,$(REL_DIR)/%.o,$(UNIT_SRC))
	$(CXX) $(OPT) -o $@ $^ $(PKG_LIBS)
build/asan/unit-tests: $(call objs,$(ASAN_DIR)) $(patsubst %.c,$(ASAN_DIR)/%.o,$(UNIT_SRC))
	$(CXX) $(ASAN_FLAGS) -o $@ $^ $(PKG_LIBS)
build/tsan/unit-tests: $(call objs,$(TSAN_DIR)) $(patsubst %.c,$(TSAN_DIR)/%.o,$(UNIT_SRC))
	$(CXX) $(TSAN_FLAGS) -o $@ $^ $(PKG_LIBS)

# Allocation-failure injection (tests/oom/): Hearth's own malloc, calloc, realloc, strdup
# and strndup calls are wrapped at link time so the Nth can be made to fail, over ASan
# objects, so a crash, a leak or a memory error fails the run too.
OOM_WRAP = -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,--wrap=strndup \
           -Wl,--wrap=open,--wrap=write,--wrap=pwrite,--wrap=fsync,--wrap=fdatasync,--wrap=ftruncate,--wrap=rename,--wrap=unlink
build/asan/oom-tests: $(call objs,$(ASAN_DIR)) $(ASAN_DIR)/tests/unit/unit.o $(patsubst %.c,$(ASAN_DIR)/%.o,$(wildcard tests/oom/*.c))
	$(CXX) $(ASAN_FLAGS) $(OOM_WRAP) -o $@ $^ $(PKG_LIBS)

# `make run PORT=4050 DATA_DIR=/tmp/h`: the server logs `server.ready url=...` once it
# answers (after WAL replay); until then the build and start are still running.
PORT     ?= 4040
DATA_DIR ?= ./data
run: deps
	@$(MAKE) $(BUILD_JOBS) --no-print-directory hearth
	@echo "hearth: starting on http://127.0.0.1:$(PORT)/ (data in $(DATA_DIR)); wait for msg=server.ready"
	./hearth serve --listen 127.0.0.1:$(PORT) --data-dir $(DATA_DIR)

TESTDATA ?= $(abspath ../shared/testdata)
test: test-deps
	$(MAKE) $(BUILD_JOBS) hearth build/rel/unit-tests
	build/rel/unit-tests $(TESTDATA)
	python3 tests/integration/run.py --binary ./hearth --testdata $(TESTDATA) -j $(TEST_JOBS)

test-asan: test-deps
	$(MAKE) $(BUILD_JOBS) hearth-asan build/asan/unit-tests
	ASAN_OPTIONS=detect_leaks=1 build/asan/unit-tests $(TESTDATA)
	ASAN_OPTIONS=detect_leaks=1 python3 tests/integration/run.py --binary ./hearth-asan --testdata $(TESTDATA) --quick --skip _on_swift --skip _on_azure -j $(TEST_JOBS)

# Every allocation of the ingest, cut, compaction and query paths failing in turn, then
# every file operation of the store-changing paths, once and persistently
# (tests/oom/main.c), with leak detection.
.PHONY: test-oom
test-oom: test-deps
	$(MAKE) $(BUILD_JOBS) build/asan/oom-tests
	ASAN_OPTIONS=detect_leaks=1 build/asan/oom-tests $(TESTDATA)

# The unit tests that run threads, then the integration suite, against a
# ThreadSanitizer build: a data race makes the server exit 66 at shutdown, which fails
# the test. The browser test is skipped: TSan slows the server past its page timeouts
# (it runs under the other builds).
test-tsan: test-deps
	$(MAKE) $(BUILD_JOBS) hearth-tsan build/tsan/unit-tests
	TSAN_OPTIONS="halt_on_error=1 exitcode=66" build/tsan/unit-tests -k at_once -k unlocked $(TESTDATA)
	TSAN_OPTIONS="halt_on_error=0 exitcode=66" python3 tests/integration/run.py --binary ./hearth-tsan --testdata $(TESTDATA) --skip web_ui --skip _on_swift --skip _on_azure -j $(TEST_JOBS)

# The server under valgrind memcheck for two cycles (ingest/query/flush/shutdown, and
# symbolization with Connect merges, a group-by and a diff): any leak or memory error
# fails it (exit code 3 from valgrind).
test-valgrind: test-deps
	$(MAKE) $(BUILD_JOBS) hearth
	@printf '#!/bin/sh\nexec valgrind -q --leak-check=full --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect --error-exitcode=3 --log-file=$(CURDIR)/build/valgrind.log $(CURDIR)/hearth "$$@"\n' > build/hearth-valgrind
	@chmod +x build/hearth-valgrind
	python3 tests/integration/run.py --binary build/hearth-valgrind --testdata $(TESTDATA) --valgrind
	@! grep -q "definitely lost\|Invalid read\|Invalid write" build/valgrind.log || { cat build/valgrind.log; exit 1; }

# The benchmarks' load generator (Go: its clients must not be the bottleneck).
build/loadgen: tests/bench/loadgen/main.go
	@mkdir -p build
	GOCACHE=$(CURDIR)/build/gocache go build -o $@ $<

# The upload floor the load benchmark compares the server's CPU per upload with.
build/decode_floor: tests/bench/decode_floor.c $(REL_DIR)/wire/profile.pb-c.o
	$(CC) $(CFLAGS_BASE) $(OPT) $(PKG_CFLAGS) $^ -o $@ $(PKG_LIBS)

# The last build of block format version 1, the reference the cut benchmark compares with.
V1_COMMIT = 1c7e6af^
build/hearth-v1:
	rm -rf build/v1src && mkdir -p build/v1src
	git archive $(V1_COMMIT) | tar -x -C build/v1src
	$(MAKE) $(BUILD_JOBS) -C build/v1src hearth
	cp build/v1src/hearth $@

bench: test-deps build/loadgen build/decode_floor build/hearth-v1
	$(MAKE) $(BUILD_JOBS) hearth
	python3 tests/bench/bench.py --binary ./hearth --testdata $(TESTDATA) --reference-v1 build/hearth-v1
	python3 tests/bench/symbolize.py --binary ./hearth --testdata $(TESTDATA)
	python3 tests/bench/cluster.py --binary ./hearth

# The cluster benchmark alone (real PostgreSQL and RADOS Gateway; about 6 minutes).
bench-cluster: test-deps
	$(MAKE) $(BUILD_JOBS) hearth
	python3 tests/bench/cluster.py --binary ./hearth

# The fleet benchmark: 1, 20 and 200-service stores, hourly and compacted.
# FLEET_ARGS passes flags, e.g. FLEET_ARGS="--services 1,20 --days 1" for a quick run.
FLEET_ARGS ?=
bench-fleet: test-deps
	$(MAKE) $(BUILD_JOBS) hearth
	python3 tests/bench/fleet.py --binary ./hearth $(FLEET_ARGS)

PREFIX ?= /usr/local
# Installs the binary, the UI, the systemd unit and an example config.
install: hearth
	install -D -m 0755 hearth $(DESTDIR)$(PREFIX)/bin/hearth
	mkdir -p $(DESTDIR)$(PREFIX)/share/hearth/web
	cp -r web/. $(DESTDIR)$(PREFIX)/share/hearth/web/
	install -D -m 0644 deploy/hearth.service $(DESTDIR)/etc/systemd/system/hearth.service
	install -D -m 0644 deploy/hearth.conf.example $(DESTDIR)/etc/hearth/hearth.conf

# libFuzzer harnesses (clang), each run for FUZZ_SECONDS on seeds from the shared
# test data and a real server's WAL and blocks. Crashes land in build/fuzz/crashes/.
FUZZ_DIR = build/fuzz
FUZZ_FLAGS = -O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
FUZZ_TARGETS = pprof folded selector push querier jfr multipart block wal otlp elf
FUZZ_SECONDS ?= 60
$(FUZZ_DIR)/%.o: %.c $(GEN_H)
	@mkdir -p $(dir $@)
	clang $(CFLAGS_BASE) $(FUZZ_FLAGS) $(PKG_CFLAGS) -c $< -o $@
$(FUZZ_DIR)/%.o: build/gen/%.c $(GEN_H)
	@mkdir -p $(dir $@)
	clang $(CFLAGS_BASE) $(FUZZ_FLAGS) $(PKG_CFLAGS) -Wno-unused-parameter -c $< -o $@
$(FUZZ_DIR)/%.o: %.cc
	@mkdir -p $(dir $@)
	clang++ $(CXXFLAGS_BASE) $(FUZZ_FLAGS) $(PKG_CFLAGS) -c $< -o $@
$(FUZZ_DIR)/fuzz_%: $(call objs,$(FUZZ_DIR)) $(FUZZ_DIR)/tests/fuzz/fuzz_%.o
	clang++ -fsanitize=fuzzer,address,undefined -o $@ $^ $(PKG_LIBS)
fuzz-build: $(addprefix $(FUZZ_DIR)/fuzz_,$(FUZZ_TARGETS))
fuzz: test-deps hearth fuzz-build
	tests/fuzz/seeds.sh ./hearth $(TESTDATA) $(FUZZ_DIR)/seeds
	@mkdir -p $(FUZZ_DIR)/crashes
	@for t in $(FUZZ_TARGETS); do \
	  echo "fuzz $$t for $(FUZZ_SECONDS)s"; \
	  mkdir -p $(FUZZ_DIR)/corpus/$$t; \
	  $(FUZZ_DIR)/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=4096 -max_len=1048576 \
	    -artifact_prefix=$(FUZZ_DIR)/crashes/$$t- $(FUZZ_DIR)/corpus/$$t $(FUZZ_DIR)/seeds/$$t \
	    2>$(FUZZ_DIR)/$$t.log || { tail -40 $(FUZZ_DIR)/$$t.log; exit 1; }; \
	  grep -E '^(#[0-9]+\s+DONE|Done)' $(FUZZ_DIR)/$$t.log | tail -1; \
	done

# Replays every input a fuzzer once crashed on, and the edge cases kept beside them
# (tests/fuzz/regress/TARGET/), for every fuzzer: one without inputs fails. Run by CI.
fuzz-regress: test-deps
	$(MAKE) $(BUILD_JOBS) fuzz-build
	@for t in $(FUZZ_TARGETS); do \
	  [ -n "$$(ls tests/fuzz/regress/$$t 2>/dev/null)" ] || { echo "fuzz regressions: $$t has no inputs in tests/fuzz/regress/$$t"; exit 1; }; \
	  $(FUZZ_DIR)/fuzz_$$t -rss_limit_mb=2048 tests/fuzz/regress/$$t/* 2>$(FUZZ_DIR)/$$t-regress.log \
	    || { tail -30 $(FUZZ_DIR)/$$t-regress.log; exit 1; }; \
	  echo "fuzz regressions: $$t ok ($$(ls tests/fuzz/regress/$$t | wc -l) inputs)"; \
	done

# C sources under clang-format's rules (.clang-format); `make fmt` rewrites them,
# `make fmt-check` (run by .ci/run) fails on any file that differs.
FMT_SRC = $(wildcard main.c wire/*.[ch] common/*.[ch] common/*.cc storage/*.[ch] catalog/*.[ch] remote/*.[ch] query/*.[ch] server/*.[ch] \
            ingest/*.[ch] symbolize/*.[ch] cli/*.[ch] tests/unit/*.[ch] tests/fuzz/*.c tests/oom/*.[ch])
.PHONY: fmt-check
fmt:
	clang-format -i $(FMT_SRC)
fmt-check:
	@command -v clang-format >/dev/null || deploy/install-deps.sh test
	clang-format --dry-run --Werror $(FMT_SRC)

clean:
	rm -rf build hearth hearth-asan

# build/v1src is another tree (build/hearth-v1): its dependency files name its own sources.
-include $(shell find build -path build/v1src -prune -o -name '*.d' -print 2>/dev/null)
