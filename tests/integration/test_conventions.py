"""Conventions a user expects (issue 11): durations with units, formats told by content."""
import gzip
import os
import subprocess

import run
from run import CPU, T0, Server, test

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def data(rel):
    return open(os.path.join(run.ARGS.testdata, rel), "rb").read()


@test
def durations_need_a_unit():
    for flag, value in (("--retention", "7"), ("--block-duration", "3600"), ("--query-timeout", "30")):
        r = subprocess.run([run.ARGS.binary, "--listen", f"127.0.0.1:{run.free_port()}", "--data-dir",
                            os.path.join(run.ARGS.tmp, "dur"), flag, value], capture_output=True, text=True, timeout=30)
        assert r.returncode != 0 and "needs a unit" in r.stderr, (flag, r.returncode, r.stderr)
    # "0 = off" settings take a bare 0 (they used to refuse it, or take it only by flag name).
    with Server(extra=["--retention", "7d", "--block-duration", "1h30m", "--query-timeout", "0",
                       "--request-read-timeout", "0", "--max-connections-per-ip", "0"]) as srv:
        cfg = run.cli("serve", "--print-config", "--retention", "7d", "--block-duration", "1h30m")
        assert "block-duration = 1h30m" in cfg.stdout, cfg.stdout
        assert srv.get("/ready")[0] == 200


@test
def upload_format_is_told_by_content_when_not_named():
    cpu = data("pprof/go-runtime-cpu-00.pb.gz")
    each = run.pprof_raw(os.path.join(run.ARGS.testdata, "pprof/go-runtime-cpu-00.pb.gz"))[1][1]
    raw = "corpus/gen__go119.cpu.labels.uncompressed.pb"
    jfr = "corpus/jfrparser__parser__testdata__cortex-dev-01__kafka-0__cpu_lock0_alloc0__0.jfr.gz"
    with Server() as srv:
        assert srv.ingest(cpu, name="sniff-gz", **{"from": T0})[0] == 200  # gzipped pprof, no format
        assert run.query(srv, CPU + '{service_name="sniff-gz"}')["total"] == each
        st, b = srv.ingest(data(raw), name="sniff-raw", **{"from": T0})  # plain protobuf
        assert st == 200, b
        types, totals = run.pprof_raw(os.path.join(run.ARGS.testdata, raw))
        got = run.types_of(srv, "sniff-raw")
        assert run.query(srv, '%s{service_name="sniff-raw"}' % got[types[1]])["total"] == totals[1]
        st, b = srv.ingest(data(jfr), name="sniff-jfr", **{"from": T0})  # gzipped JFR
        assert st == 200, b
        assert run.query(srv, CPU + '{service_name="sniff-jfr"}')["total"] > 0
        st, b = srv.ingest(gzip.decompress(data(jfr)), name="sniff-jfr2", **{"from": T0})  # plain JFR
        assert st == 200, b
        assert srv.ingest(b"main;a 3\nmain;b 1\n", name="sniff-folded.cpu", sampleRate="100", **{"from": T0})[0] == 200
        assert run.query(srv, CPU + '{service_name="sniff-folded"}')["total"] == 4 * 10_000_000
    # hearth push detects the same way.
    with Server() as srv:
        path = os.path.join(run.ARGS.testdata, jfr)
        r = run.cli("push", path, "--name", "cli-jfr", "--from", str(T0), "--server", f"http://127.0.0.1:{srv.port}")
        assert r.returncode == 0, r.stdout + r.stderr
        assert run.query(srv, CPU + '{service_name="cli-jfr"}')["total"] > 0


@test
def metrics_pass_promtool_and_405_names_allowed_methods():
    with Server() as srv:
        assert srv.ingest(data("pprof/go-runtime-cpu-00.pb.gz"), name="m", format="pprof", **{"from": T0})[0] == 200
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
            cmd = line.replace("127.0.0.1:4040", f"127.0.0.1:{srv.port}").replace("./hearth ", run.ARGS.binary + " ")
            if cmd.startswith("curl") or "| curl" in cmd:
                cmd = cmd.replace("curl -g", "curl -g -f -s -S")
            if "./hearth query" in line:
                cmd += f" --server http://127.0.0.1:{srv.port}"
            r = subprocess.run(["bash", "-c", cmd], cwd=ROOT, capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, (line, r.stdout[-500:], r.stderr[-500:])
            if "format=top" in line:
                assert '"total":1960000000' in r.stdout, r.stdout[:300]  # the example profile's CPU


@test
def negative_limits_are_refused_everywhere():
    with Server() as srv:
        assert srv.ingest(data("pprof/go-runtime-cpu-00.pb.gz"), name="lim", format="pprof", **{"from": T0})[0] == 200
        sel = CPU + '{service_name="lim"}'
        span = {"from": T0 - 10, "until": T0 + 60}
        for path, extra in (("/api/v1/query", {"format": "top"}), ("/api/v1/profiles", {})):
            st, body = srv.get(path, query=sel, limit="-5", **extra, **span)
            assert st == 400 and b"limit" in body, (path, st, body)
        assert len(srv.get_json("/api/v1/query", query=sel, format="top", limit="3", **span)["functions"]) == 3


def labelled_pprof(samples):
    """A gzipped one-type CPU pprof; samples: [(value, {label: str})], all on one stack."""
    f, e = run.pb_field, run.pb_encode_field
    strings = ["", "cpu", "nanoseconds", "main"]

    def sid(s):
        if s not in strings:
            strings.append(s)
        return strings.index(s)
    body = f(1, e(1, 0, 1) + e(2, 0, 2))
    body += f(4, e(1, 0, 1) + f(4, e(1, 0, 1))) + f(5, e(1, 0, 1) + e(2, 0, 3))
    for value, labels in samples:
        lab = b"".join(f(3, e(1, 0, sid(k)) + e(2, 0, sid(v))) for k, v in labels.items())
        body += f(2, f(1, b"\x01") + f(2, run.pb_put_varint(value)) + lab)
    body += b"".join(f(6, s.encode()) for s in strings)
    return gzip.compress(body)


@test
def span_ids_and_high_cardinality_labels_make_no_series():
    eps = ["/a", "/b", "/c"]
    spans = [(10, {"endpoint": eps[i % 3], "span_id": "%016x" % i, "trace_id": "t%d" % i}) for i in range(144)]
    reqs = [(1, {"request_id": "r%d" % i, "endpoint": "/a"}) for i in range(100)]
    with Server() as srv:
        assert srv.ingest(labelled_pprof(spans), name="traced", format="pprof", **{"from": T0})[0] == 200
        assert srv.ingest(labelled_pprof(reqs), name="reqs", format="pprof", **{"from": T0})[0] == 200
        series = srv.get_json("/api/v1/series", query='{service_name="traced"}')["series"]
        assert len(series) == 3 and {s["labels"]["endpoint"] for s in series} == set(eps), series
        assert all("span_id" not in s["labels"] and "trace_id" not in s["labels"] for s in series), series
        assert run.query(srv, CPU + '{service_name="traced"}')["total"] == 1440
        series = srv.get_json("/api/v1/series", query='{service_name="reqs"}')["series"]
        assert len(series) == 1 and "request_id" not in series[0]["labels"], series
        assert run.query(srv, CPU + '{service_name="reqs"}')["total"] == 100
        m = srv.get("/metrics")[1].decode()
        assert 'hearth_unindexed_label_keys_total{reason="span"} 2' in m, m
        assert 'hearth_unindexed_label_keys_total{reason="high_cardinality"} 1' in m, m
