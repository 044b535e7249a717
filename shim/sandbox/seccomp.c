/* seccomp.c - the system-call filter of the local sandbox, built with
 * libseccomp and handed to bubblewrap (--seccomp FD) as classic BPF.
 *
 * Allow by default, deny the kernel surface a Python notebook never needs
 * and that sandbox escapes are made of: tracing other processes, new
 * namespaces (a second layer behind bwrap --disable-userns), mounts, BPF,
 * keyrings, io_uring, perf, modules, kexec, handles to host files, time and
 * host settings. Sockets other than AF_UNIX fail (a second layer behind the
 * empty network namespace). A system call of another ABI (i386 int 0x80,
 * x32) kills the process: the filter only knows the native numbers.
 *
 * shim_sandbox_seccomp_fd() returns a fresh memfd holding the program; the
 * program itself is built once per process. */
#include "sandbox_int.h"

#include <errno.h>
#include <linux/sched.h>
#include <pthread.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

/* Denied with EPERM. Names the running architecture lacks are skipped. */
static const char *const denied[] = {
    /* other processes' memory and descriptors */
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    /* namespaces and mounts */
    "unshare", "setns", "mount", "umount", "umount2", "pivot_root", "chroot",
    "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick",
    "mount_setattr",
    /* kernel attack surface */
    "bpf", "perf_event_open", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "userfaultfd", "keyctl", "add_key", "request_key",
    "personality", "modify_ldt", "iopl", "ioperm", "vm86", "vm86old",
    "lookup_dcookie", "fanotify_init", "open_by_handle_at",
    "name_to_handle_at",
    /* the host itself */
    "kexec_load", "kexec_file_load", "init_module", "finit_module",
    "delete_module", "create_module", "get_kernel_syms", "query_module",
    "reboot", "swapon", "swapoff", "acct", "syslog", "quotactl",
    "quotactl_fd", "nfsservctl", "vhangup", "uselib", "ustat", "sysfs",
    "_sysctl", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
    "stime", "sethostname", "setdomainname", "migrate_pages", "move_pages",
    "mbind",
};

/* clone() flags that make namespaces (clone3 hides its flags in memory,
 * so it fails with ENOSYS and the C library falls back to clone). */
static const unsigned long ns_flags[] = {
    CLONE_NEWNS,  CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
    CLONE_NEWUSER, CLONE_NEWPID,   CLONE_NEWNET,
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static unsigned char *prog;
static size_t prog_len;
static int prog_err;

static int add(scmp_filter_ctx ctx, uint32_t action, const char *name,
               unsigned n, const struct scmp_arg_cmp *cmp)
{
    int nr = seccomp_syscall_resolve_name(name);

    if (nr == __NR_SCMP_ERROR)
        return 0; /* not a system call here */
    return seccomp_rule_add_array(ctx, action, nr, n, cmp);
}

static int build(scmp_filter_ctx ctx)
{
    const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
    struct scmp_arg_cmp c;
    size_t i;
    int rc;

    rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    if (rc)
        return rc;
    for (i = 0; i < sizeof(denied) / sizeof(denied[0]); i++)
        if ((rc = add(ctx, eperm, denied[i], 0, NULL)) != 0)
            return rc;
    for (i = 0; i < sizeof(ns_flags) / sizeof(ns_flags[0]); i++) {
        c = SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]);
        if ((rc = add(ctx, eperm, "clone", 1, &c)) != 0)
            return rc;
    }
    if ((rc = add(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, NULL)) != 0)
        return rc;
    /* only Unix sockets */
    c = SCMP_A0(SCMP_CMP_NE, AF_UNIX);
    if ((rc = add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), "socket", 1, &c)) != 0 ||
        (rc = add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), "socketpair", 1, &c)) != 0)
        return rc;
    /* no typing into a terminal (bwrap --new-session is the first layer) */
    c = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI);
    if ((rc = add(ctx, eperm, "ioctl", 1, &c)) != 0)
        return rc;
    c = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCLINUX);
    return add(ctx, eperm, "ioctl", 1, &c);
}

static void make_prog(void)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    int fd = -1, rc;
    off_t end;

    if (!ctx) {
        prog_err = -ENOMEM;
        return;
    }
    rc = build(ctx);
    if (rc == 0) {
        fd = memfd_create("codeshim-seccomp", MFD_CLOEXEC);
        rc = fd < 0 ? -errno : seccomp_export_bpf(ctx, fd);
    }
    if (rc == 0 && (end = lseek(fd, 0, SEEK_END)) > 0 &&
        (prog = malloc((size_t)end)) != NULL &&
        pread(fd, prog, (size_t)end, 0) == (ssize_t)end)
        prog_len = (size_t)end;
    else if (rc == 0)
        rc = -EIO;
    if (rc) {
        free(prog);
        prog = NULL;
        prog_err = rc < 0 ? rc : -EINVAL;
    }
    if (fd >= 0)
        close(fd);
    seccomp_release(ctx);
}

int shim_sandbox_seccomp_fd(void)
{
    size_t off = 0;
    int fd;

    pthread_once(&once, make_prog);
    if (!prog)
        return prog_err ? prog_err : -EINVAL;
    fd = memfd_create("codeshim-seccomp", MFD_CLOEXEC);
    if (fd < 0)
        return -errno;
    while (off < prog_len) {
        ssize_t w = write(fd, prog + off, prog_len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            close(fd);
            return -EIO;
        }
        off += (size_t)w;
    }
    if (lseek(fd, 0, SEEK_SET) != 0) {
        close(fd);
        return -EIO;
    }
    return fd;
}
