#!/usr/bin/env python3
"""Cluster benchmark: Hearth's cluster mode (--catalog PostgreSQL, --object-store S3) on real
servers, a throwaway PostgreSQL (tests/integration/pgserver.py) and a Ceph RADOS Gateway
(tests/integration/s3server.py), against a single node (no catalog, no object store).

Four measurements, each on its own catalog database and object prefix:

1. Ingest scaling. Every ingest node is capped with --ingest-rate-limit (--rate-limit, 256KiB
   per tenant per node), so the cap and not the machine's cores is the limit, and flushes every
   200 ms. --clients threads (24), each on its own keep-alive connection, push real-size
   synthetic uploads (fleet.py's make_profile for --ingest-services services, ~43 KB each) as
   fast as they are answered; a 429 backs the client off for --backoff-ms (50). Phase 1: every
   client to ONE node; phase 2: the same clients spread over THREE nodes. Each phase runs
   --warmup s (2; the limiter's 2 s burst drains here) and then --phase-seconds (10) measured:
   only answers that arrive in the measured window count. Reported: accepted (200) uploads/s and
   bytes/s, 429s, any other status, and phase 2 / phase 1.
2. Ack latency. One client pushes --latency-pushes (20) uploads one after another to a node with
   the default --flush-interval (1s) and to one with 200ms: p50/p95. An upload is answered only
   once its batch was written to the object store and registered in the catalog, so the latency
   is the flush interval (the wait for the batch to close) plus the store write.
3. A week's query. One service (svc-000 of fleet.py's Service, --seed) uploads one profile every
   300 s for --days (7) days (2,016 uploads) and --other-services (9) others one every
   --other-every (12) slots (hourly: 1,512 uploads), pushed round-robin to three cluster nodes by
   --week-clients threads (16; each push waits for its flush) and, separately, all to a single
   reference node, a day at a time with POST /api/v1/admin/flush after each day (its head cut as
   a node running through the week cuts it), then POST /api/v1/admin/compact. The cluster is
   compacted twice, each time with POST /api/v1/admin/compact repeated until the catalog's block
   count stops falling: first on an ingest node (up while the blocks were cut), then on a
   `--target compact` node started after the uploads; the query figures are taken after each.
   Then /api/v1/query?format=flamegraph for CPU{service_name="svc-000"} over
   the whole range on a `--target query` node and on the single node: warm (median of --reps
   after one warm-up) and cold (the first query after a restart; for the query node its
   --cache-dir is deleted first; the OS page cache stays warm for both). Both answers' totals are
   asserted equal to the sum of the generated profiles' totals. The cold query's bytes fetched
   from the object store (delta of hearth_object_fetched_bytes_total) are reported next to the
   catalog's block bytes (SELECT sum(bytes) FROM hearth_blocks) and the queried service's share
   of the uploaded bytes: a reader of only the selected partitions fetches about that share.
   Last, every service's week as one flame graph, asked of a node alone and split three ways
   (bench_split: partitions decoded and CPU per node).
4. The same split over the week's blocks as cut, with compaction off (bench_split_as_cut): a
   thousand partitions, where the compacted week has one per service.

Output: a Markdown table and tests/out/bench/cluster.json. Every server (hearth nodes, postgres,
radosgw and its monitor and OSD) is started by this script and stopped by PID. Server logs stay
under the printed folder when a run fails (and with --keep). Nothing asserts a latency or a rate:
the script prints what it measured.
"""
import argparse
import http.client
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, HERE)
import fleet  # noqa: E402  (the synthetic services and profiles)
import harness  # noqa: E402  (server control)
from pgserver import PostgresServer  # noqa: E402
from s3server import RadosGateway  # noqa: E402

OUT = os.path.join(HERE, "..", "out", "bench", "cluster.json")
BUCKET = "hearth-bench"


# ---------------------------------------------------------------- servers

class Cluster:
    """Hearth nodes sharing one catalog database and one object prefix. Every node started here
    is remembered in NODES so the run stops it whatever fails."""

    def __init__(self, tmp, pg, gw, name):
        self.tmp, self.name = tmp, name
        self.catalog = pg.create_database(name)
        self.store = gw.url(BUCKET, name)
        self.pg = pg

    def node(self, node, *flags):
        data = os.path.join(self.tmp, f"{self.name}-{node}")
        extra = ["--catalog", self.catalog, "--object-store", self.store, "--cache-dir",
                 os.path.join(data, "cache"), "--node-name", f"{self.name}-{node}"] + list(flags)
        return start(harness.Server(data, extra=extra))

    def blocks(self):
        """(blocks, bytes) in the catalog."""
        n, b = self.pg.psql("SELECT count(*), coalesce(sum(bytes), 0) FROM hearth_blocks", db=self.name)[0]
        return int(n), int(b)


NODES = []


def start(srv):
    NODES.append(srv)
    return srv.start()


def stop(srv):
    if srv in NODES:
        NODES.remove(srv)
    srv.stop()


def stop_all():
    errors = []
    for srv in list(NODES):
        try:
            stop(srv)
        except Exception as e:  # noqa: BLE001  (every node is stopped; errors are raised after)
            errors.append(f"{srv.data_dir}: {e}")
    return errors


def post(srv, path):
    st, body, _ = srv.request("POST", path, b"")
    assert st == 200, f"POST {path} on {srv.data_dir} -> {st} {body[:300]!r} (log {srv.data_dir}/server.log)"
    return json.loads(body) if body.strip() else None


# ---------------------------------------------------------------- uploads

class Conn:
    """One keep-alive connection to one node; a dropped connection is reopened once."""

    def __init__(self, port):
        self.port, self.c = port, None

    def push(self, body, name, t, until):
        q = urllib.parse.urlencode({"name": name, "format": "pprof", "from": t, "until": until})
        for attempt in range(2):
            try:
                if self.c is None:
                    self.c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
                self.c.request("POST", "/ingest?" + q, body=body, headers={"Content-Type": "application/octet-stream"})
                r = self.c.getresponse()
                r.read()
                return r.status
            except (OSError, http.client.HTTPException):
                self.c = None
                if attempt:
                    raise


def ingest_pool(a):
    """Uploads for the ingest phases: (service name, from, body), --ingest-services services of
    fleet.py's shape, 16 profiles each."""
    pool = []
    for s in range(a.ingest_services):
        svc = fleet.Service(a.seed, 100 + s, a.functions, a.stacks)
        for i in range(16):
            t = fleet.BASE + i * 300
            pool.append((fleet.service_name(100 + s), t, fleet.make_profile(svc, a.seed, i, t, 300)[0]))
    return pool


def ingest_phase(a, ports, pool):
    """--clients threads, thread k pushing to ports[k % len(ports)] until the phase ends.
    Counts only answers that arrive inside the measured window."""
    t0 = time.time()
    lo, hi = t0 + a.warmup, t0 + a.warmup + a.phase_seconds
    stats = [{"ok": 0, "bytes": 0, "429": 0, "other": {}} for _ in range(a.clients)]
    failures = []

    def client(k):
        conn, st, i = Conn(ports[k % len(ports)]), stats[k], k
        try:
            while time.time() < hi:
                name, t, body = pool[i % len(pool)]
                i += a.clients
                status = conn.push(body, name, t, t + 300)
                now = time.time()
                if lo <= now <= hi:
                    if status == 200:
                        st["ok"] += 1
                        st["bytes"] += len(body)
                    elif status == 429:
                        st["429"] += 1
                    else:
                        st["other"][status] = st["other"].get(status, 0) + 1
                if status == 429:
                    time.sleep(a.backoff_ms / 1000)
        except Exception as e:  # noqa: BLE001  (reported by the phase)
            failures.append(f"client {k}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=client, args=(k,)) for k in range(a.clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if failures:
        raise RuntimeError("; ".join(failures[:5]))
    other = {}
    for st in stats:
        for k, v in st["other"].items():
            other[str(k)] = other.get(str(k), 0) + v
    ok = sum(s["ok"] for s in stats)
    nbytes = sum(s["bytes"] for s in stats)
    return {"nodes": len(ports), "uploads_per_s": ok / a.phase_seconds, "bytes_per_s": nbytes / a.phase_seconds,
            "accepted": ok, "rejected_429": sum(s["429"] for s in stats), "other_status": other}


def bench_ingest(a, tmp, pg, gw, pool):
    c = Cluster(tmp, pg, gw, "ingest")
    flags = ["--ingest-rate-limit", a.rate_limit, "--flush-interval", "200ms", "--compact-min-blocks", "0"]
    nodes = [c.node(f"n{i}", *flags) for i in range(3)]
    try:
        print(f"ingest: {a.clients} clients -> 1 node ...", flush=True)
        one = ingest_phase(a, [nodes[0].port], pool)
        print(f"ingest: {a.clients} clients -> 3 nodes ...", flush=True)
        three = ingest_phase(a, [n.port for n in nodes], pool)
    finally:
        for n in nodes:
            stop(n)
    out = {"one_node": one, "three_nodes": three, "rate_limit": a.rate_limit,
           "ratio_uploads": three["uploads_per_s"] / one["uploads_per_s"] if one["uploads_per_s"] else None,
           "ratio_bytes": three["bytes_per_s"] / one["bytes_per_s"] if one["bytes_per_s"] else None}
    for ph in (one, three):
        if ph["other_status"]:
            print(f"  WARNING: statuses other than 200/429 in the {ph['nodes']}-node phase: {ph['other_status']}; "
                  f"logs under {tmp}/ingest-n*/server.log", flush=True)
    return out


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(p / 100 * len(xs) + 0.5) - 1))]  # nearest rank


def bench_latency(a, tmp, pg, gw, pool):
    c = Cluster(tmp, pg, gw, "latency")
    out = {}
    for label, flags in (("1s (default)", []), ("200ms", ["--flush-interval", "200ms"])):
        srv = c.node("f" + label.split()[0], "--compact-min-blocks", "0", *flags)
        try:
            conn, times = Conn(srv.port), []
            for i in range(a.latency_pushes):
                name, t, body = pool[i % len(pool)]
                t0 = time.time()
                st = conn.push(body, name, t + 10**6, t + 10**6 + 300)  # a range no other push used
                times.append(time.time() - t0)
                assert st == 200, f"latency push {i} -> {st} (log {srv.data_dir}/server.log)"
        finally:
            stop(srv)
        out[label] = {"pushes": len(times), "p50_ms": percentile(times, 50) * 1000,
                      "p95_ms": percentile(times, 95) * 1000, "max_ms": max(times) * 1000}
        print(f"latency {label}: p50 {out[label]['p50_ms']:.0f} ms", flush=True)
    return out


# ---------------------------------------------------------------- the week

def week_uploads(a):
    """The week's uploads, [(service, from, until, body)] in time order, and the sum of the query
    service's totals. Besides the query service (one upload per 300 s), --other-services services
    upload one profile per --other-every slots each, so the blocks hold data the query does not
    select and the cold query's fetched bytes can be told from the block sizes."""
    n = a.days * 86400 // 300
    out, total, everything = [], 0, 0
    svcs = [fleet.Service(a.seed, s, a.functions, a.stacks) for s in range(1 + a.other_services)]
    for idx in range(n):
        t = fleet.BASE + idx * 300
        body, tot = fleet.make_profile(svcs[0], a.seed, idx, t, 300)
        out.append((fleet.service_name(0), t, t + 300, body))
        total += tot
        everything += tot
        if idx % a.other_every == 0:
            span = a.other_every * 300
            for s in svcs[1:]:
                body, tot = fleet.make_profile(s, a.seed, idx, t, span)
                out.append((fleet.service_name(s.idx), t, t + span, body))
                everything += tot
    a.fleet_total = everything  # the fleet-wide query's expected total (bench_split)
    return out, total


def push_all(uploads, ports, threads):
    """Upload i goes to ports[i % len(ports)]; `threads` workers take uploads in order. Returns
    (seconds, {status: count} of non-200 answers)."""
    nxt, lock, bad, failures = [0], threading.Lock(), {}, []

    def worker():
        conns = {p: Conn(p) for p in ports}
        try:
            while True:
                with lock:
                    i = nxt[0]
                    nxt[0] += 1
                if i >= len(uploads):
                    return
                name, t, until, body = uploads[i]
                st = conns[ports[i % len(ports)]].push(body, name, t, until)
                if st != 200:
                    with lock:
                        bad[st] = bad.get(st, 0) + 1
        except Exception as e:  # noqa: BLE001
            failures.append(f"{type(e).__name__}: {e}")

    t0 = time.time()
    ths = [threading.Thread(target=worker) for _ in range(threads)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    if failures:
        raise RuntimeError("; ".join(failures[:5]))
    return time.time() - t0, bad


def flamegraph(srv, a, expect):
    """(ms, total) of the week's flame graph query; asserts the total."""
    sel = fleet.CPU + '{service_name="%s"}' % fleet.service_name(fleet.QUERY_SERVICE)
    t0 = time.time()
    st, body = srv.get("/api/v1/query", query=sel, format="flamegraph", **{"from": fleet.BASE},
                       until=fleet.BASE + a.days * 86400)
    ms = (time.time() - t0) * 1000
    assert st == 200, f"query on {srv.data_dir} -> {st} {body[:300]!r} (log {srv.data_dir}/server.log)"
    got = json.loads(body)["flamebearer"]["numTicks"]
    assert got == expect, f"flame graph total {got} != generated {expect} on {srv.data_dir}"
    return ms


def warm(srv, a, expect):
    flamegraph(srv, a, expect)
    return statistics.median(flamegraph(srv, a, expect) for _ in range(a.reps))


def query_node(c, a, expect, name):
    """Warm and cold figures on a fresh `--target query` node of cluster c."""
    out = {}
    q = c.node(name, "--target", "query")
    try:
        out["warm_ms"] = warm(q, a, expect)
        out["cold_all_ms"] = []
        for _ in range(a.cold_reps):
            stop(q)
            shutil.rmtree(os.path.join(q.data_dir, "cache"), ignore_errors=True)
            start(q)
            f0 = harness.metric(q, "hearth_object_fetched_bytes_total")
            m0 = harness.metric(q, "hearth_object_cache_misses_total")
            out["cold_all_ms"].append(flamegraph(q, a, expect))
            out["cold_fetched_bytes"] = harness.metric(q, "hearth_object_fetched_bytes_total") - f0
            out["cold_cache_misses"] = harness.metric(q, "hearth_object_cache_misses_total") - m0
        out["cold_ms"] = statistics.median(out["cold_all_ms"])
        out["query_node_block_bytes_metric"] = harness.metric(q, "hearth_block_bytes")
    finally:
        stop(q)
    return out


def bench_week(a, tmp, pg, gw):
    uploads, expect = week_uploads(a)
    qname = fleet.service_name(fleet.QUERY_SERVICE)
    qbytes = sum(len(u[3]) for u in uploads if u[0] == qname)
    out = {"uploads": len(uploads), "expected_total": expect,
           "query_byte_share": qbytes / sum(len(u[3]) for u in uploads)}
    c = Cluster(tmp, pg, gw, "week")
    flags = ["--flush-interval", "200ms", "--compact-min-blocks", str(a.compact_min_blocks)]
    nodes = [c.node(f"n{i}", *flags) for i in range(3)]
    print(f"week: {len(uploads):,} uploads -> 3 cluster nodes ...", flush=True)
    secs, bad = push_all(uploads, [n.port for n in nodes], a.week_clients)
    assert not bad, f"cluster uploads answered {bad}; logs under {tmp}/week-n*/server.log"
    out["cluster_push_seconds"] = secs
    out["cluster_blocks_after_push"] = c.blocks()[0]
    # Two regimes, each compacted with POST /api/v1/admin/compact until the catalog's block count
    # stops falling: "by an ingest node" asks week-n0, which was up while the blocks were cut;
    # "by a new compact node" then asks a `--target compact` node started after the uploads. They
    # differ while a node compacts only blocks whose footers it has read (see the report).
    out["regimes"] = []
    compactor = None
    for k, regime in enumerate(("by an ingest node", "by a compact node started after the uploads")):
        if k:
            compactor = c.node("compactor", "--target", "compact")
        by = compactor or nodes[0]
        row = {"regime": regime}
        # Other nodes with the compact role hold some runs meanwhile (a node passes over those),
        # so the count is judged settled once it has not moved for 6 s, i.e. three of their passes.
        t0, runs, still = time.time(), [c.blocks()[0]], time.time()
        while time.time() - still < 6 and time.time() - t0 < 180:
            post(by, "/api/v1/admin/compact")
            runs.append(c.blocks()[0])
            if runs[-1] != runs[-2]:
                still = time.time()
            time.sleep(0.5)
        row["compact_seconds"] = time.time() - t0
        row["compact_calls"] = len(runs) - 1
        row["blocks"], row["block_bytes"] = c.blocks()
        row["compactions"] = harness.metric(by, "hearth_compactions_total")
        print(f"week: compacted {regime}: {row['blocks']} blocks ({row['compactions']:.0f} compactions)", flush=True)
        row.update(query_node(c, a, expect, f"query{k}"))
        out["regimes"].append(row)
    stop(compactor)
    out["split"] = bench_split(c, nodes, flags, a)

    print(f"week: {len(uploads):,} uploads -> single node ...", flush=True)
    single = start(harness.Server(os.path.join(tmp, "single"), extra=["--wal-fsync", "none"]))
    # Cut a day at a time, as a single node running through the week would have cut its head (into
    # hourly blocks that compaction then merges into day blocks): the same layout the cluster has.
    secs, day = 0.0, 86400
    for d in range(a.days):
        lo = fleet.BASE + d * day
        part = [u for u in uploads if lo <= u[1] < lo + day]
        t, bad = push_all(part, [single.port], 4)
        assert not bad, f"single-node uploads answered {bad}; log {single.data_dir}/server.log"
        secs += t
        post(single, "/api/v1/admin/flush")
    out["single_push_seconds"] = secs
    post(single, "/api/v1/admin/compact")
    out["single_blocks"] = harness.metric(single, "hearth_blocks")
    out["single_block_bytes"] = harness.metric(single, "hearth_block_bytes")
    out["single_warm_ms"] = warm(single, a, expect)
    out["single_cold_all_ms"] = []
    for _ in range(a.cold_reps):
        stop(single)
        start(single)
        out["single_cold_all_ms"].append(flamegraph(single, a, expect))
    out["single_cold_ms"] = statistics.median(out["single_cold_all_ms"])
    stop(single)
    for row in out["regimes"]:
        row["warm_ratio"] = row["warm_ms"] / out["single_warm_ms"]
        row["cold_ratio"] = row["cold_ms"] / out["single_cold_ms"]
    return out


def wait_peers(c, nodes):
    """Waits until nodes[0] splits among exactly the other nodes as they are now: the catalog's
    rows name each node's new address (restarted nodes keep their names and take new ports), and
    nodes[0] has re-read its peers since (hearth_query_peer_refreshes_total, every 2 s)."""
    want = {f"{c.name}-n{i}": f"127.0.0.1:{n.port}" for i, n in enumerate(nodes)}
    t0 = time.time()
    while True:
        rows = dict(c.pg.psql("SELECT name, listen FROM hearth_nodes WHERE target IN ('all', 'query')"
                              " AND heartbeat > now() - interval '6 s'",
                              db=c.name))
        if all(rows.get(k) == v for k, v in want.items()) and len(rows) == len(want):
            break
        assert time.time() - t0 < 30, f"catalog rows {rows}, want {want}"
        time.sleep(0.2)
    seen = harness.metric(nodes[0], "hearth_query_peer_refreshes_total")
    while harness.metric(nodes[0], "hearth_query_peer_refreshes_total") <= seen:
        assert time.time() - t0 < 30, "n0 did not re-read its peers"
        time.sleep(0.2)
    peers = harness.metric(nodes[0], "hearth_query_peers")
    assert peers == len(nodes) - 1, f"n0 sees {peers} peers"


def bench_split(c, nodes, flags, a):
    """4. One fleet-wide query split across nodes: every service's CPU over the week as a flame
    graph, asked of node n0 cold (all three nodes restarted on empty cache folders), once
    with --query-split=false (n0 merges every partition) and once split among the three
    (--query-split-min-bytes 0: the week is a few MiB, under the default threshold). Per node:
    partitions decoded (hearth_block_partition_loads_total) and CPU seconds
    (process_cpu_seconds_total, exact to the microsecond) during the query. The nodes are stopped
    after."""
    sel = fleet.CPU + "{}"
    rng = {"from": fleet.BASE, "until": fleet.BASE + a.days * 86400}
    out = {}
    for split in ("false", "true"):
        for n in nodes:
            stop(n)
        # Cold: each node starts on an empty cache folder of its own, a new one rather than the
        # old one deleted: ext4 skips the inodes of files deleted in the last minute when it
        # makes new ones, and a refilled cache makes a file per block (remote/objcache.h).
        nodes[:] = [c.node(f"n{i}", *flags, "--query-split", split, "--query-split-min-bytes", "0", "--cache-dir",
                           os.path.join(n.data_dir, f"cache-cold-{split}")) for i, n in enumerate(nodes)]
        if split == "true":
            wait_peers(c, nodes)
        loads0 = [harness.metric(n, "hearth_block_partition_loads_total") for n in nodes]
        cpu0 = [harness.metric(n, "process_cpu_seconds_total") for n in nodes]
        t0 = time.time()
        st, body = nodes[0].get("/api/v1/query", query=sel, format="flamegraph", **rng)
        ms = (time.time() - t0) * 1000
        assert st == 200, f"fleet query -> {st} {body[:300]!r}"
        got = json.loads(body)["flamebearer"]["numTicks"]
        assert got == a.fleet_total, f"split={split}: fleet total {got} != generated {a.fleet_total}"
        ok = harness.metric(nodes[0], 'hearth_query_split_shares_total{outcome="ok"}')
        assert split == "false" or ok == len(nodes) - 1, f"{ok} peers' shares added, not {len(nodes) - 1}"
        out[split] = {"ms": ms,
                      "parts": [harness.metric(n, "hearth_block_partition_loads_total") - l for n, l in zip(nodes, loads0)],
                      "cpu_s": [harness.metric(n, "process_cpu_seconds_total") - c0 for n, c0 in zip(nodes, cpu0)],
                      "shares_ok": ok}
    for n in nodes:
        stop(n)
    whole = out["false"]
    out["max_parts_ratio"] = max(out["true"]["parts"]) / max(whole["parts"][0], 1)
    out["max_cpu_ratio"] = max(out["true"]["cpu_s"]) / max(whole["cpu_s"][0], 1e-9)
    return out


def bench_split_as_cut(a, tmp, pg, gw):
    """5. The split of part 4 over the week's blocks as the ingest nodes cut them (no compaction:
    hundreds of blocks, a thousand partitions), on a catalog and prefix of its own. Compacted, the
    week is one block with a partition per service, too few to divide evenly; as cut, the
    per-partition work dominates and the split's own costs (planning, adding the peers' shares,
    one rendering) show as what they are."""
    uploads, _ = week_uploads(a)
    c = Cluster(tmp, pg, gw, "split")
    flags = ["--flush-interval", "200ms", "--compact-min-blocks", "0"]
    nodes = [c.node(f"n{i}", *flags) for i in range(3)]
    print(f"split: {len(uploads):,} uploads -> 3 cluster nodes, not compacted ...", flush=True)
    _, bad = push_all(uploads, [n.port for n in nodes], a.week_clients)
    assert not bad, f"cluster uploads answered {bad}; logs under {tmp}/split-n*/server.log"
    out = bench_split(c, nodes, flags, a)
    out["blocks"] = c.blocks()[0]
    return out


# ---------------------------------------------------------------- report

def mib(b):
    return b / 2**20


def report(doc):
    m = doc["meta"]
    print(f"\n## Hearth cluster bench, {m['date']} ({m['cores']} cores; {m['note']})\n")
    if "ingest" in doc:
        report_ingest(m, doc["ingest"])
    if "latency" in doc:
        report_latency(m, doc["latency"])
    if "week" in doc:
        report_week(m, doc["week"])
    if "split_as_cut" in doc:
        report_split(doc["split_as_cut"], f"over the {doc['split_as_cut']['blocks']} blocks as cut (not compacted)")


def report_ingest(m, ing):
    print(f"### Ingest scaling (--ingest-rate-limit {ing['rate_limit']} per node, flush 200ms, "
          f"{m['clients']} clients, {m['phase_seconds']} s measured after {m['warmup']} s)\n")
    print("| nodes | accepted uploads/s | accepted MiB/s | 429s | other statuses |")
    print("|---|---|---|---|---|")
    for ph in (ing["one_node"], ing["three_nodes"]):
        print(f"| {ph['nodes']} | {ph['uploads_per_s']:.1f} | {mib(ph['bytes_per_s']):.2f} | {ph['rejected_429']} | "
              f"{ph['other_status'] or '-'} |")
    r = ing["ratio_uploads"]
    print(f"\nthree nodes / one node: {r:.2f}x uploads/s, {ing['ratio_bytes']:.2f}x bytes/s" if r else
          "\nthree nodes / one node: undefined (no upload accepted on one node)")


def report_latency(m, lat):
    print(f"\n### Ack latency (one client, {m['latency_pushes']} sequential pushes)\n")
    print("| --flush-interval | p50 ms | p95 ms | max ms |")
    print("|---|---|---|---|")
    for k, v in lat.items():
        print(f"| {k} | {v['p50_ms']:.0f} | {v['p95_ms']:.0f} | {v['max_ms']:.0f} |")
    print("\nAn upload is answered once its batch is stored: the latency is the flush interval plus the "
          "write of the block to the object store and its row to the catalog.")


def report_split(sp, what):
    print(f"\n### One fleet-wide query split across three query nodes, {what}\n")
    print("| n0 asked, cold | wall ms | partitions decoded n0 / n1 / n2 | CPU s n0 / n1 / n2 |")
    print("|---|---|---|---|")
    for k, label in (("false", "alone (--query-split=false)"), ("true", "split among the three")):
        r = sp[k]
        print(f"| {label} | {r['ms']:.0f} | {' / '.join(f'{x:.0f}' for x in r['parts'])} | "
              f"{' / '.join(f'{x:.3f}' for x in r['cpu_s'])} |")
    print(f"\nEvery service's CPU over the week as a flame graph (total equal to the generated sum both ways); "
          f"the busiest node of the split decoded {100 * sp['max_parts_ratio']:.0f}% of the partitions and used "
          f"{100 * sp['max_cpu_ratio']:.0f}% of the CPU of the node alone. Wall time on this 2-core machine "
          f"cannot show the split (the three nodes share the cores).")


def report_week(m, wk):
    print(f"\n### {m['days']}-day flame graph of one service ({wk['uploads']:,} uploads)\n")
    print("| store | blocks | block MiB | warm ms (median of %d) | cold ms (median of %d) | warm / single |"
          " cold / single | cold: fetched from S3 MiB (misses) |" % (m["reps"], m.get("cold_reps", 1)))
    print("|---|---|---|---|---|---|---|---|")
    for r in wk["regimes"]:
        print(f"| cluster, compacted {r['regime']} | {r['blocks']} | {mib(r['block_bytes']):.2f} | {r['warm_ms']:.0f} | "
              f"{r['cold_ms']:.0f} | {r['warm_ratio']:.2f}x | {r['cold_ratio']:.2f}x | "
              f"{mib(r['cold_fetched_bytes']):.2f} ({r['cold_cache_misses']:.0f}) |")
    print(f"| single node | {wk['single_blocks']:.0f} | {mib(wk['single_block_bytes']):.2f} | "
          f"{wk['single_warm_ms']:.0f} | {wk['single_cold_ms']:.0f} | | | |")
    print(f"\nCluster queries ran on a --target query node; cold = first query after a restart with its "
          f"--cache-dir deleted (single node: after a restart). Every total equalled the generated "
          f"{wk['expected_total']:,} ns. The store also holds {m.get('other_services', 0)} other services: the "
          f"queried one is {100 * wk.get('query_byte_share', 1):.0f}% of the uploaded bytes, so a read of only "
          f"the selected partitions fetches about that share of the block bytes.")
    for r in wk["regimes"]:
        print(f"- compacted {r['regime']}: cold queries " + ", ".join(f"{x:.0f}" for x in r.get("cold_all_ms", [])) +
              " ms; single node " + ", ".join(f"{x:.0f}" for x in wk.get("single_cold_all_ms", [])) + " ms")
    for r in wk["regimes"]:
        print(f"- compacted {r['regime']}: {r['compact_calls']} POST /api/v1/admin/compact calls, "
              f"{r['compact_seconds']:.1f} s, {r['compactions']:.0f} compactions on that node")
    print(f"Build: cluster uploads {wk['cluster_push_seconds']:.1f} s ({m['week_clients']} clients, "
          f"{wk['cluster_blocks_after_push']} blocks); single node uploads {wk['single_push_seconds']:.1f} s "
          f"(4 clients).")
    if wk.get("split"):
        report_split(wk["split"], f"over the {wk['regimes'][-1]['blocks']} compacted block(s)")
    if wk["regimes"][0]["blocks"] == wk["cluster_blocks_after_push"]:
        print(f"WARNING: POST /api/v1/admin/compact on ingest node week-n0 compacted none of the "
              f"{wk['cluster_blocks_after_push']} blocks.")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", default="./hearth")
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--functions", type=int, default=1200)
    ap.add_argument("--stacks", type=int, default=2500)
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--clients", type=int, default=24, help="ingest-phase client threads")
    ap.add_argument("--ingest-services", type=int, default=3)
    ap.add_argument("--rate-limit", default="256KiB", help="--ingest-rate-limit of each ingest node")
    ap.add_argument("--phase-seconds", type=float, default=10.0)
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--backoff-ms", type=float, default=50.0)
    ap.add_argument("--latency-pushes", type=int, default=20)
    ap.add_argument("--week-clients", type=int, default=16)
    ap.add_argument("--other-services", type=int, default=9, help="services besides the query service in the week")
    ap.add_argument("--other-every", type=int, default=12, help="they upload once per this many 300 s slots")
    ap.add_argument("--compact-min-blocks", type=int, default=4, help="of the week's cluster nodes")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--cold-reps", type=int, default=3, help="cold queries, each after a restart (median)")
    ap.add_argument("--only", default="ingest,latency,week,split", help="the parts to run (comma-separated)")
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--keep", action="store_true", help="keep the servers' folders (printed)")
    ap.add_argument("--note", default="machine shared with other work: timings are noisy")
    ap.add_argument("--report", metavar="JSON", help="only re-print the tables of a saved run")
    a = ap.parse_args()
    if a.report:
        with open(a.report) as f:
            return report(json.load(f))
    tmp = tempfile.mkdtemp(prefix="hearth-cluster-bench-")
    harness.configure(binary=os.path.abspath(a.binary), tmp=tmp)
    print(f"hearth data and logs under {tmp}", flush=True)
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cores": os.cpu_count(), "days": a.days,
            "clients": a.clients, "phase_seconds": a.phase_seconds, "warmup": a.warmup, "backoff_ms": a.backoff_ms,
            "latency_pushes": a.latency_pushes, "week_clients": a.week_clients, "reps": a.reps, "seed": a.seed,
            "cold_reps": a.cold_reps,
            "other_services": a.other_services, "other_every": a.other_every,
            "binary": os.path.abspath(a.binary), "note": a.note}
    pg, gw, ok = PostgresServer(), RadosGateway(), False
    try:
        pg.start()
        gw.start()
        print(f"postgres in {pg.dir}, radosgw in {gw.dir} (started in {gw.startup_s:.0f} s)", flush=True)
        os.environ.update(gw.env())  # the nodes inherit the object store's keys
        gw.create_bucket(BUCKET)
        pool = ingest_pool(a)
        doc = {"meta": meta}
        parts = a.only.split(",")
        if "ingest" in parts:
            doc["ingest"] = bench_ingest(a, tmp, pg, gw, pool)
        if "latency" in parts:
            doc["latency"] = bench_latency(a, tmp, pg, gw, pool)
        if "week" in parts:
            doc["week"] = bench_week(a, tmp, pg, gw)
        if "split" in parts:
            doc["split_as_cut"] = bench_split_as_cut(a, tmp, pg, gw)
        ok = True
    finally:
        errors = stop_all()
        gw.stop(keep_logs=not ok or a.keep)
        pg.stop(keep=not ok or a.keep)
        if errors:
            print("nodes that did not stop cleanly: " + "; ".join(errors), flush=True)
        if not ok:
            print(f"FAILED: logs kept: hearth {tmp}, postgres {pg.dir}, radosgw {gw.dir}", flush=True)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
    report(doc)
    print(f"\nJSON: {os.path.relpath(a.out)}")
    if a.keep:
        print(f"kept: hearth {tmp}, postgres {pg.dir}, radosgw {gw.dir}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    if errors:
        sys.exit(1)


if __name__ == "__main__":
    main()
