#!/bin/sh
# make bench: what codeshim costs. Starts the fake upstream on loopback and
# times the same program (bench_http, one handle, N requests) in four modes.
# Prints median and interquartile range per request, in milliseconds.
set -eu
cd "$(dirname "$0")/.."
N=${N:-200}
LIB=$PWD/build/libcodeshim.so
B=build/bench
tmp=$(mktemp -d)
trap 'kill $fake_pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
/usr/bin/python3 tests/fakes/fake_openai.py --port-file "$tmp/port" --log /dev/null &
fake_pid=$!
for _ in $(seq 50); do [ -s "$tmp/port" ] && break; sleep 0.1; done
url="http://127.0.0.1:$(cat "$tmp/port")/v1"
printf '{"model":"m","input":"hello","tools":[{"type":"function","name":"f","parameters":{}}]}' > "$tmp/plain.json"
printf '{"model":"m","input":"run\\n```python\\nprint(1)\\n```","tools":[{"type":"code_interpreter","container":{"type":"auto"}}]}' > "$tmp/ci.json"
row() { printf '%-60s' "$1"; shift; out=$("$@"); set -- $out; printf 'median %8.3f ms   IQR %.3f-%.3f   min %.3f  max %.3f\n' "$1" "$2" "$3" "$4" "$5"; }
echo "codeshim benchmarks, N=$N requests each ($(nproc) cores)"
row "plain POST, no codeshim" $B/bench_http "$url/responses" "$N" "$tmp/plain.json"
row "plain POST, codeshim preloaded (pass-through)" env LD_PRELOAD="$LIB" $B/bench_http "$url/responses" "$N" "$tmp/plain.json"
row "code_interpreter request, fake upstream (2 calls, 1 exec)" env LD_PRELOAD="$LIB" $B/bench_http "$url/responses" "$((N / 4))" "$tmp/ci.json"
row "code_interpreter request, offline model (1 exec)" env CODESHIM_OFFLINE=1 LD_PRELOAD="$LIB" $B/bench_http "$url/responses" "$((N / 4))" "$tmp/ci.json"
# Live streaming (issue 14): the program's first text delta against the
# upstream's, and the spread of the deltas (bench/bench_stream.py).
/usr/bin/python3 bench/bench_stream.py "$LIB" "${STREAM_RUNS:-10}"
# Pass-through cost as instructions (wall-clock medians cannot see 10 %):
# the same 300 plain POSTs in one process, with and without the library,
# counted by callgrind, and their ratio. Skipped without valgrind.
if command -v valgrind >/dev/null 2>&1; then
    # valgrind itself is static: LD_PRELOAD reaches only the program
    icount() { env ${1:+LD_PRELOAD="$1"} valgrind --tool=callgrind --callgrind-out-file=/dev/null \
                   $B/bench_http "$url/responses" 300 "$tmp/plain.json" 2>&1 >/dev/null |
               sed -n 's/.*Collected : *\([0-9]*\).*/\1/p' | tail -n 1; }
    base=$(icount "")
    with=$(icount "$LIB")
    awk -v b="$base" -v w="$with" 'BEGIN { printf "%-60sinstructions %d vs %d: ratio %.3f (goal <= 1.02)\n", \
        "plain POSTs x300, codeshim preloaded vs not (callgrind)", w, b, w / b }'
fi
