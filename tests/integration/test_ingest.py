"""Ingest: every way a profile arrives and what is stored from it.

Every valid pprof of the shared test data stores the totals go tool pprof reads; folded and
lines text; Go runtime profiles raw and as pyroscope-go multipart (with the deltas of cumulative
types); JFR recordings; Parca's writeraw; the real Node.js agent; a format told by its bytes
when not named. Bad input gets a clear status and stores nothing; the same profile twice adds no
symbols; labels that would make a series per request stay unindexed; negative gauge samples are
dropped; decode memory is bounded before unpacking; oversized labels and overflowing values are
refused.
"""
import gzip
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time

from harness import (
    ARGS, CPU, CPU_FILE, T0, Server, cli, connect_json, cpu_total, memory_slack, metric, multipart, node_agent_dir,
    query, read_testdata, test, types_of, vm_hwm_mb)
from pprof_ref import build_goprof, pprof_raw, unlocated_totals
from protowire import pb_encode_field, pb_field, pb_put_varint, push_request_proto


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
        st, b, _ = srv.request_early_answer("POST", "/ingest?name=keep&format=pprof", os.urandom(3 << 20),
                                            {"Content-Type": "application/octet-stream"})
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


JFR_CONTEXT_PROGRAM = r"""
import java.nio.file.Path;
import jdk.jfr.*;

public class Ctx {
    /* async-profiler's wall-clock event, as its recordings name it and its fields */
    @Name("profiler.WallClockSample") @StackTrace(true)
    static class Wall extends Event { long contextId; long spanId; int samples; }

    static void emit(long ctx, long span, int samples) {
        Wall w = new Wall();
        w.contextId = ctx; w.spanId = span; w.samples = samples;
        w.commit();
    }
    static void checkout(int n) { for (int i = 0; i < n; i++) emit(1, 0xabcL, 2); }
    static void search(int n) { for (int i = 0; i < n; i++) emit(2, 0, 1); }
    static void idle(int n) { for (int i = 0; i < n; i++) emit(0, 0, 1); }

    static volatile long sink;
    static long spin(long n) { long x = 0; for (long i = 0; i < n; i++) x += i * 31 ^ (x >>> 3); return x; }

    public static void main(String[] args) throws Exception {
        if (args.length == 0) { /* burn CPU for a second, for the JDK's own execution samples */
            long end = System.nanoTime() + 1_000_000_000L;
            while (System.nanoTime() < end) sink += spin(1_000_000);
            return;
        }
        Recording r = new Recording();
        r.enable(Wall.class);
        r.start();
        checkout(300); search(200); idle(100);
        r.stop();
        r.dump(Path.of(args[0]));
    }
}
"""


def jfr_labels_snapshot(contexts):
    """Pyroscope's LabelsSnapshot: {context id: {name: value}} with the strings table it refers to."""
    strings = {}

    def sid(s):
        return strings.setdefault(s, len(strings) + 1)
    ctxs = b""
    for cid, labels in contexts.items():
        body = b"".join(pb_field(1, pb_encode_field(1, 0, sid(k)) + pb_encode_field(2, 0, sid(v)))
                        for k, v in labels.items())
        ctxs += pb_field(1, pb_encode_field(1, 0, cid) + pb_field(2, body))
    return ctxs + b"".join(pb_field(2, pb_encode_field(1, 0, i) + pb_field(2, s.encode())) for s, i in strings.items())


@test
def jfr_context_labels_and_wall_clock_samples_from_a_real_jdk():
    """Recordings a real JDK wrote (Debian's JDK 17). Its own CPU samples
    (-XX:StartFlightRecording, default settings: one sample per 20 ms): every sample counted at
    the recording's period, in the method that burned it. And, through jdk.jfr, async-profiler's
    wall-clock event with its contextId/spanId/samples fields, sent as the Java agent sends it:
    multipart `jfr` plus a gzipped `labels` LabelsSnapshot. Each listed context is its own
    series with its labels; events of context 0 stay under the upload's labels; a span's samples
    merge alone; a `labels` part that is not a snapshot, or names a string it lacks, is refused."""
    d = tempfile.mkdtemp(prefix="jfrctx-", dir=ARGS.tmp)
    with open(os.path.join(d, "Ctx.java"), "w") as f:
        f.write(JFR_CONTEXT_PROGRAM)
    subprocess.run(["javac", "-d", d, os.path.join(d, "Ctx.java")], check=True, capture_output=True)
    rec = os.path.join(d, "ctx.jfr")
    subprocess.run(["java", "-cp", d, "Ctx", rec], check=True, capture_output=True, timeout=120)
    jfr = open(rec, "rb").read()
    burn = os.path.join(d, "burn.jfr")
    subprocess.run(["java", "-XX:StartFlightRecording=filename=%s,settings=default" % burn, "-cp", d, "Ctx"],
                   check=True, capture_output=True, timeout=120)
    summary = subprocess.run(["jfr", "summary", burn], check=True, capture_output=True, text=True).stdout
    nexec = int(re.search(r"jdk\.ExecutionSample\s+(\d+)", summary).group(1))
    labels = gzip.compress(jfr_labels_snapshot({1: {"endpoint": "/checkout", "region": "eu"},
                                                2: {"endpoint": "/search"}}))
    wall = "wall:wall:nanoseconds:wall:nanoseconds"
    with Server() as srv:
        mp, headers = multipart([("jfr", gzip.compress(jfr)), ("labels", labels)])
        st, b = srv.ingest(mp, headers=headers, name="shop{env=ci}", format="jfr", **{"from": T0})
        assert st == 200, b
        tick = 10_000_000  # no sampling interval in the recording: the 10 ms default
        want = {'{service_name="shop",endpoint="/checkout",region="eu",env="ci"}': 300 * 2 * tick,
                '{service_name="shop",endpoint="/search"}': 200 * tick,
                '{service_name="shop",endpoint=""}': 100 * tick}
        for sel, total in want.items():
            ans = query(srv, wall + sel, frm=T0 - 10, until=T0 + 600)
            assert ans["total"] == total, (sel, ans["total"], total)
        st, b = srv.ingest(open(burn, "rb").read(), name="burn", format="jfr", **{"from": T0})
        assert st == 200, b
        ans = query(srv, CPU + '{service_name="burn"}', frm=T0 - 10, until=T0 + 600)
        assert nexec > 10 and ans["total"] == nexec * 20_000_000, (nexec, ans["total"])
        assert ans["functions"][0]["name"] == "Ctx.spin", ans["functions"][:3]
        names = {f["name"] for f in query(srv, wall + '{endpoint="/search"}', frm=T0 - 10, until=T0 + 600)["functions"]}
        assert "Ctx.search" in names and "Ctx.checkout" not in names, names
        st, fg = connect_json(srv, "SelectMergeSpanProfile", dict(
            profileTypeID=wall, labelSelector='{service_name="shop"}', spanSelector=["0000000000000abc"],
            start=(T0 - 10) * 1000, end=(T0 + 600) * 1000))
        assert st == 200 and int(fg["flamegraph"]["total"]) == 300 * 2 * tick, (st, fg)
        assert query(srv, "process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name=\"shop\"}",
                     frm=T0 - 10, until=T0 + 600)["total"] == 0  # wall mode was not on: no CPU
        for bad, why in ((b"\xff\xff", "LabelsSnapshot"), (jfr_labels_snapshot({1: {"a": "b"}})[:-4], "LabelsSnapshot"),
                         (pb_field(1, pb_encode_field(1, 0, 1) + pb_field(2, pb_field(1, pb_encode_field(1, 0, 7)
                                                                                      + pb_encode_field(2, 0, 8)))),
                          "string")):
            mp, headers = multipart([("jfr", jfr), ("labels", bad)])
            st, b = srv.ingest(mp, headers=headers, name="bad", format="jfr", **{"from": T0})
            assert st == 422 and why in json.loads(b)["error"], (why, st, b)


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


@test
def pyroscope_nodejs_agent_pushes_unchanged():
    here = node_agent_dir()
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
        # Several flushes of real CPU: how much depends on the machine's load (a busy CI box gave
        # the 10 s busy loop under a second), so the floor is a tenth of a second.
        assert cpu["profiles"] >= 3 and cpu["total"] > 10**8, cpu
        assert "busyMath" in cpu["functions"][0]["name"], cpu["functions"][:3]
        fg = query(srv, "wall:wall:nanoseconds:wall:nanoseconds" + sel, fmt="flamegraph", **span)
        assert fg["metadata"]["units"] == "samples" and fg["metadata"]["sampleRate"] == 1000000000
        heap = query(srv, "memory:inuse_space:bytes:inuse_space:bytes" + sel, fmt="flamegraph", **span)
        assert heap["metadata"]["units"] == "bytes" and heap["metadata"]["aggregation"] == "average"
        assert heap["flamebearer"]["numTicks"] > 0


@test
def upload_format_is_told_by_content_when_not_named():
    cpu = read_testdata("pprof/go-runtime-cpu-00.pb.gz")
    each = pprof_raw(os.path.join(ARGS.testdata, "pprof/go-runtime-cpu-00.pb.gz"))[1][1]
    raw = "corpus/gen__go119.cpu.labels.uncompressed.pb"
    jfr = "corpus/jfrparser__parser__testdata__cortex-dev-01__kafka-0__cpu_lock0_alloc0__0.jfr.gz"
    with Server() as srv:
        assert srv.ingest(cpu, name="sniff-gz", **{"from": T0})[0] == 200  # gzipped pprof, no format
        assert query(srv, CPU + '{service_name="sniff-gz"}')["total"] == each
        st, b = srv.ingest(read_testdata(raw), name="sniff-raw", **{"from": T0})  # plain protobuf
        assert st == 200, b
        types, totals = pprof_raw(os.path.join(ARGS.testdata, raw))
        got = types_of(srv, "sniff-raw")
        assert query(srv, '%s{service_name="sniff-raw"}' % got[types[1]])["total"] == totals[1]
        st, b = srv.ingest(read_testdata(jfr), name="sniff-jfr", **{"from": T0})  # gzipped JFR
        assert st == 200, b
        assert query(srv, CPU + '{service_name="sniff-jfr"}')["total"] > 0
        st, b = srv.ingest(gzip.decompress(read_testdata(jfr)), name="sniff-jfr2", **{"from": T0})  # plain JFR
        assert st == 200, b
        assert srv.ingest(b"main;a 3\nmain;b 1\n", name="sniff-folded.cpu", sampleRate="100", **{"from": T0})[0] == 200
        assert query(srv, CPU + '{service_name="sniff-folded"}')["total"] == 4 * 10_000_000
    # hearth push detects the same way.
    with Server() as srv:
        path = os.path.join(ARGS.testdata, jfr)
        r = cli("push", path, "--name", "cli-jfr", "--from", str(T0), "--server", f"http://127.0.0.1:{srv.port}")
        assert r.returncode == 0, r.stdout + r.stderr
        assert query(srv, CPU + '{service_name="cli-jfr"}')["total"] > 0


def labelled_pprof(samples):
    """A gzipped one-type CPU pprof; samples: [(value, {label: str})], all on one stack."""
    f, e = pb_field, pb_encode_field
    strings = ["", "cpu", "nanoseconds", "main"]

    def sid(s):
        if s not in strings:
            strings.append(s)
        return strings.index(s)
    body = f(1, e(1, 0, 1) + e(2, 0, 2))
    body += f(4, e(1, 0, 1) + f(4, e(1, 0, 1))) + f(5, e(1, 0, 1) + e(2, 0, 3))
    for value, labels in samples:
        lab = b"".join(f(3, e(1, 0, sid(k)) + e(2, 0, sid(v))) for k, v in labels.items())
        body += f(2, f(1, b"\x01") + f(2, pb_put_varint(value)) + lab)
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
        assert query(srv, CPU + '{service_name="traced"}')["total"] == 1440
        series = srv.get_json("/api/v1/series", query='{service_name="reqs"}')["series"]
        assert len(series) == 1 and "request_id" not in series[0]["labels"], series
        assert query(srv, CPU + '{service_name="reqs"}')["total"] == 100
        m = srv.get("/metrics")[1].decode()
        assert 'hearth_unindexed_label_keys_total{reason="span"} 2' in m, m
        assert 'hearth_unindexed_label_keys_total{reason="high_cardinality"} 1' in m, m


def pprof_bytes(sample_types, samples):
    """A minimal pprof: sample_types [(type, unit)], samples [(function, [values])]."""
    strings = [""]

    def s(x):
        if x not in strings:
            strings.append(x)
        return strings.index(x)

    f, field = pb_encode_field, pb_field
    out = b"".join(field(1, f(1, 0, s(t)) + f(2, 0, s(u))) for t, u in sample_types)
    funcs = []
    for i, (fn, values) in enumerate(samples, 1):
        if fn not in funcs:
            funcs.append(fn)
        fid = funcs.index(fn) + 1
        packed = b"".join(pb_put_varint(v) for v in values)
        out += field(2, field(1, pb_put_varint(fid)) + field(2, packed))
    for fid, fn in enumerate(funcs, 1):
        out += field(4, f(1, 0, fid) + field(4, f(1, 0, fid)))  # location fid -> function fid
        out += field(5, f(1, 0, fid) + f(2, 0, s(fn)))
    out += f(9, 0, T0 * 10**9) + field(11, f(1, 0, s("space")) + f(2, 0, s("bytes")))
    return out + b"".join(field(6, x.encode()) for x in strings)


@test
def negative_gauge_samples_are_dropped_and_counted():
    """A pushed heap whose inuse_* samples are partly negative (a delta taken as a snapshot):
    those samples are dropped and counted, the cumulative alloc_* values are kept whole."""
    body = pprof_bytes([("alloc_space", "bytes"), ("inuse_space", "bytes")],
                       [("main.grow", [50, 100]), ("main.shrink", [30, -40]), ("main.idle", [7, -5])])
    with Server() as srv:
        st, b = srv.ingest(body, name="neg", format="pprof", **{"from": T0})
        assert st == 200, b
        sel = '{service_name="neg"}'
        assert query(srv, "memory:inuse_space:bytes:space:bytes" + sel)["total"] == 100
        assert query(srv, "memory:alloc_space:bytes:space:bytes" + sel)["total"] == 87
        fg = query(srv, "memory:inuse_space:bytes:space:bytes" + sel, fmt="flamegraph")
        assert fg["flamebearer"]["numTicks"] == 100
        assert "main.shrink" not in fg["flamebearer"]["names"], fg["flamebearer"]["names"]
        m = srv.get("/metrics")[1].decode()
        assert 'hearth_dropped_samples_total{reason="negative_gauge"} 2' in m, m[-2000:]


def synthetic_pprof(nsamples):
    """A gzipped pprof of nsamples one-frame samples: tiny on the wire, huge unpacked."""
    def field(num, payload):
        return pb_field(num, payload)
    strings = [b"", b"cpu", b"nanoseconds", b"main"]
    prof = field(1, pb_encode_field(1, 0, 1) + pb_encode_field(2, 0, 2))  # sample_type cpu/ns
    prof += field(4, pb_encode_field(1, 0, 1) + field(4, pb_encode_field(1, 0, 1)))  # location 1 -> fn 1
    prof += field(5, pb_encode_field(1, 0, 1) + pb_encode_field(2, 0, 3))  # function 1 "main"
    prof += b"".join(field(6, s) for s in strings)
    sample = field(2, b"\x0a\x01\x01\x12\x01\x07")  # location_id [1], value [7] (packed)
    return gzip.compress(prof + sample * nsamples, 6)


@test
def ingest_stages_are_timed_in_metrics():
    """Each upload that decodes is timed per stage of the write path (decode, store) in a
    histogram; one refused while decoding is counted in neither."""
    with Server() as srv:
        for i in range(3):
            assert srv.ingest(b"main;work 1\n", name="stages.cpu", format="folded", **{"from": T0 + i})[0] == 200
        assert srv.ingest(b"\x1f\x8bnot gzip", name="stages", format="pprof", **{"from": T0})[0] >= 400
        got = {k: metric(srv, 'hearth_ingest_stage_seconds_count{stage="%s"}' % k) for k in ("decode", "store")}
        assert got == {"decode": 3, "store": 3}, got
        assert metric(srv, 'hearth_ingest_stage_seconds_bucket{stage="store",le="+Inf"}') == 3
        assert metric(srv, 'hearth_ingest_stage_seconds_sum{stage="store"}') > 0


@test
def pprof_label_names_are_refused_not_cut():
    """A pprof sample label whose name is 2,000 bytes is refused (400); two 300-byte names
    sharing their first 255 bytes stay two labels (they were cut to 255 bytes and merged)."""
    def enc(num, v):
        return pb_put_varint(num << 3) + pb_put_varint(v)

    def profile(names):
        strings = ["", "cpu", "nanoseconds", "main"] + [x for n in names for x in (n, "v")]
        p = pb_field(1, enc(1, 1) + enc(2, 2)) + pb_field(5, enc(1, 1) + enc(2, 3))
        p += pb_field(4, enc(1, 1) + pb_field(4, enc(1, 1)))
        labels = b"".join(pb_field(3, enc(1, 4 + 2 * i) + enc(2, 5 + 2 * i)) for i in range(len(names)))
        p += pb_field(2, pb_field(1, pb_put_varint(1)) + pb_field(2, pb_put_varint(5)) + labels)
        return gzip.compress(p + b"".join(pb_field(6, x.encode()) for x in strings))
    with Server() as srv:
        st, b = srv.ingest(profile(["k" * 2000]), name="longlabel", format="pprof", **{"from": T0})
        assert st == 400 and "over the limit of 1024" in json.loads(b)["error"], (st, b[:200])
        a, c = "x" * 255 + "a" * 45, "x" * 255 + "c" * 45
        st, b = srv.ingest(profile([a, c]), name="longlabel", format="pprof", **{"from": T0})
        assert st == 200, b
        names = srv.get_json("/api/v1/labels")
        assert a in json.dumps(names) and c in json.dumps(names), names


@test
def decode_memory_is_bounded_before_unpacking():
    over = synthetic_pprof(2_000_001)  # one over the default --max-samples
    assert len(over) < 200_000, len(over)
    big = synthetic_pprof(600_000)
    with Server(extra=["--max-decode-memory", "256MiB"]) as srv:
        base = vm_hwm_mb(srv.proc.pid)
        t = time.time()
        st, b = srv.ingest(over, name="amp", format="pprof", **{"from": T0})
        assert st == 413 and b"2000001 samples" in b, (st, b)
        assert time.time() - t < 5
        assert vm_hwm_mb(srv.proc.pid) - base < 100 * memory_slack(), vm_hwm_mb(srv.proc.pid)  # refused from the wire counts
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
        assert vm_hwm_mb(srv.proc.pid) - base < 600 * memory_slack(), vm_hwm_mb(srv.proc.pid)
        ok = sum(1 for st, _ in codes if st == 200)
        assert cpu_total(srv, "amp") == ok * 600_000 * 7
    with Server(extra=["--max-decode-memory", "32MiB"]) as srv:  # a profile that can never fit: 413
        st, b = srv.ingest(big, name="amp", format="pprof", **{"from": T0})
        assert st == 413 and b"whole decode budget" in b and b"--max-decode-memory" in b, (st, b)


@test
def oversized_labels_and_overflowing_values_are_refused():
    raw = read_testdata(CPU_FILE)
    with Server() as srv:
        # A 10 MB label value through the push API, and a 3 KB one through /ingest.
        body = push_request_proto([({"service_name": "big", "blob": "x" * (10 << 20)}, [raw])])
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
            ans = query(srv, t + '{service_name="ovf"}')
            assert ans["total"] == 0, ans
