"""OpenAI's Containers API, answered by codeshim for the containers it
issued: the curl CLI under the library against a fake upstream that must
receive nothing for codeshim's ids, and everything else untouched.  Every
answer is validated against OpenAI's schema; downloads are byte-exact,
through stdout and through `curl -o`; another API key sees the same 404 as
for a container that never existed; uploads are curl -F (a libcurl MIME
post) and hand-made multipart bodies; state survives across separate
program runs (each curl is a new process)."""

import json
import os

import pytest

import schema_check
from conftest import run

CURL = "/usr/bin/curl"
KEY_A = "sk-tenant-a-000111"
KEY_B = "sk-tenant-b-999888"


def curl(args, key=KEY_A, env=None, timeout=60):
    cmd = [CURL, "-sS", "-w", "\n%{http_code} %{content_type}"]
    if key:
        cmd += ["-H", "Authorization: Bearer " + key]
    rc, out, err = run(cmd + list(args), env=env, timeout=timeout)
    body, _, tail = out.rpartition(b"\n")
    code, _, ctype = tail.decode().partition(" ")
    return rc, int(code or 0), ctype, body, err


def call(args, key=KEY_A, status=200, component=None, **kw):
    rc, code, ctype, body, err = curl(args, key, **kw)
    assert (rc, code) == (0, status), (rc, code, body, err.decode(errors="replace"))
    j = json.loads(body)
    if component:
        schema_check.validate(j, component)
    if status >= 400:
        assert set(j) == {"error"} and j["error"]["type"], j
    return j


def create(url, name="box", key=KEY_A, **extra):
    body = dict({"name": name}, **extra)
    return call(["-H", "Content-Type: application/json", "-d", json.dumps(body),
                 url + "/containers"], key, component="ContainerResource")


def upload(url, cid, path, key=KEY_A, status=200):
    return call(["-F", "file=@%s" % path, "%s/containers/%s/files" % (url, cid)], key, status,
                component="ContainerFileResource" if status == 200 else None)


def test_create_get_list_delete(fake):
    a = create(fake.url, "first", expires_after={"anchor": "last_active_at", "minutes": 5},
               memory_limit="4g")
    assert a["id"].startswith("cntr_") and a["name"] == "first" and a["status"] == "running"
    assert a["expires_after"] == {"anchor": "last_active_at", "minutes": 5}
    assert a["memory_limit"] == "4g"
    b = create(fake.url, "second")
    assert b["expires_after"]["minutes"] == 20 and b["memory_limit"] == "1g"
    got = call([fake.url + "/containers/" + a["id"]], component="ContainerResource")
    assert got["id"] == a["id"] and got["name"] == "first"
    lst = call([fake.url + "/containers"], component="ContainerListResource")
    ids = [c["id"] for c in lst["data"]]
    assert ids.index(b["id"]) < ids.index(a["id"])  # newest first by default
    named = call([fake.url + "/containers?name=first"], component="ContainerListResource")
    assert [c["id"] for c in named["data"]] == [a["id"]]
    d = call(["-X", "DELETE", fake.url + "/containers/" + a["id"]])
    assert d == {"id": a["id"], "object": "container.deleted", "deleted": True}
    gone = call([fake.url + "/containers/" + a["id"]], status=404)
    assert a["id"] in gone["error"]["message"]
    assert a["id"] not in [c["id"] for c in call([fake.url + "/containers"])["data"]]
    assert fake.requests() == []  # nothing of this reached the upstream


def test_bad_create_bodies(fake):
    for body, param in (({}, "name"), ({"name": "x", "memory_limit": "3g"}, "memory_limit"),
                        ({"name": "x", "expires_after": {"anchor": "last_active_at",
                                                          "minutes": 0}},
                         "expires_after.minutes"),
                        ({"name": "x", "file_ids": "file_1"}, "file_ids")):
        j = call(["-H", "Content-Type: application/json", "-d", json.dumps(body),
                  fake.url + "/containers"], status=400)
        assert j["error"]["param"] == param, (body, j)
    j = call(["-d", "not json", fake.url + "/containers"], status=400)
    assert j["error"]["param"] == "name"
    assert fake.requests() == []


def test_upload_list_download_byte_exact(fake, tmp_path):
    c = create(fake.url)
    blob = tmp_path / "blob.bin"
    blob.write_bytes(os.urandom(700000) + b"\r\n--boundary-lookalike\r\n" + bytes(range(256)))
    csv = tmp_path / "table.csv"
    csv.write_text("a,b\n1,2\n")
    f1 = upload(fake.url, c["id"], blob)
    f2 = upload(fake.url, c["id"], csv)
    assert f1["path"] == "/mnt/data/blob.bin" and f1["bytes"] == blob.stat().st_size
    assert f1["source"] == "user" and f1["container_id"] == c["id"]
    assert f2["id"].startswith("cfile_") and f2["id"] != f1["id"]
    files = call(["%s/containers/%s/files" % (fake.url, c["id"])],
                 component="ContainerFileListResource")
    assert [f["id"] for f in files["data"]] == [f2["id"], f1["id"]]
    meta = call(["%s/containers/%s/files/%s" % (fake.url, c["id"], f1["id"])],
                component="ContainerFileResource")
    assert meta == f1
    rc, code, ctype, body, _ = curl(["%s/containers/%s/files/%s/content" %
                                     (fake.url, c["id"], f1["id"])])
    assert (rc, code, ctype) == (0, 200, "application/octet-stream")
    assert body == blob.read_bytes()
    out = tmp_path / "down.csv"
    rc, code, ctype, body, _ = curl(["-o", out, "%s/containers/%s/files/%s/content" %
                                     (fake.url, c["id"], f2["id"])])
    assert (rc, code, ctype) == (0, 200, "text/csv") and out.read_bytes() == b"a,b\n1,2\n"
    # the same name again replaces the file (a new id)
    csv.write_text("a,b\n3,4\n")
    f3 = upload(fake.url, c["id"], csv)
    files = call(["%s/containers/%s/files" % (fake.url, c["id"])])
    assert sorted(f["id"] for f in files["data"]) == sorted([f1["id"], f3["id"]])
    call(["%s/containers/%s/files/%s" % (fake.url, c["id"], f2["id"])], status=404)
    d = call(["-X", "DELETE", "%s/containers/%s/files/%s" % (fake.url, c["id"], f3["id"])])
    assert d == {"id": f3["id"], "object": "container.file.deleted", "deleted": True}
    call(["%s/containers/%s/files/%s/content" % (fake.url, c["id"], f3["id"])], status=404)
    assert fake.requests() == []


def test_hand_made_multipart_body(fake, tmp_path):
    c = create(fake.url)
    body = (b"--XyZ\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nx\r\n"
            b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; "
            b"filename=\"C:\\\\Users\\\\me\\\\notes.txt\"\r\n\r\nhello\r\n--XyZ--\r\n")
    p = tmp_path / "body"
    p.write_bytes(body)
    f = call(["-H", "Content-Type: multipart/form-data; boundary=XyZ", "--data-binary",
              "@%s" % p, "%s/containers/%s/files" % (fake.url, c["id"])],
             component="ContainerFileResource")
    assert f["path"] == "/mnt/data/notes.txt" and f["bytes"] == 5


def test_unsafe_or_malformed_uploads_leave_nothing(fake, tmp_path):
    c = create(fake.url)
    files_url = "%s/containers/%s/files" % (fake.url, c["id"])
    bad = [
        (b"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"..\"\r\n\r\nx"
         b"\r\n--b--\r\n", "unsafe"),
        (b"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\x01b\"\r\n\r\nx"
         b"\r\n--b--\r\n", "unsafe"),
        (b"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"t.txt\"\r\n\r\n"
         b"truncated, no closing delimiter", "multipart"),
        (b"--b\r\nContent-Disposition: form-data; name=\"other\"\r\n\r\nx\r\n--b--\r\n",
         "multipart"),
    ]
    for i, (body, why) in enumerate(bad):
        p = tmp_path / ("b%d" % i)
        p.write_bytes(body)
        j = call(["-H", "Content-Type: multipart/form-data; boundary=b", "--data-binary",
                  "@%s" % p, files_url], status=400)
        assert j["error"]["param"] == "file" and why in j["error"]["message"], j
    big = tmp_path / "big.bin"
    big.write_bytes(b"x" * 5000)
    j = call(["-F", "file=@%s" % big, files_url], status=400, env={"CODESHIM_FILE_MAX": "4K"})
    assert "CODESHIM_FILE_MAX" in j["error"]["message"]
    assert call([files_url])["data"] == []


def test_disk_budget_per_api_key(fake, tmp_path):
    env, key = {"CODESHIM_FILES_DISK": "1M"}, "sk-budget-" + os.urandom(6).hex()
    c, c2 = create(fake.url, key=key), create(fake.url, "other", key=key)
    blob = tmp_path / "x.bin"
    blob.write_bytes(b"y" * 600000)
    call(["-F", "file=@%s" % blob, "%s/containers/%s/files" % (fake.url, c["id"])], key,
         env=env, component="ContainerFileResource")
    # the budget is the key's, across its containers
    j = call(["-F", "file=@%s" % blob, "%s/containers/%s/files" % (fake.url, c2["id"])], key,
             status=400, env=env)
    assert "CODESHIM_FILES_DISK" in j["error"]["message"]
    assert call(["%s/containers/%s/files" % (fake.url, c2["id"])], key)["data"] == []
    # replacing the same file fits: it is counted once
    call(["-F", "file=@%s" % blob, "%s/containers/%s/files" % (fake.url, c["id"])], key, env=env)
    # another key has a budget of its own
    other = "sk-budget-other-" + os.urandom(6).hex()
    c3 = create(fake.url, key=other)
    call(["-F", "file=@%s" % blob, "%s/containers/%s/files" % (fake.url, c3["id"])], other,
         env=env, component="ContainerFileResource")


def test_other_api_key_gets_404_like_a_missing_container(fake, tmp_path):
    c = create(fake.url, key=KEY_A)
    p = tmp_path / "s.txt"
    p.write_text("secret of A")
    f = upload(fake.url, c["id"], p, key=KEY_A)
    missing = "cntr_" + "0" * 48
    mine = call([fake.url + "/containers/" + c["id"]], key=KEY_B, status=404)
    # an id codeshim never issued goes to the upstream: the fake answers its own 404
    for path in ("", "/files", "/files/" + f["id"], "/files/" + f["id"] + "/content"):
        j = call([fake.url + "/containers/" + c["id"] + path], key=KEY_B, status=404)
        assert "secret" not in json.dumps(j)
    for args in (["-X", "DELETE", fake.url + "/containers/" + c["id"]],
                 ["-X", "DELETE", "%s/containers/%s/files/%s" % (fake.url, c["id"], f["id"])],
                 ["-F", "file=@%s" % p, "%s/containers/%s/files" % (fake.url, c["id"])]):
        call(args, key=KEY_B, status=404)
    assert c["id"] not in json.dumps(call([fake.url + "/containers"], key=KEY_B))
    assert mine["error"]["message"] == "No container found with id '%s'." % c["id"]
    assert fake.requests() == []
    # and A still has it all
    rc, code, _, body, _ = curl(["%s/containers/%s/files/%s/content" %
                                 (fake.url, c["id"], f["id"])], key=KEY_A)
    assert (code, body) == (200, b"secret of A")
    # a foreign id is the upstream's business, untouched
    rc, code, _, body, _ = curl([fake.url + "/containers/" + missing])
    assert [q["path"] for q in fake.requests()] == ["/v1/containers/" + missing]


def test_pagination(fake):
    made = [create(fake.url, "p%d" % i)["id"] for i in range(5)]
    seen, after = [], None
    while True:
        q = "?limit=2&order=asc" + ("&after=" + after if after else "")
        page = call([fake.url + "/containers" + q], component="ContainerListResource")
        seen += [c["id"] for c in page["data"]]
        if not page["has_more"]:
            break
        assert page["last_id"] == page["data"][-1]["id"]
        after = page["last_id"]
    assert [i for i in seen if i in made] == made
    j = call([fake.url + "/containers?limit=0"], status=400)
    assert j["error"]["param"] == "limit"
    j = call([fake.url + "/containers?order=sideways"], status=400)
    assert j["error"]["param"] == "order"


def test_expired_container_is_gone(fake, tmp_path):
    c = create(fake.url, expires_after={"anchor": "last_active_at", "minutes": 1})
    from conftest import RUNTIME_DIR
    import glob
    metas = [m for m in glob.glob(str(RUNTIME_DIR) + "*/containers/*/meta")
             if c["id"] in open(m).read()]
    assert len(metas) == 1
    old = os.stat(metas[0]).st_mtime - 120
    os.utime(metas[0], (old, old))
    call([fake.url + "/containers/" + c["id"]], status=404)
    assert fake.requests() == []  # still codeshim's id: not sent upstream


def test_runtime_dir_holds_no_key(fake, tmp_path):
    c = create(fake.url)
    p = tmp_path / "k.txt"
    p.write_text("data")
    upload(fake.url, c["id"], p)
    from conftest import RUNTIME_DIR
    for root, _, names in os.walk(str(RUNTIME_DIR)):
        for n in names:
            try:
                data = open(os.path.join(root, n), "rb").read()
            except OSError:
                continue
            assert KEY_A.encode() not in data and KEY_A.encode() not in n.encode()


# ------------------------------------------------- files the code wrote, and files it reads

import hashlib
import re

from test_core_responses import CI_TOOL, KEY as CORE_KEY, blocks, ci_items, ours, post_json, req  # noqa: E402,E501

WRITE_BOTH = (
    "import hashlib, matplotlib\n"
    "matplotlib.use('Agg')\n"
    "import matplotlib.pyplot as plt\n"
    "open('/mnt/data/table.csv', 'w').write('x,y\\n' + ''.join('%d,%d\\n' % (i, i * i) "
    "for i in range(50)))\n"
    "plt.plot([1, 2, 3]); plt.savefig('/mnt/data/plot.png'); plt.close()\n"
    "for n in ('table.csv', 'plot.png'):\n"
    "    print(n, hashlib.sha256(open('/mnt/data/' + n, 'rb').read()).hexdigest())\n"
    "print('See [the table](sandbox:/mnt/data/table.csv) and sandbox:/mnt/data/plot.png.')\n")


def message_text_and_annotations(r):
    [msg] = [o for o in r["output"] if o["type"] == "message"]
    [part] = msg["content"]
    return part["text"], part["annotations"]


def test_code_writes_csv_and_png_downloaded_byte_exact(fake, tmp_path):
    r = ours(fake.url + "/responses", req(blocks(WRITE_BOTH)))
    [ci] = ci_items(r)
    digests = dict(re.findall(r"^(table\.csv|plot\.png) ([0-9a-f]{64})$",
                              "".join(o["logs"] for o in ci["outputs"] if o["type"] == "logs"),
                              re.M))
    assert set(digests) == {"table.csv", "plot.png"}, ci
    text, ann = message_text_and_annotations(r)
    assert [a["filename"] for a in ann] == ["table.csv", "plot.png"], ann
    for a in ann:
        assert a["type"] == "container_file_citation" and a["container_id"] == ci["container_id"]
        span = text[a["start_index"]:a["end_index"]]
        assert span.endswith(a["filename"] + ")") or span.endswith(a["filename"]), (span, a)
    # two more programs: the download, byte-exact, with another curl each
    for a in ann:
        out = tmp_path / a["filename"]
        rc, code, ctype, _, _ = curl(["-o", out, "%s/containers/%s/files/%s/content" %
                                      (fake.url, a["container_id"], a["file_id"])], CORE_KEY)
        assert (rc, code) == (0, 200)
        assert hashlib.sha256(out.read_bytes()).hexdigest() == digests[a["filename"]]
        assert ctype == ("text/csv" if a["filename"].endswith(".csv") else "image/png")
    lst = call(["%s/containers/%s/files" % (fake.url, ci["container_id"])], CORE_KEY,
               component="ContainerFileListResource")
    assert {f["path"] for f in lst["data"]} == {"/mnt/data/table.csv", "/mnt/data/plot.png"}
    assert {f["source"] for f in lst["data"]} == {"assistant"}
    # the request's container is listed, and is another key's 404
    assert ci["container_id"] in [c["id"] for c in call([fake.url + "/containers"],
                                                        CORE_KEY)["data"]]
    call(["%s/containers/%s/files/%s/content" % (fake.url, ci["container_id"],
                                                 ann[0]["file_id"])], key=KEY_B, status=404)


def test_uploaded_file_is_read_by_the_sessions_code(fake, tmp_path):
    c = create(fake.url, "data work", key=CORE_KEY)
    csv = tmp_path / "sales.csv"
    csv.write_text("region,amount\nnorth,10\nsouth,32\n")
    upload(fake.url, c["id"], csv, key=CORE_KEY)
    code = ("import csv\nrows = list(csv.DictReader(open('/mnt/data/sales.csv')))\n"
            "print(sum(int(r['amount']) for r in rows))\n")
    tool = dict(CI_TOOL, container=c["id"])
    r = ours(fake.url + "/responses", req(blocks(code), tools=[tool]))
    [ci] = ci_items(r)
    assert ci["container_id"] == c["id"], ci
    assert "42" in ci["outputs"][0]["logs"], ci
    # a second upload lands in the running sandbox at once
    more = tmp_path / "more.txt"
    more.write_text("later")
    upload(fake.url, c["id"], more, key=CORE_KEY)
    r = ours(fake.url + "/responses",
             req(blocks("x = 1\nprint(open('/mnt/data/more.txt').read(), len(rows))\n"),
                 tools=[tool]))
    assert "later 2" in ci_items(r)[0]["outputs"][0]["logs"]
    # another key naming the same container gets a sandbox of its own
    r = ours(fake.url + "/responses", req(blocks("import os\nprint(os.listdir('/mnt/data'))\n"),
                                          tools=[tool]),
             env={"OPENAI_API_KEY": KEY_B}, extra=("-H", "Authorization: Bearer " + KEY_B))
    [ci_b] = ci_items(r)
    assert ci_b["container_id"] != c["id"] and "sales.csv" not in ci_b["outputs"][0]["logs"]
    # deleting the container ends its sandbox and files
    call(["-X", "DELETE", fake.url + "/containers/" + c["id"]], CORE_KEY)
    r = ours(fake.url + "/responses", req(blocks("print(sorted(globals()).count('rows'))\n"),
                                          tools=[tool]))
    [ci] = ci_items(r)
    assert ci["container_id"] != c["id"]
    assert "0" in ci["outputs"][-1]["logs"] or "expired" in ci["outputs"][-1]["logs"], ci


def test_streamed_answer_carries_the_same_annotations(fake):
    """Live streaming (the upstream streams too) and the fallback (it
    answers JSON): annotation.added before output_text.done, and the part,
    the item and response.completed carry them."""
    from conftest import parse_sse
    from test_core_responses import curl_post
    code = ("open('/mnt/data/out.txt', 'w').write('streamed')\n"
            "print('Here: [out](sandbox:/mnt/data/out.txt)')\n")
    for headers in ((), ("X-Fake-No-Stream: 1",)):
        rc, out, err = curl_post(fake.url + "/responses", req(blocks(code), stream=True),
                                 extra=["-N"], headers=headers)
        assert rc == 0, err
        events = [json.loads(d) for _, d in parse_sse(out) if d and d != "[DONE]"]
        schema_check.validate_sse_responses(events)
        types = [e["type"] for e in events]
        added = [e for e in events if e["type"] == "response.output_text.annotation.added"]
        assert len(added) == 1, (headers, types)
        a = added[0]["annotation"]
        assert a["type"] == "container_file_citation" and a["filename"] == "out.txt"
        done = [i for i, t in enumerate(types) if t == "response.output_text.done"][-1]
        assert types.index("response.output_text.annotation.added") < done
        [part_done] = [e for e in events if e["type"] == "response.content_part.done"
                       and e["part"].get("text", "").startswith("Done.")]
        assert part_done["part"]["annotations"] == [a]
        final = events[-1]["response"]
        [msg] = [o for o in final["output"] if o["type"] == "message"]
        assert msg["content"][0]["annotations"] == [a], msg
        rc, code_, _, body, _ = curl(["%s/containers/%s/files/%s/content" %
                                      (fake.url, a["container_id"], a["file_id"])], CORE_KEY)
        assert (code_, body) == (200, b"streamed")


# ------------------------------------------------- files the request brings

import base64  # noqa: E402

from test_core_responses import code_call_reply, text_reply  # noqa: E402


def test_input_file_data_is_in_mnt_data(fake):
    data = b"n\n1\n2\n39\n"
    body = req([{"role": "user", "content": [
        {"type": "input_text", "text": blocks(
            "print(sum(int(x) for x in open('/mnt/data/numbers.csv').read().split()[1:]))")},
        {"type": "input_file", "filename": "numbers.csv",
         "file_data": "data:text/csv;base64," + base64.b64encode(data).decode()}]}])
    r = ours(fake.url + "/responses", body)
    [ci] = ci_items(r)
    assert "42" in ci["outputs"][0]["logs"], ci
    # the model was told where the file is
    [tool] = [t for t in fake.requests()[0]["body"]["tools"] if t.get("name") == "python"]
    assert "/mnt/data/numbers.csv" in tool["description"]
    # and it is a file of the request's container
    files = call(["%s/containers/%s/files" % (fake.url, ci["container_id"])], CORE_KEY)
    [f] = files["data"]
    assert f["path"] == "/mnt/data/numbers.csv" and f["source"] == "user"


def test_bad_input_files_are_400_before_anything_is_sent(fake):
    cases = [({"type": "input_file", "filename": "..", "file_data": "AAAA"}, "input.filename"),
             ({"type": "input_file", "filename": "x.bin", "file_data": "not base64!"},
              "input.file_data"),
             ({"type": "input_file", "file_id": "file_missing"}, "file_id")]
    for part, param in cases:
        body = req([{"role": "user", "content": [{"type": "input_text", "text": "hi"}, part]}])
        rc, st, r, _ = post_json(fake.url + "/responses", body)
        assert st == 400 and r["error"]["param"] == param, (part, r)
    assert "file_missing" in r["error"]["message"] and "404" in r["error"]["message"]
    # only the Files API lookup reached the upstream, never a model call
    assert [q["method"] + " " + q["path"] for q in fake.requests()] == [
        "GET /v1/files/file_missing"]


def test_file_ids_fetched_from_the_upstream_files_api(scripted):
    srv = scripted([
        {"body": {"id": "file_abc", "object": "file", "bytes": 8, "created_at": 1,
                  "filename": "dir/ignored/sales.csv", "purpose": "user_data"}},
        {"body": "a,b\n1,2\n", "headers": {"Content-Type": "application/octet-stream"}},
        {"body": code_call_reply("print(open('/mnt/data/sales.csv').read())")},
        {"body": text_reply("done")},
    ])
    tool = dict(CI_TOOL, container={"type": "auto", "file_ids": ["file_abc"]})
    r = ours(srv.url + "/responses", req(blocks("x"), tools=[tool]))
    [ci] = ci_items(r)
    assert ci["outputs"][0]["logs"].startswith("a,b\n1,2\n"), ci
    got = srv.requests()
    assert [q["method"] + " " + q["path"] for q in got] == [
        "GET /v1/files/file_abc", "GET /v1/files/file_abc/content",
        "POST /v1/responses", "POST /v1/responses"]
    # with the program's own credentials
    assert all(q["headers"].get("authorization") == "Bearer " + CORE_KEY for q in got)


def test_container_from_files_api_ids_and_json_upload(scripted):
    meta = {"id": "file_q1", "object": "file", "bytes": 3, "created_at": 1, "filename": "q1.txt",
            "purpose": "user_data"}
    srv = scripted([{"body": meta}, {"body": "abc"},
                    {"body": dict(meta, id="file_q2", filename="q2.txt")}, {"body": "defg"},
                    {"status": 404, "body": {"error": {"message": "No such File object: nope",
                                                       "type": "invalid_request_error",
                                                       "param": "id", "code": None}}}])
    c = call(["-H", "Content-Type: application/json", "-d",
              json.dumps({"name": "from ids", "file_ids": ["file_q1"]}), srv.url + "/containers"],
             CORE_KEY, component="ContainerResource")
    f = call(["-H", "Content-Type: application/json", "-d", json.dumps({"file_id": "file_q2"}),
              "%s/containers/%s/files" % (srv.url, c["id"])], CORE_KEY,
             component="ContainerFileResource")
    assert f["path"] == "/mnt/data/q2.txt" and f["bytes"] == 4
    files = call(["%s/containers/%s/files?order=asc" % (srv.url, c["id"])], CORE_KEY)
    assert [x["path"] for x in files["data"]] == ["/mnt/data/q1.txt", "/mnt/data/q2.txt"]
    j = call(["-H", "Content-Type: application/json", "-d", json.dumps({"file_id": "nope"}),
              "%s/containers/%s/files" % (srv.url, c["id"])], CORE_KEY, status=400)
    assert "nope" in j["error"]["message"] and "404" in j["error"]["message"]
    got = [(q["method"], q["path"], q["headers"].get("authorization")) for q in srv.requests()]
    assert got == [("GET", "/v1/files/file_q1", "Bearer " + CORE_KEY),
                   ("GET", "/v1/files/file_q1/content", "Bearer " + CORE_KEY),
                   ("GET", "/v1/files/file_q2", "Bearer " + CORE_KEY),
                   ("GET", "/v1/files/file_q2/content", "Bearer " + CORE_KEY),
                   ("GET", "/v1/files/nope", "Bearer " + CORE_KEY)]


def test_c_program_uploads_with_curl_mime_and_downloads(fake, tmp_path):
    """A C client on libcurl's MIME API and write callbacks, run under the
    library: upload, the session's code reads it and writes a result, the
    program downloads that result byte-exact."""
    from conftest import REPO
    prog = REPO / "build" / "testprogs" / "cfiles"
    c = create(fake.url, "c client", key=CORE_KEY)
    src = tmp_path / "in.bin"
    src.write_bytes(bytes(range(256)) * 1000)
    rc, out, err = run([prog, "upload", fake.url, CORE_KEY, c["id"], src])
    assert rc == 0, err
    status, _, body = out.decode().partition(" ")
    assert status == "200", out
    f = json.loads(body)
    schema_check.validate(f, "ContainerFileResource")
    assert f["path"] == "/mnt/data/in.bin" and f["bytes"] == 256000
    code = ("d = open('/mnt/data/in.bin', 'rb').read()\n"
            "n = open('/mnt/data/rev.bin', 'wb').write(d[::-1])\n"
            "import hashlib, matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
            "n = open('/mnt/data/sums.csv', 'w').write('n,sum\\n%d,%d\\n' % (len(d), sum(d)))\n"
            "plt.plot([3, 1, 2]); plt.savefig('/mnt/data/plot.png'); plt.close('all')\n"
            "print(hashlib.sha256(open('/mnt/data/plot.png', 'rb').read()).hexdigest())\n"
            "print('[reversed](sandbox:/mnt/data/rev.bin) [csv](sandbox:/mnt/data/sums.csv) '\n"
            "      '[png](sandbox:/mnt/data/plot.png)')\n")
    r = ours(fake.url + "/responses", req(blocks(code), tools=[dict(CI_TOOL, container=c["id"])]))
    [ci] = ci_items(r)
    png_sha = re.search(r"^([0-9a-f]{64})$", ci["outputs"][0]["logs"], re.M).group(1)
    text, ann = message_text_and_annotations(r)
    by_name = {a["filename"]: a for a in ann}
    assert sorted(by_name) == ["plot.png", "rev.bin", "sums.csv"], ann
    want = {"rev.bin": (src.read_bytes()[::-1], "application/octet-stream"),
            "sums.csv": (("n,sum\n256000,%d\n" % sum(src.read_bytes())).encode(), "text/csv")}
    for name, a in by_name.items():
        assert a["container_id"] == c["id"]
        dst = tmp_path / name
        rc, out, err = run([prog, "download", fake.url, CORE_KEY, c["id"], a["file_id"], dst])
        assert rc == 0, err
        status, size, ctype = out.decode().split()
        assert status == "200" and int(size) == dst.stat().st_size
        if name == "plot.png":
            assert ctype == "image/png" and hashlib.sha256(dst.read_bytes()).hexdigest() == png_sha
        else:
            assert (dst.read_bytes(), ctype) == want[name]
    assert fake.requests()[-1]["path"] == "/v1/responses"  # nothing else went upstream


def test_replacing_upload_is_told_and_container_disk_is_capped(fake, tmp_path):
    c = create(fake.url, "told", key=CORE_KEY)
    f = tmp_path / "d.csv"
    f.write_text("v1")
    upload(fake.url, c["id"], f, key=CORE_KEY)
    tool = dict(CI_TOOL, container=c["id"])
    r = ours(fake.url + "/responses", req(blocks("print(open('/mnt/data/d.csv').read())"),
                                          tools=[tool]))
    assert "v1" in ci_items(r)[0]["outputs"][0]["logs"]
    assert "replaced" not in ci_items(r)[0]["outputs"][0]["logs"]
    f.write_text("v2")
    upload(fake.url, c["id"], f, key=CORE_KEY)  # the running sandbox gets it at once
    r = ours(fake.url + "/responses", req(blocks("print(open('/mnt/data/d.csv').read())"),
                                          tools=[tool]))
    logs = ci_items(r)[0]["outputs"][0]["logs"]
    assert "[Note: uploads replaced these files since the code last ran: /mnt/data/d.csv.]" in logs
    assert "v2" in logs
    # once only
    r = ours(fake.url + "/responses", req(blocks("print(1)"), tools=[tool]))
    assert "replaced" not in ci_items(r)[0]["outputs"][0]["logs"]
    # the container's files must fit its sandbox's /mnt/data (CODESHIM_DISK)
    big = tmp_path / "big.bin"
    big.write_bytes(b"z" * 700000)
    env = {"CODESHIM_DISK": "1M"}
    call(["-F", "file=@%s" % big, "%s/containers/%s/files" % (fake.url, c["id"])], CORE_KEY,
         env=env, component="ContainerFileResource")
    big2 = tmp_path / "big2.bin"
    big2.write_bytes(b"z" * 700000)
    j = call(["-F", "file=@%s" % big2, "%s/containers/%s/files" % (fake.url, c["id"])],
             CORE_KEY, status=400, env=env)
    assert "CODESHIM_DISK" in j["error"]["message"]


def test_a_new_containers_first_sandbox_has_nothing_lost(fake, tmp_path):
    """No sandbox ever served a container made by POST /v1/containers: its
    first one says nothing of an earlier sandbox, and says where its
    uploaded files are."""
    from test_core_responses import logs_of
    c = create(fake.url, "fresh", key=CORE_KEY)
    r = ours(fake.url + "/responses", req(blocks("print(1)"), tools=[dict(CI_TOOL, container=c["id"])]))
    assert logs_of(ci_items(r)[0]) == "1\n"
    d = create(fake.url, "fresh with a file", key=CORE_KEY)
    f = tmp_path / "in.txt"
    f.write_text("x")
    upload(fake.url, d["id"], f, key=CORE_KEY)
    r = ours(fake.url + "/responses", req(blocks("print(open('in.txt').read())"),
                                          tools=[dict(CI_TOOL, container=d["id"])]))
    logs = logs_of(ci_items(r)[0])
    assert "earlier sandbox" not in logs and "x\n" in logs, logs
    assert "files are in /mnt/data" in logs, logs
