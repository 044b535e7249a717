# embed.py - joins the local sandbox's Python side (worker/*.py and
# listing.py, in the order sandbox.mk names them) into one source, embedded
# as build/gen/worker_py.c (run by sandbox.mk with Debian's /usr/bin/python3,
# the interpreter the sandbox runs), and, with --cells, the e2b backend's
# cells (e2b_*.py, each optionally after other parts: "a.py+e2b_x.py") into
# build/gen/e2b_cells.c as shim_<name>_py[] (source only: e2b runs them in
# its own Python):
#   shim_worker_py[]      the source, NUL-terminated (shim_worker_py_len)
#   shim_worker_pyc_tag[] sys.implementation.cache_tag of this Python
#   shim_worker_pyc[]     base64 of marshal.dumps(compile(source)): an
#                         interpreter with the same tag skips compiling
#                         (some ms of every sandbox start)
# Every byte that is not plain printable ASCII (and " \ ?, the last against
# trigraphs) becomes a 3-digit octal escape.
import binascii
import marshal
import sys

ARG_MAX_BYTES = 128 << 10  # Linux's MAX_ARG_STRLEN, NUL included
FILENAME = "<codeshim-sandbox>"  # local_jail.c's BOOT_PY compiles with it too


def c_string(data):
    esc = lambda b: chr(b) if 32 <= b < 127 and chr(b) not in "\"\\?" \
        else "\\%03o" % b
    lines = ["    \"" + "".join(esc(b) for b in ln) + "\""
             for ln in data.splitlines(True)]
    return "\n".join(lines) or "    \"\""


def join(paths):
    # The parts one after the other, each under a line naming it (a line
    # number of a traceback in FILENAME is found there).
    parts = []
    for p in paths:
        data = open(p, "rb").read()
        if not data.endswith(b"\n"):
            data += b"\n"
        parts.append(b"# ---- %s ----\n" % p.encode() + data)
    return b"\n\n".join(parts)


def main(out_path, src_paths):
    src = join(src_paths)
    code = compile(src, FILENAME, "exec", dont_inherit=True, optimize=0)
    blob = binascii.b2a_base64(marshal.dumps(code), newline=False)
    for what, data in (("source", src), ("bytecode", blob)):
        # each is one argument of python3's command line: Linux refuses an
        # argument of MAX_ARG_STRLEN (128 KiB) or more, and no sandbox
        # would start
        if len(data) + 1 > ARG_MAX_BYTES:
            sys.exit("embed.py: the sandbox's %s is %d bytes, over the %d "
                     "of one command-line argument" % (what, len(data),
                                                       ARG_MAX_BYTES))
    blob_lines = b"\n".join(blob[i:i + 76] for i in range(0, len(blob), 76))
    with open(out_path, "w") as out:
        out.write("/* generated from %s by sandbox.mk - do not edit */\n"
                  % " ".join(src_paths))
        out.write("#include <stddef.h>\n\n")
        out.write("const char shim_worker_py[] =\n%s;\n" % c_string(src))
        out.write("const size_t shim_worker_py_len = %d;\n" % len(src))
        out.write("const char shim_worker_pyc_tag[] = \"%s\";\n"
                  % sys.implementation.cache_tag)
        out.write("const char shim_worker_pyc[] =\n%s;\n"
                  % "\n".join("    \"%s\"" % ln.decode()
                              for ln in blob_lines.split(b"\n")))


def cells(out_path, paths):
    with open(out_path, "w") as out:
        out.write("/* generated from %s by sandbox.mk - do not edit */\n"
                  % " ".join(paths))
        for p in paths:
            parts = p.split("+")
            name = parts[-1].rsplit("/", 1)[-1][:-3]
            src = open(parts[-1], "rb").read()
            if len(parts) > 1:
                # the cell's head comment stays first ("# codeshim: ...":
                # how a cell of codeshim's own is told from the model's),
                # then the parts it uses, then the rest of the cell
                lines = src.splitlines(True)
                n = next((i for i, ln in enumerate(lines)
                          if not ln.startswith(b"#")), len(lines))
                src = b"".join(lines[:n]) + join(parts[:-1]) + b"\n" + \
                    b"".join(lines[n:])
            compile(src, p, "exec", dont_inherit=True)  # a syntax error fails the build
            out.write("const char shim_%s_py[] =\n%s;\n" % (name, c_string(src)))


if __name__ == "__main__":
    if sys.argv[1] == "--cells":
        cells(sys.argv[2], sys.argv[3:])
    else:
        main(sys.argv[1], sys.argv[2:])
