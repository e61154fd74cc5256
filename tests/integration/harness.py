"""The integration suite's harness: the server under test, the helpers every area shares, and
the registry the runner (run.py) walks.

A test is a function decorated with @test in tests/integration/test_AREA.py; the file is its
area, and `run.py --area AREA` runs that file alone. Each test starts its own Server on a free
port with a fresh data dir and talks to it over HTTP exactly as agents and Grafana do.

ARGS holds the runner's settings (binary, testdata, tmp, quick). It is one object, filled in
place by configure() before any test runs, so `from harness import ARGS` in an area file sees
the values at call time. The benchmarks (tests/bench) reuse Server the same way.
"""
import argparse
import fcntl
import http.client
import importlib
import io
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request

ARGS = argparse.Namespace(binary=None, testdata=None, tmp=None, quick=False)
T0 = 1700000000  # a fixed push time (unix seconds) for deterministic ranges
CPU = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
CONNECT = "/querier.v1.QuerierService/"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def configure(**settings):
    """Sets ARGS's fields (binary, testdata, tmp, quick) in place."""
    vars(ARGS).update(settings)


# ---------------------------------------------------------------- server control

def free_port():
    """A free loopback port: any the kernel picks, or, in one of run.py -j's processes, one of
    its own range (HEARTH_TEST_PORT_BASE, 4,000 ports below the kernel's ephemeral ones), so two
    processes never pick the same one."""
    base = int(os.environ.get("HEARTH_TEST_PORT_BASE", "0"))
    for _ in range(200):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", random.randrange(base, base + 4000) if base else 0))
            except OSError:
                continue
            port = s.getsockname()[1]
        if port not in _GIVEN:  # handed out before but maybe not bound yet: not again
            _GIVEN.add(port)
            return port
    raise RuntimeError("no free port in the range")


_GIVEN = set()


class Server:
    def __init__(self, data_dir=None, extra=(), log_dir=None, env=None, host="127.0.0.1"):
        """env: variables added to this environment for the server process (e.g. S3 keys); host:
        the address it listens on and is reached at (IPv6 in brackets)."""
        self.host = host
        self.env = dict(os.environ, **env) if env else None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="hearth-it-", dir=ARGS.tmp)
        self.log_dir = log_dir or self.data_dir
        self.extra = list(extra)
        self.proc = None
        self.port = None

    def start(self):
        self.port = free_port()
        os.makedirs(self.data_dir, exist_ok=True)
        self.log = open(os.path.join(self.log_dir, "server.log"), "ab")
        self.proc = subprocess.Popen(
            [ARGS.binary, "--listen", f"{self.host}:{self.port}", "--data-dir", self.data_dir] + self.extra,
            stdout=self.log, stderr=self.log, env=self.env)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}: {self.tail()}")
            try:
                if self.get("/ready")[0] == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("server did not become ready")

    def tail(self):
        with open(os.path.join(self.log_dir, "server.log"), "rb") as f:
            return f.read()[-3000:].decode(errors="replace")

    def url(self, path):
        return f"http://{self.host}:{self.port}{path}"

    def request(self, method, path, body=None, headers=None, timeout=120):
        req = urllib.request.Request(self.url(path), data=body, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read(), dict(r.headers)
        except urllib.error.HTTPError as e:
            return e.code, e.read(), dict(e.headers)

    def request_early_answer(self, method, path, body, headers=None, timeout=120):
        """request() for a body the server may refuse before reading it all (413, 401): the
        server answers and closes while the client is still sending, so the send can fail
        with EPIPE or ECONNRESET (urllib then raises) though the answer has arrived. The
        answer is read from the socket either way. (status, body, headers)."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            try:
                conn.request(method, path, body=body, headers=headers or {})
                resp = conn.getresponse()
            except (BrokenPipeError, ConnectionResetError):
                resp = http.client.HTTPResponse(conn.sock, method=method)
                resp.begin()
            return resp.status, resp.read(), dict(resp.headers)
        finally:
            conn.close()

    def get(self, path, **params):
        q = ("?" + urllib.parse.urlencode(params)) if params else ""
        return self.request("GET", path + q)[:2]

    def get_json(self, path, **params):
        status, body = self.get(path, **params)
        assert status == 200, f"GET {path} {params} -> {status} {body[:300]!r}"
        return json.loads(body)

    def ingest(self, body, headers=None, **params):
        path = "/ingest?" + urllib.parse.urlencode(params)
        status, resp, _ = self.request("POST", path, body, headers or {"Content-Type": "application/octet-stream"})
        return status, resp

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc and sig == signal.SIGTERM and self.proc.returncode != 0:
            raise RuntimeError(f"server exited {self.proc.returncode} on SIGTERM: {self.tail()}")
        self.log.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def wait_until(cond, timeout=30, interval=0.1, what="the condition"):
    """Polls cond() until it returns something true, and returns that; fails the test after
    timeout seconds. Tests wait for what they need this way, never with a fixed sleep, so a
    fast machine does not wait and a loaded one (a sanitizer build, -j) does not flake.
    cond may raise OSError (a server not listening yet): that counts as not yet. what may be a
    function, called for the failure's message (the state that was waited on, as it is then)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = cond()
        except OSError:
            got = None
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout}s for {what() if callable(what) else what}")
        time.sleep(interval)


def cli(*args, env=None, **kw):
    """The binary run as a command (hearth push/query/check, or flags alone), to completion."""
    return subprocess.run([ARGS.binary] + list(args), capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, **(env or {})), **kw)


def proc_status_kib(pid, key):
    """A kB field of /proc/PID/status: VmRSS (resident now) or VmHWM (the peak)."""
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {key} in /proc/{pid}/status")


def vm_hwm_mb(pid):
    """The peak resident set of a process, in MB."""
    return proc_status_kib(pid, "VmHWM") / 1024


# ---------------------------------------------------------------- test data and uploads

def npm_installed(here, marker, what):
    """here (a folder with a package.json) once `npm install` has put marker (a path under
    it) in place. Workers of one run (run.py -j) may ask at the same moment: the first
    installs under a lock on here/.install.lock, the others wait for it and find the marker."""
    with open(os.path.join(here, ".install.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(os.path.join(here, marker)):
            r = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent"], cwd=here,
                               capture_output=True, text=True, timeout=300)
            assert r.returncode == 0, f"npm install {what} failed: {r.stderr[-2000:]}"
    return here


def node_agent_dir():
    """tests/integration/node with the real Pyroscope Node.js agent installed (npm, once)."""
    return npm_installed(os.path.join(HERE, "node"), "node_modules/@pyroscope/nodejs", "@pyroscope/nodejs")


def read_testdata(rel):
    """The bytes of a file under the shared test data (rel: e.g. "pprof/go-runtime-cpu-00.pb.gz")."""
    return open(os.path.join(ARGS.testdata, rel), "rb").read()


CPU_FILE = "pprof/go-runtime-cpu-00.pb.gz"  # the first of the six, as read_testdata takes it


def sanitized():
    """Whether the binary under test is a sanitizer build, whose timing says nothing about
    Hearth's: wall-clock asserts are skipped for it (their functional checks still run)."""
    name = os.path.basename(ARGS.binary)
    return "asan" in name or "tsan" in name


def memory_slack():
    """How much more memory the server binary under test takes for the same work:
    ThreadSanitizer's shadow memory multiplies every allocation."""
    return 4 if "tsan" in os.path.basename(ARGS.binary) else 1


def elf_with_build_id(build_id, name="prog"):
    """The bytes of a small real ELF executable (gcc) whose GNU build-id note is build_id (hex)."""
    d = tempfile.mkdtemp(prefix="hearth-elf-", dir=ARGS.tmp)
    out = os.path.join(d, name)
    subprocess.run(["gcc", "-x", "c", "-", "-o", out, "-Wl,--build-id=0x" + build_id],
                   input=b"int main(void) { return 0; }\n", check=True, capture_output=True)
    return open(out, "rb").read()


def cpu_files(n):
    """Paths of the first n of the six real Go CPU profiles."""
    return [os.path.join(ARGS.testdata, "pprof", f"go-runtime-cpu-0{i}.pb.gz") for i in range(n)]


def push(srv, path, name, at, until=None, fmt="pprof"):
    """Uploads the file at path to /ingest; fails the test unless it is stored (200)."""
    span = {"from": at} if until is None else {"from": at, "until": until}
    st, body = srv.ingest(open(path, "rb").read(), name=name, format=fmt, **span)
    assert st == 200, (name, st, body)


def multipart(fields):
    """A multipart/form-data body of [(name, bytes)] as agents send it, and its headers."""
    boundary = "hearthboundary%d" % random.randint(0, 1 << 30)
    out = io.BytesIO()
    for name, data in fields:
        out.write(f"--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"{name}\"\r\n"
                  "Content-Type: application/octet-stream\r\n\r\n".encode())
        out.write(data + b"\r\n")
    out.write(f"--{boundary}--\r\n".encode())
    return out.getvalue(), {"Content-Type": f"multipart/form-data; boundary={boundary}"}


# ---------------------------------------------------------------- reading answers

def types_of(srv, service):
    """{(sample type, unit): profile type id} of one service."""
    sel = '{service_name="%s"}' % service
    return {(t["sampleType"], t["sampleUnit"]): t["id"]
            for t in srv.get_json("/api/v1/profile-types", query=sel)["profileTypes"]}


def query(srv, sel, fmt="top", frm=T0 - 10, until=T0 + 3600, **kw):
    """The JSON answer of /api/v1/query (by default the top table over T0's hour)."""
    span = {"from": kw.pop("from", frm), "until": kw.pop("until", until)}
    return srv.get_json("/api/v1/query", query=sel, format=fmt, **span, **kw)


def cpu_total(srv, svc):
    """The CPU total a service has stored, over a range wide enough for every test's pushes."""
    return query(srv, CPU + '{service_name="%s"}' % svc, frm=T0 - 10, until=T0 + 100000)["total"]


def metric(srv, name):
    """The value of one unlabelled (or fully labelled) sample of /metrics."""
    for line in srv.get("/metrics")[1].decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError(f"metric {name} missing")


def connect_json(srv, method, doc):
    """(status, decoded JSON answer) of a Connect querier call in JSON."""
    st, body, _ = srv.request("POST", CONNECT + method, json.dumps(doc).encode(), {"Content-Type": "application/json"})
    return st, json.loads(body) if body else None


def connect_proto(srv, method, body):
    """(status, raw answer) of a Connect querier call in binary proto, as Grafana sends it."""
    st, answer, _ = srv.request("POST", CONNECT + method, body, {"Content-Type": "application/proto"})
    return st, answer


# ---------------------------------------------------------------- registry and runner

TESTS = []


def test(fn):
    """Registers fn as a test of its file's area, in the order the file defines it."""
    TESTS.append(fn)
    return fn


def area_of(fn):
    return fn.__module__.removeprefix("test_")


def areas():
    """Every area: the AREA of each tests/integration/test_AREA.py, in the order they run."""
    return sorted(n[len("test_"):-len(".py")] for n in os.listdir(HERE) if n.startswith("test_") and n.endswith(".py"))


def load_areas(names):
    """Imports the named areas' files (each test registers itself); returns their tests in run order."""
    for name in areas():
        if name in names:
            importlib.import_module("test_" + name)
    return [fn for fn in TESTS if area_of(fn) in names]


def run_one(fn):
    """Runs one test, printing `ok` with its time or `FAIL` with the traceback; True if it passed."""
    t = time.time()
    try:
        fn()
    except Exception:
        print(f"FAIL {fn.__name__}\n{traceback.format_exc()}", flush=True)
        return False
    print(f"ok   {fn.__name__} ({time.time() - t:.1f}s)", flush=True)
    return True


def run_tests(tests):
    """Runs each test of the iterable (run_one), then prints the summary line
    "integration: N passed, M failed". ARGS.tmp is removed unless something failed.
    Returns the exit status."""
    passed = failed = 0
    for fn in tests:
        ok = run_one(fn)
        passed, failed = passed + ok, failed + (not ok)
    if not failed:
        shutil.rmtree(ARGS.tmp, ignore_errors=True)
    else:
        print(f"(logs kept under {ARGS.tmp})")
    print(f"integration: {passed} passed, {failed} failed")
    return 1 if failed else 0
