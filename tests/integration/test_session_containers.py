"""Session containers and deletions: a session's container (and a request's own) is a
container of the Containers API like one made with POST /v1/containers.

OpenAI's flow: take the container_id of a code_interpreter_call, upload
to it with POST /v1/containers/{id}/files, send the next request. Every
step here is a separate program run (a curl process), on the local
backend (a session supervisor keeps the sandbox) and on the fake e2b (the
sandbox is found again in e2b). What an upload, a replacement or a file
deletion does reaches the running sandbox; a deleted container leaves no
byte readable, and the session's next request gets a new container and
is told."""

import json

import pytest

import re

from e2b_helpers import ask as ask_raw, calls, e2b, env_for, logs as all_logs, of  # noqa: F401
from test_containers_api import call, curl
from test_sessions import rt  # noqa: F401 (a fixture: stops what a test left running)

KEY = "sk-alice"
FILE_RES = "ContainerFileResource"


@pytest.fixture(params=["local", "e2b"])
def box(request, rt):
    """The backend: .env for every program run, .e2b the fake (or None)."""
    class Box:
        pass
    b = Box()
    b.kind = request.param
    if b.kind == "e2b":
        b.e2b = request.getfixturevalue("e2b")
        b.env = env_for(b.e2b, CODESHIM_RUNTIME_DIR=rt)
    else:
        b.e2b = None
        b.env = {"CODESHIM_RUNTIME_DIR": str(rt)}
    return b


def ask(fake, b, code, session=None, container=None):
    out, _ = ask_raw(fake.url, code, b.env, session=session, key=KEY, container=container)
    r = json.loads(out)
    assert calls(r), r
    return r


def logs(r):
    """The code's output, without the listing codeshim adds when /mnt/data
    changed."""
    return re.sub(r"^\[files in /mnt/data: [^\n]*\]\n", "", all_logs(r), flags=re.M)


def cid_of(r):
    [c] = {c["container_id"] for c in calls(r)}
    return c


def api(fake, b, path, *args, status=200, component=None):
    return call(list(args) + [fake.url + "/containers" + path], KEY, status=status,
                component=component, env=b.env)


def upload(fake, b, cid, path):
    f = api(fake, b, "/%s/files" % cid, "-F", "file=@%s" % path, component=FILE_RES)
    assert f["path"] == "/mnt/data/" + path.name and f["container_id"] == cid, f
    return f


def listed(fake, b, cid):
    return {f["path"]: f for f in api(fake, b, "/%s/files" % cid,
                                      component="ContainerFileListResource")["data"]}


LIST = "import os\nprint(sorted(os.listdir('/mnt/data')))\n"


def test_upload_to_a_sessions_container_reaches_its_next_request(fake, box, tmp_path):
    r1 = ask(fake, box, "print('hi')", session="up-1")
    cid = cid_of(r1)
    assert cid.startswith("cntr_")
    p = tmp_path / "upme.txt"
    p.write_text("uploaded bytes")
    if box.e2b:
        box.e2b.clear()
    upload(fake, box, cid, p)
    if box.e2b:  # at once, into the running sandbox
        assert [q["query"].split("path=")[1].split("&")[0]
                for q in of(box.e2b, "POST", "/files")] == ["/mnt/data/upme.txt"]
    r2 = ask(fake, box, LIST + "print(open('/mnt/data/upme.txt').read())", session="up-1")
    assert cid_of(r2) == cid
    assert logs(r2).endswith("['upme.txt']\nuploaded bytes\n"), logs(r2)
    assert "/mnt/data/upme.txt" in listed(fake, box, cid)


def test_replace_and_delete_files_of_a_running_sessions_container(fake, box, tmp_path):
    r1 = ask(fake, box, "open('/mnt/data/made.txt', 'w').write('by the code')\nv = 1",
             session="rd")
    cid = cid_of(r1)
    p = tmp_path / "d.txt"
    p.write_text("v1")
    upload(fake, box, cid, p)
    read = "print(open('/mnt/data/d.txt').read())"
    assert logs(ask(fake, box, read, session="rd")).endswith("v1\n")
    p.write_text("v2, longer")
    f2 = upload(fake, box, cid, p)
    r = ask(fake, box, read + "\nprint(v)", session="rd")
    assert "uploads replaced these files since the code last ran: /mnt/data/d.txt" in logs(r)
    assert logs(r).endswith("v2, longer\n1\n"), logs(r)  # the same sandbox, its state kept
    # deleting files through the API deletes them in the sandbox: an upload's
    # and one the code wrote
    made = listed(fake, box, cid)["/mnt/data/made.txt"]
    for f in (f2, made):
        d = api(fake, box, "/%s/files/%s" % (cid, f["id"]), "-X", "DELETE")
        assert d == {"id": f["id"], "object": "container.file.deleted", "deleted": True}
    r = ask(fake, box, LIST + "print(v)", session="rd")
    assert cid_of(r) == cid and logs(r).endswith("[]\n1\n"), logs(r)
    assert listed(fake, box, cid) == {}  # and not copied back from the sandbox
    api(fake, box, "/%s/files/%s/content" % (cid, f2["id"]), status=404)


def test_upload_to_a_finished_requests_container_then_a_request_naming_it(fake, box,
                                                                           tmp_path):
    r1 = ask(fake, box, "open('/mnt/data/first.txt', 'w').write('from request 1')")
    cid = cid_of(r1)
    p = tmp_path / "later.txt"
    p.write_text("uploaded after")
    upload(fake, box, cid, p)
    r2 = ask(fake, box, LIST + "print(open('/mnt/data/later.txt').read())", container=cid)
    assert cid_of(r2) == cid, r2
    text = logs(r2)
    assert text.endswith("['first.txt', 'later.txt']\nuploaded after\n"), text
    assert "has expired" in text and "with its files back in /mnt/data" in text
    # its sandbox is running now: a file deleted through the API leaves it
    f = listed(fake, box, cid)["/mnt/data/later.txt"]
    api(fake, box, "/%s/files/%s" % (cid, f["id"]), "-X", "DELETE")
    r3 = ask(fake, box, LIST, container=cid)
    assert cid_of(r3) == cid and logs(r3).endswith("['first.txt']\n"), logs(r3)


def test_deleted_sessions_container_leaves_nothing_and_the_session_gets_a_new_one(
        fake, box, tmp_path):
    r1 = ask(fake, box, "open('/mnt/data/secret.txt', 'w').write('s3cr3t')\nkept = 5\n"
             "print('[s](sandbox:/mnt/data/secret.txt)')", session="del-1")
    old = cid_of(r1)
    [f] = listed(fake, box, old).values()
    if box.e2b:
        [sid] = box.e2b.sandboxes()
        box.e2b.clear()
    d = api(fake, box, "/" + old, "-X", "DELETE")
    assert d == {"id": old, "object": "container.deleted", "deleted": True}
    if box.e2b:  # its sandbox is killed
        assert [q["path"] for q in of(box.e2b, "DELETE", "/sandboxes/")] == ["/sandboxes/" + sid]
        assert box.e2b.sandboxes() == {}
    # the old id: 404 for itself, its files and their bytes
    api(fake, box, "/" + old, status=404)
    api(fake, box, "/%s/files" % old, status=404)
    api(fake, box, "/%s/files/%s/content" % (old, f["id"]), status=404)
    # the session's next request: a new container, none of the old files or
    # state, and the model is told
    code = (LIST + "print(globals().get('kept', 'none'))\n"
            "open('/mnt/data/new.txt', 'w').write('fresh')\n"
            "print('[n](sandbox:/mnt/data/new.txt)')")
    r2 = ask(fake, box, code, session="del-1")
    new = cid_of(r2)
    assert new != old and new.startswith("cntr_")
    text = logs(r2)
    assert "s3cr3t" not in json.dumps(r2)
    assert "[Note: container %s was deleted" % old in text, text
    assert "[]\nnone\n" in text, text
    # what the new container's code writes is cited and downloadable again
    [msg] = [o for o in r2["output"] if o["type"] == "message"]
    [a] = msg["content"][0]["annotations"]
    assert a["container_id"] == new and a["filename"] == "new.txt"
    rc, st, _, body, _ = curl(["%s/containers/%s/files/%s/content" % (fake.url, new, a["file_id"])],
                              KEY, env=box.env)
    assert (st, body) == (200, b"fresh")
    # told once
    r3 = ask(fake, box, "print(2)", session="del-1")
    assert cid_of(r3) == new and "deleted" not in logs(r3)
    # naming the deleted container gets no byte of it either
    r4 = ask(fake, box, LIST, container=old)
    assert cid_of(r4) != old and "secret.txt" not in logs(r4)


def test_files_written_after_the_sandbox_was_replaced_are_the_new_containers(fake, e2b, rt):
    """A session's sandbox that vanishes in the middle of a request is
    replaced (a new container id): what the code writes after that is
    cited in, and downloadable from, the new container."""
    env = env_for(e2b, CODESHIM_RUNTIME_DIR=rt)
    out, _ = ask_raw(fake.url, "a = 1", env, session="v", key=KEY)
    old = cid_of(json.loads(out))
    e2b.vanish_after_exec = True
    out, _ = ask_raw(fake.url, "a = 2", env, session="v", key=KEY, blocks=[
        "a = 2", "open('/mnt/data/after.txt', 'w').write('after')\n"
        "print('[a](sandbox:/mnt/data/after.txt)')"])
    r = json.loads(out)
    c1, c2 = calls(r)
    new = c2["container_id"]
    assert c1["container_id"] == old and new != old
    [msg] = [o for o in r["output"] if o["type"] == "message"]
    [a] = msg["content"][0]["annotations"]
    assert a["container_id"] == new, a
    rc, st, _, body, _ = curl(["%s/containers/%s/files/%s/content" % (fake.url, new, a["file_id"])],
                              KEY, env=env)
    assert (st, body) == (200, b"after")
    b = type("B", (), {"env": env})
    assert "/mnt/data/after.txt" not in listed(fake, b, old)


def test_a_sandbox_left_running_for_a_deleted_container_is_never_used(fake, e2b, rt):
    """The kill at the deletion fails (e2b answers 500): the sandbox still
    runs, but the session's next request ends it instead of using it, and
    gets a new one, told of the deletion."""
    env = env_for(e2b, CODESHIM_RUNTIME_DIR=rt)
    out, _ = ask_raw(fake.url, "open('/mnt/data/s.txt', 'w').write('x')\nkept = 1", env,
                     session="k", key=KEY)
    old = cid_of(json.loads(out))
    [sid] = e2b.sandboxes()
    e2b.fail("DELETE", r"^/sandboxes/", 500, times=1)
    call(["-X", "DELETE", fake.url + "/containers/" + old], KEY, env=env)
    assert sid in e2b.sandboxes()  # left running
    e2b.clear()
    out, _ = ask_raw(fake.url, LIST + "print(globals().get('kept', 'none'))", env,
                     session="k", key=KEY)
    r = json.loads(out)
    assert cid_of(r) != old and sid not in e2b.sandboxes()
    assert [q["path"] for q in of(e2b, "DELETE", "/sandboxes/")] == ["/sandboxes/" + sid]
    assert not [q for q in of(e2b, "POST", "/execute", own=True) if q["sandbox"][1] == sid]
    text = logs(r)
    assert "[Note: container %s was deleted" % old in text and text.endswith("[]\nnone\n"), text


def test_an_explicit_containers_replaced_sandbox_gets_its_files_back(fake, e2b, rt, tmp_path):
    """The e2b sandbox of a container named in tools[].container vanishes in
    the middle of a request: the replacement keeps the container's id and,
    from the next execution on, has its files back (the model told)."""
    b = type("B", (), {"env": env_for(e2b, CODESHIM_RUNTIME_DIR=rt)})
    c = api(fake, b, "", "-H", "Content-Type: application/json", "-d", '{"name": "x"}',
            component="ContainerResource")
    p = tmp_path / "u.txt"
    p.write_text("kept file")
    upload(fake, b, c["id"], p)
    e2b.vanish_after_exec = True
    out, _ = ask_raw(fake.url, "print(1)", b.env, key=KEY, container=c["id"], blocks=[
        "print(1)", "print(2)", "print(open('/mnt/data/u.txt').read())"])
    c1, c2, c3 = calls(json.loads(out))
    assert {c1["container_id"], c2["container_id"], c3["container_id"]} == {c["id"]}
    second = c2["outputs"][0]["logs"]
    assert "with its files back in /mnt/data" in second, second
    assert re.findall(r"cntr_[0-9a-f]+", second) == [c["id"]], second  # its own id only
    assert c3["outputs"][0]["logs"].startswith("kept file"), c3


def test_deleting_a_file_never_goes_through_a_symlink(fake, box):
    """The code turns the directory of a stored file into a symlink to a
    directory outside /mnt/data holding a file of that name: deleting the
    stored file through the API removes nothing there."""
    out = "/tmp/cs-outside" if box.kind == "local" else "../outside"  # the sandbox's own
    r1 = ask(fake, box, "import os\nos.makedirs('/mnt/data/sub')\n"
             "open('/mnt/data/sub/keep.txt', 'w').write('in data')", session="ln")
    cid = cid_of(r1)
    f = listed(fake, box, cid)["/mnt/data/sub/keep.txt"]
    ask(fake, box, "import os, shutil\nshutil.rmtree('/mnt/data/sub')\n"
        "os.makedirs(os.path.join('/mnt/data', %r), exist_ok=True)\n"
        "open(os.path.join('/mnt/data', %r, 'keep.txt'), 'w').write('outside')\n"
        "os.symlink(%r, '/mnt/data/sub')" % (out, out, out), session="ln")
    api(fake, box, "/%s/files/%s" % (cid, f["id"]), "-X", "DELETE")
    r = ask(fake, box, "import os\nprint(open(os.path.join('/mnt/data', %r, 'keep.txt')).read(),"
            " os.path.islink('/mnt/data/sub'))" % out, session="ln")
    assert logs(r).endswith("outside True\n"), logs(r)
