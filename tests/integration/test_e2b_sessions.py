"""Sessions on e2b. Each request is a separate run of the curl CLI,
and nothing of codeshim stays alive between runs (no codeshim-sessiond):
a session's sandbox is found again in e2b by its metadata, which holds only
hashes. Also: its timeout extended to the session TTL on each use, the
per-identity cap, the expiry note, and a vanished sandbox replaced."""

import json
import re
import time
import urllib.parse

import pytest

from e2b_helpers import KEY, ask, calls, e2b, env_for, logs, of  # noqa: F401


def creates(e):
    return [r for r in e.requests() if r["method"] == "POST" and r["path"] == "/sandboxes"]

HEX32 = re.compile(r"^[0-9a-f]{32}$")


@pytest.fixture
def rt(tmp_path):
    return tmp_path / "rt"


def run1(fake, e2b, code, rt, session="s1", key="sk-alice", **env):
    out, err = ask(fake.url, code, env_for(e2b, CODESHIM_RUNTIME_DIR=rt, **env),
                   session=session, key=key)
    return json.loads(out)


def no_supervisor(rt):
    return not list(rt.glob("**/pid")) and not list(rt.glob("**/sock"))


def test_state_survives_separate_program_runs(fake, e2b, rt):
    r1 = run1(fake, e2b, "a = 7", rt, CODESHIM_SESSION_TTL=600)
    assert no_supervisor(rt)
    (create,) = creates(e2b)
    md = create["body"]["metadata"]
    assert create["body"]["timeout"] == 600
    for k, v in md.items():  # only hashes, and a random nonce
        assert re.match(r"^[0-9a-f]{32}$", v), (k, v)
        assert "s1" not in v and "alice" not in v
    assert {"codeshim_owner", "codeshim_session", "codeshim_cntr"} <= set(md)
    (sid,) = e2b.sandboxes()
    e2b.clear()
    r2 = run1(fake, e2b, "print(a * 6)", rt, CODESHIM_SESSION_TTL=600)
    assert logs(r2) == "42\n"
    assert calls(r1)[0]["container_id"] == calls(r2)[0]["container_id"]
    # found by metadata, its access token from GET /sandboxes/{id}
    (lst,) = of(e2b, "GET", "/v2/sandboxes")
    q = urllib.parse.parse_qs(lst["query"])
    assert q["metadata"] == ["codeshim_session=" + md["codeshim_session"]]
    assert [g["path"] for g in of(e2b, "GET", "/sandboxes/")] == ["/sandboxes/" + sid]
    assert creates(e2b) == [] and of(e2b, "DELETE", "/") == []
    # the TTL is extended after the use
    (t,) = of(e2b, "POST", "/sandboxes/%s/timeout" % sid)
    assert t["body"] == {"timeout": 600}
    assert e2b.sandboxes()[sid]["endAt"] > time.time() + 500
    assert no_supervisor(rt)


def test_each_use_extends_the_timeout(fake, e2b, rt):
    r = json.loads(ask(fake.url, "a = 1", env_for(e2b, CODESHIM_RUNTIME_DIR=rt,
                                                  CODESHIM_SESSION_TTL=900),
                       session="s1", blocks=["a = 1", "a += 1", "print(a)"])[0])
    assert logs(r) == "2\n"
    ts = of(e2b, "POST", "/sandboxes/")
    assert [x["body"] for x in ts if x["path"].endswith("/timeout")] == [{"timeout": 900}] * 3


def test_other_key_other_sandbox(fake, e2b, rt):
    run1(fake, e2b, "a = 1", rt)
    r = run1(fake, e2b, "print(globals().get('a', 'none'))", rt, key="sk-bob")
    assert logs(r) == "none\n"
    assert len(creates(e2b)) == 2


def test_found_by_container_id_without_session(fake, e2b, rt):
    r1 = run1(fake, e2b, "b = 3", rt)
    cid = calls(r1)[0]["container_id"]
    e2b.clear()
    out, _ = ask(fake.url, "print(b)", env_for(e2b, CODESHIM_RUNTIME_DIR=rt), container=cid)
    r2 = json.loads(out)
    assert logs(r2) == "3\n" and calls(r2)[0]["container_id"] == cid
    (lst,) = of(e2b, "GET", "/v2/sandboxes")
    assert urllib.parse.parse_qs(lst["query"])["metadata"][0].startswith("codeshim_cntr=")
    assert of(e2b, "DELETE", "/") == []  # a session's sandbox is not killed


def test_unknown_container_gets_a_fresh_sandbox_and_a_note(fake, e2b, rt):
    old = "cntr_" + "0" * 48
    out, _ = ask(fake.url, "print(1)", env_for(e2b, CODESHIM_RUNTIME_DIR=rt), container=old)
    r = json.loads(out)
    assert "has expired" in logs(r) and old in logs(r)
    assert len(of(e2b, "DELETE", "/sandboxes/")) == 1  # a private one, killed


def test_cap_evicts_the_least_recently_used(fake, e2b, rt):
    run1(fake, e2b, "a = 1", rt, session="s1", CODESHIM_SESSION_CAP=2)
    (s1,) = e2b.sandboxes()
    run1(fake, e2b, "a = 2", rt, session="s2", CODESHIM_SESSION_CAP=2)
    (s2,) = set(e2b.sandboxes()) - {s1}
    run1(fake, e2b, "print(a)", rt, session="s1", CODESHIM_SESSION_CAP=2)  # s1 used last
    e2b.clear()
    run1(fake, e2b, "a = 3", rt, session="s3", CODESHIM_SESSION_CAP=2)
    (d,) = of(e2b, "DELETE", "/sandboxes/")
    assert d["path"] == "/sandboxes/" + s2
    owners = [l for l in of(e2b, "GET", "/v2/sandboxes") if "codeshim_owner" in l["query"]]
    assert owners  # counted from e2b's own list
    assert len(e2b.sandboxes()) == 2 and s1 in e2b.sandboxes()
    r = run1(fake, e2b, "print(a)", rt, session="s1", CODESHIM_SESSION_CAP=2)
    assert logs(r) == "1\n"


def test_vanished_session_sandbox_is_replaced_and_the_model_told(fake, e2b, rt):
    env = env_for(e2b, CODESHIM_RUNTIME_DIR=rt)
    r1 = json.loads(ask(fake.url, "a = 1", env, session="s1")[0])
    cid = calls(r1)[0]["container_id"]
    (sid,) = e2b.sandboxes()
    # gone between two program runs: the next run refers to it, finds
    # nothing in e2b's list, and gets a new one with the expiry note
    e2b.vanish(sid)
    r2 = json.loads(ask(fake.url, "print(globals().get('a', 'gone'))", env, session="s1",
                        container=cid)[0])
    assert "has expired" in logs(r2) and cid in logs(r2)
    assert logs(r2).endswith("gone\n")
    cid2 = calls(r2)[0]["container_id"]
    assert cid2 != cid and len(creates(e2b)) == 2
    # gone in the middle of a request (the proxy answers 502): replaced,
    # the model told, the code sent again only because it never ran
    e2b.vanish_after_exec = True
    e2b.clear()
    r3 = json.loads(ask(fake.url, "a = 2", env, session="s1",
                        blocks=["a = 2", "print(globals().get('a', 'gone'))"])[0])
    c1, c2 = calls(r3)
    text = c2["outputs"][0]["logs"]
    assert "had ended" in text and cid2 in text and text.endswith("gone\n")
    assert c2["container_id"] not in (cid, cid2)
    assert len(creates(e2b)) == 1 and len(of(e2b, "POST", "/execute")) == 3
    # and a later run finds the replacement by the session's metadata
    e2b.clear()
    r4 = json.loads(ask(fake.url, "print('again')", env, session="s1")[0])
    assert calls(r4)[0]["container_id"] == c2["container_id"] and creates(e2b) == []


def test_failed_lookup_is_said_and_tried_again(fake, e2b, rt):
    """A lookup that fails (here a 500) is a tool error for that call; the
    next execution looks again and finds the session, instead of making a
    second sandbox for it."""
    env = env_for(e2b, CODESHIM_RUNTIME_DIR=rt)
    ask(fake.url, "a = 1", env, session="s1")
    e2b.clear()
    e2b.fail("GET", r"^/v2/sandboxes$", 500, times=1)
    r = json.loads(ask(fake.url, "print(a)", env, session="s1",
                       blocks=["print(a)", "print(a + 1)"])[0])
    c1, c2 = calls(r)
    assert c1["status"] == "failed" and "HTTP 500" in c1["outputs"][0]["logs"]
    assert c2["outputs"][0]["logs"] == "2\n"
    assert creates(e2b) == [] and len(e2b.sandboxes()) == 1


def test_a_ttl_over_the_teams_maximum_is_clamped_to_it(fake, e2b, rt):
    """e2b caps a sandbox's life at the team's maximum (1 h on the hobby
    tier) and refuses a create over it with a 400: codeshim learns the
    maximum from that answer and sends nothing over it again."""
    e2b.max_timeout_s = 3600
    out, err = ask(fake.url, "a = 1", env_for(e2b, CODESHIM_RUNTIME_DIR=rt,
                                              CODESHIM_SESSION_TTL=7200),
                   session="s1", blocks=["a = 1", "print(a)"])
    r = json.loads(out)
    assert logs(r) == "1\n", r
    assert [c["body"]["timeout"] for c in creates(e2b)] == [7200, 3600]
    ts = [x["body"]["timeout"] for x in of(e2b, "POST", "/sandboxes/")
          if x["path"].endswith("/timeout")]
    assert ts == [3600, 3600]
    assert "at most 3600 s" in err and "7200" in err
    (sb,) = e2b.sandboxes().values()
    assert sb["endAt"] <= time.time() + 3600
    # a later program run remembers it (under the runtime directory): no
    # create over the maximum again, and no warning
    e2b.clear()
    out, err = ask(fake.url, "b = 2", env_for(e2b, CODESHIM_RUNTIME_DIR=rt,
                                              CODESHIM_SESSION_TTL=7200), session="s2")
    assert logs(json.loads(out)) == ""
    assert [c["body"]["timeout"] for c in creates(e2b)] == [3600] and "at most" not in err
    assert not any(KEY in p.read_text(errors="replace") for p in rt.rglob("*") if p.is_file())
    # no timeout e2b refuses is ever sent: none is 0 or over the maximum
    assert all(0 < q["body"]["timeout"] <= 3600 for q in e2b.requests()
               if isinstance(q["body"], dict) and "timeout" in q["body"])


def test_an_expired_session_sandbox_is_said_to_the_next_requests_model(fake, e2b, rt):
    """The session's sandbox ended at e2b (its timeout passed unused); the
    next request, with only the session id, gets a new one and its model
    is told the state was lost."""
    r1 = run1(fake, e2b, "a = 1", rt)
    cid = calls(r1)[0]["container_id"]
    (sid,) = e2b.sandboxes()
    e2b.expire(sid)
    r2 = run1(fake, e2b, "print(globals().get('a', 'gone'))", rt)
    text = logs(r2)
    assert "has ended" in text and cid in text and "are gone" in text, text
    assert text.endswith("gone\n")
    cid2 = calls(r2)[0]["container_id"]
    assert cid2 != cid and cid2 in text
    # the next run finds the new one: no note
    r3 = run1(fake, e2b, "print('again')", rt)
    assert logs(r3) == "again\n" and calls(r3)[0]["container_id"] == cid2


def test_the_cap_counts_every_page_of_e2bs_list(fake, e2b, rt):
    """e2b's list pages (X-Next-Token, sent back as nextToken): the cap
    counts the sandboxes of every page, so it holds past one page."""
    e2b.list_page_cap = 2
    for s in ("s1", "s2", "s3"):
        run1(fake, e2b, "a = 1", rt, session=s, CODESHIM_SESSION_CAP=3)
    first = min(e2b.sandboxes().items(), key=lambda kv: kv[1]["endAt"])[0]
    e2b.clear()
    run1(fake, e2b, "a = 4", rt, session="s4", CODESHIM_SESSION_CAP=3)
    assert len(e2b.sandboxes()) == 3 and first not in e2b.sandboxes()
    (d,) = of(e2b, "DELETE", "/sandboxes/")
    assert d["path"] == "/sandboxes/" + first
    pages = [urllib.parse.parse_qs(l["query"]) for l in of(e2b, "GET", "/v2/sandboxes")
             if "codeshim_owner" in l["query"]]
    assert len(pages) == 2 and "nextToken" not in pages[0] and pages[1]["nextToken"]
    for q in pages:  # the filter as e2b's SDKs build it: url-encoded k=v pairs
        assert q["metadata"][0].startswith("codeshim_owner=") and q["limit"] == ["100"]
    raw = [l["query"] for l in of(e2b, "GET", "/v2/sandboxes")]
    assert all(re.search(r"(^|&)metadata=codeshim_[a-z]+%3D[0-9a-f]{32}(&|$)", x) for x in raw)
