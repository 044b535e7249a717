#!/usr/bin/python3
"""A fake e2b (control plane + code-interpreter server) for codeshim's tests.

Written from e2b's published API (its control plane's OpenAPI spec, envd's
file API and the code-interpreter server's /execute); standard library only;
listens on 127.0.0.1 only.

    srv = fake_e2b.start(key="e2b_test")            # plain HTTP
    srv = fake_e2b.start(key=..., tls=(cert, key))  # plus a TLS listener
    srv.api_url      -> "http://127.0.0.1:PORT"   (E2B_API_URL)
    srv.sandbox_url  -> "http://127.0.0.1:PORT"   (CODESHIM_E2B_SANDBOX_URL:
                        the shared host; E2b-Sandbox-Id/-Port headers)
    srv.domain       -> "e2b.localhost:TLSPORT"   (E2B_DOMAIN: per-port
                        hosts https://49999-<id>.e2b.localhost:TLSPORT,
                        and the control plane at https://api.<domain>, as
                        in e2b's cloud; curl resolves *.localhost to
                        loopback)
    srv.requests()   -> every request received, oldest first:
                        {"method","path","query","headers" (lowercased),
                         "body" (parsed JSON or None),"raw","host","conn",
                         "sandbox" (data plane: the sandbox addressed)}
    srv.sandboxes()  -> {id: {"metadata","endAt","templateID",...}} (live)
    srv.stop()

Control plane (X-API-Key checked on every call; e2b's error body
{"code","message"} on failure):
    POST   /sandboxes                     201 Sandbox
    GET    /v2/sandboxes?metadata=..&state=..  200 [ListedSandbox]
    GET    /sandboxes?metadata=..          same (deprecated form)
    GET    /sandboxes/{id}                 200 SandboxDetail / 404
    DELETE /sandboxes/{id}                 204 / 404
    POST   /sandboxes/{id}/timeout         204 (endAt = now + timeout)
    POST   /sandboxes/{id}/refreshes       204 (endAt = now + duration)
A sandbox past its endAt is gone (listed nowhere, 404, data plane 502).

Code-interpreter server (port 49999; X-Access-Token = envdAccessToken
when the sandbox is secure; unknown sandbox: 502 from the "proxy"):
    GET  /health                      200 "OK"
    POST /execute                     200 NDJSON, chunked
    GET  /contexts                    200 [{"id","language","cwd"}]
    POST /contexts/{id}/restart       200 null (the namespace is reset)
envd (port 49983; the same token), its file API on the sandbox's own
filesystem, a directory of this process standing for its "/":
    GET  /files?path=ABS&username=user     200 bytes / 404
    POST /files?path=ABS&username=user     200 [{"path","name","type"}]
         (application/octet-stream body; parents made)
Code runs in this process, in one namespace per sandbox (exec with
stdout/stderr captured line by line); the value of a trailing expression
is a main result; matplotlib figures left open become png results; an
exception is an error line whose traceback carries ANSI colour codes.
The sandbox's /mnt/data is a directory of this process: "/mnt/data" in
a cell's code stands for it, and codeshim's own set-up cell (which makes
/mnt/data the working directory) only makes that directory.
A keepalive line is sent every keepalive_s without output.

Fault knobs (attributes / methods of the server; they never hit one of
codeshim's own cells, whose code starts with "# codeshim:"):
    fail(method, path_regex, status, times=1, retry_after=None, body=None)
        the next `times` matching requests get that status
    exec_502_after_create = N   the first N /execute calls of each new
                                sandbox get the proxy's 502
    vanish(id)                  the sandbox is gone at once
    truncate_next_exec = True   the next /execute stream stops after its
                                first line (connection closed, no
                                end_of_execution)
    vanish_after_exec = True    the sandbox of the next /execute vanishes
                                once that execution is over
    keepalive_s                 (default 5.0)
    templates = {"a", ...}      only these templateIDs can be created
                                from; another gets 400 "template ... not
                                found" (default None: any)
"""

import ast
import io
import json
import os
import queue
import re
import secrets
import shutil
import socket
import socketserver
import ssl
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse
from http.server import BaseHTTPRequestHandler

os.environ.setdefault("MPLBACKEND", "Agg")

ANSI_RED = "\x1b[0;31m"
ANSI_OFF = "\x1b[0m"
PORT_CI = "49999"
PORT_ENVD = "49983"
SETUP_MARK = "# codeshim: the working directory /mnt/data"
OWN_MARK = "# codeshim:"  # codeshim's own cells: never a fault knob's target


def _iso(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03dZ" % (int(t * 1000) % 1000)


# ---- output capture: one sink per executing thread ----

class _Router(io.TextIOBase):
    """sys.stdout/sys.stderr replacement that sends each thread's writes
    to that thread's sink (so executions in two sandboxes do not mix)."""

    def __init__(self, name, real):
        self.name, self.real = name, real
        self.local = threading.local()

    def write(self, s):
        sink = getattr(self.local, "sink", None)
        if sink is None:
            return self.real.write(s)
        sink(self.name, s)
        return len(s)

    def flush(self):
        pass


_OUT = _Router("stdout", sys.stdout)
_ERR = _Router("stderr", sys.stderr)
_INSTALL = threading.Lock()


def _install():
    """Routes sys.stdout/sys.stderr through the routers (again: a test
    runner may have swapped them since)."""
    with _INSTALL:
        if sys.stdout is not _OUT:
            _OUT.real, sys.stdout = sys.stdout, _OUT
        if sys.stderr is not _ERR:
            _ERR.real, sys.stderr = sys.stderr, _ERR


class Sandbox:
    def __init__(self, sid, template, timeout, metadata, secure):
        self.id = sid
        self.template = template
        self.metadata = dict(metadata or {})
        self.secure = secure
        self.token = "envd_" + secrets.token_hex(16)
        self.started = time.time()
        self.end = self.started + timeout
        self.context = secrets.token_hex(8)
        self.ns = {"__name__": "__main__"}
        self.count = 0
        self.lock = threading.Lock()
        self.fresh_502 = 0
        self.root = tempfile.mkdtemp(prefix="fake-e2b-")  # the sandbox's "/"

    def local(self, path):
        """The directory of this process standing for sandbox path ABS."""
        return os.path.join(self.root, path.lstrip("/"))

    def listed(self):
        return {"templateID": self.template, "alias": self.template,
                "sandboxID": self.id, "clientID": "fakeclient",
                "startedAt": _iso(self.started), "endAt": _iso(self.end),
                "cpuCount": 2, "memoryMB": 512, "diskSizeMB": 1024,
                "state": "running", "metadata": self.metadata,
                "envdVersion": "0.4.1"}


def _run_cell(sb, code, emit):
    """Runs code in sb's namespace; emit(dict) for each NDJSON line."""
    sb.count += 1
    emit({"type": "number_of_executions", "execution_count": sb.count})

    here = sb.local("/mnt/data")

    def sink(name, s):
        if s:  # what the code prints names /mnt/data, as in a real sandbox
            emit({"type": name, "text": s.replace(here, "/mnt/data"),
                  "timestamp": _iso(time.time())})

    if code.startswith(SETUP_MARK):
        os.makedirs(sb.local("/mnt/data"), exist_ok=True)
        return
    code = code.replace("/mnt/data", here)
    _install()
    _OUT.local.sink = _ERR.local.sink = sink
    try:
        tree = ast.parse(code, "<cell>", "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, "<cell>", "exec"), sb.ns)
        value = eval(compile(last, "<cell>", "eval"), sb.ns) if last else None
        _figures(emit)
        if value is not None:
            emit({"type": "result", "text": repr(value), "extra": {},
                  "is_main_result": True})
    except BaseException as e:  # the cell's own error, as IPython shows it
        tb = traceback.format_exception(type(e), e, e.__traceback__.tb_next)
        colored = [ANSI_RED + line + ANSI_OFF for line in tb]
        emit({"type": "error", "name": type(e).__name__, "value": str(e),
              "traceback": "".join(colored)})
    finally:
        _OUT.local.sink = _ERR.local.sink = None


def _figures(emit):
    plt = sys.modules.get("matplotlib.pyplot")
    if not plt:
        return
    import base64
    for num in plt.get_fignums():
        fig = plt.figure(num)
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        emit({"type": "result", "png": base64.b64encode(buf.getvalue()).decode(),
              "text": "<Figure size 640x480 with 1 Axes>", "extra": {},
              "is_main_result": False})
    plt.close("all")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *a):
        pass

    # -- plumbing
    def _send(self, status, body=None, ctype="application/json", headers=None):
        data = b"" if body is None else (
            body if isinstance(body, bytes) else
            (body.encode() if isinstance(body, str) else json.dumps(body).encode()))
        self.send_response(status)
        if status != 204:
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if status != 204:
            self.wfile.write(data)

    def _err(self, status, message, headers=None):
        self._send(status, {"code": status, "message": message}, headers=headers)

    def _handle(self):
        fake = self.server.fake
        u = urllib.parse.urlsplit(self.path)
        n = int(self.headers.get("Content-Length") or 0)
        self.rawb = self.rfile.read(n) if n else b""
        raw = self.rawb.decode("utf-8", "replace")
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        host = self.headers.get("Host", "")
        rec = {"method": self.command, "path": u.path, "query": u.query,
               "headers": {k.lower(): v for k, v in self.headers.items()},
               "body": body, "raw": raw, "host": host,
               "conn": "%s:%d/%s" % (self.client_address[0], self.client_address[1],
                                      self.server.kind),
               "sandbox": None}
        fake._record(rec)
        own = isinstance(body, dict) and str(body.get("code", "")).startswith(OWN_MARK)
        f = None if own else fake._fault(self.command, u.path)
        if f:
            hdr = {"Retry-After": str(f["retry_after"])} if f["retry_after"] is not None else None
            if f["body"] is not None:
                return self._send(f["status"], f["body"], headers=hdr)
            return self._err(f["status"], "injected failure %d" % f["status"], headers=hdr)
        dp = self._data_plane_sandbox(host)
        if dp is not None:
            rec["sandbox"] = dp
            return self._data_plane(fake, dp, u.path, body)
        return self._control_plane(fake, u, body)

    do_GET = do_POST = do_DELETE = do_PUT = _handle

    def _data_plane_sandbox(self, host):
        """The sandbox a data-plane request is for, or None (control plane)."""
        if self.server.kind == "tls":
            if host.startswith("api."):  # https://api.<domain>: the control plane
                return None
            m = re.match(r"^(\d+)-([A-Za-z0-9]+)\.", host)
            return (m.group(1), m.group(2)) if m else ("", "")
        sid = self.headers.get("E2b-Sandbox-Id")
        if sid is None:
            return None
        return (self.headers.get("E2b-Sandbox-Port", ""), sid)

    # -- control plane
    def _control_plane(self, fake, u, body):
        if self.headers.get("X-API-Key") != fake.key:
            return self._err(401, "Invalid API key, it must start with 'e2b_'")
        path, q = u.path, urllib.parse.parse_qs(u.query)
        m = re.match(r"^/sandboxes/([^/]+)(/timeout|/refreshes)?$", path)
        if self.command == "POST" and path == "/sandboxes":
            return self._create(fake, body)
        if self.command == "GET" and path in ("/v2/sandboxes", "/sandboxes"):
            want = dict(urllib.parse.parse_qsl((q.get("metadata") or [""])[0]))
            out = [s.listed() for s in fake._live()
                   if all(s.metadata.get(k) == v for k, v in want.items())]
            return self._send(200, out, headers={"X-Total-Running": str(len(fake._live()))})
        if not m:
            return self._err(404, "not found")
        sb = fake._get(m.group(1))
        if sb is None:
            return self._err(404, "sandbox \"%s\" not found" % m.group(1))
        if self.command == "GET" and not m.group(2):
            d = sb.listed()
            d.update({"envdAccessToken": sb.token, "domain": None})
            return self._send(200, d)
        if self.command == "DELETE" and not m.group(2):
            fake._remove(sb.id)
            return self._send(204)
        if self.command == "POST" and m.group(2) == "/timeout":
            t = (body or {}).get("timeout")
            if not isinstance(t, int) or t < 0:
                return self._err(400, "timeout must be a non-negative integer")
            sb.end = time.time() + t
            return self._send(204)
        if self.command == "POST" and m.group(2) == "/refreshes":
            d = (body or {}).get("duration", 0)
            sb.end = time.time() + min(int(d), 3600)
            return self._send(204)
        return self._err(405, "method not allowed")

    def _create(self, fake, body):
        if not isinstance(body, dict) or not isinstance(body.get("templateID"), str):
            return self._err(400, "templateID is required")
        if fake.templates is not None and body["templateID"] not in fake.templates:
            return self._err(400, "template '%s' not found" % body["templateID"])
        t = body.get("timeout", 15)
        if not isinstance(t, int) or t <= 0:
            return self._err(400, "timeout must be positive")
        sid = "i" + secrets.token_hex(10)
        sb = Sandbox(sid, body["templateID"], t, body.get("metadata"),
                     body.get("secure", False) is True)
        sb.fresh_502 = fake.exec_502_after_create
        fake._add(sb)
        return self._send(201, {"templateID": sb.template, "alias": sb.template,
                                "sandboxID": sid, "clientID": "fakeclient",
                                "envdVersion": "0.4.1",
                                "envdAccessToken": sb.token if sb.secure else None,
                                "trafficAccessToken": None, "domain": None})

    # -- code-interpreter server
    def _gone(self, sid):
        return self._send(502, {"sandboxId": sid, "message": "The sandbox was not found",
                                "code": 502})

    def _data_plane(self, fake, dp, path, body):
        port, sid = dp
        sb = fake._get(sid)
        if sb is None or port not in (PORT_CI, PORT_ENVD):
            return self._gone(sid)
        if port == PORT_ENVD:
            return self._envd(sb, path)
        if sb.fresh_502 > 0 and path == "/execute":
            sb.fresh_502 -= 1
            return self._gone(sid)
        if sb.secure and self.headers.get("X-Access-Token") != sb.token:
            return self._send(401, {"message": "invalid access token", "code": 401})
        if self.command == "GET" and path == "/health":
            return self._send(200, "OK")
        if self.command == "GET" and path == "/contexts":
            return self._send(200, [{"id": sb.context, "language": "python",
                                     "cwd": "/home/user"}])
        m = re.match(r"^/contexts/([^/]+)/restart$", path)
        if self.command == "POST" and m:
            if m.group(1) != sb.context:
                return self._send(404, "Context %s not found" % m.group(1), "text/plain")
            sb.ns = {"__name__": "__main__"}
            sb.count = 0
            fake.restarts += 1
            return self._send(200, None)
        if self.command == "POST" and path == "/execute":
            if not isinstance(body, dict) or not isinstance(body.get("code"), str):
                return self._send(422, "code is required", "text/plain")
            if body.get("context_id") and body.get("language"):
                return self._send(400, "Only one of context_id or language can be provided",
                                  "text/plain")
            return self._execute(fake, sb, body["code"])
        return self._send(404, "not found", "text/plain")

    def _envd(self, sb, path):
        if sb.secure and self.headers.get("X-Access-Token") != sb.token:
            return self._send(401, {"message": "invalid access token", "code": 401})
        q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
        target = q.get("path", "")
        if path != "/files" or not target.startswith("/") or ".." in target.split("/"):
            return self._send(400, {"message": "bad path", "code": 400})
        local = sb.local(target)
        if self.command == "GET":
            if not os.path.isfile(local):
                return self._send(404, {"message": "file not found", "code": 404})
            with open(local, "rb") as f:
                return self._send(200, f.read(), "application/octet-stream")
        if self.command == "POST":
            os.makedirs(os.path.dirname(local), exist_ok=True)
            with open(local, "wb") as f:
                f.write(self.rawb)
            return self._send(200, [{"path": target, "name": os.path.basename(target),
                                     "type": "file"}])
        return self._send(405, {"message": "method not allowed", "code": 405})

    def _chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _execute(self, fake, sb, code):
        q = queue.Queue()
        own = code.startswith(OWN_MARK)
        truncate = not own and fake._take_truncate()

        def work():
            with sb.lock:
                _run_cell(sb, code, q.put)
            q.put(None)

        threading.Thread(target=work, daemon=True).start()
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        sent = 0
        try:
            while True:
                try:
                    item = q.get(timeout=fake.keepalive_s)
                except queue.Empty:
                    item = {"type": "keepalive"}
                if item is None:
                    break
                self._chunk((json.dumps(item) + "\n").encode())
                sent += 1
                if truncate and sent >= 1:
                    self.close_connection = True
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
            if not own and fake._take_vanish():
                fake.vanish(sb.id)
            self._chunk(b'{"type": "end_of_execution"}\n')
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:  # the client went away mid-stream: e2b interrupts
            fake.disconnects += 1
            self.close_connection = True


class _Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True
    block_on_close = False

    def handle_error(self, request, client_address):
        pass


class _TLSServer(_Server):
    def get_request(self):
        sock, addr = super().get_request()
        try:
            return self.ctx.wrap_socket(sock, server_side=True), addr
        except (ssl.SSLError, OSError):
            sock.close()
            raise


class FakeE2B:
    def __init__(self, key="e2b_test_key", tls=None, log=None):
        self.key = key
        self.exec_502_after_create = 0
        self.templates = None
        self.keepalive_s = 5.0
        self.truncate_next_exec = False
        self.vanish_after_exec = False
        self.restarts = 0
        self.disconnects = 0
        self._lock = threading.Lock()
        self._boxes = {}
        self._all = []  # every sandbox made: their directories go at stop()
        self._requests = []
        self._faults = []
        self._log = open(log, "a", encoding="utf-8") if log else None
        self._servers = []
        plain = _Server(("127.0.0.1", 0), _Handler)
        plain.kind = "plain"
        self._serve(plain)
        self.port = plain.server_address[1]
        self.api_url = self.sandbox_url = "http://127.0.0.1:%d" % self.port
        self.domain = None
        if tls:
            t = _TLSServer(("127.0.0.1", 0), _Handler)
            t.kind = "tls"
            t.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            t.ctx.load_cert_chain(tls[0], tls[1])
            self._serve(t)
            self.tls_port = t.server_address[1]
            self.domain = "e2b.localhost:%d" % self.tls_port

    def _serve(self, srv):
        srv.fake = self
        th = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
        th.start()
        self._servers.append((srv, th))

    # -- state
    def _record(self, rec):
        with self._lock:
            self._requests.append(rec)
            if self._log:
                self._log.write(json.dumps(rec) + "\n")
                self._log.flush()

    def _add(self, sb):
        with self._lock:
            self._boxes[sb.id] = sb
            self._all.append(sb)

    def _remove(self, sid):
        with self._lock:
            self._boxes.pop(sid, None)

    def _live(self):
        now = time.time()
        with self._lock:
            for sid in [k for k, s in self._boxes.items() if s.end <= now]:
                del self._boxes[sid]
            return list(self._boxes.values())

    def _get(self, sid):
        return next((s for s in self._live() if s.id == sid), None)

    def _fault(self, method, path):
        with self._lock:
            for f in self._faults:
                if f["times"] > 0 and f["method"] in (method, "*") and re.search(f["path"], path):
                    f["times"] -= 1
                    return f
        return None

    def _take_truncate(self):
        with self._lock:
            t, self.truncate_next_exec = self.truncate_next_exec, False
            return t

    def _take_vanish(self):
        with self._lock:
            v, self.vanish_after_exec = self.vanish_after_exec, False
            return v

    # -- for tests
    def requests(self):
        with self._lock:
            return list(self._requests)

    def clear(self):
        with self._lock:
            self._requests.clear()

    def sandboxes(self):
        return {s.id: {"metadata": dict(s.metadata), "endAt": s.end, "templateID": s.template,
                       "secure": s.secure, "token": s.token} for s in self._live()}

    def fail(self, method, path, status, times=1, retry_after=None, body=None):
        with self._lock:
            self._faults.append({"method": method, "path": path, "status": status,
                                 "times": times, "retry_after": retry_after, "body": body})

    def vanish(self, sid):
        self._remove(sid)

    def stop(self):
        for srv, th in self._servers:
            srv.shutdown()
            srv.server_close()
            th.join(timeout=5)
        if self._log:
            self._log.close()
            self._log = None
        with self._lock:
            roots = [sb.root for sb in self._all]
        for r in roots:
            shutil.rmtree(r, ignore_errors=True)


def start(key="e2b_test_key", tls=None, log=None):
    return FakeE2B(key=key, tls=tls, log=log)
