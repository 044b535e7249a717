# tests/tsan/tsan.mk - the ThreadSanitizer build of the library and its
# run. Included by the top Makefile after SHIM_SRC, GEN_SRC, ALL_CFLAGS
# and SO_LIBS are defined. The normal build is untouched: the library is
# built into build-tsan/ (with the session supervisor beside it, where
# the library looks for it) and integration tests that use threads and
# the multi interface run against it.
#
# The programs are not TSan-built, so the runtime is preloaded first,
# before the library (its interceptors must come before libc's): every
# thread codeshim starts, every lock it takes and every byte it touches
# in its own code is seen; libcurl's and the program's accesses are not
# instrumented (only their synchronisation, through the interceptors).
#
#   make tsan        the multi and thread tests (TSAN_TESTS), about 2 min
#   make tsan-short  the part `make test` runs (TSAN_SHORT)
# Each fails when a test fails or TSan reports anything: reports go to
# build-tsan/reports/ (log_path; not into the program's stderr, which
# tests read) and are printed.

TSAN_DIR := build-tsan
TSAN_CFLAGS := $(filter-out -O0 -O1 -O2 -O3 -Os -Og,$(ALL_CFLAGS)) -O1 -g \
               -fsanitize=thread -fno-omit-frame-pointer
TSAN_OBJ := $(patsubst %.c,$(TSAN_DIR)/obj/%.o,$(SHIM_SRC)) \
            $(patsubst $(BUILD)/gen/%.c,$(TSAN_DIR)/gen/%.o,$(GEN_SRC) $(BUILD)/gen/cjson_lazy.c)
TSAN_LIB := $(TSAN_DIR)/libcodeshim.so
TSAN_RT = $(shell $(CC) -print-file-name=libtsan.so)
TSAN_SUPP := $(CURDIR)/tests/tsan/tsan.supp
# Left out: PHP (it loads its extensions RTLD_DEEPBIND, which the TSan
# runtime refuses), the 1000-transfer hygiene run (too slow instrumented),
# the thread-count bound (TSan runs a thread of its own), a fork in the
# middle of transfers (the child of a multi-threaded TSan process can
# hang in the runtime), and the tests that run the curl CLI: under the
# TSan runtime alone (no codeshim) /usr/bin/curl hangs at start-up in
# setlocale (glibc 2.36, GCC 12's libtsan).
TSAN_SKIP := not php and not hygiene_1000 and not inflight_bound and not fork_mid \
             and not upload_file and not read_callback and not max_time and not curl_parallel
TSAN_TESTS ?= tests/integration/test_multi.py tests/integration/test_limits.py \
              tests/integration/test_bodies.py -k "$(TSAN_SKIP)"
TSAN_SHORT ?= tests/integration/test_multi.py -k "event_loops or remove_mid or cleanup_mid or threads_each or pycurl_multi"

.PHONY: tsan tsan-short tsan-build clean-tsan

$(TSAN_DIR)/obj/%.o: %.c $(wildcard shim/*/*.h shim/*/*/*.h) tests/tsan/tsan.mk | $(GEN_SRC)
	@mkdir -p $(dir $@)
	$(CC) $(TSAN_CFLAGS) -c $< -o $@

$(TSAN_DIR)/gen/%.o: $(BUILD)/gen/%.c tests/tsan/tsan.mk
	@mkdir -p $(dir $@)
	$(CC) $(TSAN_CFLAGS) -c $< -o $@

# spawn_child.c runs in a CLONE_VM child that shares the host's memory
# but is no thread TSan knows: it is built without instrumentation (as
# in the library, with -fno-plt).
$(TSAN_DIR)/obj/shim/sandbox/local/spawn_child.o: TSAN_CFLAGS := $(filter-out -fsanitize=thread,$(TSAN_CFLAGS)) -fno-plt

$(TSAN_LIB): $(TSAN_OBJ) $(MAP) $(SESSIOND)
	$(CC) -shared -fsanitize=thread -o $@ $(TSAN_OBJ) -Wl,--version-script=$(MAP) \
	  -Wl,-z,defs -Wl,--as-needed $(SO_LIBS)
	ln -sf ../$(SESSIOND) $(TSAN_DIR)/codeshim-sessiond

tsan-build: $(TSAN_LIB) all $(TESTPROGS)

# $(1): the pytest arguments.
define tsan_run
	@rm -rf $(TSAN_DIR)/reports; mkdir -p $(TSAN_DIR)/reports
	@CODESHIM_TEST_LIB=$(CURDIR)/$(TSAN_LIB) CODESHIM_TEST_PRELOAD=$(TSAN_RT) \
	  TSAN_OPTIONS="log_path=$(CURDIR)/$(TSAN_DIR)/reports/tsan suppressions=$(TSAN_SUPP) history_size=4 second_deadlock_stack=1 die_after_fork=0" \
	  $(PYTHON) -m pytest -q -p no:cacheprovider $(1); rc=$$?; \
	if ls $(TSAN_DIR)/reports/tsan* >/dev/null 2>&1; then \
	  cat $(TSAN_DIR)/reports/tsan*; echo "tsan: REPORTS in $(TSAN_DIR)/reports/"; exit 1; fi; \
	[ $$rc = 0 ] || { echo "tsan: tests FAILED"; exit 1; }; echo "tsan: clean"
endef

tsan: tsan-build
	$(call tsan_run,$(TSAN_TESTS))

tsan-short: tsan-build
	$(call tsan_run,$(TSAN_SHORT))

clean-tsan:
	rm -rf $(TSAN_DIR)

clean: clean-tsan
