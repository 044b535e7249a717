"""Helpers shared by the e2b integration tests (test_e2b*.py): fixtures for
the fake e2b (tests/fakes/fake_e2b.py), the environment that selects the
e2b backend, one curl run asking the fake model to run code, and readers
of its answer."""

import json
import subprocess

import pytest

from conftest import run, sse_json

import fake_e2b

CURL = "/usr/bin/curl"
KEY = "e2b_test_key_5f0c1d2e3a4b"


def env_for(e, tls=False, **extra):
    """Environment selecting the e2b backend against fake e (shared host,
    or with tls=True the per-port hosts over TLS)."""
    env = {"CODESHIM_SANDBOX": "e2b", "E2B_API_KEY": KEY, "E2B_API_URL": e.api_url}
    if tls:
        env["E2B_DOMAIN"] = e.domain
    else:
        env["CODESHIM_E2B_SANDBOX_URL"] = e.sandbox_url
    env.update({k: None if v is None else str(v) for k, v in extra.items()})
    return env


@pytest.fixture
def e2b(tmp_path):
    """A fake e2b whose sandboxes' filesystems are directories of the test's own."""
    srv = fake_e2b.start(key=KEY, root=tmp_path / "e2b")
    try:
        yield srv
    finally:
        srv.stop()


def make_ca(d):
    """A CA and a certificate for *.e2b.localhost (and *.e2b.test, a name
    only the program's --resolve makes reachable) signed by it, made with
    /usr/bin/openssl in directory d. Returns (ca.pem, cert.pem, key.pem)."""
    def ossl(*args):
        subprocess.run(["/usr/bin/openssl"] + list(args), cwd=d, check=True,
                       capture_output=True, timeout=60)
    ossl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
         "-subj", "/CN=codeshim test CA")
    ossl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", "srv.key", "-out", "srv.csr", "-subj", "/CN=e2b.localhost")
    (d / "ext.cnf").write_text("subjectAltName=DNS:*.e2b.localhost,DNS:e2b.localhost,"
                               "DNS:*.e2b.test,DNS:e2b.test\n")
    ossl("x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
         "-CAcreateserial", "-out", "srv.pem", "-days", "2", "-extfile", "ext.cnf")
    return d / "ca.pem", d / "srv.pem", d / "srv.key"


@pytest.fixture
def e2b_tls(tmp_path):
    """A fake e2b that also serves the per-port hosts over TLS; .ca is the
    CA file the program must pass (curl --cacert)."""
    ca, cert, key = make_ca(tmp_path)
    srv = fake_e2b.start(key=KEY, tls=(str(cert), str(key)), root=tmp_path / "e2b")
    srv.ca = ca
    try:
        yield srv
    finally:
        srv.stop()


def body_for(code, api="responses", stream=False, session=None, blocks=None, container=None):
    text = "Just say hi." if code is None else "".join(
        "```python\n%s\n```\n" % c for c in (blocks or [code]))
    if api == "responses":
        b = {"model": "m", "input": text,
             "tools": [{"type": "code_interpreter", "container": {"type": "auto"}}]}
    else:
        b = {"model": "m", "messages": [{"role": "user", "content": text}],
             "tools": [{"type": "code_interpreter"}]}
    if stream:
        b["stream"] = True
    if container is not None:
        b["tools"][0]["container"] = container
    if session is not None:
        b["metadata"] = {"session_id": session}
    return b


def ask(url, code, env, api="responses", stream=False, session=None, key="sk-alice",
        curl_args=(), blocks=None, timeout=60, container=None):
    """One curl run under codeshim; returns (stdout bytes, stderr text)."""
    b = body_for(code, api, stream, session, blocks, container)
    path = "/responses" if api == "responses" else "/chat/completions"
    cmd = [CURL, "-sS", *curl_args, url + path, "-H", "Content-Type: application/json",
           "-H", "Authorization: Bearer " + key, "-d", json.dumps(b)]
    rc, out, err = run(cmd, env=env, timeout=timeout)
    assert rc == 0, err
    return out, err.decode("utf-8", "replace")


def final_response(out, stream=False):
    if not stream:
        return json.loads(out)
    evs = sse_json(out)
    done = [d for _, d in evs if isinstance(d, dict) and d.get("type") == "response.completed"]
    assert done, out
    return done[-1]["response"]


def calls(r):
    return [o for o in r["output"] if o["type"] == "code_interpreter_call"]


def logs(r):
    return "".join(o["logs"] for c in calls(r) for o in (c["outputs"] or [])
                   if o["type"] == "logs")


def chat_text(out, stream=False):
    if not stream:
        return json.loads(out)["choices"][0]["message"]["content"]
    return "".join((c["choices"][0]["delta"].get("content") or "")
                   for _, c in sse_json(out) if isinstance(c, dict) and c.get("choices"))


def of(e, method, path_prefix, own=False):
    """Requests the fake e2b received with that method and path prefix; an
    /execute of one of codeshim's own cells (making /mnt/data, listing it)
    only with own=True."""
    return [r for r in e.requests() if r["method"] == method and r["path"].startswith(path_prefix)
            and (own or not str((r["body"] or {}).get("code", "") if isinstance(r["body"], dict)
                                else "").startswith("# codeshim:"))]


