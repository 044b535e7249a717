"""`make demo` (scripts/demo.sh): a quiet build (its output only when it
fails), the question asked, the program's answer, what to try next; with
OPENAI_API_KEY set and the API unreachable, how to run offline.  The build
is played by a stand-in for make ($MAKE) so that these tests never rebuild
the tree; the program and the library are the real ones."""

import socket

from conftest import REPO, run

DEMO = REPO / "scripts" / "demo.sh"
COMPILER_LINE = "cc -std=c11 -O2 -c shim/x.c -o build/obj/shim/x.o"


def fake_make(tmp_path, status):
    m = tmp_path / "make"
    m.write_text("#!/bin/sh\n[ \"$*\" = '--no-print-directory all' ] || exit 99\n"
                 "i=0; while [ $i -lt 75 ]; do echo '%s'; i=$((i+1)); done\n"
                 "%s\nexit %d\n" % (COMPILER_LINE,
                                    "echo 'shim/x.c:1: error: boom' >&2" if status else "",
                                    status))
    m.chmod(0o755)
    return m


def demo(tmp_path, env=None, status=0):
    e = {"MAKE": fake_make(tmp_path, status), "OPENAI_API_KEY": None}
    e.update(env or {})
    rc, out, err = run(["/bin/sh", DEMO], env=e, preload=False, timeout=120)
    return rc, out.decode(), err.decode()


def test_offline_demo_prints_question_answer_and_next_steps(tmp_path):
    rc, out, err = demo(tmp_path)
    assert rc == 0, out + err
    assert COMPILER_LINE not in out + err                  # built quietly
    assert out.count("\n") < 60, out
    assert "== the question:" in out and "   | fib = [0, 1]" in out
    assert "--- output ---" in out and "[0, 1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89]" in out
    assert "The code ran. Output:" in out
    nxt = out.split("== what to try next:")[1]
    for hint in ("build/codeshim --offline", "OPENAI_API_KEY=sk-... make demo",
                 "build/codeshim --check", "man doc/codeshim.1"):
        assert hint in nxt, hint


def test_build_failure_shows_the_build_output(tmp_path):
    rc, out, err = demo(tmp_path, status=2)
    assert rc == 1
    assert err.count(COMPILER_LINE) == 75 and "shim/x.c:1: error: boom" in err
    assert "the build failed" in err
    assert "== the question:" not in out                   # nothing was asked


def test_key_set_but_api_unreachable_says_how_to_run_offline(tmp_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))                                # nobody listens there
    url = "http://127.0.0.1:%d/v1" % s.getsockname()[1]
    try:
        rc, out, err = demo(tmp_path, {"OPENAI_API_KEY": "sk-demo-test-key-0123456789",
                                       "OPENAI_BASE_URL": url})
    finally:
        s.close()
    assert rc != 0
    assert "Use the code interpreter" in out                # the online question
    assert "%s could not be reached" % url in err
    assert "CODESHIM_OFFLINE=1 make demo" in err and "build/codeshim --offline" in err
    assert "what to try next" not in out
    assert "sk-demo-test-key-0123456789" not in out + err


def test_offline_wins_over_a_key(tmp_path):
    rc, out, err = demo(tmp_path, {"OPENAI_API_KEY": "sk-demo-test-key-0123456789",
                                   "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
                                   "CODESHIM_OFFLINE": "1"})
    assert rc == 0, out + err
    assert "offline model answers" in out and "The code ran. Output:" in out
