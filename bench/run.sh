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
