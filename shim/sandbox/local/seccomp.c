/* seccomp.c - the system-call filter of the local sandbox, built with
 * libseccomp and handed to bubblewrap (--seccomp FD) as classic BPF.
 *
 * Allow by default, deny the kernel surface a Python notebook never needs
 * and that sandbox escapes are made of: tracing other processes, new
 * namespaces (a second layer behind bwrap --disable-userns), mounts, BPF,
 * keyrings, io_uring, perf, modules, kexec, handles to host files, time and
 * host settings. Sockets other than AF_UNIX fail (a second layer behind the
 * empty network namespace).
 *
 * PID 1 (the supervisor, worker.py) is out of the code's reach: no signal,
 * rlimit, priority, scheduler, I/O priority or signal-owner operation may
 * name pid 1, its process group or the whole user (the kernel already
 * spares PID 1 unhandled signals, ptrace needs what it is denied here and
 * the supervisor is not dumpable). Arguments are compared on their low 32
 * bits, as the kernel reads a pid_t; pid 0 (self) passes.
 *
 * A deny list lets through whatever the kernel added after it was written,
 * so a hand-written prelude runs first: a system call numbered above the
 * highest one this filter was reviewed for (NR_REVIEWED, and known to the
 * libseccomp it is built with) fails with ENOSYS, as on an older kernel,
 * and one of another ABI (i386 int 0x80, x32) kills the process. Only
 * x86_64 and aarch64 are known; elsewhere no filter is built, so no
 * sandbox starts.
 *
 * shim_sandbox_seccomp_fd() returns a fresh memfd holding the program; the
 * program itself is built once per process. */
#include "sandbox/sandbox_int.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <seccomp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#if defined(__x86_64__) && !defined(__ILP32__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#define X32_BIT 0x40000000u
#elif defined(__aarch64__) && !defined(__ILP32__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#define X32_BIT 0u /* no such ABI: the test below never matches */
#endif

/* The highest system call number (futex_requeue, Linux 6.7; the same on
 * both architectures since 424) whose kernel code this filter was
 * reviewed against. Raise it only after reviewing what it lets in. */
#define NR_REVIEWED 456

#define LOW32 0xffffffffu
#define IOPRIO_WHO_USER 3 /* <linux/ioprio.h>, not in every kernel's headers */

/* Denied with EPERM. Names the running architecture lacks are skipped. */
static const char *const denied[] = {
    /* other processes' memory, descriptors and signals (a pidfd may be
     * an open /proc/1: its target cannot be checked) */
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    "pidfd_send_signal", "process_madvise", "process_mrelease",
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
    /* the page cache of files the host shares (/usr): a side channel,
     * which mincore closes by only answering for writable files */
    "cachestat",
};

/* System calls that act on another process (or thread, or process group)
 * named by argument arg: refused when it names pid 1. */
static const struct {
    const char *name;
    unsigned arg;
} pid_args[] = {
    {"kill", 0},          {"tkill", 0},
    {"tgkill", 0},        {"tgkill", 1},
    {"rt_sigqueueinfo", 0}, {"rt_tgsigqueueinfo", 0},
    {"rt_tgsigqueueinfo", 1}, {"pidfd_open", 0},
    {"prlimit64", 0},     {"sched_setscheduler", 0},
    {"sched_setparam", 0}, {"sched_setattr", 0},
    {"sched_setaffinity", 0}, {"setpriority", 1},
    {"ioprio_set", 1},    {"get_robust_list", 0},
    {"setpgid", 1}, /* joining PID 1's group would make kill(0) reach it */
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

/* Adds the rule "name with argument arg's low 32 bits equal to v". */
static int add_arg(scmp_filter_ctx ctx, const char *name, unsigned arg,
                   uint32_t v)
{
    struct scmp_arg_cmp c = {.arg = arg, .op = SCMP_CMP_MASKED_EQ,
                             .datum_a = LOW32, .datum_b = v};

    return add(ctx, SCMP_ACT_ERRNO(EPERM), name, 1, &c);
}

/* PID 1 out of reach: see the top of this file. */
static int build_pid1(scmp_filter_ctx ctx)
{
    const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
    struct scmp_arg_cmp c[2];
    size_t i;
    int rc = 0;

    for (i = 0; rc == 0 && i < sizeof(pid_args) / sizeof(pid_args[0]); i++)
        rc = add_arg(ctx, pid_args[i].name, pid_args[i].arg, 1);
    /* every process of the user, PID 1 included */
    if (rc == 0)
        rc = add_arg(ctx, "setpriority", 0, PRIO_USER);
    if (rc == 0)
        rc = add_arg(ctx, "ioprio_set", 0, IOPRIO_WHO_USER);
    /* SIGIO/SIGURG sent to pid 1 or to its group (-1) on I/O; the owner
     * of F_SETOWN_EX and of the ioctls is behind a pointer */
    c[0] = SCMP_A1(SCMP_CMP_MASKED_EQ, LOW32, F_SETOWN);
    c[1] = SCMP_A2(SCMP_CMP_MASKED_EQ, LOW32, 1);
    if (rc == 0)
        rc = add(ctx, eperm, "fcntl", 2, c);
    c[1] = SCMP_A2(SCMP_CMP_MASKED_EQ, LOW32, LOW32);
    if (rc == 0)
        rc = add(ctx, eperm, "fcntl", 2, c);
    if (rc == 0)
        rc = add_arg(ctx, "fcntl", 1, F_SETOWN_EX);
    if (rc == 0)
        rc = add_arg(ctx, "ioctl", 1, FIOSETOWN);
    if (rc == 0)
        rc = add_arg(ctx, "ioctl", 1, SIOCSPGRP);
    return rc;
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
    if ((rc = build_pid1(ctx)) != 0)
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

#ifdef NATIVE_ARCH
/* The highest number up to NR_REVIEWED this libseccomp can name: one it
 * cannot name, it cannot deny either. */
static uint32_t highest_known(void)
{
    int nr;

    for (nr = NR_REVIEWED; nr > 0; nr--) {
        char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);

        if (name) {
            free(name);
            return (uint32_t)nr;
        }
    }
    return 0;
}

/* Runs before libseccomp's program, which starts by loading what it tests
 * (the accumulator is all the prelude leaves behind). */
static size_t prelude(struct sock_filter *f)
{
    const struct sock_filter p[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 0, 4),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, X32_BIT, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, highest_known(), 0, 2),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        /* libseccomp's program follows */
    };

    if (f)
        memcpy(f, p, sizeof(p));
    return sizeof(p) / sizeof(p[0]);
}

/* libseccomp's program, exported and read back after the prelude. */
static int export(scmp_filter_ctx ctx)
{
    const size_t head = prelude(NULL) * sizeof(struct sock_filter);
    const struct sock_filter *first;
    int fd = memfd_create("codeshim-seccomp", MFD_CLOEXEC), rc;
    off_t end;

    if (fd < 0)
        return -errno;
    rc = seccomp_export_bpf(ctx, fd);
    if (rc == 0 && ((end = lseek(fd, 0, SEEK_END)) <= 0 ||
                    (size_t)end % sizeof(struct sock_filter) ||
                    head + (size_t)end > BPF_MAXINSNS * sizeof(struct sock_filter)))
        rc = -EINVAL;
    if (rc == 0 && !(prog = malloc(head + (size_t)end)))
        rc = -ENOMEM;
    if (rc == 0 && pread(fd, prog + head, (size_t)end, 0) != (ssize_t)end)
        rc = -EIO;
    close(fd);
    if (rc)
        return rc < 0 ? rc : -EINVAL;
    first = (const struct sock_filter *)(void *)(prog + head);
    if (BPF_CLASS(first->code) != BPF_LD)
        return -EINVAL; /* not the program the prelude was written for */
    prelude((struct sock_filter *)(void *)prog);
    prog_len = head + (size_t)end;
    return 0;
}
#endif

static void make_prog(void)
{
#ifdef NATIVE_ARCH
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    int rc;

    if (!ctx) {
        prog_err = -ENOMEM;
        return;
    }
    rc = build(ctx);
    if (rc == 0)
        rc = export(ctx);
    if (rc) {
        free(prog);
        prog = NULL;
        prog_len = 0;
        prog_err = rc < 0 ? rc : -EINVAL;
    }
    seccomp_release(ctx);
#else
    (void)build;
    prog_err = -ENOTSUP; /* no prelude for this architecture: no sandbox */
#endif
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
