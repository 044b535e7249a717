"""Files on the e2b backend: what the code writes in /mnt/data is read
back through envd's file API (GET /files, with the sandbox's access
token) and served by codeshim's Containers API; uploads and input files
are written through envd (POST /files) before the code runs. Against the
fake e2b (tests/fakes/fake_e2b.py), whose sandboxes' /mnt/data are
directories of the test process."""

import base64
import hashlib
import json
import re

import pytest

import fake_e2b
import schema_check
from e2b_helpers import KEY as E2B_KEY, e2b, e2b_tls, env_for, of  # noqa: F401
from test_containers_api import (CORE_KEY, call, create, curl, message_text_and_annotations,
                                 upload)
from test_core_responses import CI_TOOL, blocks, ci_items, ours, post_json, req

WRITE = ("import hashlib\n"
         "open('/mnt/data/t.csv', 'w').write('a,b\\n1,2\\n')\n"
         "open('/mnt/data/b.bin', 'wb').write(bytes(range(256)) * 40)\n"
         "for n in ('t.csv', 'b.bin'):\n"
         "    print(n, hashlib.sha256(open('/mnt/data/' + n, 'rb').read()).hexdigest())\n"
         "print('[t](sandbox:/mnt/data/t.csv) and [b](sandbox:/mnt/data/b.bin)')\n")


# envd before 0.5.7 takes only multipart/form-data uploads; a current one
# takes a raw body too (e2b-dev/infra packages/envd/internal/api/upload.go);
# None: e2b's answers say no envdVersion (the form every envd takes is used)
ENVDS = ["0.5.6", "0.5.8", None]


@pytest.fixture(params=ENVDS)
def envd(request, e2b):
    e2b.envd_version = request.param
    return request.param


def check_upload_form(posts, envd):
    """Each upload in the form the sandbox's envd takes, as e2b's SDK picks it."""
    for q in posts:
        ctype = q["headers"].get("content-type", "")
        if fake_e2b._version(envd) < fake_e2b.ENVD_OCTET_STREAM:
            assert ctype.startswith("multipart/form-data; boundary="), ctype
            assert 'name="file"' in q["raw"], q["raw"][:300]
        else:
            assert ctype == "application/octet-stream", ctype


def test_files_written_on_e2b_are_cited_and_downloadable(fake, e2b, envd, tmp_path):
    r = ours(fake.url + "/responses", req(blocks(WRITE)), env=env_for(e2b))
    [ci] = ci_items(r)
    logs = "".join(o["logs"] for o in ci["outputs"] if o["type"] == "logs")
    digests = dict(re.findall(r"^(t\.csv|b\.bin) ([0-9a-f]{64})$", logs, re.M))
    assert set(digests) == {"t.csv", "b.bin"}, logs
    assert "[files in /mnt/data: b.bin, t.csv]" in logs
    _, ann = message_text_and_annotations(r)
    assert sorted(a["filename"] for a in ann) == ["b.bin", "t.csv"]
    for a in ann:
        out = tmp_path / a["filename"]
        rc, code, _, _, _ = curl(["-o", out, "%s/containers/%s/files/%s/content" %
                                  (fake.url, a["container_id"], a["file_id"])], CORE_KEY)
        assert code == 200
        assert hashlib.sha256(out.read_bytes()).hexdigest() == digests[a["filename"]]
    gets = of(e2b, "GET", "/files")
    assert sorted(q["query"].split("path=")[1] for q in gets) == [
        "/mnt/data/b.bin", "/mnt/data/t.csv"]
    assert all(q["headers"].get("e2b-sandbox-port") == "49983" and q["headers"].get(
        "x-access-token") for q in gets)
    assert E2B_KEY not in json.dumps(r)


def test_upload_and_input_file_reach_the_e2b_sandbox(fake, e2b, envd, tmp_path):
    env = env_for(e2b)
    c = create(fake.url, "on e2b", key=CORE_KEY)
    p = tmp_path / "up.txt"
    p.write_text("uploaded")
    upload(fake.url, c["id"], p, key=CORE_KEY)
    body = req([{"role": "user", "content": [
        {"type": "input_text", "text": blocks(
            "print(open('/mnt/data/up.txt').read(), open('/mnt/data/in.txt').read())")},
        {"type": "input_file", "filename": "in.txt",
         "file_data": base64.b64encode(b"given").decode()}]}],
        tools=[dict(CI_TOOL, container=c["id"])])
    r = ours(fake.url + "/responses", body, env=env)
    [ci] = ci_items(r)
    assert "uploaded given" in ci["outputs"][0]["logs"], ci
    posts = of(e2b, "POST", "/files")
    assert sorted(q["query"].split("path=")[1] for q in posts) == [
        "/mnt/data/in.txt", "/mnt/data/up.txt"]
    assert all(q["headers"].get("x-access-token") for q in posts)
    check_upload_form(posts, envd)
    assert "cannot place" not in json.dumps(r)


def test_e2b_container_is_the_keys_own_and_deleting_it_ends_the_sandbox(fake, e2b, envd,
                                                                       tmp_path):
    env = env_for(e2b)
    code = ("import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
            "plt.plot([1, 2]); plt.savefig('/mnt/data/p.png'); plt.close('all')\n"
            "print('[p](sandbox:/mnt/data/p.png)')\n")
    c = create(fake.url, "e2b box", key=CORE_KEY)
    r = ours(fake.url + "/responses", req(blocks(code), tools=[dict(CI_TOOL, container=c["id"])]),
             env=env)
    [ci] = ci_items(r)
    assert ci["container_id"] == c["id"], ci
    _, [a] = message_text_and_annotations(r)
    rc, st, ctype, body, _ = curl(["%s/containers/%s/files/%s/content" %
                                   (fake.url, c["id"], a["file_id"])], CORE_KEY)
    assert (st, ctype) == (200, "image/png") and body.startswith(b"\x89PNG")
    # another key: the same 404 as for nothing
    for path in ("", "/files", "/files/" + a["file_id"] + "/content"):
        call([fake.url + "/containers/" + c["id"] + path], "sk-someone-else", status=404)
    [box] = {q["sandbox"][1] for q in of(e2b, "POST", "/execute")}
    e2b.clear()
    # an upload reaches the running e2b sandbox at once
    f = tmp_path / "late.txt"
    f.write_text("late")
    call(["-F", "file=@%s" % f, "%s/containers/%s/files" % (fake.url, c["id"])], CORE_KEY,
         env=env, component="ContainerFileResource")
    assert [q["query"].split("path=")[1] for q in of(e2b, "POST", "/files")] == [
        "/mnt/data/late.txt"]
    check_upload_form(of(e2b, "POST", "/files"), envd)
    (late,) = [s for s in e2b.sandboxes() if s == box]
    with open(e2b.sandboxes()[late]["root"] + "/mnt/data/late.txt") as fh:
        assert fh.read() == "late"
    # deleting the container ends its e2b sandbox and its files
    call(["-X", "DELETE", fake.url + "/containers/" + c["id"]], CORE_KEY, env=env)
    assert [q["path"] for q in of(e2b, "DELETE", "/sandboxes/")] == ["/sandboxes/" + box]
    assert box not in e2b.sandboxes()
    call([fake.url + "/containers/" + c["id"] + "/files"], CORE_KEY, status=404)
    assert fake.requests()[-1]["path"] == "/v1/responses"  # none of this went upstream


@pytest.mark.parametrize("status,message,said", [
    (507, "not enough disk space available", "not enough disk space"),
    # envd checks the sandbox's own access token (packages/envd/internal/api/
    # auth.go): its 401 is no reason to check E2B_API_KEY
    (401, "invalid access token", "the sandbox refused its access token (HTTP 401)")])
def test_a_file_that_cannot_be_placed_is_named_to_the_model_and_the_program(fake, e2b, status,
                                                                            message, said):
    """envd refusing an input file: the model hears which file and why (it
    is not in /mnt/data), and so does the program (a warning on stderr)."""
    e2b.fail("POST", r"^/files$", status, times=1, body={"code": status, "message": message})
    body = req([{"role": "user", "content": [
        {"type": "input_text", "text": blocks("import os\nprint(os.listdir('/mnt/data'))")},
        {"type": "input_file", "filename": "big.csv",
         "file_data": base64.b64encode(b"a,b\n").decode()}]}])
    rc, st, r, err = post_json(fake.url + "/responses", body, env=env_for(e2b))
    assert (rc, st) == (0, 200), (rc, st, r, err)
    schema_check.validate(r, "Response")
    err = err.decode(errors="replace")
    [ci] = ci_items(r)
    text = ci["outputs"][0]["logs"]
    assert "big.csv" in text and said in text, text
    assert "E2B_API_KEY" not in text
    assert text.rstrip().endswith("[]"), text
    assert re.search(r"big\.csv.*" + re.escape(said), err), err


@pytest.mark.parametrize("resolve", [False, True], ids=["ca", "ca+resolve"])
@pytest.mark.parametrize("envd_version", ENVDS[:2])
def test_containers_api_calls_to_e2b_carry_the_programs_ca(fake, e2b_tls, envd_version,
                                                            resolve, tmp_path):
    """Behind a private CA (both planes over TLS, as in e2b's cloud), the
    Containers API's own e2b calls use the CA the program gave curl (and
    its --resolve, for a domain only that makes reachable): an upload
    reaches the running sandbox at once, and deleting the container kills
    its sandbox."""
    e2b_tls.envd_version = envd_version
    env = env_for(e2b_tls, tls=True, E2B_API_URL=None)
    ca = ["--cacert", str(e2b_tls.ca)]
    if resolve:
        env["E2B_DOMAIN"] = "e2b.test:%d" % e2b_tls.tls_port
        ca += ["--resolve", "*:%d:127.0.0.1" % e2b_tls.tls_port]
    c = create(fake.url, "behind a CA", key=CORE_KEY)
    r = ours(fake.url + "/responses", req(blocks("print('up')"),
                                          tools=[dict(CI_TOOL, container=c["id"])]),
             env=env, extra=ca)
    assert ci_items(r)[0]["outputs"][0]["logs"] == "up\n"
    (box,) = e2b_tls.sandboxes()
    e2b_tls.clear()
    f = tmp_path / "late.txt"
    f.write_text("late")
    call(ca + ["-F", "file=@%s" % f, "%s/containers/%s/files" % (fake.url, c["id"])], CORE_KEY,
         env=env, component="ContainerFileResource")
    posts = of(e2b_tls, "POST", "/files")
    assert [q["query"].split("path=")[1] for q in posts] == ["/mnt/data/late.txt"]
    assert all(q["conn"].endswith("/tls") for q in e2b_tls.requests())
    if resolve:
        assert all(".e2b.test:" in q["host"] for q in e2b_tls.requests())
    check_upload_form(posts, envd_version)
    with open(e2b_tls.sandboxes()[box]["root"] + "/mnt/data/late.txt") as fh:
        assert fh.read() == "late"
    call(ca + ["-X", "DELETE", fake.url + "/containers/" + c["id"]], CORE_KEY, env=env)
    assert [q["path"] for q in of(e2b_tls, "DELETE", "/sandboxes/")] == ["/sandboxes/" + box]
    assert box not in e2b_tls.sandboxes()


TREE = ("import os\n"
        "for i in range(70):\n"
        "    os.makedirs('/mnt/data/d%02d' % i)\n"
        "    open('/mnt/data/d%02d/f' % i, 'w').write('x')\n"
        "for name, depth in (('ok', 16), ('deep', 17)):\n"
        "    d = '/mnt/data' + '/s' * depth\n"
        "    os.makedirs(d, exist_ok=True)\n"
        "    open(d + '/' + name, 'w').write('x')\n"
        "print('made')\n")


@pytest.mark.parametrize("backend", ["local", "e2b"])
def test_both_backends_list_mnt_data_alike(fake, e2b, backend):
    """One listing of /mnt/data for both backends (shim/sandbox/listing.py),
    with one set of caps: every one of 70 folders is looked into, and
    files 16 folders down are listed, not those 17 down."""
    env = env_for(e2b) if backend == "e2b" else None
    r = ours(fake.url + "/responses", req(blocks(TREE)), env=env)
    [ci] = ci_items(r)
    logs = "".join(o["logs"] for o in ci["outputs"] if o["type"] == "logs")
    names = ["d%02d/f" % i for i in range(70)] + ["s/" * 16 + "ok"]
    assert logs == "made\n[files in /mnt/data: %s]\n" % ", ".join(names), logs
