/* test_sandbox_files.c - the files of /mnt/data moved in and out of a real
 * local sandbox between executions (sandbox.h: shim_sandbox_file_get,
 * _put and _remove; local_files.c with worker.py's G, P and U frames):
 * byte-exact both ways (large files in chunks), state kept, and nothing
 * the code can make in /mnt/data (a symlink, a FIFO, a path with "..")
 * lets a read, a write or a removal reach anything outside it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "sandbox/sandbox.h"
#include "system/config.h"
#include "test_sandbox_util.h"

#include <signal.h>

static void test_put_then_code_reads_it(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;
    size_t n = 3 * 1024 * 1024 + 17, i;
    char *blob = malloc(n);
    (void)state;

    for (i = 0; i < n; i++)
        blob[i] = (char)(i * 7 + (i >> 11));
    make_cfg(&c);
    sb = open_sb(&c);
    /* before any code: the sandbox starts for it */
    assert_int_equal(shim_sandbox_file_put(sb, "in.bin", blob, n), 0);
    assert_int_equal(shim_sandbox_file_put(sb, "empty.txt", "", 0), 0);
    expect(sb, "import hashlib, os\n"
               "d = open('/mnt/data/in.bin', 'rb').read()\n"
               "print(len(d), os.path.getsize('/mnt/data/empty.txt'))\n"
               "print(sorted(f for f in os.listdir('/mnt/data')))\n",
           SHIM_EXEC_OK, "3145745 0\n['empty.txt', 'in.bin']\n"
                         "[files in /mnt/data: empty.txt, in.bin]\n");
    {
        char want[64];
        unsigned long crc = 0xffffffffUL;
        size_t k;
        int b;
        for (k = 0; k < n; k++) { /* zlib's CRC-32, bit by bit */
            crc ^= (unsigned char)blob[k];
            for (b = 0; b < 8; b++)
                crc = crc & 1 ? (crc >> 1) ^ 0xedb88320UL : crc >> 1;
        }
        snprintf(want, sizeof(want), "%lu\n", crc ^ 0xffffffffUL);
        expect(sb, "import zlib\nprint(zlib.crc32(open('/mnt/data/in.bin','rb').read()))\n",
               SHIM_EXEC_OK, want);
    }
    shim_sandbox_close(sb);
    free(blob);
}

static void test_code_writes_host_reads(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;
    char *out = NULL;
    size_t len = 0;
    (void)state;

    make_cfg(&c);
    sb = open_sb(&c);
    expect(sb, "import os\nos.makedirs('/mnt/data/sub', exist_ok=True)\n"
               "open('/mnt/data/sub/t.csv', 'w').write('a,b\\n1,2\\n')\n"
               "n = open('/mnt/data/big.bin', 'wb').write(bytes(range(256)) * 9000)\n",
           SHIM_EXEC_OK, "[files in /mnt/data: big.bin, sub/t.csv]\n");
    assert_int_equal(shim_sandbox_file_get(sb, "sub/t.csv", 1 << 20, &out, &len), 0);
    assert_int_equal(len, 8);
    assert_memory_equal(out, "a,b\n1,2\n", 8);
    free(out);
    assert_int_equal(shim_sandbox_file_get(sb, "big.bin", 4 << 20, &out, &len), 0);
    assert_int_equal(len, 256 * 9000);
    assert_int_equal((unsigned char)out[len - 1], 255);
    assert_int_equal((unsigned char)out[300], 300 - 256);
    free(out);
    assert_int_equal(shim_sandbox_file_get(sb, "big.bin", 1000, &out, &len), -EFBIG);
    assert_null(out);
    assert_int_equal(shim_sandbox_file_get(sb, "nope.txt", 1000, &out, &len), -ENOENT);
    /* the sandbox goes on as before: state kept */
    expect(sb, "x = 41\n", SHIM_EXEC_OK, "");
    expect(sb, "print(x + 1)\n", SHIM_EXEC_OK, "42\n");
    shim_sandbox_close(sb);
}

/* What the code can put in /mnt/data to redirect a read or write. */
static void test_no_way_out(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;
    char *out = NULL;
    size_t len = 0;
    (void)state;

    make_cfg(&c);
    sb = open_sb(&c);
    expect(sb, "import os\n"
               "os.symlink('/etc/passwd', '/mnt/data/link')\n"
               "os.symlink('/proc/1/environ', '/mnt/data/env')\n"
               "os.symlink('/tmp', '/mnt/data/dirlink')\n"
               "n = open('/tmp/secret', 'w').write('s')\n"
               "os.mkfifo('/mnt/data/fifo')\n"
               "os.symlink('/tmp/target', '/mnt/data/.codeshim-upload-w.txt')\n"
               "os.symlink('/tmp/target2', '/mnt/data/w2.txt')\n",
           SHIM_EXEC_OK, "");
    assert_int_equal(shim_sandbox_file_get(sb, "link", 1 << 20, &out, &len), -ENOENT);
    assert_int_equal(shim_sandbox_file_get(sb, "env", 1 << 20, &out, &len), -ENOENT);
    assert_int_equal(shim_sandbox_file_get(sb, "dirlink/secret", 1 << 20, &out, &len), -ENOENT);
    assert_int_equal(shim_sandbox_file_get(sb, "fifo", 1 << 20, &out, &len), -ENOENT);
    assert_int_equal(shim_sandbox_file_get(sb, "../tmp/secret", 1 << 20, &out, &len), -ENOENT);
    assert_int_equal(shim_sandbox_file_get(sb, "/etc/passwd", 1 << 20, &out, &len), -ENOENT);
    assert_int_equal(shim_sandbox_file_get(sb, "", 1 << 20, &out, &len), -ENOENT);
    assert_null(out);
    /* a write never follows the part file's link nor the name's */
    assert_int_equal(shim_sandbox_file_put(sb, "w.txt", "data", 4), -ENOSPC);
    assert_int_equal(shim_sandbox_file_put(sb, "w2.txt", "data2", 5), 0);
    assert_int_equal(shim_sandbox_file_put(sb, "../x", "d", 1), -EINVAL);
    assert_int_equal(shim_sandbox_file_put(sb, "a/b", "d", 1), -EINVAL);
    expect(sb, "import os\n"
               "print(os.path.exists('/tmp/target'), os.path.exists('/tmp/target2'))\n"
               "print(os.path.islink('/mnt/data/w2.txt'), open('/mnt/data/w2.txt').read())\n",
           SHIM_EXEC_OK, "False False\nFalse data2\n[files in /mnt/data: w2.txt]\n");
    shim_sandbox_close(sb);
}

/* A removal takes one regular file of /mnt/data, never what a symlink
 * (of the name, or of a directory on its way) points at. */
static void test_remove(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;
    (void)state;

    make_cfg(&c);
    sb = open_sb(&c);
    assert_int_equal(shim_sandbox_file_remove(sb, "none.txt"), -ENOENT); /* starts it */
    expect(sb, "import os\nos.makedirs('/mnt/data/sub')\nos.makedirs('/tmp/out')\n"
               "for p in ('/mnt/data/a.txt', '/mnt/data/sub/b.txt', '/tmp/out/c.txt',"
               " '/tmp/t.txt'):\n"
               "    n = open(p, 'w').write('x')\n"
               "os.symlink('/tmp/out', '/mnt/data/dirlink')\n"
               "os.symlink('/tmp/t.txt', '/mnt/data/link.txt')\n"
               "os.mkfifo('/mnt/data/fifo')\n",
           SHIM_EXEC_OK, "[files in /mnt/data: a.txt, sub/b.txt]\n");
    assert_int_equal(shim_sandbox_file_remove(sb, "a.txt"), 0);
    assert_int_equal(shim_sandbox_file_remove(sb, "a.txt"), -ENOENT);
    assert_int_equal(shim_sandbox_file_remove(sb, "sub/b.txt"), 0);
    assert_int_equal(shim_sandbox_file_remove(sb, "dirlink/c.txt"), -ENOENT);
    assert_int_equal(shim_sandbox_file_remove(sb, "link.txt"), -ENOENT);
    assert_int_equal(shim_sandbox_file_remove(sb, "fifo"), -ENOENT);
    assert_int_equal(shim_sandbox_file_remove(sb, "sub"), -ENOENT);
    assert_int_equal(shim_sandbox_file_remove(sb, "../tmp/t.txt"), -ENOENT);
    assert_int_equal(shim_sandbox_file_remove(sb, "sub/../../tmp/t.txt"), -ENOENT);
    assert_int_equal(shim_sandbox_file_remove(sb, ""), -EINVAL);
    expect(sb, "import os\n"
               "print(sorted(os.listdir('/mnt/data')), sorted(os.listdir('/tmp/out')),"
               " os.path.exists('/tmp/t.txt'), os.path.islink('/mnt/data/link.txt'))\n",
           SHIM_EXEC_OK, "['dirlink', 'fifo', 'link.txt', 'sub'] ['c.txt'] True True\n");
    shim_sandbox_close(sb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_then_code_reads_it),
        cmocka_unit_test(test_code_writes_host_reads),
        cmocka_unit_test(test_no_way_out),
        cmocka_unit_test(test_remove),
    };

    signal(SIGPIPE, SIG_DFL);
    return cmocka_run_group_tests(tests, setup, teardown);
}
