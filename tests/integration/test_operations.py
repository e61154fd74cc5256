"""Operations: running, configuring and deploying the server.

Health, readiness, /metrics (promtool), --help and flags; the CLI (push, query, check and
quarantine); config file, environment and flag precedence, JSON logs; durations need a unit;
limits (429) and timeouts (504, idle connections); TLS; IPv6 listeners; the deploy/ files; the README's tour.
valgrind_full_cycle is no registered test: `run.py --valgrind` runs it alone.
"""
import http.client
import json
import os
import re
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse
import urllib.request

from harness import ARGS, CPU, ROOT, T0, Server, cli, connect_json, free_port, metric, query, read_testdata, test
from pprof_ref import pprof_raw


@test
def health_ready_metrics_and_help():
    with Server() as srv:
        assert srv.get("/healthz") == (200, b"ok\n")
        assert srv.get("/ready")[0] == 200
        m = srv.get("/metrics")[1].decode()
        for name in ("hearth_ingested_profiles_total", "hearth_query_duration_seconds_bucket", "hearth_head_bytes",
                     "hearth_blocks", "hearth_series", "hearth_ingest_errors_total"):
            assert name in m, name
        assert srv.get("/")[0] == 200
    h = subprocess.run([ARGS.binary, "--help"], capture_output=True, text=True)
    assert h.returncode == 0 and "--data-dir" in h.stdout and "HEARTH_DATA_DIR" in h.stdout
    bad = subprocess.run([ARGS.binary, "--no-such-flag"], capture_output=True, text=True)
    assert bad.returncode != 0 and "unknown flag" in bad.stderr
    env = dict(os.environ, HEARTH_LISTEN="127.0.0.1:notaport")
    bad = subprocess.run([ARGS.binary, "--data-dir", os.path.join(ARGS.tmp, "envtest")], env=env,
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0 and "bad port" in bad.stderr, bad.stderr


@test
def cli_push_query_and_check():
    files = [os.path.join(ARGS.testdata, "pprof", f"go-runtime-cpu-0{i}.pb.gz") for i in range(3)]
    want = sum(pprof_raw(p)[1][1] for p in files)
    with Server() as srv:
        env = {"HEARTH_SERVER": srv.url("")}
        r = cli("push", *files, "--name", "clitest{env=prod}", "--from", str(T0), env=env)
        assert r.returncode == 0 and "pushed 3 of 3 files" in r.stdout, (r.stdout, r.stderr)
        r = cli("push", os.path.join(ARGS.testdata, "corpus", "synthetic__truncated.pb.gz"), "--name", "x", env=env)
        assert r.returncode == 1 and "truncated gzip" in r.stderr, r.stderr
        r = cli("push", "--name", "x", env=env)
        assert r.returncode == 2 and "FILE" in r.stderr
        sel = CPU + '{service_name="clitest"}'
        r = cli("query", sel, "--from", str(T0 - 10), "--until", str(T0 + 60), "--limit", "3", env=env)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert lines[0] == "Type: " + CPU and "flat" in lines[2], r.stdout
        assert len(lines) == 6 and "crypto/sha256.block" in lines[3], r.stdout
        out = os.path.join(ARGS.tmp, "cli.pb.gz")
        r = cli("query", sel, "--from", str(T0 - 10), "--until", str(T0 + 60), "--format", "pprof", "-o", out, env=env)
        assert r.returncode == 0, r.stderr
        assert pprof_raw(out)[1][0] == want
        r = cli("query", sel, "--from", str(T0 - 10), "--until", str(T0 + 60), "--format", "folded", env=env)
        assert sum(int(l.rsplit(" ", 1)[1]) for l in r.stdout.splitlines()) == want
        assert CPU in cli("query", "--types", env=env).stdout
        # --group-by: each function's row, then one indented row per env value that spends it.
        r = cli("query", CPU, "--from", str(T0 - 10), "--until", str(T0 + 60), "--limit", "2", "--group-by", "env",
                env=env)
        lines = r.stdout.splitlines()
        assert r.returncode == 0 and len(lines) == 7 and lines[4].endswith("    env=prod"), r.stdout
        assert lines[3].split()[0] == lines[4].split()[0], r.stdout  # one group: all of the function's flat
        r = cli("query", CPU, "--format", "folded", "--group-by", "env", env=env)
        assert r.returncode == 2 and "--format top" in r.stderr, r.stderr
        r = cli("query", "bad{", env=env)
        assert r.returncode == 1 and "HTTP 400" in r.stderr
        r = cli("query", CPU, env={"HEARTH_SERVER": "http://127.0.0.1:1"})
        assert r.returncode == 1 and "cannot reach" in r.stderr
        srv.request("POST", "/api/v1/admin/flush")
        data_dir = srv.data_dir
    r = cli("check", data_dir)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok") and "1 blocks" in r.stdout, r.stdout
    block = os.path.join(data_dir, "blocks", "anonymous", sorted(os.listdir(os.path.join(data_dir, "blocks", "anonymous")))[0])
    with open(block, "r+b") as f:
        f.seek(60)
        f.write(b"\xff\xff\xff")
    r = cli("check", data_dir)
    assert r.returncode == 1 and "BAD block" in r.stdout, r.stdout
    r = cli("check", data_dir, "--quarantine")
    assert r.returncode == 0 and "quarantined" in r.stdout, r.stdout
    assert cli("check", data_dir).returncode == 0
    assert os.listdir(os.path.join(data_dir, "quarantine"))
    assert cli("check", os.path.join(ARGS.tmp, "nothing-here")).returncode == 1
    assert cli("nosuchcommand").returncode == 2
    for c in ("push", "query", "check"):
        h = cli(c, "--help")
        assert h.returncode == 0 and "Example" in h.stdout, c
    assert cli("version").stdout.startswith("hearth ")


@test
def config_file_env_flags_and_json_logs():
    conf = os.path.join(ARGS.tmp, "hearth.conf")
    with open(conf, "w") as f:
        f.write("# test config\nzstd-level = 9\nmax-labels = \"12\"\nlog-format = json\n")
    r = cli("serve", "--config", conf, "--max-labels", "13", "--print-config", env={"HEARTH_ZSTD_LEVEL": "5"})
    assert r.returncode == 0, r.stderr
    got = {l.split("=")[0].strip(): l for l in r.stdout.splitlines() if "=" in l and not l.startswith("#")}
    assert "= 5" in got["zstd-level"] and "environment" in got["zstd-level"]
    assert "= 13" in got["max-labels"] and "flag" in got["max-labels"]
    assert "= json" in got["log-format"] and "config" in got["log-format"]
    assert "= 127.0.0.1:4040" in got["listen"] and "default" in got["listen"]
    # --print-config output is itself a valid config file.
    again = os.path.join(ARGS.tmp, "again.conf")
    open(again, "w").write(r.stdout)
    assert cli("--config", again, "--print-config").returncode == 0
    with open(conf + ".bad", "w") as f:
        f.write("zstd-level = 9\nno-such-key = 1\n")
    r = cli("--config", conf + ".bad")
    assert r.returncode == 2 and ":2: unknown setting" in r.stderr, r.stderr
    with Server(extra=["--config", conf]) as srv:
        srv.get("/healthz")
        srv.get("/api/v1/query", query="bad{")
    logs = [json.loads(l) for l in open(os.path.join(srv.data_dir, "server.log")) if l.startswith("{")]
    reqs = [l for l in logs if l["msg"] == "http.request"]
    assert any(l["path"] == "/api/v1/query" and l["status"] == "400" and l["tenant"] == "anonymous" for l in reqs), reqs
    assert all("query=" not in l["path"] for l in reqs)  # no query strings in logs


@test
def limits_refuse_with_429_and_count():
    with Server(extra=["--max-series-per-tenant", "3", "--ingest-rate-limit", "64KiB"]) as srv:
        for i in range(3):
            assert srv.ingest(b"main;a 1\n", name="lim.cpu{k=%d}" % i, format="folded", **{"from": T0})[0] == 200
        st, b = srv.ingest(b"main;a 1\n", name="lim.cpu{k=9}", format="folded", **{"from": T0})
        assert st == 429 and "max-series-per-tenant" in json.loads(b)["error"], (st, b)
        assert srv.ingest(b"main;a 1\n", name="lim.cpu{k=1}", format="folded", **{"from": T0})[0] == 200  # existing
        assert query(srv, CPU + '{service_name="lim"}')["profiles"] == 4  # the refused upload stored nothing
        big = b"main;a 1\n" * 1200  # ~10 KiB onto an existing series
        codes = [srv.ingest(big, name="lim.cpu{k=1}", format="folded", **{"from": T0})[0] for _ in range(40)]
        assert 429 in codes and codes[0] == 200 and set(codes) == {200, 429}, codes  # against 64 KiB/s
        m = srv.get("/metrics")[1].decode()
        assert re.search(r'hearth_limit_refusals_total\{limit="ingest_rate"\} [1-9]', m)
        assert re.search(r'hearth_ingest_errors_total\{reason="limited"\} [1-9]', m)
    with Server(extra=["--max-concurrent-ingests", "1", "--wal-fsync", "always"]) as srv:
        big = open(os.path.join(ARGS.testdata, "pprof", "pprof-large.cpu.pb.gz"), "rb").read()
        codes, lock = [], threading.Lock()

        def push():
            for _ in range(4):
                c = srv.ingest(big, name="conc", format="pprof", **{"from": T0})[0]
                with lock:
                    codes.append(c)

        threads = [threading.Thread(target=push) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert set(codes) <= {200, 429} and 429 in codes and 200 in codes, codes
        assert re.search(r'hearth_limit_refusals_total\{limit="max_concurrent_ingests"\} [1-9]',
                         srv.get("/metrics")[1].decode())


@test
def timeouts_idle_connections_and_slow_queries():
    """--query-timeout stops a merge past its deadline with 504 (REST and Connect) and counts
    it; --idle-timeout closes a connection that sends nothing; data is untouched."""
    cpu = open(os.path.join(ARGS.testdata, "pprof", "go-runtime-cpu-00.pb.gz"), "rb").read()
    data_dir = tempfile.mkdtemp(prefix="hearth-timeout-", dir=ARGS.tmp)
    # 1 ns: any merge that reaches a segment is past it (the deadline counts from the request's start).
    with Server(data_dir, extra=["--query-timeout", "1ns", "--idle-timeout", "1s"]) as srv:
        assert srv.ingest(cpu, name="slow", format="pprof", **{"from": T0})[0] == 200
        st, b = srv.get("/api/v1/query", query=CPU, format="top", **{"from": T0 - 10, "until": T0 + 60})
        assert st == 504 and "--query-timeout" in json.loads(b)["error"], (st, b)
        st, b, _ = srv.request("POST", "/querier.v1.QuerierService/SelectMergeStacktraces",
                               json.dumps({"profileTypeID": CPU, "start": (T0 - 10) * 1000, "end": (T0 + 60) * 1000}).encode(),
                               {"Content-Type": "application/json"})
        assert st == 504 and json.loads(b)["code"] == "deadline_exceeded", (st, b)
        assert metric(srv, 'hearth_limit_refusals_total{limit="query_timeout"}') == 2
        # Discovery runs under the same deadline (a slow selector there ran unbounded).
        st, b = srv.get("/api/v1/labels")
        assert st == 504 and "--query-timeout" in json.loads(b)["error"], (st, b)
        s = socket.create_connection(("127.0.0.1", srv.port))
        s.settimeout(10)
        t = time.time()
        assert s.recv(1) == b"" and time.time() - t < 5  # closed by the server, not by our timeout
        s.close()
    with Server(data_dir) as srv:  # default 60 s: the same query answers
        assert query(srv, CPU + '{service_name="slow"}', **{"from": T0 - 10, "until": T0 + 60})["total"] > 0


@test
def tls_listener():
    import ssl
    cert, key = os.path.join(ARGS.tmp, "cert.pem"), os.path.join(ARGS.tmp, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    srv = Server(extra=["--tls-cert", cert, "--tls-key", key])
    srv.port = free_port()
    log = open(os.path.join(srv.data_dir, "server.log"), "ab")
    proc = subprocess.Popen([ARGS.binary, "--listen", f"127.0.0.1:{srv.port}", "--data-dir", srv.data_dir,
                             "--tls-cert", cert, "--tls-key", key], stdout=log, stderr=log)
    ctx = ssl.create_default_context(cafile=cert)
    base = f"https://127.0.0.1:{srv.port}"
    try:
        deadline = time.time() + 30
        while True:
            try:
                urllib.request.urlopen(base + "/ready", context=ctx, timeout=5).read()
                break
            except OSError:
                assert time.time() < deadline and proc.poll() is None, "TLS server did not start"
                time.sleep(0.1)
        req = urllib.request.Request(base + "/ingest?name=tls.cpu&format=folded&from=%d" % T0, data=b"main;a 1\n",
                                     method="POST")
        assert urllib.request.urlopen(req, context=ctx, timeout=30).status == 200
        q = base + "/api/v1/query?" + urllib.parse.urlencode({"query": CPU, "format": "top", "from": T0 - 10,
                                                              "until": T0 + 60})
        assert json.loads(urllib.request.urlopen(q, context=ctx, timeout=30).read())["total"] == 10000000
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{srv.port}/healthz", timeout=5).read()
            raise AssertionError("plain HTTP answered on a TLS listener")
        except (OSError, http.client.HTTPException):
            pass
    finally:
        proc.terminate()
        assert proc.wait(timeout=60) == 0
        log.close()
    r = cli("--data-dir", os.path.join(ARGS.tmp, "tlsbad"), "--listen", f"127.0.0.1:{free_port()}",
            "--tls-cert", cert)
    assert r.returncode == 1 and "--tls-key" in r.stderr, r.stderr
    r = cli("--data-dir", os.path.join(ARGS.tmp, "tlsbad"), "--listen", f"127.0.0.1:{free_port()}",
            "--tls-cert", key, "--tls-key", cert)
    assert r.returncode == 1, r.stderr


@test
def ipv6_listeners():
    """--listen takes an IPv6 address in brackets: [::1] serves IPv6 only, [::] IPv4 too (dual
    stack); the log names IPv6 clients; a malformed address is refused at start."""
    with Server(host="[::1]") as srv:
        assert srv.ingest(b"main;a 1\n", name="v6.cpu", format="folded", **{"from": T0})[0] == 200
        assert query(srv, CPU)["total"] == 10000000
        with socket.socket() as s:  # nothing listens on IPv4
            assert s.connect_ex(("127.0.0.1", srv.port)) != 0
    assert "client=::1 " in srv.tail(), srv.tail()
    with Server(host="[::]") as srv:
        for host in ("127.0.0.1", "[::1]"):  # not /ready: probes are logged at debug level
            assert urllib.request.urlopen(f"http://{host}:{srv.port}/api/v1/profile-types", timeout=5).status == 200
    assert "client=127.0.0.1 " in srv.tail(), srv.tail()  # an IPv4 client through [::], unwrapped
    for bad in ("[zz]:4040", "[::1]", "[::1]:", "::1:4040", "[]:4040", "[::1]:+4040", "[::1]: 4040", "[::1]:65536"):
        r = cli("--data-dir", os.path.join(ARGS.tmp, "v6bad"), "--listen", bad)
        assert r.returncode == 1 and "--listen" in r.stderr, (bad, r.stderr)


@test
def deploy_files_are_valid():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    unit = open(os.path.join(root, "deploy", "hearth.service")).read()
    for key in ("DynamicUser=yes", "ProtectSystem=strict", "StateDirectory=hearth"):
        assert key in unit, key
    path = os.path.join(ARGS.tmp, "hearth.service")
    open(path, "w").write(unit.replace("/usr/local/bin/hearth", ARGS.binary))
    r = subprocess.run(["systemd-analyze", "verify", path], capture_output=True, text=True)
    assert r.returncode == 0 and not r.stderr.strip(), r.stderr
    example = os.path.join(root, "deploy", "hearth.conf.example")
    r = cli("--config", example, "--print-config")
    keys = re.compile(r"^(?:# )?([a-z-]+) = ", re.M)
    assert r.returncode == 0, r.stderr
    assert keys.findall(r.stdout) == keys.findall(open(example).read()), "example config is missing keys"
    # Every shared library the binary needs directly comes from a package the image installs.
    docker = open(os.path.join(root, "deploy", "Dockerfile")).read()
    runtime = docker.split("FROM debian:12-slim\n", 1)[1]
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]",
                        subprocess.run(["readelf", "-d", ARGS.binary], capture_output=True, text=True).stdout)
    assert needed
    for lib in needed:
        if lib.split(".so")[0] in ("libc", "libm", "libpthread", "libdl", "librt", "libgcc_s", "libasan", "libubsan", "libtsan"):
            continue  # the C runtime: in every Debian image
        real = subprocess.run(["sh", "-c", f"ldconfig -p | awk '$1==\"{lib}\"{{print $NF; exit}}'"],
                              capture_output=True, text=True).stdout.strip()
        # By file name: with merged /usr, dpkg may know the file under /lib or /usr/lib. With its
        # directory (x86_64-linux-gnu): by name alone, libstdc++.so.6.0.30 is lib32stdc++6's too.
        real = os.path.realpath(real)
        pkg = subprocess.run(["dpkg", "-S", "*/" + os.path.basename(os.path.dirname(real)) + "/" + os.path.basename(real)],
                             capture_output=True, text=True).stdout.split(":")[0]
        assert pkg and pkg in runtime, f"{lib} ({pkg}) is not installed by deploy/Dockerfile"
    for key in ("USER hearth", "VOLUME /var/lib/hearth", "HEALTHCHECK", "/healthz"):
        assert key in runtime, key
    with Server(extra=["--scrape-config", os.path.join(root, "deploy", "examples", "scrape.json")]) as srv:
        jobs = {t["job"] for t in srv.get_json("/api/v1/targets")["targets"]}
        assert jobs == {"checkout", "batch", "custom"}, jobs


@test
def durations_need_a_unit():
    for flag, value in (("--retention", "7"), ("--block-duration", "3600"), ("--query-timeout", "30")):
        r = subprocess.run([ARGS.binary, "--listen", f"127.0.0.1:{free_port()}", "--data-dir",
                            os.path.join(ARGS.tmp, "dur"), flag, value], capture_output=True, text=True, timeout=30)
        assert r.returncode != 0 and "needs a unit" in r.stderr, (flag, r.returncode, r.stderr)
    # "0 = off" settings take a bare 0 (they used to refuse it, or take it only by flag name).
    with Server(extra=["--retention", "7d", "--block-duration", "1h30m", "--query-timeout", "0",
                       "--request-read-timeout", "0", "--max-connections-per-ip", "0"]) as srv:
        cfg = cli("serve", "--print-config", "--retention", "7d", "--block-duration", "1h30m")
        assert "block-duration = 1h30m" in cfg.stdout, cfg.stdout
        assert srv.get("/ready")[0] == 200


@test
def metrics_pass_promtool_and_405_names_allowed_methods():
    with Server() as srv:
        assert srv.ingest(read_testdata("pprof/go-runtime-cpu-00.pb.gz"), name="m", format="pprof", **{"from": T0})[0] == 200
        text = srv.get("/metrics")[1]
        r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, timeout=60)
        assert r.returncode == 0, (r.stdout + r.stderr).decode()
        names = {l.split()[2] for l in text.decode().splitlines() if l.startswith("# TYPE")}
        samples = {l.split("{")[0].split()[0] for l in text.decode().splitlines() if l and not l.startswith("#")}
        missing = {s for s in samples if s not in names and not any(s.startswith(n + "_") for n in names)}
        assert not missing, missing  # every family has HELP/TYPE
        for want in ("process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds",
                     "process_start_time_seconds", "hearth_build_info"):
            assert want in samples, want
        st, body, hdr = srv.request("GET", "/ingest")
        assert st == 405 and hdr.get("Allow") == "POST", (st, hdr)
        st, body, hdr = srv.request("POST", "/api/v1/query", b"")
        assert st == 405 and hdr.get("Allow") == "GET, HEAD", (st, hdr)
        srv.get("/healthz")
        srv.get("/api/v1/query", query="{", **{"from": "now-1h"})
    log = open(os.path.join(srv.log_dir, "server.log")).read().splitlines()
    reqs = [l for l in log if "msg=http.request" in l]
    assert not any("path=/healthz" in l and "level=info" in l for l in reqs), "probes log at debug"
    bad = [l for l in reqs if "path=/api/v1/query" in l and "status=400" in l]
    assert bad and "client=127.0.0.1" in bad[0] and 'err="' in bad[0], bad


def readme_tour():
    """The shell lines of the README's tour block (after `make run`), continuations joined."""
    text = open(os.path.join(ROOT, "README.md")).read()
    block = text.split("## 60-second tour", 1)[1].split("```sh", 2)[2].split("```", 1)[0]
    lines, cur = [], ""
    for line in block.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        cur += line.rstrip("\\").rstrip() + " "
        if not line.endswith("\\"):
            lines.append(cur.strip())
            cur = ""
    return lines


@test
def readme_tour_runs_from_a_clone():
    tour = readme_tour()
    assert len(tour) >= 5 and any("docs/examples/cpu.pb.gz" in l for l in tour), tour
    with Server() as srv:
        for line in tour:
            cmd = line.replace("127.0.0.1:4040", f"127.0.0.1:{srv.port}").replace("./hearth ", ARGS.binary + " ")
            if cmd.startswith("curl") or "| curl" in cmd:
                cmd = cmd.replace("curl -g", "curl -g -f -s -S")
            if "./hearth query" in line:
                cmd += f" --server http://127.0.0.1:{srv.port}"
            r = subprocess.run(["bash", "-c", cmd], cwd=ROOT, capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, (line, r.stdout[-500:], r.stderr[-500:])
            if "format=top" in line and "group_by" not in line:
                assert '"total":1960000000' in r.stdout, r.stdout[:300]  # the example profile's CPU
            if "group_by=service_name" in line:  # the fleet table: checkout's and demo's functions
                assert '"groupBy":["service_name"]' in r.stdout and '"service_name":"checkout"' in r.stdout, \
                    r.stdout[:300]


def valgrind_full_cycle():
    """Not in TESTS: run by `make test-valgrind` with --binary pointing at a valgrind wrapper."""
    files = [os.path.join(ARGS.testdata, "pprof", f) for f in ("go-runtime-cpu-00.pb.gz", "go-runtime-heap.pb.gz")]
    with Server(extra=["--wal-fsync", "none"]) as srv:
        for i, f in enumerate(files):
            assert srv.ingest(open(f, "rb").read(), name="vg", format="pprof", **{"from": T0 + i})[0] == 200
        assert srv.ingest(b"main;a 1\n", name="vg.cpu", format="folded", **{"from": T0})[0] == 200
        assert srv.ingest(b"garbage", name="vg", format="pprof")[0] == 422
        srv.request("POST", "/api/v1/admin/flush")
        assert srv.ingest(open(files[0], "rb").read(), name="vg", format="pprof", **{"from": T0 + 5})[0] == 200
        for fmt in ("flamegraph", "top", "folded", "pprof"):
            assert srv.get("/api/v1/query", query=CPU + '{service_name="vg"}', format=fmt,
                           **{"from": T0 - 10, "until": T0 + 60})[0] == 200
        for path in ("/api/v1/series", "/api/v1/labels", "/api/v1/profile-types", "/metrics"):
            assert srv.get(path)[0] == 200


def valgrind_symbolize_and_connect_cycle():
    """Not in TESTS: the second cycle `make test-valgrind` runs. Symbolization (a debug file
    uploaded, proven and read through libdw, the cache written), Connect merges, a one-pass
    group-by, a diff, and the debug file deleted."""
    sym = os.path.join(ARGS.testdata, "symbolize")
    build_id = "2d6912fd3dd64542f6f6294f4bf9cb6c265b3085"
    samples = "process_cpu:samples:count:cpu:nanoseconds"
    with Server(extra=["--wal-fsync", "none"]) as srv:
        body = open(os.path.join(sym, "parca-main.cpu.pb.gz"), "rb").read()
        assert srv.ingest(body, name="vgsym{pod=a}", format="pprof", **{"from": T0})[0] == 200
        assert srv.ingest(body, name="vgsym{pod=b}", format="pprof", **{"from": T0 + 10})[0] == 200
        st, b, _ = srv.request("PUT", "/api/v1/debuginfo/" + build_id, open(os.path.join(sym, build_id + ".debuginfo"),
                                                                           "rb").read())
        assert st == 200, b
        sel = samples + '{service_name="vgsym"}'
        span = {"from": T0 - 10, "until": T0 + 60}
        for _ in range(2):  # the second reads the symbolization cache
            st, b = srv.get("/api/v1/query", query=sel, format="top", **span)
            assert st == 200 and b"main.iterate" in b, (st, b[:200])
        st, b = srv.get("/api/v1/timeseries", query=sel, group_by="pod", step="10s", **span)
        assert st == 200 and len(json.loads(b)["groups"]) == 2, (st, b[:200])
        doc = {"profileTypeID": samples, "labelSelector": '{service_name="vgsym"}', "start": (T0 - 10) * 1000,
               "end": (T0 + 60) * 1000}
        for method, extra in (("SelectMergeStacktraces", {}), ("SelectSeries", {"groupBy": ["pod"], "step": 10}),
                              ("Diff", None)):
            req = {"left": doc, "right": doc} if extra is None else dict(doc, **extra)
            assert connect_json(srv, method, req)[0] == 200, method
        assert srv.request("DELETE", "/api/v1/debuginfo/" + build_id)[0] == 200
        st, b = srv.get("/api/v1/query", query=sel, format="top", **span)
        assert st == 200 and b"main.iterate" not in b, (st, b[:200])

