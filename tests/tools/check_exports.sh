#!/bin/sh
# Fails unless the library exports exactly the interposed symbols: every
# other export would interpose on the host program (DESIGN: exports).
set -eu
lib=${1:-build/libcodeshim.so}
expected="curl_easy_cleanup curl_easy_duphandle curl_easy_getinfo curl_easy_init curl_easy_pause curl_easy_perform curl_easy_reset curl_easy_setopt curl_multi_add_handle curl_multi_assign curl_multi_cleanup curl_multi_fdset curl_multi_info_read curl_multi_perform curl_multi_poll curl_multi_remove_handle curl_multi_setopt curl_multi_socket curl_multi_socket_action curl_multi_socket_all curl_multi_timeout curl_multi_wait dlopen"
got=$(nm -D --defined-only "$lib" | awk '$2 != "A" {print $3}' | sed 's/@.*//' | sort -u | tr '\n' ' ' | sed 's/ $//')
if [ "$got" != "$expected" ]; then
    echo "exports: FAIL"; echo "  expected: $expected"; echo "  got:      $got"; exit 1
fi
# each curl wrapper must exist once per libcurl build
for v in CURL_OPENSSL_4 CURL_GNUTLS_3 CURL_NSS_3; do
    n=$(objdump -T "$lib" | grep -cE "[ (]$v\)? +curl_easy_" || true)
    [ "$n" -ge 7 ] || { echo "exports: FAIL: $n symbols versioned $v"; exit 1; }
    n=$(objdump -T "$lib" | grep -cE "[ (]$v\)? +curl_multi_" || true)
    [ "$n" -ge 14 ] || { echo "exports: FAIL: $n multi symbols versioned $v"; exit 1; }
done
echo "exports: ok ($got)"
