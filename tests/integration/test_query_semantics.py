"""Query semantics a user relies on (issue 11, items 5-8 and 14): Connect options that are
served or refused (never ignored), merged pprof dates, PromQL string escapes, what `__name__`
means on each API, and Pyroscope's short profile names (`app.cpu`, `app.heap`)."""
import gzip
import json
import os
import subprocess
import urllib.parse

import run
from run import Server, test, T0, CPU

CONNECT = "/querier.v1.QuerierService/"


def cpu_files(n):
    return [os.path.join(run.ARGS.testdata, "pprof", f"go-runtime-cpu-0{i}.pb.gz") for i in range(n)]


def push(srv, path, name, at, until=None, fmt="pprof"):
    span = {"from": at} if until is None else {"from": at, "until": until}
    st, body = srv.ingest(open(path, "rb").read(), name=name, format=fmt, **span)
    assert st == 200, (name, st, body)


def connect_json(srv, method, doc):
    """(status, decoded JSON answer) of a Connect call in JSON."""
    st, body, _ = srv.request("POST", CONNECT + method, json.dumps(doc).encode(), {"Content-Type": "application/json"})
    return st, json.loads(body) if body else None


def connect_proto(srv, method, body):
    """(status, raw answer) of a Connect call in binary proto, as Grafana sends it."""
    st, answer, _ = srv.request("POST", CONNECT + method, body, {"Content-Type": "application/proto"})
    return st, answer


# ---------------------------------------------------------------- 6. merged pprof dates

def pprof_dates(raw):
    """(time_nanos, duration_nanos) of a pprof, gzipped or not."""
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    p = run.pb_decode(raw)
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
        path = os.path.join(run.ARGS.tmp, "dated.pb.gz")
        open(path, "wb").write(body)
        out = subprocess.run(["go", "tool", "pprof", "-raw", path], capture_output=True, text=True, check=True).stdout
        assert "Duration: 30s" in out, out[:400]
        st, raw = connect_proto(srv, "SelectMergeProfile",
                                run.pb_field(1, CPU.encode()) + run.pb_field(2, b'{service_name="dated"}') +
                                run.pb_encode_field(3, 0, 1) + run.pb_encode_field(4, 0, (T0 + 3600) * 1000))
        assert st == 200 and pprof_dates(raw) == want, (st, pprof_dates(raw) if st == 200 else raw)
        # Nothing merged: no date to claim.
        st, body = srv.get("/api/v1/query", query=sel, format="pprof", **{"from": 0, "until": T0 - 100})
        assert st == 200 and pprof_dates(body) == (0, 0), pprof_dates(body)


# ---------------------------------------------------------------- 7. PromQL string literals

@test
def selector_strings_decode_like_promql():
    path = cpu_files(1)[0]
    total = run.pprof_raw(path)[1][1]
    with Server() as srv:
        for pod in ("web-42", "web-x"):
            push(srv, path, "esc{pod=%s}" % pod, T0)
        digits = ['{pod=~"web-\\\\d+"}', "{pod=~'web-\\\\d+'}", "{pod=~`web-\\d+`}",
                  '{pod="web\\x2d42"}', '{pod="web\\u002d42"}', '{pod="web\\05542"}']
        for sel in digits:
            assert run.query(srv, CPU + sel)["total"] == total, sel
        assert run.query(srv, CPU + "{pod=~`web-.*`}")["total"] == 2 * total
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


# ---------------------------------------------------------------- 5. Connect options: served or refused

def pprof_traces(path, sample_index):
    """[(root-first frame names, value)] of every sample, from `go tool pprof -traces`."""
    out = subprocess.run(["go", "tool", "pprof", "-traces", f"-sample_index={sample_index}", "-unit=ns", path],
                         capture_output=True, text=True, check=True).stdout
    traces = []
    for block in out.split("-----------+-------------------------------------------------------")[1:]:
        frames, value = [], None
        for line in block.splitlines():
            if not line.strip() or ":" in line.split()[0]:
                continue  # blank, or a label line ("endpoint:  /api/search")
            if value is None:
                v, _, name = line.strip().partition(" ")
                value, line = int(v.rstrip("ns")), name
            frames.append(line.strip().removesuffix(" (inline)"))
        if value is not None:
            traces.append((frames[::-1], value))
    return traces


def stack_selector(names):
    """types.v1.StackTraceSelector{call_site: [Location{name}]} in binary proto."""
    return b"".join(run.pb_field(1, run.pb_field(1, n.encode())) for n in names)


@test
def connect_call_site_selects_stacks_by_root_prefix():
    path = cpu_files(1)[0]
    traces = pprof_traces(path, "cpu")
    total = run.pprof_raw(path)[1][1]
    assert sum(v for _, v in traces) == total
    prefixes = [["main.worker"], ["main.worker", "main.handleRequest", "runtime/pprof.Do"],
                ["main.worker", "main.handleRequest", "runtime/pprof.Do", "main.handleRequest.func1", "main.sortWords"],
                ["main.handleRequest"],  # not a root: nothing starts with it
                ["main.worker", "no.such.function"]]
    want = {tuple(p): sum(v for f, v in traces if f[:len(p)] == p) for p in prefixes}
    assert want[tuple(prefixes[0])] < total and want[tuple(prefixes[2])] > 0 and want[("main.handleRequest",)] == 0
    rng = {"start": (T0 - 10) * 1000, "end": (T0 + 60) * 1000}
    sel = '{service_name="callsite"}'
    with Server() as srv:
        push(srv, path, "callsite", T0)
        for p in prefixes:
            doc = {"profileTypeID": CPU, "labelSelector": sel, "stackTraceSelector": {"callSite": [{"name": n} for n in p]},
                   **rng}
            st, fg = connect_json(srv, "SelectMergeStacktraces", doc)
            assert st == 200 and int(fg["flamegraph"]["total"]) == want[tuple(p)], (p, st, fg)
            if want[tuple(p)]:  # every kept stack starts with the prefix: one node per level down it
                names, levels = fg["flamegraph"]["names"], fg["flamegraph"]["levels"]
                for depth, name in enumerate(p, start=1):
                    vals = [int(v) for v in levels[depth]["values"]]
                    assert len(vals) == 4 and names[vals[3]] == name, (p, depth, vals)
            # The same in binary proto (field 7), as Grafana sends it.
            body = (run.pb_field(1, CPU.encode()) + run.pb_field(2, sel.encode()) + run.pb_encode_field(3, 0, rng["start"])
                    + run.pb_encode_field(4, 0, rng["end"]) + run.pb_field(7, stack_selector(p)))
            st, raw = connect_proto(srv, "SelectMergeStacktraces", body)
            assert st == 200 and run.pb_decode(run.pb_decode(raw)[1][0]).get(3, [0]) == [want[tuple(p)]], (p, st)
            # SelectMergeProfile (field 6): a pprof holding only those stacks.
            body = (run.pb_field(1, CPU.encode()) + run.pb_field(2, sel.encode()) + run.pb_encode_field(3, 0, rng["start"])
                    + run.pb_encode_field(4, 0, rng["end"]) + run.pb_field(6, stack_selector(p)))
            st, raw = connect_proto(srv, "SelectMergeProfile", body)
            merged = os.path.join(run.ARGS.tmp, "callsite.pb")
            open(merged, "wb").write(raw)
            assert st == 200 and run.pprof_raw(merged)[1] == [want[tuple(p)]], (p, st)
            # SelectSeries (field 8): the time series of the same samples.
            st, ss = connect_json(srv, "SelectSeries", {**doc, "step": 60})
            got = sum(pt["value"] for s in ss["series"] for pt in s["points"])
            assert st == 200 and got == want[tuple(p)], (p, st, ss)
        # An empty call site is no filter, as upstream says.
        st, fg = connect_json(srv, "SelectMergeStacktraces", {"profileTypeID": CPU, "labelSelector": sel,
                                                              "stackTraceSelector": {"callSite": []}, **rng})
        assert st == 200 and int(fg["flamegraph"]["total"]) == total
        # What is not served is refused, never ignored; ids Hearth did not give out are a 400
        # (profile and span selectors are served: tests/integration/test_spans.py).
        base = {"profileTypeID": CPU, "labelSelector": sel, **rng}
        st, err = connect_json(srv, "SelectMergeStacktraces", {**base, "stackTraceSelector": {"goPgo": {"keepLocations": 1}}})
        assert st == 501 and err["code"] == "unimplemented" and err["message"], (st, err)
        for method in ("SelectMergeStacktraces", "SelectMergeProfile"):
            st, err = connect_json(srv, method, {**base, "profileIdSelector": ["7c9e6679-7425-40de-944b-e07fc1f90ae7"]})
            assert st == 400 and err["code"] == "invalid_argument", (method, st, err)
        st, fg = connect_json(srv, "SelectMergeSpanProfile", {**base, "spanSelector": ["9a517183f26a089d"]})
        assert st == 200 and int(fg["flamegraph"].get("total", 0)) == 0, fg  # no sample of this span is stored
        body = (run.pb_field(1, CPU.encode()) + run.pb_field(2, sel.encode()) + run.pb_encode_field(3, 0, rng["start"])
                + run.pb_encode_field(4, 0, rng["end"]) + run.pb_field(8, b"7c9e6679"))
        assert connect_proto(srv, "SelectMergeStacktraces", body)[0] == 400


# ---------------------------------------------------------------- 8. __name__ / 14. short names

def go_types(srv, service):
    return {t["id"] for t in srv.get_json("/api/v1/profile-types", query='{service_name="%s"}' % service)["profileTypes"]}


@test
def name_label_means_the_same_on_rest_and_connect():
    cpu, heap = cpu_files(1)[0], os.path.join(run.ARGS.testdata, "pprof", "go-runtime-heap.pb.gz")
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
    cpu, heap = cpu_files(1)[0], os.path.join(run.ARGS.testdata, "pprof", "go-runtime-heap.pb.gz")
    cpu_total = run.pprof_raw(cpu)[1][1]
    heap_types, heap_totals = run.pprof_raw(heap)
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
            assert run.query(srv, name + "{}", **span)["total"] == want, name
            r = srv.get_json("/pyroscope/render", query=name, **span)
            assert r["flamebearer"]["numTicks"] == want, name
        # A name the app has no profile of, or a selector without a type: 400 listing the app's types.
        for q, needle in (("gosvc.goroutines", "inuse_space, "), ("node-demo.alloc_space", "cpu, "),
                          ('{service_name="gosvc"}', "alloc_objects, ")):
            for path in ("/api/v1/query", "/pyroscope/render", "/api/v1/timeseries"):
                st, body = srv.get(path, query=q, **span)
                assert st == 400 and needle in json.loads(body)["error"], (q, path, st, body)
        # An app with nothing stored keeps the usual type: an empty answer, not an error.
        assert run.query(srv, "nobody.heap{}", **span)["total"] == 0
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
    vt = lambda t, u: run.pb_encode_field(1, 0, t) + run.pb_encode_field(2, 0, u)
    body = run.pb_field(1, vt(1, 2)) + run.pb_field(1, vt(3, 4)) + run.pb_field(1, vt(5, 4))
    body += run.pb_field(2, run.pb_field(1, bytes([2, 1])) + run.pb_field(2, bytes([3]) + run.pb_put_varint(50000000)
                                                                          + run.pb_put_varint(NODE_CPU)))
    for i, fn in ((1, 6), (2, 7)):
        body += run.pb_field(4, run.pb_encode_field(1, 0, i) + run.pb_field(4, run.pb_encode_field(1, 0, i)))
        body += run.pb_field(5, run.pb_encode_field(1, 0, i) + run.pb_encode_field(2, 0, fn))
    body += b"".join(run.pb_field(6, s) for s in strings)
    body += run.pb_field(11, vt(3, 4)) + run.pb_encode_field(12, 0, 10000000)
    return body


@test
def select_series_aggregation_average_is_the_mean_per_step():
    """SelectSeries' `aggregation` is served, not ignored: AVERAGE makes each point the mean of
    the profiles in its step (as Pyroscope computes it); SUM, the default, sums CPU."""
    files = cpu_files(3)
    each = [run.pprof_raw(p)[1][1] for p in files]
    sel = '{service_name="avg"}'
    with Server() as srv:
        for i, p in enumerate(files):  # three profiles in one 60 s step
            push(srv, p, "avg", T0 + 5 * i)
        doc = {"profileTypeID": CPU, "labelSelector": sel, "step": 60, "start": (T0 - 60) * 1000,
               "end": (T0 + 120) * 1000}
        got = {}
        for agg in ("TIME_SERIES_AGGREGATION_TYPE_SUM", "TIME_SERIES_AGGREGATION_TYPE_AVERAGE"):
            st, ans = connect_json(srv, "SelectSeries", {**doc, "aggregation": agg})
            assert st == 200, ans
            got[agg] = [pt["value"] for s in ans["series"] for pt in s["points"]]
        # The Go profiles carry the pprof label `endpoint`: each upload is several series, and
        # the mean is over every stored profile in the step, as Pyroscope averages points.
        rows = srv.get_json("/api/v1/profiles", query=CPU + sel, **{"from": T0 - 60, "until": T0 + 120})["profiles"]
        assert sum(r["total"] for r in rows) == sum(each) and len(rows) > 3, rows
        assert got["TIME_SERIES_AGGREGATION_TYPE_SUM"] == [sum(each)], got
        assert got["TIME_SERIES_AGGREGATION_TYPE_AVERAGE"] == [sum(each) / len(rows)], got
