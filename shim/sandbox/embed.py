# embed.py - turns worker.py into build/gen/worker_py.c (run by sandbox.mk
# with Debian's /usr/bin/python3, the interpreter the sandbox runs):
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

FILENAME = "<codeshim-sandbox>"  # local_jail.c's BOOT_PY compiles with it too


def c_string(data):
    esc = lambda b: chr(b) if 32 <= b < 127 and chr(b) not in "\"\\?" \
        else "\\%03o" % b
    lines = ["    \"" + "".join(esc(b) for b in ln) + "\""
             for ln in data.splitlines(True)]
    return "\n".join(lines) or "    \"\""


def main(src_path, out_path):
    src = open(src_path, "rb").read()
    code = compile(src, FILENAME, "exec", dont_inherit=True, optimize=0)
    blob = binascii.b2a_base64(marshal.dumps(code), newline=False)
    blob_lines = b"\n".join(blob[i:i + 76] for i in range(0, len(blob), 76))
    with open(out_path, "w") as out:
        out.write("/* generated from %s by sandbox.mk - do not edit */\n"
                  % src_path)
        out.write("#include <stddef.h>\n\n")
        out.write("const char shim_worker_py[] =\n%s;\n" % c_string(src))
        out.write("const size_t shim_worker_py_len = %d;\n" % len(src))
        out.write("const char shim_worker_pyc_tag[] = \"%s\";\n"
                  % sys.implementation.cache_tag)
        out.write("const char shim_worker_pyc[] =\n%s;\n"
                  % "\n".join("    \"%s\"" % ln.decode()
                              for ln in blob_lines.split(b"\n")))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
