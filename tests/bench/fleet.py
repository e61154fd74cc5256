#!/usr/bin/env python3
"""Fleet benchmark (make bench-fleet): one service's 7-day query on stores that hold
1, 20 and 200 services, built the way a live server fills them.

The store. Every service has its own binary: its own mapping, its own function names
(--functions, 1,200) and its own distinct stacks (--stacks, 2,500) over them. It uploads one
CPU profile every --interval seconds (300) for --days days (7): 2,016 profiles per service.
Profiles are synthetic, seeded (--seed) and real pprof: each draws 1,500-4,500 CPU samples at
100 Hz from its service's stacks (Zipf weights, so hot stacks recur and, over a week, every
stack appears), encoded with tests/integration/protowire.py and gzipped. The
service's symbol tables are the same bytes in each of its uploads, so they are gzipped once per
service and sent as a second gzip member (RFC 1952 allows several; Hearth and go tool pprof read
them as one stream). That keeps the generator cheap enough for 403,200 uploads; the server
still inflates and decodes every byte. Uploads carry `from` timestamps in the past and are
sent hour by hour, by --clients worker processes each on its own keep-alive connection, with a
head cut (POST /api/v1/admin/flush) after each hour, so the store holds hourly blocks.
Background compaction is off while building.

Two regimes are measured on each store: "hourly" (the blocks as cut) and "compacted" (after
POST /api/v1/admin/compact with the default compaction flags). For each, on the query service
(svc-000, present in every store with the same profiles):
  - /api/v1/query?format=flamegraph over the whole range: cold (the first query after a server
    restart; the OS page cache stays warm, nothing here drops it) and warm (median of 5 after
    one warm-up);
  - /api/v1/timeseries and /api/v1/labels/service_name/values, warm (median of 5 after one);
  - peak RSS (VmHWM) of each server process of that regime (the building server counts for
    "hourly", the compacting one for "compacted");
  - disk bytes per stored profile (blocks + index.db), and blocks on disk;
  - the ingest rate while building (profiles/s, uploads only; flush time is reported apart).
Exactness is asserted: the flame graph's total and the timeseries total equal the sum of the
generated profiles' values for the query service, and so does `go tool pprof -proto` merging the
same profiles written as files, which is also timed in the same run as the reference.

Output: a Markdown table (one row per store size x regime) and tests/out/bench/fleet.json.
Servers listen on free loopback ports and are stopped by PID (harness.py's Server). Scale down with
--days / --interval when the 200-service build is too slow; the output says when it is.
Not a test of targets: nothing asserts a latency.
"""
import argparse
import collections
import gzip
import http.client
import json
import multiprocessing
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import harness  # noqa: E402  (reuses the integration suite's server control)
from protowire import pb_encode_field, pb_field, pb_fields, pb_packed, pb_put_varint  # noqa: E402

CPU = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
BASE = 1780000000 // 3600 * 3600  # 2026-05-28, on the hour: a fixed past, so runs are comparable
PERIOD = 10_000_000  # 100 Hz
QUERY_SERVICE = 0
OUT = os.path.join(HERE, "..", "out", "bench", "fleet.json")


def service_name(s):
    return f"svc-{s:03d}"


# ---------------------------------------------------------------- synthetic services

class Service:
    """One service's binary: functions, locations (one per function), distinct stacks, and the
    gzipped symbol part every upload of it carries. Deterministic in (seed, index)."""

    def __init__(self, seed, idx, nfuncs, nstacks):
        rng = random.Random(seed * 1_000_003 + idx)
        pkgs = [f"github.com/acme/{service_name(idx)}/internal/pkg{p:02d}" for p in range(40)]
        strings = ["", "samples", "count", "cpu", "nanoseconds", f"/usr/local/bin/{service_name(idx)}",
                   f"{rng.getrandbits(160):040x}"]
        first_fn = len(strings)
        for f in range(nfuncs):
            pkg = rng.choice(pkgs)
            kind = rng.random()
            leaf = f"(*T{rng.randrange(60)}).M{f}" if kind < 0.6 else f"fn{f}"
            strings.append(f"{pkg}.{leaf}")
        first_file = len(strings)
        strings += [f"{p}/file{k}.go" for p in pkgs for k in range(3)]
        pf, enc = pb_field, pb_encode_field
        st = b"".join(pf(6, s.encode()) for s in strings)
        sample_types = pf(1, enc(1, 0, 1) + enc(2, 0, 2)) + pf(1, enc(1, 0, 3) + enc(2, 0, 4))
        mapping = pf(3, enc(1, 0, 1) + enc(2, 0, 0x400000) + enc(3, 0, 0x400000 + 0x40 * nfuncs + 0x1000) +
                     enc(4, 0, 0) + enc(5, 0, 5) + enc(6, 0, 6) + enc(7, 0, 1) + enc(8, 0, 1))
        locs, funcs = [], []
        for f in range(nfuncs):
            line0 = rng.randrange(10, 900)
            fname = first_fn + f
            ffile = first_file + rng.randrange(len(strings) - first_file)
            funcs.append(pf(5, enc(1, 0, f + 1) + enc(2, 0, fname) + enc(3, 0, fname) + enc(4, 0, ffile) +
                            enc(5, 0, line0)))
            line = pf(4, enc(1, 0, f + 1) + enc(2, 0, line0 + rng.randrange(1, 80)))
            locs.append(pf(4, enc(1, 0, f + 1) + enc(2, 0, 1) + enc(3, 0, 0x401000 + 0x40 * f) + line))
        period = pf(11, enc(1, 0, 3) + enc(2, 0, 4)) + enc(12, 0, PERIOD)
        static = sample_types + mapping + b"".join(locs) + b"".join(funcs) + st + period
        self.static_gz = gzip.compress(static, 6)
        stacks = self._stacks(rng, nfuncs, nstacks)
        # Sample prefixes: field 1 (location ids, leaf first as pprof stores them), packed.
        self.prefix = [pf(1, b"".join(pb_put_varint(f + 1) for f in reversed(s))) for s in stacks]
        order = list(range(nstacks))
        rng.shuffle(order)  # which stacks are hot differs per service
        w = [0.0] * nstacks
        for rank, i in enumerate(order):
            w[i] = 1.0 / (rank + 1)
        self.cum, acc = [], 0.0
        for x in w:
            acc += x
            self.cum.append(acc)
        self.idx = idx

    @staticmethod
    def _stacks(rng, nfuncs, nstacks):
        """Distinct root-first call paths that share prefixes, as a program's stacks do."""
        roots = [tuple(range(4 * r, 4 * r + 4)) for r in range(8)]  # goexit/main-like entry chains
        seen, out = set(roots), list(roots)
        for _ in range(nstacks * 50):  # bounded: far more tries than ever needed
            if len(out) >= nstacks:
                break
            base = rng.choice(out)
            cut = rng.randrange(1, len(base) + 1)
            grow = tuple(rng.randrange(nfuncs) for _ in range(rng.randint(1, 6)))
            s = base[:cut] + grow
            if len(s) <= 48 and s not in seen:
                seen.add(s)
                out.append(s)
        assert len(out) == nstacks, f"only {len(out)} distinct stacks"
        return out


VALS = {}


def sample_values(c):
    v = VALS.get(c)
    if v is None:
        v = VALS[c] = pb_field(2, pb_put_varint(c) + pb_put_varint(c * PERIOD))
    return v


def make_profile(svc, seed, idx, t, duration_s):
    """Upload idx of service svc, covering duration_s seconds from unix time t:
    (gzipped body, total cpu nanoseconds)."""
    rng = random.Random((seed << 40) ^ (svc.idx << 22) ^ idx)
    k = rng.randint(1500, 4500)
    counts = collections.Counter(rng.choices(range(len(svc.cum)), cum_weights=svc.cum, k=k))
    pf = pb_field
    body = b"".join(pf(2, svc.prefix[s] + sample_values(c)) for s, c in counts.items())
    body += pb_encode_field(9, 0, t * 10**9) + pb_encode_field(10, 0, duration_s * 10**9)
    return gzip.compress(body, 6) + svc.static_gz, k * PERIOD


# ---------------------------------------------------------------- ingest workers

class Uploader:
    """A client process's state: a model of each service it uploads for (built on first use)
    and one keep-alive connection to the server of the store being built."""

    def __init__(self, w, a):
        self.w, self.a, self.models, self.conn, self.port = w, a, {}, None, None

    def post(self, path, body):
        for attempt in range(3):  # bounded: a dropped keep-alive connection is retried twice
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
                self.conn.request("POST", path, body=body, headers={"Content-Type": "application/octet-stream"})
                r = self.conn.getresponse()
                r.read()
                return r.status
            except (OSError, http.client.HTTPException):
                self.conn = None
                if attempt == 2:
                    raise

    def hour(self, hour, nsvc, per_hour, files_dir):
        """Uploads this client's share (every clients-th upload) of one hour of the fleet."""
        a = self.a
        sums, n, nbytes, gen, errors = collections.Counter(), 0, 0, 0.0, []
        for j in range(self.w, nsvc * per_hour, a.clients):
            s, k = divmod(j, per_hour)
            idx = hour * per_hour + k
            t = BASE + idx * a.interval
            t0 = time.process_time()
            m = self.models.get(s)
            if m is None:
                m = self.models[s] = Service(a.seed, s, a.functions, a.stacks)
            body, total = make_profile(m, a.seed, idx, t, a.interval)
            if files_dir and s == QUERY_SERVICE:
                with open(os.path.join(files_dir, f"{idx:05d}.pb.gz"), "wb") as f:
                    f.write(body)
            gen += time.process_time() - t0
            q = urllib.parse.urlencode({"name": service_name(s), "format": "pprof", "from": t, "until": t + a.interval})
            status = self.post("/ingest?" + q, body)
            if status != 200:
                errors.append(status)
                continue
            sums[s] += total
            n += 1
            nbytes += len(body)
        return dict(sums), n, nbytes, gen, errors


def worker_main(pipe, w, a):
    """A client process's loop: ("port", p) points it at a new server, ("hour", args) uploads
    its share of an hour; an exception is sent back as ("error", text) rather than hanging the parent."""
    up = Uploader(w, a)
    while True:
        msg = pipe.recv()
        if msg is None:
            break
        cmd, args = msg
        try:
            if cmd == "port":
                up.port, up.conn = args, None
                pipe.send(("ok", None))
            else:
                pipe.send(("ok", up.hour(*args)))
        except Exception as e:  # noqa: BLE001  (reported to the parent, which raises it)
            pipe.send(("error", f"client {w}: {type(e).__name__}: {e}"))


class Clients:
    def __init__(self, a):
        ctx = multiprocessing.get_context("fork")
        self.pipes, self.procs = [], []
        for w in range(a.clients):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=worker_main, args=(child, w, a), daemon=True)
            p.start()
            self.pipes.append(parent)
            self.procs.append(p)

    def call(self, cmd, args, timeout=900):
        """Sends cmd to every client and collects their answers (bounded by timeout each)."""
        for p in self.pipes:
            p.send((cmd, args))
        out, failed = [], []
        for p in self.pipes:
            if not p.poll(timeout):
                raise RuntimeError(f"a client did not answer {cmd} within {timeout} s")
            kind, val = p.recv()
            (failed if kind == "error" else out).append(val)
        if failed:
            raise RuntimeError("; ".join(failed))
        return out

    def close(self):
        for p in self.pipes:
            p.send(None)
        for p in self.procs:
            p.join(30)
            if p.is_alive():
                p.kill()


# ---------------------------------------------------------------- measuring

def dir_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def block_count(data_dir):
    return sum(len(fs) for _, _, fs in os.walk(os.path.join(data_dir, "blocks")))


def cpu_seconds(pid):
    """User + system CPU a process has used: a steadier cost figure than wall time on a shared machine."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def timed_get(srv, path, **params):
    """(seconds, document); the document is None when the server's --query-timeout (60 s by
    default) stopped the query with 504, so a store too slow to answer is reported, not fatal.
    srv.cpu_s accumulates the server's CPU seconds over the calls, which other work on the
    machine does not inflate as it inflates wall time."""
    t, c = time.time(), cpu_seconds(srv.proc.pid)
    st, body = srv.get(path, **params)
    took = time.time() - t
    srv.cpu_s = getattr(srv, "cpu_s", 0.0) + cpu_seconds(srv.proc.pid) - c
    if st == 504:
        return took, None
    assert st == 200, f"GET {path} -> {st} {body[:300]!r}"
    return took, json.loads(body)


def warm(srv, a, path, **params):
    """Median of --reps after one warm-up; one rep only when the warm-up took over --slow
    seconds (keeps the run bounded on slow stores). Returns (ms or None, last document, reps)."""
    first, doc = timed_get(srv, path, **params)
    reps = a.reps if first < a.slow else 1
    times = []
    srv.cpu_s = 0.0
    for _ in range(reps):
        took, doc = timed_get(srv, path, **params)
        if doc is None:
            return None, None, reps
        times.append(took)
    srv.warm_cpu_ms = srv.cpu_s * 1000 / reps  # a mean: CPU time comes in 10 ms ticks
    return statistics.median(times) * 1000, doc, reps


def flame_cold_warm(srv, a, sel, rng, expect_total, prefix, out, checked):
    """The flame graph of sel over rng on a just-started server: cold (the first query), then warm,
    into out[prefix + "flamegraph_*"], each total asserted against the generated one."""
    srv.cpu_s = 0.0
    cold, fg = timed_get(srv, "/api/v1/query", query=sel, format="flamegraph", **rng)
    out[prefix + "flamegraph_cold_ms"] = cold * 1000 if fg else None
    out[prefix + "flamegraph_cold_cpu_ms"] = srv.cpu_s * 1000
    out[prefix + "flamegraph_warm_ms"], fg_warm, out[prefix + "flamegraph_reps"] = warm(
        srv, a, "/api/v1/query", query=sel, format="flamegraph", **rng)
    out[prefix + "flamegraph_warm_cpu_ms"] = srv.warm_cpu_ms
    for doc in (fg, fg_warm):
        if doc:
            got = doc["flamebearer"]["numTicks"]
            assert got == expect_total, f"{prefix}flame graph total {got} != generated {expect_total}"
            checked.append(prefix.replace("_", " ") + "flamegraph")


def measure(data_dir, extra, a, expect_total, nsvc, fleet_total=None):
    """Restarts a server on data_dir and takes the query figures (cold first), asserting every
    total that came back against the generated one; with fleet_total (every service's generated
    sum), the fleet-wide figures too (measure_fleet)."""
    sel = CPU + '{service_name="%s"}' % service_name(QUERY_SERVICE)
    rng = {"from": BASE, "until": BASE + a.days * 86400}
    out, checked = {}, []
    srv = harness.Server(data_dir, extra=extra).start()
    try:
        flame_cold_warm(srv, a, sel, rng, expect_total, "", out, checked)
        out["timeseries_warm_ms"], ts, out["timeseries_reps"] = warm(srv, a, "/api/v1/timeseries", query=sel, **rng)
        if ts:
            assert ts["total"] == expect_total, f"timeseries total {ts['total']} != generated {expect_total}"
            out["query_profiles"] = ts["profiles"]
            checked.append("timeseries")
        out["label_values_warm_ms"], lv, out["label_values_reps"] = warm(srv, a, "/api/v1/labels/service_name/values",
                                                                         **rng)
        if lv:
            assert len(lv["values"]) == nsvc, f"{len(lv['values'])} service names, expected {nsvc}"
        out["query_server_peak_rss_mib"] = peak_rss_mib(srv.proc.pid)
    finally:
        srv.stop()
    if fleet_total is not None:
        out.update(measure_fleet(data_dir, extra, a, fleet_total, checked))
    out["totals_checked"] = sorted(set(checked))
    return out


def measure_fleet(data_dir, extra, a, expect_total, checked):
    """The fleet-wide questions on a fresh server: every service's CPU over the whole range as a
    flame graph (cold, then warm) and as the top table (warm), and the server's peak RSS after them."""
    sel = CPU + "{}"
    rng = {"from": BASE, "until": BASE + a.days * 86400}
    out = {}
    srv = harness.Server(data_dir, extra=extra).start()
    try:
        flame_cold_warm(srv, a, sel, rng, expect_total, "fleet_", out, checked)
        out["fleet_query_server_peak_rss_mib"] = peak_rss_mib(srv.proc.pid)
    finally:
        srv.stop()
    # The fleet function table on a server of its own: cold (it reads the blocks' function
    # tables, not their stacks), warm, split by service, and that server's peak RSS.
    srv = harness.Server(data_dir, extra=extra).start()
    try:
        took, top = timed_get(srv, "/api/v1/query", query=sel, format="top", **rng)
        out["fleet_top_cold_ms"] = took * 1000 if top else None
        out["fleet_top_warm_ms"], top, out["fleet_top_reps"] = warm(srv, a, "/api/v1/query", query=sel, format="top",
                                                                    **rng)
        out["fleet_top_by_service_warm_ms"], by, _ = warm(srv, a, "/api/v1/query", query=sel, format="top",
                                                          group_by="service_name", **rng)
        if top and by:
            assert top["total"] == by["total"] == expect_total, \
                f"fleet top totals {top['total']}, {by['total']} != generated {expect_total}"
            checked.append("fleet top")
        out["fleet_top_server_peak_rss_mib"] = peak_rss_mib(srv.proc.pid)
    finally:
        srv.stop()
    return out


def block_format(data_dir):
    """The block format version the store holds, from a block file's magic (HRTHBLK1/2)."""
    for root, _, files in os.walk(os.path.join(data_dir, "blocks")):
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                return "v" + fh.read(8)[-1:].decode()
    return "none"


def disk(data_dir, profiles):
    blocks = dir_bytes(os.path.join(data_dir, "blocks"))
    index = os.path.getsize(os.path.join(data_dir, "index.db"))
    return {"blocks": block_count(data_dir), "block_bytes": blocks, "index_bytes": index, "block_format": block_format(data_dir),
            "disk_bytes_per_profile": (blocks + index) / profiles}


# ---------------------------------------------------------------- one store

BUILD_FLAGS = ["--wal-fsync", "none", "--compact-min-blocks", "0", "--block-duration", "1000h"]
HOURLY_FLAGS = ["--compact-min-blocks", "0"]  # a server that leaves the hourly blocks as they are


def build_store(nsvc, a, clients, files_dir):
    per_hour = 3600 // a.interval
    hours = a.days * 24
    srv = harness.Server(extra=BUILD_FLAGS).start()
    clients.call("port", srv.port)
    sums, n, nbytes, ingest_s, flush_s, gen_s = collections.Counter(), 0, 0, 0.0, 0.0, 0.0
    t_start = time.time()
    try:
        for h in range(hours):
            t = time.time()
            for part in clients.call("hour", (h, nsvc, per_hour, files_dir)):
                psums, pn, pbytes, pgen, errors = part
                if errors:
                    raise RuntimeError(f"{len(errors)} ingest errors in hour {h}, e.g. {errors[:3]}")
                sums.update(psums)
                n += pn
                nbytes += pbytes
                gen_s += pgen
            ingest_s += time.time() - t
            t = time.time()
            st, body, _ = srv.request("POST", "/api/v1/admin/flush", b"")
            assert st == 200, body
            flush_s += time.time() - t
            if h in (0, 23) or (h + 1) % 24 == 0:
                done = time.time() - t_start
                print(f"  {nsvc} service(s): hour {h + 1}/{hours}, {n:,} profiles, {n / ingest_s:,.0f}/s; "
                      f"about {done / (h + 1) * (hours - h - 1) / 60:.1f} min to go", flush=True)
        rss = peak_rss_mib(srv.proc.pid)
        server_cpu = cpu_seconds(srv.proc.pid)
    finally:
        srv.stop()
    expected = nsvc * hours * per_hour
    assert n == expected, f"{n} profiles stored, expected {expected}"
    return srv.data_dir, {
        "profiles": n, "upload_bytes": nbytes, "ingest_seconds": ingest_s, "flush_seconds": flush_s,
        "ingest_profiles_per_s": n / ingest_s, "build_profiles_per_s": n / (ingest_s + flush_s),
        "client_generate_cpu_seconds": gen_s, "build_server_cpu_seconds": server_cpu,
        "build_server_cpu_ms_per_profile": server_cpu * 1000 / n, "build_server_peak_rss_mib": rss,
        "query_service_total": sums[QUERY_SERVICE], "fleet_total": sum(sums.values())}


def bench_store(nsvc, a, clients, files_dir):
    print(f"building the {nsvc}-service store ...", flush=True)
    data_dir, build = build_store(nsvc, a, clients, files_dir)
    total = build["query_service_total"]
    rows = []
    with open(data_dir + ".build.json", "w") as f:  # what --store needs to measure a kept store again
        json.dump({"build": build, "days": a.days, "services": nsvc}, f)
    hourly = {"services": nsvc, "regime": "hourly", **build, **disk(data_dir, build["profiles"]),
              **measure(data_dir, HOURLY_FLAGS, a, total, nsvc, build["fleet_total"])}
    if a.keep:  # the hourly store as cut, beside the one compaction is about to rewrite
        shutil.copytree(data_dir, data_dir + "-hourly")
        shutil.copy(data_dir + ".build.json", data_dir + "-hourly.build.json")
    hourly["peak_rss_mib"] = max(hourly["build_server_peak_rss_mib"], hourly["query_server_peak_rss_mib"])
    rows.append(hourly)
    srv = harness.Server(data_dir).start()  # default compaction flags
    try:
        t = time.time()
        # Minutes at 200 services: one request compacts the whole store.
        st, body, _ = srv.request("POST", "/api/v1/admin/compact", b"", timeout=3 * 3600)
        took = time.time() - t
        assert st == 200, body
        compact_rss = peak_rss_mib(srv.proc.pid)
    finally:
        srv.stop()
    comp = {"services": nsvc, "regime": "compacted", **build, **disk(data_dir, build["profiles"]),
            "compact_seconds": took, "compactions": json.loads(body)["compactions"],
            "compact_server_peak_rss_mib": compact_rss, **measure(data_dir, [], a, total, nsvc, build["fleet_total"])}
    comp["peak_rss_mib"] = max(compact_rss, comp["query_server_peak_rss_mib"])
    rows.append(comp)
    if not a.keep:
        shutil.rmtree(data_dir, ignore_errors=True)
    return rows, total


def pprof_total(merged):
    """The cpu (second) value summed over a pprof's samples."""
    total = 0
    for f, _, v in pb_fields(gzip.decompress(merged)):
        if f == 2:
            vals = []  # values come packed or one field each, as the encoder chose
            for sf, swt, sv in pb_fields(v):
                if sf == 2:
                    vals += pb_packed(sv) if swt == 2 else [sv]
            total += vals[1]
    return total


def bench_pprof(files_dir, expect_total):
    paths = sorted(os.path.join(files_dir, f) for f in os.listdir(files_dir))
    t = time.time()
    merged = subprocess.run(["go", "tool", "pprof", "-proto"] + paths, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, check=True, timeout=1800).stdout
    took = time.time() - t
    got = pprof_total(merged)
    assert got == expect_total, f"go tool pprof total {got} != generated {expect_total}"
    return {"files": len(paths), "seconds": took, "total": got}


# ---------------------------------------------------------------- report

def add_ratios(rows, pprof):
    """The issue's yardsticks: each store's flame graph against the one-service store in the same
    regime (the target is 1.5x at 20 services, 2x at 200), and go tool pprof against Hearth."""
    one = {r["regime"]: r for r in rows if r["services"] == 1}
    for r in rows:
        for kind in ("warm", "cold"):
            ms = r[f"flamegraph_{kind}_ms"]
            if ms is None:
                continue
            r[f"go_pprof_over_flamegraph_{kind}"] = pprof["seconds"] * 1000 / ms
            base = one.get(r["regime"], {}).get(f"flamegraph_{kind}_ms")
            if base:
                r[f"flamegraph_{kind}_vs_one_service"] = ms / base


def fmt_ms(x):
    if x is None:
        return "timed out (504)"
    return f"{x:,.0f} ms" if x >= 100 else f"{x:,.1f} ms"


def report(rows, pprof, meta):
    """Prints the Markdown table and notes; everything comes from the JSON document's parts, so
    --report FILE re-prints a saved run."""
    m, reps = meta, meta.get("reps", 5)
    formats = sorted({r.get("block_format", m.get("block_format", "?")) for r in rows})
    print(f"\nFleet benchmark, {m['date']}, {m['cores']} cores ({m['note']}); block format {'/'.join(formats)}; "
          f"query: one service's {m['days']}-day range, {m['profiles_per_service']:,} profiles; {m['functions']:,} "
          f"functions and {m['stacks']:,} stacks per service, one profile per {m['interval_s']} s.")
    if m["scaled_down"]:
        print(f"SCALED DOWN: --days {m['days']} --interval {m['interval_s']} (the issue's store is 7 days at 300 s).")
    print("\n| store | blocks | flame graph warm | flame graph cold | server CPU, warm / cold | timeseries warm "
          "| label values warm | peak RSS, query server / regime | disk / profile | ingest |")
    print("|---|---|---|---|---|---|---|---|---|---|")

    def w(r, key):
        one = r.get(key.replace("_warm_ms", "_reps"), reps) < reps and r[key] is not None
        return fmt_ms(r[key]) + (" (1 run)" if one else "")

    for r in rows:
        cpu = (f"{fmt_ms(r['flamegraph_warm_cpu_ms'])} / {fmt_ms(r['flamegraph_cold_cpu_ms'])}"
               if "flamegraph_warm_cpu_ms" in r else "-")
        print(f"| {r['services']}, {r['regime']} | {r['blocks']:,} | {w(r, 'flamegraph_warm_ms')} "
              f"| {fmt_ms(r['flamegraph_cold_ms'])} | {cpu} | {w(r, 'timeseries_warm_ms')} "
              f"| {w(r, 'label_values_warm_ms')} | {r['query_server_peak_rss_mib']:,.0f} / {r['peak_rss_mib']:,.0f} MiB "
              f"| {r['disk_bytes_per_profile']:,.0f} B | {r['ingest_profiles_per_s']:,.0f} profiles/s |")
    if any("fleet_flamegraph_warm_ms" in r for r in rows):
        print("\nFleet-wide: every service's CPU over the whole range (`{}`), on a freshly started server:\n")
        print("| store | flame graph warm | flame graph cold | server CPU, warm / cold | peak RSS | "
              "top table warm | top table cold | top by service warm | peak RSS (top) |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            if "fleet_flamegraph_warm_ms" not in r:
                continue
            print(f"| {r['services']}, {r['regime']} | {w(r, 'fleet_flamegraph_warm_ms')} "
                  f"| {fmt_ms(r['fleet_flamegraph_cold_ms'])} | {fmt_ms(r['fleet_flamegraph_warm_cpu_ms'])} / "
                  f"{fmt_ms(r['fleet_flamegraph_cold_cpu_ms'])} | {r['fleet_query_server_peak_rss_mib']:,.0f} MiB "
                  f"| {w(r, 'fleet_top_warm_ms')} | {fmt_ms(r.get('fleet_top_cold_ms'))} "
                  f"| {fmt_ms(r.get('fleet_top_by_service_warm_ms'))} "
                  f"| {r.get('fleet_top_server_peak_rss_mib', 0):,.0f} MiB |")
    print("\nServer CPU: user + system time of the server process for the flame graph query (warm: the mean "
          "over the reps), steadier than wall time on a shared machine; a cold query decodes partitions on up to "
          "as many threads as cores, so its wall time can be below its CPU time.")
    print(f"\nCold: the first query after a server restart (the OS page cache is not dropped). Warm: median of "
          f"{reps} after one warm-up (1 run: the warm-up took over --slow seconds). Peak RSS: VmHWM of the server "
          "that answered the queries / the most of any server of that regime (building for hourly, compacting for "
          f"compacted). Ingest: uploads/s while building, with {m['clients']} client processes generating the "
          "profiles on the same cores.")
    print(f"\n`go tool pprof -proto` merged the query service's {pprof['files']:,} files in "
          f"{pprof['seconds']:.2f} s (same run). Every total that came back (flame graphs, timeseries, go tool pprof) "
          f"equalled the generated {pprof['total']:,} ns.")
    for r in rows:
        parts = [f"go tool pprof took {r[f'go_pprof_over_flamegraph_{k}']:,.1f}x the {k} flame graph"
                 for k in ("warm", "cold") if f"go_pprof_over_flamegraph_{k}" in r]
        if r["services"] > 1:
            parts += [f"flame graph {k} {r[f'flamegraph_{k}_vs_one_service']:.1f}x the one-service store's"
                      for k in ("warm", "cold") if f"flamegraph_{k}_vs_one_service" in r]
        if parts:
            print(f"- {r['services']}, {r['regime']}: " + "; ".join(parts))
    for r in rows:
        if r["regime"] == "compacted":
            print(f"- {r['services']} service{'s' if r['services'] > 1 else ''}: {r['profiles']:,} profiles, built in "
                  f"{r['ingest_seconds']:.0f} s of uploads + {r['flush_seconds']:.0f} s of cuts (server CPU "
                  f"{r['build_server_cpu_ms_per_profile']:.1f} ms per profile, clients "
                  f"{r['client_generate_cpu_seconds'] * 1000 / r['profiles']:.1f} ms generating each); compaction "
                  f"{r['compact_seconds']:.1f} s ({r['compactions']} runs)")


def measure_kept(a):
    """--store: the query figures of a kept store, against the totals its build wrote beside it."""
    store = os.path.abspath(a.store.rstrip("/"))
    with open(store + ".build.json") as f:
        kept = json.load(f)
    a.days = kept["days"]
    harness.configure(binary=os.path.abspath(a.binary), tmp=tempfile.mkdtemp(prefix="hearth-fleet-"))
    flags = HOURLY_FLAGS if store.endswith("-hourly") else []
    b = kept["build"]
    out = measure(store, flags, a, b["query_service_total"], kept["services"], b["fleet_total"])
    print(json.dumps(out, indent=1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", default="./hearth")
    ap.add_argument("--services", default="1,20,200", help="store sizes, comma-separated")
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--interval", type=int, default=300, help="seconds between a service's profiles")
    ap.add_argument("--functions", type=int, default=1200)
    ap.add_argument("--stacks", type=int, default=2500)
    ap.add_argument("--clients", type=int, default=4, help="concurrent uploading processes")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--slow", type=float, default=20.0, help="a warm-up slower than this many seconds gets one rep")
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--keep", action="store_true", help="keep the stores (printed) instead of deleting them")
    ap.add_argument("--note", default="machine shared with other work: timings are noisy")
    ap.add_argument("--report", metavar="JSON", help="only re-print the table of a saved run")
    ap.add_argument("--store", metavar="DIR", help="only measure a store kept by --keep again (DIR-hourly is the "
                    "hourly one), and print its figures as JSON")
    a = ap.parse_args()
    if a.store:
        return measure_kept(a)
    if a.report:
        with open(a.report) as f:
            doc = json.load(f)
        return report(doc["rows"], doc["go_tool_pprof"], doc["meta"])
    if 3600 % a.interval or a.days < 1:
        ap.error("--interval must divide an hour and --days be at least 1")
    sizes = [int(x) for x in a.services.split(",")]
    tmp = tempfile.mkdtemp(prefix="hearth-fleet-")
    harness.configure(binary=os.path.abspath(a.binary), tmp=tmp)
    print(f"stores, server logs and pprof files under {tmp} (deleted when the run succeeds)", flush=True)
    files_dir = os.path.join(tmp, "pprof-files")
    os.makedirs(files_dir)
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cores": os.cpu_count(),
            "days": a.days, "interval_s": a.interval, "functions": a.functions, "stacks": a.stacks,
            "clients": a.clients, "reps": a.reps, "slow_s": a.slow, "seed": a.seed, "profiles_per_service": a.days * 86400 // a.interval,
            "scaled_down": a.days != 7 or a.interval != 300, "build_flags": BUILD_FLAGS, "note": a.note}
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    clients = Clients(a)
    rows, pprof, totals = [], None, set()
    try:
        for i, nsvc in enumerate(sizes):
            r, total = bench_store(nsvc, a, clients, files_dir if i == 0 else None)
            rows += r
            totals.add(total)
            with open(a.out + ".partial", "w") as f:  # a later store's failure keeps these rows
                json.dump({"meta": meta, "rows": rows}, f, indent=1)
            if pprof is None:
                pprof = bench_pprof(files_dir, total)
    finally:
        clients.close()
    assert len(totals) == 1, f"the query service differs between stores: {totals}"
    add_ratios(rows, pprof)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump({"meta": meta, "go_tool_pprof": pprof, "rows": rows}, f, indent=1)
    report(rows, pprof, meta)
    print(f"\nJSON: {os.path.relpath(a.out)}")
    if a.keep:
        print(f"stores kept under {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
