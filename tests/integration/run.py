#!/usr/bin/env python3
"""Integration tests: the real ./hearth binary, real profiles, go tool pprof as the reference.

Each test starts its own server on a free port with a fresh data dir, pushes profiles over
HTTP exactly as agents do, and checks answers against `go tool pprof` run on the same files.
Ends with the line "integration: N passed, M failed"; exits non-zero if anything failed.
"""
import argparse
import gzip
import html
import http.client
import io
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request

ARGS = None
T0 = 1700000000  # a fixed push time (unix seconds) for deterministic ranges
CPU = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"


# ---------------------------------------------------------------- server control

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, data_dir=None, extra=(), log_dir=None):
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
            [ARGS.binary, "--listen", f"127.0.0.1:{self.port}", "--data-dir", self.data_dir] + self.extra,
            stdout=self.log, stderr=self.log)
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
        return f"http://127.0.0.1:{self.port}{path}"

    def request(self, method, path, body=None, headers=None):
        req = urllib.request.Request(self.url(path), data=body, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return r.status, r.read(), dict(r.headers)
        except urllib.error.HTTPError as e:
            return e.code, e.read(), dict(e.headers)

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


# ---------------------------------------------------------------- go tool pprof reference

def is_gauge(sample_type):
    return sample_type.startswith("inuse_") or sample_type in ("goroutine", "goroutines")


def pprof_raw(path, *extra, gauges_as_stored=False):
    """Sample types and per-type totals, as `go tool pprof -raw [extra]` reports them (which
    leaves out samples without locations: see unlocated_totals). gauges_as_stored: leave out
    the negative samples of gauge types, as Hearth does (a delta's inuse_* differences)."""
    out = subprocess.run(["go", "tool", "pprof", "-raw", *extra, path], capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    i = lines.index("Samples:")
    types = []
    for t in lines[i + 1].split():
        name, _, unit = t.replace("[dflt]", "").partition("/")
        types.append((name or "unknown", unit or "unknown"))
    totals = [0] * len(types)
    sample = re.compile(r"^\s*((?:-?\d+\s+)*-?\d+):")
    for line in lines[i + 2:]:
        if not line.startswith(" "):
            break
        m = sample.match(line)
        if m:
            for k, v in enumerate(m.group(1).split()):
                if not (gauges_as_stored and int(v) < 0 and is_gauge(types[k][0])):
                    totals[k] += int(v)
    return types, totals


def unlocated_totals(path, ntypes):
    """Per type, the sum of the samples that have no locations: `go tool pprof -raw` does not
    list them, but pprof counts them in a profile's total (-top's "of N total")."""
    raw = open(path, "rb").read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    sums = [0] * ntypes
    for num, _, sample in pb_fields(raw):
        if num != 2:
            continue
        fields = pb_decode(sample)
        if fields.get(1):
            continue
        values = [v for chunk in fields.get(2, []) for v in (pb_packed(chunk) if isinstance(chunk, bytes) else [chunk])]
        for k, v in enumerate(values[:ntypes]):
            sums[k] += v
    return sums


def pprof_top(path, sample_index, unit):
    """{function: (flat, cum)} from `go tool pprof -top`, with raw integer values."""
    args = ["go", "tool", "pprof", "-top", "-nodecount=100000", "-nodefraction=0", "-edgefraction=0",
            f"-sample_index={sample_index}"]
    if unit in ("nanoseconds", "bytes"):
        args.append("-unit=" + ("ns" if unit == "nanoseconds" else "B"))
    out = subprocess.run(args + [path], capture_output=True, text=True, check=True).stdout
    res = {}
    row = re.compile(r"^\s*(-?\d+)(?:ns|B)?\s+\S+%\s+\S+%\s+(-?\d+)(?:ns|B)?\s+\S+%\s+(.+)$")
    for line in out.splitlines():
        m = row.match(line)
        if m:
            res[re.sub(r" \((partial-)?inline\)$", "", m.group(3).strip())] = (int(m.group(1)), int(m.group(2)))
    return res


def valid_profiles():
    """Every pprof in the shared test data that go tool pprof reads."""
    files = []
    for d in ("pprof", "corpus"):
        for name in sorted(os.listdir(os.path.join(ARGS.testdata, d))):
            p = os.path.join(ARGS.testdata, d, name)
            if not (name.endswith(".pb.gz") or name.endswith(".pb")) or name.startswith("synthetic__"):
                continue
            if "jfr" in name:
                continue
            files.append(p)
    return files


def types_of(srv, service):
    sel = '{service_name="%s"}' % service
    return {(t["sampleType"], t["sampleUnit"]): t["id"]
            for t in srv.get_json("/api/v1/profile-types", query=sel)["profileTypes"]}


def query(srv, sel, fmt="top", frm=T0 - 10, until=T0 + 3600, **kw):
    span = {"from": kw.pop("from", frm), "until": kw.pop("until", until)}
    return srv.get_json("/api/v1/query", query=sel, format=fmt, **span, **kw)


# ---------------------------------------------------------------- tests

TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


@test
def every_corpus_profile_matches_go_pprof_totals():
    files = valid_profiles()
    assert len(files) >= 40, f"only {len(files)} profiles found under {ARGS.testdata}"
    with Server() as srv:
        for i, path in enumerate(files):
            body = open(path, "rb").read()
            status, resp = srv.ingest(body, name=f"corpus{i}", format="pprof", **{"from": T0, "until": T0 + 10})
            assert status == 200, f"{os.path.basename(path)}: {status} {resp!r}"
        for i, path in enumerate(files):
            types, totals = pprof_raw(path, gauges_as_stored=True)  # a delta heap's negative inuse_* are dropped
            unlocated = unlocated_totals(path, len(types))
            got = types_of(srv, f"corpus{i}")
            for (st, unit), total, extra in zip(types, totals, unlocated):
                assert (st, unit) in got, f"{os.path.basename(path)}: type {st}/{unit} missing, have {list(got)}"
                total += extra
                ans = query(srv, '%s{service_name="corpus%d"}' % (got[(st, unit)], i), limit=1)
                assert ans["total"] == total, f"{os.path.basename(path)} {st}: hearth {ans['total']} != pprof {total}"
        assert 'hearth_dropped_samples_total{reason="negative_gauge"} 0' not in srv.get("/metrics")[1].decode()


@test
def top_functions_match_go_pprof():
    cases = [("pprof/go-runtime-cpu-00.pb.gz", "cpu", "nanoseconds"),
             ("pprof/pprof-large.cpu.pb.gz", "cpu", "nanoseconds"),
             ("pprof/go-runtime-heap.pb.gz", "inuse_space", "bytes"),
             ("pprof/go-runtime-heap.pb.gz", "alloc_objects", "count"),
             ("corpus/gen__go119.block.pb.gz", "delay", "nanoseconds"),
             ("corpus/parca__pkg__query__testdata__profile-with-labels.pb.gz", "samples", "count"),
             ("corpus/gen__go119.allocs.huge.pb.gz", "alloc_objects", "count")]
    with Server() as srv:
        for i, (rel, st, unit) in enumerate(cases):
            path = os.path.join(ARGS.testdata, rel)
            assert srv.ingest(open(path, "rb").read(), name=f"top{i}", format="pprof", **{"from": T0})[0] == 200
            tid = types_of(srv, f"top{i}")[(st, unit)]
            ans = query(srv, '%s{service_name="top%d"}' % (tid, i), limit=15)
            ref = pprof_top(path, st, unit)
            assert ans["functions"], rel
            for fn in ans["functions"]:
                assert fn["name"] in ref, f"{rel}: {fn['name']} not in go tool pprof -top"
                assert (fn["self"], fn["total"]) == ref[fn["name"]], \
                    f"{rel} {fn['name']}: hearth self/total {fn['self']}/{fn['total']} != pprof {ref[fn['name']]}"
            best = max(ref.values())[0]
            assert ans["functions"][0]["self"] == best, f"{rel}: top self {ans['functions'][0]['self']} != {best}"


@test
def merged_pprof_opens_in_go_pprof_with_exact_total():
    files = [os.path.join(ARGS.testdata, "pprof", f"go-runtime-cpu-0{i}.pb.gz") for i in range(6)]
    with Server() as srv:
        for i, p in enumerate(files):
            assert srv.ingest(open(p, "rb").read(), name="six", format="pprof", **{"from": T0 + i})[0] == 200
        want = sum(pprof_raw(p)[1][1] for p in files)
        # go tool pprof's own merge is the reference.
        merged = os.path.join(ARGS.tmp, "six-merged.pb.gz")
        with open(merged, "wb") as f:
            subprocess.run(["go", "tool", "pprof", "-proto"] + files, stdout=f, stderr=subprocess.DEVNULL, check=True)
        assert pprof_raw(merged)[1][1] == want
        ans = query(srv, CPU + '{service_name="six"}', limit=5)
        assert ans["total"] == want, (ans["total"], want)
        ref = pprof_top(merged, "cpu", "nanoseconds")
        for fn in ans["functions"]:
            assert (fn["self"], fn["total"]) == ref[fn["name"]], fn
        # go tool pprof reads the server's merged pprof straight from the URL.
        url = srv.url("/api/v1/query?" + urllib.parse.urlencode(
            {"query": CPU + '{service_name="six"}', "from": T0 - 10, "until": T0 + 60, "format": "pprof"}))
        env = dict(os.environ, PPROF_TMPDIR=ARGS.tmp)
        out = subprocess.run(["go", "tool", "pprof", "-raw", url], capture_output=True, text=True, env=env)
        assert out.returncode == 0, out.stderr
        status, body = srv.get("/api/v1/query", query=CPU + '{service_name="six"}', format="pprof",
                               **{"from": T0 - 10, "until": T0 + 60})
        path = os.path.join(ARGS.tmp, "from-server.pb.gz")
        open(path, "wb").write(body)
        assert pprof_raw(path)[1][0] == want
        top = subprocess.run(["go", "tool", "pprof", "-top", url], capture_output=True, text=True, env=env)
        assert top.returncode == 0 and "crypto/sha256.block" in top.stdout, top.stderr
        # Time series: one point per profile, summing to the same total.
        ts = srv.get_json("/api/v1/timeseries", query=CPU + '{service_name="six"}', step="1s",
                          **{"from": T0, "until": T0 + 5})
        assert sum(p["value"] for p in ts["points"]) == want
        assert sum(1 for p in ts["points"] if p["value"] > 0) == 6
        # A narrower range merges fewer profiles.
        two = query(srv, CPU + '{service_name="six"}', frm=T0, until=T0 + 1)
        assert two["total"] == sum(pprof_raw(p)[1][1] for p in files[:2])


@test
def flamegraph_json_has_pyroscope_shape():
    path = os.path.join(ARGS.testdata, "pprof", "go-runtime-cpu-00.pb.gz")
    with Server() as srv:
        srv.ingest(open(path, "rb").read(), name="fg", format="pprof", **{"from": T0})
        fg = query(srv, CPU + '{service_name="fg"}', fmt="flamegraph")
        fb = fg["flamebearer"]
        assert fb["names"][0] == "total" and fb["numTicks"] == pprof_raw(path)[1][1]
        assert all(len(level) % 4 == 0 for level in fb["levels"])
        assert fb["levels"][0] == [0, fb["numTicks"], 0, 0]
        # Every level's totals fit within the root, and the self values sum to it.
        assert sum(level[i + 2] for level in fb["levels"] for i in range(0, len(level), 4)) == fb["numTicks"]
        assert fg["metadata"]["units"] == "samples" and fg["metadata"]["sampleRate"] == 1000000000
        assert fg["metadata"]["format"] == "single" and fg["timeline"]["samples"]
        small = query(srv, CPU + '{service_name="fg"}', fmt="flamegraph", max_nodes=10)
        nodes = sum(len(level) // 4 for level in small["flamebearer"]["levels"])
        assert nodes <= 10 and small["flamebearer"]["numTicks"] == fb["numTicks"], nodes
        # Pyroscope's own read routes answer the same document.
        for route in ("/pyroscope/render", "/render"):
            r = srv.get_json(route, query="fg.cpu{}", **{"from": T0 - 10, "until": T0 + 3600})
            assert r["flamebearer"]["numTicks"] == fb["numTicks"], route
        assert "fg" in srv.get_json("/pyroscope/label-values", label="service_name")
        assert "fg.cpu" in srv.get_json("/pyroscope/label-values", label="__name__")  # Pyroscope 0.x: applications
        assert "endpoint" in srv.get_json("/pyroscope/labels")
        # Grafana's nested-set frame: pre-order rows whose children sum to at most their parent.
        df = query(srv, CPU + '{service_name="fg"}', fmt="dataframe", frm=T0 - 10, until=T0 + 60)
        f = df["fields"]
        assert df["unit"] == "ns" and f["label"][0] == "total" and f["level"][0] == 0
        assert f["value"][0] == fb["numTicks"] and sum(f["self"]) == fb["numTicks"]
        assert len(f["level"]) == len(f["value"]) == len(f["self"]) == len(f["label"])
        for i in range(1, len(f["level"])):
            assert f["level"][i] <= f["level"][i - 1] + 1  # pre-order: never skips a level down
        folded = srv.get("/api/v1/query", query=CPU + '{service_name="fg"}', format="folded",
                         **{"from": T0 - 10, "until": T0 + 60})[1].decode()
        assert sum(int(l.rsplit(" ", 1)[1]) for l in folded.splitlines()) == fb["numTicks"]


def folded_of(srv, sel, frm, until):
    """{stack: value} of a merge, from format=folded."""
    text = srv.get("/api/v1/query", query=sel, format="folded", **{"from": frm, "until": until})[1].decode()
    out = {}
    for line in text.splitlines():
        stack, _, v = line.rpartition(" ")
        out[stack] = out.get(stack, 0) + int(v)
    return out


def diff_selves(doc):
    """{stack: (left self, right self)} decoded from a double flamebearer, the way a renderer
    nests it: a node's parent is the node above whose combined span holds its combined x."""
    fb, out, above = doc["flamebearer"], {}, []
    for level in fb["levels"]:
        assert len(level) % 7 == 0
        here, lx, rx = [], 0, 0
        for i in range(0, len(level), 7):
            lx += level[i]
            rx += level[i + 3]
            x, w = lx + rx, level[i + 1] + level[i + 4]
            name = fb["names"][level[i + 6]]
            parent = next((p for p in above if p[0] <= x < p[0] + max(p[1], 1)), None)
            path = (parent[2] + ";" + name) if parent and parent[2] else ("" if not above else name)
            here.append((x, w, path))
            if path and (level[i + 2] or level[i + 5]):
                l0, r0 = out.get(path, (0, 0))
                out[path] = (l0 + level[i + 2], r0 + level[i + 5])
            lx += level[i + 1]
            rx += level[i + 4]
        above = here
    return out


@test
def diff_profiles_list_and_single_profiles():
    files = [os.path.join(ARGS.testdata, "pprof", f"go-runtime-cpu-0{i}.pb.gz") for i in range(6)]
    totals = [pprof_raw(f)[1][1] for f in files]
    sel = CPU + '{service_name="shop"}'
    with Server() as srv:
        for i, f in enumerate(files):
            env = "prod" if i % 2 else "canary"
            assert srv.ingest(open(f, "rb").read(), name=f"shop{{env={env}}}", format="pprof",
                              **{"from": T0 + 10 * i})[0] == 200
        left, right = (T0 - 1, T0 + 25), (T0 + 26, T0 + 60)
        d = srv.get_json("/api/v1/diff", query=sel, left_from=left[0], left_until=left[1], right_from=right[0],
                         right_until=right[1], max_nodes=0)
        assert d["metadata"]["format"] == "double" and d["flamebearer"]["names"][0] == "total"
        assert d["leftTicks"] == sum(totals[:3]) and d["rightTicks"] == sum(totals[3:]), d["leftTicks"]
        assert d["flamebearer"]["numTicks"] == d["leftTicks"] + d["rightTicks"]
        # Each side of the diff is exactly that side's own merge, stack by stack.
        got = diff_selves(d)
        want_l, want_r = folded_of(srv, sel, *left), folded_of(srv, sel, *right)
        assert {k: v[0] for k, v in got.items() if v[0]} == want_l
        assert {k: v[1] for k, v in got.items() if v[1]} == want_r
        # Pyroscope's route answers the same document; two label selections work too.
        rd = srv.get_json("/pyroscope/render-diff", leftQuery=sel, leftFrom=left[0], leftUntil=left[1],
                          rightQuery=sel, rightFrom=right[0], rightUntil=right[1], maxNodes=0)
        assert rd == d
        ab = srv.get_json("/api/v1/diff", left_query=CPU + '{env="canary"}', right_query=CPU + '{env="prod"}',
                          left_from=T0 - 1, right_from=T0 - 1, left_until=T0 + 60, right_until=T0 + 60)
        assert ab["leftTicks"] == sum(totals[0::2]) and ab["rightTicks"] == sum(totals[1::2])
        small = srv.get_json("/api/v1/diff", query=sel, left_from=left[0], left_until=left[1],
                             right_from=right[0], right_until=right[1], max_nodes=20)
        assert sum(len(l) // 7 for l in small["flamebearer"]["levels"]) <= 20
        assert small["leftTicks"] == d["leftTicks"]
        # The single-profile list: newest first, totals add up to the merge, each opens alone.
        lst = srv.get_json("/api/v1/profiles", query=sel, **{"from": T0 - 1, "until": T0 + 60})
        ps = lst["profiles"]
        assert lst["count"] == len(ps) and not lst["truncated"] and ps
        assert [p["timestamp"] for p in ps] == sorted((p["timestamp"] for p in ps), reverse=True)
        assert sum(p["total"] for p in ps) == sum(totals)
        assert {p["labels"]["env"] for p in ps} == {"prod", "canary"}
        for p in ps[:5]:
            one = query(srv, sel, fmt="top", profile=p["id"])
            assert one["total"] == p["total"] and one["profiles"] == 1, (p, one["total"])
        newest = [p for p in ps if p["timestamp"] == (T0 + 50) * 1000]
        assert sum(p["total"] for p in newest) == totals[5]
        st, body = srv.get("/api/v1/query", query=sel, profile=newest[0]["id"], format="pprof")
        pb = os.path.join(ARGS.tmp, "single.pb.gz")
        open(pb, "wb").write(body)
        assert st == 200 and pprof_raw(pb)[1] == [newest[0]["total"]]
        trunc = srv.get_json("/api/v1/profiles", query=sel, limit=2, **{"from": T0 - 1, "until": T0 + 60})
        assert len(trunc["profiles"]) == 2 and trunc["truncated"] and trunc["count"] == lst["count"]
        # Bad input: clear 400s.
        for path, params, needle in [
            ("/api/v1/diff", dict(left_query=sel, right_query="memory:alloc_space:bytes:space:bytes"), "same profile type"),
            ("/api/v1/diff", {}, "left_query"),
            ("/api/v1/diff", dict(query=sel, left_from="yesterday"), "left_from"),
            ("/pyroscope/render-diff", dict(rightQuery=sel), "leftQuery"),
            ("/api/v1/query", dict(query=sel, profile="12"), "profile"),
            ("/api/v1/query", dict(query=sel, profile="x-1"), "profile"),
            ("/api/v1/profiles", dict(query=sel, limit="0"), "limit"),
            ("/api/v1/profiles", {}, "query"),
        ]:
            st, body = srv.get(path, **params)
            assert st == 400 and needle in json.loads(body)["error"], (path, params, st, body[:200])


def js_value(v, unit):
    """The UI's formatValue (web/js/format.js) for ns and bytes, to compare shown text."""
    if unit == "nanoseconds":
        for div, suf in ((60e9, " min"), (1e9, " s"), (1e6, " ms"), (1e3, " \u00b5s")):
            if abs(v) >= div:
                return f"{v / div:.2f}{suf}"
        return f"{round(v)} ns"
    raise ValueError(unit)


def js_percent(part, whole):
    p = 100 * part / whole
    return f"{p:.1f}%" if p >= 10 else f"{p:.2f}%"


@test
def web_ui_in_headless_chromium():
    """The real UI in Debian's Chromium (tests/browser/ui.test.mjs) shows what the API answers."""
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "browser")
    assert os.path.exists("/usr/bin/chromium"), "Debian chromium is missing: run deploy/install-deps.sh test"
    if not os.path.isdir(os.path.join(here, "node_modules", "playwright-core")):
        r = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent"], cwd=here,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"npm install playwright-core failed: {r.stderr[-2000:]}"
    files = [os.path.join(ARGS.testdata, "pprof", f"go-runtime-cpu-0{i}.pb.gz") for i in range(6)]
    tenant = "ui-team"
    sel = CPU + '{service_name="shop"}'
    span = {"from": T0 - 10, "until": T0 + 60}
    with Server(extra=["--multitenancy"]) as srv:
        hdr = {"X-Scope-OrgID": tenant}

        def get_json(path, **params):
            st, body, _ = srv.request("GET", path + "?" + urllib.parse.urlencode(params), None, hdr)
            assert st == 200, (path, st, body[:300])
            return json.loads(body)

        for i, f in enumerate(files):
            env = "prod" if i % 2 else "canary"
            st = srv.request("POST", "/ingest?" + urllib.parse.urlencode(
                {"name": f"shop{{env={env}}}", "format": "pprof", "from": T0 + 10 * i}), open(f, "rb").read(), hdr)[0]
            assert st == 200
        fb = get_json("/api/v1/query", query=sel, format="flamegraph", **span)
        top = get_json("/api/v1/query", query=sel, format="top", **span)
        total = fb["flamebearer"]["numTicks"]
        fns = {f["name"]: f for f in top["functions"]}
        search = "crypto/sha256.block"
        canary = get_json("/api/v1/query", query=CPU + '{service_name="shop",env="canary"}', format="top", **span)
        left = get_json("/api/v1/query", query=sel, format="top", **{"from": T0 - 10, "until": T0 + 25})
        right = get_json("/api/v1/query", query=sel, format="top", **{"from": T0 + 26, "until": T0 + 60})
        profiles = get_json("/api/v1/profiles", query=sel, **span)["profiles"]
        expect = {
            "tenant": tenant, "query": sel, "from": span["from"], "until": span["until"],
            "total": total, "totalText": js_value(total, "nanoseconds"),
            "top": {"name": top["functions"][0]["name"],
                    "selfText": js_value(top["functions"][0]["self"], "nanoseconds")},
            "search": {"text": "sha256.block", "name": search, "other": "main.sortWords",
                       "percent": float(js_percent(fns[search]["total"], total)[:-1])},
            "zoom": "main.hashBlocks", "canaryTotal": canary["total"],
            "diff": {"leftFrom": T0 - 10, "leftUntil": T0 + 25, "rightFrom": T0 + 26, "rightUntil": T0 + 60,
                     "left": left["total"], "right": right["total"], "leftText": js_value(left["total"], "nanoseconds")},
            "profiles": {"count": len(profiles), "firstTotal": profiles[0]["total"]},
        }
        out = os.path.join(here, "..", "out", "browser")  # kept: tests/out/ is not committed
        exp = os.path.join(ARGS.tmp, "browser-expect.json")
        with open(exp, "w") as f:
            json.dump(expect, f)
        r = subprocess.run(["node", "ui.test.mjs"], cwd=here, capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, HEARTH_URL=srv.url(""), EXPECT=exp, OUT=out))
        assert r.returncode == 0, (r.stdout[-3000:] + r.stderr[-3000:])
        dl = re.search(r"download (\S+)", r.stdout).group(1)
        assert pprof_raw(dl)[1] == [profiles[0]["total"]], "the UI's pprof download is the opened profile"
        print("   ", r.stdout.strip().splitlines()[-1], "- screenshots in", out)


@test
def labels_series_and_selectors():
    path = os.path.join(ARGS.testdata, "pprof", "go-runtime-cpu-00.pb.gz")
    with Server() as srv:
        body = open(path, "rb").read()
        for env in ("prod", "dev"):
            st, r = srv.ingest(body, name="api{env=%s,otel.scope.name=x.y,region=eu}" % env, format="pprof",
                               spyName="gospy", **{"from": T0})
            assert st == 200, r
        names = srv.get_json("/api/v1/labels")["names"]
        for n in ("env", "otel.scope.name", "region", "service_name", "endpoint", "pyroscope_spy"):
            assert n in names, (n, names)
        assert srv.get_json("/api/v1/labels/env/values")["values"] == ["dev", "prod"]
        endpoints = srv.get_json("/api/v1/labels/endpoint/values")["values"]
        assert "/api/orders" in endpoints, endpoints
        total = pprof_raw(path)[1][1]
        assert query(srv, CPU + '{service_name="api"}')["total"] == 2 * total
        assert query(srv, CPU + '{service_name="api",env="prod"}')["total"] == total
        assert query(srv, CPU + '{env=~"pr.*"}')["total"] == total
        assert query(srv, CPU + '{env!="prod"}')["total"] == total
        assert query(srv, CPU + '{env="none"}')["total"] == 0
        # Samples without the label form their own series (endpoint="" matches an absent label).
        by_endpoint = sum(query(srv, CPU + '{env="prod",endpoint="%s"}' % e)["total"] for e in endpoints + [""])
        assert by_endpoint == total
        series = srv.get_json("/api/v1/series", query='{env="prod"}')["series"]
        assert series and all(s["labels"]["env"] == "prod" for s in series)
        assert srv.get_json("/api/v1/series", query="{}", **{"from": T0 + 100, "until": T0 + 200})["series"] == []
        ids = [t["id"] for t in srv.get_json("/api/v1/profile-types")["profileTypes"]]
        assert ids == sorted(set(ids)) and CPU in ids
        for bad in ('{env="prod"', "nosuchtype{}", '{env=~"("}'):
            st, b = srv.get("/api/v1/query", query=bad)
            assert st == 400 and "error" in json.loads(b), (bad, st, b)
        st, b = srv.get("/api/v1/query", query='{env="prod"}')
        assert st == 400 and "profile type" in json.loads(b)["error"]
        st, b = srv.get("/api/v1/query", query=CPU, **{"from": "yesterday"})
        assert st == 400 and "from" in json.loads(b)["error"]


@test
def bad_input_gets_clear_errors_and_stored_data_survives():
    good = open(os.path.join(ARGS.testdata, "pprof", "go-runtime-cpu-00.pb.gz"), "rb").read()
    total = pprof_raw(os.path.join(ARGS.testdata, "pprof", "go-runtime-cpu-00.pb.gz"))[1][1]
    with Server(extra=["--max-body-bytes", "2MiB", "--max-decompressed-bytes", "8MiB"]) as srv:
        assert srv.ingest(good, name="keep", format="pprof", **{"from": T0})[0] == 200
        cases = [
            ("corpus/synthetic__empty.pb", "pprof", 422), ("corpus/synthetic__empty.pb.gz", "pprof", 422),
            ("corpus/synthetic__truncated.pb.gz", "pprof", 422),
            ("corpus/pprof__profile__testdata__cppbench.cpu.legacy", "pprof", 422),
            ("corpus/flamegraph__test__results__perf-java-stacks-01-collapsed-pid.txt", "pprof", 422),
        ]
        for rel, fmt, want in cases:
            st, b = srv.ingest(open(os.path.join(ARGS.testdata, rel), "rb").read(), name="keep", format=fmt)
            assert st == want and json.loads(b)["error"], (rel, st, b)
        bomb = gzip.compress(b"\0" * (64 << 20))  # 64 MiB of zeros in ~64 KiB
        st, b = srv.ingest(bomb, name="keep", format="pprof")
        assert st == 413 and "limit" in json.loads(b)["error"], (st, b)
        st, b = srv.ingest(os.urandom(3 << 20), name="keep", format="pprof")
        assert st == 413 and "max-body-bytes" in json.loads(b)["error"], (st, b)
        for name, want in (("", 400), ("bad name", 400), ("a{k=v", 400), ("a{1x=v}", 400),
                           (b"a{k=\xff}", 400), ("app.nosuchtype", 400)):
            fmt = "folded" if name == "app.nosuchtype" else "pprof"
            st, b = srv.ingest(good if fmt == "pprof" else b"a;b 1\n", name=name, format=fmt)
            assert st == want and json.loads(b)["error"], (name, st, b)
        st, b = srv.ingest(good, name="keep", format="pprof", **{"from": "notatime"})
        assert st == 400 and "from" in json.loads(b)["error"]
        st, b = srv.ingest(b"a;b;c x\n", name="keep.cpu", format="folded")
        assert st == 422 and "line 1" in json.loads(b)["error"]
        st, b = srv.ingest(b"\x00\x01", name="keep", format="trie")
        assert st == 422
        st, _, _ = srv.request("GET", "/ingest?name=x")
        assert st == 405
        assert srv.get("/api/v1/nope")[0] == 404
        # Nothing stored before was touched.
        assert query(srv, CPU + '{service_name="keep"}')["total"] == total
        metrics = srv.get("/metrics")[1].decode()
        assert re.search(r'hearth_ingest_errors_total\{reason="unprocessable"\} [1-9]', metrics), metrics
        assert re.search(r'hearth_ingest_errors_total\{reason="too_large"\} [1-9]', metrics)


@test
def folded_and_lines_formats():
    path = os.path.join(ARGS.testdata, "folded", "go-runtime-cpu.folded")
    text = open(path, "rb").read()
    want = sum(int(l.rsplit(b" ", 1)[1]) for l in text.splitlines() if l.strip())
    with Server() as srv:
        # sampleRate=1e9 makes the period 1 ns, so values stay as written.
        st, b = srv.ingest(text, name="fold.cpu{env=prod}", format="folded", sampleRate=1000000000, **{"from": T0})
        assert st == 200, b
        ans = query(srv, CPU + '{service_name="fold",env="prod"}')
        assert ans["total"] == want
        # The folded file is the six CPU profiles merged: the same answer as merging the pprofs.
        six = sum(pprof_raw(os.path.join(ARGS.testdata, "pprof", f"go-runtime-cpu-0{i}.pb.gz"))[1][1] for i in range(6))
        assert want == six
        # Default sampleRate 100: each count is 10 ms.
        srv.ingest(b"main;a 3\nmain;b 1\n", name="rate.cpu", format="folded", **{"from": T0})
        assert query(srv, CPU + '{service_name="rate"}')["total"] == 4 * 10000000
        srv.ingest(b"main;a\nmain;a\nmain;b\n", name="lines.cpu", format="lines", **{"from": T0})
        assert query(srv, CPU + '{service_name="lines"}')["total"] == 3 * 10000000
        srv.ingest(b"main;alloc 4096\n", name="mem.alloc_space", format="folded", **{"from": T0})
        assert query(srv, 'memory:alloc_space:bytes:space:bytes{service_name="mem"}')["total"] == 4096
        java = open(os.path.join(ARGS.testdata, "corpus", "flamegraph__test__results__perf-java-stacks-01-collapsed-pid.txt"), "rb").read()
        st, b = srv.ingest(java, name="java.cpu", sampleRate=1000000000, **{"from": T0})  # no format: folded
        assert st == 200, b
        jwant = sum(int(l.rsplit(b" ", 1)[1]) for l in java.splitlines() if l.strip())
        assert query(srv, CPU + '{service_name="java"}')["total"] == jwant


def multipart(fields):
    boundary = "hearthboundary%d" % random.randint(0, 1 << 30)
    out = io.BytesIO()
    for name, data in fields:
        out.write(f"--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"{name}\"\r\n"
                  "Content-Type: application/octet-stream\r\n\r\n".encode())
        out.write(data + b"\r\n")
    out.write(f"--{boundary}--\r\n".encode())
    return out.getvalue(), {"Content-Type": f"multipart/form-data; boundary={boundary}"}


@test
def go_runtime_profiles_raw_and_multipart():
    gdir = tempfile.mkdtemp(prefix="goprof-", dir=ARGS.tmp)
    subprocess.run([build_goprof(), gdir], check=True, capture_output=True)
    kinds = ["cpu", "heap", "allocs", "mutex", "block", "goroutine"]
    with Server() as srv:
        for k in kinds:
            data = open(os.path.join(gdir, k + ".pb.gz"), "rb").read()
            st, b = srv.ingest(data, name=f"go-raw-{k}", format="pprof", **{"from": T0, "until": T0 + 10})
            assert st == 200, (k, b)
            # pyroscope-go style: multipart, nanosecond timestamps, a sample_type_config.
            cfg = json.dumps({"contentions": {"display-name": "block_count", "units": "lock_samples"},
                              "delay": {"display-name": "block_duration"}}).encode() if k == "block" else b""
            fields = [("profile", data)] + ([("sample_type_config", cfg)] if cfg else [])
            body, headers = multipart(fields)
            st, b = srv.ingest(body, headers=headers, name=f"go-mp-{k}", spyName="gospy",
                               **{"from": T0 * 10**9, "until": (T0 + 10) * 10**9})
            assert st == 200, (k, b)
        for k in kinds:
            types, totals = pprof_raw(os.path.join(gdir, k + ".pb.gz"))
            for svc in (f"go-raw-{k}", f"go-mp-{k}"):
                got = types_of(srv, svc)
                for (st_, unit), total in zip(types, totals):
                    ans = query(srv, '%s{service_name="%s"}' % (got[(st_, unit)], svc), limit=1)
                    assert ans["total"] == total, (svc, st_, ans["total"], total)
        mp_types = set(types_of(srv, "go-mp-block").values())
        assert "block:delay:nanoseconds:contentions:count" in mp_types, mp_types
        assert "mutex:delay:nanoseconds:contentions:count" in set(types_of(srv, "go-raw-mutex").values())
        assert "memory:inuse_space:bytes:space:bytes" in set(types_of(srv, "go-raw-heap").values())
        assert "goroutine:goroutine:count:goroutine:count" in set(types_of(srv, "go-raw-goroutine").values())
        # pyroscope-go before godeltaprof: cumulative profiles plus the previous upload's. The
        # cumulative types (alloc_*, contentions, delay) keep only the difference, which must be
        # what `go tool pprof -base prev cur` reports; inuse_* stay as the current profile says.
        for k in ("heap", "mutex", "block"):
            cur, prev = (os.path.join(gdir, f"{k}{x}.pb.gz") for x in ("", ".prev"))
            body, headers = multipart([("profile", open(cur, "rb").read()), ("prev_profile", open(prev, "rb").read())])
            st, b = srv.ingest(body, headers=headers, name=f"go-delta-{k}", **{"from": T0, "until": T0 + 10})
            assert st == 200, (k, b)
            types, now_totals = pprof_raw(cur)
            _, delta_totals = pprof_raw(cur, "-base", prev)
            got = types_of(srv, "go-delta-" + k)
            for (st_, unit), now_t, delta_t in zip(types, now_totals, delta_totals):
                want = now_t if st_.startswith("inuse_") else delta_t
                ans = query(srv, '%s{service_name="go-delta-%s"}' % (got[(st_, unit)], k), limit=1)
                assert ans["total"] == want, (k, st_, ans["total"], want, now_t)
            assert any(d < n for n, d in zip(now_totals, delta_totals)), (k, now_totals, delta_totals)  # a real delta
        # WAL replay recomputes the same deltas (the record keeps prev_profile).
        alloc = 'memory:alloc_space:bytes:space:bytes{service_name="go-delta-heap"}'
        before = query(srv, alloc)["total"]
        srv.stop(signal.SIGKILL)
        srv.start()
        assert query(srv, alloc)["total"] == before
        body, headers = multipart([("profile", open(os.path.join(gdir, "heap.pb.gz"), "rb").read()),
                                   ("prev_profile", b"not a profile")])
        st, b = srv.ingest(body, headers=headers, name="bad-prev")
        assert st == 422 and "prev_profile" in json.loads(b)["error"], (st, b)
        body, headers = multipart([("other", b"x")])
        assert srv.ingest(body, headers=headers, name="old")[0] == 400
        # A part whose Content-Disposition is garbled after a named part: libmicrohttpd hands the
        # field callback a NULL name, which crashed the server (the multipart fuzzer's first find).
        nameless = (b'--b0\r\nContent-Disposition: form-data; name="jfr"\r\n\r\nFLR\x00\r\n'
                    b'--b0\r\nContent-Disp:ointios form-data; name="labels"\r\n\r\n\r\n--b0--\r\n')
        st, b = srv.ingest(nameless, headers={"Content-Type": "multipart/form-data; boundary=b0"}, name="old")
        assert st == 422 and "JFR" in json.loads(b)["error"], (st, b)
        assert srv.get("/healthz")[0] == 200


JFR = "corpus/jfrparser__parser__testdata__cortex-dev-01__kafka-0__cpu_lock0_alloc0__0.jfr.gz"
JFR_CPU = "corpus/jfrparser__parser__testdata__cortex-dev-01__kafka-0__cpu_lock0_alloc0__0_4_process_cpu_cpu__nanoseconds_expected_collapsed.txt.gz"


def folded_counts(text, strip_lines=False):
    out = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        stack, _, v = line.rpartition(" ")
        if strip_lines:
            stack = ";".join(f.rpartition(":")[0] for f in stack.split(";"))
        out[stack] = out.get(stack, 0) + int(v.strip("[]"))
    return out


@test
def jfr_recordings_ingest_like_pyroscope():
    """A real async-profiler recording (kafka): CPU stacks equal the collapsed output the
    reference parser produced for it (with the lambda/accessor renaming); allocation and
    lock events count exactly; raw and multipart uploads agree; bad recordings get 422."""
    body = open(os.path.join(ARGS.testdata, JFR), "rb").read()
    want = folded_counts(gzip.decompress(open(os.path.join(ARGS.testdata, JFR_CPU), "rb").read()).decode(),
                         strip_lines=True)
    with Server() as srv:
        st, b = srv.ingest(body, name="kafka{env=dev}", format="jfr", **{"from": T0, "until": T0 + 10})
        assert st == 200, b
        mp, headers = multipart([("jfr", body), ("labels", b"")])
        st, b = srv.ingest(mp, headers=headers, name="kafka-mp", format="jfr", **{"from": T0})
        assert st == 200, b
        for svc in ("kafka", "kafka-mp"):
            st, text = srv.get("/api/v1/query", query=CPU + '{service_name="%s"}' % svc, format="folded",
                               max_nodes=0, **{"from": T0 - 10, "until": T0 + 60})
            got = folded_counts(text.decode())
            assert got == want, (svc, len(got), len(want), sorted(set(got) ^ set(want))[:3])
        # Event counts of the recording: 7972 allocations in new TLABs, 2238 outside, 1773 monitor
        # enters (mutex, as Pyroscope names them) and 435 parks (block); 582 CPU samples at the
        # default 10 ms.
        counts = {"memory:alloc_in_new_tlab_objects:count:space:bytes": 7972,
                  "memory:alloc_outside_tlab_objects:count:space:bytes": 2238,
                  "mutex:contentions:count:mutex:count": 1773, "block:contentions:count:block:count": 435,
                  CPU: 582 * 10_000_000}
        for t, n in counts.items():
            assert query(srv, t + '{service_name="kafka",env="dev"}')["total"] == n, t
        for t in ("memory:alloc_in_new_tlab_bytes:bytes:space:bytes", "memory:alloc_outside_tlab_bytes:bytes:space:bytes",
                  "mutex:delay:nanoseconds:mutex:count", "block:delay:nanoseconds:block:count"):
            assert query(srv, t + '{service_name="kafka"}')["total"] > 0, t
        top = query(srv, CPU + '{service_name="kafka"}', limit=1)["functions"][0]
        assert top["name"] == "java/util/regex/Pattern$CharPropertyGreedy.match", top
        raw = gzip.decompress(body)
        for bad, why in ((raw[:len(raw) // 2], "claims"), (b"not a recording at all", "FLR"),
                         (raw[:68] + b"\xff" * 64, "JFR"), (b"", "empty")):
            st, b = srv.ingest(bad, name="badjfr", format="jfr")
            assert st == 422 and why in json.loads(b)["error"], (why, st, b)
        assert query(srv, CPU + '{service_name="kafka"}')["total"] == 582 * 10_000_000  # untouched


@test
def gauges_average_over_time():
    heap = os.path.join(ARGS.testdata, "pprof", "go-runtime-heap.pb.gz")
    types, totals = pprof_raw(heap)
    inuse = totals[types.index(("inuse_space", "bytes"))]
    alloc = totals[types.index(("alloc_space", "bytes"))]
    with Server() as srv:
        for i in range(3):
            srv.ingest(open(heap, "rb").read(), name="heap", format="pprof", **{"from": T0 + 10 * i})
        a = query(srv, 'memory:inuse_space:bytes:space:bytes{service_name="heap"}', fmt="flamegraph")
        assert a["flamebearer"]["numTicks"] == inuse and a["metadata"]["aggregation"] == "average"
        b = query(srv, 'memory:alloc_space:bytes:space:bytes{service_name="heap"}', fmt="flamegraph")
        assert b["flamebearer"]["numTicks"] == 3 * alloc and b["metadata"]["aggregation"] == "sum"
        assert b["metadata"]["units"] == "bytes"


def start_pushers(srv, n, time_of, body_of, name, acked, lock, stop):
    """n threads pushing folded profiles until stop is set; acknowledged push times go to acked."""
    def pusher(worker):
        i = 0
        while not stop.is_set():
            t = time_of(worker, i)
            try:
                st, _ = srv.ingest(body_of(i), name=name, format="folded", **{"from": t})
            except OSError:
                return
            if st == 200:
                with lock:
                    acked.append(t)
            i += 1

    threads = [threading.Thread(target=pusher, args=(w,)) for w in range(n)]
    for t in threads:
        t.start()
    return threads


@test
def restart_flush_and_kill9_keep_every_acknowledged_profile():
    data_dir = tempfile.mkdtemp(prefix="hearth-crash-", dir=ARGS.tmp)
    srv = Server(data_dir).start()
    acked, lock, stop = [], threading.Lock(), threading.Event()
    threads = start_pushers(srv, 4, lambda w, i: T0 + w * 20000 + i,
                            lambda i: b"main;work%d 7\nmain;idle 3\n" % (i % 5), "crash.cpu", acked, lock, stop)
    time.sleep(0.8)
    srv.request("POST", "/api/v1/admin/flush")  # some data in a block, some only in the WAL
    time.sleep(random.uniform(0.3, 1.0))
    srv.proc.send_signal(signal.SIGKILL)
    srv.proc.wait()
    stop.set()
    for t in threads:
        t.join()
    srv.log.close()
    assert len(acked) > 20, f"only {len(acked)} pushes acknowledged"
    srv = Server(data_dir).start()
    try:
        ans = query(srv, CPU + '{service_name="crash"}', frm=T0 - 10, until=T0 + 10**6)
        # An in-flight push may be durable without its ack having arrived.
        assert ans["profiles"] >= len(acked), (ans["profiles"], len(acked))
        assert ans["profiles"] <= len(acked) + 4
        assert ans["total"] == ans["profiles"] * 10 * 10000000
        ts = srv.get_json("/api/v1/timeseries", query=CPU + '{service_name="crash"}', step="1s",
                          **{"from": T0 - 10, "until": T0 + 80000})
        seen = {p["timestamp"] // 1000 for p in ts["points"] if p["value"] > 0}
        missing = [t for t in acked if t not in seen]
        assert not missing, f"{len(missing)} acknowledged profiles lost, e.g. {missing[:5]}"
        metrics = srv.get("/metrics")[1].decode()
        assert "hearth_blocks 1" in metrics, metrics
    finally:
        srv.stop()
    # A clean stop flushes the head; the next start replays nothing and answers the same.
    srv = Server(data_dir).start()
    try:
        again = query(srv, CPU + '{service_name="crash"}', frm=T0 - 10, until=T0 + 10**6)
        assert again["total"] == ans["total"]
        assert "hearth_wal_replayed_records_total 0" in srv.get("/metrics")[1].decode()
        blocks = os.listdir(os.path.join(data_dir, "blocks", "anonymous"))
        assert len(blocks) == 2, blocks
    finally:
        srv.stop()


@test
def random_kill9_loop_loses_nothing_and_corrupts_nothing():
    data_dir = tempfile.mkdtemp(prefix="hearth-crashloop-", dir=ARGS.tmp)
    rng = random.Random(int(time.time()))
    acked, lock = [], threading.Lock()
    rounds = 3 if ARGS.quick else 6
    for rnd in range(rounds):
        # --block-duration 1s makes head cuts race with the kills.
        srv = Server(data_dir, extra=["--block-duration", "1s"]).start()
        stop = threading.Event()
        threads = start_pushers(srv, 3, lambda w, i, r=rnd: T0 + r * 100000 + w * 10000 + i,
                                lambda i: b"main;w%d 3\nmain;x 2\n" % (i % 3), "loop.cpu", acked, lock, stop)
        time.sleep(rng.uniform(0.2, 2.5))
        srv.proc.send_signal(signal.SIGKILL)
        srv.proc.wait()
        stop.set()
        for t in threads:
            t.join()
        srv.log.close()
        r = cli("check", data_dir)
        assert r.returncode == 0, f"round {rnd}: {r.stdout}"
    assert len(acked) > 50, len(acked)
    with Server(data_dir) as srv:
        ans = query(srv, CPU + '{service_name="loop"}', frm=T0 - 10, until=T0 + 10**6)
        assert ans["profiles"] >= len(acked) and ans["total"] == ans["profiles"] * 5 * 10000000, (ans, len(acked))
        for rnd in range(rounds):
            ts = srv.get_json("/api/v1/timeseries", query=CPU + '{service_name="loop"}', step="1s",
                              **{"from": T0 + rnd * 100000, "until": T0 + rnd * 100000 + 40000})
            seen = {p["timestamp"] // 1000 for p in ts["points"] if p["value"] > 0}
            lost = [t for t in acked if T0 + rnd * 100000 <= t < T0 + rnd * 100000 + 40000 and t not in seen]
            assert not lost, f"round {rnd}: {len(lost)} acknowledged profiles lost"
        assert metric(srv, "hearth_blocks_corrupt") == 0


def fill_disk(mnt, leave):
    """Fills the file system at mnt with a file `filler`, then frees `leave` bytes of it."""
    path = os.path.join(mnt, "filler")
    with open(path, "ab", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError:
            pass
    os.truncate(path, max(0, os.path.getsize(path) - leave))


@test
def disk_full_gives_503_keeps_data_and_recovers():
    mnt = tempfile.mkdtemp(prefix="hearth-tmpfs-", dir=ARGS.tmp)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", mnt], check=True, capture_output=True)
    try:
        data_dir = os.path.join(mnt, "data")
        body = open(os.path.join(ARGS.testdata, "pprof", "go-runtime-cpu-00.pb.gz"), "rb").read()
        each = pprof_raw(os.path.join(ARGS.testdata, "pprof", "go-runtime-cpu-00.pb.gz"))[1][1]
        with Server(data_dir, log_dir=ARGS.tmp) as srv:
            fill_disk(mnt, 200 * 1024)  # leaving a little room
            codes, acked = [], 0
            for i in range(200):
                st, b = srv.ingest(body, name="full", format="pprof", **{"from": T0 + i})
                codes.append(st)
                if st == 200:
                    acked += 1
                elif st == 503:
                    assert "space" in json.loads(b)["error"].lower(), b
                    break
                else:
                    raise AssertionError((st, b))
            assert 503 in codes and acked > 0, codes
            assert srv.get("/healthz")[0] == 200  # the server stays up
            assert query(srv, CPU + '{service_name="full"}', frm=T0 - 10, until=T0 + 1000)["total"] == acked * each
            st = srv.request("POST", "/api/v1/admin/flush")[0]
            assert st in (200, 503)  # a block may not fit either; the WAL still holds the data
            os.unlink(os.path.join(mnt, "filler"))  # space returns: writes resume
            st, b = srv.ingest(body, name="full", format="pprof", **{"from": T0 + 500})
            assert st == 200, b
            acked += 1
            assert srv.request("POST", "/api/v1/admin/flush")[0] == 200
        with Server(data_dir, log_dir=ARGS.tmp) as srv:  # nothing acknowledged was lost
            assert query(srv, CPU + '{service_name="full"}', frm=T0 - 10, until=T0 + 1000)["total"] == acked * each
        r = cli("check", data_dir)
        assert r.returncode == 0, r.stdout
    finally:
        subprocess.run(["umount", mnt], capture_output=True)


@test
def corrupt_block_is_reported_and_skipped():
    data_dir = tempfile.mkdtemp(prefix="hearth-corrupt-", dir=ARGS.tmp)
    with Server(data_dir) as srv:
        srv.ingest(b"main;a 1\n", name="c1.cpu", format="folded", **{"from": T0})
        srv.request("POST", "/api/v1/admin/flush")
        srv.ingest(b"main;b 2\n", name="c2.cpu", format="folded", **{"from": T0})
        srv.request("POST", "/api/v1/admin/flush")
    bdir = os.path.join(data_dir, "blocks", "anonymous")
    first = sorted(os.listdir(bdir))[0]
    with open(os.path.join(bdir, first), "r+b") as f:
        f.seek(40)
        f.write(b"\xde\xad\xbe\xef")
    with Server(data_dir) as srv:
        assert query(srv, CPU + '{service_name="c2"}')["total"] == 2 * 10000000
        assert query(srv, CPU + '{service_name="c1"}')["total"] == 0
        assert "hearth_blocks_corrupt 1" in srv.get("/metrics")[1].decode()


def metric(srv, name):
    for line in srv.get("/metrics")[1].decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError(f"metric {name} missing")


@test
def same_profile_twice_adds_no_symbols():
    body = open(os.path.join(ARGS.testdata, "pprof", "go-runtime-heap.pb.gz"), "rb").read()
    tables = ("strings", "functions", "locations", "stacks")
    with Server() as srv:
        assert srv.ingest(body, name="dedup", format="pprof", **{"from": T0})[0] == 200
        once = [metric(srv, 'hearth_head_symbols{table="%s"}' % t) for t in tables]
        assert all(n > 0 for n in once), once
        assert srv.ingest(body, name="dedup", format="pprof", **{"from": T0 + 10})[0] == 200
        assert srv.ingest(body, name="dedup2", format="pprof", **{"from": T0 + 10})[0] == 200
        twice = [metric(srv, 'hearth_head_symbols{table="%s"}' % t) for t in tables]
        assert twice == once, (once, twice)
        assert metric(srv, "hearth_head_profiles") == 3 * 4  # 3 uploads x 4 sample types


@test
def background_cut_by_age_keeps_answers():
    data_dir = tempfile.mkdtemp(prefix="hearth-cut-", dir=ARGS.tmp)
    body = open(os.path.join(ARGS.testdata, "pprof", "go-runtime-cpu-01.pb.gz"), "rb").read()
    want = pprof_raw(os.path.join(ARGS.testdata, "pprof", "go-runtime-cpu-01.pb.gz"))[1][1]
    with Server(data_dir, extra=["--block-duration", "1s"]) as srv:
        assert srv.ingest(body, name="aged", format="pprof", **{"from": T0})[0] == 200
        deadline = time.time() + 20
        while metric(srv, "hearth_blocks") < 1 and time.time() < deadline:
            time.sleep(0.2)
        assert metric(srv, "hearth_blocks") == 1 and metric(srv, "hearth_head_profiles") == 0
        assert query(srv, CPU + '{service_name="aged"}')["total"] == want
        assert srv.ingest(body, name="aged", format="pprof", **{"from": T0 + 10})[0] == 200
        assert query(srv, CPU + '{service_name="aged"}')["total"] == 2 * want  # block + head
    assert not [f for f in os.listdir(os.path.join(data_dir, "wal")) if os.path.getsize(os.path.join(data_dir, "wal", f))]


@test
def compaction_merges_blocks_and_keeps_answers():
    """Eight small blocks of a tenant become one; every answer is the same before, while
    queries run during the compaction, after it and after a restart; the symbol tables
    are deduplicated (the merged block is smaller than the eight); hearth check passes."""
    data_dir = tempfile.mkdtemp(prefix="hearth-compact-", dir=ARGS.tmp)
    files = [os.path.join(ARGS.testdata, "pprof", f"go-runtime-cpu-0{i % 3}.pb.gz") for i in range(8)]
    span = {"from": T0 - 10, "until": T0 + 3600}
    questions = [("/api/v1/query", dict(query=CPU + '{service_name="packed"}', format="top", **span)),
                 ("/api/v1/query", dict(query=CPU + '{service_name="packed"}', format="flamegraph", **span)),
                 ("/api/v1/query", dict(query=CPU + '{env="b"}', format="folded", **span)),
                 ("/api/v1/timeseries", dict(query=CPU + '{service_name="packed"}', step="10s", **span)),
                 ("/api/v1/profiles", dict(query=CPU + '{service_name="packed"}', **span)),
                 ("/api/v1/series", {})]

    def answers(srv):
        return [srv.get(p, **q) for p, q in questions]

    with Server(data_dir, extra=["--compact-min-blocks", "0"]) as srv:
        for i, f in enumerate(files):
            env = "ab"[i % 2]
            assert srv.ingest(open(f, "rb").read(), name=f"packed{{env={env}}}", format="pprof",
                              **{"from": T0 + 10 * i})[0] == 200
            assert srv.request("POST", "/api/v1/admin/flush", b"")[0] == 200
        assert metric(srv, "hearth_blocks") == 8
        bytes_before = metric(srv, "hearth_block_bytes")
        before = answers(srv)
        assert all(st == 200 for st, _ in before) and json.loads(before[0][1])["total"] > 0
        assert srv.request("POST", "/api/v1/admin/compact", b"")[1] == b'{"compactions":0}'  # switched off
    with Server(data_dir, extra=["--compact-min-blocks", "4"]) as srv:
        stop, seen, errors = threading.Event(), [0], []

        def reader():
            while not stop.is_set():
                got = answers(srv)
                if got != before:
                    errors.append([q for q, a, b in zip(questions, got, before) if a != b])
                seen[0] += 1

        threads = [threading.Thread(target=reader) for _ in range(2)]
        for t in threads:
            t.start()
        st, body, _ = srv.request("POST", "/api/v1/admin/compact", b"")
        deadline = time.time() + 20
        while metric(srv, "hearth_compactions_total") < 1 and time.time() < deadline:
            time.sleep(0.1)  # the background thread may have taken it first
        time.sleep(0.3)
        stop.set()
        for t in threads:
            t.join()
        assert st == 200, body
        assert not errors and seen[0] >= 2, (errors[:3], seen[0])
        assert metric(srv, "hearth_blocks") == 1 and metric(srv, "hearth_compacted_blocks_total") == 8
        assert metric(srv, "hearth_block_bytes") < bytes_before, (metric(srv, "hearth_block_bytes"), bytes_before)
        assert answers(srv) == before
        log = open(os.path.join(srv.log_dir, "server.log")).read()
        assert re.search(r"msg=compaction.done tenant=anonymous blocks_in=8 bytes_in=\d+ bytes_out=\d+", log)
        assert srv.request("POST", "/api/v1/admin/compact", b"")[1] == b'{"compactions":0}'  # nothing left to do
    blks = [f for d, _, fs in os.walk(os.path.join(data_dir, "blocks")) for f in fs if f.endswith(".blk")]
    assert len(blks) == 1, blks  # the eight old files are gone
    r = cli("check", data_dir)
    assert r.returncode == 0, r.stdout + r.stderr
    with Server(data_dir) as srv:
        assert answers(srv) == before and metric(srv, "hearth_blocks") == 1


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


def cli(*args, env=None, **kw):
    return subprocess.run([ARGS.binary] + list(args), capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, **(env or {})), **kw)


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


def pb_put_varint(v):
    out = bytearray()
    v &= (1 << 64) - 1
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def pb_encode_field(num, wt, v):
    """One protobuf field: v is an int for wire type 0, raw bytes otherwise."""
    tag = pb_put_varint(num << 3 | wt)
    if wt == 0:
        return tag + pb_put_varint(v)
    if wt == 2:
        return tag + pb_put_varint(len(v)) + v
    return tag + v


def pb_field(num, payload):
    """A length-delimited protobuf field (wire type 2)."""
    return pb_encode_field(num, 2, payload)


def push_request_proto(series):
    """push.v1.PushRequest from [(labels dict, [raw pprof bytes])]."""
    out = b""
    for labels, raws in series:
        body = b"".join(pb_field(1, pb_field(1, k.encode()) + pb_field(2, v.encode())) for k, v in labels.items())
        body += b"".join(pb_field(2, pb_field(1, raw) + pb_field(2, b"id-%d" % i)) for i, raw in enumerate(raws))
        out += pb_field(1, body)
    return out


@test
def pyroscope_connect_push_api_proto_and_json():
    import base64
    cpu = os.path.join(ARGS.testdata, "pprof", "go-runtime-cpu-02.pb.gz")
    heap = os.path.join(ARGS.testdata, "pprof", "go-runtime-heap.pb.gz")
    cpu_total = pprof_raw(cpu)[1][1]
    htypes, htotals = pprof_raw(heap)
    path = "/push.v1.PusherService/Push"
    with Server() as srv:
        proto = push_request_proto([
            ({"__name__": "process_cpu", "service_name": "alloy-app", "env": "prod", "__delta__": "false"},
             [open(cpu, "rb").read()]),
            ({"__name__": "memory", "service_name": "alloy-app", "env": "prod"}, [open(heap, "rb").read()])])
        st, body, hdr = srv.request("POST", path, proto, {"Content-Type": "application/proto"})
        assert st == 200 and body == b"" and hdr["Content-Type"] == "application/proto", (st, body)
        doc = {"series": [{"labels": [{"name": "__name__", "value": "process_cpu"},
                                      {"name": "service_name", "value": "alloy-json"}],
                           "samples": [{"ID": "x", "rawProfile": base64.b64encode(open(cpu, "rb").read()).decode()}]}]}
        st, body, _ = srv.request("POST", path, json.dumps(doc).encode(), {"Content-Type": "application/json"})
        assert st == 200 and json.loads(body) == {}, (st, body)
        assert query(srv, CPU + '{service_name="alloy-app",env="prod"}', frm=0, until="now")["total"] == cpu_total
        assert query(srv, CPU + '{service_name="alloy-json"}', frm=0, until="now")["total"] == cpu_total
        inuse = htotals[htypes.index(("inuse_space", "bytes"))]
        assert query(srv, 'memory:inuse_space:bytes:space:bytes{service_name="alloy-app"}', frm=0, until="now")["total"] == inuse
        names = srv.get_json("/api/v1/labels", query='{service_name="alloy-app"}')["names"]
        assert "__delta__" not in names and "env" in names, names
        for body, ctype, want in ((b"\xff\xff\xff", "application/proto", 400),
                                  (b"{not json", "application/json", 400),
                                  (json.dumps({"series": [{"samples": [{"rawProfile": "%%%"}]}]}).encode(), "application/json", 400),
                                  (push_request_proto([({"service_name": "bad"}, [b"not a profile"])]), "application/proto", 422),
                                  (b"{}", "text/plain", 415)):
            st, b, _ = srv.request("POST", path, body, {"Content-Type": ctype})
            err = json.loads(b)
            assert st == want and err["code"] and err["message"], (ctype, st, b)
        body, headers = multipart([("profile", open(cpu, "rb").read())])
        for p in (path, "/api/profiles/writeraw"):
            st, b, _ = srv.request("POST", p, body, headers)
            assert st == 415 and json.loads(b)["code"] == "invalid_argument", (p, st, b)
        # Nothing bad was stored; the good data is intact after a restart (WAL replay of push records).
        srv.stop(signal.SIGKILL)
        srv.start()
        assert query(srv, CPU + '{service_name="alloy-app",env="prod"}', frm=0, until="now")["total"] == cpu_total
        assert query(srv, CPU + '{service_name="alloy-json"}', frm=0, until="now")["total"] == cpu_total


@test
def parca_writeraw_json_gateway():
    import base64
    cpu = os.path.join(ARGS.testdata, "corpus", "parca__pkg__query__testdata__profile-with-labels.pb.gz")
    types, totals = pprof_raw(cpu)
    path = "/api/profiles/writeraw"
    doc = {"series": [{"labels": {"labels": [{"name": "__name__", "value": "parca_agent_cpu"},
                                             {"name": "node", "value": "n1"}]},
                       "samples": [{"rawProfile": base64.b64encode(open(cpu, "rb").read()).decode()}]}],
           "normalized": False}
    with Server() as srv:
        st, body, _ = srv.request("POST", path, json.dumps(doc).encode(), {"Content-Type": "application/json"})
        assert st == 200, body
        ids = [t["id"] for t in srv.get_json("/api/v1/profile-types", query='{node="n1"}')["profileTypes"]]
        assert ids == ["parca_agent_cpu:samples:count:cpu:nanoseconds"], ids
        assert query(srv, ids[0] + '{node="n1"}', frm=0, until="now")["total"] == totals[0]
        # thread_name is a pprof sample label: it splits series, as with any upload.
        assert "thread_name" in srv.get_json("/api/v1/labels", query='{node="n1"}')["names"]
        doc["series"][0]["labels"]["labels"] = [{"name": "node", "value": "n2"}]
        st, body, _ = srv.request("POST", path, json.dumps(doc).encode(), {"Content-Type": "application/json"})
        assert st == 400 and "__name__" in json.loads(body)["message"], body


# Connect request bodies for querier.v1.QuerierService as Grafana's client sends them
# (binary proto), recorded with `protoc --encode` from Pyroscope's field numbers, for
# service_name="grafana-app" over [T0-10 s, T0+3600 s] in ms.
QUERIER_BODIES = {
    "ProfileTypes": "08f08195ffbc311080adf180bd31",
    "LabelNames": "0a1c7b736572766963655f6e616d653d2267726166616e612d617070227d10f08195ffbc311880adf180bd31",
    "LabelValues": "0a03656e7612407b5f5f70726f66696c655f747970655f5f3d2270726f636573735f6370753a6370753a6e616e6f73"
                   "65636f6e64733a6370753a6e616e6f7365636f6e6473227d18f08195ffbc312080adf180bd31",
    "Series": "0a1c7b736572766963655f6e616d653d2267726166616e612d617070227d1203656e7612105f5f70726f66696c655f74797065"
              "5f5f18f08195ffbc312080adf180bd31",
    "SelectMergeStacktraces": "0a2b70726f636573735f6370753a6370753a6e616e6f7365636f6e64733a6370753a6e616e6f7365636f6e"
                              "6473121c7b736572766963655f6e616d653d2267726166616e612d617070227d18f08195ffbc312080adf1"
                              "80bd3128808001",
    "SelectSeries": "0a2b70726f636573735f6370753a6370753a6e616e6f7365636f6e64733a6370753a6e616e6f7365636f6e6473121c7b"
                    "736572766963655f6e616d653d2267726166616e612d617070227d18f08195ffbc312080adf180bd312a03656e7631"
                    "0000000000004e40",
    "SelectMergeProfile": "0a2b70726f636573735f6370753a6370753a6e616e6f7365636f6e64733a6370753a6e616e6f7365636f6e6473"
                          "121c7b736572766963655f6e616d653d2267726166616e612d617070227d18f08195ffbc312080adf180bd31",
}


def pb_uvarint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return v, i


def pb_fields(b):
    """Yields (field number, wire type, value) of a message: ints for varints, raw bytes otherwise."""
    i = 0
    while i < len(b):
        key, i = pb_uvarint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = pb_uvarint(b, i)
        elif wt == 2:
            n, i = pb_uvarint(b, i)
            v, i = b[i:i + n], i + n
        elif wt in (1, 5):
            n = 8 if wt == 1 else 4
            v, i = b[i:i + n], i + n
        else:
            raise AssertionError(f"wire type {wt} in field {num}")
        yield num, wt, v


def pb_decode(b):
    """A protobuf message as {field number: [values]}."""
    out = {}
    for num, _, v in pb_fields(b):
        out.setdefault(num, []).append(v)
    return out


def pb_packed(b):
    vals, i = [], 0
    while i < len(b):
        v, i = pb_uvarint(b, i)
        vals.append(v - (1 << 64) if v >= 1 << 63 else v)
    return vals


def pb_strs(m, num):
    return [v.decode() for v in m.get(num, [])]


@test
def grafana_querier_connect_proto_and_json():
    import struct
    cpu = os.path.join(ARGS.testdata, "pprof", "go-runtime-cpu-02.pb.gz")
    cpu_total = pprof_raw(cpu)[1][1]
    sel = '{service_name="grafana-app"}'
    rng = {"start": (T0 - 10) * 1000, "end": (T0 + 3600) * 1000}
    prefix = "/querier.v1.QuerierService/"
    with Server() as srv:
        for env in ("prod", "staging"):
            assert srv.ingest(open(cpu, "rb").read(), name=f"grafana-app{{env={env}}}", format="pprof",
                              **{"from": T0})[0] == 200
        srv.ingest(b"foo;bar 5\n", name="other-app.cpu", format="folded", **{"from": T0})

        def call(method, body, ctype="application/proto"):
            st, b, hdr = srv.request("POST", prefix + method, body, {"Content-Type": ctype})
            assert st == 200, (method, ctype, st, b[:300])
            assert hdr["Content-Type"] == ctype, hdr
            return pb_decode(b) if ctype == "application/proto" else json.loads(b)

        def both(method, doc):
            """The recorded binary call and the same request in JSON."""
            return call(method, bytes.fromhex(QUERIER_BODIES[method])), call(method, json.dumps(doc).encode(), "application/json")

        # ProfileTypes: Grafana's health check and type picker.
        want = sorted(t["id"] for t in srv.get_json("/api/v1/profile-types")["profileTypes"])
        pb, js = both("ProfileTypes", rng)
        types = [pb_decode(t) for t in pb[1]]
        assert sorted(pb_strs(t, 1)[0] for t in types) == want, types
        cput = next(t for t in types if pb_strs(t, 1) == [CPU])
        assert [pb_strs(cput, k)[0] for k in (2, 4, 5, 6, 7)] == ["process_cpu", "cpu", "nanoseconds", "cpu", "nanoseconds"]
        assert sorted(t["ID"] for t in js["profileTypes"]) == want, js
        assert {"ID": CPU, "name": "process_cpu", "sampleType": "cpu", "sampleUnit": "nanoseconds",
                "periodType": "cpu", "periodUnit": "nanoseconds"} in js["profileTypes"]

        # LabelNames / LabelValues / Series, narrowed by matchers.
        pb, js = both("LabelNames", {"matchers": [sel], **rng})
        assert {"env", "service_name"} <= set(pb_strs(pb, 1)) and pb_strs(pb, 1) == js["names"], (pb, js)
        pb, js = both("LabelValues", {"name": "env", "matchers": ['{__profile_type__="%s"}' % CPU], **rng})
        assert pb_strs(pb, 1) == ["prod", "staging"] == js["names"], (pb, js)
        pb, js = both("Series", {"matchers": [sel], "labelNames": ["env", "__profile_type__"], **rng})
        got = sorted(tuple((pb_strs(p, 1)[0], pb_strs(p, 2)[0]) for p in map(pb_decode, pb_decode(l)[1])) for l in pb[2])
        types_of_cpu = [t for t in want if t.startswith("process_cpu:")]
        assert got == sorted(tuple(sorted([("__profile_type__", t), ("env", e)])) for t in types_of_cpu
                             for e in ("prod", "staging")), got
        assert len(js["labelsSet"]) == len(got), js

        # SelectMergeStacktraces: the same flame graph the REST API renders.
        fb = srv.get_json("/api/v1/query", query=CPU + sel, format="flamegraph", max_nodes=16384,
                          **{"from": T0 - 10, "until": T0 + 3600})["flamebearer"]
        doc = {"profileTypeID": CPU, "labelSelector": sel, "maxNodes": 16384, **rng}
        pb, js = both("SelectMergeStacktraces", doc)
        g = pb_decode(pb[1][0])
        assert pb_strs(g, 1) == fb["names"] and pb_strs(g, 1)[0] == "total"
        assert [pb_packed(l.get(1, [b""])[0]) for l in map(pb_decode, g[2])] == fb["levels"]
        assert g[3] == [fb["numTicks"]] == [2 * cpu_total] and g[4] == [fb["maxSelf"]], (g[3], g[4])
        jg = js["flamegraph"]
        assert jg["names"] == fb["names"] and int(jg["total"]) == 2 * cpu_total and int(jg["maxSelf"]) == fb["maxSelf"]
        assert [[int(v) for v in l["values"]] for l in jg["levels"]] == fb["levels"]
        # A field Hearth does not know (99) is skipped, as proto requires; one it knows is read,
        # never ignored: profile_id_selector (8) with a Pyroscope UUID is not a Hearth id, a 400.
        extra = bytes.fromhex(QUERIER_BODIES["SelectMergeStacktraces"]) + pb_field(99, b"7c9e6679")
        assert pb_decode(call("SelectMergeStacktraces", extra)[1][0])[3] == [2 * cpu_total]
        st, b, _ = srv.request("POST", prefix + "SelectMergeStacktraces", extra + pb_field(8, b"7c9e6679"),
                               {"Content-Type": "application/proto"})
        assert st == 400 and b"profile_id_selector" in b, (st, b)

        # SelectSeries grouped by env: one series per env, each summing to the profile's total.
        pb, js = both("SelectSeries", {"profileTypeID": CPU, "labelSelector": sel, "groupBy": ["env"], "step": 60, **rng})
        series = {}
        for s in map(pb_decode, pb[1]):
            labels = [(pb_strs(p, 1)[0], pb_strs(p, 2)[0]) for p in map(pb_decode, s[1])]
            points = [pb_decode(p) for p in s[2]]
            series[tuple(labels)] = sum(struct.unpack("<d", p[1][0])[0] for p in points)
            assert all(p[2][0] % 60000 == 0 for p in points), points  # ms timestamps on the step
        assert series == {(("env", "prod"),): cpu_total, (("env", "staging"),): cpu_total}, series
        assert sorted(s["labels"][0]["value"] for s in js["series"]) == ["prod", "staging"], js
        assert all(sum(p["value"] for p in s["points"]) == cpu_total for s in js["series"]), js

        # SelectMergeProfile: a bare profile.proto that go tool pprof reads.
        st, raw, _ = srv.request("POST", prefix + "SelectMergeProfile", bytes.fromhex(QUERIER_BODIES["SelectMergeProfile"]),
                                 {"Content-Type": "application/proto"})
        assert st == 200 and raw[:2] != b"\x1f\x8b", st
        path = os.path.join(ARGS.tmp, "querier-merged.pb")
        open(path, "wb").write(raw)
        assert pprof_raw(path)[1] == [2 * cpu_total], pprof_raw(path)
        js = call("SelectMergeProfile", json.dumps({"profileTypeID": CPU, "labelSelector": sel, **rng}).encode(),
                  "application/json")
        assert js["stringTable"][0] == "" and js["sample"] and js["sampleType"], list(js)

        # Errors: Connect codes with the matching HTTP status.
        cases = [("SelectMergeStacktraces", b"\xff\xff", "application/proto", 400, "invalid_argument"),
                 ("SelectMergeStacktraces", b"{", "application/json", 400, "invalid_argument"),
                 ("SelectMergeStacktraces", b"{}", "application/json", 400, "invalid_argument"),
                 ("SelectMergeStacktraces", json.dumps({**doc, "labelSelector": "{env=~\"(\"}"}).encode(),
                  "application/json", 400, "invalid_argument"),
                 ("SelectMergeStacktraces", json.dumps({**doc, "format": "PROFILE_FORMAT_TREE"}).encode(),
                  "application/json", 501, "unimplemented"),
                 ("SelectSeries", json.dumps({**doc, "step": -1}).encode(), "application/json", 400, "invalid_argument"),
                 ("LabelValues", b"{}", "application/json", 400, "invalid_argument"),
                 ("ProfileTypes", b"{}", "text/plain", 415, "invalid_argument"),
                 ("NoSuchMethod", b"{}", "application/json", 404, "unimplemented")]
        for method, body, ctype, status, code in cases:
            st, b, _ = srv.request("POST", prefix + method, body, {"Content-Type": ctype})
            err = json.loads(b)
            assert st == status and err["code"] == code and err["message"], (method, body, st, b)
        st, b = srv.get(prefix + "ProfileTypes")
        assert st == 405 and json.loads(b)["code"], (st, b)
        # Nothing the errors did changed the stored data.
        assert query(srv, CPU + sel)["total"] == 2 * cpu_total


@test
def pyroscope_nodejs_agent_pushes_unchanged():
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "node")
    if not os.path.isdir(os.path.join(here, "node_modules", "@pyroscope", "nodejs")):
        r = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent"], cwd=here,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"npm install @pyroscope/nodejs failed: {r.stderr[-2000:]}"
    with Server() as srv:
        r = subprocess.run(["node", "push.js"], cwd=here, capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, HEARTH_URL=srv.url(""), SECONDS="10"))
        assert r.returncode == 0, r.stderr[-2000:]
        sel = '{service_name="node-agent-test"}'
        types = {t["id"] for t in srv.get_json("/api/v1/profile-types", query=sel)["profileTypes"]}
        for t in ("wall:wall:nanoseconds:wall:nanoseconds", "wall:cpu:nanoseconds:wall:nanoseconds",
                  "memory:inuse_space:bytes:inuse_space:bytes", "memory:inuse_objects:count:inuse_space:bytes"):
            assert t in types, (t, types)
        names = srv.get_json("/api/v1/labels", query=sel)["names"]
        for n in ("otel.scope.name", "process.runtime.version", "env", "region"):
            assert n in names, (n, names)
        assert srv.get_json("/api/v1/labels/pyroscope_spy/values")["values"] == ["nodespy"]
        span = {"from": "now-5m", "until": "now"}
        cpu = query(srv, 'wall:cpu:nanoseconds:wall:nanoseconds{service_name="node-agent-test",env="ci"}', **span)
        assert cpu["profiles"] >= 3 and cpu["total"] > 10**9, cpu  # several flushes, seconds of CPU
        assert "busyMath" in cpu["functions"][0]["name"], cpu["functions"][:3]
        fg = query(srv, "wall:wall:nanoseconds:wall:nanoseconds" + sel, fmt="flamegraph", **span)
        assert fg["metadata"]["units"] == "samples" and fg["metadata"]["sampleRate"] == 1000000000
        heap = query(srv, "memory:inuse_space:bytes:inuse_space:bytes" + sel, fmt="flamegraph", **span)
        assert heap["metadata"]["units"] == "bytes" and heap["metadata"]["aggregation"] == "average"
        assert heap["flamebearer"]["numTicks"] > 0


def build_goprof():
    out = os.path.join(ARGS.tmp, "goprof-bin")
    if not os.path.exists(out):
        env = dict(os.environ, GOPROXY="off", GOFLAGS="", GOCACHE=os.path.join(ARGS.tmp, "gocache"))
        src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "goprof", "main.go")
        subprocess.run(["go", "build", "-o", out, src], check=True, env=env, capture_output=True)
    return out


@test
def scrapes_go_net_http_pprof_targets():
    port = free_port()
    target = subprocess.Popen([build_goprof(), "serve", f"127.0.0.1:{port}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/debug/pprof/", timeout=2).read()
                break
            except OSError:
                time.sleep(0.1)
        cfg = os.path.join(ARGS.tmp, "scrape.json")
        json.dump({"interval": "3s", "cpu_seconds": 1, "targets": [
            {"job": "goapp", "url": f"http://127.0.0.1:{port}", "labels": {"env": "test"}},
            {"job": "down", "url": "http://127.0.0.1:1", "profiles": ["heap"]}]}, open(cfg, "w"))
        with Server(extra=["--scrape-config", cfg]) as srv:
            deadline = time.time() + 40
            while time.time() < deadline:
                t = srv.get_json("/api/v1/targets")["targets"]
                if all(x["scrapes"] >= 1 for x in t):
                    break
                time.sleep(0.5)
            by = {(x["job"], x["profile"]): x for x in t}
            assert set(p for j, p in by if j == "goapp") == {"cpu", "heap", "allocs", "mutex", "block", "goroutine"}
            for p in ("cpu", "heap", "allocs", "mutex", "block", "goroutine"):
                x = by[("goapp", p)]
                assert x["health"] == "up" and not x["lastError"], x
            down = by[("down", "heap")]
            assert down["health"] == "down" and "cannot reach" in down["lastError"], down
            assert down["labels"]["instance"] == "127.0.0.1:1"
            sel = '{service_name="goapp",job="goapp",instance="127.0.0.1:%d",env="test"}' % port
            types = {t["id"] for t in srv.get_json("/api/v1/profile-types", query=sel)["profileTypes"]}
            for want in (CPU, "memory:alloc_space:bytes:space:bytes", "memory:inuse_space:bytes:space:bytes",
                         "goroutine:goroutine:count:goroutine:count"):
                assert want in types, (want, types)
            cpu = query(srv, CPU + sel, frm="now-5m", until="now")
            assert cpu["total"] > 0 and cpu["profiles"] >= 1
            assert "crypto/sha256.block" in [f["name"] for f in cpu["functions"][:10]], cpu["functions"][:5]
            m = srv.get("/metrics")[1].decode()
            assert 'hearth_scrape_up{scrape_job="goapp",scrape_instance="127.0.0.1:%d",profile="cpu"} 1' % port in m
            assert 'hearth_scrape_up{scrape_job="down",scrape_instance="127.0.0.1:1",profile="heap"} 0' in m
            r = subprocess.run(["promtool", "check", "metrics"], input=m.encode(), capture_output=True, timeout=60)
            assert r.returncode == 0, (r.stdout + r.stderr).decode()
            # A target that stays down logs once, not on every failed scrape.
            down = 'hearth_scrapes_total{scrape_job="down",scrape_instance="127.0.0.1:1",profile="heap"} '
            deadline = time.time() + 15
            while time.time() < deadline:
                m = srv.get("/metrics")[1].decode()
                if int(m.split(down)[1].split()[0]) >= 3:
                    break
                time.sleep(0.5)
            assert int(m.split(down)[1].split()[0]) >= 3, m
            log = open(os.path.join(srv.log_dir, "server.log")).read()
            assert log.count("msg=scrape.failed job=down") == 1, log.count("msg=scrape.failed job=down")
        bad = os.path.join(ARGS.tmp, "bad-scrape.json")
        json.dump({"targets": [{"job": "x", "url": "http://a", "profiles": ["nope"]}]}, open(bad, "w"))
        r = cli("--data-dir", os.path.join(ARGS.tmp, "badscrape"), "--listen", f"127.0.0.1:{free_port()}",
                "--scrape-config", bad)
        assert r.returncode == 1 and "unknown profile `nope`" in r.stderr, r.stderr
    finally:
        target.kill()
        target.wait()


@test
def tenants_are_isolated_on_every_read_endpoint():
    cpu0 = open(os.path.join(ARGS.testdata, "pprof", "go-runtime-cpu-00.pb.gz"), "rb").read()
    heap = open(os.path.join(ARGS.testdata, "pprof", "go-runtime-heap.pb.gz"), "rb").read()
    total = pprof_raw(os.path.join(ARGS.testdata, "pprof", "go-runtime-cpu-00.pb.gz"))[1][1]
    data_dir = tempfile.mkdtemp(prefix="hearth-mt-", dir=ARGS.tmp)

    def h(t):
        return {"X-Scope-OrgID": t}

    def get(srv, tenant, path, **params):
        st, body, _ = srv.request("GET", path + "?" + urllib.parse.urlencode(params), None, h(tenant))
        return st, body

    with Server(data_dir, extra=["--multitenancy"]) as srv:
        post = lambda t, body, **p: srv.request("POST", "/ingest?" + urllib.parse.urlencode(p), body, h(t))[0]
        assert post("team-a", cpu0, name="alpha{env=a}", format="pprof", **{"from": T0}) == 200
        assert post("team-b", heap, name="beta{env=b}", format="pprof", **{"from": T0}) == 200
        st, b, _ = srv.request("POST", "/ingest?name=x&format=pprof", cpu0, {})
        assert st == 401 and "X-Scope-OrgID" in json.loads(b)["error"]
        for bad in ("../etc", ".hidden", "a/b", "x" * 129):
            st, b, _ = srv.request("POST", "/ingest?name=x&format=pprof", cpu0, h(bad))
            assert st == 400, (bad, st)
        assert srv.get("/healthz")[0] == 200 and srv.get("/metrics")[0] == 200  # no tenant needed
        span = {"from": T0 - 10, "until": T0 + 60}
        checks = [
            ("/api/v1/query", dict(query=CPU, format="top", **span)),
            ("/api/v1/timeseries", dict(query=CPU, step="1s", **span)),
            ("/api/v1/series", {}), ("/api/v1/profile-types", {}), ("/api/v1/labels", {}),
            ("/api/v1/labels/service_name/values", {}), ("/pyroscope/label-values", dict(label="service_name")),
            ("/pyroscope/labels", {}), ("/pyroscope/render", dict(query="alpha.cpu", **span)),
            ("/api/v1/profiles", dict(query=CPU, **span)),
            ("/api/v1/diff", dict(query=CPU, left_from=T0 - 10, left_until=T0 + 60, right_from=T0 - 10,
                                  right_until=T0 + 60)),
            ("/pyroscope/render-diff", dict(leftQuery="alpha.cpu", rightQuery="alpha.cpu", leftFrom=T0 - 10,
                                            leftUntil=T0 + 60, rightFrom=T0 - 10, rightUntil=T0 + 60)),
        ]
        for path, params in checks:
            sa, ba = get(srv, "team-a", path, **params)
            sb, bb = get(srv, "team-b", path, **params)
            assert sa == 200 and sb == 200, (path, sa, sb, bb[:200])
            assert b"alpha" in ba or b"crypto/sha256" in ba or b"env" in ba or b"process_cpu" in ba or path.endswith(
                "timeseries"), (path, ba[:300])
            assert b"alpha" not in bb and b"beta" not in ba, (path, ba[:300], bb[:300])
        # The Connect querier (Grafana) is tenant-scoped too.
        rng = {"start": (T0 - 10) * 1000, "end": (T0 + 60) * 1000}
        for method, doc in (("ProfileTypes", rng), ("LabelNames", rng), ("LabelValues", {"name": "service_name", **rng}),
                            ("Series", rng), ("SelectMergeStacktraces", {"profileTypeID": CPU, **rng}),
                            ("SelectSeries", {"profileTypeID": CPU, "step": 10, **rng}),
                            ("SelectMergeProfile", {"profileTypeID": CPU, **rng})):
            res = {}
            for t in ("team-a", "team-b"):
                st, b, _ = srv.request("POST", "/querier.v1.QuerierService/" + method, json.dumps(doc).encode(),
                                       {**h(t), "Content-Type": "application/json"})
                assert st == 200, (method, t, st, b[:200])
                res[t] = b
            a, b = res["team-a"], res["team-b"]
            assert any(m in a for m in (b"alpha", b"sha256", b"endpoint", b"process_cpu", b'"points":[{')), (method, a[:300])
            assert not any(m in b for m in (b"alpha", b"sha256", b"endpoint", b"process_cpu", b'"points":[{')), (method, b[:300])
            assert b"beta" not in a, method
        a_top = json.loads(get(srv, "team-a", "/api/v1/query", query=CPU, format="top", **span)[1])
        b_top = json.loads(get(srv, "team-b", "/api/v1/query", query=CPU, format="top", **span)[1])
        assert a_top["total"] == total and b_top["total"] == 0
        a_ts = json.loads(get(srv, "team-a", "/api/v1/timeseries", query=CPU, step="1s", **span)[1])
        b_ts = json.loads(get(srv, "team-b", "/api/v1/timeseries", query=CPU, step="1s", **span)[1])
        assert a_ts["total"] == total and b_ts["total"] == 0
        st, _ = get(srv, "", "/api/v1/series")
        assert st == 401
        srv.request("POST", "/api/v1/admin/flush", b"", h("team-a"))
    assert sorted(os.listdir(os.path.join(data_dir, "blocks"))) == ["team-a", "team-b"]
    with Server(data_dir, extra=["--multitenancy"]) as srv:  # isolation holds for blocks after restart
        st, b = get(srv, "team-b", "/api/v1/query", query=CPU, format="top", **{"from": T0 - 10, "until": T0 + 60})
        assert json.loads(b)["total"] == 0
        st, b = get(srv, "team-a", "/api/v1/query", query=CPU, format="top", **{"from": T0 - 10, "until": T0 + 60})
        assert json.loads(b)["total"] == total
    with Server(data_dir) as srv:  # without --multitenancy everything is tenant "anonymous"
        assert query(srv, CPU)["total"] == 0


@test
def retention_deletes_old_blocks():
    with Server(extra=["--retention", "24h"]) as srv:
        assert srv.ingest(b"main;old 1\n", name="ret.cpu", format="folded", **{"from": T0})[0] == 200
        srv.request("POST", "/api/v1/admin/flush")
        assert srv.ingest(b"main;new 1\n", name="ret.cpu", format="folded", **{"from": "now-1m"})[0] == 200
        srv.request("POST", "/api/v1/admin/flush")
        deadline = time.time() + 20
        while metric(srv, "hearth_retention_deleted_blocks_total") < 1 and time.time() < deadline:
            time.sleep(0.2)
        assert metric(srv, "hearth_blocks") == 1
        assert query(srv, CPU + '{service_name="ret"}')["total"] == 0
        assert query(srv, CPU + '{service_name="ret"}', frm="now-1h", until="now")["total"] == 10000000
        assert len(os.listdir(os.path.join(srv.data_dir, "blocks", "anonymous"))) == 1


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
        # Discovery runs under the same deadline (issue 10: a slow selector there ran unbounded).
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
def auth_tokens_roles_and_sighup_reload():
    import base64
    path = os.path.join(ARGS.tmp, "tokens")
    open(path, "w").write("# kind secret tenant role\n"
                          "bearer agent-token-1 team-a write\n"
                          "bearer reader-token-1 team-a read\n"
                          "basic grafana:pa55 team-a read\n"
                          "bearer admin-token-1 team-a admin\n"
                          "bearer other-reader team-b read\n")
    body = b"main;a 1\n"
    bearer = lambda t: {"Authorization": "Bearer " + t}
    with Server(extra=["--auth-file", path]) as srv:
        ing = lambda hdr: srv.request("POST", "/ingest?name=auth.cpu&format=folded&from=%d" % T0, body, hdr)[0]
        get = lambda hdr: srv.request("GET", "/api/v1/query?" + urllib.parse.urlencode(
            {"query": CPU, "format": "top", "from": T0 - 10, "until": T0 + 60}), None, hdr)
        assert ing({}) == 401 and ing(bearer("nope")) == 401
        assert ing(bearer("reader-token-1")) == 403
        assert ing(bearer("agent-token-1")) == 200
        assert get(bearer("agent-token-1"))[0] == 403
        st, b, _ = get(bearer("reader-token-1"))
        assert st == 200 and json.loads(b)["total"] == 10000000
        basic = {"Authorization": "Basic " + base64.b64encode(b"grafana:pa55").decode()}
        assert get(basic)[0] == 200
        assert get({"Authorization": "Basic " + base64.b64encode(b"grafana:wrong").decode()})[0] == 401
        st, b, _ = get(bearer("other-reader"))  # another tenant sees nothing
        assert st == 200 and json.loads(b)["total"] == 0
        st, b, _ = get(dict(bearer("reader-token-1"), **{"X-Scope-OrgID": "team-b"}))
        assert st == 403
        assert srv.request("POST", "/api/v1/admin/flush", b"", bearer("reader-token-1"))[0] == 403
        assert srv.request("POST", "/api/v1/admin/flush", b"", bearer("admin-token-1"))[0] == 200
        assert srv.get("/healthz")[0] == 200 and srv.get("/metrics")[0] == 200
        # SIGHUP reloads: the reader token is revoked, a new one works; a broken file changes nothing.
        open(path, "w").write("bearer agent-token-1 team-a write\nbearer reader-token-2 team-a read\n")
        srv.proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 10
        while get(bearer("reader-token-2"))[0] != 200 and time.time() < deadline:
            time.sleep(0.1)
        assert get(bearer("reader-token-2"))[0] == 200 and get(bearer("reader-token-1"))[0] == 401
        open(path, "w").write("this is not a token file\n")
        srv.proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        assert get(bearer("reader-token-2"))[0] == 200
    log = open(os.path.join(srv.data_dir, "server.log")).read()
    for secret in ("agent-token-1", "reader-token", "pa55", "admin-token"):
        assert secret not in log, f"{secret} leaked into the log"
    assert "auth.reload_failed" in log and "auth.reloaded" in log


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
def grafana_provisioning_queries_work():
    """deploy/grafana: the data source is Pyroscope-typed, and every dashboard query - the
    data-source panels (as the Connect calls Grafana makes) and the /embed iframes - answers
    with the pushed data once the dashboard variables are filled in."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    g = os.path.join(root, "deploy", "grafana")
    ds = open(os.path.join(g, "provisioning", "datasources", "hearth.yaml")).read()
    assert re.search(r"^\s+type: grafana-pyroscope-datasource$", ds, re.M) and re.search(r"^\s+uid: hearth$", ds, re.M)
    prov = open(os.path.join(g, "provisioning", "dashboards", "hearth.yaml")).read()
    assert "type: file" in prov and "/var/lib/grafana/dashboards/hearth" in prov
    dash = json.load(open(os.path.join(g, "dashboards", "hearth.json")))
    cpu = os.path.join(ARGS.testdata, "pprof", "go-runtime-cpu-02.pb.gz")
    total = pprof_raw(cpu)[1][1]
    now_ms = int(time.time() * 1000)
    with Server() as srv:
        assert srv.ingest(open(cpu, "rb").read(), name="my-service", format="pprof", **{"from": now_ms // 1000})[0] == 200
        env = {"service": "my-service", "hearth_url": srv.url(""), "__from": str(now_ms - 3600000), "__to": str(now_ms + 60000)}
        fill = lambda s: re.sub(r"\$\{?(\w+)\}?", lambda m: env[m.group(1)], s)
        kinds = set()
        for p in dash["panels"]:
            for t in p.get("targets", []):
                assert p["datasource"]["uid"] == t["datasource"]["uid"] == "hearth", p["title"]
                doc = {"profileTypeID": t["profileTypeId"], "labelSelector": fill(t["labelSelector"]),
                       "start": int(env["__from"]), "end": int(env["__to"])}
                method = "SelectSeries" if t["queryType"] == "metrics" else "SelectMergeStacktraces"
                if method == "SelectSeries":
                    doc.update(step=15, groupBy=t["groupBy"])
                st, b, _ = srv.request("POST", "/querier.v1.QuerierService/" + method, json.dumps(doc).encode(),
                                       {"Content-Type": "application/json"})
                assert st == 200, (p["title"], st, b[:300])
                r = json.loads(b)
                got = (sum(pt["value"] for s in r["series"] for pt in s["points"]) if method == "SelectSeries"
                       else int(r["flamegraph"]["total"]))
                assert got == total, (p["title"], got, total)
                kinds.add(p["type"])
            if p["type"] == "text":
                src = fill(html.unescape(re.search(r'<iframe src="([^"]+)"', p["options"]["content"]).group(1)))
                u = urllib.parse.urlparse(src)
                assert u.path == "/embed", src
                st, b, hdr = srv.request("GET", u.path + "?" + u.query)
                assert st == 200 and "text/html" in hdr["Content-Type"], (src, st)
                q = dict(urllib.parse.parse_qsl(u.query))
                assert q["view"] in ("flamegraph", "timeseries", "table") and q["theme"] in ("dark", "light")
                assert query(srv, q["query"], frm=q["from"], until=q["until"])["total"] == total, src
                kinds.add("embed-" + q["view"])
        assert kinds == {"timeseries", "flamegraph", "embed-flamegraph", "embed-timeseries", "embed-table"}, kinds


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
    # Server.stop raised if the exit code (valgrind's --error-exitcode) was not 0.


# ---------------------------------------------------------------- runner

def load_area_modules():
    """Imports tests/integration/test_*.py: each area's tests, registered with @run.test and
    sharing this module's helpers (Server, query, ...) through `import run`."""
    sys.modules.setdefault("run", sys.modules[__name__])
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    for name in sorted(os.listdir(here)):
        if name.startswith("test_") and name.endswith(".py"):
            __import__(name[:-3])


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="./hearth")
    ap.add_argument("--testdata", default="../shared/testdata")
    ap.add_argument("--quick", action="store_true", help="(kept for the ASan run; every test still runs)")
    ap.add_argument("-k", default="", help="run only tests whose name contains this")
    ap.add_argument("--skip", action="append", default=[], help="skip tests whose name contains this (repeatable)")
    ap.add_argument("--valgrind", action="store_true", help="run only the valgrind cycle")
    ARGS = ap.parse_args()
    ARGS.binary = os.path.abspath(ARGS.binary)
    ARGS.tmp = tempfile.mkdtemp(prefix="hearth-it-")
    load_area_modules()
    passed = failed = 0
    for fn in ([valgrind_full_cycle] if ARGS.valgrind else TESTS):
        if ARGS.k not in fn.__name__ or any(x in fn.__name__ for x in ARGS.skip):
            continue
        t = time.time()
        try:
            fn()
            passed += 1
            print(f"ok   {fn.__name__} ({time.time() - t:.1f}s)", flush=True)
        except Exception:
            failed += 1
            print(f"FAIL {fn.__name__}\n{traceback.format_exc()}", flush=True)
    if not failed:
        shutil.rmtree(ARGS.tmp, ignore_errors=True)
    else:
        print(f"(logs kept under {ARGS.tmp})")
    print(f"integration: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
