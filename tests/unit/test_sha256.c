/* Unit tests: sha256.c (the wrapper over nettle's SHA-256): the NIST
 * example messages (FIPS 180-4 / CSRC "SHA256.pdf" and "SHA2_Additional"),
 * incremental updates across block boundaries, and the record/replay key
 * that recordings made before keep matching. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/sha256.h"
#include "session/session.h"
#include "store/cassette.h"
#include "store/store.h"

static void hex_of(const unsigned char d[32], char out[65])
{
    int i;

    for (i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void nist_vectors(void **state)
{
    static const struct {
        const char *msg, *hex;
    } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        /* 448 bits: the padding needs a second block */
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        /* 896 bits */
        {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqr"
         "lmnopqrsmnopqrstnopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
    };
    char out[65];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        shim_sha256_hex(v[i].msg, strlen(v[i].msg), out);
        assert_string_equal(out, v[i].hex);
    }
}

/* NIST: one million 'a', fed in pieces of an odd size. */
static void million_a(void **state)
{
    char chunk[997], out[65];
    unsigned char d[32];
    struct shim_sha256 s;
    size_t left = 1000000;

    (void)state;
    memset(chunk, 'a', sizeof(chunk));
    shim_sha256_init(&s);
    while (left) {
        size_t k = left < sizeof(chunk) ? left : sizeof(chunk);
        shim_sha256_update(&s, chunk, k);
        left -= k;
    }
    shim_sha256_final(&s, d);
    hex_of(d, out);
    assert_string_equal(out, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

/* Every split of messages around the 55/56/64-byte padding boundaries
 * gives the one-shot digest; empty updates change nothing. */
static void incremental_splits(void **state)
{
    unsigned char msg[130], d[32];
    char whole[65], parts[65];
    size_t n, cut;

    (void)state;
    for (n = 0; n < sizeof(msg); n++)
        msg[n] = (unsigned char)(n * 37 + 11);
    for (n = 50; n <= sizeof(msg); n += 5) {
        shim_sha256_hex(msg, n, whole);
        for (cut = 0; cut <= n; cut++) {
            struct shim_sha256 s;
            shim_sha256_init(&s);
            shim_sha256_update(&s, msg, cut);
            shim_sha256_update(&s, NULL, 0);
            shim_sha256_update(&s, msg + cut, n - cut);
            shim_sha256_final(&s, d);
            hex_of(d, parts);
            assert_string_equal(parts, whole);
        }
    }
}

/* The key of "POST /v1/responses\n" + body, as hashlib computes it: files
 * recorded with the earlier implementation still replay. Host and query
 * are not part of it. */
static void cassette_key_unchanged(void **state)
{
    static const char body[] = "{\"model\":\"m\"}";
    char key[65];
    int occ = 0;

    (void)state;
    shim_cassette_key("https://api.example/v1/responses?x=1", body, strlen(body), key, &occ);
    assert_string_equal(key, "e3c77768675a9ee6d1cab463604c661ddf25c507039639eacc9797736a3b298e");
    assert_int_equal(occ, 1);
}

/* The one tagged hash the runtime directory's names come from, pinned
 * with Python's hashlib so names made before keep matching:
 * hashlib.sha256(b"codeshim-chain-v1\0resp_1\0").hexdigest()[:32] */
static void tagged_names(void **state)
{
    const char *one[] = {"resp_1"}, *two[] = {"salt", "nonce"};
    char out[65], via[65];
    (void)state;

    shim_sha256_tagged_hex("codeshim-chain-v1", one, 1, 16, out);
    assert_string_equal(out, "ce3f77fcf27856b15828f5b929c4bc65");
    shim_store_hash("codeshim-chain-v1", "resp_1", NULL, via);
    assert_string_equal(via, out);
    /* identity, settings, session id */
    shim_session_name("id", "s1", "set", out);
    assert_string_equal(out, "041116bd3bfe11960971c8b213d5513a");
    shim_sha256_tagged_hex("codeshim-e2b-cntr-v1", two, 2, 24, out);
    assert_string_equal(out, "a972c9fde29a35a11ac089a0788e48fe277538addb62f7b8");
    /* no parts, the whole digest; nbytes past 32 is 32 */
    shim_sha256_tagged_hex("tag", NULL, 0, 40, out);
    assert_string_equal(out, "9df15185a6a9666fe0f652a058f3594f17cfbcf49a52981c95cab98eba8907be");
    /* the parts' boundaries count: ("ab", "") is not ("a", "b") */
    shim_sha256_tagged_hex("t", (const char *[]){"ab", ""}, 2, 16, out);
    shim_sha256_tagged_hex("t", (const char *[]){"a", "b"}, 2, 16, via);
    assert_string_not_equal(out, via);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(nist_vectors),
        cmocka_unit_test(million_a),
        cmocka_unit_test(incremental_splits),
        cmocka_unit_test(cassette_key_unchanged),
        cmocka_unit_test(tagged_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
