# tests/fuzz/fuzz.mk - sanitizer builds and the libFuzzer harnesses.
# Included by the top Makefile after SHIM_SRC, GEN_SRC, UNIT_SRC,
# ALL_CFLAGS and LIBS are defined (its last line). The normal build is
# untouched: make asan builds into build-asan/ (gcc), the fuzzers into
# build-fuzz/ (clang), and every file a run writes (new corpus entries,
# crash reproducers, the cassette harness's scratch files) stays there.
#
#   make asan        unit tests built with ASan+UBSan, run with leak checks
#   make fuzz        every harness for FUZZ_SECONDS
#   make fuzz-short  every harness for FUZZ_SHORT_SECONDS (CI-sized)
#   make fuzz-replay every corpus and crash file once, through its harness
# Each fails on any crash, sanitizer report, leak, timeout, out-of-memory
# or invalid output (the harnesses' own checks abort).

ASAN_DIR := build-asan
SAN_FLAGS := -fsanitize=address,undefined,float-cast-overflow \
             -fno-sanitize-recover=undefined,float-cast-overflow \
             -fno-omit-frame-pointer
ASAN_CFLAGS := $(filter-out -O0 -O1 -O2 -O3 -Os -Og,$(ALL_CFLAGS)) -O1 -g $(SAN_FLAGS)
ASAN_ENV := ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
            LSAN_OPTIONS=suppressions=$(CURDIR)/tests/fuzz/lsan.supp:print_suppressions=0

ASAN_SRC := $(filter-out shim/curl/preload.c,$(SHIM_SRC))
ASAN_OBJ := $(patsubst %.c,$(ASAN_DIR)/obj/%.o,$(ASAN_SRC)) \
            $(patsubst $(BUILD)/gen/%.c,$(ASAN_DIR)/gen/%.o,$(GEN_SRC))
ASAN_LIB := $(ASAN_DIR)/libcodeshim_core.a
ASAN_UNIT_BIN := $(patsubst tests/unit/%.c,$(ASAN_DIR)/tests/%,$(UNIT_SRC)) \
                 $(patsubst tests/sandbox/%.c,$(ASAN_DIR)/sandbox-tests/%,$(SANDBOX_SRC))

.PHONY: asan fuzz fuzz-short fuzz-replay fuzz-build clean-asan clean-fuzz

# Objects depend on this file too: it holds their flags.
$(ASAN_DIR)/obj/%.o: %.c $(wildcard shim/*/*.h shim/*/*/*.h) tests/fuzz/fuzz.mk | $(GEN_SRC)
	@mkdir -p $(dir $@)
	$(CC) $(ASAN_CFLAGS) -c $< -o $@

$(ASAN_DIR)/gen/%.o: $(BUILD)/gen/%.c tests/fuzz/fuzz.mk
	@mkdir -p $(dir $@)
	$(CC) $(ASAN_CFLAGS) -c $< -o $@

$(ASAN_LIB): $(ASAN_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(ASAN_DIR)/tests/%: tests/unit/%.c $(ASAN_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ASAN_CFLAGS) -fvisibility=default -Itests/unit $< -o $@ \
	  $(ASAN_LIB) -lcmocka $(TEST_LIBS)

$(ASAN_DIR)/sandbox-tests/%: tests/sandbox/%.c tests/sandbox/test_sandbox_util.h $(ASAN_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ASAN_CFLAGS) -fvisibility=default -Itests/sandbox $< -o $@ \
	  $(ASAN_LIB) -lcmocka $(TEST_LIBS)

# Every binary runs (a failure does not hide the next ones), each under a
# time limit: a hang fails the target instead of stalling it.
ASAN_TEST_TIMEOUT ?= 900
asan: $(ASAN_UNIT_BIN)
	@failed=""; for t in $(ASAN_UNIT_BIN); do echo "== $$t"; \
	  $(ASAN_ENV) timeout -k 10 $(ASAN_TEST_TIMEOUT) $$t || failed="$$failed $$t"; done; \
	if [ -n "$$failed" ]; then echo "asan: FAILED:$$failed"; exit 1; fi; echo "asan: all passed"

# ------------------------------------------------------------------
# libFuzzer (Debian's clang 14 with libclang-rt-14-dev). One harness per
# engine that reads untrusted bytes: tests/fuzz/fuzz_<name>.c.

FUZZ_DIR := build-fuzz
FUZZ_CC ?= clang
FUZZ_NAMES := request reply stream deliver cassette proto sandbox files sse
FUZZ_BINS := $(patsubst %,$(FUZZ_DIR)/fuzz_%,$(FUZZ_NAMES))
# The engines as the library compiles them (warnings included), with
# clang's coverage for libFuzzer. libseccomp's SCMP_A0() leaves fields to
# zero-initialisation, which clang (only) reports.
FUZZ_CFLAGS := $(filter-out -O0 -O1 -O2 -O3 -Os -Og,$(ALL_CFLAGS)) -O1 -g $(SAN_FLAGS) \
               -Wno-missing-field-initializers
FUZZ_OBJ := $(patsubst %.c,$(FUZZ_DIR)/obj/%.o,$(ASAN_SRC)) \
            $(patsubst $(BUILD)/gen/%.c,$(FUZZ_DIR)/gen/%.o,$(GEN_SRC))
FUZZ_LIB := $(FUZZ_DIR)/libcodeshim_core.a
FUZZ_COMMON := $(FUZZ_DIR)/harness/fuzz_common.o
# the cassette harness checks sha256.c against OpenSSL's digest
FUZZ_LIBS_cassette := -lcrypto

FUZZ_SECONDS ?= 300
FUZZ_SHORT_SECONDS ?= 9
FUZZ_MAX_LEN ?= 65536
FUZZ_ARGS ?=
FUZZ_DICT_deliver := tests/fuzz/http.dict
FUZZ_DICT_sandbox := tests/fuzz/frames.dict
FUZZ_DICT_proto := tests/fuzz/frames.dict
# libFuzzer writes what it finds into the first corpus directory: ours in
# build-fuzz/; the committed corpus and crash regressions are only read.
FUZZ_FLAGS = -timeout=20 -rss_limit_mb=2048 -max_len=$(FUZZ_MAX_LEN) \
             -dict=$(or $(FUZZ_DICT_$(1)),tests/fuzz/json.dict) \
             -artifact_prefix=$(FUZZ_DIR)/crashes/$(1)/ -print_final_stats=1
FUZZ_SEEDS = $(wildcard tests/fuzz/corpus/$(1) tests/fuzz/crashes/$(1))

$(FUZZ_DIR)/obj/%.o: %.c $(wildcard shim/*/*.h shim/*/*/*.h) tests/fuzz/fuzz.mk | $(GEN_SRC)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_DIR)/gen/%.o: $(BUILD)/gen/%.c tests/fuzz/fuzz.mk
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@

$(FUZZ_LIB): $(FUZZ_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The harnesses and their checks are compiled without coverage: only the
# engines' edges guide libFuzzer (and the checks cost less).
$(FUZZ_DIR)/harness/%.o: tests/fuzz/%.c tests/fuzz/fuzz_common.h tests/fuzz/fuzz.mk \
                         $(wildcard shim/*/*.h shim/*/*/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fvisibility=default -Itests/fuzz -c $< -o $@

$(FUZZ_DIR)/fuzz_%: $(FUZZ_DIR)/harness/fuzz_%.o $(FUZZ_COMMON) $(FUZZ_LIB)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $< -o $@ \
	  $(FUZZ_COMMON) $(FUZZ_LIB) $(TEST_LIBS) $(FUZZ_LIBS_$*)

# kept: a harness relinks only when its object or the engines change
.PRECIOUS: $(FUZZ_DIR)/harness/%.o

fuzz-build: $(FUZZ_BINS)

# Runs every harness for $(1) seconds (a failure does not stop the next).
define fuzz_all
	+@failed=""; for h in $(FUZZ_NAMES); do \
	  $(MAKE) --no-print-directory -s fuzz-run-$$h FUZZ_RUN_SECONDS=$(1) || failed="$$failed $$h"; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz: FAILED:$$failed (inputs in $(FUZZ_DIR)/crashes/)"; exit 1; fi; \
	echo "fuzz: all harnesses passed"
endef

# One harness: its log in build-fuzz/fuzz-<name>.log, the final stats
# (executions, executions per second, peak memory) printed.
fuzz-run-%: $(FUZZ_DIR)/fuzz_%
	@mkdir -p $(FUZZ_DIR)/corpus/$* $(FUZZ_DIR)/crashes/$*
	@echo "== fuzz_$* ($(FUZZ_RUN_SECONDS) s)"
	@if $(FUZZ_DIR)/fuzz_$* $(call FUZZ_FLAGS,$*) -max_total_time=$(FUZZ_RUN_SECONDS) \
	    $(FUZZ_ARGS) $(FUZZ_DIR)/corpus/$* $(call FUZZ_SEEDS,$*) >$(FUZZ_DIR)/fuzz-$*.log 2>&1; then \
	  grep -E '^stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb)' \
	    $(FUZZ_DIR)/fuzz-$*.log | tr '\n' ' '; echo; \
	else tail -60 $(FUZZ_DIR)/fuzz-$*.log; echo "fuzz_$*: FAILED (log: $(FUZZ_DIR)/fuzz-$*.log)"; exit 1; fi

fuzz: $(FUZZ_BINS)
	$(call fuzz_all,$(FUZZ_SECONDS))

fuzz-short: $(FUZZ_BINS)
	$(call fuzz_all,$(FUZZ_SHORT_SECONDS))

# Every committed input once through its harness (files given by name:
# libFuzzer runs them and stops).
fuzz-replay: $(FUZZ_BINS)
	@failed=""; for h in $(FUZZ_NAMES); do \
	  files=$$(find tests/fuzz/corpus/$$h tests/fuzz/crashes/$$h -type f 2>/dev/null | sort); \
	  [ -n "$$files" ] || continue; \
	  n=$$(echo "$$files" | wc -l); \
	  if $(FUZZ_DIR)/fuzz_$$h -runs=1 $$files >$(FUZZ_DIR)/replay-$$h.log 2>&1; then \
	    echo "fuzz-replay: $$h: $$n inputs ok"; \
	  else echo "fuzz-replay: $$h: FAILED (see $(FUZZ_DIR)/replay-$$h.log)"; \
	    tail -40 $(FUZZ_DIR)/replay-$$h.log; failed="$$failed $$h"; fi; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz-replay: FAILED:$$failed"; exit 1; fi

clean-asan:
	rm -rf $(ASAN_DIR)

clean-fuzz:
	rm -rf $(FUZZ_DIR)

clean: clean-asan clean-fuzz
