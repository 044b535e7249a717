"""Cassettes (CODESHIM_CASSETTE, CODESHIM_RECORD_MODE, CODESHIM_MATCH_IGNORE):
recorded against the fake upstream by the curl CLI under LD_PRELOAD, then
replayed in other runs with the network unreachable. A cassette matches on
the program's request and the loop's calls, never on codeshim's rewrite,
so it replays with a codeshim whose tool description differs."""

import json
import re
import shutil

import pytest

import schema_check
from conftest import LIB, REPO, run
from test_offline_replay_trace import (KEY, TWO_BLOCKS, chat_body, curl, dead_url, normalise,
                                       responses_body)

DESCRIPTION = b"Run Python 3 code in a stateful, Jupyter-notebook-like sandbox."
CHANGED = b"Run some Python code in a sandbox that keeps its state, please."
assert len(DESCRIPTION) == len(CHANGED)


def cas_env(path, mode=None, **extra):
    e = {"CODESHIM_CASSETTE": path}
    if mode:
        e["CODESHIM_RECORD_MODE"] = mode
    e.update(extra)
    return e


def exchanges(path):
    return json.loads(path.read_text())["exchanges"]


def sse_data(out):
    return [json.loads(l[6:]) for l in out.decode().splitlines()
            if l.startswith("data: ") and l != "data: [DONE]"]


def patched_library(tmp_path):
    """The library with its tool description changed: a codeshim whose
    rewrite differs, as a new version's may."""
    data = LIB.read_bytes()
    assert data.count(DESCRIPTION) == 1
    lib = tmp_path / "libcodeshim-changed.so"
    lib.write_bytes(data.replace(DESCRIPTION, CHANGED))
    return lib


CASES = [
    ("responses-json", "/responses", lambda: responses_body(TWO_BLOCKS), False),
    ("responses-sse", "/responses", lambda: responses_body(TWO_BLOCKS, True), True),
    ("chat-json", "/chat/completions", lambda: chat_body(TWO_BLOCKS), False),
    ("chat-sse", "/chat/completions", lambda: chat_body(TWO_BLOCKS, True), True),
]


@pytest.mark.parametrize("name,path,body,stream", CASES, ids=[c[0] for c in CASES])
def test_record_then_replay_offline(fake, tmp_path, name, path, body, stream):
    cas = tmp_path / "cas.json"
    rc, rec_out, err = curl(fake.url + path, body(), cas_env(cas), stream=stream)
    assert rc == 0, err
    ex = exchanges(cas)
    assert len(ex) == len(fake.requests()) == 3  # two executions, three model calls
    assert [e["request"]["path"] for e in ex] == ["/v1" + path] * 3
    assert [len(e["request"]["match"]["calls"]) for e in ex] == [0, 1, 2]
    assert oct(cas.stat().st_mode & 0o777) == "0o600"
    assert KEY not in cas.read_text()  # request headers are never written
    if stream:  # what came over the wire: the upstream's own SSE
        assert ex[0]["response"]["content_type"].startswith("text/event-stream")
    fake.stop()
    rc, out, err = curl(dead_url() + path, body(), cas_env(cas), stream=stream)
    assert rc == 0, err
    assert normalise(out) == normalise(rec_out)
    assert b"42" in out
    if not stream and path == "/responses":
        schema_check.validate(json.loads(out), "Response")
    if stream and path == "/responses":
        schema_check.validate_sse_responses(sse_data(out))
    assert len(exchanges(cas)) == 3  # `once` on an existing cassette records nothing


def test_a_changed_codeshim_still_replays(fake, tmp_path):
    cas = tmp_path / "cas.json"
    rec = tmp_path / "legacy"
    rc, out, err = curl(fake.url + "/responses", responses_body(TWO_BLOCKS),
                        cas_env(cas, CODESHIM_RECORD=rec))
    assert rc == 0, err
    sent = fake.requests()[0]["body"]
    assert DESCRIPTION.decode() in json.dumps(sent)
    fake.stop()
    lib = patched_library(tmp_path)
    env = {"LD_PRELOAD": lib, "CODESHIM_SESSIOND": REPO / "build" / "codeshim-sessiond"}
    # the body-keyed recording breaks with the changed rewrite ...
    rc, old, err = curl(dead_url() + "/responses", responses_body(TWO_BLOCKS),
                        dict(env, CODESHIM_REPLAY=rec))
    assert json.loads(old)["error"]["code"] == "replay_miss"
    # ... the cassette does not
    rc, new, err = curl(dead_url() + "/responses", responses_body(TWO_BLOCKS),
                        dict(env, **cas_env(cas)))
    assert rc == 0, err
    assert normalise(new) == normalise(out)


def test_ignored_fields_do_not_break_a_replay(fake, tmp_path):
    cas = tmp_path / "cas.json"

    def body(n):
        b = responses_body("```python\nprint(5)\n```")
        b["user"] = "user-%d" % n
        b["metadata"] = {"request_id": "rq-%d" % n, "team": "a"}
        return b

    ignore = {"CODESHIM_MATCH_IGNORE": "user, metadata.request_id"}
    rc, out, err = curl(fake.url + "/responses", body(1), cas_env(cas, **ignore))
    assert rc == 0, err
    fake.stop()
    rc, out2, err = curl(dead_url() + "/responses", body(2), cas_env(cas, **ignore))
    assert rc == 0 and b"5" in out2, err
    # the same recorded answer, with this request's own fields echoed
    assert json.loads(normalise(out2))["output"] == json.loads(normalise(out))["output"]
    assert json.loads(out2)["metadata"]["request_id"] == "rq-2"
    # without the setting the volatile field is a miss, named as such
    rc, out3, err = curl(dead_url() + "/responses", body(3), cas_env(cas))
    miss = json.loads(out3)["error"]
    assert miss["code"] == "replay_miss"
    assert "differs at request.metadata.request_id" in miss["message"], miss
    assert 'recorded (absent), this request "rq-3"' in miss["message"], miss
    # a field that is not ignored still has to match: the team
    b = body(4)
    b["metadata"]["team"] = "b"
    rc, out4, err = curl(dead_url() + "/responses", b, cas_env(cas, **ignore))
    assert "differs at request.metadata.team" in json.loads(out4)["error"]["message"]


def test_near_miss_names_the_nearest_exchange_and_field(fake, tmp_path):
    cas = tmp_path / "cas.json"
    for text in ("```python\nprint('apple')\n```", "```python\nprint('pear')\n```"):
        rc, out, err = curl(fake.url + "/responses", responses_body(text), cas_env(cas, "new"))
        assert rc == 0, err
    assert len(exchanges(cas)) == 4
    fake.stop()
    near = responses_body("```python\nprint('peach')\n```")
    rc, out, err = curl(dead_url() + "/responses", near, cas_env(cas))
    msg = json.loads(out)["error"]["message"]
    assert "record mode once" in msg  # an existing cassette: replay only
    assert "the nearest is exchange " in msg and " of 4, which differs at request.input" in msg
    assert "print('peach')" in msg, msg
    assert msg.encode() in err.replace(b'\\"', b'"') or b"nearest is exchange" in err


def test_mode_none_never_records(fake, tmp_path):
    cas = tmp_path / "absent.json"
    rc, out, err = curl(fake.url + "/responses", responses_body("```python\nprint(1)\n```"),
                        cas_env(cas, "none"))
    assert json.loads(out)["error"]["code"] == "replay_miss"
    assert fake.requests() == [] and not cas.exists()


def test_mode_once_replays_only_an_existing_cassette(fake, tmp_path):
    cas = tmp_path / "cas.json"
    one, two = (responses_body("```python\nprint(%d)\n```" % n) for n in (1, 2))
    assert curl(fake.url + "/responses", one, cas_env(cas, "once"))[0] == 0
    n = len(fake.requests())
    rc, out, err = curl(fake.url + "/responses", two, cas_env(cas, "once"))
    assert json.loads(out)["error"]["code"] == "replay_miss"
    assert len(fake.requests()) == n and len(exchanges(cas)) == 2


def test_mode_new_records_what_is_missing(fake, tmp_path):
    cas = tmp_path / "cas.json"
    one, two = (responses_body("```python\nprint(%d)\n```" % n) for n in (1, 2))
    assert curl(fake.url + "/responses", one, cas_env(cas, "new"))[0] == 0
    assert curl(fake.url + "/responses", one, cas_env(cas, "new"))[0] == 0
    assert len(fake.requests()) == 2  # the second run replayed
    assert curl(fake.url + "/responses", two, cas_env(cas, "new"))[0] == 0
    assert len(fake.requests()) == 4 and len(exchanges(cas)) == 4
    fake.stop()
    for b, logs in ((one, b"1\\n"), (two, b"2\\n")):
        rc, out, err = curl(dead_url() + "/responses", b, cas_env(cas, "none"))
        assert rc == 0 and logs in out, out


def test_mode_all_records_every_call(fake, tmp_path):
    cas = tmp_path / "cas.json"
    one = responses_body("```python\nprint(1)\n```")
    for _ in range(2):
        assert curl(fake.url + "/responses", one, cas_env(cas, "all"))[0] == 0
    assert len(fake.requests()) == 4 and len(exchanges(cas)) == 4


def test_a_folder_cassette_keeps_one_file_per_exchange(fake, tmp_path):
    cas = tmp_path / "cas"
    cas.mkdir()
    rc, out, err = curl(fake.url + "/responses", responses_body(TWO_BLOCKS), cas_env(cas))
    assert rc == 0, err
    assert sorted(p.name for p in cas.iterdir()) == ["0001.json", "0002.json", "0003.json"]
    fake.stop()
    rc, out2, err = curl(dead_url() + "/responses", responses_body(TWO_BLOCKS), cas_env(cas))
    assert rc == 0 and normalise(out2) == normalise(out), err


def test_a_session_replays(fake, tmp_path):
    """Two requests of one session; replayed in new runs on a runtime
    directory where the session never was, the code runs again in order
    and the state comes back."""
    from conftest import stop_supervisors
    cas = tmp_path / "cas.json"
    fresh = tmp_path / "runtime"
    first = responses_body("```python\nx = 20\nprint('set')\n```")
    second = responses_body("```python\nprint(x + 1)\n```")
    for b in (first, second):
        b["metadata"] = {"session_id": "cas-session"}
    outs = []
    for b in (first, second):
        rc, out, err = curl(fake.url + "/responses", b, cas_env(cas, "new"))
        assert rc == 0, err
        outs.append(out)
    assert b"21" in outs[1]
    fake.stop()
    try:
        for b, want in zip((first, second), outs):
            rc, out, err = curl(dead_url() + "/responses", b,
                                cas_env(cas, "none", CODESHIM_RUNTIME_DIR=fresh))
            assert rc == 0, err
            assert "output" in json.loads(out), out
            assert json.loads(out)["output"][-1] == json.loads(want)["output"][-1]
        assert b"21" in out
    finally:
        stop_supervisors(fresh)


def test_trace_says_where_each_exchange_came_from(fake, tmp_path):
    cas = tmp_path / "cas.json"
    trace = tmp_path / "t.jsonl"
    body = responses_body("```python\nprint(3)\n```")
    assert curl(fake.url + "/responses", body, cas_env(cas, CODESHIM_TRACE=trace))[0] == 0
    fake.stop()
    assert curl(dead_url() + "/responses", body, cas_env(cas, CODESHIM_TRACE=trace))[0] == 0
    ups = [json.loads(l) for l in trace.read_text().splitlines()]
    sources = [u["source"] for u in ups if u["event"] == "upstream"]
    assert sources == ["network, recorded as cassette %s #1" % cas,
                       "network, recorded as cassette %s #2" % cas,
                       "cassette %s #1" % cas, "cassette %s #2" % cas], sources
    rc, out, err = run([REPO / "build" / "codeshim", "trace", trace], preload=False)
    assert rc == 0, err
    assert ("upstream turn 1 answered by cassette %s #1" % cas).encode() in out, out
    assert ("upstream turn 2 answered by network, recorded as cassette %s #2" % cas).encode() \
        in out, out
