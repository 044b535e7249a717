"""The layer check (tests/tools/check_layers.py, `make layers`) passes on
the library as it is and fails for each kind of violation it exists to
catch: a call or include upwards, a circle, a file missing from the
table."""

import re
import subprocess

from conftest import PYTHON, REPO

CHECK = REPO / "tests" / "tools" / "check_layers.py"
TABLE = REPO / "doc" / "ARCHITECTURE.md"


def check(table_text, tmp_path):
    t = tmp_path / "ARCH.md"
    t.write_text(table_text)
    p = subprocess.run([PYTHON, str(CHECK), str(t), str(REPO / "build" / "obj"), str(REPO)],
                       capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def test_the_library_keeps_its_layers(tmp_path):
    rc, out = check(TABLE.read_text(), tmp_path)
    assert rc == 0, out
    assert "layers: ok" in out


def test_an_upward_call_fails(tmp_path):
    # loop.c demoted to the base layer (a row of its own wins over its
    # folder's): every engine it calls is above it
    text = TABLE.read_text().replace("| 0 | base | ", "| 0 | base | `shim/curl/loop.c` ")
    rc, out = check(text, tmp_path)
    assert rc == 1
    assert re.search(r"shim/curl/loop\.c \(layer 0 base\) calls shim/\S+ \(layer \d", out), out
    assert re.search(r"shim/curl/loop\.c \(layer 0 base\) includes", out), out


def test_a_file_missing_from_the_table_fails(tmp_path):
    # a folder without a row: each of its files is unplaced
    text = TABLE.read_text().replace("`shim/base/`", "")
    rc, out = check(text, tmp_path)
    assert rc == 1 and "shim/base/text.c: not in the layer table" in out, out


def test_a_circle_fails(tmp_path):
    # A circle inside one layer is not an upward arrow; it must still fail.
    # The real tree has none, so make one: a fake object graph.
    src = tmp_path / "src" / "shim"
    obj = tmp_path / "obj" / "shim"
    src.mkdir(parents=True)
    obj.mkdir(parents=True)
    (src / "a.c").write_text("void shim_b_f(void);\nvoid shim_a_f(void) { shim_b_f(); }\n")
    (src / "b.c").write_text("void shim_a_f(void);\nvoid shim_b_f(void) { shim_a_f(); }\n")
    for n in ("a", "b"):
        subprocess.run(["cc", "-c", str(src / (n + ".c")), "-o", str(obj / (n + ".o"))],
                       check=True)
    t = tmp_path / "ARCH.md"
    t.write_text("| layer | name | files |\n|---|---|---|\n| 0 | base | `shim/a.c` `shim/b.c` |\n")
    p = subprocess.run([PYTHON, str(CHECK), str(t), str(tmp_path / "obj"), str(tmp_path / "src")],
                       capture_output=True, text=True)
    assert p.returncode == 1
    assert "circle (calls): shim/a.c <-> shim/b.c" in p.stdout, p.stdout


HOMES = REPO / "tests" / "tools" / "check_homes.py"


def homes(root):
    p = subprocess.run([PYTHON, str(HOMES), str(root)], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def test_every_job_has_one_home():
    rc, out = homes(REPO)
    assert rc == 0, out
    assert "homes: ok" in out


# One second copy of each job, as the tree had them before they got their
# homes; each must be named, with its file and line.
COPIES = {
    "url": ('const char *p = strstr(url, "://");\n', "a URL split by hand"),
    "query": ('size_t n = strcspn(path, "?#");\n', "a URL split by hand"),
    "hex": ("shim_text_hex(d, 16, out);\n", "a SHA-256 digest made hex by hand"),
    "tag": ("shim_sha256_update(&s, tag, strlen(tag) + 1);\n", "a tagged name hashed by hand"),
    "join": ('snprintf(out, n, "%s/%s", a, b);\n', "a path joined by hand"),
    "read": ("k = read(fd, out + got, n - 1 - got);\n", "a capped read loop by hand"),
    "time": ("now = time(NULL);\n", "the wall clock read by hand"),
    "tod": ("gettimeofday(&tv, NULL);\n", "the wall clock read by hand"),
    "realtime": ("clock_gettime(CLOCK_REALTIME, &ts);\n", "the wall clock read by hand"),
}


def test_a_second_copy_of_a_job_fails(tmp_path):
    for name, (line, what) in COPIES.items():
        root = tmp_path / name
        (root / "shim").mkdir(parents=True)
        (root / "shim" / "x.c").write_text("/* time(NULL) in a comment is no copy */\n"
                                           "static void f(void)\n{\n    " + line + "}\n")
        rc, out = homes(root)
        assert rc == 1, (name, out)
        assert f"shim/x.c:4: {what}" in out, (name, out)
        # in its home, the same line is no copy
        home = {"url": "system/url.c", "query": "system/url.c", "hex": "base/sha256.c",
                "tag": "base/sha256.c", "join": "base/fileio.c",
                "read": "base/fileio.c"}.get(name, "base/clock.h")
        (root / "shim" / home).parent.mkdir(exist_ok=True)
        (root / "shim" / "x.c").rename(root / "shim" / home)
        rc, out = homes(root)
        assert rc == 0, (name, out)
