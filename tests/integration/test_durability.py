"""Durability: what was acknowledged stays stored, and answers the same.

kill -9 while agents push, once and in a random loop with `hearth check` after every kill; a
full disk (a small tmpfs), and a crash while it is full; a corrupt block; a damaged WAL record;
a second server on one data dir. And the storage lifecycle, which must change no answer: the
head cut by age, compaction, retention, an empty-stack sample across a cut and a restart.
"""
import contextlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time

from harness import (
    ARGS, CPU, CPU_FILE, T0, Server, cli, cpu_total, elf_with_build_id, free_port, metric, query, read_testdata,
    test, wait_until)
from pprof_ref import pprof_raw


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


def seeded_rng(what):
    """A random source for a test's timing, its seed printed so a failure can be replayed
    (HEARTH_TEST_SEED sets it)."""
    seed = int(os.environ.get("HEARTH_TEST_SEED", time.time()))
    print(f"    {what}: seed {seed} (HEARTH_TEST_SEED={seed} replays it)", flush=True)
    return random.Random(seed)


def kill9_while_pushing(srv, stop, threads):
    """kill -9 the server with the pushers running, then stops them: pushes in flight fail unacknowledged."""
    srv.proc.send_signal(signal.SIGKILL)
    srv.proc.wait()
    stop.set()
    for t in threads:
        t.join()
    srv.log.close()


def seconds_with_data(srv, sel, frm, until):
    """The push times (unix seconds) of every nonzero point of a 1 s time series."""
    ts = srv.get_json("/api/v1/timeseries", query=sel, step="1s", **{"from": frm, "until": until})
    return {p["timestamp"] // 1000 for p in ts["points"] if p["value"] > 0}


@test
def restart_flush_and_kill9_keep_every_acknowledged_profile():
    data_dir = tempfile.mkdtemp(prefix="hearth-crash-", dir=ARGS.tmp)
    srv = Server(data_dir).start()
    acked, lock, stop = [], threading.Lock(), threading.Event()
    threads = start_pushers(srv, 4, lambda w, i: T0 + w * 20000 + i,
                            lambda i: b"main;work%d 7\nmain;idle 3\n" % (i % 5), "crash.cpu", acked, lock, stop)
    wait_until(lambda: len(acked) > 10, 30, 0.05, "some acknowledged pushes")
    srv.request("POST", "/api/v1/admin/flush")  # some data in a block, some only in the WAL
    time.sleep(seeded_rng("restart_flush_and_kill9").uniform(0.3, 1.0))  # the kill lands anywhere in a push
    kill9_while_pushing(srv, stop, threads)
    assert len(acked) > 20, f"only {len(acked)} pushes acknowledged"
    srv = Server(data_dir).start()
    try:
        ans = query(srv, CPU + '{service_name="crash"}', frm=T0 - 10, until=T0 + 10**6)
        # An in-flight push may be durable without its ack having arrived.
        assert ans["profiles"] >= len(acked), (ans["profiles"], len(acked))
        assert ans["profiles"] <= len(acked) + 4
        assert ans["total"] == ans["profiles"] * 10 * 10000000
        seen = seconds_with_data(srv, CPU + '{service_name="crash"}', T0 - 10, T0 + 80000)
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
    rng = seeded_rng("random_kill9_loop")
    acked, lock = [], threading.Lock()
    rounds = 3 if ARGS.quick else 6
    for rnd in range(rounds):
        # --block-duration 1s makes head cuts race with the kills.
        srv = Server(data_dir, extra=["--block-duration", "1s"]).start()
        stop = threading.Event()
        threads = start_pushers(srv, 3, lambda w, i, r=rnd: T0 + r * 100000 + w * 10000 + i,
                                lambda i: b"main;w%d 3\nmain;x 2\n" % (i % 3), "loop.cpu", acked, lock, stop)
        time.sleep(rng.uniform(0.2, 2.5))
        kill9_while_pushing(srv, stop, threads)
        r = cli("check", data_dir)
        assert r.returncode == 0, f"round {rnd}: {r.stdout}"
    assert len(acked) > 50, len(acked)
    with Server(data_dir) as srv:
        ans = query(srv, CPU + '{service_name="loop"}', frm=T0 - 10, until=T0 + 10**6)
        assert ans["profiles"] >= len(acked) and ans["total"] == ans["profiles"] * 5 * 10000000, (ans, len(acked))
        for rnd in range(rounds):
            seen = seconds_with_data(srv, CPU + '{service_name="loop"}', T0 + rnd * 100000, T0 + rnd * 100000 + 40000)
            lost = [t for t in acked if T0 + rnd * 100000 <= t < T0 + rnd * 100000 + 40000 and t not in seen]
            assert not lost, f"round {rnd}: {len(lost)} acknowledged profiles lost"
        assert metric(srv, "hearth_blocks_corrupt") == 0


@contextlib.contextmanager
def small_tmpfs(size="6m"):
    """A small tmpfs (6 MiB) mounted under ARGS.tmp for the block: a disk that fills in a moment."""
    mnt = tempfile.mkdtemp(prefix="hearth-tmpfs-", dir=ARGS.tmp)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=" + size, "tmpfs", mnt], check=True, capture_output=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", mnt], capture_output=True)


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
    with small_tmpfs() as mnt:
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
        # The damage is in c1's symbols: a flame graph reads them, finds it and skips the block;
        # from then on every query does (a top table alone would read only the intact function
        # table section, whose own CRC holds).
        assert query(srv, CPU + '{service_name="c1"}', fmt="flamegraph")["flamebearer"]["numTicks"] == 0
        assert query(srv, CPU + '{service_name="c1"}')["total"] == 0
        assert "hearth_blocks_corrupt 1" in srv.get("/metrics")[1].decode()


@test
def background_cut_by_age_keeps_answers():
    data_dir = tempfile.mkdtemp(prefix="hearth-cut-", dir=ARGS.tmp)
    body = open(os.path.join(ARGS.testdata, "pprof", "go-runtime-cpu-01.pb.gz"), "rb").read()
    want = pprof_raw(os.path.join(ARGS.testdata, "pprof", "go-runtime-cpu-01.pb.gz"))[1][1]
    with Server(data_dir, extra=["--block-duration", "1s"]) as srv:
        assert srv.ingest(body, name="aged", format="pprof", **{"from": T0})[0] == 200
        wait_until(lambda: metric(srv, "hearth_blocks") >= 1, 20, 0.2, "the cut by age")
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
        # the background thread may have taken it first
        wait_until(lambda: metric(srv, "hearth_compactions_total") >= 1, 20, 0.1, "the compaction")
        after = seen[0]
        wait_until(lambda: seen[0] >= after + 2, 20, 0.05, "two more reads after the compaction")
        stop.set()
        for t in threads:
            t.join()
        assert st == 200, body
        assert not errors and seen[0] >= 2, (errors[:3], seen[0])
        assert metric(srv, "hearth_blocks") == 1 and metric(srv, "hearth_compacted_blocks_total") == 8
        assert metric(srv, "hearth_block_bytes") < bytes_before, (metric(srv, "hearth_block_bytes"), bytes_before)
        assert answers(srv) == before
        log = open(os.path.join(srv.log_dir, "server.log")).read()
        assert re.search(r"msg=compaction.done tenant=anonymous window=\d+d/\d+ blocks_in=8 bytes_in=\d+ blocks_out=1 bytes_out=\d+", log)
        assert srv.request("POST", "/api/v1/admin/compact", b"")[1] == b'{"compactions":0}'  # nothing left to do
    blks = [f for d, _, fs in os.walk(os.path.join(data_dir, "blocks")) for f in fs if f.endswith(".blk")]
    assert len(blks) == 1, blks  # the eight old files are gone
    r = cli("check", data_dir)
    assert r.returncode == 0, r.stdout + r.stderr
    with Server(data_dir) as srv:
        assert answers(srv) == before and metric(srv, "hearth_blocks") == 1


@test
def retention_deletes_old_blocks():
    with Server(extra=["--retention", "24h"]) as srv:
        assert srv.ingest(b"main;old 1\n", name="ret.cpu", format="folded", **{"from": T0})[0] == 200
        srv.request("POST", "/api/v1/admin/flush")
        assert srv.ingest(b"main;new 1\n", name="ret.cpu", format="folded", **{"from": "now-1m"})[0] == 200
        srv.request("POST", "/api/v1/admin/flush")
        wait_until(lambda: metric(srv, "hearth_retention_deleted_blocks_total") >= 1, 20, 0.2, "retention")
        assert metric(srv, "hearth_blocks") == 1
        assert query(srv, CPU + '{service_name="ret"}')["total"] == 0
        assert query(srv, CPU + '{service_name="ret"}', frm="now-1h", until="now")["total"] == 10000000
        assert len(os.listdir(os.path.join(srv.data_dir, "blocks", "anonymous"))) == 1


THREADCREATE = "corpus/gen__go119.threadcreate.pb.gz"


TC_TYPE = "threadcreate:threadcreate:count:threadcreate:count"


def totals(srv):
    """{service: total} over every stored profile type, from the flame graph root."""
    out = {}
    for svc in ("tc", "cpu"):
        for t in srv.get_json("/api/v1/profile-types", query='{service_name="%s"}' % svc)["profileTypes"]:
            fg = query(srv, t["id"] + '{service_name="%s"}' % svc, fmt="flamegraph")
            out[(svc, t["id"])] = fg["flamebearer"]["numTicks"]
    return out


@test
def empty_stack_sample_survives_cut_and_restart():
    # Go's threadcreate profile: 5 samples without locations (go tool pprof: total 5).
    srv = Server().start()
    try:
        for name, rel in (("tc", THREADCREATE), ("cpu", CPU_FILE)):
            status, resp = srv.ingest(read_testdata(rel), name=name, format="pprof", **{"from": T0, "until": T0 + 10})
            assert status == 200, (name, status, resp)
        before = totals(srv)
        assert before[("tc", TC_TYPE)] == 5, before
        assert srv.request("POST", "/api/v1/admin/flush")[0] == 200
        assert totals(srv) == before
    finally:
        srv.stop()
    # A restart reads the cut block from disk: every profile of the head is still there.
    with Server(data_dir=srv.data_dir) as again:
        assert totals(again) == before, (totals(again), before)
        # The merged pprof keeps them as samples without locations, as go tool pprof counts them.
        st, body = again.get("/api/v1/query", query=TC_TYPE + '{service_name="tc"}', format="pprof",
                             **{"from": T0 - 10, "until": T0 + 60})
        assert st == 200
        path = os.path.join(srv.data_dir, "tc.pb.gz")
        open(path, "wb").write(body)
        out = subprocess.run(["go", "tool", "pprof", "-top", path], capture_output=True, text=True).stdout
        assert "of 5 total" in out, out
    check = cli("check", srv.data_dir)
    assert check.returncode == 0, check.stdout + check.stderr


@test
def second_server_on_one_data_dir_is_refused():
    body = read_testdata(CPU_FILE)
    each = pprof_raw(os.path.join(ARGS.testdata, CPU_FILE))[1][1]
    first = Server().start()
    try:
        for i in range(12):
            assert first.ingest(body, name="locked", format="pprof", **{"from": T0 + i})[0] == 200
        # A second server on the same directory (another port) exits non-zero naming the holder.
        second = subprocess.run([ARGS.binary, "--listen", f"127.0.0.1:{free_port()}",
                                 "--data-dir", first.data_dir], capture_output=True, text=True, timeout=60)
        assert second.returncode != 0, second.stderr
        assert f"pid {first.proc.pid}" in second.stderr and "in use" in second.stderr, second.stderr
        # Read-only check works beside the live server; quarantine (a writer) is refused.
        r = cli("check", first.data_dir)
        assert r.returncode == 0, r.stdout + r.stderr
        r = cli("check", first.data_dir, "--quarantine")
        assert r.returncode != 0 and "in use" in r.stderr, r.stdout + r.stderr
        assert first.get("/healthz")[0] == 200
    finally:
        first.stop()
    with Server(data_dir=first.data_dir) as again:  # nothing was lost
        assert cpu_total(again, "locked") == 12 * each


def wal_segments(data_dir):
    d = os.path.join(data_dir, "wal")
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".wal"))


@test
def damaged_wal_record_in_the_middle_loses_only_that_record():
    body = read_testdata(CPU_FILE)
    each = pprof_raw(os.path.join(ARGS.testdata, CPU_FILE))[1][1]
    srv = Server().start()
    for i in range(10):
        assert srv.ingest(body, name="walrot", format="pprof", **{"from": T0 + i})[0] == 200
    srv.stop(signal.SIGKILL)  # the head only lives in the WAL now
    seg = [p for p in wal_segments(srv.data_dir) if os.path.getsize(p) > 0][-1]
    size = len(open(seg, "rb").read().rstrip(b"\0"))  # the records: zeros made ahead follow them
    with open(seg, "r+b") as f:  # one flipped byte at 35% of the records
        f.seek(int(size * 0.35))
        b = f.read(1)
        f.seek(int(size * 0.35))
        f.write(bytes([b[0] ^ 0x5A]))
    r = cli("check", srv.data_dir)
    assert r.returncode != 0 and "damaged" in r.stdout, r.stdout
    with Server(data_dir=srv.data_dir) as again:
        assert cpu_total(again, "walrot") == 9 * each  # exactly the damaged record is gone
        assert metric(again, "hearth_wal_corrupt_records_total") == 1
        assert again.ingest(body, name="walrot", format="pprof", **{"from": T0 + 50})[0] == 200
    with Server(data_dir=srv.data_dir) as again:  # a clean stop cut the head into a block
        assert cpu_total(again, "walrot") == 10 * each
    r = cli("check", srv.data_dir)
    assert r.returncode == 0, r.stdout


@test
def crash_on_a_full_disk_restarts_read_only_and_recovers():
    with small_tmpfs() as mnt:
        data_dir = os.path.join(mnt, "data")
        body = read_testdata(CPU_FILE)
        each = pprof_raw(os.path.join(ARGS.testdata, CPU_FILE))[1][1]
        srv = Server(data_dir, log_dir=ARGS.tmp).start()
        acked = 0
        for i in range(3):
            assert srv.ingest(body, name="full", format="pprof", **{"from": T0 + i})[0] == 200
            acked += 1
        fill_disk(mnt, 0)
        # Refused uploads of new series leave nothing behind.
        for i in range(3):
            st, b = srv.ingest(body, name=f"orphan{i}", format="pprof", **{"from": T0 + i})
            assert st == 503 and b"no space left" in b.lower(), (st, b)
        srv.stop(signal.SIGKILL)  # a crash while the disk is full
        srv = Server(data_dir, log_dir=ARGS.tmp).start()  # starts anyway, read-only
        try:
            assert cpu_total(srv, "full") == acked * each
            names = srv.get_json("/api/v1/labels/service_name/values")
            assert "orphan0" not in json.dumps(names), names
            st, b = srv.ingest(body, name="full", format="pprof", **{"from": T0 + 10})
            assert st == 503 and b"no space left" in b.lower(), (st, b)
            r = cli("check", data_dir)
            assert r.returncode == 0, r.stdout + r.stderr
            os.unlink(os.path.join(mnt, "filler"))  # space returns: writes resume without a restart
            wait_until(lambda: srv.ingest(body, name="full", format="pprof", **{"from": T0 + 20})[0] == 200,
                       30, 0.5, "writes to resume once space returns")
            acked += 1
        finally:
            srv.stop()
        with Server(data_dir, log_dir=ARGS.tmp) as again:
            assert cpu_total(again, "full") == acked * each


def padded_elf(build_id, pad):
    """A real ELF carrying build_id, padded to about pad bytes with a section of random bytes."""
    d = tempfile.mkdtemp(prefix="hearth-pad-", dir=ARGS.tmp)
    prog, blob, out = (os.path.join(d, n) for n in ("prog", "pad", "out"))
    open(prog, "wb").write(elf_with_build_id(build_id))
    open(blob, "wb").write(os.urandom(pad))
    subprocess.run(["objcopy", "--add-section", ".pad=" + blob, prog, out], check=True, capture_output=True)
    return open(out, "rb").read()


def upload_debug_files(srv, first, n, flag):
    """PUTs up to n padded debug files (4 MiB each) until one is refused; the statuses. A refusal
    must be 507 naming flag."""
    codes = []
    for i in range(n):
        bid = "%040x" % (first + i)
        st, b, _ = srv.request("PUT", "/api/v1/debuginfo/" + bid, padded_elf(bid, 4 << 20))
        codes.append(st)
        if st != 200:
            assert st == 507 and flag in json.loads(b)["error"], (st, b[:300])
            break
    return codes


@test
def debug_files_never_take_the_disk_that_profiles_need():
    """Debug-file uploads on a 40 MiB data disk until refused: they stop with 507 while
    --debuginfo-keep-free bytes are still free, and every profile upload after them succeeds.
    With --debuginfo-quota, they stop at the quota."""
    body = open(os.path.join(ARGS.testdata, "pprof", "go-runtime-cpu-00.pb.gz"), "rb").read()
    with small_tmpfs("40m") as mnt:
        with Server(os.path.join(mnt, "data"), log_dir=ARGS.tmp,
                    extra=["--debuginfo-keep-free", "12MiB", "--max-debuginfo-bytes", "8MiB"]) as srv:
            codes = upload_debug_files(srv, 0xDE000, 12, "--debuginfo-keep-free")
            assert codes[-1] == 507 and codes.count(200) >= 3, codes
            free = shutil.disk_usage(mnt).free
            assert free >= 11 << 20, f"only {free} bytes free after the debug uploads"
            for i in range(30):
                st, b = srv.ingest(body, name="after-debug", format="pprof", **{"from": T0 + i})
                assert st == 200, (i, st, b[:300])
    with Server(extra=["--debuginfo-quota", "10MiB"]) as srv:
        assert upload_debug_files(srv, 0xDF000, 4, "--debuginfo-quota") == [200, 200, 507]

