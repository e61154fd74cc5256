"""Attacks on stored data (issue 10): inputs and misuse that must never lose what was acknowledged."""
import gzip
import json
import os
import tempfile
import threading
import time
import signal
import subprocess

import run
from run import T0, Server, test

CPU_FILE = "pprof/go-runtime-cpu-00.pb.gz"
THREADCREATE = "corpus/gen__go119.threadcreate.pb.gz"
TC_TYPE = "threadcreate:threadcreate:count:threadcreate:count"


def data(rel):
    return open(os.path.join(run.ARGS.testdata, rel), "rb").read()


def totals(srv):
    """{service: total} over every stored profile type, from the flame graph root."""
    out = {}
    for svc in ("tc", "cpu"):
        for t in srv.get_json("/api/v1/profile-types", query='{service_name="%s"}' % svc)["profileTypes"]:
            fg = run.query(srv, t["id"] + '{service_name="%s"}' % svc, fmt="flamegraph")
            out[(svc, t["id"])] = fg["flamebearer"]["numTicks"]
    return out


@test
def empty_stack_sample_survives_cut_and_restart():
    # Go's threadcreate profile: 5 samples without locations (go tool pprof: total 5).
    srv = Server().start()
    try:
        for name, rel in (("tc", THREADCREATE), ("cpu", CPU_FILE)):
            status, resp = srv.ingest(data(rel), name=name, format="pprof", **{"from": T0, "until": T0 + 10})
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
    check = run.cli("check", srv.data_dir)
    assert check.returncode == 0, check.stdout + check.stderr


def cpu_total(srv, svc):
    return run.query(srv, run.CPU + '{service_name="%s"}' % svc, frm=T0 - 10, until=T0 + 100000)["total"]


@test
def second_server_on_one_data_dir_is_refused():
    body = data(CPU_FILE)
    each = run.pprof_raw(os.path.join(run.ARGS.testdata, CPU_FILE))[1][1]
    first = Server().start()
    try:
        for i in range(12):
            assert first.ingest(body, name="locked", format="pprof", **{"from": T0 + i})[0] == 200
        # A second server on the same directory (another port) exits non-zero naming the holder.
        second = subprocess.run([run.ARGS.binary, "--listen", f"127.0.0.1:{run.free_port()}",
                                 "--data-dir", first.data_dir], capture_output=True, text=True, timeout=60)
        assert second.returncode != 0, second.stderr
        assert f"pid {first.proc.pid}" in second.stderr and "in use" in second.stderr, second.stderr
        # Read-only check works beside the live server; quarantine (a writer) is refused.
        r = run.cli("check", first.data_dir)
        assert r.returncode == 0, r.stdout + r.stderr
        r = run.cli("check", first.data_dir, "--quarantine")
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
    body = data(CPU_FILE)
    each = run.pprof_raw(os.path.join(run.ARGS.testdata, CPU_FILE))[1][1]
    srv = Server().start()
    for i in range(10):
        assert srv.ingest(body, name="walrot", format="pprof", **{"from": T0 + i})[0] == 200
    srv.stop(signal.SIGKILL)  # the head only lives in the WAL now
    seg = [p for p in wal_segments(srv.data_dir) if os.path.getsize(p) > 0][-1]
    size = os.path.getsize(seg)
    with open(seg, "r+b") as f:  # one flipped byte at 35% of the segment
        f.seek(int(size * 0.35))
        b = f.read(1)
        f.seek(int(size * 0.35))
        f.write(bytes([b[0] ^ 0x5A]))
    r = run.cli("check", srv.data_dir)
    assert r.returncode != 0 and "damaged" in r.stdout, r.stdout
    with Server(data_dir=srv.data_dir) as again:
        assert cpu_total(again, "walrot") == 9 * each  # exactly the damaged record is gone
        assert run.metric(again, "hearth_wal_corrupt_records_total") == 1
        assert again.ingest(body, name="walrot", format="pprof", **{"from": T0 + 50})[0] == 200
    with Server(data_dir=srv.data_dir) as again:  # a clean stop cut the head into a block
        assert cpu_total(again, "walrot") == 10 * each
    r = run.cli("check", srv.data_dir)
    assert r.returncode == 0, r.stdout


@test
def crash_on_a_full_disk_restarts_read_only_and_recovers():
    mnt = tempfile.mkdtemp(prefix="hearth-tmpfs-", dir=run.ARGS.tmp)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", mnt], check=True, capture_output=True)
    try:
        data_dir = os.path.join(mnt, "data")
        body = data(CPU_FILE)
        each = run.pprof_raw(os.path.join(run.ARGS.testdata, CPU_FILE))[1][1]
        srv = Server(data_dir, log_dir=run.ARGS.tmp).start()
        acked = 0
        for i in range(3):
            assert srv.ingest(body, name="full", format="pprof", **{"from": T0 + i})[0] == 200
            acked += 1
        run.fill_disk(mnt, 0)
        # Refused uploads of new series leave nothing behind.
        for i in range(3):
            st, b = srv.ingest(body, name=f"orphan{i}", format="pprof", **{"from": T0 + i})
            assert st == 503 and b"no space left" in b.lower(), (st, b)
        srv.stop(signal.SIGKILL)  # a crash while the disk is full
        srv = Server(data_dir, log_dir=run.ARGS.tmp).start()  # starts anyway, read-only
        try:
            assert cpu_total(srv, "full") == acked * each
            names = srv.get_json("/api/v1/labels/service_name/values")
            assert "orphan0" not in json.dumps(names), names
            st, b = srv.ingest(body, name="full", format="pprof", **{"from": T0 + 10})
            assert st == 503 and b"no space left" in b.lower(), (st, b)
            r = run.cli("check", data_dir)
            assert r.returncode == 0, r.stdout + r.stderr
            os.unlink(os.path.join(mnt, "filler"))  # space returns: writes resume without a restart
            deadline = time.time() + 30
            while True:
                st, b = srv.ingest(body, name="full", format="pprof", **{"from": T0 + 20})
                if st == 200 or time.time() > deadline:
                    break
                time.sleep(0.5)
            assert st == 200, (st, b)
            acked += 1
        finally:
            srv.stop()
        with Server(data_dir, log_dir=run.ARGS.tmp) as again:
            assert cpu_total(again, "full") == acked * each
    finally:
        subprocess.run(["umount", mnt], capture_output=True)


def synthetic_pprof(nsamples):
    """A gzipped pprof of nsamples one-frame samples: tiny on the wire, huge unpacked."""
    def field(num, payload):
        return run.pb_field(num, payload)
    strings = [b"", b"cpu", b"nanoseconds", b"main"]
    prof = field(1, run.pb_encode_field(1, 0, 1) + run.pb_encode_field(2, 0, 2))  # sample_type cpu/ns
    prof += field(4, run.pb_encode_field(1, 0, 1) + field(4, run.pb_encode_field(1, 0, 1)))  # location 1 -> fn 1
    prof += field(5, run.pb_encode_field(1, 0, 1) + run.pb_encode_field(2, 0, 3))  # function 1 "main"
    prof += b"".join(field(6, s) for s in strings)
    sample = field(2, b"\x0a\x01\x01\x12\x01\x07")  # location_id [1], value [7] (packed)
    return gzip.compress(prof + sample * nsamples, 6)


def memory_slack():
    """How much more memory the server binary under test takes for the same work:
    ThreadSanitizer's shadow memory multiplies every allocation."""
    return 4 if "tsan" in os.path.basename(run.ARGS.binary) else 1


def vm_hwm_mb(srv):
    for line in open(f"/proc/{srv.proc.pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


@test
def decode_memory_is_bounded_before_unpacking():
    over = synthetic_pprof(2_000_001)  # one over the default --max-samples
    assert len(over) < 200_000, len(over)
    big = synthetic_pprof(600_000)
    with Server(extra=["--max-decode-memory", "256MiB"]) as srv:
        base = vm_hwm_mb(srv)
        t = time.time()
        st, b = srv.ingest(over, name="amp", format="pprof", **{"from": T0})
        assert st == 413 and b"2000001 samples" in b, (st, b)
        assert time.time() - t < 5
        assert vm_hwm_mb(srv) - base < 100 * memory_slack(), vm_hwm_mb(srv)  # refused from the wire counts
        # Six at once: the budget admits what fits, refuses the rest with 429, never more at once.
        codes = []
        lock = threading.Lock()

        def push():
            st, b = srv.ingest(big, name="amp", format="pprof", **{"from": T0})
            with lock:
                codes.append((st, b))
        threads = [threading.Thread(target=push) for _ in range(6)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert all(st in (200, 429) for st, _ in codes), codes
        assert all(b"--max-decode-memory" in b for st, b in codes if st == 429), codes
        assert any(st == 200 for st, _ in codes), codes
        assert vm_hwm_mb(srv) - base < 600 * memory_slack(), vm_hwm_mb(srv)
        ok = sum(1 for st, _ in codes if st == 200)
        assert cpu_total(srv, "amp") == ok * 600_000 * 7
    with Server(extra=["--max-decode-memory", "32MiB"]) as srv:  # a profile that can never fit: 413
        st, b = srv.ingest(big, name="amp", format="pprof", **{"from": T0})
        assert st == 413 and b"whole decode budget" in b, (st, b)


@test
def oversized_labels_and_overflowing_values_are_refused():
    raw = data(CPU_FILE)
    with Server() as srv:
        # A 10 MB label value through the push API, and a 3 KB one through /ingest.
        body = run.push_request_proto([({"service_name": "big", "blob": "x" * (10 << 20)}, [raw])])
        st, resp, _ = srv.request("POST", "/push.v1.PusherService/Push", body,
                                  {"Content-Type": "application/proto"})
        assert st == 400 and b"max-label-value-bytes" in resp, (st, resp[:300])
        st, resp = srv.ingest(raw, name="big{blob=%s}" % ("y" * 3000), format="pprof", **{"from": T0})
        assert st == 400 and b"blob" in resp and b"max-label-value-bytes" in resp, (st, resp)
        st, resp = srv.ingest(raw, name="big{blob=%s}" % ("y" * 2048), format="pprof", **{"from": T0})
        assert st == 200, resp  # at the limit is fine
        # int64 folded values: scaled past the range, or summing past it.
        for text in (b"main;a 9223372036854775807\n", b"main;a 4611686018427387904\nmain;b 4611686018427387904\n"):
            st, resp = srv.ingest(text, name="ovf.cpu", sampleRate="100", **{"from": T0})
            assert st == 422 and b"64-bit" in resp, (st, resp)
        st, resp = srv.ingest(b"main;a 9223372036854775807\n", name="ovf.alloc_objects", **{"from": T0})
        assert st == 200, resp  # a count that fits is kept exactly
        st, resp = srv.ingest(b"main;b 1\n", name="ovf.alloc_objects", **{"from": T0 + 1})
        assert st == 200, resp
        labels = srv.get_json("/api/v1/labels/blob/values")
        assert all(len(v) <= 2048 for v in json.dumps(labels).split('"')), "oversized value stored"
        types = {t["id"] for t in srv.get_json("/api/v1/profile-types")["profileTypes"]}
        cpu = [t for t in types if t.startswith("process_cpu")]
        for t in cpu:  # nothing of the refused folded uploads was stored
            ans = run.query(srv, t + '{service_name="ovf"}')
            assert ans["total"] == 0, ans
