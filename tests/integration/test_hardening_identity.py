"""Identity from every credential, and no transport downgrade.

1. Sessions and continuations belong to an identity, a hash of every
   credential the request carries: keys in the query string, URL userinfo,
   -u / USERNAME + PASSWORD, gateway headers, cookies, not only
   "Authorization: Bearer". Two tenants whose keys travel anywhere else
   must never share one "anonymous" session.
2. A program handle that libcurl 7.88 cannot duplicate (COPYPOSTFIELDS
   without POSTFIELDSIZE) still gives upstream calls all of its transport
   settings (resolve, connect-to, Unix socket, proxy): never a fresh handle
   that drops them.

Everything runs through real programs (the curl CLI, progs/xferprog.c)
under LD_PRELOAD against the fake upstream on loopback."""

import base64
import json
import os
import select
import socket
import subprocess
import threading

import pytest

from conftest import REPO, run, sse_json, stop_supervisors
from test_sessions import logs

CURL = "/usr/bin/curl"
XFERPROG = REPO / "build" / "testprogs" / "xferprog"
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


@pytest.fixture(scope="module")
def xferprog():
    r = subprocess.run(["make", "-C", str(REPO), "build/testprogs/xferprog"],
                       capture_output=True)
    assert r.returncode == 0, r.stderr.decode()
    return XFERPROG


def xfer(prog, url, b, tmp_path, *opts, env=None, preload=True):
    bf = tmp_path / "body.json"
    bf.write_text(json.dumps(b))
    return run([prog, "--url", url, "--body-file", bf, *opts], env=env, preload=preload)


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


def test_username_and_password_options(fake, rt, tmp_path, xferprog):
    env = {"CODESHIM_RUNTIME_DIR": rt}
    url = fake.url + "/responses"

    def ask(code, password):
        rc, out, err = xfer(xferprog, url, body(code), tmp_path, "--username", "tenant",
                            "--password", password, env=env)
        assert rc == 0, err
        return logs(json.loads(out))

    assert ask("x = 1\nprint('set')", "PWAAAA") == "set\n"
    assert "NameError" in ask("print(x)", "PWBBBB")
    assert ask("print(x)", "PWAAAA") == "1\n"
    assert fake.requests()[0]["headers"]["authorization"].startswith("Basic ")


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


# ---------------- 2. no transport downgrade ----------------

class Relay:
    """Accepts on listener (TCP or Unix) and pipes each connection to the
    fake upstream on 127.0.0.1, so a host name or socket path reaches it
    only through the program's own transport options."""

    def __init__(self, listener, port):
        self.listener, self.port, self.accepted = listener, port, 0
        self.stopping = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stopping:
            try:
                c, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._pipe, args=(c,), daemon=True).start()

    def _pipe(self, c):
        u = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        try:
            while True:
                ready, _, _ = select.select([c, u], [], [], 30)
                if not ready:
                    return
                for s in ready:
                    data = s.recv(65536)
                    if not data:
                        return
                    (u if s is c else c).sendall(data)
        except OSError:
            return
        finally:
            c.close()
            u.close()

    def stop(self):
        self.stopping = True
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        self.thread.join(timeout=5)


@pytest.fixture
def refused_port():
    """A loopback port bound but never listening: connecting is refused,
    so only the program's transport options can reach the fake."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    yield s.getsockname()[1]
    s.close()


def resolve_case(fake, tmp_path, stack):
    # localhost:P would be refused on 127.0.0.1 and ::1; RESOLVE maps it to
    # 127.0.0.2:P, where the relay listens. No DNS is involved.
    lst = socket.socket()
    lst.bind(("127.0.0.2", 0))
    lst.listen(8)
    port = lst.getsockname()[1]
    for fam, addr in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        try:
            b = socket.socket(fam)
            b.bind((addr, port))
            stack.append(b)
        except OSError:
            if fam == socket.AF_INET:
                raise
    relay = Relay(lst, fake.port)
    stack.append(relay)
    url = "http://localhost:%d/v1/responses" % port
    return url, ["--resolve", "localhost:%d:127.0.0.2" % port], relay


def unix_case(fake, tmp_path, stack, refused):
    path = str(tmp_path / "up.sock")
    lst = socket.socket(socket.AF_UNIX)
    lst.bind(path)
    lst.listen(8)
    relay = Relay(lst, fake.port)
    stack.append(relay)
    return "http://127.0.0.1:%d/v1/responses" % refused, ["--unix-socket", path], relay


@pytest.mark.parametrize("how", ["resolve", "connect-to", "unix-socket", "proxy"])
def test_undupable_handle_keeps_transport_settings(fake, tmp_path, xferprog, refused_port,
                                                   how):
    stack = []
    relay = None
    try:
        dead = "http://127.0.0.1:%d/v1/responses" % refused_port
        if how == "resolve":
            url, opts, relay = resolve_case(fake, tmp_path, stack)
        elif how == "unix-socket":
            url, opts, relay = unix_case(fake, tmp_path, stack, refused_port)
        elif how == "connect-to":
            url, opts = dead, ["--connect-to", "127.0.0.1:%d:127.0.0.1:%d"
                               % (refused_port, fake.port)]
        else:
            url, opts = dead, ["--proxy", "http://127.0.0.1:%d" % fake.port]
        b = body("print(6 * 7)", session=None)
        # without codeshim the program reaches the fake this way (which
        # refuses the native tool: it plays a server without one)
        rc, out, err = xfer(xferprog, url, b, tmp_path, *opts, preload=False)
        assert rc == 0 and len(fake.requests()) == 1, err
        fake.clear()
        rc, out, err = xfer(xferprog, url, b, tmp_path, *opts,
                            "--header", "Authorization: Bearer sk-transport")
        assert rc == 0, err
        r = json.loads(out)
        assert r["status"] == "completed" and logs(r) == "42\n"
        sent = fake.requests()
        assert len(sent) == 2  # both model calls went the program's way
        for q in sent:
            assert q["headers"]["authorization"] == "Bearer sk-transport"
            assert "code_interpreter" not in json.dumps(q["body"]["tools"])
        if how == "proxy":
            assert all(q["path"] == dead for q in sent)  # absolute form: via the proxy
        if relay:
            assert relay.accepted >= 1
    finally:
        for s in stack:
            (s.stop if isinstance(s, Relay) else s.close)()


def test_program_handle_unchanged_after_the_loop(fake, tmp_path, xferprog, refused_port):
    """The same handle performed again (intercepted twice), then as a plain
    POST to another path: libcurl still sends the program's own copied body
    through the program's CONNECT_TO."""
    dead = "http://127.0.0.1:%d/v1" % refused_port
    b = body("print(6 * 7)", session=None)
    rc, out, err = xfer(xferprog, dead + "/responses", b, tmp_path,
                        "--connect-to", "127.0.0.1:%d:127.0.0.1:%d" % (refused_port, fake.port),
                        "--repeat", "2", "--then-url", dead + "/echo")
    assert rc == 0, err
    sent = fake.requests()
    assert len(sent) == 5  # two loops of two calls, then the plain POST
    last = sent[-1]
    assert last["method"] == "POST" and last["path"] == "/v1/echo"
    assert json.loads(last["raw"]) == b  # byte for byte what the program set

