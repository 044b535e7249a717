#!/bin/sh
# bench/cli_passthrough.sh URL LIB BODY - row 1c of make bench: what
# codeshim costs the curl CLI, which sets some 85 options per transfer
# (26 of them ones codeshim records). 300 plain POSTs of BODY to
# URL/responses made by one curl process (a config file of 300 transfers
# joined by "next": each transfer gets its own handle and sets every
# option again, as 300 requests from the CLI do), counted by callgrind
# with and without LIB preloaded; PAIRS pairs (default five: libcurl's
# own perform varies by some 0.1 % from run to run, as much as codeshim
# gains from one change), median and range of the ratios, and the
# instructions spent in LIB itself. Measured, never asserted.
set -eu
url=$1 lib=$2 body=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for i in $(seq 300); do
    printf 'url = "%s/responses"\ndata-binary = "@%s"\nheader = "Content-Type: application/json"\noutput = "/dev/null"\nsilent\n' \
        "$url" "$body"
    [ "$i" = 300 ] || echo next
done > "$tmp/cli.cfg"
# "<total> <instructions in libcodeshim.so> <inclusive count of libcurl's
# curl_easy_perform>" of one run
icount() {
    env ${1:+LD_PRELOAD="$1"} valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" \
        curl -K "$tmp/cli.cfg" >/dev/null 2>&1
    s=$(callgrind_annotate --threshold=100 "$tmp/cg.out" 2>/dev/null | tr -d , | awk '
        /libcodeshim\.so\]$/ { s += $1 } END { print s + 0 }')
    callgrind_annotate --inclusive=yes "$tmp/cg.out" 2>/dev/null | tr -d , | awk -v s="$s" '
        / PROGRAM TOTALS/ { t = $1 }
        /\?\?\?:curl_easy_perform \[.*libcurl/ && !p { p = $1 }
        END { print t, s, p }'
}
: > "$tmp/ir"
for _ in $(seq "${PAIRS:-5}"); do
    echo "$(icount "") $(icount "$lib")" >> "$tmp/ir" # base 0 bperf preloaded own perf
done
awk '{ r[NR] = $4 / $1; o[NR] = $5; d[NR] = $4 - $1; q[NR] = ($4 - $6 + $3) / $1 }
    function med(a,  i, j, t, n) { n = NR; for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
        if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t } return a[int((n + 1) / 2)] }
    END { lo = r[1]; hi = r[1]; for (i = 2; i <= NR; i++) { if (r[i] < lo) lo = r[i]; if (r[i] > hi) hi = r[i] }
        m = med(r); dm = med(d); om = med(o); qm = med(q)
        printf "%-60sratio %.4f (%.4f-%.4f) (goal <= 1.02): +%d instructions, %d per request, %d of them in libcodeshim.so\n",
            "1c. curl CLI, 300 plain POSTs, preloaded vs not (callgrind)", m, lo, hi, dm, dm / 300, om / 300
        printf "%-60sratio %.4f\n", "1c. the same, libcurl'"'"'s own perform taken as equal", qm }' "$tmp/ir"
