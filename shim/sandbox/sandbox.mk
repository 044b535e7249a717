# sandbox.mk - owned by the sandbox layer; included by the top Makefile.
# Embeds shim/sandbox/worker.py into the library as build/gen/worker_py.c
# (shim_worker_py[], NUL-terminated, and shim_worker_py_len) so the library
# runs its worker with `python3 -c` and ships no separate file. Generated
# with Debian's python3 only; every byte that is not plain printable ASCII
# (and " \ ?, the last against trigraphs) becomes a 3-digit octal escape.
GEN_SRC += $(BUILD)/gen/worker_py.c

$(BUILD)/gen/worker_py.c: shim/sandbox/worker.py shim/sandbox/sandbox.mk
	@mkdir -p $(dir $@)
	$(PYTHON) -c 'import sys; \
	d = open(sys.argv[1], "rb").read(); \
	esc = lambda b: chr(b) if 32 <= b < 127 and chr(b) not in "\"\\?" else "\\%03o" % b; \
	lines = ["    \"" + "".join(esc(b) for b in ln) + "\"" for ln in d.splitlines(True)] or ["    \"\""]; \
	out = open(sys.argv[2], "w"); \
	out.write("/* generated from %s by sandbox.mk - do not edit */\n" % sys.argv[1]); \
	out.write("#include <stddef.h>\n\nconst char shim_worker_py[] =\n"); \
	out.write("\n".join(lines) + ";\nconst size_t shim_worker_py_len = %d;\n" % len(d))' \
	  shim/sandbox/worker.py $@.tmp
	@mv $@.tmp $@
