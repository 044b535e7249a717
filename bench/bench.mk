# bench.mk - the sandbox benchmark (owned by the sandbox layer); included by
# the top Makefile. `make bench-sandbox [N=30]` prints median and spread of
# a bare Python start, a cold sandbox (open + first execution), a warm
# execution, the execution after a timeout, and close. Measured, never
# asserted.
$(BUILD)/bench/sandbox_bench: bench/sandbox_bench.c $(BUILD)/libcodeshim_core.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(DEPFLAGS) $< -o $@ $(BUILD)/libcodeshim_core.a $(LIBS)

.PHONY: bench-sandbox
bench-sandbox: $(BUILD)/bench/sandbox_bench $(BUILD)/bench/fork_bench
	@$(BUILD)/bench/sandbox_bench $(or $(N),30)
	@$(BUILD)/bench/fork_bench $(or $(N),20)

# offline_cpu: the offline model's own share of a loop step (bench/run.sh
# subtracts it from codeshim's CPU per step); built from the engines.
$(BUILD)/bench/offline_cpu: bench/offline_cpu.c $(BUILD)/libcodeshim_core.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(DEPFLAGS) $< -o $@ $(BUILD)/libcodeshim_core.a $(LIBS)

# The fork server's rows (bench/fork_bench.c): ratios against a bare and a
# data-importing Python measured in the same run, each beside its goal.
$(BUILD)/bench/fork_bench: bench/fork_bench.c $(BUILD)/libcodeshim_core.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(DEPFLAGS) $< -o $@ $(BUILD)/libcodeshim_core.a $(LIBS)

.PHONY: bench-fork
bench-fork: $(BUILD)/bench/fork_bench
	@$(BUILD)/bench/fork_bench $(or $(N),20)
