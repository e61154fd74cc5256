"""Queries: the REST and Pyroscope read APIs answer what go tool pprof computes.

Top tables and merges against `go tool pprof -top` and `-proto`; the flame graph and data-frame
shapes; diffs and the single-profile list; labels, series and selectors; gauges averaged over
time; merged pprof dates; PromQL string escapes; what `__name__` means on each API; Pyroscope's
short profile names (`app.cpu`, `app.heap`); negative limits refused.
"""
import gzip
import json
import os
import random
import re
import subprocess
import threading
import urllib.parse

from harness import (
    ARGS, CPU, CPU_FILE, T0, Server, cli, connect_json, connect_proto, cpu_files, memory_slack, metric, proc_status_kib,
    push, query, read_testdata, test, types_of)
from pprof_ref import pprof_peek, pprof_raw, pprof_top
from protowire import pb_decode, pb_encode_field, pb_field, pb_put_varint


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


# ---------------------------------------------------------------- merged pprof dates

def pprof_dates(raw):
    """(time_nanos, duration_nanos) of a pprof, gzipped or not."""
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    p = pb_decode(raw)
    return p.get(9, [0])[0], p.get(10, [0])[0]


@test
def merged_pprof_is_dated_by_its_profiles():
    # Three 10-second profiles at T0, T0+10, T0+20: the merge covers T0 .. T0+30, whatever
    # range the query asked for (from=0 once gave a duration of 498,973 hours).
    sel = CPU + '{service_name="dated"}'
    want = (T0 * 10**9, 30 * 10**9)
    with Server() as srv:
        for i, f in enumerate(cpu_files(3)):
            push(srv, f, "dated", T0 + 10 * i, T0 + 10 * i + 10)
        for frm in (0, T0 - 3600, T0):
            st, body = srv.get("/api/v1/query", query=sel, format="pprof", **{"from": frm, "until": T0 + 3600})
            assert st == 200, body[:200]
            assert pprof_dates(body) == want, (frm, pprof_dates(body))
        path = os.path.join(ARGS.tmp, "dated.pb.gz")
        open(path, "wb").write(body)
        out = subprocess.run(["go", "tool", "pprof", "-raw", path], capture_output=True, text=True, check=True).stdout
        assert "Duration: 30s" in out, out[:400]
        st, raw = connect_proto(srv, "SelectMergeProfile",
                                pb_field(1, CPU.encode()) + pb_field(2, b'{service_name="dated"}') +
                                pb_encode_field(3, 0, 1) + pb_encode_field(4, 0, (T0 + 3600) * 1000))
        assert st == 200 and pprof_dates(raw) == want, (st, pprof_dates(raw) if st == 200 else raw)
        # Nothing merged: no date to claim.
        st, body = srv.get("/api/v1/query", query=sel, format="pprof", **{"from": 0, "until": T0 - 100})
        assert st == 200 and pprof_dates(body) == (0, 0), pprof_dates(body)


@test
def merged_pprof_bytes_do_not_depend_on_how_the_profiles_are_stored():
    """The merged pprof is canonical: the same uploads give the same bytes from the head, from
    one block after a restart, from a block per upload sent in the other order, and after
    compaction (only the symbols its samples reach, every table sorted by content)."""
    files = cpu_files(6)
    reads = [(CPU + '{service_name="canon"}', T0 - 10, T0 + 100), (CPU + "{}", T0 - 10, T0 + 100),
             (CPU + '{service_name="canon"}', T0 + 15, T0 + 35)]

    def answers(srv):
        out = []
        for sel, frm, until in reads:
            st, body = srv.get("/api/v1/query", query=sel, format="pprof", **{"from": frm, "until": until})
            assert st == 200, body[:200]
            out.append(body)
        return out

    with Server() as a:
        for i, f in enumerate(files):
            push(a, f, "canon" if i % 2 else "other", T0 + 10 * i)
        head = answers(a)
        a.stop()
        a.start()
        assert answers(a) == head, "the head and its block give different pprof bytes"
    with Server(extra=["--compact-min-blocks", "2"]) as b:
        for i, f in reversed(list(enumerate(files))):
            push(b, f, "canon" if i % 2 else "other", T0 + 10 * i)
            assert b.request("POST", "/api/v1/admin/flush", b"")[0] == 200
        assert answers(b) == head, "a block per upload, pushed newest first, gives other pprof bytes"
        assert b.request("POST", "/api/v1/admin/compact", b"")[0] == 200
        assert answers(b) == head, "compaction changed the pprof bytes"


# ---------------------------------------------------------------- 7. PromQL string literals

@test
def selector_strings_decode_like_promql():
    path = cpu_files(1)[0]
    total = pprof_raw(path)[1][1]
    with Server() as srv:
        for pod in ("web-42", "web-x"):
            push(srv, path, "esc{pod=%s}" % pod, T0)
        digits = ['{pod=~"web-\\\\d+"}', "{pod=~'web-\\\\d+'}", "{pod=~`web-\\d+`}",
                  '{pod="web\\x2d42"}', '{pod="web\\u002d42"}', '{pod="web\\05542"}']
        for sel in digits:
            assert query(srv, CPU + sel)["total"] == total, sel
        assert query(srv, CPU + "{pod=~`web-.*`}")["total"] == 2 * total
        # Prometheus refuses an escape it does not know: "\d" in a double-quoted string.
        for bad in ('{pod=~"web-\\d+"}', "{pod=~'\\.'}", '{pod="\\\'"}', '{pod="\\uD800"}', "{pod=`web}"):
            st, body = srv.get("/api/v1/query", query=CPU + bad, **{"from": T0 - 10, "until": T0 + 10})
            msg = json.loads(body).get("error", "") if st == 400 else ""
            assert "escape" in msg or "unterminated" in msg, (bad, st, body)
        st, answer = connect_json(srv, "SelectMergeStacktraces", {
            "profileTypeID": CPU, "labelSelector": '{pod=~"web-\\d+"}', "start": 1, "end": (T0 + 10) * 1000})
        assert st == 400 and answer["code"] == "invalid_argument", (st, answer)
        st, answer = connect_json(srv, "SelectMergeStacktraces", {
            "profileTypeID": CPU, "labelSelector": "{pod=~`web-\\d+`}", "start": 1, "end": (T0 + 10) * 1000})
        assert st == 200 and int(answer["flamegraph"]["total"]) == total, (st, answer)


# ---------------------------------------------------------------- 8. __name__ / 14. short names

def go_types(srv, service):
    return {t["id"] for t in srv.get_json("/api/v1/profile-types", query='{service_name="%s"}' % service)["profileTypes"]}


@test
def name_label_means_the_same_on_rest_and_connect():
    cpu, heap = cpu_files(1)[0], os.path.join(ARGS.testdata, "pprof", "go-runtime-heap.pb.gz")
    with Server() as srv:
        push(srv, cpu, "gosvc", T0)
        push(srv, heap, "gosvc", T0)
        srv.ingest(b"a;b 5\n", name="other.wall", format="folded", **{"from": T0})
        # Pyroscope 0.x's route lists applications, each a name its /render takes back.
        apps = srv.get_json("/pyroscope/label-values", label="__name__")
        assert apps == srv.get_json("/label-values", label="__name__")
        for want in ("gosvc.cpu", "gosvc.alloc_space", "gosvc.inuse_space", "other.wall"):
            assert want in apps, (want, apps)
        assert not any(":" in a for a in apps), apps
        for app in apps:
            st, body = srv.get("/render", name=app, **{"from": T0 - 10, "until": T0 + 60})
            assert st == 200 and json.loads(body)["flamebearer"]["numTicks"] > 0, (app, st, body[:200])
        # REST and Connect agree on __name__, and a matcher selects by the values they list.
        rest = srv.get_json("/api/v1/labels/__name__/values")["values"]
        st, conn = connect_json(srv, "LabelValues", {"name": "__name__"})
        assert st == 200 and rest == conn["names"] == ["memory", "process_cpu", "wall"], (rest, conn)
        rest = srv.get_json("/api/v1/labels/__profile_type__/values")["values"]
        st, conn = connect_json(srv, "LabelValues", {"name": "__profile_type__"})
        assert rest == conn["names"] and CPU in rest, (rest, conn)
        for name in ("memory", "process_cpu"):
            series = srv.get_json("/api/v1/series", query='{__name__="%s"}' % name)["series"]
            assert series and all(s["profileType"].startswith(name + ":") for s in series), (name, series)


@test
def short_names_map_to_the_types_an_app_has():
    cpu, heap = cpu_files(1)[0], os.path.join(ARGS.testdata, "pprof", "go-runtime-heap.pb.gz")
    cpu_total = pprof_raw(cpu)[1][1]
    heap_types, heap_totals = pprof_raw(heap)
    heap_by_type = dict(zip((t for t, _ in heap_types), heap_totals))
    span = {"from": T0 - 10, "until": T0 + 60}
    with Server() as srv:
        push(srv, cpu, "gosvc", T0)
        push(srv, heap, "gosvc", T0)
        # A wall-clock profile whose CPU time is a `cpu` sample type, as the Node agent sends it.
        node_wall = "wall:cpu:nanoseconds:wall:nanoseconds"
        st, _, _ = srv.request("POST", "/ingest?" + urllib.parse.urlencode({"name": "node-demo", "format": "pprof",
                                                                             "from": T0}),
                               node_profile(), {"Content-Type": "application/octet-stream"})
        assert st == 200
        assert node_wall in go_types(srv, "node-demo"), go_types(srv, "node-demo")
        cases = {"gosvc.cpu": cpu_total, "gosvc.itimer": cpu_total, "gosvc.heap": heap_by_type["inuse_space"],
                 "gosvc.inuse_space": heap_by_type["inuse_space"], "gosvc.inuse_objects": heap_by_type["inuse_objects"],
                 "gosvc.alloc_space": heap_by_type["alloc_space"], "gosvc.alloc_objects": heap_by_type["alloc_objects"],
                 "node-demo.cpu": NODE_CPU}
        for name, want in cases.items():
            assert query(srv, name + "{}", **span)["total"] == want, name
            r = srv.get_json("/pyroscope/render", query=name, **span)
            assert r["flamebearer"]["numTicks"] == want, name
        # A name the app has no profile of, or a selector without a type: 400 listing the app's types.
        for q, needle in (("gosvc.goroutines", "inuse_space, "), ("node-demo.alloc_space", "cpu, "),
                          ('{service_name="gosvc"}', "alloc_objects, ")):
            for path in ("/api/v1/query", "/pyroscope/render", "/api/v1/timeseries"):
                st, body = srv.get(path, query=q, **span)
                assert st == 400 and needle in json.loads(body)["error"], (q, path, st, body)
        # An app with nothing stored keeps the usual type: an empty answer, not an error.
        assert query(srv, "nobody.heap{}", **span)["total"] == 0
        # The profiles list says when one upload became several series: the Go CPU profile
        # carries the pprof sample label `endpoint`.
        lst = srv.get_json("/api/v1/profiles", query="gosvc.cpu", **span)
        assert len(lst["profiles"]) > 1 and sum(p["total"] for p in lst["profiles"]) == cpu_total
        assert all(p["splitBy"] == ["endpoint"] for p in lst["profiles"]), lst["profiles"]
        one = srv.get_json("/api/v1/profiles", query="gosvc.inuse_space", **span)["profiles"]
        assert len(one) == 1 and "splitBy" not in one[0], one


NODE_CPU = 30000000


def node_profile():
    """A minimal wall profile as @pyroscope/nodejs shapes it: samples/count, wall and cpu in ns."""
    strings = [b"", b"samples", b"count", b"wall", b"nanoseconds", b"cpu", b"main", b"busyMath"]
    vt = lambda t, u: pb_encode_field(1, 0, t) + pb_encode_field(2, 0, u)
    body = pb_field(1, vt(1, 2)) + pb_field(1, vt(3, 4)) + pb_field(1, vt(5, 4))
    body += pb_field(2, pb_field(1, bytes([2, 1])) + pb_field(2, bytes([3]) + pb_put_varint(50000000)
                                                                          + pb_put_varint(NODE_CPU)))
    for i, fn in ((1, 6), (2, 7)):
        body += pb_field(4, pb_encode_field(1, 0, i) + pb_field(4, pb_encode_field(1, 0, i)))
        body += pb_field(5, pb_encode_field(1, 0, i) + pb_encode_field(2, 0, fn))
    body += b"".join(pb_field(6, s) for s in strings)
    body += pb_field(11, vt(3, 4)) + pb_encode_field(12, 0, 10000000)
    return body


@test
def negative_limits_are_refused_everywhere():
    with Server() as srv:
        assert srv.ingest(read_testdata("pprof/go-runtime-cpu-00.pb.gz"), name="lim", format="pprof", **{"from": T0})[0] == 200
        sel = CPU + '{service_name="lim"}'
        span = {"from": T0 - 10, "until": T0 + 60}
        for path, extra in (("/api/v1/query", {"format": "top"}), ("/api/v1/profiles", {})):
            st, body = srv.get(path, query=sel, limit="-5", **extra, **span)
            assert st == 400 and b"limit" in body, (path, st, body)
        assert len(srv.get_json("/api/v1/query", query=sel, format="top", limit="3", **span)["functions"]) == 3


def cpu_paths(n):
    return [os.path.join(ARGS.testdata, "pprof", f"go-runtime-cpu-0{i}.pb.gz") for i in range(n)]


def three_cpu_profiles(srv, files):
    """Pushes files as service `svc`, 10 s apart; returns go tool pprof's merge of them, the
    reference the one-function views are checked against."""
    for i, f in enumerate(files):
        assert srv.ingest(open(f, "rb").read(), name="svc", format="pprof", **{"from": T0 + i * 10})[0] == 200
    merged = os.path.join(srv.data_dir, "ref.pb.gz")
    subprocess.run(["go", "tool", "pprof", "-proto", "-output", merged] + files, check=True, capture_output=True)
    return merged


def pprof_merge(srv, files, name):
    out = os.path.join(srv.data_dir, name)
    subprocess.run(["go", "tool", "pprof", "-proto", "-output", out] + files, check=True, capture_output=True)
    return out


@test
def a_cold_top_table_spells_a_services_names_once():
    """Cut blocks name a function table's functions by fingerprint (their names apart): on a
    fresh server, the first of a service's partitions reads its names and the next ones with
    the same names are mapped by the fingerprints alone. A partition with a name the
    dictionary lacks reads its own; the answer is go tool pprof's either way."""
    files = cpu_paths(2)
    same = [files[0]] * 3  # one file three times: three partitions of one name list
    with Server(extra=["--compact-min-blocks", "0"]) as srv:
        for i, f in enumerate(same + [files[1]]):
            push(srv, f, "alpha", T0 + 3600 * i)  # an hour apart: a block each
            assert srv.request("POST", "/api/v1/admin/flush", b"")[0] == 200
        want3 = pprof_top(pprof_merge(srv, same, "same.pb.gz"), 1, "nanoseconds")
        want4 = pprof_top(pprof_merge(srv, same + [files[1]], "all.pb.gz"), 1, "nanoseconds")

        def top(until):
            got = query(srv, CPU, **{"until": until})
            return {f["name"]: (f["self"], f["total"]) for f in got["functions"]}

        want1 = pprof_top(files[0], 1, "nanoseconds")
        srv.stop()
        srv.start()  # a cold cache and empty dictionaries
        # One partition at a time, so that no two read the same names at once (they may).
        for until, want, loads, spelled in ((T0 + 3600 - 1, want1, 1, 1), (T0 + 3 * 3600 - 1, want3, 3, 1),
                                            (T0 + 4 * 3600, want4, 4, 2)):
            assert top(until) == want
            assert metric(srv, "hearth_block_function_table_loads_total") == loads
            assert metric(srv, "hearth_block_names_decoded_total") == spelled, (until, metric(srv, "hearth_block_names_decoded_total"))
        data_dir = srv.data_dir
    r = cli("check", data_dir)  # every name checked against its fingerprint
    assert r.returncode == 0, r.stdout


@test
def top_table_from_function_tables_matches_go_tool_pprof():
    """The fleet's top table over whole block partitions is read from their function tables
    (no stacks), and agrees with `go tool pprof -top` function by function: on its own, mixed
    with a head's stacks, with a range that cuts partitions (their rows), and after compaction.
    Split by service (group_by), each cell is that service's own table."""
    files = cpu_paths(4)
    with Server(extra=["--compact-min-blocks", "2"]) as srv:
        for i, f in enumerate(files[:3]):  # two services, so two partitions per block
            push(srv, f, "alpha" if i < 2 else "beta", T0 + 10 * i)
        assert srv.request("POST", "/api/v1/admin/flush", b"")[0] == 200
        loads = metric(srv, "hearth_block_function_table_loads_total")
        want = pprof_top(pprof_merge(srv, files[:3], "three.pb.gz"), 1, "nanoseconds")

        def top(**kw):
            got = query(srv, CPU, **kw)
            return {f["name"]: (f["self"], f["total"]) for f in got["functions"]}, got["total"]

        funcs, total = top()
        assert metric(srv, "hearth_block_function_table_loads_total") == loads + 2  # alpha's and beta's
        assert funcs == want, sorted(set(funcs.items()) ^ set(want.items()))[:6]
        assert total == sum(flat for flat, _ in want.values())
        assert top(limit="5")[0] == dict(sorted(want.items(), key=lambda kv: (-kv[1][0], kv[0]))[:5])
        # A head's stacks and the blocks' function tables in one table.
        push(srv, files[3], "beta", T0 + 40)
        want4 = pprof_top(pprof_merge(srv, files, "four.pb.gz"), 1, "nanoseconds")
        assert top() == (want4, sum(flat for flat, _ in want4.values()))
        # A range starting inside the block reads its rows: the first profile is left out.
        want_late = pprof_top(pprof_merge(srv, files[1:], "late.pb.gz"), 1, "nanoseconds")
        assert top(**{"from": T0 + 5}) == (want_late, sum(flat for flat, _ in want_late.values()))
        # One service: only its partition's series count.
        alpha = {f["name"]: (f["self"], f["total"]) for f in
                 query(srv, CPU + '{service_name="alpha"}')["functions"]}
        assert alpha == pprof_top(pprof_merge(srv, files[:2], "alpha.pb.gz"), 1, "nanoseconds")
        # Compacted blocks carry function tables too; the table and the flame graph agree.
        assert srv.request("POST", "/api/v1/admin/flush", b"")[0] == 200
        assert srv.request("POST", "/api/v1/admin/compact", b"")[0] == 200
        before = metric(srv, "hearth_block_function_table_loads_total")
        assert top() == (want4, sum(flat for flat, _ in want4.values()))
        assert metric(srv, "hearth_block_function_table_loads_total") == before + 2
        assert query(srv, CPU, fmt="flamegraph")["flamebearer"]["numTicks"] == top()[1]
        # The fleet table: each function split by service, each cell that service's own top table.
        fleet = query(srv, CPU, group_by="service_name")
        assert fleet["groupBy"] == ["service_name"] and fleet["total"] == top()[1]
        per = {"alpha": pprof_top(pprof_merge(srv, files[:2], "a.pb.gz"), 1, "nanoseconds"),
               "beta": pprof_top(pprof_merge(srv, files[2:], "b.pb.gz"), 1, "nanoseconds")}
        assert {f["name"]: (f["self"], f["total"]) for f in fleet["functions"]} == want4
        for f in fleet["functions"]:
            cells = {g["labels"]["service_name"]: (g["self"], g["total"]) for g in f["groups"]}
            assert cells == {s: v[f["name"]] for s, v in per.items() if f["name"] in v and v[f["name"]] != (0, 0)}, f
            assert [g["self"] for g in f["groups"]] == sorted((g["self"] for g in f["groups"]), reverse=True)
        assert [f["name"] for f in query(srv, CPU, group_by="service_name", limit="3")["functions"]] == \
            [f["name"] for f in fleet["functions"][:3]]
        # A label no series has: one group, which lacks it (left out of its labels, as time series do).
        by_env = query(srv, CPU, group_by="env")
        assert {tuple(g["labels"].items()) for f in by_env["functions"] for g in f["groups"]} == {()}
        data_dir = srv.data_dir
    r = cli("check", data_dir)  # verifies every function table against its partition's rows
    assert r.returncode == 0, r.stdout


@test
def focus_ignore_and_hide_match_go_tool_pprof():
    """pprof's -focus/-ignore/-hide as query parameters: every function's flat and cum, and
    the total, equal `go tool pprof -top` with the same flags on the same files."""
    files = cpu_paths(3)
    cases = [
        {"focus": "sort\\."},
        {"ignore": "runtime\\."},
        {"hide": "runtime\\.|^sort\\.StringSlice"},
        {"focus": "json", "ignore": "Unmarshal|reflect"},
        {"focus": "encoding/json", "hide": "json\\.\\(\\*decodeState\\)"},
        {"focus": "sha256\\.go"},  # a file name, not a function
        {"focus": "no-such-function"},
    ]
    with Server() as srv:
        merged = three_cpu_profiles(srv, files)
        sel = CPU + '{service_name="svc"}'
        full = {f["name"]: (f["self"], f["total"]) for f in query(srv, sel, fmt="top")["functions"]}
        for case in cases:
            flags = [f"-{k}={v}" for k, v in case.items()]
            want = pprof_top(merged, 1, "nanoseconds", *flags)
            got = query(srv, sel, fmt="top", **case)
            funcs = {f["name"]: (f["self"], f["total"]) for f in got["functions"]}
            assert funcs == want, (case, sorted(set(funcs.items()) ^ set(want.items()))[:6])
            assert funcs != full, case  # each case filters something
            assert got["total"] == sum(flat for flat, _ in want.values()), case
            # The time series agrees with the flame graph's total.
            ts = srv.get_json("/api/v1/timeseries", query=sel, step="10s", **case,
                              **{"from": T0 - 10, "until": T0 + 100})
            assert sum(p["value"] for p in ts["points"]) == got["total"], case
        assert query(srv, sel, fmt="top", focus="no-such-function")["total"] == 0
        st, body = srv.get("/api/v1/query", query=sel, format="top", focus="a(", **{"from": T0 - 10, "until": T0 + 100})
        assert st == 400 and b"focus" in body, body


@test
def lines_of_a_function_match_go_tool_pprof_lines():
    """format=lines: a function's flat and cum by source line equal `go tool pprof -lines -top`'s
    rows of that function; its self and total equal -top's flat and cum."""
    files = cpu_paths(3)
    with Server() as srv:
        merged = three_cpu_profiles(srv, files)
        by_line = pprof_top(merged, 1, "nanoseconds", "-lines")
        by_func = pprof_top(merged, 1, "nanoseconds")
        sel = CPU + '{service_name="svc"}'
        for fn in ("sort.partition", "crypto/sha256.block", "main.sortWords", "runtime.mallocgc"):
            got = query(srv, sel, fmt="lines", function=fn)
            want = {}
            for name, (flat, cum) in by_line.items():
                func, _, where = name.rpartition(" ")
                if func == fn:
                    want[where] = (flat, cum)
            rows = {f'{r["file"]}:{r["line"]}': (r["self"], r["total"]) for r in got["lines"]}
            assert rows == want, (fn, sorted(set(rows.items()) ^ set(want.items()))[:6])
            assert len(rows) > 1, fn  # a function of several lines
            assert (got["self"], got["total"]) == by_func[fn], (fn, got["self"], got["total"], by_func[fn])
        assert query(srv, sel, fmt="lines", function="no.such")["lines"] == []
        st, body = srv.get("/api/v1/query", query=sel, format="lines", **{"from": T0 - 10, "until": T0 + 100})
        assert st == 400 and b"function" in body, body
        # With a focus, the lines are those of the kept samples.
        got = query(srv, sel, fmt="lines", function="runtime.mallocgc", focus="json")
        want = pprof_top(merged, 1, "nanoseconds", "-focus=json")
        assert (got["self"], got["total"]) == want["runtime.mallocgc"]


def first_level(doc):
    """A sandwich side: {name: total} of the function's children (level 2, under the root
    `total` and the function itself), and the function's (total, self)."""
    fb = doc["flamebearer"]
    names, lv = fb["names"], fb["levels"]
    kids = {} if len(lv) < 3 else {names[lv[2][i + 3]]: lv[2][i + 1] for i in range(0, len(lv[2]), 4)}
    return kids, (lv[1][1], lv[1][2]) if len(lv) > 1 else (0, 0)


@test
def sandwich_matches_go_tool_pprof_peek():
    """format=sandwich: the function's callers and callees one level deep equal `go tool pprof
    -peek`, and both roots total its cum, on functions that do not recurse."""
    files = cpu_paths(3)
    with Server() as srv:
        merged = three_cpu_profiles(srv, files)
        sel = CPU + '{service_name="svc"}'
        for fn in ("runtime.mallocgc", "sort.partition", "crypto/sha256.block", "encoding/json.Marshal"):
            flat, cum, callers, callees = pprof_peek(merged, fn)
            doc = query(srv, sel, fmt="sandwich", function=fn)
            up, (up_total, _) = first_level(doc["callers"])
            down, (down_total, down_self) = first_level(doc["callees"])
            assert up == callers and down == callees, (fn, up, callers, down, callees)
            assert up_total == cum and down_total == cum and down_self == flat, (fn, up_total, down_total, cum, flat)
            assert callers, fn
        # Recursion counts once: sort.pdqsort calls itself, and its roots still total its cum.
        doc = query(srv, sel, fmt="sandwich", function="sort.pdqsort")
        top = pprof_top(merged, 1, "nanoseconds")
        assert first_level(doc["callers"])[1][0] == top["sort.pdqsort"][1]
        assert first_level(doc["callees"])[1][0] == top["sort.pdqsort"][1]
        assert query(srv, sel, fmt="sandwich", function="no.such")["callers"]["flamebearer"]["numTicks"] == 0


@test
def group_by_splits_timelines_by_label():
    """/api/v1/timeseries?group_by= and /pyroscope/render?groupBy=: one timeline per value, each
    equal to the query narrowed to that value; the largest `limit` kept, the rest as other."""
    files = [os.path.join(ARGS.testdata, "pprof", f"go-runtime-cpu-0{i}.pb.gz") for i in range(6)]
    with Server() as srv:
        for i, f in enumerate(files):  # pods p0..p2, two profiles each; one upload without a pod
            name = "svc{pod=p%d}" % (i % 3) if i < 5 else "svc"
            assert srv.ingest(open(f, "rb").read(), name=name, format="pprof", **{"from": T0 + i * 10})[0] == 200
        sel = CPU + '{service_name="svc"}'
        span = {"from": T0 - 10, "until": T0 + 100, "step": "10s"}
        whole = srv.get_json("/api/v1/timeseries", query=sel, **span)
        doc = srv.get_json("/api/v1/timeseries", query=sel, group_by="pod", **span)
        assert doc["points"] == whole["points"] and doc["total"] == whole["total"]
        want = {}
        for pod in ("p0", "p1", "p2", ""):
            one = srv.get_json("/api/v1/timeseries", query=CPU + '{service_name="svc",pod="%s"}' % pod, **span)
            want[pod] = (one["total"], one["points"])
        got = {g["labels"].get("pod", ""): (g["total"], g["points"]) for g in doc["groups"]}
        assert got == want, (sorted(got), sorted(want))
        totals = [g["total"] for g in doc["groups"]]
        assert totals == sorted(totals, reverse=True) and sum(totals) == whole["total"]
        assert doc["other"] is None
        top2 = srv.get_json("/api/v1/timeseries", query=sel, group_by="pod", limit=2, **span)
        assert [g["total"] for g in top2["groups"]] == totals[:2]
        assert top2["other"]["groups"] == 2 and top2["other"]["total"] == sum(totals[2:])
        assert [p["value"] for p in top2["other"]["points"]] == [
            sum(g["points"][k]["value"] for g in doc["groups"][2:]) for k in range(len(whole["points"]))]
        # Pyroscope's render: `groups` maps each value to its timeline.
        r = srv.get_json("/pyroscope/render", query=sel, groupBy="pod", **{"from": T0 - 10, "until": T0 + 100})
        assert set(r["groups"]) == {"p0", "p1", "p2", ""}
        assert {k: sum(v["samples"]) for k, v in r["groups"].items()} == {k: v[0] for k, v in want.items()}
        assert srv.get_json("/pyroscope/render", query=sel, **{"from": T0 - 10, "until": T0 + 100})["groups"] is None
        st, body = srv.get("/api/v1/timeseries", query=sel, group_by="pod", limit="-1", **span)
        assert st == 400, body
        st, body = srv.get("/api/v1/query", query=sel, format="folded", group_by="pod", **{"from": T0 - 10, "until": T0 + 100})
        assert st == 400 and b"group_by" in body, body  # refused, not ignored


@test
def group_by_over_many_series_is_exact_for_counters_and_gauges():
    """group_by=pod,env over 400 pods (a CPU counter and a heap gauge, two heap snapshots a pod):
    every group equals its narrowed query (gauges averaged per series, as the whole query
    does), and the groups add up to the whole. The groups are merged in one pass over the
    selection (merge_run_split), not one merge per group."""
    heap = open(os.path.join(ARGS.testdata, "pprof", "go-runtime-heap.pb.gz"), "rb").read()
    pods = 400
    with Server() as srv:
        for i in range(pods):
            labels = "{pod=p%d,env=%s}" % (i, "prod" if i % 2 else "dev")
            st, b = srv.ingest(("main;work%d %d\n" % (i % 7, i + 1)).encode(), name="many.cpu" + labels,
                               format="folded", **{"from": T0 + i % 50})
            assert st == 200, b
            for k in range(2 if i % 3 else 1):
                st, b = srv.ingest(heap, name="many" + labels, format="pprof", **{"from": T0 + 60 * k + i % 50})
                assert st == 200, b
        inuse = types_of(srv, "many")[("inuse_space", "bytes")]
        span = {"from": T0 - 10, "until": T0 + 200, "step": "30s"}
        for tid in (CPU, inuse):
            sel = tid + '{service_name="many"}'
            whole = srv.get_json("/api/v1/timeseries", query=sel, **span)
            doc = srv.get_json("/api/v1/timeseries", query=sel, group_by="pod,env", limit=pods, **span)
            assert len(doc["groups"]) == pods, len(doc["groups"])
            assert abs(sum(g["total"] for g in doc["groups"]) - whole["total"]) <= 1e-6 * whole["total"] + 1
            for g in doc["groups"][:: pods // 16]:
                pod, env = g["labels"]["pod"], g["labels"]["env"]
                one = srv.get_json("/api/v1/timeseries", query=tid + '{service_name="many",pod="%s",env="%s"}' % (
                    pod, env), **span)
                assert (g["total"], g["points"]) == (one["total"], one["points"]), (tid, pod, g["total"], one["total"])


def random_stacks_pprof(nstacks, depth, nfuncs, seed=1):
    """A gzipped CPU pprof of nstacks random stacks, depth frames each from nfuncs functions:
    the worst case for a merge (nothing shared), small on the wire."""
    rng = random.Random(seed)

    def enc(num, v):
        return pb_put_varint(num << 3) + pb_put_varint(v)
    out, strings = [pb_field(1, enc(1, 1) + enc(2, 2))], ["", "cpu", "nanoseconds"]
    for f in range(1, nfuncs + 1):
        strings.append("fn%05d" % f)
        out.append(pb_field(5, enc(1, f) + enc(2, len(strings) - 1)))
        out.append(pb_field(4, enc(1, f) + pb_field(4, enc(1, f))))
    for _ in range(nstacks):
        locs = b"".join(pb_put_varint(rng.randrange(1, nfuncs + 1)) for _ in range(depth))
        out.append(pb_field(2, pb_field(1, locs) + pb_field(2, pb_put_varint(10000000))))
    out.append(b"".join(pb_field(6, x.encode()) for x in strings))
    out.append(enc(9, T0 * 10**9) + enc(10, 10**10) + pb_field(11, enc(1, 1) + enc(2, 2)) + enc(12, 10000000))
    return gzip.compress(b"".join(out), 1)


@test
def queries_hold_a_memory_budget_and_a_max_nodes_limit():
    """100,000 random 20-frame stacks (4 MB on the wire), then 4 concurrent flame graph queries
    under --max-query-memory 64MiB: each is refused (413 alone too big, or 429 while others
    hold the budget) with a JSON error, the server's memory grows by far less than the merges
    would take (about 870 MB unbudgeted), and a small query afterwards is answered. max_nodes
    past --max-nodes-limit is a 400 on REST and Connect."""
    with Server(extra=["--max-query-memory", "64MiB"]) as srv:
        st, b = srv.ingest(random_stacks_pprof(100000, 20, 5000), name="bomb", format="pprof", **{"from": T0})
        assert st == 200, b
        push(srv, os.path.join(ARGS.testdata, "pprof", "go-runtime-cpu-00.pb.gz"), "small", T0)
        base = proc_status_kib(srv.proc.pid, "VmRSS")
        span = {"from": T0 - 10, "until": T0 + 100}
        got = []

        def ask():
            got.append(srv.get("/api/v1/query", query=CPU + '{service_name="bomb"}', format="flamegraph", **span))
        threads = [threading.Thread(target=ask) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for st, b in got:
            assert st in (413, 429) and "--max-query-memory" in json.loads(b)["error"], (st, b[:300])
        grown = (proc_status_kib(srv.proc.pid, "VmHWM") - base) >> 10
        assert grown < 300 * memory_slack(), f"peak RSS grew {grown} MiB under a 64 MiB query budget"
        assert query(srv, CPU + '{service_name="small"}', frm=T0 - 10, until=T0 + 100)["total"] > 0
        st, b = srv.get("/api/v1/query", query=CPU + '{service_name="small"}', max_nodes="100000", **span)
        assert st == 400 and "--max-nodes-limit" in json.loads(b)["error"], (st, b[:200])
        doc = {"profileTypeID": CPU, "labelSelector": '{service_name="small"}', "start": (T0 - 10) * 1000,
               "end": (T0 + 100) * 1000, "maxNodes": 10**9}
        assert connect_json(srv, "SelectMergeStacktraces", doc)[0] == 400
        assert connect_json(srv, "Diff", {"left": doc, "right": dict(doc, maxNodes=16)})[0] == 400
        assert connect_json(srv, "SelectMergeStacktraces", dict(doc, maxNodes=16))[0] == 200


def flamebearer_nodes(fb):
    """[(depth, name, total, x)] of every node of a flamebearer (x in value units)."""
    out = []
    for d, lv in enumerate(fb["levels"]):
        x = 0
        for i in range(0, len(lv), 4):
            x += lv[i]
            out.append((d, fb["names"][lv[i + 3]], lv[i + 1], x))
            x += lv[i + 1]
    return out


@test
def svg_export_draws_the_flame_graph():
    """format=svg: a well-formed, self-contained SVG whose frames are the flame graph's nodes
    (depth, name, value, position) down to half a pixel."""
    import re as _re
    import xml.etree.ElementTree as ET
    with Server() as srv:
        three_cpu_profiles(srv, cpu_paths(3))
        sel = CPU + '{service_name="svc"}'
        st, body, hdr = srv.request("GET", "/api/v1/query?" + urllib.parse.urlencode(
            {"query": sel, "format": "svg", "from": T0 - 10, "until": T0 + 100}))
        assert st == 200 and hdr.get("Content-Type", hdr.get("content-type", "")).startswith("image/svg+xml"), (st, hdr)
        root = ET.fromstring(body)
        assert root.tag.endswith("svg") and b"<script" not in body and b"href" not in body
        ns = "{http://www.w3.org/2000/svg}"
        fb = query(srv, sel, fmt="flamegraph", max_nodes=0)["flamebearer"]
        total = fb["numTicks"]
        scale = 1200.0 / total
        got = set()
        for g in root.iter(ns + "g"):
            title, rect = g.find(ns + "title").text, g.find(ns + "rect")
            m = _re.match(r"^(.*) \((\d+) nanoseconds, [\d.]+%\)$", title)
            depth = (int(float(rect.get("y"))) - 24) // 16
            got.add((depth, m.group(1), int(m.group(2)), round(float(rect.get("x")), 1)))
        want = {(d, n, t, round(x * scale, 1)) for d, n, t, x in flamebearer_nodes(fb) if t * scale >= 0.5}
        assert got == want, (len(got), len(want), sorted(got ^ want)[:5])
        assert (0, "total", total, 0.0) in got


def dot_graph(text, unit="ns"):
    """({function: cum}, {(caller, callee): weight}) from a DOT call graph's tooltips, pprof's or Hearth's."""
    nodes, edges = {}, {}
    for line in text.splitlines():
        m = re.match(r'^N\d+ \[label=.* tooltip="([^"]+) \((-?\d+)%s\)"' % unit, line)
        if m:
            nodes[m.group(1)] = int(m.group(2))
        m = re.match(r'^N\d+ -> N\d+ \[.* tooltip="([^"]+) -> ([^"]+) \((-?\d+)%s\)" labeltooltip' % unit, line)
        if m:
            edges[(m.group(1), m.group(2))] = edges.get((m.group(1), m.group(2)), 0) + int(m.group(3))
    return nodes, edges


@test
def dot_call_graph_matches_go_tool_pprof_dot():
    """format=dot (REST) and PROFILE_FORMAT_DOT (Connect): every function's cum and every
    caller -> callee weight as `go tool pprof -dot` draws the same files unpruned; maxNodes keeps
    the functions with the largest cum, 100 by default on Connect as upstream."""
    files = [os.path.join(ARGS.testdata, "pprof", f"go-runtime-cpu-0{i}.pb.gz") for i in range(3)]
    out = subprocess.run(["go", "tool", "pprof", "-dot", "-nodecount=1000000", "-nodefraction=0", "-edgefraction=0",
                          "-unit=ns"] + files, capture_output=True, text=True, check=True).stdout
    want_nodes, want_edges = dot_graph(out)
    assert len(want_nodes) > 100 and want_edges, (len(want_nodes), len(want_edges))
    with Server() as srv:
        for i, f in enumerate(files):
            assert srv.ingest(open(f, "rb").read(), name="dotted", format="pprof", **{"from": T0 + i})[0] == 200
        sel = CPU + '{service_name="dotted"}'
        st, body = srv.get("/api/v1/query", query=sel, format="dot", max_nodes=0, **{"from": T0 - 10, "until": T0 + 60})
        assert st == 200 and body.startswith(b"digraph "), (st, body[:200])
        nodes, edges = dot_graph(body.decode())
        assert nodes == want_nodes, sorted(set(nodes.items()) ^ set(want_nodes.items()))[:10]
        assert edges == want_edges, sorted(set(edges.items()) ^ set(want_edges.items()))[:10]
        st, js = connect_json(srv, "SelectMergeStacktraces", dict(profileTypeID=CPU, labelSelector='{service_name="dotted"}',
                                                                   start=(T0 - 10) * 1000, end=(T0 + 60) * 1000,
                                                                   format="PROFILE_FORMAT_DOT"))
        assert st == 200 and "flamegraph" not in js, (st, list(js))
        top, _ = dot_graph(js["dot"])
        biggest = sorted(want_nodes.items(), key=lambda kv: (-kv[1], kv[0]))[:100]
        assert sorted(top.items()) == sorted(biggest), (len(top), len(biggest))
        st, js = connect_json(srv, "SelectMergeStacktraces", dict(profileTypeID=CPU, labelSelector='{service_name="dotted"}',
                                                                   start=(T0 - 10) * 1000, end=(T0 + 60) * 1000,
                                                                   format="PROFILE_FORMAT_DOT", maxNodes=7))
        assert st == 200 and len(dot_graph(js["dot"])[0]) == 7, js["dot"][:500]


@test
def legacy_name_means_a_service_stored_under_the_whole_name():
    """A pprof pushed as `shop.cpu` is service "shop.cpu"; asking `shop.cpu{}` (Pyroscope's
    app.TYPE form, which reads as service "shop") answers that service's profiles instead of an
    empty graph, while an app with series of its own keeps its meaning."""
    cpu = read_testdata(CPU_FILE)
    with Server() as srv:
        for name in ("shop.cpu", "web"):
            st, body = srv.ingest(cpu, name=name, format="pprof", **{"from": T0})
            assert st == 200, body
        whole = query(srv, CPU + '{service_name="shop.cpu"}')["total"]
        assert whole > 0 and query(srv, "shop.cpu{}")["total"] == whole
        assert query(srv, "web.cpu{}")["total"] == query(srv, CPU + '{service_name="web"}')["total"] == whole
        assert query(srv, "nope.cpu{}")["total"] == 0
