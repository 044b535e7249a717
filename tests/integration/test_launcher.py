"""The launcher, build/codeshim: options, LD_PRELOAD handling, library
lookup, exit statuses, an end-to-end run through the curl CLI, and the
`codeshim trace` summary (on hand-written trace files, so the numbers are
known, and on a trace the library wrote).

Every program is started with run(..., preload=False): the launcher itself
sets LD_PRELOAD, which is what is under test."""

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from conftest import LIB, REPO, run

LAUNCHER = REPO / "build" / "codeshim"
CURL = "/usr/bin/curl"
ENV_PROG = "/usr/bin/env"

CI_BODY = json.dumps({"model": "m", "input": "```python\nprint(6*7)\n```",
                      "tools": [{"type": "code_interpreter"}]})


@pytest.fixture(scope="module", autouse=True)
def launcher():
    if not LAUNCHER.exists():
        pytest.fail("%s is missing: run `make` first" % LAUNCHER)
    return LAUNCHER


def cs(*args, env=None, cwd=None, input=None, launcher=LAUNCHER):
    """Runs the launcher with args; returns (rc, stdout text, stderr text)."""
    rc, out, err = run([launcher] + [str(a) for a in args], env=env, cwd=cwd,
                       input=input, preload=False)
    return rc, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def child_env(*opts, env=None, cwd=None):
    """The environment PROGRAM sees when run with opts: {name: value}."""
    rc, out, err = cs(*opts, "--", ENV_PROG, env=env, cwd=cwd)
    assert rc == 0, err
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


# ------------------------------------------------------------ help, version

def test_help_lists_every_option():
    rc, out, err = cs("--help")
    assert rc == 0 and err == ""
    for opt in ("--offline", "--max-loops", "--timeout", "--output-cap", "--log ",
                "--log-file", "--trace", "--record", "--replay", "--sandbox",
                "--python", "--lib", "--version", "codeshim trace FILE"):
        assert opt in out, opt
    assert cs("-h")[1] == out


def test_version():
    rc, out, err = cs("--version")
    assert rc == 0 and err == ""
    assert re.fullmatch(r"codeshim \d+\.\d+\.\d+\S*\n", out), out
    assert cs("-V")[1] == out


# ------------------------------------------------------------- exit status

def test_missing_program_is_127():
    rc, out, err = cs("--", "no-such-program-xyz")
    assert rc == 127
    assert "no-such-program-xyz" in err and "not found" in err
    rc, _, err = cs("/nonexistent/dir/prog")
    assert rc == 127 and "/nonexistent/dir/prog" in err


def test_not_executable_is_126(tmp_path):
    f = tmp_path / "data.txt"
    f.write_text("not a program\n")
    f.chmod(0o644)
    rc, _, err = cs(f)
    assert rc == 126 and str(f) in err


@pytest.mark.parametrize("args, words", [
    ([], "no PROGRAM"),
    (["--"], "no PROGRAM"),
    (["--offline"], "no PROGRAM"),
    (["--bogus", "true"], "unknown option --bogus"),
    (["-x", "true"], "unknown option -x"),
    (["--timeout"], "--timeout needs a value"),
    (["--offline=1", "true"], "--offline takes no value"),
])
def test_usage_errors_are_2(args, words):
    rc, out, err = cs(*args)
    assert rc == 2 and out == ""
    assert words in err


def test_missing_library_is_1():
    rc, out, err = cs("--lib", "/nonexistent/libcodeshim.so", "--", "/bin/true")
    assert rc == 1 and out == ""
    assert "/nonexistent/libcodeshim.so" in err and "--lib" in err
    rc, _, err = cs("/bin/true", env={"CODESHIM_LIB": "/nonexistent/lib.so"})
    assert rc == 1 and "/nonexistent/lib.so" in err and "CODESHIM_LIB" in err


def test_usage_error_wins_over_missing_library():
    rc, _, err = cs("--lib", "/nonexistent.so", "--max-loops", "0", "/bin/true")
    assert rc == 2 and "--max-loops" in err


def test_program_exit_status_and_args_pass_through():
    rc, out, _ = cs("--", "/bin/sh", "-c", 'echo "$1|$2"; exit 7', "sh", "a b", "--x")
    assert rc == 7 and out == "a b|--x\n"


def test_program_named_trace_needs_dashdash(tmp_path):
    prog = tmp_path / "trace"
    prog.write_text("#!/bin/sh\necho ran-trace-program\n")
    prog.chmod(0o755)
    rc, out, _ = cs("--", "trace", env={"PATH": "%s:/usr/bin:/bin" % tmp_path})
    assert rc == 0 and out == "ran-trace-program\n"


# ------------------------------------------------------------- LD_PRELOAD

def preload_seen(env=None):
    rc, out, err = cs("--", "/bin/sh", "-c", "echo $LD_PRELOAD", env=env)
    assert rc == 0, err
    return out.strip()


def test_ld_preload_library_first_then_existing():
    assert preload_seen({"LD_PRELOAD": "/x.so"}) == "%s:/x.so" % LIB


def test_ld_preload_alone_when_unset():
    assert preload_seen() == str(LIB)


def test_ld_preload_keeps_order_and_drops_duplicates(tmp_path):
    link = tmp_path / "alias.so"
    link.symlink_to(LIB)
    old = "/x.so %s:/y.so::%s  /z.so" % (LIB, link)
    assert preload_seen({"LD_PRELOAD": old}) == "%s:/x.so:/y.so:/z.so" % LIB


# --------------------------------------------------------- library lookup

def test_lib_option_and_env_are_used(tmp_path):
    alt = tmp_path / "copy.so"
    shutil.copy(LIB, alt)
    assert child_env("--lib", alt)["LD_PRELOAD"] == str(alt)
    assert child_env(env={"CODESHIM_LIB": alt})["LD_PRELOAD"] == str(alt)
    # --lib beats CODESHIM_LIB; relative paths become absolute.
    got = child_env("--lib", "copy.so", env={"CODESHIM_LIB": "/nonexistent.so"},
                    cwd=tmp_path)
    assert got["LD_PRELOAD"] == str(alt)


def test_installed_layout(tmp_path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "lib" / "codeshim").mkdir(parents=True)
    exe = tmp_path / "bin" / "codeshim"
    shutil.copy(LAUNCHER, exe)
    shutil.copy(LIB, tmp_path / "lib" / "codeshim" / "libcodeshim.so")
    rc, out, err = cs("--", ENV_PROG, launcher=exe)
    assert rc == 0, err
    assert "LD_PRELOAD=%s/lib/codeshim/libcodeshim.so\n" % tmp_path in out


def test_no_library_anywhere_names_the_places(tmp_path):
    exe = tmp_path / "codeshim"
    shutil.copy(LAUNCHER, exe)
    rc, out, err = cs("/bin/true", launcher=exe)
    assert rc == 1 and out == ""
    assert str(tmp_path / "libcodeshim.so") in err
    assert "lib/codeshim/libcodeshim.so" in err and "--lib" in err


def test_library_path_with_space_is_refused(tmp_path):
    d = tmp_path / "a b"
    d.mkdir()
    shutil.copy(LIB, d / "libcodeshim.so")
    rc, _, err = cs("--lib", d / "libcodeshim.so", "/bin/true")
    assert rc == 1 and "LD_PRELOAD" in err


# ------------------------------------------------- options -> environment

@pytest.mark.parametrize("opts, var, value", [
    (["--offline"], "CODESHIM_OFFLINE", "1"),
    (["--max-loops", "1"], "CODESHIM_MAX_LOOPS", "1"),
    (["--max-loops=1000"], "CODESHIM_MAX_LOOPS", "1000"),
    (["--timeout", "86400"], "CODESHIM_EXEC_TIMEOUT", "86400"),
    (["--timeout", "1"], "CODESHIM_EXEC_TIMEOUT", "1"),
    (["--output-cap", "256"], "CODESHIM_OUTPUT_CAP", "256"),
    (["--output-cap", "10485760"], "CODESHIM_OUTPUT_CAP", "10485760"),
    (["--log", "debug"], "CODESHIM_LOG", "debug"),
    (["--log", "WARN"], "CODESHIM_LOG", "warn"),
    (["--log-file", "/tmp/cs.log"], "CODESHIM_LOG_FILE", "/tmp/cs.log"),
    (["--trace", "/tmp/cs.jsonl"], "CODESHIM_TRACE", "/tmp/cs.jsonl"),
    (["--record", "/tmp/rec"], "CODESHIM_RECORD", "/tmp/rec"),
    (["--replay=/tmp"], "CODESHIM_REPLAY", "/tmp"),
    (["--sandbox", "local"], "CODESHIM_SANDBOX", "local"),
    (["--sandbox", "e2b"], "CODESHIM_SANDBOX", "e2b"),
    (["--python", "/usr/bin/python3"], "CODESHIM_PYTHON", "/usr/bin/python3"),
    (["--python", "python3"], "CODESHIM_PYTHON", "python3"),
])
def test_option_sets_variable(opts, var, value):
    got = child_env(*opts)
    assert got[var] == value
    assert got["LD_PRELOAD"] == str(LIB)


def test_no_options_set_no_variables():
    got = child_env()
    assert not [k for k in got if k.startswith("CODESHIM_")]


def test_all_options_together():
    got = child_env("--offline", "--max-loops", "3", "--timeout", "9", "--output-cap",
                    "4096", "--log", "info", "--log-file", "/tmp/l", "--trace", "/tmp/t",
                    "--record", "/tmp/r", "--replay", "/tmp", "--sandbox", "local",
                    "--python", "/usr/bin/python3")
    assert {k: v for k, v in got.items() if k.startswith("CODESHIM_")} == {
        "CODESHIM_OFFLINE": "1", "CODESHIM_MAX_LOOPS": "3",
        "CODESHIM_EXEC_TIMEOUT": "9", "CODESHIM_OUTPUT_CAP": "4096",
        "CODESHIM_LOG": "info", "CODESHIM_LOG_FILE": "/tmp/l",
        "CODESHIM_TRACE": "/tmp/t", "CODESHIM_RECORD": "/tmp/r",
        "CODESHIM_REPLAY": "/tmp", "CODESHIM_SANDBOX": "local",
        "CODESHIM_PYTHON": "/usr/bin/python3"}


def test_option_overrides_inherited_variable():
    got = child_env("--max-loops", "5", env={"CODESHIM_MAX_LOOPS": "7",
                                             "CODESHIM_TIMEOUT_UNRELATED": "x"})
    assert got["CODESHIM_MAX_LOOPS"] == "5"
    assert got["CODESHIM_TIMEOUT_UNRELATED"] == "x"


def test_relative_paths_become_absolute(tmp_path):
    (tmp_path / "rep").mkdir()
    got = child_env("--trace", "t.jsonl", "--log-file", "sub/log", "--record", "rec",
                    "--replay", "./rep", "--python", "venv/bin/python", cwd=tmp_path)
    assert got["CODESHIM_TRACE"] == "%s/t.jsonl" % tmp_path
    assert got["CODESHIM_LOG_FILE"] == "%s/sub/log" % tmp_path
    assert got["CODESHIM_RECORD"] == "%s/rec" % tmp_path
    assert got["CODESHIM_REPLAY"] == "%s/./rep" % tmp_path
    assert got["CODESHIM_PYTHON"] == "%s/venv/bin/python" % tmp_path


@pytest.mark.parametrize("opts, words", [
    (["--max-loops", "0"], "out of range (1..1000)"),
    (["--max-loops", "1001"], "out of range"),
    (["--max-loops", "abc"], "not a whole number"),
    (["--max-loops", "-3"], "not a whole number"),
    (["--max-loops", " 5"], "not a whole number"),
    (["--max-loops", "5x"], "not a whole number"),
    (["--max-loops", ""], "not a whole number"),
    (["--max-loops", "99999999999999999999999"], "not a whole number"),
    (["--timeout", "0"], "out of range (1..86400)"),
    (["--timeout", "86401"], "out of range"),
    (["--timeout", "1.5"], "not a whole number"),
    (["--output-cap", "255"], "out of range (256..10485760)"),
    (["--output-cap", "10485761"], "out of range"),
    (["--log", "loud"], "not one of error|warn|info|debug"),
    (["--log", ""], "not one of"),
    (["--sandbox", "docker"], "not one of local|e2b"),
    (["--trace", ""], "--trace needs a non-empty FILE"),
    (["--record="], "--record needs a non-empty DIR"),
    (["--python", ""], "--python needs a non-empty PATH"),
])
def test_bad_values_are_2(opts, words):
    rc, out, err = cs(*opts, "--", ENV_PROG)
    assert rc == 2 and out == ""          # env never ran
    assert words in err
    assert opts[0].split("=")[0] in err


# An option whose value was forgotten must not swallow the next option (a
# trace file named "--" and PROGRAM run without the "--" meant).
@pytest.mark.parametrize("opt", ["--trace", "--log-file", "--record", "--replay", "--lib",
                                 "--python", "--log", "--sandbox"])
@pytest.mark.parametrize("nxt", ["--", "--offline", "-x"])
def test_option_like_value_is_refused(opt, nxt, tmp_path):
    rc, out, err = cs(opt, nxt, "--", ENV_PROG, cwd=tmp_path)
    assert rc == 2 and out == "", err
    assert "codeshim: %s needs a value" % opt in err and "option-like %s" % nxt in err
    assert "%s=%s" % (opt, nxt) in err          # and how to mean a file of that name
    assert list(tmp_path.iterdir()) == []


def test_option_like_file_name_with_equals_or_dot_slash(tmp_path):
    got = child_env("--trace=--odd", "--log-file", "./-log", cwd=tmp_path)
    assert got["CODESHIM_TRACE"] == "%s/--odd" % tmp_path
    assert got["CODESHIM_LOG_FILE"] == "%s/./-log" % tmp_path


def test_replay_needs_an_existing_directory(tmp_path):
    for where in (tmp_path / "missing", "rel-missing"):
        rc, out, err = cs("--replay", where, "--", ENV_PROG, cwd=tmp_path)
        assert rc == 2 and out == ""
        assert "--replay %s: no such directory" % where in err
    f = tmp_path / "file"
    f.write_text("")
    rc, _, err = cs("--replay=%s" % f, "--", ENV_PROG)
    assert rc == 2 and "no such directory" in err


# ------------------------------------------------ programs LD_PRELOAD misses

STATIC_SRC = '#include <stdio.h>\nint main(void){puts("static ran");return 3;}\n'


def build_static(tmp_path):
    if not Path("/usr/lib/x86_64-linux-gnu/libc.a").exists() and \
            not Path("/usr/lib/libc.a").exists():
        pytest.skip("no static libc to link a static program with")
    src = tmp_path / "s.c"
    src.write_text(STATIC_SRC)
    prog = tmp_path / "static-prog"
    rc, _, err = run(["cc", "-static", "-o", prog, src], preload=False)
    assert rc == 0, err
    return prog


def test_static_program_warns_and_runs(tmp_path):
    prog = build_static(tmp_path)
    rc, out, err = cs("--", prog)
    assert rc == 3 and out == "static ran\n"
    assert ("codeshim: warning: %s is statically linked (no program interpreter): "
            "LD_PRELOAD cannot reach it" % prog) in err
    assert "running it anyway" in err
    # found through PATH too
    rc, out, err = cs("static-prog", env={"PATH": "%s:/usr/bin:/bin" % tmp_path})
    assert rc == 3 and "%s is statically linked" % prog in err


def test_script_with_static_interpreter_warns(tmp_path):
    prog = build_static(tmp_path)
    script = tmp_path / "script"
    script.write_text("#!%s\n" % prog)
    script.chmod(0o755)
    rc, out, err = cs(script)
    assert rc == 3 and out == "static ran\n"
    assert "the interpreter %s of the script is statically linked" % prog in err


def test_dynamic_programs_and_scripts_do_not_warn(tmp_path):
    script = tmp_path / "s.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o755)
    for prog in ([ENV_PROG], ["true"], [script]):
        rc, _, err = cs(*prog)
        assert rc == 0 and "warning" not in err, (prog, err)


@pytest.mark.skipif(os.geteuid() != 0, reason="making a program setuid to another user takes root")
@pytest.mark.parametrize("bit, word", [(0o4755, "setuid"), (0o2755, "setgid")])
def test_setuid_setgid_program_warns_and_runs(tmp_path, bit, word):
    d = tmp_path / "x"
    d.mkdir()
    d.chmod(0o755)
    prog = d / "id-prog"
    shutil.copy("/usr/bin/id", prog)
    os.chown(prog, 65534, 65534)
    prog.chmod(bit)
    rc, out, err = cs(prog, "-u")
    assert rc == 0, err
    assert ("codeshim: warning: %s is %s: the dynamic loader ignores LD_PRELOAD for it"
            % (prog, word)) in err
    assert out.strip() == ("65534" if word == "setuid" else "0")
    prog.chmod(0o755)                            # the bit alone decides
    rc, _, err = cs(prog, "-u")
    assert rc == 0 and "warning" not in err


# --------------------------------------------------------------- end to end

def test_end_to_end_curl(fake, lib, tmp_path):
    trace = tmp_path / "run.jsonl"
    rc, out, err = cs("--trace", trace, "--", CURL, "-sS", fake.url + "/responses",
                      "-d", CI_BODY, env={"OPENAI_API_KEY": "sk-test"})
    assert rc == 0, err
    resp = json.loads(out)
    assert resp["object"] == "response" and resp["status"] == "completed"
    calls = [o for o in resp["output"] if o["type"] == "code_interpreter_call"]
    assert len(calls) == 1
    assert calls[0]["code"] == "print(6*7)\n"
    assert calls[0]["outputs"] == [{"type": "logs", "logs": "42\n"}]
    # The upstream saw the function-tool rewrite twice, never the native tool.
    reqs = fake.requests()
    assert len(reqs) == 2
    assert all(t["type"] != "code_interpreter" for r in reqs for t in r["body"]["tools"])

    # The library's own trace of that run, summarized.
    rc, text, err = cs("trace", trace)
    assert rc == 0, err
    assert "api       responses  model m  stream no" in text
    assert "loop      2 upstream calls, 1 execution\n" in text
    assert re.search(r"exec      completed +\d+\.\d{3}s  print\(6\*7\)", text)
    assert "result    status 200  curl code 0" in text
    summary = json.loads(cs("trace", trace, "--json")[1])
    r = summary["requests"][0]
    assert (r["upstream_calls"], r["executions"], r["status"], r["curl_code"]) == (2, 1, 200, 0)
    assert r["url"] == fake.url + "/responses"
    assert summary["malformed_lines"] == 0


def test_end_to_end_offline(lib):
    # Port 9 (discard) on loopback: nothing listens, so only the offline
    # model can answer.
    rc, out, err = cs("--offline", "--", CURL, "-sS", "http://127.0.0.1:9/v1/responses",
                      "-d", CI_BODY)
    assert rc == 0, err
    resp = json.loads(out)
    calls = [o for o in resp["output"] if o["type"] == "code_interpreter_call"]
    assert calls and calls[0]["outputs"] == [{"type": "logs", "logs": "42\n"}]


# ------------------------------------------------------------ trace summary

def ev(ts, req, event, pid=100, **kw):
    d = {"ts": ts, "pid": pid, "req": req, "event": event}
    d.update(kw)
    return json.dumps(d)


# Two requests from two processes, lines interleaved and req_b's first line
# earlier than req_a's; plus an error outside any request and junk.
GOOD = [
    ev(1000.5, "req_a", "request", api="responses", url="http://h/v1/responses",
       model="gpt-x", stream=True),
    ev(1000.0, "req_b", "request", pid=200, api="chat", url="http://h/v1/chat/completions",
       model="small", stream=False),
    ev(1000.9, "req_a", "upstream", turn=1, status=200, seconds=0.25, bytes=900,
       input_tokens=100, output_tokens=20),
    ev(1001.0, "req_a", "exec", call="ci_1", container_id="cntr_1", status="completed",
       seconds=0.5, code="\n\nimport math\nprint(math.pi)\n", output="3.14\n"),
    ev(1001.1, "req_b", "upstream", pid=200, turn=1, seconds=2.0,
       error="Couldn't connect to server", curl_code=7),
    ev(1001.2, "req_a", "upstream", turn=2, status=200, seconds=0.5, bytes=800,
       input_tokens=150, output_tokens=30),
    ev(1001.3, "req_a", "exec", call="ci_2", container_id="cntr_1", status="failed",
       seconds=0.125, code="1/0", output="ZeroDivisionError"),
    ev(1001.4, "req_a", "upstream", turn=3, status=200, seconds=0.25, bytes=700),
    ev(1001.5, "req_a", "answer", status=200, executions=2, upstream_calls=3,
       seconds=1.75, curl_code=0),
    ev(1001.6, "req_b", "error", pid=200, message="upstream unreachable"),
    ev(1001.7, "req_b", "answer", pid=200, status=0, executions=0, upstream_calls=1,
       seconds=2.5, curl_code=7),
    ev(1002.0, "req_c", "request", api="responses", url="http://h/v1/responses",
       model="gpt-x", stream=False),
    ev(1002.5, "req_c", "upstream", turn=1, status=429, seconds=0.125, bytes=50),
    json.dumps({"ts": 1003.0, "pid": 300, "event": "error", "message": "bad config"}),
    ev(1003.5, "req_a", "future_event", whatever=1),       # ignored, not malformed
]
BAD = [
    "not json at all",
    '{"ts": 1, "pid": 1, "req": "req_a", "event": "exec", "seco',   # torn line
    "[1, 2, 3]",
    '{"ts": 1, "req": "req_a"}',                                     # no event
    '{"event": "request", "req": "req_z"}',                          # no ts
    '{"ts": "soon", "req": "req_z", "event": "request"}',            # ts not a number
    '{"ts": 1, "req": "req_z", "event": "request"} {"ts": 2}',       # two objects
    ev(1000.0, "req_z", "answer").replace("}", "}\x00"),             # trailing NUL
]


def write_trace(path, lines):
    path.write_text("".join(l + "\n" for l in lines))
    return path


@pytest.fixture
def mixed_trace(tmp_path):
    lines = list(GOOD)
    for i, b in enumerate(BAD):          # junk scattered between good lines
        lines.insert(2 * i + 1, b)
    lines.insert(4, "")                  # blank lines are not malformed
    lines.insert(6, "   ")
    return write_trace(tmp_path / "trace.jsonl", lines)


def blocks(text):
    """{req id: block text} of the text summary, and the lines after them."""
    out = {}
    for m in re.finditer(r"^request (\S+) \(.*?(?=^request |^total:|^error outside)",
                         text, re.S | re.M):
        out[m.group(1)] = m.group(0)
    return out


def test_trace_text_summary(mixed_trace):
    rc, text, err = cs("trace", mixed_trace)
    assert rc == 0 and err == ""
    b = blocks(text)
    # Ordered by first timestamp: req_b (1000.0), req_a (1000.5), req_c.
    assert list(b) == ["req_b", "req_a", "req_c"]

    a = b["req_a"]
    assert "(pid 100, 1970-01-01 00:16:40 UTC)" in a
    assert "api       responses  model gpt-x  stream yes" in a
    assert "url       http://h/v1/responses" in a
    assert "loop      3 upstream calls, 2 executions" in a
    assert "time      model 1.000s  sandbox 0.625s  total 1.750s" in a
    assert "tokens    in 250  out 50" in a
    assert "result    status 200  curl code 0" in a
    assert "exec      completed  0.500s  import math\n" in a
    assert "exec      failed     0.125s  1/0\n" in a
    assert a.index("import math") < a.index("1/0")

    bb = b["req_b"]
    assert "(pid 200," in bb
    assert "api       chat  model small  stream no" in bb
    assert "loop      1 upstream call, 0 executions" in bb
    assert "time      model 2.000s  sandbox 0.000s  total 2.500s" in bb
    assert "tokens    unknown" in bb
    assert "result    status 0  curl code 7" in bb
    assert "upstream turn 1 failed: curl code 7: Couldn't connect to server" in bb
    assert "note      error: upstream unreachable" in bb

    c = b["req_c"]
    assert "result    unfinished (no answer event)" in c
    assert "upstream turn 1 answered status 429" in c
    assert "time      model 0.125s  sandbox 0.000s  total 0.500s" in c   # ts span

    assert "error outside any request: bad config" in text
    total = [l for l in text.splitlines() if l.startswith("total:")]
    assert total == ["total: 3 requests (2 answered, 1 failed), 5 upstream calls, "
                     "2 executions (1 not completed), model 3.125s, sandbox 0.625s, "
                     "total 4.750s, tokens in 250 out 50"]
    assert text.rstrip("\n").splitlines()[-1] == "skipped %d malformed lines" % len(BAD)


def test_trace_json_summary(mixed_trace):
    rc, out, err = cs("trace", mixed_trace, "--json")
    assert rc == 0 and err == ""
    s = json.loads(out)
    assert [r["req"] for r in s["requests"]] == ["req_b", "req_a", "req_c"]
    a = s["requests"][1]
    assert a == {
        "req": "req_a", "pid": 100, "first_ts": 1000.5, "api": "responses",
        "model": "gpt-x", "url": "http://h/v1/responses", "stream": True,
        "upstream_calls": 3, "executions": 2, "model_seconds": 1.0,
        "sandbox_seconds": 0.625, "total_seconds": 1.75, "input_tokens": 250,
        "output_tokens": 50, "upstream_bytes": 2400, "answered": True, "status": 200,
        "curl_code": 0,
        "exec": [{"call": "ci_1", "status": "completed", "seconds": 0.5,
                  "code": "import math"},
                 {"call": "ci_2", "status": "failed", "seconds": 0.125, "code": "1/0"}],
        "notes": []}
    b = s["requests"][0]
    assert (b["input_tokens"], b["output_tokens"], b["curl_code"]) == (None, None, 7)
    assert b["notes"] == ["upstream turn 1 failed: curl code 7: Couldn't connect to server",
                          "error: upstream unreachable"]
    c = s["requests"][2]
    assert (c["answered"], c["status"], c["curl_code"]) == (False, None, None)
    assert s["totals"] == {
        "requests": 3, "answered": 2, "failed": 1, "upstream_calls": 5,
        "executions": 2, "executions_not_completed": 1, "model_seconds": 3.125,
        "sandbox_seconds": 0.625, "total_seconds": 4.75, "input_tokens": 250,
        "output_tokens": 50}
    assert s["errors_outside_requests"] == ["bad config"]
    assert s["malformed_lines"] == len(BAD)
    assert s["lines"] == len(GOOD) + len(BAD) + 2
    # --json may come first too.
    assert json.loads(cs("trace", "--json", mixed_trace)[1]) == s


def test_trace_only_malformed(tmp_path):
    t = write_trace(tmp_path / "bad.jsonl", BAD)
    rc, text, _ = cs("trace", t)
    assert rc == 0
    assert "total: 0 requests (0 answered, 0 failed), 0 upstream calls" in text
    assert "skipped %d malformed lines" % len(BAD) in text
    assert json.loads(cs("trace", t, "--json")[1])["requests"] == []


def test_trace_empty_and_unterminated(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    rc, text, _ = cs("trace", empty)
    assert rc == 0 and "total: 0 requests" in text and "malformed" not in text
    # A last line without '\n' (a writer killed mid-line, or not) still counts.
    t = tmp_path / "t.jsonl"
    t.write_text(ev(5.0, "r1", "request", api="chat", model="m", url="u", stream=False)
                 + "\n" + ev(6.0, "r1", "answer", status=200, curl_code=0, seconds=1.0))
    s = json.loads(cs("trace", t, "--json")[1])
    assert s["requests"][0]["status"] == 200 and s["malformed_lines"] == 0


def test_trace_long_line_is_skipped(tmp_path):
    t = tmp_path / "long.jsonl"
    with open(t, "w") as f:
        f.write(ev(1.0, "r1", "request", api="responses", model="m", url="u",
                   stream=False) + "\n")
        # Valid JSON, but over the 16 MiB line limit.
        f.write(ev(2.0, "r1", "exec", status="completed", seconds=1.0,
                   code="x" * (17 << 20)) + "\n")
        f.write(ev(3.0, "r1", "exec", status="completed", seconds=0.25,
                   code="print(1)") + "\n")
    s = json.loads(cs("trace", t, "--json")[1])
    assert s["malformed_lines"] == 1
    assert s["requests"][0]["executions"] == 1
    assert s["requests"][0]["exec"][0]["code"] == "print(1)"


def test_trace_long_code_and_control_chars_are_clipped(tmp_path):
    code = "\x1b[31m" + "y" * 500 + "\nsecond line"
    t = write_trace(tmp_path / "t.jsonl", [
        ev(1.0, "r1", "exec", status="completed", seconds=0.5, code=code)])
    rc, text, _ = cs("trace", t)
    line = [l for l in text.splitlines() if l.startswith("  exec")][0]
    assert "\x1b" not in text and "second line" not in text
    assert line.endswith("...") and len(line) < 120


def test_trace_from_stdin(tmp_path):
    data = "".join(l + "\n" for l in GOOD)
    rc, out, _ = cs("trace", "-", "--json", input=data)
    assert rc == 0 and json.loads(out)["totals"]["requests"] == 3


def test_trace_missing_file_is_1(tmp_path):
    rc, out, err = cs("trace", tmp_path / "nope.jsonl")
    assert rc == 1 and out == ""
    assert "nope.jsonl" in err and "No such file" in err


@pytest.mark.parametrize("args", [[], ["a", "b"], ["--csv", "a"]])
def test_trace_usage_errors_are_2(args):
    rc, _, err = cs("trace", *args)
    assert rc == 2
    assert "usage: codeshim trace" in err or "more than one FILE" in err


# ------------------------------------------------ install, manual, README

def test_install_and_uninstall_honour_prefix_and_destdir(tmp_path):
    dest, prefix = tmp_path / "dest", "/opt/cs"
    make = ["make", "-s", "--no-print-directory", "-C", REPO,
            "DESTDIR=%s" % dest, "PREFIX=%s" % prefix]
    rc, _, err = run(make + ["install"], preload=False, timeout=300)
    assert rc == 0, err
    root = dest / prefix.lstrip("/")
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert files == ["bin/codeshim", "lib/codeshim/codeshim-sessiond",
                     "lib/codeshim/libcodeshim.so", "share/man/man1/codeshim.1"]
    rc, out, err = cs("--", ENV_PROG, launcher=root / "bin" / "codeshim")
    assert rc == 0 and "LD_PRELOAD=%s/lib/codeshim/libcodeshim.so" % root in out, err
    (root / "bin" / "other").write_text("not codeshim's\n")
    rc, _, err = run(make + ["uninstall"], preload=False)
    assert rc == 0 and err == b"", err
    left = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert left == ["bin/other"]
    assert not (root / "lib" / "codeshim").exists()
    rc, _, err = run(make + ["uninstall"], preload=False)   # twice: nothing to do
    assert rc == 0 and err == b"", err


def readme():
    return (REPO / "README.md").read_text()


def man_section(title):
    text = (REPO / "doc" / "codeshim.1").read_text()
    start = text.index(".SH %s\n" % title)
    return text[start:text.index("\n.SH ", start + 1)]


def test_man_page_documents_every_setting_of_the_readme_table():
    table = readme().split("## Configuration")[1].split("\n## ")[0]
    names = set()
    for line in table.splitlines():
        m = re.match(r"\| `([A-Z0-9_]+)`(?: / `([A-Z0-9_]+)`)? \|", line)
        if m:
            names.update(n for n in m.groups() if n)
    assert len(names) > 40
    env = man_section("ENVIRONMENT")
    entries = set(re.findall(r"^\.TP\n\.BR? ([A-Z0-9_]+)(?: \", \" ([A-Z0-9_]+))?", env, re.M))
    documented = {n for pair in entries for n in pair if n}
    assert sorted(names - documented) == []


def test_man_page_documents_the_config_file_format():
    keys = re.search(r"Settings: (.*?); each takes", readme(), re.S).group(1)
    keys = re.findall(r"`([a-z_]+)`", re.sub(r"\([^)]*\)", "", keys))  # not (`local`, ...)
    # the YAML keys of the settings table (warm_spare went with the spare)
    assert "selectable" in keys and "warm_spare" not in keys and len(keys) == 19
    sect = man_section("NAMED SANDBOXES")
    for k in keys:
        assert re.search(r"^\.B %s$" % k, sect, re.M), k
    assert "os.environ/" in sect and "default: small" in sect


def test_readme_names_help_version_man_and_install():
    text = readme()
    for s in ("codeshim --help", "codeshim --version", "man doc/codeshim.1", "man codeshim",
              "make install", "make uninstall"):
        assert s in text, s
    first = text.splitlines()[:3]
    assert first[1].startswith("make demo") and first[2].startswith("make test")
