#!/usr/bin/env python3
"""Hearth benchmarks (make bench). Prints a Markdown table of measured figures.

1. Ingest throughput: 8 keep-alive clients POST real gzipped Go CPU profiles back to back.
2. Disk per profile: 1,000 profiles of one service, flushed to blocks, vs their gzipped size;
   and the time to cut a head of 3,000 profiles over 20 services, against the last build of
   block format version 1 cutting the same head (--reference-v1; `make build/hearth-v1`).
3. Merge latency: 1 h and 24 h of one service's 10 s CPU profiles into a flame graph, against
   `go tool pprof -proto` merging the same files (the baseline ratio).
4. Group-by: group_by=pod over 15,000 series (one folded profile each), against the same query
   without the group-by (one merge of the whole selection: the reference, same run).
5. Load: 200 agents push once a second for 120 s while a client runs merges and the head is
   cut every 20 s; 2,000 agents once every 10 s; 10,000 idle keep-alive connections' memory
   (--only-load runs just these; --skip-load leaves them out).
Uploads come from tests/bench/loadgen (Go, `make build/loadgen`), so the tail measured is the
server's, not a Python client's.
The fleet benchmark (one service's 7-day query on 1, 20 and 200-service stores,
hourly blocks and compacted) is tests/bench/fleet.py, run by `make bench-fleet`; it takes long
enough at 200 services to have its own target.
Not a test: nothing here asserts a target.
"""
import argparse
import json
import gzip
import random
import resource
import http.client
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import harness  # noqa: E402  (reuses the integration suite's server control)
from protowire import pb_encode_field, pb_fields, pb_put_varint, pb_uvarint  # noqa: E402

CPU = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
LOADGEN = os.path.abspath("build/loadgen")  # make build/loadgen
DECODE_FLOOR = os.path.abspath("build/decode_floor")  # make build/decode_floor
BASE = 1700000000


def cpu_files(testdata):
    return [os.path.abspath(os.path.join(testdata, "pprof", f"go-runtime-cpu-0{i}.pb.gz")) for i in range(6)]


# ---- varying real profiles: so no two uploads are byte-identical (as in production)

def vary(gz_profile, rng):
    """Rescales each sample by a random whole factor (0 drops it); symbols stay real."""
    raw = gzip.decompress(gz_profile)
    out = bytearray()
    for f, wt, v in pb_fields(raw):
        if f != 2:
            out += pb_encode_field(f, wt, v)
            continue
        k = rng.choice((0, 1, 1, 2, 3))
        if k == 0:
            continue
        sample = bytearray()
        for sf, swt, sv in pb_fields(v):
            if sf == 2 and swt == 2:
                vals, j = [], 0
                while j < len(sv):
                    x, j = pb_uvarint(sv, j)
                    vals.append(x)
                sv = b"".join(pb_put_varint(x * k) for x in vals)
            elif sf == 2:
                sv = sv * k
            sample += pb_encode_field(sf, swt, sv)
        out += pb_encode_field(2, 2, bytes(sample))
    return gzip.compress(bytes(out))


def varied_bodies(files, n, seed=1):
    rng = random.Random(seed)
    base = [open(f, "rb").read() for f in files]
    return [vary(base[i % len(base)], rng) for i in range(n)]


def push_many(port, bodies, n, clients, name, start, step):
    """POSTs n profiles over `clients` keep-alive connections; returns seconds taken."""
    counter = iter(range(n))
    lock = threading.Lock()
    errors = []

    def worker():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                break
            q = urllib.parse.urlencode({"name": name, "format": "pprof", "from": start + i * step,
                                        "until": start + i * step + step})
            conn.request("POST", "/ingest?" + q, body=bodies[i % len(bodies)],
                         headers={"Content-Type": "application/octet-stream"})
            r = conn.getresponse()
            r.read()
            if r.status != 200:
                errors.append(r.status)
        conn.close()

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    t = time.time()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        raise RuntimeError(f"{len(errors)} ingest errors, e.g. {errors[:3]}")
    return time.time() - t


def dir_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def write_bodies(bodies, tmp, tag):
    """Writes the bodies into a fresh folder for the load generator; returns the folder."""
    d = tempfile.mkdtemp(prefix=f"bodies-{tag}-", dir=tmp)
    for i, b in enumerate(bodies):
        with open(os.path.join(d, "%04d.pb.gz" % i), "wb") as f:
            f.write(b)
    return d


def loadgen(port, bodies_dir, **flags):
    """Runs the Go load generator (tests/bench/loadgen) against the server; its JSON report."""
    args = [LOADGEN, "-addr", f"127.0.0.1:{port}", "-bodies", bodies_dir]
    for k, v in flags.items():
        args += ["-" + k, str(v)]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def decode_floor(bodies_dir, rounds=5):
    """CPU milliseconds to gunzip and decode (protobuf-c) one of the files, averaged: what an
    upload costs before Hearth does anything with it (build/decode_floor)."""
    files = sorted(os.path.join(bodies_dir, f) for f in os.listdir(bodies_dir))
    out = subprocess.run([DECODE_FLOOR, str(rounds)] + files, check=True, capture_output=True, text=True).stdout
    return float(out)


def cpu_seconds(pid):
    """utime + stime of a process, from /proc."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench_ingest(files, rows):
    bodies = varied_bodies(files, 300)
    avg = sum(map(len, bodies)) / len(bodies)
    d = write_bodies(bodies, harness.ARGS.tmp, "ingest")
    floor = decode_floor(d)
    for fsync in ("always", "none"):
        srv = harness.Server(extra=["--wal-fsync", fsync]).start()
        cpu0 = cpu_seconds(srv.proc.pid)
        r = loadgen(srv.port, d, agents=8, interval="0", count=3000, name="bench-ingest")
        cpu = (cpu_seconds(srv.proc.pid) - cpu0) * 1000 / max(1, r["uploads"])
        srv.stop()
        if r["errors"]:
            raise RuntimeError(f"ingest errors: {r['errors']}")
        rows.append((f"ingest, 8 clients, --wal-fsync={fsync}",
                     f"{r['per_second']:,.0f} profiles/s, {r['per_second'] * avg / 1e6:.1f} MB/s of gzipped pprof "
                     f"({r['uploads']} uploads of {avg / 1024:.1f} KiB); server CPU {cpu:.2f} ms per upload, "
                     f"{cpu / floor:.1f}x the gunzip + protobuf-c decode floor of the same files ({floor:.2f} ms); "
                     f"client CPU {r['client_cpu_seconds']:.1f} s in {r['seconds']:.1f} s"))


def bench_disk(files, rows):
    n = 1000
    bodies = varied_bodies(files, n)
    srv = harness.Server(extra=["--wal-fsync", "none"]).start()
    push_many(srv.port, bodies, n, 4, "bench-disk", BASE, 10)
    srv.request("POST", "/api/v1/admin/flush")
    blocks = dir_bytes(os.path.join(srv.data_dir, "blocks"))
    index = os.path.getsize(os.path.join(srv.data_dir, "index.db"))
    srv.stop()
    gz = sum(len(b) for b in bodies)
    rows.append(("disk, 1,000 distinct CPU profiles of one service",
                 f"{blocks / n:,.0f} B/profile in blocks (+ {index / 1024:.0f} KiB index.db) vs {gz / n:,.0f} B "
                 f"gzipped pprof: {100 * blocks / gz:.1f}% of the input"))


def cut_once(binary, bodies, services, per):
    """Pushes services x per profiles into a fresh server run from binary, then cuts its head
    (POST /api/v1/admin/flush); the cut's wall time in ms."""
    saved, harness.ARGS.binary = harness.ARGS.binary, binary
    try:
        srv = harness.Server(extra=["--wal-fsync", "none", "--compact-min-blocks", "0"]).start()
    finally:
        harness.ARGS.binary = saved
    for k in range(services):
        push_many(srv.port, bodies[k * per:(k + 1) * per], per, 4, f"cut-svc{k}", BASE, 10)
    t = time.time()
    st = srv.request("POST", "/api/v1/admin/flush")[0]
    took = (time.time() - t) * 1000
    srv.stop()
    if st != 200:
        raise RuntimeError(f"flush answered {st}")
    return took


def bench_cut(files, rows, reference, services=20, per=150, rounds=3):
    """The same head (services x per distinct profiles) cut by this build and by the last build
    of block format version 1 (reference), alternately, best of rounds each."""
    bodies = varied_bodies(files, services * per, seed=5)
    mine, ref = [], []
    for _ in range(rounds):
        mine.append(cut_once(harness.ARGS.binary, bodies, services, per))
        if reference:
            ref.append(cut_once(reference, bodies, services, per))
    text = f"{min(mine):.0f} ms (best of {rounds}; {', '.join(f'{x:.0f}' for x in mine)})"
    if ref:
        text += (f"; block format version 1's last build (`make build/hearth-v1`) {min(ref):.0f} ms "
                 f"({', '.join(f'{x:.0f}' for x in ref)}): {min(mine) / min(ref):.2f}x")
    rows.append((f"cut of a head of {services * per:,} distinct CPU profiles over {services} services", text))


def time_query(srv, frm, until, reps=5):
    out = []
    for _ in range(reps):
        t = time.time()
        st, body = srv.get("/api/v1/query", query=CPU + '{service_name="bench-merge"}', format="flamegraph",
                           **{"from": frm, "until": until})
        out.append(time.time() - t)
        assert st == 200, body[:200]
    time_query.last = json.loads(body)["metadata"]["profiles"]
    return out


def bench_merge(files, rows, tmp):
    n24 = 8640  # 24 h of 10 s profiles
    bodies = varied_bodies(files, 600, seed=2)
    srv = harness.Server(extra=["--wal-fsync", "none"]).start()
    push_many(srv.port, bodies, n24, 4, "bench-merge", BASE, 10)
    srv.request("POST", "/api/v1/admin/flush")
    srv.stop()
    data_dir = srv.data_dir
    links = os.path.join(tmp, "links")
    os.makedirs(links, exist_ok=True)
    for i, b in enumerate(bodies):
        open(os.path.join(links, f"v{i}.pb.gz"), "wb").write(b)
    for i in range(n24):
        os.symlink(os.path.join(links, f"v{i % len(bodies)}.pb.gz"), os.path.join(links, f"{i}.pb.gz"))
    for label, n in (("1 h", 360), ("24 h", n24)):
        until = BASE + 10 * (n - 1)
        srv = harness.Server(data_dir).start()  # cold: the first query reads and decodes the block
        cold = time_query(srv, BASE, until, reps=1)[0]
        warm = statistics.median(time_query(srv, BASE, until))
        srv.stop()
        paths = [os.path.join(links, f"{i}.pb.gz") for i in range(n)]
        t = time.time()
        with open(os.devnull, "wb") as null:
            subprocess.run(["go", "tool", "pprof", "-proto"] + paths, stdout=null, stderr=subprocess.DEVNULL,
                           check=True)
        base = time.time() - t
        rows.append((f"merge {label} ({n} profiles) to a flame graph",
                     f"{warm * 1000:.1f} ms warm, {cold * 1000:.1f} ms cold (block read + decode); go tool pprof -proto "
                     f"{base:.2f} s: {base / warm:,.0f}x faster (warm); {time_query.last} profile rows merged"))


def bench_compaction(files, rows):
    """A day of 10 s CPU profiles cut into hourly blocks (24 flushes), then compacted: blocks,
    bytes and the 24 h merge before and after, and how long compaction took."""
    n, hour = 8640, 360
    bodies = varied_bodies(files, 600, seed=4)
    srv = harness.Server(extra=["--wal-fsync", "none", "--compact-min-blocks", "0"]).start()
    for h in range(n // hour):
        push_many(srv.port, bodies[h * hour % len(bodies):] + bodies, hour, 4, "bench-merge", BASE + 10 * hour * h, 10)
        srv.request("POST", "/api/v1/admin/flush")
    srv.stop()
    until = BASE + 10 * (n - 1)

    def state(srv):
        blocks = [f for d, _, fs in os.walk(os.path.join(srv.data_dir, "blocks")) for f in fs]
        cold = time_query(srv, BASE, until, reps=1)[0]
        return len(blocks), dir_bytes(os.path.join(srv.data_dir, "blocks")), cold, statistics.median(time_query(srv, BASE, until))

    srv = harness.Server(srv.data_dir, extra=["--compact-min-blocks", "0"]).start()
    before = state(srv)
    srv.stop()
    srv = harness.Server(srv.data_dir, extra=["--compact-min-blocks", "4"]).start()
    t = time.time()
    st, body, _ = srv.request("POST", "/api/v1/admin/compact", b"")
    took = time.time() - t
    assert st == 200, body
    srv.stop()
    srv = harness.Server(srv.data_dir).start()  # restarted: the first query reads the compacted blocks cold
    after = state(srv)
    srv.stop()
    rows.append((f"compaction of a day ({n} profiles) cut hourly",
                 f"{before[0]} blocks, {before[1] / 1024:,.0f} KiB -> {after[0]} blocks, {after[1] / 1024:,.0f} KiB in "
                 f"{took * 1000:.0f} ms; 24 h merge cold {before[2] * 1000:.0f} -> {after[2] * 1000:.0f} ms, warm "
                 f"{before[3] * 1000:.1f} -> {after[3] * 1000:.1f} ms"))


def bench_group_by(rows, series=15000):
    srv = harness.Server(extra=["--wal-fsync", "none"]).start()
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    for i in range(series):
        q = urllib.parse.urlencode({"name": "bench-gb.cpu{pod=p%d}" % i, "format": "folded", "from": BASE + i % 3000})
        conn.request("POST", "/ingest?" + q, body=("main;work%d %d\n" % (i % 7, i + 1)).encode())
        r = conn.getresponse()
        r.read()
        assert r.status == 200, r.status
    conn.close()
    srv.request("POST", "/api/v1/admin/flush")
    span = {"query": CPU + '{service_name="bench-gb"}', "step": "3600s", "from": BASE - 10, "until": BASE + 3600}

    def timed(**extra):
        out = []
        for _ in range(5):
            t = time.time()
            st, body = srv.get("/api/v1/timeseries", **span, **extra)
            out.append(time.time() - t)
            assert st == 200, body[:200]
        return statistics.median(out)
    grouped, whole = timed(group_by="pod"), timed()
    srv.stop()
    rows.append((f"group_by=pod over {series:,} series (1 h steps), top 10 kept",
                 f"{grouped * 1000:.0f} ms warm; the same query without group_by {whole * 1000:.0f} ms: "
                 f"{grouped / whole:.1f}x one merge of the selection"))


def proc_status(pid, key):
    """One number of /proc/PID/status (kB figures stay in kB); 0 when absent."""
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def peak_rss_mib(pid):
    return proc_status(pid, "VmHWM") / 1024


def rss_mib(pid):
    return proc_status(pid, "VmRSS") / 1024


def bench_load(files, rows, agents=200, seconds=120, interval="1s", block_duration="20s"):
    """Agents push real profiles, each on its own keep-alive connection at a steady rate, while
    a client runs merges and the head is cut every block_duration; default limits except the
    per-address cap (every client is 127.0.0.1, as agents behind a proxy are). Reports the
    client's latencies and errors, the server's CPU per upload, its per-stage figures and
    peak RSS, and the client's own CPU (to show it kept up)."""
    bodies = varied_bodies(files, 400, seed=3)
    d = write_bodies(bodies, harness.ARGS.tmp, "load")
    srv = harness.Server(extra=["--wal-fsync", "always", "--max-connections-per-ip", "0",
                                "--block-duration", block_duration]).start()
    cpu0 = cpu_seconds(srv.proc.pid)
    r = loadgen(srv.port, d, agents=agents, interval=interval, duration=f"{seconds}s", name="load",
                query=CPU + '{service_name="load"}')
    cpu = cpu_seconds(srv.proc.pid) - cpu0
    rss = peak_rss_mib(srv.proc.pid)
    metrics = srv.get("/metrics")[1].decode()
    stages, cuts = server_stages(metrics), metric_value(metrics, "hearth_head_cuts_total")
    srv.stop()
    errors = ", ".join(f"{k}: {v}" for k, v in sorted(r["errors"].items())) or "none"
    rows.append((f"load: {agents} agents x 1 upload / {interval}, {seconds} s, a cut every {block_duration}, "
                 "1 querying client, --wal-fsync=always",
                 f"{r['per_second']:,.0f} ingests/s; ingest p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms, "
                 f"p999 {r['p999_ms']:.1f} ms, max {r['max_ms']:.1f} ms; errors {errors}; "
                 f"{r['queries']} merges, p50 {r['query_p50_ms']:.1f} ms, p99 {r['query_p99_ms']:.1f} ms; "
                 f"server CPU {cpu:.1f} s (uploads and merges); "
                 f"{cuts:.0f} cuts; peak RSS {rss:.0f} MiB; client CPU {r['client_cpu_seconds']:.1f} s, "
                 f"{r['late']} uploads sent late; inside the server, p99 at most: {stages}"))


def bench_idle(rows, n=10000):
    """n keep-alive connections that have each made one request and stay open: the server's
    RSS before and after (connections live on the event loop, not a thread each)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n + 200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 200), hard))
    srv = harness.Server(extra=["--max-connections-per-ip", "0", "--max-connections", str(n + 100)]).start()
    srv.get("/healthz")
    rss0 = rss_mib(srv.proc.pid)
    conns = []
    try:
        for _ in range(n):
            c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
            c.request("GET", "/healthz")
            c.getresponse().read()
            conns.append(c)
        rss1 = rss_mib(srv.proc.pid)
        threads = proc_status(srv.proc.pid, "Threads")
        st, _ = srv.get("/healthz")
    finally:
        for c in conns:
            c.close()
        srv.stop()
    rows.append((f"{n:,} idle keep-alive connections (one request each, then open)",
                 f"server RSS {rss0:.0f} -> {rss1:.0f} MiB (+{rss1 - rss0:.0f} MiB, "
                 f"{(rss1 - rss0) * 1024 / n:.1f} KiB per connection); {threads} threads; a new request answered {st}"))


def metric_value(text, name):
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return float("nan")


def server_stages(text):
    """The server's own view of the load run's uploads, from hearth_ingest_stage_seconds: per
    stage, the histogram bucket its 99th percentile falls in (an upper bound) and the mean, so
    the client's tail can be told from the server's."""
    buckets, sums, counts = {}, {}, {}
    for line in text.splitlines():
        if not line.startswith("hearth_ingest_stage_seconds"):
            continue
        name, value = line.rsplit(" ", 1)
        stage = name.split('stage="', 1)[1].split('"', 1)[0]
        if "_bucket{" in name:
            le = name.split('le="', 1)[1].split('"', 1)[0]
            buckets.setdefault(stage, []).append((float("inf") if le == "+Inf" else float(le), float(value)))
        elif name.startswith("hearth_ingest_stage_seconds_sum"):
            sums[stage] = float(value)
        elif name.startswith("hearth_ingest_stage_seconds_count"):
            counts[stage] = float(value)
    out = []
    for stage, bs in buckets.items():
        n = counts.get(stage, 0)
        if not n:
            continue
        p99 = next(le for le, c in sorted(bs) if c >= 0.99 * n)
        out.append(f"{stage} {p99 * 1000:g} ms (mean {sums[stage] / n * 1000:.2f} ms)")
    return ", ".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="./hearth")
    ap.add_argument("--testdata", default="../shared/testdata")
    ap.add_argument("--skip-load", action="store_true")
    ap.add_argument("--only-load", action="store_true")
    ap.add_argument("--reference-v1", default="", help="a build of block format version 1, for the cut row")
    a = ap.parse_args()
    harness.configure(binary=os.path.abspath(a.binary), testdata=a.testdata,
                      tmp=tempfile.mkdtemp(prefix="hearth-bench-"))
    files = cpu_files(a.testdata)
    rows = []
    if not a.only_load:
        bench_ingest(files, rows)
        bench_disk(files, rows)
        bench_cut(files, rows, os.path.abspath(a.reference_v1) if a.reference_v1 else None)
        bench_merge(files, rows, harness.ARGS.tmp)
        bench_compaction(files, rows)
        bench_group_by(rows)
    if not a.skip_load:
        bench_load(files, rows)
        bench_load(files, rows, agents=2000, seconds=60, interval="10s")
        bench_idle(rows)
    print(f"\nMeasured on {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}:\n")
    print("| benchmark | result |\n|---|---|")
    for k, v in rows:
        print(f"| {k} | {v} |")


if __name__ == "__main__":
    main()
