"""Block format version 2: partitioned reads, footer totals, and upgrade from version 1."""
import os
import shutil
import subprocess

from harness import ARGS, CPU, ROOT, T0, Server, cli, metric, query, test
from pprof_ref import pprof_raw, pprof_top


def cpu_each(i):
    return pprof_raw(os.path.join(ARGS.testdata, "pprof", f"go-runtime-cpu-0{i}.pb.gz"))[1][1]


def block_files(data_dir):
    out = []
    for root, _, files in os.walk(os.path.join(data_dir, "blocks")):
        out += [os.path.join(root, f) for f in files if f.endswith(".blk")]
    return sorted(out)


def answers(srv):
    """Totals, top rows and timeline of both services, and the profile list."""
    out = {}
    for svc in ("shop", "cart"):
        sel = CPU + '{service_name="%s"}' % svc
        top = query(srv, sel, limit=5)
        out[svc] = (top["total"], [(f["name"], f["self"], f["total"]) for f in top["functions"]])
        ts = srv.get_json("/api/v1/timeseries", query=sel, **{"from": T0 - 10, "until": T0 + 3600, "step": "10"})
        out[svc + "-ts"] = ts
        out[svc + "-profiles"] = srv.get_json("/api/v1/profiles", query=sel, **{"from": T0 - 10, "until": T0 + 3600})
    return out


@test
def version1_store_opens_answers_and_compacts_to_version2():
    data = os.path.join(ARGS.tmp, "v1-store")
    shutil.copytree(os.path.join(ROOT, "tests", "fixtures", "v1-store"), data)
    assert open(block_files(data)[0], "rb").read(8) == b"HRTHBLK1"
    want = {"shop": sum(cpu_each(i) for i in range(3)), "cart": sum(cpu_each(i) for i in range(3, 6))}
    with Server(data_dir=data, extra=["--compact-min-blocks", "2"]) as srv:
        before = answers(srv)
        assert before["shop"][0] == want["shop"] and before["cart"][0] == want["cart"], (before["shop"][0], want)
        # A second (version-2) block next to the version-1 one, then compaction rewrites both as version 2.
        body = open(os.path.join(ARGS.testdata, "pprof", "go-runtime-cpu-00.pb.gz"), "rb").read()
        assert srv.ingest(body, name="other", format="pprof", **{"from": T0 + 100})[0] == 200
        assert srv.request("POST", "/api/v1/admin/flush")[0] == 200
        assert answers(srv) == before
        assert srv.request("POST", "/api/v1/admin/compact")[0] == 200
        assert answers(srv) == before
    files = block_files(data)
    assert len(files) == 1 and open(files[0], "rb").read(8) == b"HRTHBLK2", files
    with Server(data_dir=data) as srv:
        assert answers(srv) == before
    r = cli("check", data)
    assert r.returncode == 0, r.stdout + r.stderr


@test
def a_query_for_one_service_reads_only_its_partition():
    with Server(extra=["--block-cache-bytes", "1GiB"]) as srv:
        bodies = [open(os.path.join(ARGS.testdata, "pprof", f"go-runtime-cpu-0{i}.pb.gz"), "rb").read()
                  for i in range(6)]
        for k in range(20):  # twenty services, one block
            for i, b in enumerate(bodies):
                assert srv.ingest(b, name=f"svc{k:02d}", format="pprof", **{"from": T0 + i * 10})[0] == 200
        assert srv.request("POST", "/api/v1/admin/flush")[0] == 200
        f = block_files(srv.data_dir)
        assert len(f) == 1 and open(f[0], "rb").read(8) == b"HRTHBLK2"
        total = sum(cpu_each(i) for i in range(6))
        # Totals, time series and profile lists come from the footer: nothing is decoded.
        assert metric(srv, "hearth_block_partitions_cached") == 0
        ts = srv.get_json("/api/v1/timeseries", query=CPU + '{service_name="svc07"}', step="10s",
                          **{"from": T0 - 10, "until": T0 + 100})
        assert sum(p["value"] for p in ts["points"]) == total
        listed = srv.get_json("/api/v1/profiles", query=CPU + '{service_name="svc07"}', **{"from": T0 - 10, "until": T0 + 100})
        assert listed["count"] == 24 and sum(p["total"] for p in listed["profiles"]) == total  # 4 series per upload (pprof labels)
        assert metric(srv, "hearth_block_partitions_cached") == 0
        # One service's flame graph decodes one partition of twenty.
        assert query(srv, CPU + '{service_name="svc07"}', fmt="top")["total"] == total
        assert metric(srv, "hearth_block_partitions_cached") == 1
        for k in (3, 19):
            assert query(srv, CPU + '{service_name="svc%02d"}' % k, fmt="top")["total"] == total
        assert metric(srv, "hearth_block_partitions_cached") == 3
        assert query(srv, CPU + '{service_name=~"svc.*"}', fmt="top")["total"] == 20 * total
        assert metric(srv, "hearth_block_partitions_cached") == 20
        # Those ranges covered the block: partitions came pre-merged (one row per series).
        # A range inside it reads the profile rows instead, and still merges exactly.
        top = query(srv, CPU + '{service_name="svc07"}', fmt="top", frm=T0 + 15, until=T0 + 35)
        assert top["total"] == cpu_each(2) + cpu_each(3) and top["profiles"] == 8, top["total"]
        assert metric(srv, "hearth_block_partitions_cached") == 21
        # The pre-merged flame graph equals go tool pprof's merge of the six files.
        path = os.path.join(srv.data_dir, "m.pb.gz")
        st, body = srv.get("/api/v1/query", query=CPU + '{service_name="svc07"}', format="pprof",
                           **{"from": T0 - 10, "until": T0 + 3600})
        open(path, "wb").write(body)
        files = [os.path.join(ARGS.testdata, "pprof", f"go-runtime-cpu-0{i}.pb.gz") for i in range(6)]
        merged = os.path.join(srv.data_dir, "ref.pb.gz")
        subprocess.run(["go", "tool", "pprof", "-proto", "-output", merged] + files, check=True, capture_output=True)
        ref = pprof_top(merged, 1, "nanoseconds")
        got = pprof_top(path, 0, "nanoseconds")
        assert got == ref, (len(got), len(ref))  # every function's flat and cum


@test
def the_block_cache_keeps_its_budget_and_evicts_the_least_recently_used():
    bodies = [open(os.path.join(ARGS.testdata, "pprof", f"go-runtime-cpu-0{i}.pb.gz"), "rb").read() for i in range(6)]
    total = sum(cpu_each(i) for i in range(6))

    def fill(srv):
        for k in range(4):  # four services, one block: one partition each
            for i, b in enumerate(bodies):
                assert srv.ingest(b, name=f"svc{k}", format="pprof", **{"from": T0 + i * 10})[0] == 200
        assert srv.request("POST", "/api/v1/admin/flush")[0] == 200

    def ask(srv, k):
        assert query(srv, CPU + '{service_name="svc%d"}' % k, fmt="top")["total"] == total

    with Server(extra=["--block-cache-bytes", "1GiB"]) as srv:  # the size of one partition
        fill(srv)
        ask(srv, 0)
        one = metric(srv, "hearth_block_cache_bytes")
        ask(srv, 1)
        assert metric(srv, "hearth_block_partition_loads_total") == 2
        ask(srv, 0)
        assert metric(srv, "hearth_block_partition_loads_total") == 2  # a hit
    budget = int(one * 2.5)  # room for two partitions, not three
    with Server(extra=["--block-cache-bytes", str(budget)]) as srv:
        fill(srv)
        for k in (0, 1, 0, 2):  # 0 used after 1: loading 2 evicts 1
            ask(srv, k)
        assert metric(srv, "hearth_block_partition_loads_total") == 3
        assert metric(srv, "hearth_block_partitions_cached") == 2
        assert metric(srv, "hearth_block_cache_bytes") <= budget
        ask(srv, 0)
        assert metric(srv, "hearth_block_partition_loads_total") == 3  # still cached
        ask(srv, 1)
        assert metric(srv, "hearth_block_partition_loads_total") == 4  # evicted
        assert metric(srv, "hearth_block_cache_bytes") <= budget
    with Server(extra=["--block-cache-bytes", "1"]) as srv:  # nothing fits: every query decodes, answers stay exact
        fill(srv)
        for k in (0, 0, 3):
            ask(srv, k)
        assert metric(srv, "hearth_block_partition_loads_total") == 3
        assert metric(srv, "hearth_block_partitions_cached") == 0


@test
def compaction_writes_whole_services_into_blocks_of_the_size_cap():
    body = open(os.path.join(ARGS.testdata, "pprof", "go-runtime-cpu-00.pb.gz"), "rb").read()
    data = os.path.join(ARGS.tmp, "split-store")
    svcs = [f"svc{k}" for k in range(6)]

    def answers(srv):
        out = {}
        for k in svcs:
            top = query(srv, CPU + '{service_name="%s"}' % k, limit=5)
            out[k] = (top["total"], top["profiles"], [(f["name"], f["self"], f["total"]) for f in top["functions"]])
        return out

    with Server(data_dir=data, extra=["--compact-min-blocks", "0"]) as srv:  # six blocks, one service each
        for k, svc in enumerate(svcs):
            assert srv.ingest(body, name=svc, format="pprof", **{"from": T0 + k * 10})[0] == 200
            assert srv.request("POST", "/api/v1/admin/flush")[0] == 200
            if k == 0:
                one = metric(srv, "hearth_block_bytes")
        assert metric(srv, "hearth_blocks") == 6
        before = answers(srv)
    assert before["svc3"][0] == cpu_each(0)
    cap = int(one * 2.5)  # each block is small (under cap / 2); three services fill a merged block
    with Server(data_dir=data, extra=["--compact-min-blocks", "6", "--compact-max-bytes", str(cap)]) as srv:
        srv.request("POST", "/api/v1/admin/compact")
        assert metric(srv, "hearth_blocks") == 2 and metric(srv, "hearth_compacted_blocks_total") == 6
        assert answers(srv) == before
        log = open(os.path.join(srv.log_dir, "server.log")).read()
        assert "blocks_in=6 " in log and "blocks_out=2 " in log, log[-2000:]
    with Server(data_dir=data) as srv:  # the split blocks read back after a restart
        # Each service lives in one block: its flame graph decodes one partition.
        assert query(srv, CPU + '{service_name="svc4"}', limit=5)["total"] == before["svc4"][0]
        assert metric(srv, "hearth_block_partition_loads_total") == 1
        assert answers(srv) == before
        assert metric(srv, "hearth_blocks") == 2
    r = cli("check", data)
    assert r.returncode == 0, r.stdout + r.stderr


@test
def compaction_tiers_summarise_ended_weeks_and_keep_every_answer():
    """Blocks of an ended week (and 28 days) merge into one block per service holding a
    partition per day plus summary partitions (pre-merged rows of each window): a merge
    over a whole window reads its summary, a short range its days, and every answer is
    the same as before compaction, for sums, gauges, top tables, time series and pprof."""
    cpu = [open(os.path.join(ARGS.testdata, "pprof", f"go-runtime-cpu-0{i}.pb.gz"), "rb").read() for i in range(6)]
    heap = open(os.path.join(ARGS.testdata, "pprof", "go-runtime-heap.pb.gz"), "rb").read()
    data = os.path.join(ARGS.tmp, "tier-store")
    day = 86400
    monday = T0 - (T0 - 4 * day) % (7 * day)  # T0's week starts on this Monday, 00:00 UTC
    days = 17
    with Server(data_dir=data, extra=["--compact-min-blocks", "0"]) as srv:  # a block per day, as cut
        for d in range(days):
            for k, svc in enumerate(("shop", "cart")):
                for h in (1, 13):
                    t = T0 + d * day + h * 3600
                    assert srv.ingest(cpu[(d + k + h) % 6], name=svc, format="pprof", **{"from": t})[0] == 200
            assert srv.ingest(heap, name="shop", format="pprof", **{"from": T0 + d * day + 600})[0] == 200
            assert srv.request("POST", "/api/v1/admin/flush")[0] == 200
        assert metric(srv, "hearth_blocks") == days
        ranges = {"all": (T0 - 10, T0 + days * day), "week": (monday + 7 * day, monday + 14 * day),
                  "hour": (T0 + 3 * day + 3000, T0 + 3 * day + 6600), "day": (T0 + 9 * day, T0 + 10 * day),
                  "straddle": (monday + 6 * day, monday + 9 * day)}

        def answers(srv):
            out = {}
            for name, (a, b) in ranges.items():
                for sel in (CPU + "{}", CPU + '{service_name="cart"}', 'memory:inuse_space:bytes:space:bytes{}'):
                    fg = query(srv, sel, fmt="flamegraph", frm=a, until=b)
                    out[name, sel, "fg"] = (fg["flamebearer"], fg["metadata"])
                    top = query(srv, sel, fmt="top", frm=a, until=b, limit=20)
                    out[name, sel, "top"] = (top["total"], top["functions"])
                    out[name, sel, "pprof"] = srv.get("/api/v1/query", query=sel, format="pprof",
                                                      **{"from": a, "until": b})[1]
                out[name, "ts"] = srv.get_json("/api/v1/timeseries", query=CPU + "{}", step="6h",
                                               **{"from": a, "until": b})
            return out

        before = answers(srv)
    assert before["all", CPU + "{}", "top"][0] > 0 and before["hour", CPU + "{}", "top"][0] > 0
    with Server(data_dir=data, extra=["--compact-min-blocks", "2"]) as srv:
        assert srv.request("POST", "/api/v1/admin/compact")[0] == 200
        log = open(os.path.join(srv.log_dir, "server.log")).read()
        assert "window=28d/" in log or "window=7d/" in log, log[-2000:]
        assert metric(srv, "hearth_blocks") < days
        assert answers(srv) == before
    with Server(data_dir=data) as srv:  # a restart: the summaries read back from the footers
        # The whole week decodes one summary partition, not its seven days.
        a, b = ranges["week"]
        assert query(srv, CPU + '{service_name="cart"}', fmt="flamegraph", frm=a, until=b)["flamebearer"] == \
            before["week", CPU + '{service_name="cart"}', "fg"][0]
        assert metric(srv, "hearth_block_partition_loads_total") == 1, "the week came from one summary"
        a, b = ranges["hour"]
        query(srv, CPU + '{service_name="cart"}', fmt="flamegraph", frm=a, until=b)
        assert metric(srv, "hearth_block_partition_loads_total") == 1 and \
            metric(srv, "hearth_block_window_loads_total") == 1, "the hour came from its day's rows in it"
        assert answers(srv) == before
        assert srv.request("POST", "/api/v1/admin/compact")[1] == b'{"compactions":0}'  # nothing left to do
    # A late profile of an ended week: its block joins the window's block again.
    with Server(data_dir=data, extra=["--compact-min-blocks", "2"]) as srv:
        assert srv.ingest(cpu[0], name="cart", format="pprof", **{"from": monday + 8 * day + 60})[0] == 200
        assert srv.request("POST", "/api/v1/admin/flush")[0] == 200
        nblocks = metric(srv, "hearth_blocks")
        assert srv.request("POST", "/api/v1/admin/compact")[0] == 200
        assert metric(srv, "hearth_blocks") == nblocks - 1
        for name in ("all", "week"):
            a, b = ranges[name]
            got = query(srv, CPU + '{service_name="cart"}', fmt="top", frm=a, until=b)["total"]
            assert got == before[name, CPU + '{service_name="cart"}', "top"][0] + cpu_each(0), name
    r = cli("check", data)
    assert r.returncode == 0, r.stdout + r.stderr


@test
def a_short_range_inside_a_long_block_decodes_only_its_rows():
    """Three hours of one service cut into one block: a merge of 50 minutes inside it
    decompresses the partition's columns but decodes the samples of its own rows only, kept
    in the partition's window slot of the cache (hearth_block_window_loads_total counts it;
    the whole partition is never decoded). Its flame graph, top table and folded stacks
    equal the same query's over the head before the cut, after a restart (cold) and from the
    cache (warm); the whole range still answers exactly, and `hearth check` passes."""
    files = [os.path.join(ARGS.testdata, "pprof", f"go-runtime-cpu-0{i}.pb.gz") for i in range(6)]
    bodies = [open(f, "rb").read() for f in files]
    with Server(extra=["--wal-fsync", "none"]) as srv:
        for i in range(180):  # a profile a minute for three hours
            st, body = srv.ingest(bodies[i % 6], name="long", format="pprof", **{"from": T0 + 60 * i})
            assert st == 200, body
        sel = CPU + '{service_name="long"}'
        short = {"from": T0 + 3600 + 600, "until": T0 + 2 * 3600 - 1}
        whole = {"from": T0 - 10, "until": T0 + 3 * 3600}

        def answer(span):
            return (srv.get_json("/api/v1/query", query=sel, format="flamegraph", **span),
                    query(srv, sel, **span), srv.get("/api/v1/query", query=sel, format="folded", **span)[1])

        before = answer(short), answer(whole)
        assert 0 < before[0][1]["total"] < before[1][1]["total"], (before[0][1]["total"], before[1][1]["total"])
        assert srv.request("POST", "/api/v1/admin/flush")[0] == 200
        assert len(block_files(srv.data_dir)) == 1
        srv.stop()
        srv.start()
        loads = metric(srv, "hearth_block_partition_loads_total")
        assert answer(short) == before[0]  # cold: the window's rows decoded
        windows = metric(srv, "hearth_block_window_loads_total")
        assert windows >= 1 and metric(srv, "hearth_block_partition_loads_total") == loads, windows
        assert answer(short) == before[0]  # warm: the window slot of the cache
        assert metric(srv, "hearth_block_window_loads_total") == windows
        assert answer(whole) == before[1]
        srv.stop()
        r = cli("check", srv.data_dir)
        assert r.returncode == 0, r.stdout + r.stderr
