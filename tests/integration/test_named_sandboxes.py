"""Named sandbox configurations (CODESHIM_CONFIG): a YAML file names several
sandboxes, one is the default, and a request may pick another by name only
where the file allows it.  Each test runs the curl CLI under the library
against the model-mode fake upstream and checks which settings the code
ran under by what they do (output cap, execution timeout), what the
program received, and that a refused request never reached the upstream."""

import json

from test_core_responses import (CI_TOOL, blocks, bodies, ci_items, logs_of, ours,
                                 post_json, req)

CONFIG = """\
# two local sandboxes that differ in what they let code do
default: small
sandboxes:
  small:
    backend: local
    output_cap: 500
  roomy:
    backend: local
    output_cap: 50000
    selectable: true
  locked:
    backend: local
    timeout: 1
"""

LONG = "print('x' * 3000)\n"


def write(tmp_path, text, name="codeshim.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def logs_for(fake, body, env):
    [ci] = ci_items(ours(fake.url + "/responses", body, env=env))
    return logs_of(ci)


def test_default_sandbox_settings_apply(fake, tmp_path):
    env = {"CODESHIM_CONFIG": write(tmp_path, CONFIG)}
    logs = logs_for(fake, req(blocks(LONG)), env)
    assert "bytes of output truncated" in logs and len(logs.encode()) <= 500, logs


def test_request_picks_a_selectable_sandbox_by_metadata(fake, tmp_path):
    env = {"CODESHIM_CONFIG": write(tmp_path, CONFIG)}
    body = req(blocks(LONG), metadata={"codeshim_sandbox": "roomy"})
    assert logs_for(fake, body, env) == "x" * 3000 + "\n"
    # the choice is codeshim's business: the upstream never sees it
    for b in bodies(fake):
        assert "codeshim_sandbox" not in json.dumps(b)


def test_request_picks_by_container_name(fake, tmp_path):
    env = {"CODESHIM_CONFIG": write(tmp_path, CONFIG)}
    tool = dict(CI_TOOL, container="roomy")
    assert logs_for(fake, req(blocks(LONG), tools=[tool]), env) == "x" * 3000 + "\n"


def test_container_string_that_names_no_sandbox_is_not_an_error(fake, tmp_path):
    env = {"CODESHIM_CONFIG": write(tmp_path, CONFIG)}
    tool = dict(CI_TOOL, container="some-container-id")
    logs = logs_for(fake, req(blocks(LONG), tools=[tool]), env)
    assert len(logs.encode()) <= 500  # the default sandbox


def test_not_selectable_and_unknown_names_are_refused(fake, tmp_path):
    env = {"CODESHIM_CONFIG": write(tmp_path, CONFIG)}
    for name, why in (("locked", "not selectable"), ("nope", "not configured")):
        rc, st, r, _ = post_json(fake.url + "/responses",
                                 req(blocks(LONG), metadata={"codeshim_sandbox": name}), env=env)
        assert (rc, st) == (0, 400), (rc, st, r)
        assert r["error"]["type"] == "invalid_request_error"
        assert r["error"]["param"] == "metadata.codeshim_sandbox"
        assert why in r["error"]["message"] and name in r["error"]["message"], r
    tool = dict(CI_TOOL, container="locked")
    rc, st, r, _ = post_json(fake.url + "/responses", req(blocks(LONG), tools=[tool]), env=env)
    assert st == 400 and r["error"]["param"] == "tools.container", r
    assert fake.requests() == []


def test_naming_a_sandbox_without_a_config_file_is_refused(fake):
    rc, st, r, _ = post_json(fake.url + "/responses",
                             req(blocks(LONG), metadata={"codeshim_sandbox": "roomy"}))
    assert st == 400 and "CODESHIM_CONFIG is not set" in r["error"]["message"], r
    assert fake.requests() == []


def test_timeout_of_a_named_sandbox(fake, tmp_path):
    cfg = CONFIG.replace("    timeout: 1\n", "    timeout: 1\n    selectable: true\n")
    env = {"CODESHIM_CONFIG": write(tmp_path, cfg)}
    body = req(blocks("import time\ntime.sleep(30)\n"), metadata={"codeshim_sandbox": "locked"})
    [ci] = ci_items(ours(fake.url + "/responses", body, env=env, timeout=60))
    assert ci["status"] == "incomplete", ci


BROKEN = [
    ("default: small\nsandboxes:\n  small:\n    memory: lots\n", "line 4: memory=lots"),
    ("default: big\nsandboxes:\n  small: {}\n", "default names \"big\""),
    ("sandboxes:\n  a: {}\n  b: {}\n", "no \"default\""),
    ("sandboxes:\n  a:\n    colour: blue\n", "unknown setting \"colour\""),
    ("sandboxes:\n  a:\n    backend: docker\n", "backend \"docker\" is not one of"),
    ("sandboxes:\n  a:\n    selectable: maybe\n", "selectable must be true or false"),
    ("sandboxes:\n  a: [1]\n", "line 2"),
    ("sandboxes: {a: {backend: e2b, api_key: os.environ/CODESHIM_TEST_NO_SUCH_VAR}}\n",
     "CODESHIM_TEST_NO_SUCH_VAR, which is not set"),
]


def test_broken_file_is_a_clear_error_and_pass_through_still_works(fake, tmp_path):
    for i, (text, msg) in enumerate(BROKEN):
        env = {"CODESHIM_CONFIG": write(tmp_path, text, "c%d.yaml" % i)}
        rc, st, r, err = post_json(fake.url + "/responses", req(blocks("print(1)")), env=env)
        assert (rc, st) == (0, 500), (text, rc, st, r)
        assert r["error"]["code"] == "codeshim_config", r
        assert msg in r["error"]["message"], (msg, r)
        assert msg in err.decode(), err  # and logged
    assert fake.requests() == []
    # a request codeshim does not take over is untouched by the broken file
    plain = req("hello", tools=[{"type": "function", "name": "f", "parameters": {}}])
    rc, st, r, _ = post_json(fake.url + "/responses", plain, env=env)
    assert (rc, st) == (0, 200) and r["object"] == "response", r


def test_missing_file_is_an_error(fake, tmp_path):
    env = {"CODESHIM_CONFIG": tmp_path / "absent.yaml"}
    rc, st, r, _ = post_json(fake.url + "/responses", req(blocks("print(1)")), env=env)
    assert st == 500 and "cannot open it" in r["error"]["message"], r


def test_literal_key_never_echoed_in_errors(fake, tmp_path):
    secret = "e2b_literal_secret_0123456789"
    text = ("sandboxes:\n  a:\n    backend: e2b\n    api_key: %s\n    timeout: never\n" % secret)
    env = {"CODESHIM_CONFIG": write(tmp_path, text), "CODESHIM_LOG": "debug"}
    rc, st, r, err = post_json(fake.url + "/responses", req(blocks("print(1)")), env=env)
    assert st == 500 and "timeout=never" in r["error"]["message"], r
    assert secret not in json.dumps(r) and secret not in err.decode()


def test_check_lists_named_sandboxes(tmp_path):
    from conftest import REPO, run
    env = {"CODESHIM_CONFIG": write(tmp_path, CONFIG)}
    rc, out, _ = run([REPO / "build" / "codeshim", "--check"], env=env, preload=False,
                     timeout=120)
    text = out.decode()
    assert "small (default)" in text and "roomy" in text, text
    assert "locked (not selectable by requests)" in text, text
    env = {"CODESHIM_CONFIG": write(tmp_path, BROKEN[0][0], "bad.yaml")}
    rc, out, _ = run([REPO / "build" / "codeshim", "--check"], env=env, preload=False)
    assert rc == 1 and "BROKEN" in out.decode() and "line 4" in out.decode()


def test_a_request_picks_the_e2b_sandbox_of_the_file(fake, tmp_path):
    """The file names a local default and an e2b sandbox whose key comes
    from a named variable; the request that picks it runs on (fake) e2b with
    that key, the others locally; the key is never in the answer or log."""
    import fake_e2b
    from e2b_helpers import KEY as E2B_KEY
    e2b = fake_e2b.start(key=E2B_KEY)
    try:
        cfg = ("default: here\nsandboxes:\n  here: {backend: local}\n"
               "  cloud:\n    backend: e2b\n    api_key: os.environ/MY_E2B_KEY\n"
               "    api_url: %s\n    sandbox_url: %s\n    selectable: true\n"
               % (e2b.api_url, e2b.sandbox_url))
        env = {"CODESHIM_CONFIG": write(tmp_path, cfg), "MY_E2B_KEY": E2B_KEY,
               "CODESHIM_LOG": "debug"}
        code = "import os\nprint(os.path.isdir('/mnt/data') or 'no /mnt/data')\n"
        rc, st, r, err = post_json(fake.url + "/responses",
                                   req(blocks(code), metadata={"codeshim_sandbox": "cloud"}),
                                   env=env)
        assert (rc, st) == (0, 200), (r, err)
        creates = [q for q in e2b.requests() if q["method"] == "POST" and
                   q["path"] == "/sandboxes"]
        assert len(creates) == 1 and creates[0]["headers"]["x-api-key"] == E2B_KEY
        assert E2B_KEY not in json.dumps(r) and E2B_KEY not in err.decode()
        e2b.clear()
        ours(fake.url + "/responses", req(blocks(code)), env=env)  # the default: local
        assert e2b.requests() == []
    finally:
        e2b.stop()


# README's own example: a local default and an e2b sandbox whose key comes
# from E2B_API_KEY.  Without that variable only the e2b sandbox is unusable.
README_CONFIG = """\
default: small
sandboxes:
  small:   {backend: local, memory: 512M, timeout: 30}
  cloud:
    backend: e2b
    api_key: os.environ/E2B_API_KEY   # or the key itself
    template: code-interpreter-v1
    internet: false
    selectable: true
"""
UNSET_MSG = ('sandbox "cloud", line 6: api_key names the environment variable '
             'E2B_API_KEY, which is not set')


def test_unset_key_variable_breaks_only_its_sandbox(fake, tmp_path):
    env = {"CODESHIM_CONFIG": write(tmp_path, README_CONFIG), "E2B_API_KEY": None}
    [ci] = ci_items(ours(fake.url + "/responses", req(blocks("print(6*7)")), env=env))
    assert logs_of(ci) == "42\n"                     # the local default works
    fake.clear()
    rc, st, r, err = post_json(fake.url + "/responses",
                               req(blocks("print(1)"), metadata={"codeshim_sandbox": "cloud"}),
                               env=env)
    assert (rc, st) == (0, 500), (rc, st, r)
    assert r["error"]["code"] == "codeshim_config" and r["error"]["type"] == "server_error"
    assert UNSET_MSG in r["error"]["message"] and "cannot be used" in r["error"]["message"], r
    assert UNSET_MSG in err.decode()
    assert fake.requests() == []                     # never sent


def test_e2b_sandbox_without_any_key_is_unusable_alone(fake, tmp_path):
    cfg = ("default: here\nsandboxes:\n  here: {backend: local}\n"
           "  cloud: {backend: e2b, selectable: true}\n")
    env = {"CODESHIM_CONFIG": write(tmp_path, cfg), "E2B_API_KEY": None}
    ours(fake.url + "/responses", req(blocks("print(1)")), env=env)
    rc, st, r, _ = post_json(fake.url + "/responses",
                             req(blocks("print(1)"), metadata={"codeshim_sandbox": "cloud"}),
                             env=env)
    assert st == 500 and "an e2b sandbox needs api_key" in r["error"]["message"], r


def test_unusable_sandbox_error_is_logged_once_per_process(fake, tmp_path):
    """Three requests of one curl process pick the unusable sandbox: three
    500s, one log line (a request's own mistakes, 400s, are logged each)."""
    from conftest import run
    env = {"CODESHIM_CONFIG": write(tmp_path, README_CONFIG), "E2B_API_KEY": None}
    body = json.dumps(req(blocks("print(1)"), metadata={"codeshim_sandbox": "cloud"}))
    cmd = ["/usr/bin/curl", "-sS", "-H", "Content-Type: application/json"]
    for i in range(3):
        cmd += (["--next"] if i else []) + ["-H", "Content-Type: application/json",
                                           "-d", body, fake.url + "/responses"]
    rc, out, err = run(cmd, env=env)
    assert rc == 0, err
    assert out.decode().count('"codeshim_config"') == 3, out
    assert err.decode().count(UNSET_MSG) == 1, err
    assert fake.requests() == []


def test_broken_file_error_is_logged_once_per_process(fake, tmp_path):
    from conftest import run
    env = {"CODESHIM_CONFIG": write(tmp_path, BROKEN[0][0])}
    body = json.dumps(req(blocks("print(1)")))
    cmd = ["/usr/bin/curl", "-sS"]
    for i in range(2):
        cmd += (["--next"] if i else []) + ["-d", body, fake.url + "/responses"]
    rc, out, err = run(cmd, env=env)
    assert rc == 0 and out.decode().count('"codeshim_config"') == 2, out
    assert err.decode().count("line 4: memory=lots") == 1, err


def test_check_shows_an_unusable_sandbox(tmp_path):
    from conftest import REPO, run
    env = {"CODESHIM_CONFIG": write(tmp_path, README_CONFIG), "E2B_API_KEY": None}
    rc, out, _ = run([REPO / "build" / "codeshim", "--check"], env=env, preload=False,
                     timeout=120)
    text = out.decode()
    assert "small (default)" in text and "BROKEN" not in text, text
    assert "cloud UNUSABLE: " + UNSET_MSG in text, text
