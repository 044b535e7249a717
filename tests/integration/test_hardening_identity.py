"""Issue 9: identity from every credential.

Sessions and continuations belong to an identity, a hash of every
credential the request carries: keys in the query string, URL userinfo,
-u, gateway headers, cookies, not only "Authorization: Bearer". Two
tenants whose keys travel anywhere else must never share one "anonymous"
session. Everything runs through the curl CLI under LD_PRELOAD against
the fake upstream on loopback."""

import base64
import json
import os

import pytest

from conftest import run, sse_json, stop_supervisors
from test_sessions import logs

CURL = "/usr/bin/curl"
CI = {"type": "code_interpreter", "container": {"type": "auto"}}


@pytest.fixture
def rt(tmp_path):
    d = tmp_path / "rt"
    yield d
    stop_supervisors(d)


def as_received(q):
    """A recorded request as text, with Basic credentials decoded."""
    auth = q["headers"].get("authorization", "")
    extra = base64.b64decode(auth[6:]).decode() if auth.startswith("Basic ") else ""
    return json.dumps(q) + extra


def assert_not_stored(root, *secrets):
    """No file name or content under root holds a secret (os.walk skips
    what a supervisor removes meanwhile)."""
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            assert not any(k in n for k in secrets), n
        for n in files:
            try:
                data = open(os.path.join(d, n), "rb").read()
            except OSError:
                continue
            assert not any(k.encode() in data for k in secrets), n


def body(code, session="s", **extra):
    b = {"model": "m", "input": "```python\n%s\n```" % code, "tools": [CI]}
    if session:
        b["metadata"] = {"session_id": session}
    b.update(extra)
    return b


def curl(url, b, rt, args=(), stream=False):
    """One curl CLI run; returns the answer (the last event's response when
    streaming)."""
    cmd = [CURL, "-sS", url, "-H", "Content-Type: application/json", *args,
           "-d", json.dumps(b)]
    if stream:
        cmd.insert(2, "-N")
    rc, out, err = run(cmd, env={"CODESHIM_RUNTIME_DIR": rt})
    assert rc == 0, err
    return sse_json(out)[-1][1]["response"] if stream else json.loads(out)


# ---------------- 1. identity from every credential ----------------

# Where a key travels: (name, function of (fake url, key) -> (url, curl args)).
LOCATIONS = [
    ("query api-key", lambda u, k: (u + "/responses?api-version=1&api-key=" + k, [])),
    ("query key", lambda u, k: (u + "/responses?key=" + k, [])),
    ("query access_token", lambda u, k: (u + "/responses?access_token=" + k, [])),
    ("query token", lambda u, k: (u + "/responses?token=" + k, [])),
    ("query sig", lambda u, k: (u + "/responses?sv=2024&sig=" + k, [])),
    ("query code", lambda u, k: (u + "/responses?code=" + k, [])),
    ("url userinfo", lambda u, k: (u.replace("http://", "http://tenant:%s@" % k) + "/responses", [])),
    ("-u userpwd", lambda u, k: (u + "/responses", ["-u", "tenant:" + k])),
    ("Ocp-Apim-Subscription-Key", lambda u, k: (u + "/responses",
                                                ["-H", "Ocp-Apim-Subscription-Key: " + k])),
    ("x-goog-api-key", lambda u, k: (u + "/responses", ["-H", "x-goog-api-key: " + k])),
    ("Authorization Basic", lambda u, k: (u + "/responses", [
        "-H", "Authorization: Basic " + base64.b64encode(b"tenant:" + k.encode()).decode()])),
    ("Authorization Token", lambda u, k: (u + "/responses", ["-H", "Authorization: Token " + k])),
    ("x-auth-token", lambda u, k: (u + "/responses", ["-H", "X-Auth-Token: " + k])),
    ("Cookie header", lambda u, k: (u + "/responses", ["-H", "Cookie: session=" + k])),
    ("-b cookie", lambda u, k: (u + "/responses", ["-b", "session=" + k])),
]


@pytest.mark.parametrize("where", [l[1] for l in LOCATIONS], ids=[l[0] for l in LOCATIONS])
def test_tenants_never_share_a_session(fake, rt, where):
    url_a, args_a = where(fake.url, "KEYAAAA")
    url_b, args_b = where(fake.url, "KEYBBBB")
    assert logs(curl(url_a, body("x = 1\nprint('set')"), rt, args_a)) == "set\n"
    r = curl(url_b, body("print(x)"), rt, args_b)
    assert "NameError" in logs(r)
    # ... and no request without any credential sees it either
    assert "NameError" in logs(curl(fake.url + "/responses", body("print(x)"), rt))
    assert logs(curl(url_a, body("print(x)"), rt, args_a)) == "1\n"
    # the upstream got each tenant's own credential, as the program sent it
    b_sent = as_received(fake.requests()[2])
    assert "KEYBBBB" in b_sent and "KEYAAAA" not in b_sent
    assert_not_stored(rt, "KEYAAAA", "KEYBBBB")  # hashed, never stored


def test_a_second_credential_never_rides_on_a_shared_key(fake, rt):
    """A gateway where the Bearer key is shared by everyone and each tenant
    has a key of its own in another header: separate identities."""
    shared = ["-H", "Authorization: Bearer sk-shared-gateway-key"]
    url = fake.url + "/responses"
    curl(url, body("x = 1"), rt, shared + ["-H", "x-goog-api-key: TENANT-A"])
    assert "NameError" in logs(curl(url, body("print(x)"), rt,
                                    shared + ["-H", "x-goog-api-key: TENANT-B"]))
    assert "NameError" in logs(curl(url, body("print(x)"), rt, shared))
    assert logs(curl(url, body("print(x)"), rt,
                     shared + ["-H", "x-goog-api-key: TENANT-A"])) == "1\n"


def test_bearer_identity_is_unchanged(fake, rt):
    """A plain Bearer key keeps the identity it always had: the same key in
    api-key (Azure) or x-api-key reaches the same session."""
    url = fake.url + "/responses"
    curl(url, body("x = 7"), rt, ["-H", "Authorization: Bearer sk-same"])
    assert logs(curl(url, body("print(x)"), rt, ["-H", "api-key: sk-same"])) == "7\n"
    assert logs(curl(url, body("print(x)"), rt, ["--oauth2-bearer", "sk-same"])) == "7\n"


def test_continuation_follows_the_query_string_key(fake, rt):
    """previous_response_id from key A (in the query string) is not
    usable by key B: B's request goes upstream as sent, A's is completed
    from A's stored state."""
    url_a = fake.url + "/responses?api-key=QKEYAAAA"
    url_b = fake.url + "/responses?api-key=QKEYBBBB"
    r = curl(url_a, body("print(6 * 7)", session=None, stream=True), rt, stream=True)
    assert r["status"] == "completed"
    follow = {"model": "m", "tools": [CI], "previous_response_id": r["id"], "input": "thanks"}
    rc, out, err = run([CURL, "-sS", url_b, "-H", "Content-Type: application/json",
                        "-d", json.dumps(follow)], env={"CODESHIM_RUNTIME_DIR": rt})
    assert rc == 0, err
    sent_b = fake.requests()[-1]
    assert "QKEYBBBB" in sent_b["query"]
    assert sent_b["body"]["previous_response_id"] == r["id"]  # A's state not applied
    r2 = curl(url_a, follow, rt)
    assert r2["status"] == "completed" and r2.get("error") is None, r2
    sent_a = fake.requests()[-1]["body"]
    assert sent_a["previous_response_id"] != r["id"]  # A's own state applied

