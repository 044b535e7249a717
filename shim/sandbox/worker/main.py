# main.py - the local sandbox's Python side (owned by shim/sandbox), last
# part: which process this one is.
#
# Embedded into libcodeshim by sandbox.mk as one source (embed.py joins
# frames.py, ../listing.py, supervisor.py, worker.py, zygote.py and this,
# and adds their bytecode) and run through local_jail.c's BOOT_PY, which
# takes three arguments of its own first; one source, three processes:
#   python3 -I -S -B -c <this source> MODE FD TIMEOUT_MS KEEP MEMORY PROCS
#                                     FILE_SIZE CPU_S DATA_DIR [WFD WPID]
#       the supervisor. MODE "sandbox": PID 1 of a bubblewrap sandbox (own
#       PID, mount, network, IPC, UTS and user namespaces, seccomp);
#       "unsafe": no isolation at all (CODESHIM_UNSAFE_NO_ISOLATION=1,
#       debugging only). WFD/WPID: the first worker, already started.
#   python3 -I -B -c <this source> worker WFD MODE MEMORY PROCS FILE_SIZE CPU_S
#       the worker: the first one started together with the supervisor by
#       local_jail.c's start-up shell (their Python start-ups overlap), later
#       ones by the supervisor, after each loss.
#   python3 -I -B -c <this source> zygote ...
#       the fork server (local_zygote.c; zygote.py): each sandbox
#       it forks becomes a supervisor as above, which forks its workers.
#
# The supervisor talks to the host over FD, starts the notebook
# interpreter, enforces the per-execution wall-clock limit, captures
# output, lists the working directory, and kills everything the code
# started when an execution times out or the interpreter dies. User code
# cannot reach it: as PID 1 it cannot be killed from inside, it is not
# dumpable (no /proc/1/mem), seccomp refuses every signal, rlimit,
# priority and scheduler call naming pid 1 (seccomp.c), and the worker
# runs in a session (so a process group and an autogroup) of its own.
# It keeps running across interpreter restarts, so the files in DATA_DIR
# (a tmpfs) survive them.
# Between executions nothing of the sandbox runs: once a cell is done,
# every process but PID 1 is stopped before the reply goes out, and
# continued when the next request comes. Code that forged the worker's
# reply, or that resumes itself while stopped (a timer, an orphaned
# process group), is caught by a check every WATCH_S and before the next
# request: every process is killed and the next output says why.
# The worker sets its rlimits (address space, tasks, file size, CPU time)
# first, then runs the cells with notebook semantics in one persistent
# __main__ namespace.


if sys.argv[1] == "worker":
    _worker()
elif sys.argv[1] == "zygote":
    _zygote()
else:
    _supervisor()
