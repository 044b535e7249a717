# tests/fuzz/fuzz.mk - sanitizer builds and the engine fuzzer. Included by
# the top Makefile after SHIM_SRC, GEN_SRC, UNIT_SRC, ALL_CFLAGS and LIBS
# are defined (its last line). Everything goes to build-asan/ (crash
# reproducers to build/fuzz-crashes/), so the normal build is untouched.
#
#   make asan        unit tests built with ASan+UBSan, run with leak checks
#   make fuzz        long fuzzing run (FUZZ_SECONDS, FUZZ_ITERATIONS)
#   make fuzz-short  CI-sized run (FUZZ_SHORT_SECONDS)
#   make fuzz-replay every saved reproducer (tests/fuzz/crashes/) once
# Each fails on any crash, sanitizer report, leak, hang or invalid output.
# A failing input is saved in build/fuzz-crashes/ with its report (.log);
# `build-asan/fuzz_engines FILE` replays it.

ASAN_DIR := build-asan
SAN_FLAGS := -fsanitize=address,undefined,float-cast-overflow \
             -fno-sanitize-recover=undefined,float-cast-overflow \
             -fno-omit-frame-pointer
ASAN_CFLAGS := $(filter-out -O0 -O1 -O2 -O3 -Os -Og,$(ALL_CFLAGS)) -O1 -g $(SAN_FLAGS)
# The engines report edge coverage to the fuzzer (gcc's trace-pc hook).
ASAN_COV := -fsanitize-coverage=trace-pc
ASAN_ENV := ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
            LSAN_OPTIONS=suppressions=$(CURDIR)/tests/fuzz/lsan.supp:print_suppressions=0

ASAN_SRC := $(filter-out shim/preload.c,$(SHIM_SRC))
ASAN_OBJ := $(patsubst %.c,$(ASAN_DIR)/obj/%.o,$(ASAN_SRC)) \
            $(patsubst $(BUILD)/gen/%.c,$(ASAN_DIR)/gen/%.o,$(GEN_SRC))
ASAN_LIB := $(ASAN_DIR)/libcodeshim_core.a
ASAN_UNIT_BIN := $(patsubst tests/unit/%.c,$(ASAN_DIR)/tests/%,$(UNIT_SRC))
FUZZ_BIN := $(ASAN_DIR)/fuzz_engines

FUZZ_SECONDS ?= 600
FUZZ_ITERATIONS ?= 2000000
FUZZ_SHORT_SECONDS ?= 45
FUZZ_SEED ?= 1
FUZZ_ARGS ?=

.PHONY: asan fuzz fuzz-short fuzz-replay clean-asan

$(ASAN_DIR)/obj/%.o: %.c $(wildcard shim/*.h shim/sandbox/*.h) | $(GEN_SRC)
	@mkdir -p $(dir $@)
	$(CC) $(ASAN_CFLAGS) $(ASAN_COV) -c $< -o $@

$(ASAN_DIR)/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ASAN_CFLAGS) -c $< -o $@

$(ASAN_LIB): $(ASAN_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(ASAN_DIR)/cov_stub.o: tests/fuzz/cov_stub.c
	@mkdir -p $(dir $@)
	$(CC) $(ASAN_CFLAGS) -c $< -o $@

$(ASAN_DIR)/tests/%: tests/unit/%.c $(ASAN_LIB) $(ASAN_DIR)/cov_stub.o
	@mkdir -p $(dir $@)
	$(CC) $(ASAN_CFLAGS) -fvisibility=default -Itests/unit $< -o $@ \
	  $(ASAN_DIR)/cov_stub.o $(ASAN_LIB) -lcmocka $(LIBS)

# Every binary runs (a failure does not hide the next ones), each under a
# time limit: a hang fails the target instead of stalling it.
ASAN_TEST_TIMEOUT ?= 900
asan: $(ASAN_UNIT_BIN)
	@failed=""; for t in $(ASAN_UNIT_BIN); do echo "== $$t"; \
	  $(ASAN_ENV) timeout -k 10 $(ASAN_TEST_TIMEOUT) $$t || failed="$$failed $$t"; done; \
	if [ -n "$$failed" ]; then echo "asan: FAILED:$$failed"; exit 1; fi; echo "asan: all passed"

$(FUZZ_BIN): tests/fuzz/fuzz_engines.c $(ASAN_LIB) $(wildcard shim/*.h shim/sandbox/*.h)
	$(CC) $(ASAN_CFLAGS) -fvisibility=default $< -o $@ $(ASAN_LIB) $(LIBS)

fuzz: $(FUZZ_BIN)
	$(FUZZ_BIN) --seconds $(FUZZ_SECONDS) --iterations $(FUZZ_ITERATIONS) \
	  --seed $(FUZZ_SEED) --queue $(ASAN_DIR)/fuzz-queue $(FUZZ_ARGS)

fuzz-short: $(FUZZ_BIN)
	$(FUZZ_BIN) --seconds $(FUZZ_SHORT_SECONDS) --seed $(FUZZ_SEED) $(FUZZ_ARGS)

fuzz-replay: $(FUZZ_BIN)
	@set -e; files="$(wildcard tests/fuzz/crashes/*)"; \
	if [ -n "$$files" ]; then $(FUZZ_BIN) $$files; else echo "fuzz: nothing to replay"; fi

clean-asan:
	rm -rf $(ASAN_DIR)

clean: clean-asan
