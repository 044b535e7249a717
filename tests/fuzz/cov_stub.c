/* cov_stub.c - the coverage callback for sanitizer builds that are not the
 * fuzzer: build-asan/ objects are compiled with -fsanitize-coverage=trace-pc
 * (tests/fuzz/fuzz.mk) and the unit tests link this no-op instead of the
 * fuzzer's edge recorder. */
void __sanitizer_cov_trace_pc(void);

void __sanitizer_cov_trace_pc(void)
{
}
