"""HTTP-layer attacks: each test performs the attack on a real server over
loopback sockets and checks the server refuses it early and keeps serving others.

Covered: every route of the table (read from `hearth --print-routes`) refuses requests
without a credential, with the wrong role, or without a tenant; uploads are refused
before their body is read (credentials, concurrency, Content-Length, the in-flight body
budget), so stalled uploads cost no memory; slowloris clients are cut off by the
request read deadline and one address cannot take every connection; a second server
cannot share the port; hundreds of query parameters get a 4xx, not a dropped connection.
"""
import json
import os
import re
import resource
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse

from harness import ARGS, CPU, T0, Server, elf_with_build_id, metric, proc_status_kib, test, wait_until


def routes():
    """The route table as the binary prints it: [(method, prefix?, path, role, limiter)]."""
    out = subprocess.run([ARGS.binary, "--print-routes"], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        m = re.match(r"^(GET|POST|PUT|DELETE)\s+(exact|prefix)\s+(\S+)\s+role=(\w+)\s+limiter=(\w+)$", line)
        assert m, line
        rows.append((m.group(1), m.group(2) == "prefix", m.group(3), m.group(4), m.group(5)))
    return rows


def slots(srv, limiter):
    """Requests holding a slot of the ingest or query limiter now."""
    return metric(srv, 'hearth_limiter_slots_in_use{limiter="%s"}' % limiter)


def connect(srv, timeout=5):
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=timeout)
    s.settimeout(timeout)
    return s


def head(method, path, headers=None, length=None):
    h = {"Host": "127.0.0.1", **(headers or {})}
    if length is not None:
        h["Content-Length"] = str(length)
    return (f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n").encode()


def read_response(s):
    """(status, body) of one response on s; (None, b"") if the server closed without one."""
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                return None, b""
            data += chunk
        hdr, _, body = data.partition(b"\r\n\r\n")
        m = re.search(rb"(?im)^content-length:\s*(\d+)", hdr)
        while m and len(body) < int(m.group(1)):
            chunk = s.recv(65536)
            if not chunk:
                break
            body += chunk
    except (ConnectionError, socket.timeout):
        if b"\r\n\r\n" not in data:
            return None, b""
        hdr, _, body = data.partition(b"\r\n\r\n")
    return int(hdr.split(b" ", 2)[1]), body


def write_tokens():
    path = os.path.join(ARGS.tmp, "attack-tokens")
    open(path, "w").write("bearer w-tok team-a write\nbearer r-tok team-a read\nbearer a-tok team-a admin\n")
    return path


def bearer(t):
    return {"Authorization": "Bearer " + t} if t else {}


def example_url(method, prefix, path):
    """A URL the row serves; prefix rows get a real suffix."""
    if not prefix:
        return path
    return path + {"/querier.v1.QuerierService/": "LabelNames", "/api/v1/labels/": "service_name/values",
                   "/settings.v1.SettingsService/": "Get", "/adhocprofiles.v1.AdHocProfileService/": "List",
                   "/settings.v1.RecordingRulesService/": "ListRecordingRules",
                   "/js/": "app.js", "/api/v1/debuginfo/": "abcd" * 10,
                   "/debuginfo.v1alpha1.DebuginfoService/Upload/": "abcd" * 10}[path]


def refusal_only(url, b):
    """A refusal body: an error and nothing else (Hearth's or Connect's shape), no data."""
    doc = json.loads(b)
    assert set(doc) <= {"error", "code", "message"} and b"secretfn" not in b, (url, b[:200])


@test
def http_attacks_every_route_needs_its_role_and_tenant():
    rows = routes()
    # Every path the server answers is a row; the walk below covers each one.
    assert len(rows) == 50, len(rows)
    paths = {r[2] for r in rows}
    for p in ("/render-diff", "/pyroscope/render-diff", "/api/v1/labels", "/labels", "/label-values", "/js/",
              "/v1development/profiles", "/otlp/v1development/profiles",
              "/parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw",
              "/parca.debuginfo.v1alpha1.DebuginfoService/Upload"):
        assert p in paths, p
    wrong = {"read": ["w-tok"], "write": ["r-tok"], "admin": ["r-tok", "w-tok"]}
    right = {"read": "r-tok", "write": "w-tok", "admin": "a-tok"}
    with Server(extra=["--auth-file", write_tokens()]) as srv:
        st, _, _ = srv.request("POST", "/ingest?name=attack.cpu&format=folded&from=%d" % T0, b"main;secretfn 5\n",
                               bearer("w-tok"))
        assert st == 200
        # A debug file for the DELETE row to remove with the admin token.
        st, b, _ = srv.request("PUT", "/api/v1/debuginfo/" + "abcd" * 10, elf_with_build_id("abcd" * 10),
                               bearer("w-tok"))
        assert st == 200, b
        span = "from=%d&until=%d" % (T0 - 10, T0 + 60)
        for method, prefix, path, role, _ in rows:
            url = example_url(method, prefix, path)
            q = ("?query=" + urllib.parse.quote(CPU) + "&leftQuery=attack.cpu&rightQuery=attack.cpu&" + span +
                 "&leftFrom=%d&leftUntil=%d&rightFrom=%d&rightUntil=%d" % (T0 - 10, T0 + 60, T0 - 10, T0 + 60))
            body = b"{}" if method == "POST" else None
            hdr = {"Content-Type": "application/json"} if method == "POST" else {}
            if role == "none":
                st, b, _ = srv.request(method, url, body, hdr)
                assert st == 200, (url, st, b[:200])
                continue
            st, b, _ = srv.request(method, url + q, body, hdr)
            assert st == 401, (url, "no credential", st, b[:200])
            refusal_only(url, b)
            for tok in wrong[role]:
                st, b, _ = srv.request(method, url + q, body, {**hdr, **bearer(tok)})
                assert st == 403, (url, tok, st, b[:200])
                refusal_only(url, b)
            if role in ("read", "admin"):  # the right role gets past admission (ingest rows were used above)
                st, b, _ = srv.request(method, url + q, body, {**hdr, **bearer(right[role])})
                assert st not in (401, 403, 404, 405), (url, st, b[:200])
        st, b, _ = srv.request("GET", "/render-diff" + q, None, bearer("r-tok"))
        assert st == 200 and b"secretfn" in b, (st, b[:200])  # the data is there for the right credential
        for path in ("/nope", "/api/v1/nope", "/pyroscope/nope", "/js", "/web/index.html"):
            st, b, _ = srv.request("GET", path)
            assert st == 404 and json.loads(b)["error"], (path, st, b[:200])
    # With --multitenancy and no auth file, every data row needs X-Scope-OrgID.
    with Server(extra=["--multitenancy"]) as srv:
        for method, prefix, path, role, _ in rows:
            if role == "none":
                continue
            url = example_url(method, prefix, path)
            st, b, _ = srv.request(method, url, b"{}" if method == "POST" else None, {"Content-Type": "application/json"})
            assert st == 401 and b"X-Scope-OrgID" in b, (url, st, b[:200])


@test
def http_attacks_stalled_unauthenticated_uploads_cost_no_memory():
    """40 clients announce a 16 MiB upload without a credential, send what they can and
    stall: each is refused after its headers, so the server's memory stays flat."""
    with Server(extra=["--auth-file", write_tokens()]) as srv:
        base = proc_status_kib(srv.proc.pid, "VmRSS")
        socks, statuses = [], []
        chunk = b"x" * (1 << 20)
        for _ in range(40):
            s = connect(srv, timeout=2)
            s.sendall(head("POST", "/ingest?name=attack.cpu&format=folded", length=16 << 20))
            try:
                for _ in range(15):  # 15 of the 16 MiB, then stall
                    s.sendall(chunk)
            except (ConnectionError, socket.timeout):
                pass
            socks.append(s)
        for s in socks:
            statuses.append(read_response(s)[0])
        grown = proc_status_kib(srv.proc.pid, "VmRSS") - base
        # Buffered, the bodies took 600 MiB; unread, a few MiB (a sanitizer's shadow
        # memory for 40 connection threads can add some 64 MiB).
        assert grown < 128 * 1024, f"RSS grew by {grown} KiB with 40 stalled uploads"
        assert statuses == [401] * 40, statuses
        st, _, _ = srv.request("POST", "/ingest?name=attack.cpu&format=folded&from=%d" % T0, b"main;a 1\n",
                               bearer("w-tok"))
        assert st == 200
        for s in socks:
            s.close()


@test
def http_attacks_busy_limits_refuse_before_the_body():
    """With every ingest (or query) slot taken by an upload in progress, the next one is
    answered 429 right after its headers, without the client sending its body; a
    client that vanishes mid-body gives its slot back."""
    with Server(extra=["--max-concurrent-ingests", "1", "--max-concurrent-queries", "1"]) as srv:
        body = b"main;a 1\n"
        holder = connect(srv)
        holder.sendall(head("POST", "/ingest?name=attack.cpu&format=folded&from=%d" % T0, length=len(body)) + body[:-1])
        wait_until(lambda: slots(srv, "ingest") == 1, 10, 0.05, "the holder admitted")
        late = connect(srv)
        late.sendall(head("POST", "/ingest?name=attack.cpu&format=folded", length=1 << 20))
        st, b = read_response(late)  # no body byte was sent
        assert st == 429 and "max-concurrent-ingests" in json.loads(b)["error"], (st, b)
        holder.sendall(body[-1:])
        assert read_response(holder)[0] == 200
        holder.close()
        wait_until(lambda: slots(srv, "ingest") == 0, 5, 0.05, "the holder's slot released")
        # A client that disconnects mid-body releases its slot.
        quitter = connect(srv)
        quitter.sendall(head("POST", "/ingest?name=attack.cpu&format=folded", length=100) + b"main;")
        wait_until(lambda: slots(srv, "ingest") == 1, 10, 0.05, "the quitter admitted")
        quitter.close()
        wait_until(lambda: slots(srv, "ingest") == 0, 5, 0.05, "the vanished client's ingest slot released")
        assert srv.ingest(body, name="attack.cpu", format="folded", **{"from": T0})[0] == 200
        assert metric(srv, 'hearth_limit_refusals_total{limit="max_concurrent_ingests"}') >= 1
        # Discovery shares the query limiter with merges: hold the one query slot with a
        # Connect call whose body has not finished arriving.
        q = connect(srv)
        q.sendall(head("POST", "/querier.v1.QuerierService/LabelNames", {"Content-Type": "application/json"}, 2) + b"{")
        wait_until(lambda: slots(srv, "query") == 1, 10, 0.05, "the query slot taken")
        for path in ("/api/v1/labels", "/api/v1/series", "/api/v1/profile-types", "/labels", "/pyroscope/labels",
                     "/label-values?label=service_name", "/api/v1/labels/service_name/values"):
            st, b = srv.get(path)
            assert st == 429 and "max-concurrent-queries" in json.loads(b)["error"], (path, st, b)
        q.sendall(b"}")
        assert read_response(q)[0] == 200
        q.close()
        # The slot is released when the server has finished the request, just after the
        # client has read the answer: on a busy machine a request sent at once may still
        # find it taken.
        wait_until(lambda: slots(srv, "query") == 0, 5, 0.05, "the query slot released")
        assert srv.get("/api/v1/labels")[0] == 200
    # A tenant over --ingest-rate-limit is refused on its headers too, before any body byte.
    with Server(extra=["--ingest-rate-limit", "1000"]) as srv:
        body = b"main;a 1\n" * 150  # 1,350 bytes: two fit the 2 s burst of 2,000 bytes
        for _ in range(2):
            assert srv.ingest(body, name="rate.cpu", format="folded", **{"from": T0})[0] == 200
        late = connect(srv)
        late.sendall(head("POST", "/ingest?name=rate.cpu&format=folded", length=1 << 20))
        st, b = read_response(late)  # no body byte was sent
        assert st == 429 and "ingest-rate-limit" in json.loads(b)["error"], (st, b)
        late.close()


@test
def http_attacks_body_size_and_inflight_budget():
    """A Content-Length over --max-body-bytes is refused (413) before the body, and the
    bodies in flight together stay within --max-inflight-body-bytes (503, counted)."""
    with Server(extra=["--max-body-bytes", "1MiB", "--max-inflight-body-bytes", "2MiB"]) as srv:
        s = connect(srv)
        s.sendall(head("POST", "/ingest?name=attack.cpu&format=folded", length=(1 << 20) + 1))
        st, b = read_response(s)
        assert st == 413 and "max-body-bytes" in json.loads(b)["error"], (st, b)
        s.close()
        holders = []
        for _ in range(2):  # 2 x 1 MiB announced: the whole budget
            h = connect(srv)
            h.sendall(head("POST", "/ingest?name=attack.cpu&format=folded&from=%d" % T0, length=1 << 20) + b"main;")
            holders.append(h)
        wait_until(lambda: slots(srv, "ingest") == 2, 10, 0.05, "both holders admitted, their bodies reserved")
        s = connect(srv)
        s.sendall(head("POST", "/ingest?name=attack.cpu&format=folded", length=1 << 10))
        st, b = read_response(s)
        assert st == 503 and "max-inflight-body-bytes" in json.loads(b)["error"], (st, b)
        s.close()
        # A chunked body has no length to reserve up front: its chunks are counted as
        # they arrive, dropped once over the budget, and the answer is the same 503.
        s = connect(srv)
        s.sendall(head("POST", "/ingest?name=attack.cpu&format=folded", {"Transfer-Encoding": "chunked"}) +
                  b"9\r\nmain;a 1\n\r\n0\r\n\r\n")
        st, b = read_response(s)
        assert st == 503 and "max-inflight-body-bytes" in json.loads(b)["error"], (st, b)
        s.close()
        assert metric(srv, 'hearth_limit_refusals_total{limit="max_inflight_body_bytes"}') == 2
        holders.pop().close()  # gives its 1 MiB back
        wait_until(lambda: srv.ingest(b"main;a 1\n", name="attack.cpu", format="folded", **{"from": T0})[0] == 200,
                   5, 0.1, "the released budget to take an upload")
        for h in holders:
            h.close()
    bad = Server(extra=["--max-body-bytes", "4MiB", "--max-inflight-body-bytes", "1MiB"])
    try:
        bad.start()
    except RuntimeError as e:
        assert "max-inflight-body-bytes" in str(e), e
        bad.log.close()
    else:
        bad.stop()
        raise AssertionError("a budget below --max-body-bytes was accepted")


@test
def http_attacks_slowloris_is_cut_off_and_one_address_is_capped():
    """Clients trickling one header byte at a time are closed by --request-read-timeout
    while others are served; --max-connections-per-ip caps what one address holds."""
    with Server(extra=["--request-read-timeout", "2s", "--max-connections-per-ip", "12"]) as srv:
        slow = [connect(srv) for _ in range(8)]
        for s in slow:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        start, closed = time.time(), {}
        while len(closed) < len(slow) and time.time() - start < 8:
            for i, s in enumerate(slow):
                if i in closed:
                    continue
                try:
                    s.sendall(b"X")  # one byte every 0.25 s: never idle
                except OSError:
                    closed[i] = time.time() - start
            assert srv.get("/healthz")[0] == 200  # others are served meanwhile
            time.sleep(0.25)
        assert len(closed) == len(slow), f"only {len(closed)} of {len(slow)} slow clients were cut off"
        assert all(1.5 < t < 5 for t in closed.values()), closed
        for s in slow:
            s.close()
        assert metric(srv, 'hearth_limit_refusals_total{limit="request_read_timeout"}') >= len(slow)
        # A slow body is cut off the same way.
        s = connect(srv)
        s.sendall(head("POST", "/ingest?name=attack.cpu&format=folded", length=1000))
        t = time.time()
        try:
            while time.time() - t < 8:
                s.sendall(b"m")
                time.sleep(0.25)
        except OSError:
            pass
        assert time.time() - t < 5, "a trickled body outlived the read timeout"
        s.close()
        # One address holds at most 12 connections; the 13th is closed at once.
        idle = [connect(srv) for _ in range(12)]
        time.sleep(0.3)
        extra = connect(srv)
        extra.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_response(extra)[0] is None
        extra.close()
        for s in idle:
            s.close()
        wait_until(lambda: srv.get("/healthz")[0] == 200, 5, 0.1, "the address's connections to be taken again")


def raise_fd_limit(want):
    """Raises this process's descriptor limit to want (or the hard limit); returns what holds."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    n = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft < n:
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def thread_count(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Threads:"))


@test
def http_attacks_10000_idle_connections_cost_no_threads_and_the_server_still_answers():
    """--max-connections is the limit that holds: 10,000 idle keep-alive connections
    (descriptors far past select()'s 1,024) are all kept open on the event loop, without a
    thread each, and requests on top of them are answered."""
    n = 10000
    assert raise_fd_limit(n + 200) >= n + 100, "this machine's hard descriptor limit is below the test's need"
    with Server(extra=["--max-connections", str(n + 50), "--max-connections-per-ip", "0"]) as srv:
        idle = []
        try:
            threads_before = thread_count(srv.proc.pid)
            for _ in range(n):
                idle.append(connect(srv, timeout=30))
            st, body = srv.get("/healthz")
            assert st == 200, (st, body[:200])
            assert metric(srv, "process_open_fds") >= n, "the server does not hold the idle connections"
            # The oldest and the newest idle connections are still served: none was dropped.
            for s in (idle[0], idle[n // 2], idle[-1]):
                s.sendall(head("GET", "/healthz"))
                assert read_response(s)[0] == 200
            # Three requests one after another needed at most a handler thread or two.
            assert thread_count(srv.proc.pid) <= threads_before + 2, (threads_before, thread_count(srv.proc.pid))
            assert metric(srv, "hearth_http_handler_threads") <= 2
        finally:
            for s in idle:
                s.close()


@test
def http_attacks_nul_in_the_url_is_refused_not_cut():
    """MHD decodes %00 into the path or a parameter, which C then ends there: the request would
    act on a shorter name than the one it sent. It is refused."""
    with Server() as srv:
        for method, path in (("PUT", "/api/v1/debuginfo/ab%00cd"), ("GET", "/api/v1/labels/service%00name/values"),
                             ("GET", "/api/v1/query?query=x%00y"),
                             ("POST", "/debuginfo.v1alpha1.DebuginfoService/Upload/12%0034")):
            st, body, _ = srv.request(method, path, b"\x7fELF" if method != "GET" else None)
            assert st == 400 and "NUL" in json.loads(body)["error"], (path, st, body[:200])
        assert srv.get_json("/api/v1/debuginfo") == {"debuginfo": []}


def endless_chunked(srv, path):
    """Streams a chunked body that never ends to path; (status, body) of the answer that
    comes while it streams, and the bytes sent by then."""
    s = connect(srv, timeout=20)
    s.sendall(head("POST" if "debuginfo/" not in path else "PUT", path, {"Transfer-Encoding": "chunked"}))
    stop, sent = threading.Event(), [0]

    def pump():
        chunk = b"%x\r\n%s\r\n" % (65536, b"a" * 65536)
        try:
            while not stop.is_set() and sent[0] < 1 << 30:
                s.sendall(chunk)
                sent[0] += 65536
        except OSError:
            pass  # the server closed: what is wanted
    th = threading.Thread(target=pump, daemon=True)
    th.start()
    try:
        return read_response(s) + (sent[0],)
    finally:
        stop.set()
        th.join()
        s.close()


@test
def http_attacks_endless_chunked_upload_gets_413():
    """A chunked body that never ends, past its limit: the client gets a 413 once the limit
    and a bounded drain (16 MiB) are past, not a silent close at the read timeout; profile
    uploads and spooled debug-file uploads alike, and the server goes on."""
    with Server(extra=["--max-body-bytes", "1MiB", "--max-debuginfo-bytes", "1MiB",
                       "--request-read-timeout", "60s"]) as srv:
        for path, flag in (("/ingest?name=x.cpu&format=folded", "--max-body-bytes"),
                           ("/api/v1/debuginfo/" + "ab" * 20, "--max-debuginfo-bytes")):
            st, b, sent = endless_chunked(srv, path)  # read_response gives up after 20 s (the read timeout is 60)
            assert st == 413 and flag in json.loads(b)["error"], (path, st, b[:200])
            assert sent < 256 << 20, (path, sent)
        assert srv.get("/healthz")[0] == 200
        assert srv.get_json("/api/v1/debuginfo") == {"debuginfo": []}


@test
def http_attacks_header_flood_gets_431_and_the_server_goes_on():
    """1,500 and 3,000 request headers (90 and 180 KB, past a connection's 16 KiB): the client
    gets 431 (libmicrohttpd's own answer, an HTML body), not a silent close, and others are served."""
    with Server() as srv:
        for n in (1500, 3000):
            s = connect(srv)
            s.sendall(head("GET", "/healthz", {"X-H%d" % i: "v" * 50 for i in range(n)}))
            st, _ = read_response(s)
            s.close()
            assert st == 431, (n, st)
            assert srv.get("/healthz")[0] == 200


@test
def http_attacks_second_server_on_the_same_port_exits():
    with Server() as srv:
        other = tempfile.mkdtemp(prefix="hearth-second-", dir=ARGS.tmp)
        p = subprocess.Popen([ARGS.binary, "--listen", f"127.0.0.1:{srv.port}", "--data-dir", other],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, err = p.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            raise AssertionError("a second server started on a port already in use")
        assert p.returncode != 0 and "cannot listen" in err and str(srv.port) in err, (p.returncode, err)
        assert srv.get("/healthz")[0] == 200


@test
def http_attacks_many_query_parameters_get_a_4xx():
    with Server() as srv:
        for n in (500, 2000, 8000):
            s = connect(srv)
            q = "&".join(f"p{i}=v{i}" for i in range(n))
            s.sendall(head("GET", "/api/v1/labels?" + q, {"Connection": "close"}))
            st, b = read_response(s)
            s.close()
            assert st is not None and 400 <= st < 500, (n, st, b[:200])
        # Up to 64 parameters and 8 KiB of query string are served; one past either gets 414.
        assert srv.get("/api/v1/labels", **{f"p{i}": "v" for i in range(64)})[0] == 200
        assert srv.get("/api/v1/labels", **{f"p{i}": "v" for i in range(65)})[0] == 414
        assert srv.get("/api/v1/labels", p="v" * 8000)[0] == 200
        st, b = srv.get("/api/v1/labels", p="v" * 9000)
        assert st == 414 and "8192 bytes" in json.loads(b)["error"], (st, b[:200])
