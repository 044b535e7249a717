# cli/cli.mk - the launcher build/codeshim and its man page; included by
# the top Makefile (which defines BUILD, CC, WARN, CFLAGS and LIBS first).
# The launcher is an ordinary program: no -fPIC/-fvisibility, no libcurl.
# It links the library's engines (libcodeshim_core.a, without the curl
# interposition) for `codeshim --check`, which starts a real sandbox.

CODESHIM_VERSION ?= 0.1.0
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man
# The launcher looks for <bindir>/../lib/codeshim/libcodeshim.so, so the
# library must be installed here for an installed launcher to find it.
CODESHIM_LIBDIR ?= $(PREFIX)/lib/codeshim

# The launcher reuses the library's capped buffer and JSON helpers (from
# the core archive, with the rest of the engines).
CLI_SRC := $(wildcard cli/*.c)
CLI_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(CLI_SRC))
CLI_BIN := $(BUILD)/codeshim
CLI_MAN := doc/codeshim.1
# Recursive (=) so WARN and CFLAGS may be set after the include line.
CLI_CFLAGS = -std=c11 -D_GNU_SOURCE $(WARN) -Ishim \
             -DCODESHIM_VERSION='"$(CODESHIM_VERSION)"' $(CFLAGS)

# Its objects (headers tracked by the top Makefile's DEPFLAGS), with its
# own flags rather than the library's.
$(BUILD)/obj/cli/%.o: cli/%.c cli/cli.mk
	@mkdir -p $(dir $@)
	$(CC) $(CLI_CFLAGS) $(DEPFLAGS) -c $< -o $@

$(CLI_BIN): $(CLI_OBJ) $(BUILD)/libcodeshim_core.a
	@mkdir -p $(dir $@)
	$(CC) $(CLI_CFLAGS) $(CLI_OBJ) -o $@ $(BUILD)/libcodeshim_core.a $(LIBS)

# tests/unit/test_trace.c includes the trace loader and printers (the
# generic unit-test rules link only the library's archive): the ASan build
# tracks no headers, so it is told (build/tests/test_trace.d says it for
# the normal one). build-asan is fuzz.mk's ASAN_DIR, not yet set here.
TRACE_TEST_DEPS := cli/trace_load.c cli/trace_print.c cli/trace_model.h cli/trace.h
build-asan/tests/test_trace: $(TRACE_TEST_DEPS)

.PHONY: install-cli uninstall-cli
install-cli: $(CLI_BIN)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1
	install -m 0755 $(CLI_BIN) $(DESTDIR)$(BINDIR)/codeshim
	install -m 0644 $(CLI_MAN) $(DESTDIR)$(MANDIR)/man1/codeshim.1

uninstall-cli:
	rm -f $(DESTDIR)$(BINDIR)/codeshim $(DESTDIR)$(MANDIR)/man1/codeshim.1
