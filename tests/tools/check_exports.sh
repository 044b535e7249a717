#!/bin/sh
# check_exports.sh LIB [SYMBOLS_H]: fails unless LIB exports exactly the
# interposed functions listed in SYMBOLS_H (shim/system/symbols.h, read through
# the C preprocessor, $CC or cc) plus dlopen, each curl one once per
# libcurl build version: every other export would interpose on the host
# program.
set -eu
lib=${1:-build/libcodeshim.so}
list=${2:-shim/system/symbols.h}
names=$(printf '#include "%s"\n#define NAME(name, field, ret, params) name\nSHIM_EASY_SYMBOLS(NAME) SHIM_MULTI_SYMBOLS(NAME)\n' \
            "$(cd "$(dirname "$list")" && pwd)/$(basename "$list")" |
        ${CC:-cc} -E -P -x c - | tr ' ' '\n' | grep . | sort -u)
[ -n "$names" ] || { echo "exports: FAIL: no symbols in $list"; exit 1; }
expected=$(printf '%s\ndlopen\n' "$names" | sort -u | tr '\n' ' ' | sed 's/ $//')
got=$(nm -D --defined-only "$lib" | awk '$2 != "A" {print $3}' | sed 's/@.*//' | sort -u | tr '\n' ' ' | sed 's/ $//')
if [ "$got" != "$expected" ]; then
    echo "exports: FAIL"; echo "  expected: $expected"; echo "  got:      $got"; exit 1
fi
# each curl wrapper exists once per libcurl build, under its version
table=$(objdump -T "$lib")
for v in CURL_OPENSSL_4 CURL_GNUTLS_3 CURL_NSS_3; do
    for n in $names; do
        c=$(printf '%s\n' "$table" | grep -cE "[ (]$v\)? +$n\$" || true)
        [ "$c" = 1 ] || { echo "exports: FAIL: $n versioned $v $c times"; exit 1; }
    done
done
echo "exports: ok ($got)"
