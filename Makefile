# codeshim - plain GNU make. `make` builds build/libcodeshim.so;
# `make test` runs every test (unit, exports, integration).
CC ?= cc
.DEFAULT_GOAL := all
BUILD := build
PYTHON := /usr/bin/python3

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
        -Wmissing-prototypes -Wwrite-strings -Wpointer-arith \
        -Wformat=2 -Wundef -Wimplicit-fallthrough -fno-common
CFLAGS ?= -O2 -g
# initial-exec TLS: the library is preloaded, so its few thread-locals sit
# in the static TLS block, and it needs no __tls_get_addr (which would make
# it NEED ld.so, moving ld.so up the host's symbol scope; see SO_LIBS).
ALL_CFLAGS := -std=c11 -D_GNU_SOURCE -DCURL_DISABLE_DEPRECATION -fPIC -fvisibility=hidden $(WARN) \
              -ftls-model=initial-exec -Ishim -I$(BUILD)/gen $(CFLAGS)
# Header dependencies: every compile writes a .d beside its output (-MMD;
# -MP: a removed header is no error), included at the end of this file.
DEPFLAGS := -MMD -MP
# The library and everything built from its objects: glibc's checked
# string and I/O functions (which need -O1 or more: not with -O0) and
# stack canaries in functions with arrays or address-taken locals. Not in
# ALL_CFLAGS, which the sanitizer and fuzzer builds start from.
HARDEN := -fstack-protector-strong $(if $(filter -O0,$(CFLAGS)),,-U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=2)
LIBS := -lcjson -lpthread -ldl -lseccomp -lnettle -lyaml
# What the preloaded library links. Every library it NEEDs joins the
# program's global symbol scope right behind it, and every symbol lookup
# of every other library then checks it too (about 9,000 in a curl
# program): libseccomp, nettle and libyaml are linked from Debian's static
# archives instead, their symbols made local (--exclude-libs: exported,
# they would interpose on the host's own libnettle and libseccomp users).
SO_LIBS := -Wl,--exclude-libs,libseccomp.a:libnettle.a:libyaml.a -Wl,-Bstatic -lseccomp -lnettle -lyaml \
           -Wl,-Bdynamic
# libcjson is not linked at all: the library carries a forwarding
# definition of each cJSON function (generated from cJSON.h), which loads
# libcjson.so.1 RTLD_LOCAL on the first call (real.c).
SO_ONLY_OBJ := $(BUILD)/gen/cjson_lazy.o
$(BUILD)/gen/cjson_lazy.c: /usr/include/cjson/cJSON.h shim/system/cjson_lazy.py
	@mkdir -p $(dir $@)
	$(PYTHON) -I -B shim/system/cjson_lazy.py $< $@.tmp
	@mv $@.tmp $@

# Every .c under shim/ is part of the library; preload.c is the boundary
# (the only file defining curl_* and dlopen), kept out of the unit-test
# archive so tests link the engines without interposing anything.
SHIM_SRC := $(wildcard shim/*/*.c shim/*/*/*.c)
GEN_SRC :=
include shim/sandbox/sandbox.mk
include cli/cli.mk
include bench/bench.mk
SHIM_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(SHIM_SRC)) \
            $(patsubst %.c,%.o,$(GEN_SRC))
CORE_OBJ := $(filter-out $(BUILD)/obj/shim/curl/preload.o,$(SHIM_OBJ))

UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))
# Suites that start real sandboxes (bubblewrap, Python): not unit tests.
SANDBOX_SRC := $(wildcard tests/sandbox/test_*.c)
SANDBOX_BIN := $(patsubst tests/sandbox/%.c,$(BUILD)/sandbox-tests/%,$(SANDBOX_SRC))
EXAMPLES := $(patsubst examples/%.c,$(BUILD)/examples/%,$(wildcard examples/*.c))
# Small libcurl programs the integration tests drive (odd delivery cases).
TESTPROGS := $(patsubst tests/integration/progs/%.c,$(BUILD)/testprogs/%,\
               $(wildcard tests/integration/progs/*.c)) \
             $(patsubst tests/integration/progs/lib/%.c,$(BUILD)/testprogs/lib%.so,\
               $(wildcard tests/integration/progs/lib/*.c))

.PHONY: all deps print-libs demo test unit sandbox integration exports layers homes docs-check examples bench install uninstall clean
SESSIOND := $(BUILD)/codeshim-sessiond

all: $(BUILD)/libcodeshim.so $(EXAMPLES) $(CLI_BIN) $(SESSIOND)

$(BUILD)/obj/%.o: %.c | $(GEN_SRC)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(HARDEN) $(DEPFLAGS) -c $< -o $@

$(BUILD)/gen/%.o: $(BUILD)/gen/%.c
	$(CC) $(ALL_CFLAGS) $(HARDEN) $(DEPFLAGS) -c $< -o $@

# Lazy binding (no -z now): a program that never makes an intercepted
# request resolves only the few imports its pass-through path calls, not
# all ~200. The price is a writable .got.plt (partial RELRO; .got and the
# rest stay read-only). The one place lazy binding is unsafe is the
# CLONE_VM child of spawn.c, which shares the host's memory and runs on a
# small stack: its code, spawn_child.c, is built with -fno-plt, so its
# calls go through GOT slots the loader fills at load time, before anything
# runs (some twenty: the parent's side in spawn.c binds lazily).
$(BUILD)/obj/shim/sandbox/local/spawn_child.o: ALL_CFLAGS += -fno-plt
# The version script and the export check are made from the one list of
# interposed functions, shim/system/symbols.h.
MAP := $(BUILD)/gen/codeshim.map
$(MAP): shim/system/codeshim.map.in shim/system/symbols.h
	@mkdir -p $(dir $@)
	$(CC) -E -P -x c -Ishim $< -o $@.tmp
	@mv $@.tmp $@
$(BUILD)/libcodeshim.so: $(SHIM_OBJ) $(SO_ONLY_OBJ) $(MAP)
	$(CC) -shared -o $@ $(SHIM_OBJ) $(SO_ONLY_OBJ) -Wl,--version-script=$(MAP) \
	  -Wl,-z,defs -Wl,-z,relro -Wl,--as-needed $(SO_LIBS)

$(BUILD)/libcodeshim_core.a: $(CORE_OBJ)
	@rm -f $@
	ar rcs $@ $^

# Test programs link libcurl (the library never does): url.c reads URLs
# with the process's libcurl (curl_url), which a unit test has no other
# way to load.
TEST_LIBS = $(LIBS) -Wl,--no-as-needed -lcurl -Wl,--as-needed

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libcodeshim_core.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(DEPFLAGS) -fvisibility=default -Itests/unit $< -o $@ \
	  $(BUILD)/libcodeshim_core.a -lcmocka $(TEST_LIBS)

$(BUILD)/sandbox-tests/%: tests/sandbox/%.c $(BUILD)/libcodeshim_core.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(DEPFLAGS) -fvisibility=default -Itests/sandbox $< -o $@ \
	  $(BUILD)/libcodeshim_core.a -lcmocka $(TEST_LIBS)

# The session supervisor is a program of its own built from the library's
# engines; the library starts it from the directory it was loaded from.
SESSIOND_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard sessiond/*.c))
$(SESSIOND): $(SESSIOND_OBJ) $(BUILD)/libcodeshim_core.a
	$(CC) $(ALL_CFLAGS) $(HARDEN) $(SESSIOND_OBJ) -o $@ $(BUILD)/libcodeshim_core.a $(LIBS)

# Examples use libcurl like any program: they link -lcurl (the shim never does).
$(BUILD)/examples/%: examples/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror $(DEPFLAGS) $< -o $@ -lcurl -lcjson

$(BUILD)/testprogs/lib%.so: tests/integration/progs/lib/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror $(DEPFLAGS) -shared -fPIC $< -o $@ -lcurl

$(BUILD)/testprogs/%: tests/integration/progs/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror $(DEPFLAGS) $< -o $@ -lcurl -lcjson -lpthread

deps:
	@scripts/deps.sh

# The libraries a program built from libcodeshim_core.a links (for tests
# that build a variant of one).
print-libs:
	@echo $(LIBS)

# demo.sh builds `all` itself, quietly (the output only on failure).
demo: deps
	@MAKE="$(MAKE)" scripts/demo.sh

test: deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory layers homes docs-check unit sandbox exports integration fuzz-short asan tsan-short

unit: $(UNIT_BIN)
	@set -e; for t in $(UNIT_BIN); do echo "== $$t"; $$t; done

sandbox: $(SANDBOX_BIN)
	@set -e; for t in $(SANDBOX_BIN); do echo "== $$t"; $$t; done

exports: $(BUILD)/libcodeshim.so
	@CC="$(CC)" tests/tools/check_exports.sh $(BUILD)/libcodeshim.so shim/system/symbols.h

# The layer table in doc/ARCHITECTURE.md, enforced on the objects (nm) and
# the includes: no call or include upwards, no two files in a circle.
layers: $(SHIM_OBJ)
	@$(PYTHON) tests/tools/check_layers.py doc/ARCHITECTURE.md $(BUILD)/obj .

# The copies of the settings table (shim/system/settings.c) in the README's
# configuration table and the man page's ENVIRONMENT section: a row for
# every setting with the table's default and range
# (tests/tools/check_settings_docs.py); and no comment pointing outside
# the repository.
$(BUILD)/tools/settings_dump: tests/tools/settings_dump.c $(BUILD)/libcodeshim_core.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(DEPFLAGS) $< -o $@ $(BUILD)/libcodeshim_core.a $(LIBS)

docs-check: $(BUILD)/tools/settings_dump
	@$(BUILD)/tools/settings_dump > $(BUILD)/tools/settings.tsv
	@$(PYTHON) tests/tools/check_settings_docs.py $(BUILD)/tools/settings.tsv README.md $(CLI_MAN)
	@tests/tools/check_outside_refs.sh
# One home for every job: no second URL splitter, hash-to-hex, path join,
# capped reader or wall-clock read outside its home (the script says which).
homes:
	@$(PYTHON) tests/tools/check_homes.py .

integration: all $(TESTPROGS) $(SANDBOX_BIN)
	$(PYTHON) -m pytest -q -p no:cacheprovider tests/integration

$(BUILD)/bench/%: bench/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror $(DEPFLAGS) $< -o $@ -lcurl

# Benchmarks are measured, never asserted: numbers go to the README.
bench: all $(BUILD)/bench/bench_http $(BUILD)/bench/host_bench $(BUILD)/bench/offline_cpu bench-sandbox
	@bench/run.sh

# make install PREFIX=/usr/local: launcher, man page, and the library in
# $(CODESHIM_LIBDIR) (<bindir>/../lib/codeshim, where the launcher looks).
install: all install-cli
	install -d $(DESTDIR)$(CODESHIM_LIBDIR)
	install -m 0644 $(BUILD)/libcodeshim.so $(DESTDIR)$(CODESHIM_LIBDIR)/libcodeshim.so
	install -m 0755 $(SESSIOND) $(DESTDIR)$(CODESHIM_LIBDIR)/codeshim-sessiond

# make uninstall, with the PREFIX (and DESTDIR) install was given: removes
# what install put in place, and $(CODESHIM_LIBDIR) once it is empty.
uninstall: uninstall-cli
	rm -f $(DESTDIR)$(CODESHIM_LIBDIR)/libcodeshim.so $(DESTDIR)$(CODESHIM_LIBDIR)/codeshim-sessiond
	rmdir $(DESTDIR)$(CODESHIM_LIBDIR) 2>/dev/null || true

clean:
	rm -rf $(BUILD)

# Sanitizer builds (build-asan/) and the libFuzzer harnesses (build-fuzz/):
# make asan, make fuzz (long), make fuzz-short (CI-sized, part of make
# test), make fuzz-replay.
include tests/fuzz/fuzz.mk

# The .d files the compiles above wrote (none before the first build).
-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
# The ThreadSanitizer build (build-tsan/) and its run: make tsan, make
# tsan-short (part of make test).
include tests/tsan/tsan.mk
