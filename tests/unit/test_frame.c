/* test_frame.c - length-prefixed frames (frame.c) on a socket pair: a
 * frame sent whole is received whole; a length of 0 or over the reader's
 * maximum is -EPROTO before any payload is read; a peer that closes is
 * -ECONNRESET, one that stays silent -ETIMEDOUT at the deadline; and the
 * wait between frames. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/frame.h"

static void pair(int sv[2])
{
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
}

/* head and body arrive as one payload, in order. */
static void a_frame_arrives_whole(void **state)
{
    struct shim_buf b;
    int sv[2];

    (void)state;
    pair(sv);
    assert_int_equal(shim_frame_send(sv[1], "head:", 5, "body", 4, shim_clock_ms() + 5000), 0);
    assert_int_equal(shim_frame_send(sv[1], "", 0, "x", 1, shim_clock_ms() + 5000), 0);
    assert_int_equal(shim_frame_recv(sv[0], &b, 64, shim_clock_ms() + 5000), 0);
    assert_int_equal(b.len, 9);
    assert_memory_equal(b.data, "head:body", 9);
    shim_buf_free(&b);
    assert_int_equal(shim_frame_recv(sv[0], &b, 64, shim_clock_ms() + 5000), 0);
    assert_string_equal(b.data, "x");
    shim_buf_free(&b);
    close(sv[0]);
    close(sv[1]);
}

/* An empty frame, or one announced larger than the reader takes, is
 * refused from its length alone. */
static void bad_lengths_are_refused(void **state)
{
    unsigned char len[4];
    struct shim_buf b;
    int sv[2];

    (void)state;
    pair(sv);
    shim_frame_put32(len, 0);
    assert_int_equal(write(sv[1], len, 4), 4);
    assert_int_equal(shim_frame_recv(sv[0], &b, 64, shim_clock_ms() + 5000), -EPROTO);
    shim_buf_free(&b);
    shim_frame_put32(len, 65); /* and no payload follows: never waited for */
    assert_int_equal(write(sv[1], len, 4), 4);
    assert_int_equal(shim_frame_recv(sv[0], &b, 64, shim_clock_ms() + 5000), -EPROTO);
    assert_int_equal(b.len, 0);
    shim_buf_free(&b);
    assert_int_equal(shim_frame_get32((const unsigned char *)"\x01\x02\x03\x04"), 0x01020304);
    close(sv[0]);
    close(sv[1]);
}

/* A peer that closes mid-frame, or says nothing until the deadline. */
static void a_gone_or_silent_peer_ends_the_read(void **state)
{
    unsigned char len[4];
    struct shim_buf b;
    int sv[2];

    (void)state;
    pair(sv);
    assert_int_equal(shim_frame_recv(sv[0], &b, 64, shim_clock_ms() + 30), -ETIMEDOUT);
    shim_buf_free(&b);
    shim_frame_put32(len, 10);
    assert_int_equal(write(sv[1], len, 4), 4);
    assert_int_equal(write(sv[1], "abc", 3), 3);
    close(sv[1]);
    assert_int_equal(shim_frame_recv(sv[0], &b, 64, shim_clock_ms() + 5000), -ECONNRESET);
    shim_buf_free(&b);
    /* and writing to a peer that is gone is -EPIPE, not a SIGPIPE */
    assert_int_equal(shim_frame_send(sv[0], "x", 1, NULL, 0, shim_clock_ms() + 5000), -EPIPE);
    close(sv[0]);
}

static int stop_at(void *ctx)
{
    int *n = ctx;
    return --*n <= 0;
}

/* shim_frame_wait: readable at once; stopped on the stop's say; the
 * deadline; no stop at all. */
static void wait_stops_reads_and_times_out(void **state)
{
    int sv[2], n = 3;
    int64_t t0;

    (void)state;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    assert_int_equal(shim_frame_wait(sv[0], shim_clock_ms() + 5000, 10, stop_at, &n),
                     -ECANCELED);
    assert_int_equal(n, 0); /* asked three times */
    n = 1000;
    t0 = shim_clock_ms();
    assert_int_equal(shim_frame_wait(sv[0], t0 + 50, 10, stop_at, &n), 0); /* deadline */
    assert_true(shim_clock_ms() - t0 >= 50);
    assert_int_equal(shim_frame_wait(sv[0], t0 + 60000, 10, NULL, NULL), 0);
    assert_int_equal(write(sv[1], "x", 1), 1);
    n = 1;
    assert_int_equal(shim_frame_wait(sv[0], shim_clock_ms() + 5000, 10, stop_at, &n), 0);
    assert_int_equal(n, 1); /* readable: stop never asked */
    close(sv[0]);
    close(sv[1]);
}

/* ---- one byte with a descriptor (the sandbox host's lending) ---- */

static void a_byte_carries_a_descriptor(void **state)
{
    int sv[2], pv[2], fds[2], n = -1, pid = 0;
    char b = 0, got[4] = "";

    (void)state;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    assert_int_equal(pipe(pv), 0);
    assert_int_equal(shim_frame_send_byte(sv[0], 'S', pv[1]), 0);
    close(pv[1]);
    assert_int_equal(shim_frame_recv_byte(sv[1], &b, fds, 1, &n, &pid, 1000), 0);
    assert_int_equal(b, 'S');
    assert_int_equal(n, 1);
    assert_int_equal(pid, 0); /* no SO_PASSCRED: no credentials */
    /* the descriptor received is the pipe's write end: it reaches pv[0] */
    assert_int_equal(write(fds[0], "ok", 2), 2);
    close(fds[0]);
    assert_int_equal(read(pv[0], got, sizeof(got) - 1), 2);
    assert_string_equal(got, "ok");
    /* none sent: none received */
    assert_int_equal(shim_frame_send_byte(sv[0], 'N', -1), 0);
    assert_int_equal(shim_frame_recv_byte(sv[1], &b, fds, 1, &n, NULL, 1000), 0);
    assert_int_equal(b, 'N');
    assert_int_equal(n, 0);
    /* nothing within the time: -ETIMEDOUT; the peer gone: -ECONNRESET */
    assert_int_equal(shim_frame_recv_byte(sv[1], &b, fds, 1, &n, NULL, 20), -ETIMEDOUT);
    close(sv[0]);
    assert_int_equal(shim_frame_recv_byte(sv[1], &b, fds, 1, &n, NULL, 1000), -ECONNRESET);
    close(sv[1]);
    close(pv[0]);
}

static void a_descriptor_beyond_max_is_closed(void **state)
{
    int sv[2], pv[2], n = -1;
    char b = 0, c;

    (void)state;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    assert_int_equal(pipe(pv), 0);
    assert_int_equal(shim_frame_send_byte(sv[0], 'S', pv[1]), 0);
    close(pv[1]);
    /* room for none: the one that came is closed, not leaked */
    assert_int_equal(shim_frame_recv_byte(sv[1], &b, NULL, 0, &n, NULL, 1000), 0);
    assert_int_equal(n, 0);
    assert_int_equal(read(pv[0], &c, 1), 0); /* every write end is closed */
    close(pv[0]);
    close(sv[0]);
    close(sv[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_frame_arrives_whole),
        cmocka_unit_test(bad_lengths_are_refused),
        cmocka_unit_test(a_gone_or_silent_peer_ends_the_read),
        cmocka_unit_test(wait_stops_reads_and_times_out),
        cmocka_unit_test(a_byte_carries_a_descriptor),
        cmocka_unit_test(a_descriptor_beyond_max_is_closed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
