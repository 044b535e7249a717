#!/usr/bin/python3
"""A fake e2b (control plane + code-interpreter server + envd) for codeshim's
tests.

Written from e2b's own source (e2b-dev/infra: the API's spec/openapi.yml and
handlers, envd's file API, the sandbox proxy; e2b-dev/code-interpreter: the
server in the sandbox); each behaviour names the file it imitates. Standard
library only; listens on 127.0.0.1 only.

    srv = fake_e2b.start(key="e2b_test", root=tmp_path)  # plain HTTP
    srv = fake_e2b.start(key=..., tls=(cert, key))     # plus a TLS listener
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

Team settings (attributes): envd_version ("0.5.8"; the envd of sandboxes
made from now on; None: answers carry no envdVersion), max_timeout_s (3600: the hobby tier's 1 h; pro is 24 h),
max_concurrent (None: no limit), list_page_max (100).

Control plane (X-API-Key checked on every call; e2b's error body
{"code","message"} on failure):
    POST   /sandboxes                     201 Sandbox (with envdVersion); 400
           "Timeout cannot be greater than N hours" over the team's
           maximum; 429 without Retry-After at the concurrency limit
    GET    /v2/sandboxes?metadata=..&state=..&limit=..&nextToken=..
                                           200 [ListedSandbox], X-Next-Token
    GET    /sandboxes?metadata=..          every match (deprecated form)
    GET    /sandboxes/{id}                 200 SandboxDetail / 404
    DELETE /sandboxes/{id}                 204 / 404
    POST   /sandboxes/{id}/timeout         204 (endAt = now + timeout,
                                           capped at the team's maximum)
    POST   /sandboxes/{id}/refreshes       204 (endAt = now + duration)
A sandbox past its endAt is gone (listed nowhere, 404, data plane 502).

Routing (packages/shared/pkg/proxy/host.go): a data-plane request names
its sandbox by its Host, <port>-<id>.<domain>; the E2b-Sandbox-Id and
E2b-Sandbox-Port headers count only when the Host is sandbox.<domain>,
localhost or a loopback IP.

Code-interpreter server (port 49999; X-Access-Token = envdAccessToken
when the sandbox is secure, all but /health; unknown sandbox: 502 from the
"proxy"):
    GET  /health                      200 "OK"
    POST /execute                     200 NDJSON, chunked
    GET  /contexts                    200 [{"id","language","cwd"}]
    POST /contexts/{id}/restart       200 null (a new kernel: its state
                                      and working directory are reset)
envd (port 49983; X-Access-Token checked), its file API on the sandbox's
own filesystem, a directory of the test's own standing for its "/":
    GET  /files?path=ABS&username=user     200 bytes / 404 / 400
    POST /files?path=ABS&username=user     200 [{"path","name","type"}]
         (multipart/form-data, the part named "file", on every envd;
          application/octet-stream from envd 0.5.7; parents made)
Each sandbox's code runs in a Python process of its own (its "kernel",
working directory /home/user of the sandbox), started with the sandbox and
again at a context restart; stdout/stderr are sent line by line; the value
of a trailing expression is a main result; matplotlib figures left open
become png results; an exception is an error line whose traceback carries
ANSI colour codes; a client that goes away mid-stream interrupts the
kernel (SIGINT): seen within 50 ms on the plain listener (its socket
read at EOF), at the next line written on TLS; `gone` lists each such
execution, {"code", "at" (time.time())}. "/mnt/data" in a cell's code stands for the sandbox's
/mnt/data, and the sandbox's paths are shown as the sandbox sees them.
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
    rate_limited = N            the next N control-plane calls meet the rate
                                limiter: 429 with Retry-After
                                (rate_limit_retry_after, default 1 s)
    list_page_cap = N           list pages hold at most N sandboxes, however
                                many the limit asks (a client must follow
                                X-Next-Token rather than count on full pages)
    templates = {"a", ...}      only these templateIDs can be created
                                from; another gets 400 "template ... not
                                found" (default None: any)
"""

import ast
import base64
import email.parser
import email.policy
import io
import ipaddress
import json
import os
import queue
import re
import secrets
import select
import shutil
import signal
import socket
import socketserver
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse
from http.server import BaseHTTPRequestHandler

ANSI_RED = "\x1b[0;31m"
ANSI_OFF = "\x1b[0m"
PORT_CI = "49999"
PORT_ENVD = "49983"
OWN_MARK = "# codeshim:"  # codeshim's own cells: never a fault knob's target
ENVD_OCTET_STREAM = (0, 5, 7)  # e2b-dev/E2B packages/js-sdk/src/envd/versions.ts
HOME = "/home/user"


def _iso(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03dZ" % (int(t * 1000) % 1000)


def _version(v):
    return tuple(int(x) for x in re.findall(r"\d+", v or "0")[:3])


# ---- the kernel: one process per sandbox (python3 fake_e2b.py --kernel ROOT FD)

def _kernel_main(root, fd):
    """Reads one JSON {"code"} a line on stdin, runs it, writes its NDJSON
    lines and then {"type": "__done__"} to fd. Runs in the sandbox's
    working directory; its stdout/stderr go nowhere else."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    proto = os.fdopen(fd, "w", buffering=1)
    here = os.path.join(root, "mnt/data")
    ns = {"__name__": "__main__"}
    count = 0

    def emit(d):  # the sandbox's paths as the sandbox sees them
        proto.write(json.dumps(d).replace(json.dumps(root)[1:-1], "") + "\n")

    class Sink(io.TextIOBase):
        def __init__(self, name):
            self.name = name

        def write(self, s):
            if s:
                emit({"type": self.name, "text": s, "timestamp": _iso(time.time())})
            return len(s)

    sys.stdout, sys.stderr = Sink("stdout"), Sink("stderr")
    while True:
        try:
            line = sys.stdin.readline()
        except KeyboardInterrupt:  # between cells: nothing to interrupt
            continue
        if not line:
            return
        try:
            code = json.loads(line)["code"].replace("/mnt/data", here)
            count += 1
            emit({"type": "number_of_executions", "execution_count": count})
            _cell(code, ns, emit)
        except KeyboardInterrupt:
            pass
        emit({"type": "__done__"})


def _cell(code, ns, emit):
    try:
        tree = ast.parse(code, "<cell>", "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, "<cell>", "exec"), ns)
        value = eval(compile(last, "<cell>", "eval"), ns) if last else None
        _figures(emit)
        if value is not None:
            emit({"type": "result", "text": repr(value), "extra": {},
                  "is_main_result": True})
    except BaseException as e:  # the cell's own error, as IPython shows it
        tb = traceback.format_exception(type(e), e, e.__traceback__.tb_next)
        colored = [ANSI_RED + line + ANSI_OFF for line in tb]
        emit({"type": "error", "name": type(e).__name__, "value": str(e),
              "traceback": "".join(colored)})


def _figures(emit):
    plt = sys.modules.get("matplotlib.pyplot")
    if not plt:
        return
    for num in plt.get_fignums():
        fig = plt.figure(num)
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        emit({"type": "result", "png": base64.b64encode(buf.getvalue()).decode(),
              "text": "<Figure size 640x480 with 1 Axes>", "extra": {},
              "is_main_result": False})
    plt.close("all")


class Sandbox:
    def __init__(self, sid, template, timeout, metadata, secure, envd_version, root):
        self.id = sid
        self.template = template
        self.metadata = dict(metadata or {})
        self.secure = secure
        self.envd_version = envd_version
        self.token = "envd_" + secrets.token_hex(16)
        self.started = time.time()
        self.end = self.started + timeout
        self.context = secrets.token_hex(8)
        self.lock = threading.Lock()
        self.fresh_502 = 0
        self.root = tempfile.mkdtemp(prefix="fake-e2b-", dir=root)  # the sandbox's "/"
        os.makedirs(self.local(HOME))
        self.kernel = None
        self.start_kernel()

    def local(self, path):
        """The directory of the test standing for sandbox path ABS."""
        return os.path.join(self.root, path.lstrip("/"))

    def start_kernel(self):
        """A new kernel in /home/user: what a context restart gives too
        (e2b-dev/code-interpreter template/server/main.py restart_context
        restarts the kernel and runs no setup again)."""
        self.stop_kernel()
        r, w = os.pipe()
        self.kernel = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--kernel", self.root, str(w)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            cwd=self.local(HOME), pass_fds=(w,), text=True)
        os.close(w)
        self.out = os.fdopen(r, "r")

    def stop_kernel(self):
        """Ends the kernel; a cell reading it then sees the end of its
        output (and closes it)."""
        k, self.kernel = self.kernel, None
        if k:
            k.kill()
            k.wait()
            try:
                k.stdin.close()
            except OSError:
                pass

    def run(self, code, emit):
        """Runs code on the kernel; emit(dict) for each NDJSON line."""
        k, out = self.kernel, self.out
        if k is None:
            return
        try:
            k.stdin.write(json.dumps({"code": code}) + "\n")
            k.stdin.flush()
            for line in out:
                d = json.loads(line)
                if d["type"] == "__done__":
                    return
                emit(d)
        except (OSError, ValueError):  # the kernel was restarted or killed
            pass
        if k is not self.kernel:
            out.close()

    def interrupt(self, kernel):
        # e2b-dev/code-interpreter template/server/messaging.py: a client
        # gone mid-execution interrupts the kernel (the one that ran it, not
        # one a restart has started since)
        if kernel is not None and kernel is self.kernel and kernel.poll() is None:
            kernel.send_signal(signal.SIGINT)

    def listed(self):
        d = {"templateID": self.template, "alias": self.template,
             "sandboxID": self.id, "clientID": "fakeclient",
             "startedAt": _iso(self.started), "endAt": _iso(self.end),
             "cpuCount": 2, "memoryMB": 512, "diskSizeMB": 1024,
             "state": "running", "metadata": self.metadata}
        if self.envd_version is not None:
            d["envdVersion"] = self.envd_version
        return d


def _route_by_headers(host):
    """packages/shared/pkg/proxy/host.go shouldParseHeaders: the routing
    headers count for sandbox.<domain>, localhost or a loopback IP."""
    name = urllib.parse.urlsplit("//" + host).hostname or ""
    try:
        loop = ipaddress.ip_address(name).is_loopback
    except ValueError:
        loop = False
    return name == "localhost" or loop or (name.startswith("sandbox.") and len(name) > 8)


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
        """The sandbox a data-plane request is for, or None (control plane):
        packages/shared/pkg/proxy/host.go GetTargetFromRequest."""
        sid = self.headers.get("E2b-Sandbox-Id")
        if sid is not None and _route_by_headers(host):
            return (self.headers.get("E2b-Sandbox-Port", ""), sid)
        m = re.match(r"^(\d+)-([A-Za-z0-9]+)\.", host)
        if m:
            return (m.group(1), m.group(2))
        if host.startswith("api.") or _route_by_headers(host):
            return None  # https://api.<domain>, or the plain listener's own address
        return ("", "")

    # -- control plane
    def _control_plane(self, fake, u, body):
        if self.headers.get("X-API-Key") != fake.key:
            return self._err(401, "Invalid API key, it must start with 'e2b_'")
        if fake._take_rate_limit():
            # packages/api/internal/middleware/ratelimit/ratelimit.go: the
            # rate limiter's 429 says when to come back
            wait = str(max(int(fake.rate_limit_retry_after), 1))
            return self._err(429, "Rate limit exceeded", headers={
                "Retry-After": wait, "RateLimit-Remaining": "0", "RateLimit-Reset": wait})
        path, q = u.path, urllib.parse.parse_qs(u.query)
        m = re.match(r"^/sandboxes/([^/]+)(/timeout|/refreshes)?$", path)
        if self.command == "POST" and path == "/sandboxes":
            return self._create(fake, body)
        if self.command == "GET" and path in ("/v2/sandboxes", "/sandboxes"):
            return self._list(fake, path, q)
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
            if not isinstance(t, int):
                return self._err(400, "Error when parsing request: timeout must be an integer")
            # packages/api/internal/handlers/sandbox_timeout.go: a negative
            # timeout is 0; the orchestrator's KeepAliveFor caps it at the
            # team's maximum (packages/api/internal/orchestrator/keep_alive.go)
            sb.end = time.time() + min(max(t, 0), fake.max_timeout_s)
            return self._send(204)
        if self.command == "POST" and m.group(2) == "/refreshes":
            d = (body or {}).get("duration", 0)
            sb.end = time.time() + min(int(d), fake.max_timeout_s)
            return self._send(204)
        return self._err(405, "method not allowed")

    def _list(self, fake, path, q):
        """packages/api/internal/handlers/sandboxes_list.go: the metadata
        filter is one query value, the url-encoded pairs k=v&k2=v2 (as the
        SDKs build it); /v2 pages by limit (at most 100) and nextToken,
        X-Next-Token naming the next page while there is one."""
        want = dict(urllib.parse.parse_qsl((q.get("metadata") or [""])[0]))
        out = [s for s in sorted(fake._live(), key=lambda s: (s.started, s.id))
               if all(s.metadata.get(k) == v for k, v in want.items())]
        hdr = {"X-Total-Running": str(len(fake._live()))}
        if path == "/v2/sandboxes":
            try:
                limit = int((q.get("limit") or ["100"])[0])
            except ValueError:
                return self._err(400, "invalid limit")
            if limit < 1 or limit > fake.list_page_max:
                return self._err(400, "limit must be between 1 and %d" % fake.list_page_max)
            limit = min(limit, fake.list_page_cap or limit)
            token = (q.get("nextToken") or [""])[0]
            start = 0
            if token:
                ids = [s.id for s in out]
                try:
                    start = ids.index(base64.urlsafe_b64decode(token.encode()).decode()) + 1
                except (ValueError, UnicodeDecodeError):
                    return self._err(400, "invalid next token")
            page = out[start:start + limit]
            if start + limit < len(out):
                hdr["X-Next-Token"] = base64.urlsafe_b64encode(page[-1].id.encode()).decode()
            out = page
        return self._send(200, [s.listed() for s in out], headers=hdr)

    def _create(self, fake, body):
        if not isinstance(body, dict) or not isinstance(body.get("templateID"), str):
            return self._err(400, "templateID is required")
        if fake.templates is not None and body["templateID"] not in fake.templates:
            return self._err(400, "template '%s' not found" % body["templateID"])
        t = body.get("timeout", 15)
        # packages/api/internal/handlers/timeout_helper.go (validateAndParseTimeout,
        # called by sandbox_create.go): more than 0, and at most the team's
        # maximum (its tier's MaxLengthHours)
        if not isinstance(t, int) or t <= 0:
            return self._err(400, "Timeout must be greater than 0")
        if t > fake.max_timeout_s:
            return self._err(400, "Timeout cannot be greater than %d hours"
                             % (fake.max_timeout_s // 3600))
        # packages/api/internal/orchestrator/create_instance.go: the team's
        # concurrency limit, a 429 without Retry-After
        if fake.max_concurrent is not None and len(fake._live()) >= fake.max_concurrent:
            return self._err(429, "you have reached the maximum number of concurrent E2B "
                             "sandboxes (%d). If you need more, please contact us at "
                             "'https://e2b.dev/docs/getting-help'" % fake.max_concurrent)
        sid = "i" + secrets.token_hex(10)
        sb = Sandbox(sid, body["templateID"], t, body.get("metadata"),
                     body.get("secure", False) is True, fake.envd_version, fake.root)
        sb.fresh_502 = fake.exec_502_after_create
        fake._add(sb)
        d = {"templateID": sb.template, "alias": sb.template, "sandboxID": sid,
             "clientID": "fakeclient", "envdAccessToken": sb.token if sb.secure else None,
             "trafficAccessToken": None, "domain": None}
        if sb.envd_version is not None:
            d["envdVersion"] = sb.envd_version
        return self._send(201, d)

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
        if self.command == "GET" and path == "/health":
            return self._send(200, "OK")
        # e2b-dev/code-interpreter template/server/auth.py EnvdAuthMiddleware:
        # every call but GET /health needs the sandbox's X-Access-Token
        if sb.secure and self.headers.get("X-Access-Token") != sb.token:
            return self._send(401, "Unauthorized", "text/plain")
        if self.command == "GET" and path == "/contexts":
            return self._send(200, [{"id": sb.context, "language": "python",
                                     "cwd": HOME}])
        m = re.match(r"^/contexts/([^/]+)/restart$", path)
        if self.command == "POST" and m:
            if m.group(1) != sb.context:
                return self._send(404, "Context %s not found" % m.group(1), "text/plain")
            sb.start_kernel()
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
        # packages/envd/internal/api/auth.go: the sandbox's access token
        if sb.secure and self.headers.get("X-Access-Token") != sb.token:
            return self._send(401, {"message": "invalid access token", "code": 401})
        q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
        target = q.get("path", "")
        if path != "/files" or (target and (not target.startswith("/") or
                                            ".." in target.split("/"))):
            return self._send(400, {"message": "bad path", "code": 400})
        if self.command == "GET":
            # packages/envd/internal/api/download.go: 404 when missing,
            # 400 for a directory
            local = sb.local(target)
            if os.path.isdir(local):
                return self._send(400, {"message": "path '%s' is a directory" % target,
                                        "code": 400})
            if not target or not os.path.isfile(local):
                return self._send(404, {"message": "path '%s' does not exist" % target,
                                        "code": 404})
            with open(local, "rb") as f:
                return self._send(200, f.read(), "application/octet-stream")
        if self.command == "POST":
            return self._upload(sb, target)
        return self._send(405, {"message": "method not allowed", "code": 405})

    def _upload(self, sb, target):
        """packages/envd/internal/api/upload.go PostFiles: from envd 0.5.7
        a raw application/octet-stream body (path required) or multipart;
        before, multipart only (r.MultipartReader: a 500 for anything
        else); of a multipart body only the parts named "file" count."""
        ctype = self.headers.get("Content-Type", "")
        media = ctype.split(";")[0].strip().lower()
        files = []
        if media == "application/octet-stream" and \
                _version(sb.envd_version) >= ENVD_OCTET_STREAM:
            if not target:
                return self._send(400, {"message": "path query parameter is required for "
                                        "raw body upload", "code": 400})
            files.append((target, self.rawb))
        elif media.startswith("multipart/"):
            msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
                b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + self.rawb)
            if not msg.is_multipart():
                return self._send(500, {"message": "error parsing multipart form: no "
                                        "multipart boundary param in Content-Type",
                                        "code": 500})
            for part in msg.iter_parts():
                if part.get_param("name", header="content-disposition") != "file":
                    continue
                name = target or part.get_filename() or ""
                if not name.startswith("/"):
                    name = HOME + "/" + name
                files.append((name, part.get_payload(decode=True) or b""))
        elif _version(sb.envd_version) >= ENVD_OCTET_STREAM:
            return self._send(400, {"message": "unsupported content type: %s, expected "
                                    "multipart/form-data or application/octet-stream" % ctype,
                                    "code": 400})
        else:
            return self._send(500, {"message": "error parsing multipart form: request "
                                    "Content-Type isn't multipart/form-data", "code": 500})
        out = []
        for name, data in files:
            local = sb.local(name)
            os.makedirs(os.path.dirname(local), exist_ok=True)
            with open(local, "wb") as f:
                f.write(data)
            out.append({"path": name, "name": os.path.basename(name), "type": "file"})
        return self._send(200, out)

    def _chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _client_gone(self):
        """The client closed its end (uvicorn hears it at once: the
        receive channel's http.disconnect). The plain listener only: a
        client sends nothing after its request."""
        c = self.connection
        if isinstance(c, ssl.SSLSocket):
            return False
        try:
            if not select.select([c], [], [], 0)[0]:
                return False
            return c.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    def _execute(self, fake, sb, code):
        q = queue.Queue()
        own = code.startswith(OWN_MARK)
        truncate = not own and fake._take_truncate()

        ran = []

        def work():
            with sb.lock:
                ran.append(sb.kernel)
                sb.run(code, q.put)
            q.put(None)

        threading.Thread(target=work, daemon=True).start()
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        sent = 0
        try:
            quiet_until = time.time() + fake.keepalive_s
            while True:
                try:
                    item = q.get(timeout=0.05)
                except queue.Empty:
                    if self._client_gone():
                        raise ConnectionResetError("the client went away")
                    if time.time() < quiet_until:
                        continue
                    item = {"type": "keepalive"}
                quiet_until = time.time() + fake.keepalive_s
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
            sb.interrupt(ran[0] if ran else None)
            fake.disconnects += 1
            fake.gone.append({"code": code, "at": time.time()})
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
    def __init__(self, key="e2b_test_key", tls=None, log=None, root=None):
        self.key = key
        self.envd_version = "0.5.8"
        self.max_timeout_s = 3600
        self.max_concurrent = None
        self.list_page_max = 100
        self.list_page_cap = None
        self.rate_limited = 0
        self.rate_limit_retry_after = 1
        self.exec_502_after_create = 0
        self.templates = None
        self.keepalive_s = 5.0
        self.truncate_next_exec = False
        self.vanish_after_exec = False
        self.restarts = 0
        self.disconnects = 0
        self.gone = []
        self._own_root = root is None
        self.root = tempfile.mkdtemp(prefix="fake-e2b-") if root is None else str(root)
        os.makedirs(self.root, exist_ok=True)
        self._lock = threading.Lock()
        self._boxes = {}
        self._all = []  # every sandbox made: their kernels end at stop()
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
            sb = self._boxes.pop(sid, None)
        if sb:
            sb.stop_kernel()

    def _live(self):
        now = time.time()
        with self._lock:
            gone = [self._boxes.pop(k) for k, s in list(self._boxes.items()) if s.end <= now]
            live = list(self._boxes.values())
        for sb in gone:
            sb.stop_kernel()
        return live

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

    def _take_rate_limit(self):
        with self._lock:
            if self.rate_limited > 0:
                self.rate_limited -= 1
                return True
            return False

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
                       "secure": s.secure, "token": s.token, "root": s.root}
                for s in self._live()}

    def fail(self, method, path, status, times=1, retry_after=None, body=None):
        with self._lock:
            self._faults.append({"method": method, "path": path, "status": status,
                                 "times": times, "retry_after": retry_after, "body": body})

    def vanish(self, sid):
        self._remove(sid)

    def expire(self, sid):
        """The sandbox's endAt is now: e2b ends it."""
        with self._lock:
            if sid in self._boxes:
                self._boxes[sid].end = time.time()
        self._live()

    def stop(self):
        for srv, th in self._servers:
            srv.shutdown()
            srv.server_close()
            th.join(timeout=5)
        if self._log:
            self._log.close()
            self._log = None
        with self._lock:
            boxes = list(self._all)
        for sb in boxes:
            sb.stop_kernel()
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)


def start(key="e2b_test_key", tls=None, log=None, root=None):
    return FakeE2B(key=key, tls=tls, log=log, root=root)


if __name__ == "__main__" and len(sys.argv) == 4 and sys.argv[1] == "--kernel":
    _kernel_main(sys.argv[2], int(sys.argv[3]))
