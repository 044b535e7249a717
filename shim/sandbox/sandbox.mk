# sandbox.mk - owned by the sandbox layer; included by the top Makefile.
# Embeds shim/sandbox/worker.py into the library as build/gen/worker_py.c
# (its source, and its bytecode for the Python that builds it; see
# embed.py) so the library runs it with `python3 -c` and ships no separate
# file. Generated with Debian's python3 only.
GEN_SRC += $(BUILD)/gen/worker_py.c

$(BUILD)/gen/worker_py.c: shim/sandbox/worker.py shim/sandbox/embed.py shim/sandbox/sandbox.mk
	@mkdir -p $(dir $@)
	$(PYTHON) -I -B shim/sandbox/embed.py shim/sandbox/worker.py $@.tmp
	@mv $@.tmp $@

# The e2b backend's own cells (e2b.c), kept as Python files.
E2B_CELLS := $(wildcard shim/sandbox/e2b/e2b_*.py)
GEN_SRC += $(BUILD)/gen/e2b_cells.c

$(BUILD)/gen/e2b_cells.c: $(E2B_CELLS) shim/sandbox/embed.py shim/sandbox/sandbox.mk
	@mkdir -p $(dir $@)
	$(PYTHON) -I -B shim/sandbox/embed.py --cells $@.tmp $(E2B_CELLS)
	@mv $@.tmp $@
