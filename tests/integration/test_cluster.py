"""Cluster mode: stateless nodes over a PostgreSQL catalog and an S3 object store.

The area shares one real PostgreSQL (pgserver.shared()) and one real S3 server (Ceph's radosgw,
s3server.shared()); each test takes its own database and its own bucket, starts its nodes, and
compares their answers byte for byte with those of a plain single node given the same uploads
(restarted first, so it too answers from a block), merged pprof included (see PPROF_BYTES). The
whole area takes about 1.5 minutes.

INTERFACE ASSUMED (written while the C side was being built; docs/cluster.md describes the design):
  - A node: hearth --listen 127.0.0.1:P --data-dir D --catalog postgres://USER@127.0.0.1:PORT/DB
        --object-store 's3://BUCKET/PREFIX?endpoint=http://127.0.0.1:PORT&region=us-east-1'
        --cache-dir D/cache --flush-interval 200ms [--target all|ingest|query|compact]
        [--node-name NAME] [--compact-min-blocks N --compact-max-bytes SIZE]
    with the S3 keys in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY. Every role serves /ready
    (200 once it serves) and /metrics; `--target compact` only compacts.
  - A push answers 200 only once its upload is in a segment block in the object store and that
    block is registered in PostgreSQL. With PostgreSQL or the object store unreachable, a push
    answers 503 with a JSON body {"error": "..."} (after retrying until --ack-timeout, set to 5s
    here; within OUTAGE_S), and so does a query that needs them; once the service is back, pushes succeed again (a pushed upload that
    got a 503 may or may not be stored: at-least-once) and every acknowledged upload is there.
  - Every node answers every query from the catalog and the object store, with the same bytes as
    a single node (`hearth --data-dir X`) given the same uploads in the same order.
  - A compact node compacts every due run it finds in the catalog, including blocks registered
    after it started (its 2 s passes: the test waits for 6 s without change).
  - A route outside a node's roles answers 404 with a JSON {"error": ...} that mentions the role.
  - Metrics: hearth_compactions_total (compaction runs done), hearth_blocks (blocks known), both
    unlabelled lines.
  - Tables: hearth_blocks(id, tenant, key, profiles, ...) with one row per live block, key relative
    to the object-store prefix (or ending in it); hearth_trash(key, delete_after) for replaced
    objects waiting for deletion. Nothing else of the schema is relied on.
"""
import concurrent.futures
import contextlib
import gzip
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.parse

import azserver
import pgserver
import s3server
from faultproxy import FaultProxy
from protowire import pb_decode, pb_packed
from harness import (ARGS, CONNECT, CPU, T0, TESTS, Server, area_of, cpu_files, metric, node_agent_dir, test, types_of,
                     wait_until)

FLUSH = "200ms"
ACK_TIMEOUT = "5s"  # --ack-timeout of the outage tests' nodes: a batch not stored by then gets 503
OUTAGE_S = 25  # a push or query during an outage is answered (503) within this many seconds
RECOVER_S = 30  # and pushes succeed again within this many seconds of the service's return
# Merged pprof answers are compared byte for byte, like every other answer: the merged pprof is
# canonical (query/pprof_out.c), so its bytes do not depend on the blocks its profiles came from.
# False would compare them by what they decode to (sample types, period, dates, and the summed
# values of every stack of (function, file, line) with its labels); a failure reports both.
PPROF_BYTES = True
SPAN = {"from": T0 - 10, "until": T0 + 100000}
GATEWAY = [s3server.shared]  # the object store a Cluster() runs on; the _on_swift/_on_azure variants swap it
_ids = iter(range(1, 10**6))


def td(rel):
    return os.path.join(ARGS.testdata, rel)


# ---------------------------------------------------------------- the cluster of one test

class Cluster:
    """One test's database and bucket on the area's PostgreSQL and gateway, and the nodes it
    started, every one of them stopped on the way out (by PID, through harness.Server)."""

    def __init__(self, gw=None):
        self.pg, self.gw = pgserver.shared(), gw or GATEWAY[0]()
        n = next(_ids)
        self.db = f"hearth_it_{os.getpid()}_{n}"
        self.catalog = self.pg.create_database(self.db)
        self.bucket = self.gw.create_bucket(f"hearth-cluster-{os.getpid()}-{n}")
        self.store = self.gw.url(self.bucket, "hearth")
        self.nodes = []

    def node(self, name, target="all", extra=(), start=True, endpoint=None):
        """A cluster node (Server) with its own data dir and cache dir under it; started unless
        start=False. node.cache is its cache dir. endpoint: reach the object store there (a
        faultproxy.FaultProxy's) instead of at the gateway itself."""
        data = tempfile.mkdtemp(prefix=f"hearth-node-{name}-", dir=ARGS.tmp)
        proxied = endpoint.split("://", 1)[1] if endpoint else None  # host:port: Azurite's path keeps its account
        store = self.store if endpoint is None else self.store.replace(f"127.0.0.1:{self.gw.port}", proxied)
        srv = Server(data_dir=data, env=self.gw.env(), extra=[
            "--catalog", self.catalog, "--object-store", store, "--cache-dir", os.path.join(data, "cache"),
            "--flush-interval", FLUSH, "--target", target, "--node-name", name] + list(extra))
        srv.name, srv.cache = name, os.path.join(data, "cache")
        self.nodes.append(srv)
        return srv.start() if start else srv

    def psql(self, sql):
        return self.pg.psql(sql, db=self.db)

    def block_count(self):
        return int(self.psql("SELECT count(*) FROM hearth_blocks")[0][0])

    def profile_count(self):
        return int(self.psql("SELECT coalesce(sum(profiles), 0) FROM hearth_blocks")[0][0])

    def objects(self):
        """Every key in the bucket under the prefix, as `hearth objstore ls` lists it."""
        r = subprocess.run([ARGS.binary, "objstore", self.store, "ls"], capture_output=True, text=True,
                           env=dict(os.environ, **self.gw.env()), timeout=60)
        assert r.returncode == 0, f"hearth objstore ls: {r.stderr}"
        return [line.rsplit(" ", 1)[0] for line in r.stdout.splitlines()]

    def logs(self):
        return ", ".join(f"{n.name}: {n.log_dir}/server.log" for n in self.nodes)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        errors = []
        for n in self.nodes:
            if n.proc is None:
                continue
            if n.proc.poll() is not None:  # killed by the test, or died: nothing to stop
                n.log.close()
                if n.proc.returncode not in (0, -signal.SIGKILL):
                    errors.append(f"node {n.name} exited {n.proc.returncode}: {n.tail()}")
                continue
            try:
                n.stop()
            except Exception as e:
                errors.append(f"node {n.name}: {e}")
        if errors and exc[0] is None:
            raise AssertionError("\n".join(errors))


def same_key(block_key, listed):
    """Whether a catalog key names one of the listed object keys (either may carry the prefix)."""
    return any(x == block_key or x.endswith("/" + block_key) or block_key.endswith("/" + x) for x in listed)


# ---------------------------------------------------------------- uploads and answers

def push_ok(srv, path, name, at):
    st, body = srv.ingest(open(path, "rb").read(), name=name, format="pprof", **{"from": at})
    assert st == 200, f"push {os.path.basename(path)} as {name} to {srv.url('')}: {st} {body[:300]!r}"


def uploads():
    """The uploads test a compares: six real CPU profiles over two label sets, a heap profile,
    a large CPU profile and one with pprof labels; (path, name, from) in push order."""
    out = [(p, "web{env=%s}" % ("prod" if i % 2 else "dev"), T0 + 10 * i) for i, p in enumerate(cpu_files(6))]
    out.append((td("pprof/go-runtime-heap.pb.gz"), "web{env=prod}", T0 + 5))
    out.append((td("pprof/pprof-large.cpu.pb.gz"), "batch", T0 + 30))
    out.append((td("corpus/parca__pkg__query__testdata__profile-with-labels.pb.gz"), "labelled", T0 + 20))
    return out


def reads(ref, services, everything=True):
    """The reads compared across nodes: {name: (method, path, params or JSON body)}. The profile
    type ids of each service come from the reference node ref. everything: also the reads over
    all services (label names and values, profile types)."""
    out = {} if not everything else {
        "labels": ("GET", "/api/v1/labels", {}),
        "service_name values": ("GET", "/api/v1/labels/service_name/values", {}),
        "env values": ("GET", "/api/v1/labels/env/values", {}),
        "pyroscope label-values __name__": ("GET", "/pyroscope/label-values", {"label": "__name__"}),
        "profile-types": ("GET", "/api/v1/profile-types", {}),
        "connect LabelNames": ("POST", CONNECT + "LabelNames", {}),
    }
    for svc in services:
        sel = '{service_name="%s"}' % svc
        out[f"{svc} series"] = ("GET", "/api/v1/series", {"query": sel})
        out[f"{svc} pyroscope/render"] = ("GET", "/pyroscope/render", {"query": f"{svc}.cpu{{}}", **SPAN})
        for tid in sorted(set(types_of(ref, svc).values())):
            q = tid + sel
            out[f"{q} flamegraph"] = ("GET", "/api/v1/query", {"query": q, "format": "flamegraph", **SPAN})
            out[f"{q} pprof"] = ("GET", "/api/v1/query", {"query": q, "format": "pprof", **SPAN})
            out[f"{q} top"] = ("GET", "/api/v1/query", {"query": q, "format": "top", **SPAN})
            out[f"{q} timeseries"] = ("GET", "/api/v1/timeseries", {"query": q, "step": "10s", **SPAN})
            out[f"{q} connect SelectMergeStacktraces"] = ("POST", CONNECT + "SelectMergeStacktraces", {
                "profileTypeID": tid, "labelSelector": sel, "start": SPAN["from"] * 1000,
                "end": SPAN["until"] * 1000})
    if "web" in services:
        out["web by env"] = ("GET", "/api/v1/timeseries", {"query": CPU + '{service_name="web"}', "group_by": "env",
                                                           "step": "10s", **SPAN})
        out["web env=prod render"] = ("GET", "/pyroscope/render", {"query": 'web.cpu{env="prod"}', **SPAN})
    return out


def answers(srv, rd):
    """{name: (status, raw body)} of every read in rd, asked of srv."""
    out = {}
    for name, (method, path, arg) in rd.items():
        if method == "GET":
            out[name] = srv.get(path, **arg)
        else:
            st, body, _ = srv.request("POST", path, json.dumps(arg).encode(), {"Content-Type": "application/json"})
            out[name] = (st, body)
    return out


def _ints(vals):
    """A repeated int field's values, packed (bytes) or not (ints)."""
    out = []
    for v in vals:
        out.extend(pb_packed(v) if isinstance(v, bytes) else [v])
    return out


def pprof_content(raw):
    """What a pprof says, independent of its encoding: sample types, period, time, duration, and
    {(stack of (function, file, line) root last, sorted labels): summed values}."""
    m = pb_decode(gzip.decompress(raw))
    st = [s.decode() for s in m.get(6, [])]
    fns = {}
    for f in m.get(5, []):
        d = pb_decode(f)
        fns[_ints(d.get(1, [0]))[0]] = (st[_ints(d.get(2, [0]))[0]], st[_ints(d.get(4, [0]))[0]])
    locs = {}
    for loc in m.get(4, []):
        d = pb_decode(loc)
        lines = []
        for ln in d.get(4, []):
            e = pb_decode(ln)
            lines.append(fns.get(_ints(e.get(1, [0]))[0], ("?", "?")) + (_ints(e.get(2, [0]))[0],))
        locs[_ints(d.get(1, [0]))[0]] = tuple(lines)
    samples = {}
    for smp in m.get(2, []):
        d = pb_decode(smp)
        stack = tuple(locs.get(i) for i in _ints(d.get(1, [])))
        labels = tuple(sorted((st[_ints(e.get(1, [0]))[0]], st[_ints(e.get(2, [0]))[0]], _ints(e.get(3, [0]))[0])
                              for e in map(pb_decode, d.get(3, []))))
        vals = _ints(d.get(2, []))
        old = samples.get((stack, labels), [0] * len(vals))
        samples[(stack, labels)] = [a + b for a, b in zip(old, vals)]
    types = [tuple(st[_ints(pb_decode(t).get(k, [0]))[0]] for k in (1, 2)) for t in m.get(1, [])]
    head = {k: _ints(m.get(k, [0])) for k in (9, 10, 12)}
    return types, head, samples


def explain_pprof(wb, gb):
    wu, gu = gzip.decompress(wb), gzip.decompress(gb)
    size = f"{len(gu)} bytes unzipped != {len(wu)}"
    try:
        (wt, wh, ws), (gt, gh, gs) = pprof_content(wb), pprof_content(gb)
    except Exception as e:  # a decoding failure is itself worth reporting, not a crash
        return f"gzipped pprof, {size}; could not decode it: {e!r}"
    if (wt, wh, ws) == (gt, gh, gs):
        return f"gzipped pprof, {size}: the SAME samples, stacks, labels and values, encoded differently"
    parts = []
    if wt != gt:
        parts.append(f"sample types {gt} != {wt}")
    if wh != gh:
        parts.append(f"time/duration/period {gh} != {wh}")
    only_w, only_g = set(ws) - set(gs), set(gs) - set(ws)
    differ = [k for k in set(ws) & set(gs) if ws[k] != gs[k]]
    parts.append(f"{len(only_w)} stacks missing, {len(only_g)} extra, {len(differ)} with other values")
    return f"gzipped pprof, {size}: " + "; ".join(parts)


def explain(want, got):
    """Why two answers differ, in a line: status, JSON equal but reordered, or the first byte."""
    (ws, wb), (gs, gb) = want, got
    if ws != gs:
        return f"status {gs} != {ws}: {gb[:200]!r}"
    if wb[:2] == gb[:2] == b"\x1f\x8b":
        return explain_pprof(wb, gb)
    try:
        if json.loads(wb) == json.loads(gb):
            return "same JSON, different bytes (key or element order)"
    except ValueError:
        pass
    i = next((k for k in range(min(len(wb), len(gb))) if wb[k] != gb[k]), min(len(wb), len(gb)))
    return f"{len(gb)} bytes != {len(wb)}; first difference at byte {i}: {gb[i:i + 60]!r} != {wb[i:i + 60]!r}"


def same(w, g):
    """Whether two answers agree: the same bytes, or for merged pprof (unless PPROF_BYTES) the same
    decoded content."""
    if w == g:
        return True
    if PPROF_BYTES or w[0] != g[0] or not (w[1][:2] == g[1][:2] == b"\x1f\x8b"):
        return False
    try:
        return pprof_content(w[1]) == pprof_content(g[1])
    except Exception:
        return False


def assert_same(want, got, who):
    bad = [f"  {name}: {explain(want[name], got[name])}" for name in want if not same(want[name], got[name])]
    assert not bad, f"{who} answers differently from the single node ({len(bad)} of {len(want)}):\n" + "\n".join(bad)


@contextlib.contextmanager
def reference(ups):
    """A plain single node given ups in order, then restarted (which cuts its head into a block),
    for the with block. Restarted so that it answers from a block, as cluster nodes do (their
    heads are flushed within a second)."""
    with Server() as ref:
        for path, name, at in ups:
            push_ok(ref, path, name, at)
        ref.stop()
        ref.start()
        yield ref


def checked_reference(ref, rd):
    """The reference node's answers, which must all be 200 and not empty."""
    want = answers(ref, rd)
    bad = {k: v for k, v in want.items() if v[0] != 200 or not v[1]}
    assert not bad, f"the single node itself fails: {bad}"
    return want


_REF_TOTALS = []


def ref_totals():
    """The CPU total of each of the six Go CPU profiles, as a single node stores it."""
    if not _REF_TOTALS:
        with Server() as ref:
            for i, p in enumerate(cpu_files(6)):
                push_ok(ref, p, f"ref{i}", T0)
            _REF_TOTALS.extend(total(ref, f"ref{i}") for i in range(6))
        assert all(_REF_TOTALS), _REF_TOTALS
    return _REF_TOTALS


def total(srv, svc):
    """The CPU total of a service through srv (fails unless the query answers 200)."""
    st, body = srv.get("/api/v1/query", query=CPU + '{service_name="%s"}' % svc, format="top", **SPAN)
    assert st == 200, f"query {svc} via {srv.url('')}: {st} {body[:300]!r}"
    return json.loads(body)["total"]


def assert_503_json(st, body, what, took):
    assert st == 503, f"{what}: {st} (want 503) {body[:300]!r}"
    try:
        err = json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):
        raise AssertionError(f"{what}: 503 without a JSON {{\"error\": ...}} body: {body[:300]!r}")
    assert isinstance(err, str) and err, f"{what}: empty error {body[:300]!r}"
    assert took < OUTAGE_S, f"{what}: the 503 took {took:.1f}s (at most {OUTAGE_S}s)"


def push_timed(srv, path, name, at):
    t = time.time()
    st, body, _ = srv.request("POST", "/ingest?" + urllib.parse.urlencode({"name": name, "format": "pprof", "from": at}),
        open(path, "rb").read(), {"Content-Type": "application/octet-stream"}, timeout=OUTAGE_S + 30)
    return st, body, time.time() - t


def query_timed(srv, svc):
    t = time.time()
    st, body, _ = srv.request("GET", "/api/v1/query?" + urllib.parse.urlencode(
        {"query": CPU + '{service_name="%s"}' % svc, "format": "top", **SPAN}), timeout=OUTAGE_S + 30)
    return st, body, time.time() - t


def push_until_ok(srv, path, name, at, what):
    """Pushes (to a throwaway service) until the node takes uploads again, within RECOVER_S."""
    last = [None, b""]  # the last push's status and body

    def pushed():
        last[:] = push_timed(srv, path, name, at)[:2]
        return last[0] == 200
    wait_until(pushed, RECOVER_S, 0.2,
               lambda: f"{what}: pushes to succeed again after the service returned; last {last[0]} {last[1][:300]!r}")


# ---------------------------------------------------------------- tests

@test
def cluster_three_nodes_answer_like_a_single_node():
    ups = uploads()
    services = ["web", "batch", "labelled"]
    with Cluster() as c:
        nodes = [c.node(n) for n in "abc"]
        for i, (path, name, at) in enumerate(ups):
            push_ok(nodes[i % 3], path, name, at)
        with reference(ups) as ref:
            rd = reads(ref, services)
            want = checked_reference(ref, rd)
        for n in nodes:
            assert_same(want, answers(n, rd), f"node {n.name} ({c.logs()})")
        rows = c.psql("SELECT id, tenant, key, profiles FROM hearth_blocks")
        assert rows and all(int(r[3]) > 0 for r in rows), rows
        listed = c.objects()
        missing = [r[2] for r in rows if not same_key(r[2], listed)]
        assert not missing, f"blocks in the catalog but not in the bucket: {missing} (bucket: {listed})"


def wait_peers(srv, n, timeout=20):
    """Waits until srv knows n live query peers from the catalog's heartbeats."""
    wait_until(lambda: metric(srv, "hearth_query_peers") >= n, timeout, 0.2,
               lambda: f"{srv.name} to see {n} peers (it sees {metric(srv, 'hearth_query_peers')})")


def kill_keeping_heartbeat(c, node):
    """Kills node and keeps its heartbeat fresh for a minute, as in the seconds after a crash, so
    the others still ask it (and fail): a slow machine (a TSan build in two processes) must not
    age it out first."""
    node.proc.kill()
    node.proc.wait()
    c.psql(f"UPDATE hearth_nodes SET heartbeat = now() + interval '1 minute' WHERE name = '{node.name}'")


@test
def cluster_split_query_answers_like_one_node_and_survives_a_dead_peer():
    """A merge asked of one node is divided among the three live query nodes, each merging its share
    of the block partitions: flame graphs, top tables and pprof over every service equal a single
    node's, the peers' /metrics count the shares they merged, and when a peer dies the asking node
    merges that share itself, with the same answers."""
    ups = uploads()
    with Cluster() as c:
        nodes = [c.node(n, extra=["--query-split-min-bytes", "0"]) for n in "abc"]  # split even this small
        for i, (path, name, at) in enumerate(ups):
            push_ok(nodes[i % 3], path, name, at)
        rd = {}
        with reference(ups) as ref:
            types = sorted({t for svc in ("web", "batch", "labelled") for t in types_of(ref, svc).values()})
            for tid in types:
                for fmt in ("flamegraph", "top", "pprof"):
                    rd[f"{tid}{{}} {fmt}"] = ("GET", "/api/v1/query", {"query": tid + "{}", "format": fmt, **SPAN})
            rd["top by service"] = ("GET", "/api/v1/query", {"query": CPU, "format": "top",
                                                              "group_by": "service_name", **SPAN})
            rd["connect SelectMergeStacktraces {}"] = ("POST", CONNECT + "SelectMergeStacktraces", {
                "profileTypeID": CPU, "labelSelector": "{}", "start": SPAN["from"] * 1000,
                "end": SPAN["until"] * 1000})
            want = checked_reference(ref, rd)
        a, b, dead = nodes
        wait_peers(a, 2)
        assert metric(a, "hearth_query_peer_refreshes_total") >= 1  # what a script waits on (docs/cluster.md)
        served = [metric(n, "hearth_query_shares_served_total") for n in (b, dead)]
        ok = metric(a, 'hearth_query_split_shares_total{outcome="ok"}')
        assert_same(want, answers(a, rd), f"node a, split three ways ({c.logs()})")
        assert metric(a, 'hearth_query_split_shares_total{outcome="ok"}') > ok
        got = [metric(n, "hearth_query_shares_served_total") for n in (b, dead)]
        assert all(g > s for g, s in zip(got, served)), (served, got)
        assert metric(a, 'hearth_query_split_shares_total{outcome="failed"}') == 0
        # A dead peer: its heartbeat is still fresh, so a asks it, fails and merges its share.
        kill_keeping_heartbeat(c, dead)
        assert_same(want, answers(a, rd), f"node a with a dead peer ({c.logs()})")
        assert metric(a, 'hearth_query_split_shares_total{outcome="failed"}') > 0


@test
def cluster_split_share_reads_only_its_blocks_footers():
    """Over many small blocks (as an ingest node cuts them) a split query deals whole blocks from
    the catalog's block list, so each node, the one asked included, reads the footers of its own
    share's blocks and leaves the others' unread: the footer reads, like the partitions decoded,
    divide among the nodes, and add up to one read per block (the peers answer their blocks'
    totals and timelines too). Flame graphs with their timelines, top tables and pprof are a
    single node's bytes, also when a peer dies and the node asked merges its blocks itself."""
    totals = ref_totals()
    n = 15  # blocks: past split.c's 4 per node for 3 nodes, so whole blocks are dealt
    ups = [(cpu_files(6)[i % 6], f"svc{i % 5}", T0 + i * 20) for i in range(n)]
    rd = {f"{fmt}": ("GET", "/api/v1/query", {"query": CPU + "{}", "format": fmt, **SPAN})
          for fmt in ("flamegraph", "top", "pprof")}
    rd["render svc1"] = ("GET", "/pyroscope/render", {"query": CPU + '{service_name="svc1"}', "from": T0 - 10,
                                                       "until": T0 + 400, "format": "json"})
    with reference(ups) as ref:
        single = checked_reference(ref, rd)
    with Cluster() as c:
        a = c.node("a", "ingest")
        for path, name, at in ups:
            push_ok(a, path, name, at)
        assert c.block_count() == n, f"{c.block_count()} blocks after {n} acknowledged pushes"
        split = ["--query-split-min-bytes", "0"]
        q = [c.node(f"q{k}", "query", split) for k in range(3)]
        wait_peers(q[0], 2)
        before = [metric(x, "hearth_block_footer_loads_total") for x in q]
        assert before == [0, 0, 0], f"footers read before any query: {before}"
        st, body = q[0].get("/api/v1/query", query=CPU + "{}", format="top", **SPAN)
        assert st == 200, (st, body[:300])
        want = sum(totals[i % 6] for i in range(n))
        assert json.loads(body)["total"] == want, (json.loads(body)["total"], want)
        assert metric(q[0], 'hearth_query_split_shares_total{outcome="ok"}') == 2
        read = [metric(x, "hearth_block_footer_loads_total") for x in q]
        assert all(0 < r < n for r in read) and sum(read) == n, f"footers read {read} of {n}: each only its share's"
        parts = [metric(x, "hearth_block_partition_loads_total") for x in q]
        # Each block here holds one partition (one service per upload) and is dealt whole to one
        # node: each node's footers are the blocks it decoded, none of another's share.
        assert read == parts, f"footers read {read}, partitions decoded {parts}"
        assert_same(single, answers(q[0], rd), f"q0, split by blocks ({c.logs()})")
        # A dead peer: q0 merges that peer's blocks itself, their totals and timelines included.
        kill_keeping_heartbeat(c, q[2])
        assert_same(single, answers(q[0], rd), f"q0 with a dead peer ({c.logs()})")
        assert metric(q[0], 'hearth_query_split_shares_total{outcome="failed"}') > 0


@test
def cluster_upload_to_one_node_is_read_at_once_through_another():
    totals = ref_totals()
    with Cluster() as c:
        a, q = c.node("a", "ingest"), c.node("c", "query")
        blocks = 0
        for i, p in enumerate(cpu_files(3)):
            push_ok(a, p, "fresh", T0 + i)
            # No wait: the 200 means stored and registered, and each query syncs the catalog.
            got, want = total(q, "fresh"), sum(totals[:i + 1])
            assert got == want, f"after push {i}: query node sees total {got}, want {want} ({c.logs()})"
            now = c.block_count()
            assert now > blocks, f"push {i} acknowledged but hearth_blocks did not grow ({now})"
            blocks = now
        keys = [r[0] for r in c.psql("SELECT key FROM hearth_blocks")]
        listed = c.objects()
        assert all(same_key(k, listed) for k in keys), (keys, listed)
        assert metric(q, "hearth_blocks") == c.block_count(), "the query node's hearth_blocks after a query"
        # Each role refuses the other's routes with a JSON error that names the role to ask.
        st, body = q.ingest(open(cpu_files(1)[0], "rb").read(), name="fresh", format="pprof", **{"from": T0})
        assert st == 404 and "role" in json.loads(body)["error"], ("push to a query node", st, body[:300])
        st, body = a.get("/api/v1/query", query=CPU + '{service_name="fresh"}', **SPAN)
        assert st == 404 and "role" in json.loads(body)["error"], ("query to an ingest node", st, body[:300])
        # Drilldown's settings live in the object store: set through one node, read through another.
        q2 = c.node("d", "query")
        ct = {"Content-Type": "application/json"}
        doc = json.dumps({"setting": {"name": "pyroscope.ui.maxNodes", "value": "4096"}}).encode()
        assert q.request("POST", "/settings.v1.SettingsService/Set", doc, ct)[0] == 200
        st, body, _ = q2.request("POST", "/settings.v1.SettingsService/Get", b"{}", ct)
        assert st == 200 and [(x["name"], x["value"]) for x in json.loads(body)["settings"]] == \
            [("pyroscope.ui.maxNodes", "4096")], body
        assert any(k.startswith("settings/") for k in c.objects()), c.objects()


@test
def cluster_block_list_changes_are_read_from_the_change_log():
    """A query node reads the block list whole once, then only the catalog's changes
    (hearth_block_log): pushes and a compaction through other nodes arrive as changes and every
    total stays exact. A version with no log row (a node older than the log) makes the next
    sync read the whole list again; a catalog a newer binary upgraded is refused at start."""
    totals = ref_totals()
    with Cluster() as c:
        a, q = c.node("a", "ingest"), c.node("q", "query")
        files = cpu_files(6)
        for i, p in enumerate(files):
            push_ok(a, p, "log", T0 + i)
            assert total(q, "log") == sum(totals[:i + 1]), f"after push {i} ({c.logs()})"
        full, inc = (metric(q, 'hearth_catalog_syncs_total{kind="%s"}' % k) for k in ("full", "incremental"))
        assert full == 1 and inc >= 5, (full, inc)
        kinds = dict((k, int(n)) for k, n in c.psql("SELECT kind, count(*) FROM hearth_block_log GROUP BY kind"))
        assert kinds.get("a", 0) >= 6 and kinds.get("s", 0) >= 1, kinds
        comp = c.node("k", "compact", ["--compact-min-blocks", "2"])
        wait_until(lambda: c.psql("SELECT count(*) FROM hearth_block_log WHERE kind = 'r'")[0][0] != "0", 60, 0.5,
                   lambda: f"a compaction ({c.logs()})")
        assert total(q, "log") == sum(totals[:6])
        comp.stop()
        c.psql("UPDATE hearth_meta SET value = value + 1 WHERE key = 'version'")  # as a pre-log node's change
        assert total(q, "log") == sum(totals[:6])
        assert metric(q, 'hearth_catalog_syncs_total{kind="full"}') == 2
        assert metric(q, "hearth_blocks") == c.block_count()
        c.psql("UPDATE hearth_meta SET value = 3 WHERE key = 'schema_version'")
        late = c.node("late", "query", start=False)
        try:
            late.start()
            raise AssertionError("a node started on a catalog of a newer schema")
        except RuntimeError as e:
            assert "schema version is 3" in str(e), e
        c.nodes.remove(late)  # it exited as it should
        late.log.close()


@test
def cluster_on_swift_s3_api_without_conditional_writes():
    """The same cluster on OpenStack Swift's S3 API (Debian's swift-proxy with s3api), which
    answers a conditional put 501: each node's first block put falls back to a plain put (its
    key is unique by construction; the catalog decides what is published), logged once, and
    never retried; every upload acknowledged by the ingest node is read at once, exactly,
    through the query node, and the objects listed are the catalog's blocks."""
    totals = ref_totals()
    with Cluster(s3server.shared_swift()) as c:
        a, q = c.node("a", "ingest"), c.node("c", "query")
        for i, p in enumerate(cpu_files(3)):
            push_ok(a, p, "swift", T0 + i)
            got, want = total(q, "swift"), sum(totals[:i + 1])
            assert got == want, f"after push {i}: query node sees total {got}, want {want} ({c.logs()})"
        keys = [r[0] for r in c.psql("SELECT key FROM hearth_blocks")]
        listed = c.objects()
        assert keys and all(same_key(k, listed) for k in keys), (keys, listed)
        log = open(os.path.join(a.log_dir, "server.log")).read()
        assert log.count("msg=objstore.no_conditional_writes") == 1, log[-3000:]
        assert "501" not in log.replace("answers 501 to If-None-Match", ""), log[-3000:]


@test
def cluster_killed_node_loses_no_acknowledged_upload():
    totals = ref_totals()
    with Cluster() as c:
        a, b = c.node("a"), c.node("b", "query")
        for i, p in enumerate(cpu_files(2)):
            push_ok(a, p, "kill", T0 + i)
        # Four uploads at once (likely one batch), then SIGKILL the moment all four are acknowledged.
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda i: push_ok(a, cpu_files(6)[i], "kill", T0 + i), range(2, 6)))
        a.proc.send_signal(signal.SIGKILL)
        a.proc.wait()
        want = sum(totals)
        got = total(b, "kill")
        assert got == want, f"through b after a was killed: {got} != {want} ({c.logs()})"
        # Restarted over the same data dir, a must not add anything of its own (no local replay).
        a.start()
        for n, when in ((a, "through a restarted after kill -9"), (b, "through b after a restarted")):
            got = total(n, "kill")
            assert got == want, f"{when}: {got} != {want}"


def outage_round(c, a, readers, down, up, what):
    """The outage test of d and e: acknowledged uploads survive; during the outage pushes to a
    and queries through each of readers answer 503 with a JSON error; after it pushes succeed
    again and the readers see every acknowledged upload."""
    totals, files = ref_totals(), cpu_files(6)
    push_ok(a, files[0], "ok", T0)
    down()
    try:
        st, body, took = push_timed(a, files[1], "during", T0 + 1)
        assert_503_json(st, body, f"push with {what} down", took)
        for n in readers:
            st, body, took = query_timed(n, "ok")
            assert_503_json(st, body, f"query through {n.name} with {what} down", took)
    finally:
        up()
    push_until_ok(a, files[2], "probe", T0 + 2, f"{what} back")
    push_ok(a, files[3], "ok", T0 + 3)  # the first try: no retry that could store it twice
    want = totals[0] + totals[3]
    for n in readers:
        got = total(n, "ok")
        assert got == want, f"through {n.name} after {what} returned: {got} != {want} ({c.logs()})"
    # The push that got a 503 may have been stored (at-least-once), but once at most.
    assert total(readers[0], "during") in (0, totals[1]), "the upload refused during the outage"


@test
def cluster_postgres_outage_refuses_then_recovers():
    with Cluster() as c:
        a, b = c.node("a", extra=["--ack-timeout", ACK_TIMEOUT]), c.node("b", "query")
        outage_round(c, a, [b, a], c.pg.stop, c.pg.restart, "PostgreSQL")


@test
def cluster_object_store_outage_refuses_then_recovers():
    with Cluster() as c:
        a, b = c.node("a", "ingest", ["--ack-timeout", ACK_TIMEOUT]), c.node("b", "query")
        # b has not read anything yet, so its cache cannot answer: the query needs the object store.
        outage_round(c, a, [b], c.gw.stop_gateway, c.gw.start_gateway, "the object store")


def answer_or_5xx(srv, svc, want, what):
    """Queries svc's CPU total through srv: True when it answered 200 with exactly want, False
    when it refused with a 5xx and a JSON error; anything else (a smaller total) fails."""
    st, body, took = query_timed(srv, svc)
    if st == 200:
        got = json.loads(body)["total"]
        assert got == want, f"{what}: 200 with total {got}, want {want}: a damaged read became a smaller answer"
        return True
    assert st in (503, 504), f"{what}: {st} (want 200 with the exact total, or a 5xx) {body[:300]!r}"
    assert_503_json(503, body, what, took)
    return False


@test
def cluster_damaged_object_reads_answer_5xx_never_a_smaller_total():
    """A query node reads every block through a proxy that flips bytes or cuts bodies short. No
    answer may be a 200 with a smaller total; with the fault gone, the same process answers
    exactly; under random faults every answer is exact or a 5xx."""
    want = ref_totals()
    with Cluster() as c, FaultProxy(c.gw.port) as px:
        a = c.node("a", "ingest")
        for i, p in enumerate(cpu_files(6)):
            push_ok(a, p, f"dmg{i}", T0)
        # No disk cache and no decoded partitions kept: every query reads the store afresh.
        b = c.node("b", "query", ["--cache-bytes", "0", "--block-cache-bytes", "0"], endpoint=px.endpoint)
        # Every answer damaged: a flipped byte may land where no check reads it (the answer is
        # then exact), but never gives a smaller total; a body cut short always fails.
        px.faults = {"flip": 1.0}
        refused = sum(not answer_or_5xx(b, f"dmg{i}", want[i], f"every GET answer flipped: dmg{i}") for i in range(6))
        assert refused, "no query noticed a flipped byte in every answer"
        px.faults = {"short": 1.0}
        for i in range(2):
            st, body, took = query_timed(b, f"dmg{i}")
            assert_503_json(st, body, f"every GET answer cut short: dmg{i}", took)
        px.faults = {}
        for i in range(6):
            assert answer_or_5xx(b, f"dmg{i}", want[i], "the fault gone, same process"), f"dmg{i} refused"
        px.faults, px.stall_s = {"flip": 0.1, "short": 0.05, "stall": 0.05}, 1.5
        ok = sum(answer_or_5xx(b, f"dmg{k % 6}", want[k % 6], f"chaos query {k}") for k in range(24))
        assert ok, "no chaos query answered at all"
        assert px.damaged, "the proxy damaged nothing: the chaos round tested nothing"


def compaction_state(c, compactors):
    """What a failed compaction test reports: each compactor's runs and known blocks, the jobs."""
    per = [(k.name, metric(k, "hearth_compactions_total"), metric(k, "hearth_blocks")) for k in compactors]
    return f"(compactor, runs, blocks known): {per}; hearth_jobs: {c.psql('SELECT * FROM hearth_jobs')} ({c.logs()})"


def wait_compaction_settled(c, compactors, timeout=45, quiet_s=6):
    """Polls until the compactors have run and the block count has not changed for quiet_s
    (three of the compactors' 2 s passes: a shorter wait ends between two passes)."""
    end, last, since = time.time() + timeout, None, time.time()
    while time.time() < end:
        n = c.block_count()
        runs = sum(metric(k, "hearth_compactions_total") for k in compactors)
        if n != last:
            last, since = n, time.time()
        elif runs >= 1 and time.time() - since >= quiet_s:
            return n, runs
        time.sleep(0.25)
    raise AssertionError(f"compaction did not settle in {timeout}s: {last} blocks; {compaction_state(c, compactors)}")


@test
def cluster_two_compactors_merge_segments_and_answers_stay_exact():
    files = cpu_files(6)
    steady = [(p, "steady{env=%s}" % ("a" if i % 2 else "b"), T0 + 10 * i + r) for r in range(2)
              for i, p in enumerate(files)]
    busy = [(p, "busy", T0 + 10 * i + r) for r in range(2) for i, p in enumerate(files)]
    small = ["--compact-min-blocks", "2", "--compact-max-bytes", "64MiB"]
    with Cluster() as c:
        ing, q = c.node("ingest", "ingest"), c.node("query", "query")
        for path, name, at in steady:
            push_ok(ing, path, name, at)
        before, profiles_steady = c.block_count(), c.profile_count()
        assert before >= 6, f"12 pushes {FLUSH} apart made only {before} segment blocks"
        with reference(steady + busy) as ref:
            rd_steady = reads(ref, ["steady"], everything=False)
            rd_all = reads(ref, ["steady", "busy"])
            want_steady, want_all = checked_reference(ref, rd_steady), checked_reference(ref, rd_all)
        assert_same(want_steady, answers(q, rd_steady), "the query node before compaction")

        # Queries in a loop while the compactors run and the ingest node keeps pushing.
        stop, seen, rounds = threading.Event(), [], [0]

        def query_loop():
            while not stop.is_set():
                got = answers(q, rd_steady)
                seen.extend(f"{k}: {explain(want_steady[k], got[k])}" for k in want_steady
                            if not same(want_steady[k], got[k]))
                rounds[0] += 1

        loop = threading.Thread(target=query_loop)
        loop.start()
        try:
            ks = [c.node(f"compact{i}", "compact", small) for i in (1, 2)]
            for path, name, at in busy:
                push_ok(ing, path, name, at)
            after, runs = wait_compaction_settled(c, ks)
        finally:
            stop.set()
            loop.join()
        assert not seen, f"answers changed during compaction ({len(seen)} in {rounds[0]} rounds):\n" + "\n".join(seen[:10])
        assert rounds[0] >= 2, f"only {rounds[0]} query rounds ran during compaction"
        assert after < before, f"{after} blocks after compaction, {before} before the busy pushes; {compaction_state(c, ks)}"
        assert c.profile_count() == 2 * profiles_steady, \
            f"profiles in hearth_blocks: {c.profile_count()}, want {2 * profiles_steady} (lost or doubled)"
        assert_same(want_all, answers(q, rd_all), "the query node after compaction")
        keys = [r[0] for r in c.psql("SELECT key FROM hearth_blocks")]
        assert len(keys) == len(set(keys)), keys
        trash = {r[0] for r in c.psql("SELECT key FROM hearth_trash")}
        assert not trash & set(keys), f"live blocks in the trash: {trash & set(keys)}"
        listed = c.objects()
        assert all(same_key(k, listed) for k in keys), f"catalog blocks missing from the bucket: {keys} vs {listed}"
        assert metric(q, "hearth_blocks") == len(keys), "the query node's hearth_blocks after a query"
        for k in ks:
            assert k.proc.poll() is None, f"compactor {k.name} died: {k.tail()}"


@test
def cluster_wiped_cache_changes_no_answer():
    ups = uploads()
    services = ["web", "batch", "labelled"]
    with Cluster() as c:
        a = c.node("a")
        for path, name, at in ups:
            push_ok(a, path, name, at)
        with reference(ups) as ref:
            rd = reads(ref, services)
            want = checked_reference(ref, rd)
        assert_same(want, answers(a, rd), "node a with its cache filled")
        cached = metric(a, "hearth_object_cache_ranges")
        files = sorted(f for _, _, fs in os.walk(a.cache) for f in fs)
        # One file per block holds its ranges, plus the journal: not a file per range.
        assert 0 < len(files) - 1 < cached and "journal" in files, (cached, files)
        a.stop()
        shutil.rmtree(a.cache)
        a.start()
        # Four identical cold queries at once: each range is fetched once (the others wait for
        # that fetch), so the misses equal the ranges now cached.
        _, path, params = next(r for name, r in rd.items() if name.endswith("flamegraph"))
        with concurrent.futures.ThreadPoolExecutor(4) as ex:
            got = list(ex.map(lambda _: a.get(path, **params), range(4)))
        assert all(st == 200 for st, _ in got), [st for st, _ in got]
        assert len({body for _, body in got}) == 1, "concurrent cold queries answered differently"
        misses = metric(a, "hearth_object_cache_misses_total")
        ranges = metric(a, "hearth_object_cache_ranges")
        assert 0 < misses == ranges, f"{misses:.0f} fetches for {ranges:.0f} cached ranges: a range was fetched twice"
        assert_same(want, answers(a, rd), "node a with its cache wiped")


def cache_files(node):
    """{name: bytes the file holds on disk (allocated blocks, so punched holes take none)}."""
    return {f: os.stat(os.path.join(node.cache, f)).st_blocks * 512 for f in os.listdir(node.cache)}


@test
def cluster_disk_cache_keeps_ranges_across_restarts_and_evicts_within_budget():
    """The disk cache keeps a block's ranges in one file and lists them in its journal: a
    restarted node answers from it without fetching again, a torn journal record and an older
    layout's files are dropped at start, and under a small budget evicted ranges give their disk
    space back (holes punched, a file removed with its last range), whatever the order of reads."""
    want = ref_totals()
    with Cluster() as c:
        a = c.node("a", "ingest")
        for i, p in enumerate(cpu_files(6)):
            push_ok(a, p, f"dc{i}", T0)
        q = c.node("q", "query", ["--block-cache-bytes", "0"])  # every query reads the disk cache
        for i in range(6):
            assert total(q, f"dc{i}") == want[i]
        ranges, misses = metric(q, "hearth_object_cache_ranges"), metric(q, "hearth_object_cache_misses_total")
        assert 0 < ranges == misses, (ranges, misses)
        full = metric(q, "hearth_object_cache_bytes")
        q.stop()
        with open(os.path.join(q.cache, "journal"), "ab") as f:
            f.write(os.urandom(40))  # a record torn or garbled at a crash
        stray = os.path.join(q.cache, "%032x.0.10" % 7)  # a range file of the older layout
        open(stray, "wb").write(b"0123456789")
        q.start()
        assert metric(q, "hearth_object_cache_ranges") == ranges and not os.path.exists(stray)
        for i in range(6):
            assert total(q, f"dc{i}") == want[i]
        assert metric(q, "hearth_object_cache_misses_total") == 0, "a restarted node fetched ranges it had cached"
        assert metric(q, "hearth_object_cache_hits_total") >= ranges
        # A budget of an eighth (footers and two or three partitions): reads evict, and the files
        # hold no more than what is kept.
        q.stop()
        budget = int(full // 8)
        q.extra += ["--cache-bytes", str(budget)]
        q.start()
        fetched = []
        for rnd in range(2):
            for i in (range(6) if rnd == 0 else (0, 5, 1, 4, 2, 3)):
                assert total(q, f"dc{i}") == want[i]
                kept = metric(q, "hearth_object_cache_bytes")
                files = cache_files(q)
                data = sum(b for f, b in files.items() if f != "journal")
                # Allocation rounds each range out to 4 KiB blocks at both ends.
                slack = 2 * 4096 * metric(q, "hearth_object_cache_ranges")
                assert kept <= budget and data <= kept + slack, (budget, kept, data, slack, files)
            fetched.append(metric(q, "hearth_object_cache_misses_total"))
        assert fetched[1] > fetched[0], f"no range evicted under a budget of {budget} bytes: fetches {fetched}"
        assert len(cache_files(q)) - 1 <= metric(q, "hearth_object_cache_ranges")
        # The evictions are in the journal too: a restart replays additions and removals alike.
        kept = (metric(q, "hearth_object_cache_ranges"), metric(q, "hearth_object_cache_bytes"))
        q.stop()
        q.start()
        assert (metric(q, "hearth_object_cache_ranges"), metric(q, "hearth_object_cache_bytes")) == kept


@test
def cluster_nodejs_agent_pushes_to_one_node_read_through_another():
    here = node_agent_dir()
    with Cluster() as c:
        a, b = c.node("a", "ingest"), c.node("b", "query")
        t0 = int(time.time()) - 60
        r = subprocess.run(["node", "push.js"], cwd=here, capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, HEARTH_URL=a.url(""), SECONDS="6"))
        assert r.returncode == 0, r.stderr[-2000:]
        span = {"from": t0, "until": int(time.time()) + 60}
        sel = '{service_name="node-agent-test"}'
        types = {t["id"] for t in b.get_json("/api/v1/profile-types", query=sel)["profileTypes"]}
        cpu = "wall:cpu:nanoseconds:wall:nanoseconds"
        assert cpu in types, types
        doc = b.get_json("/api/v1/query", query=cpu + sel, format="top", **span)
        assert doc["profiles"] >= 2 and doc["total"] > 0, doc
        assert "busyMath" in json.dumps(doc["functions"][:5]), doc["functions"][:5]
        # A third node, started after the pushes, answers the same bytes as b.
        d = c.node("d", "query")
        for fmt in ("flamegraph", "pprof"):
            want, got = b.get("/api/v1/query", query=cpu + sel, format=fmt, **span), \
                d.get("/api/v1/query", query=cpu + sel, format=fmt, **span)
            assert want[0] == 200 and same(want, got), f"{fmt}: {explain(want, got)}"


@test
def cluster_debug_files_uploaded_to_one_node_symbolize_on_every_node():
    """A debug file and its sources archive uploaded to node a are in the object store
    (debuginfo/ID, with its owner beside it): node b symbolizes the same profile with them
    (addr2line's frames), lists them, says they need no upload, and deletes them; a node started
    afterwards finds no file and answers with addresses."""
    import io
    import tarfile
    from test_symbolize import C_START, CPU_NS, build_c_program, c_profile, export
    binary, build_id, vaddrs, ref = build_c_program()
    sel = CPU_NS + '{service_name="cprog"}'
    with Cluster() as c:
        a, b = c.node("a"), c.node("b", extra=["--debuginfod-negative-ttl", "1ms"])
        st, body = a.ingest(c_profile(build_id, vaddrs), name="cprog", format="pprof", **{"from": T0})
        assert st == 200, body
        locs, _ = export(b, sel)
        assert "!0x" in locs[C_START + vaddrs[0]][0][0], locs[C_START + vaddrs[0]]  # no debug file yet
        st, body, _ = a.request("PUT", "/api/v1/debuginfo/" + build_id, open(binary, "rb").read())
        assert st == 200, body
        tar = io.BytesIO()
        with tarfile.open(fileobj=tar, mode="w") as t:
            t.add(os.path.join(os.path.dirname(binary), "prog.c"), arcname="prog.c")
        st, body, _ = a.request("PUT", "/api/v1/debuginfo/%s/sources" % build_id, tar.getvalue())
        assert st == 200, body
        listed = c.objects()
        for key in (build_id, build_id + ".owner", build_id + ".sources", build_id + ".sources.owner"):
            assert any(k.endswith("debuginfo/" + key) for k in listed), (key, listed)
        # b missed the file a moment ago: a miss is remembered for --debuginfod-negative-ttl (1 ms here)
        locs, _ = export(b, sel)
        assert [f[0] for f in locs[C_START + vaddrs[0]]] == [f[0] for f in ref[vaddrs[0]]] == ["mix", "churn"], \
            locs[C_START + vaddrs[0]]
        lst = b.get_json("/api/v1/debuginfo")["debuginfo"]
        assert [(x["build_id"], x["size"], x["sources_size"]) for x in lst] == \
            [(build_id, os.path.getsize(binary), len(tar.getvalue()))], lst
        src = b.get_json("/api/v1/query", query=sel, format="source", function="churn", **{"from": T0 - 10,
                                                                                            "until": T0 + 3600})
        assert "churn" in json.dumps(src), src
        ask = json.dumps({"file": {"GNU": build_id}}).encode()
        st, body, _ = b.request("POST", "/debuginfo.v1alpha1.DebuginfoService/ShouldInitiateUpload", ask,
                                {"Content-Type": "application/json"})
        assert st == 200 and json.loads(body).get("shouldInitiateUpload", False) is False, body
        for path in ("/api/v1/debuginfo/%s/sources" % build_id, "/api/v1/debuginfo/" + build_id):
            st, body, _ = b.request("DELETE", path)
            assert st == 200, (path, body)
        assert not any("debuginfo/" in k for k in c.objects()), c.objects()
        d = c.node("d")
        locs, _ = export(d, sel)
        assert "!0x" in locs[C_START + vaddrs[0]][0][0], locs[C_START + vaddrs[0]]


@test
def cluster_scrape_targets_are_divided_among_nodes_and_taken_over_when_one_dies():
    """Two nodes load the same scrape config of 6 real Go net/http/pprof targets: once both
    heartbeats are in, each target is scraped by exactly one node (the one both name in
    /api/v1/targets' scrapedBy), both nodes scrape some; node b killed, a scrapes all six
    within the heartbeat age (6 s) and an interval."""
    from test_scrape import Target, scrape_config
    with contextlib.ExitStack() as stack, Cluster() as c:
        targets = [stack.enter_context(Target()) for _ in range(6)]
        cfg = scrape_config("cluster-shard", {"interval": "1s", "targets": [
            {"job": "app", "url": t.url, "profiles": ["heap"], "labels": {"n": str(i)}} for i, t in enumerate(targets)]})
        a = c.node("a", extra=["--scrape-config", cfg])

        def counts(node):
            return {x["url"]: (x["scrapes"], x.get("scrapedBy")) for x in node.get_json("/api/v1/targets")["targets"]}

        def agreed(b):
            """The owner of each target once both nodes name the same one for every target."""
            seen = []

            def agree():
                seen[:] = counts(a), counts(b)
                owners = {u: seen[0][u][1] for u in seen[0]}
                same = owners == {u: seen[1][u][1] for u in seen[1]}
                return owners if same and set(owners.values()) <= {"a", b.name} else None
            return wait_until(agree, 30, 0.5, lambda: f"both nodes to agree on the targets' owners: {seen}")

        # Which node a target goes to follows from hashes of the node names and the targets'
        # URLs (random ports): all six land on one node 1 time in 32, and b then takes another name.
        for name in ("b", "b2", "b3", "b4", "b5"):
            b = c.node(name, extra=["--scrape-config", cfg])
            owners = agreed(b)
            if set(owners.values()) == {"a", name}:
                break
            b.stop()
        assert set(owners.values()) == {"a", b.name}, owners
        time.sleep(2.5)  # past any scrape begun under the older division
        before = {"a": counts(a), b.name: counts(b)}
        time.sleep(3.5)
        after = {"a": counts(a), b.name: counts(b)}
        for t in targets:
            grew = sorted(n for n in before if after[n][t.url][0] > before[n][t.url][0])
            assert grew == [owners[t.url]], (t.url, owners[t.url], before, after)
        b.proc.kill()
        b.proc.wait()
        # Within the heartbeat age (6 s), a's refresh and an interval, a names itself for every
        # target and then scrapes each again.
        deadline, first = time.time() + 30, None
        while True:
            now = counts(a)
            if first is None and all(now[t.url][1] == "a" for t in targets):
                first = now
            if first and all(now[t.url][0] > first[t.url][0] for t in targets):
                break
            assert time.time() < deadline, (first, now)
            time.sleep(0.5)


# ---------------------------------------------------------------- every test on Swift and Azure too

# Tests that run on radosgw alone: the outage test stops and restarts the gateway's own daemon,
# and the Swift test is about Swift already.
RADOSGW_ONLY = {cluster_object_store_outage_refuses_then_recovers, cluster_on_swift_s3_api_without_conditional_writes}
STORES = {"swift": (s3server.shared_swift, "OpenStack Swift's S3 API (no conditional writes)"),
          "azure": (azserver.shared, "Azure Blob Storage (Microsoft's Azurite emulator)")}


def on_store(fn, name):
    """fn with every Cluster() on another object store instead of radosgw: the cluster suite runs
    on radosgw, Swift's S3 API and Azure Blob Storage."""
    factory, what = STORES[name]

    def variant():
        GATEWAY[0] = factory
        try:
            fn()
        finally:
            GATEWAY[0] = s3server.shared
    variant.__name__, variant.__module__ = f"{fn.__name__}_on_{name}", fn.__module__
    variant.__doc__ = f"{fn.__name__}, with the cluster on {what}."
    return variant


for _fn in [f for f in TESTS if area_of(f) == "cluster" and f not in RADOSGW_ONLY]:
    for _name in STORES:
        test(on_store(_fn, _name))
