"""What curl_easy_getinfo says of an intercepted transfer, as a program
reads it: the curl CLI's -w variables under LD_PRELOAD against the fake
upstream, compared with what libcurl says of the same request when it is
not intercepted."""

import json

from conftest import run
from test_containers_api import KEY_A, create
from test_core_responses import blocks, req

CURL = "/usr/bin/curl"


def written(args, fmt, env=None):
    rc, out, err = run([CURL, "-sS", "-o", "/dev/null", "-w", fmt,
                        "-H", "Authorization: Bearer " + KEY_A] + list(args), env=env)
    assert rc == 0, err
    return out.decode()


def test_effective_method_is_the_requests_own(fake):
    cid = create(fake.url, "m")["id"]
    assert written([fake.url + "/containers/" + cid], "%{method}") == "GET"
    assert written(["-X", "DELETE", fake.url + "/containers/" + cid], "%{method}") == "DELETE"
    assert written(["-H", "Content-Type: application/json", "-d",
                    json.dumps(req(blocks("print(1)"))), fake.url + "/responses"],
                   "%{method}") == "POST"


C_PROG = r"""
#include <curl/curl.h>
#include <stdio.h>
static size_t drop(char *p, size_t s, size_t n, void *u) { (void)p; (void)u; return s * n; }
int main(int argc, char **argv)
{
    CURL *h = curl_easy_init();
    curl_off_t len = -2, got = -2;
    struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(h, CURLOPT_URL, argv[1]);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, argv[2]);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, drop);
    if (curl_easy_perform(h) != CURLE_OK)
        return 1;
    curl_easy_getinfo(h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &len);
    curl_easy_getinfo(h, CURLINFO_SIZE_DOWNLOAD_T, &got);
    printf("%lld %lld\n", (long long)len, (long long)got);
    curl_easy_cleanup(h);
    curl_slist_free_all(hd);
    return argc > 3;
}
"""


def test_content_length_of_a_stream_is_unknown(fake, tmp_path):
    src = tmp_path / "len.c"
    src.write_text(C_PROG)
    exe = tmp_path / "len"
    rc, out, err = run(["cc", "-o", exe, src, "-lcurl"], preload=False)
    assert rc == 0, err
    stream = json.dumps(req(blocks("print(1)"), stream=True))
    whole = json.dumps(req(blocks("print(1)")))
    rc, out, err = run([exe, fake.url + "/responses", stream])
    assert rc == 0, err
    length, size = (int(x) for x in out.split())
    assert length == -1 and size > 0  # as libcurl says of a stream without a length
    rc, out, err = run([exe, fake.url + "/responses", whole])
    length, size = (int(x) for x in out.split())
    assert length == size > 0
