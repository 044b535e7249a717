# sandbox.mk - owned by the sandbox layer; included by the top Makefile.
# Joins the local sandbox's Python side (shim/sandbox/worker/, with the one
# /mnt/data listing, listing.py) into one source and embeds it into the
# library as build/gen/worker_py.c (its source, and its bytecode for the
# Python that builds it; see embed.py) so the library runs it with
# `python3 -c` and ships no separate file. Generated with Debian's python3
# only. The order matters: main.py, which runs one of the others, is last.
WORKER_PY := $(addprefix shim/sandbox/,worker/frames.py listing.py \
               worker/supervisor.py worker/worker.py worker/zygote.py \
               worker/main.py)
GEN_SRC += $(BUILD)/gen/worker_py.c

$(BUILD)/gen/worker_py.c: $(WORKER_PY) shim/sandbox/embed.py shim/sandbox/sandbox.mk
	@mkdir -p $(dir $@)
	$(PYTHON) -I -B shim/sandbox/embed.py $@.tmp $(WORKER_PY)
	@mv $@.tmp $@

# The e2b backend's own cells (e2b.c), kept as Python files; the list cell
# runs after the one listing (listing.py).
E2B_CELLS := $(wildcard shim/sandbox/e2b/e2b_*.py)
E2B_CELL_ARGS := $(patsubst %/e2b_list.py,shim/sandbox/listing.py+%/e2b_list.py,$(E2B_CELLS))
GEN_SRC += $(BUILD)/gen/e2b_cells.c

$(BUILD)/gen/e2b_cells.c: $(E2B_CELLS) shim/sandbox/listing.py shim/sandbox/embed.py shim/sandbox/sandbox.mk
	@mkdir -p $(dir $@)
	$(PYTHON) -I -B shim/sandbox/embed.py --cells $@.tmp $(E2B_CELL_ARGS)
	@mv $@.tmp $@
