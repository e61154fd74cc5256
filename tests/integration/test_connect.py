"""Connect: Pyroscope's push API and the querier API Grafana calls, in binary proto and JSON.

Push requests in both encodings, and their errors; every querier method from recorded binary
bodies and from the same requests in JSON, decoded field by field and compared with the REST
answers; call-site stack selectors served; options Hearth does not serve refused (501).
"""
import json
import os
import signal
import struct

from harness import (
    ARGS, CPU, T0, Server, connect_json, connect_proto, cpu_files, metric, multipart, push, query, test)
from pprof_ref import pprof_raw, pprof_traces
from heatmap_ref import expected_heatmap, heatmap_norm_json, heatmap_norm_proto, heatmap_request_proto
from protowire import pb_decode, pb_encode_field, pb_field, pb_packed, pb_strs, pb_uvarint, push_request_proto


@test
def pyroscope_connect_push_api_proto_and_json():
    import base64
    cpu = os.path.join(ARGS.testdata, "pprof", "go-runtime-cpu-02.pb.gz")
    heap = os.path.join(ARGS.testdata, "pprof", "go-runtime-heap.pb.gz")
    cpu_total = pprof_raw(cpu)[1][1]
    htypes, htotals = pprof_raw(heap)
    path = "/push.v1.PusherService/Push"
    with Server() as srv:
        proto = push_request_proto([
            ({"__name__": "process_cpu", "service_name": "alloy-app", "env": "prod", "__delta__": "false"},
             [open(cpu, "rb").read()]),
            ({"__name__": "memory", "service_name": "alloy-app", "env": "prod"}, [open(heap, "rb").read()])])
        st, body, hdr = srv.request("POST", path, proto, {"Content-Type": "application/proto"})
        assert st == 200 and body == b"" and hdr["Content-Type"] == "application/proto", (st, body)
        doc = {"series": [{"labels": [{"name": "__name__", "value": "process_cpu"},
                                      {"name": "service_name", "value": "alloy-json"}],
                           "samples": [{"ID": "x", "rawProfile": base64.b64encode(open(cpu, "rb").read()).decode()}]}]}
        st, body, _ = srv.request("POST", path, json.dumps(doc).encode(), {"Content-Type": "application/json"})
        assert st == 200 and json.loads(body) == {}, (st, body)
        assert query(srv, CPU + '{service_name="alloy-app",env="prod"}', frm=0, until="now")["total"] == cpu_total
        assert query(srv, CPU + '{service_name="alloy-json"}', frm=0, until="now")["total"] == cpu_total
        inuse = htotals[htypes.index(("inuse_space", "bytes"))]
        assert query(srv, 'memory:inuse_space:bytes:space:bytes{service_name="alloy-app"}', frm=0, until="now")["total"] == inuse
        names = srv.get_json("/api/v1/labels", query='{service_name="alloy-app"}')["names"]
        assert "__delta__" not in names and "env" in names, names
        for body, ctype, want in ((b"\xff\xff\xff", "application/proto", 400),
                                  (b"{not json", "application/json", 400),
                                  (json.dumps({"series": [{"samples": [{"rawProfile": "%%%"}]}]}).encode(), "application/json", 400),
                                  (push_request_proto([({"service_name": "bad"}, [b"not a profile"])]), "application/proto", 422),
                                  (b"{}", "text/plain", 415)):
            st, b, _ = srv.request("POST", path, body, {"Content-Type": ctype})
            err = json.loads(b)
            assert st == want and err["code"] and err["message"], (ctype, st, b)
        body, headers = multipart([("profile", open(cpu, "rb").read())])
        for p in (path, "/api/profiles/writeraw"):
            st, b, _ = srv.request("POST", p, body, headers)
            assert st == 415 and json.loads(b)["code"] == "invalid_argument", (p, st, b)
        # Nothing bad was stored; the good data is intact after a restart (WAL replay of push records).
        srv.stop(signal.SIGKILL)
        srv.start()
        assert query(srv, CPU + '{service_name="alloy-app",env="prod"}', frm=0, until="now")["total"] == cpu_total
        assert query(srv, CPU + '{service_name="alloy-json"}', frm=0, until="now")["total"] == cpu_total


# Connect request bodies for querier.v1.QuerierService as Grafana's client sends them
# (binary proto), recorded with `protoc --encode` from Pyroscope's field numbers, for
# service_name="grafana-app" over [T0-10 s, T0+3600 s] in ms.
QUERIER_BODIES = {
    "ProfileTypes": "08f08195ffbc311080adf180bd31",
    "LabelNames": "0a1c7b736572766963655f6e616d653d2267726166616e612d617070227d10f08195ffbc311880adf180bd31",
    "LabelValues": "0a03656e7612407b5f5f70726f66696c655f747970655f5f3d2270726f636573735f6370753a6370753a6e616e6f73"
                   "65636f6e64733a6370753a6e616e6f7365636f6e6473227d18f08195ffbc312080adf180bd31",
    "Series": "0a1c7b736572766963655f6e616d653d2267726166616e612d617070227d1203656e7612105f5f70726f66696c655f74797065"
              "5f5f18f08195ffbc312080adf180bd31",
    "SelectMergeStacktraces": "0a2b70726f636573735f6370753a6370753a6e616e6f7365636f6e64733a6370753a6e616e6f7365636f6e"
                              "6473121c7b736572766963655f6e616d653d2267726166616e612d617070227d18f08195ffbc312080adf1"
                              "80bd3128808001",
    "SelectSeries": "0a2b70726f636573735f6370753a6370753a6e616e6f7365636f6e64733a6370753a6e616e6f7365636f6e6473121c7b"
                    "736572766963655f6e616d653d2267726166616e612d617070227d18f08195ffbc312080adf180bd312a03656e7631"
                    "0000000000004e40",
    "SelectMergeProfile": "0a2b70726f636573735f6370753a6370753a6e616e6f7365636f6e64733a6370753a6e616e6f7365636f6e6473"
                          "121c7b736572766963655f6e616d653d2267726166616e612d617070227d18f08195ffbc312080adf180bd31",
}


@test
def grafana_querier_connect_proto_and_json():
    import struct
    cpu = os.path.join(ARGS.testdata, "pprof", "go-runtime-cpu-02.pb.gz")
    cpu_total = pprof_raw(cpu)[1][1]
    sel = '{service_name="grafana-app"}'
    rng = {"start": (T0 - 10) * 1000, "end": (T0 + 3600) * 1000}
    prefix = "/querier.v1.QuerierService/"
    with Server() as srv:
        for env in ("prod", "staging"):
            assert srv.ingest(open(cpu, "rb").read(), name=f"grafana-app{{env={env}}}", format="pprof",
                              **{"from": T0})[0] == 200
        srv.ingest(b"foo;bar 5\n", name="other-app.cpu", format="folded", **{"from": T0})

        def call(method, body, ctype="application/proto"):
            st, b, hdr = srv.request("POST", prefix + method, body, {"Content-Type": ctype})
            assert st == 200, (method, ctype, st, b[:300])
            assert hdr["Content-Type"] == ctype, hdr
            return pb_decode(b) if ctype == "application/proto" else json.loads(b)

        def both(method, doc):
            """The recorded binary call and the same request in JSON."""
            return call(method, bytes.fromhex(QUERIER_BODIES[method])), call(method, json.dumps(doc).encode(), "application/json")

        # ProfileTypes: Grafana's health check and type picker.
        want = sorted(t["id"] for t in srv.get_json("/api/v1/profile-types")["profileTypes"])
        pb, js = both("ProfileTypes", rng)
        types = [pb_decode(t) for t in pb[1]]
        assert sorted(pb_strs(t, 1)[0] for t in types) == want, types
        cput = next(t for t in types if pb_strs(t, 1) == [CPU])
        assert [pb_strs(cput, k)[0] for k in (2, 4, 5, 6, 7)] == ["process_cpu", "cpu", "nanoseconds", "cpu", "nanoseconds"]
        assert sorted(t["ID"] for t in js["profileTypes"]) == want, js
        assert {"ID": CPU, "name": "process_cpu", "sampleType": "cpu", "sampleUnit": "nanoseconds",
                "periodType": "cpu", "periodUnit": "nanoseconds"} in js["profileTypes"]

        # LabelNames / LabelValues / Series, narrowed by matchers.
        pb, js = both("LabelNames", {"matchers": [sel], **rng})
        assert {"env", "service_name"} <= set(pb_strs(pb, 1)) and pb_strs(pb, 1) == js["names"], (pb, js)
        pb, js = both("LabelValues", {"name": "env", "matchers": ['{__profile_type__="%s"}' % CPU], **rng})
        assert pb_strs(pb, 1) == ["prod", "staging"] == js["names"], (pb, js)
        pb, js = both("Series", {"matchers": [sel], "labelNames": ["env", "__profile_type__"], **rng})
        got = sorted(tuple((pb_strs(p, 1)[0], pb_strs(p, 2)[0]) for p in map(pb_decode, pb_decode(l)[1])) for l in pb[2])
        types_of_cpu = [t for t in want if t.startswith("process_cpu:")]
        assert got == sorted(tuple(sorted([("__profile_type__", t), ("env", e)])) for t in types_of_cpu
                             for e in ("prod", "staging")), got
        assert len(js["labelsSet"]) == len(got), js

        # SelectMergeStacktraces: the same flame graph the REST API renders.
        fb = srv.get_json("/api/v1/query", query=CPU + sel, format="flamegraph", max_nodes=16384,
                          **{"from": T0 - 10, "until": T0 + 3600})["flamebearer"]
        doc = {"profileTypeID": CPU, "labelSelector": sel, "maxNodes": 16384, **rng}
        pb, js = both("SelectMergeStacktraces", doc)
        g = pb_decode(pb[1][0])
        assert pb_strs(g, 1) == fb["names"] and pb_strs(g, 1)[0] == "total"
        assert [pb_packed(l.get(1, [b""])[0]) for l in map(pb_decode, g[2])] == fb["levels"]
        assert g[3] == [fb["numTicks"]] == [2 * cpu_total] and g[4] == [fb["maxSelf"]], (g[3], g[4])
        jg = js["flamegraph"]
        assert jg["names"] == fb["names"] and int(jg["total"]) == 2 * cpu_total and int(jg["maxSelf"]) == fb["maxSelf"]
        assert [[int(v) for v in l["values"]] for l in jg["levels"]] == fb["levels"]
        # A field Hearth does not know (99, as a newer Grafana might send) is refused with a 400
        # naming it, in proto and in JSON, never skipped: a skipped field that narrows the
        # selection would answer another question. One it knows is read, never ignored:
        # profile_id_selector (8) with a Pyroscope UUID is not a Hearth id, a 400.
        body = bytes.fromhex(QUERIER_BODIES["SelectMergeStacktraces"])
        for extra, ctype in ((body + pb_field(99, b"7c9e6679"), "application/proto"),
                             (json.dumps({**doc, "someNewSelector": ["x"]}).encode(), "application/json")):
            st, b, _ = srv.request("POST", prefix + "SelectMergeStacktraces", extra, {"Content-Type": ctype})
            assert st == 400 and (b"field 99 of querier.v1.SelectMergeStacktracesRequest" in b or
                                  b"someNewSelector" in b), (ctype, st, b)
        st, b, _ = srv.request("POST", prefix + "SelectMergeStacktraces", body + pb_field(8, b"7c9e6679"),
                               {"Content-Type": "application/proto"})
        assert st == 400 and b"profile_id_selector" in b, (st, b)
        # Pyroscope 2.2's PROFILE_FORMAT_PPROF: the same merge as a profile.proto in field 5.
        pb = call("SelectMergeStacktraces", body + pb_encode_field(6, 0, 4))
        js = call("SelectMergeStacktraces", json.dumps({**doc, "format": "PROFILE_FORMAT_PPROF"}).encode(),
                  "application/json")
        path = os.path.join(ARGS.tmp, "querier-stacktraces.pb")
        open(path, "wb").write(pb_decode(pb[5][0])[1][0])
        assert pprof_raw(path)[1] == [2 * cpu_total], pprof_raw(path)
        assert js["pprof"]["profile"]["sample"], list(js)
        st, b, _ = srv.request("POST", prefix + "SelectMergeStacktraces",
                               json.dumps({**doc, "format": "PROFILE_FORMAT_DOT"}).encode(),
                               {"Content-Type": "application/json"})
        assert st == 200 and json.loads(b)["dot"].startswith("digraph "), (st, b[:200])

        # SelectSeries grouped by env: one series per env, each summing to the profile's total.
        pb, js = both("SelectSeries", {"profileTypeID": CPU, "labelSelector": sel, "groupBy": ["env"], "step": 60, **rng})
        series = {}
        for s in map(pb_decode, pb[1]):
            labels = [(pb_strs(p, 1)[0], pb_strs(p, 2)[0]) for p in map(pb_decode, s[1])]
            points = [pb_decode(p) for p in s[2]]
            series[tuple(labels)] = sum(struct.unpack("<d", p[1][0])[0] for p in points)
            assert all(p[2][0] % 60000 == 0 for p in points), points  # ms timestamps on the step
        assert series == {(("env", "prod"),): cpu_total, (("env", "staging"),): cpu_total}, series
        assert sorted(s["labels"][0]["value"] for s in js["series"]) == ["prod", "staging"], js
        assert all(sum(p["value"] for p in s["points"]) == cpu_total for s in js["series"]), js

        # SelectMergeProfile: a bare profile.proto that go tool pprof reads.
        st, raw, _ = srv.request("POST", prefix + "SelectMergeProfile", bytes.fromhex(QUERIER_BODIES["SelectMergeProfile"]),
                                 {"Content-Type": "application/proto"})
        assert st == 200 and raw[:2] != b"\x1f\x8b", st
        path = os.path.join(ARGS.tmp, "querier-merged.pb")
        open(path, "wb").write(raw)
        assert pprof_raw(path)[1] == [2 * cpu_total], pprof_raw(path)
        js = call("SelectMergeProfile", json.dumps({"profileTypeID": CPU, "labelSelector": sel, **rng}).encode(),
                  "application/json")
        assert js["stringTable"][0] == "" and js["sample"] and js["sampleType"], list(js)

        # Errors: Connect codes with the matching HTTP status.
        cases = [("SelectMergeStacktraces", b"\xff\xff", "application/proto", 400, "invalid_argument"),
                 ("SelectMergeStacktraces", b"{", "application/json", 400, "invalid_argument"),
                 ("SelectMergeStacktraces", b"{}", "application/json", 400, "invalid_argument"),
                 ("SelectMergeStacktraces", json.dumps({**doc, "labelSelector": "{env=~\"(\"}"}).encode(),
                  "application/json", 400, "invalid_argument"),
                 ("SelectSeries", json.dumps({**doc, "step": -1}).encode(), "application/json", 400, "invalid_argument"),
                 # Times that do not fit in nanoseconds, negative times, unknown enum numbers and
                 # more timeline points than one group-by computes are refused, not wrapped or ignored.
                 ("SelectMergeStacktraces", json.dumps({**doc, "start": "9223372036855"}).encode(), "application/json",
                  400, "invalid_argument"),
                 ("SelectSeries", json.dumps({**doc, "end": -1}).encode(), "application/json", 400, "invalid_argument"),
                 ("SelectSeries", json.dumps({**doc, "step": 1e-10}).encode(), "application/json", 400, "invalid_argument"),
                 ("SelectMergeStacktraces", pb_field(1, CPU.encode()) + pb_encode_field(6, 0, 9), "application/proto",
                  400, "invalid_argument"),
                 ("SelectSeries", pb_field(1, CPU.encode()) + pb_encode_field(7, 0, 7), "application/proto", 400,
                  "invalid_argument"),
                 ("SelectSeries", pb_field(1, CPU.encode()) + pb_encode_field(10, 0, (1 << 64) - 1), "application/proto",
                  400, "invalid_argument"),
                 ("SelectSeries", json.dumps({**doc, "groupBy": ["env"], "step": 1, "start": (T0 - 30 * 86400) * 1000}).encode(),
                  "application/json", 400, "invalid_argument"),
                 # groupBy takes at most 8 labels, as REST's group_by (4,000 made a 27 KB request
                 # answer 267 MB).
                 ("SelectSeries", json.dumps({**doc, "groupBy": [f"l{i}" for i in range(4000)], "step": 60}).encode(),
                  "application/json", 400, "invalid_argument"),
                 ("SelectHeatmap", json.dumps({**doc, "groupBy": [f"l{i}" for i in range(9)], "step": 60,
                                               "queryType": "HEATMAP_QUERY_TYPE_INDIVIDUAL"}).encode(),
                  "application/json", 400, "invalid_argument"),
                 ("LabelValues", b"{}", "application/json", 400, "invalid_argument"),
                 ("ProfileTypes", b"{}", "text/plain", 415, "invalid_argument"),
                 ("NoSuchMethod", b"{}", "application/json", 404, "unimplemented")]
        for method, body, ctype, status, code in cases:
            st, b, _ = srv.request("POST", prefix + method, body, {"Content-Type": ctype})
            err = json.loads(b)
            assert st == status and err["code"] == code and err["message"], (method, body, st, b)
        st, b = srv.get(prefix + "ProfileTypes")
        assert st == 405 and json.loads(b)["code"], (st, b)
        # Nothing the errors did changed the stored data.
        assert query(srv, CPU + sel)["total"] == 2 * cpu_total


# ---------------------------------------------------------------- Connect options: served or refused

def stack_selector(names):
    """types.v1.StackTraceSelector{call_site: [Location{name}]} in binary proto."""
    return b"".join(pb_field(1, pb_field(1, n.encode())) for n in names)


@test
def connect_call_site_selects_stacks_by_root_prefix():
    path = cpu_files(1)[0]
    traces = pprof_traces(path, "cpu")
    total = pprof_raw(path)[1][1]
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
            body = (pb_field(1, CPU.encode()) + pb_field(2, sel.encode()) + pb_encode_field(3, 0, rng["start"])
                    + pb_encode_field(4, 0, rng["end"]) + pb_field(7, stack_selector(p)))
            st, raw = connect_proto(srv, "SelectMergeStacktraces", body)
            assert st == 200 and pb_decode(pb_decode(raw)[1][0]).get(3, [0]) == [want[tuple(p)]], (p, st)
            # SelectMergeProfile (field 6): a pprof holding only those stacks.
            body = (pb_field(1, CPU.encode()) + pb_field(2, sel.encode()) + pb_encode_field(3, 0, rng["start"])
                    + pb_encode_field(4, 0, rng["end"]) + pb_field(6, stack_selector(p)))
            st, raw = connect_proto(srv, "SelectMergeProfile", body)
            merged = os.path.join(ARGS.tmp, "callsite.pb")
            open(merged, "wb").write(raw)
            assert st == 200 and pprof_raw(merged)[1] == [want[tuple(p)]], (p, st)
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
        body = (pb_field(1, CPU.encode()) + pb_field(2, sel.encode()) + pb_encode_field(3, 0, rng["start"])
                + pb_encode_field(4, 0, rng["end"]) + pb_field(8, b"7c9e6679"))
        assert connect_proto(srv, "SelectMergeStacktraces", body)[0] == 400


@test
def select_series_aggregation_average_is_the_mean_per_step():
    """SelectSeries' `aggregation` is served, not ignored: AVERAGE makes each point the mean of
    the profiles in its step (as Pyroscope computes it); SUM, the default, sums CPU."""
    files = cpu_files(3)
    each = [pprof_raw(p)[1][1] for p in files]
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


@test
def connect_diff_profile_stats_and_settings():
    """Diff answers the levels /api/v1/diff draws, in both codecs; GetProfileStats reports the
    stored range; settings.v1.SettingsService/Get answers an empty list (Grafana's Profiles
    Drilldown reads both before it opens)."""
    files = [os.path.join(ARGS.testdata, "pprof", f"go-runtime-cpu-0{i}.pb.gz") for i in range(4)]
    with Server() as srv:
        st, js = connect_json(srv, "GetProfileStats", {})
        assert st == 200 and not js.get("dataIngested"), js
        for i, f in enumerate(files):
            assert srv.ingest(open(f, "rb").read(), name="svc", format="pprof", **{"from": T0 + i * 10})[0] == 200
        sel = '{service_name="svc"}'
        left = {"profileTypeID": CPU, "labelSelector": sel, "start": (T0 - 10) * 1000, "end": (T0 + 15) * 1000}
        right = {"profileTypeID": CPU, "labelSelector": sel, "start": (T0 + 16) * 1000, "end": (T0 + 60) * 1000}
        rest = srv.get_json("/api/v1/diff", query=CPU + sel, left_from=T0 - 10, left_until=T0 + 15,
                            right_from=T0 + 16, right_until=T0 + 60)["flamebearer"]
        st, js = connect_json(srv, "Diff", {"left": left, "right": right})
        assert st == 200, js
        g = js["flamegraph"]
        assert g["names"] == rest["names"]
        assert [[int(v) for v in l["values"]] for l in g["levels"]] == rest["levels"]
        assert (int(g["leftTicks"]), int(g["rightTicks"]), int(g["total"])) == (
            rest["leftTicks"], rest["rightTicks"], rest["numTicks"])
        assert int(g["leftTicks"]) > 0 and int(g["rightTicks"]) > 0

        def side(d):
            return (pb_field(1, d["profileTypeID"].encode()) + pb_field(2, d["labelSelector"].encode()) +
                    pb_encode_field(3, 0, d["start"]) + pb_encode_field(4, 0, d["end"]))

        st, raw = connect_proto(srv, "Diff", pb_field(1, side(left)) + pb_field(2, side(right)))
        assert st == 200, raw
        fg = pb_decode(pb_decode(raw)[1][0])
        assert [s.decode() for s in fg[1]] == rest["names"] and fg[5] == [rest["leftTicks"]]
        # maxNodes: the larger side's, as Pyroscope's query frontend takes it.
        rest20 = srv.get_json("/api/v1/diff", query=CPU + sel, left_from=T0 - 10, left_until=T0 + 15,
                              right_from=T0 + 16, right_until=T0 + 60, max_nodes=20)["flamebearer"]
        for l_max, r_max in ((10, 20), (20, 10)):
            st, js = connect_json(srv, "Diff", {"left": dict(left, maxNodes=l_max), "right": dict(right, maxNodes=r_max)})
            assert st == 200 and js["flamegraph"]["names"] == rest20["names"] != rest["names"], (l_max, r_max, js)
        st, js = connect_json(srv, "Diff", {"left": left})
        assert st == 400, js
        st, js = connect_json(srv, "Diff", {"left": left, "right": dict(right, profileTypeID="memory:alloc_space:bytes:space:bytes")})
        assert st in (400, 404), js

        st, js = connect_json(srv, "GetProfileStats", {})
        assert st == 200 and js["dataIngested"] is True, js
        assert int(js["oldestProfileTime"]) // 1000 in range(T0 - 1, T0 + 1), js
        assert int(js["newestProfileTime"]) // 1000 in range(T0 + 29, T0 + 31), js

        st, body, _ = srv.request("POST", "/settings.v1.SettingsService/Get", b"{}", {"Content-Type": "application/json"})
        assert st == 200 and json.loads(body) in ({}, {"settings": []}), body
        st, body, _ = srv.request("POST", "/settings.v1.SettingsService/Get", b"", {"Content-Type": "application/proto"})
        assert st == 200 and body == b"", body


@test
def settings_are_kept_per_tenant_across_restarts():
    """settings.v1 Set/Get/Delete as Profiles Drilldown calls them: per tenant, persisted, an
    older write refused (409, upstream's AlreadyExists), bad input refused with 400."""
    ct = {"Content-Type": "application/json"}
    data = os.path.join(ARGS.tmp, "settings-store")

    def call(srv, method, doc, tenant="a"):
        st, body, _ = srv.request("POST", "/settings.v1.SettingsService/" + method, json.dumps(doc).encode(),
                                  {**ct, "X-Scope-OrgID": tenant})
        return st, json.loads(body) if body else None

    with Server(data_dir=data, extra=["--multitenancy", "true"]) as srv:
        st, js = call(srv, "Set", {"setting": {"name": "pyroscope.ui.maxNodes", "value": "8192"}})
        assert st == 200 and js["setting"]["value"] == "8192" and int(js["setting"]["modifiedAt"]) > 0, js
        at = int(js["setting"]["modifiedAt"])
        assert call(srv, "Set", {"setting": {"name": "collapsed", "value": "true", "modifiedAt": 5}})[0] == 200
        # An update older than the stored one is refused and changes nothing.
        st, js = call(srv, "Set", {"setting": {"name": "pyroscope.ui.maxNodes", "value": "1", "modifiedAt": at - 1}})
        assert st == 409, (st, js)
        assert call(srv, "Get", {}, tenant="b") in ((200, {}), (200, {"settings": []})), "another tenant sees none"
        for bad in ({}, {"setting": {"value": "x"}}, {"setting": {"name": "n" * 300, "value": "x"}}):
            assert call(srv, "Set", bad)[0] == 400, bad
        assert call(srv, "Set", {"setting": {"name": "x"}, "unknown": 1})[0] == 400
        assert call(srv, "Delete", {})[0] == 400
        assert call(srv, "Nope", {})[0] == 404
    with Server(data_dir=data, extra=["--multitenancy", "true"]) as srv:
        st, js = call(srv, "Get", {})
        assert st == 200 and [(x["name"], x["value"]) for x in js["settings"]] == \
            [("collapsed", "true"), ("pyroscope.ui.maxNodes", "8192")], js
        assert call(srv, "Delete", {"name": "collapsed"}) == (200, {})
        assert call(srv, "Delete", {"name": "never-set"}) == (200, {})
        st, body, _ = srv.request("POST", "/settings.v1.SettingsService/Get", b"",
                                  {"Content-Type": "application/proto", "X-Scope-OrgID": "a"})
        assert st == 200 and b"pyroscope.ui.maxNodes" in body and b"collapsed" not in body, body


@test
def adhoc_profiles_upload_get_list_and_diff():
    """adhocprofiles.v1 as Profiles Drilldown calls it: an uploaded pprof or collapsed file
    answers its flame graph (totals as go tool pprof reads the file), is listed newest first,
    survives a restart, diffs against another upload, and never shows among the services."""
    import base64
    data = os.path.join(ARGS.tmp, "adhoc-store")
    path = os.path.join(ARGS.testdata, "pprof", "go-runtime-cpu-00.pb.gz")
    types, totals = pprof_raw(path)
    want = {t[0]: v for t, v in zip(types, totals)}  # sample type name -> total

    def call(srv, method, doc):
        st, body, _ = srv.request("POST", "/adhocprofiles.v1.AdHocProfileService/" + method, json.dumps(doc).encode(),
                                  {"Content-Type": "application/json"})
        return st, json.loads(body) if body else None

    with Server(data_dir=data) as srv:
        st, up = call(srv, "Upload", {"name": "cpu profile.pb.gz", "profile": base64.b64encode(open(path, "rb").read()).decode()})
        assert st == 200, (st, up)
        assert up["id"].endswith("-cpu_profile.pb.gz") and up["name"] == "cpu_profile.pb.gz", up
        assert sorted(up["profileTypes"]) == sorted(want) and up["profileType"] == up["profileTypes"][0], up
        fb = json.loads(up["flamebearerProfile"])
        assert fb["flamebearer"]["numTicks"] == want[up["profileType"]], (fb["flamebearer"]["numTicks"], want)
        st, got = call(srv, "Get", {"id": up["id"], "profileType": "samples"})
        assert st == 200 and json.loads(got["flamebearerProfile"])["flamebearer"]["numTicks"] == want["samples"], got
        folded = b"main;parse;json 30\nmain;serve 12\n"
        st, up2 = call(srv, "Upload", {"name": "stacks.txt", "profile": base64.b64encode(folded).decode()})
        assert st == 200 and json.loads(up2["flamebearerProfile"])["flamebearer"]["numTicks"] == 42, (st, up2)
        st, ls = call(srv, "List", {})
        assert st == 200 and [p["id"] for p in ls["profiles"]] == [up2["id"], up["id"]], ls
        st, d = call(srv, "Diff", {"leftId": up["id"], "rightId": up["id"], "profileType": "cpu"})
        assert st == 200 and sorted(d["profileTypes"]) == sorted(want), (st, d["profileTypes"])
        dfb = json.loads(d["flamebearerProfile"])
        assert dfb["flamebearer"]["numTicks"] == 2 * want["cpu"], dfb["flamebearer"]["numTicks"]
        assert dfb["metadata"]["format"] == "double", dfb["metadata"]
        # The tenant's own services do not include the uploads.
        assert "adhoc" not in json.dumps(srv.get_json("/api/v1/series", query="{}")), "an upload leaked into the series"
        for method, doc, code in (("Upload", {"name": "x", "profile": "%%%"}, 400),
                                  ("Upload", {"name": "x", "profile": base64.b64encode(b'{"version":1}').decode()}, 400),
                                  ("Upload", {"name": "x", "profile": base64.b64encode(b"\x1f\x8bnot gzip").decode()}, 400),
                                  ("Get", {"id": "0" * 20 + "-missing"}, 404), ("Get", {"id": "../etc"}, 400),
                                  ("Get", {"id": up["id"], "profileType": "nope"}, 400),
                                  ("Diff", {"leftId": up["id"], "rightId": "0" * 20 + "-missing"}, 404)):
            st, ans = call(srv, method, doc)
            assert st == code, (method, doc, st, ans)
    with Server(data_dir=data) as srv:  # uploads survive a restart
        st, got = call(srv, "Get", {"id": up["id"]})
        assert st == 200 and json.loads(got["flamebearerProfile"])["flamebearer"]["numTicks"] == want[up["profileType"]]


@test
def select_series_individual_exemplars_name_each_steps_largest_profile():
    """exemplarType INDIVIDUAL: each point carries the profile of its step with the largest total
    (as /api/v1/profiles lists it: id, time, total, series labels), per group with group_by, in
    both codecs; the exemplar's id opens that one profile through profile_id_selector, as
    Grafana does when an exemplar is clicked. SPAN exemplars are refused (501)."""
    files = cpu_files(4)
    with Server() as srv:
        for i, p in enumerate(files):  # two envs, profiles 30 s apart: two 60 s steps each
            push(srv, p, "ex{env=prod}", T0 + 30 * i)
            push(srv, p, "ex{env=dev}", T0 + 60 + 30 * i)
        doc = {"profileTypeID": CPU, "labelSelector": '{service_name="ex"}', "step": 60,
               "start": (T0 - 60) * 1000, "end": (T0 + 240) * 1000}
        rows = srv.get_json("/api/v1/profiles", query=CPU + '{service_name="ex"}', limit=1000,
                            **{"from": T0 - 60, "until": T0 + 240})["profiles"]

        def best(env, lo, hi):
            """The largest profile of env in [lo, hi) s, the newest of equals."""
            rs = [r for r in rows if r["labels"]["env"] == env and lo * 1000 <= r["timestamp"] < hi * 1000]
            return max(rs, key=lambda r: (r["total"], r["timestamp"])) if rs else None

        step0 = T0 - T0 % 60
        st, js = connect_json(srv, "SelectSeries", dict(doc, groupBy=["env"], exemplarType="EXEMPLAR_TYPE_INDIVIDUAL"))
        assert st == 200, js
        seen = 0
        for series in js["series"]:
            env = {l["name"]: l["value"] for l in series["labels"]}["env"]
            for pt in series["points"]:
                t = int(pt["timestamp"]) // 1000
                want = best(env, t, t + 60)
                assert want and t in (step0, step0 + 60, step0 + 120, step0 + 180), (env, t, pt)
                (ex,) = pt["exemplars"]
                assert (ex["profileId"], int(ex["timestamp"]), int(ex["value"])) == (
                    want["id"], want["timestamp"], want["total"]), (ex, want)
                assert {l["name"]: l["value"] for l in ex["labels"]} == want["labels"], (ex, want)
                seen += 1
                # The exemplar opens its profile, and only it.
                st, one = connect_json(srv, "SelectMergeStacktraces", {
                    "profileTypeID": CPU, "labelSelector": '{service_name="ex"}', "start": doc["start"],
                    "end": doc["end"], "profileIdSelector": [ex["profileId"]]})
                assert st == 200 and int(one["flamegraph"]["total"]) == want["total"], (st, one, want)
        assert seen >= 4, js
        # Without the group-by: one series, each step's largest profile across both envs.
        st, js = connect_json(srv, "SelectSeries", dict(doc, exemplarType="EXEMPLAR_TYPE_INDIVIDUAL"))
        assert st == 200, js
        for pt in js["series"][0]["points"]:
            t = int(pt["timestamp"]) // 1000
            cands = [b for b in (best("prod", t, t + 60), best("dev", t, t + 60)) if b]
            want = max(cands, key=lambda r: (r["total"], r["timestamp"]))
            assert int(pt["exemplars"][0]["value"]) == want["total"], (pt, cands)
        # Without exemplars asked for, none are sent.
        st, js = connect_json(srv, "SelectSeries", dict(doc, exemplarType="EXEMPLAR_TYPE_NONE"))
        assert st == 200 and not any(pt.get("exemplars") for s in js["series"] for pt in s["points"]), js
        # Binary proto: Point.exemplars is field 4; Exemplar value field 4, profile_id field 2.
        body = (pb_field(1, CPU.encode()) + pb_field(2, b'{service_name="ex"}') +
                pb_encode_field(3, 0, doc["start"]) + pb_encode_field(4, 0, doc["end"]) +
                pb_encode_field(6, 1, struct.pack("<d", 60.0)) + pb_encode_field(10, 0, 2))
        st, raw = connect_proto(srv, "SelectSeries", body)
        assert st == 200, raw
        pts = [pb_decode(p) for s in pb_decode(raw)[1] for p in pb_decode(s)[2]]
        exs = [pb_decode(p[4][0]) for p in pts]
        ids = {r["id"]: r["total"] for r in rows}
        assert exs and all(ids[e[2][0].decode()] == e[4][0] for e in exs), exs
        # SPAN exemplars are not served; an unknown type is a bad request.
        st, js = connect_json(srv, "SelectSeries", dict(doc, exemplarType="EXEMPLAR_TYPE_SPAN"))
        assert st == 501 and js["code"] == "unimplemented", (st, js)
        st, _ = connect_proto(srv, "SelectSeries", pb_field(1, CPU.encode()) + pb_encode_field(10, 0, 3))
        assert st == 501


@test
def select_heatmap_counts_profiles_per_step_and_value_bucket():
    """SelectHeatmap (Profiles Drilldown's heatmap): each group's non-empty time steps with every
    value bucket's count of profiles and, per non-empty cell, the largest profile as its exemplar
    (labels without the group-by ones), all equal to what /api/v1/profiles lists laid out as
    Pyroscope lays it out. The binary answer, read with upstream's field numbers, is the JSON one;
    a missing step or query type, an empty range or exemplars of the other kind are bad requests."""
    files = cpu_files(6)
    with Server() as srv:
        for i, p in enumerate(files):  # prod and dev interleaved, 40 s apart: several per 60 s step
            push(srv, p, "hm{env=%s,pod=p%d}" % ("prod" if i % 2 else "dev", i), T0 + 40 * i)
        start, end = T0 * 1000, (T0 + 300) * 1000
        doc = {"profileTypeID": CPU, "labelSelector": '{service_name="hm"}', "start": start, "end": end,
               "step": 60, "queryType": "HEATMAP_QUERY_TYPE_INDIVIDUAL", "exemplarType": "EXEMPLAR_TYPE_INDIVIDUAL"}
        rows = srv.get_json("/api/v1/profiles", query=CPU + '{service_name="hm"}', limit=1000,
                            **{"from": T0, "until": T0 + 300})["profiles"]
        assert len(rows) >= 6 and len({r["total"] for r in rows}) > 2, rows  # endpoint labels split them

        def check(js, key, group_names):
            want, los = expected_heatmap(rows, start, end, 60000, key)
            got = {}
            for series in js["series"]:
                labels = {l["name"]: l["value"] for l in series["labels"]}
                assert set(labels) == set(group_names), series["labels"]
                for slot in series["slots"]:
                    assert slot["yMin"] == [float(v) for v in los], (slot["yMin"], los)
                    exs = {}
                    for ex in slot.get("exemplars", []):
                        exl = {l["name"]: l["value"] for l in ex["labels"]}
                        assert not set(exl) & set(group_names), ex  # the series names those
                        exs[ex["profileId"]] = (int(ex["timestamp"]), int(ex["value"]), exl)
                    got.setdefault(tuple(sorted(labels.items())), {})[int(slot["timestamp"])] = (slot["counts"], exs)
            assert set(got) == set(want), (got.keys(), want.keys())
            for k, slots in want.items():
                assert set(got[k]) == set(slots), (k, got[k].keys(), slots.keys())
                for ts, (counts, best) in slots.items():
                    gc, gex = got[k][ts]
                    assert gc == counts, (k, ts, gc, counts)
                    assert set(gex) == {r["id"] for r in best.values()}, (gex, best)
                    for r in best.values():
                        assert gex[r["id"]][:2] == (r["timestamp"], r["total"]), (gex[r["id"]], r)
                        assert gex[r["id"]][2] == {n: v for n, v in r["labels"].items() if n not in group_names}

        st, js = connect_json(srv, "SelectHeatmap", dict(doc, groupBy=["env"]))
        assert st == 200, js
        check(js, lambda r: (("env", r["labels"]["env"]),), ["env"])
        st, raw = connect_proto(srv, "SelectHeatmap", heatmap_request_proto(dict(doc, groupBy=["env"])))
        assert st == 200 and heatmap_norm_proto(raw) == heatmap_norm_json(js), (st, raw[:200])
        st, js = connect_json(srv, "SelectHeatmap", doc)
        assert st == 200 and len(js["series"]) == 1, js
        check(js, lambda r: (), [])
        # limit keeps the largest groups; without exemplars asked for, none are sent.
        st, js = connect_json(srv, "SelectHeatmap", dict(doc, groupBy=["pod"], limit=2, exemplarType="EXEMPLAR_TYPE_NONE"))
        assert st == 200 and len(js["series"]) == 2, js
        assert not any(sl.get("exemplars") for s in js["series"] for sl in s["slots"]), js
        st, raw = connect_proto(srv, "SelectHeatmap", heatmap_request_proto(dict(doc, groupBy=["pod"], limit=2)))
        assert st == 200 and [s[0] for s in heatmap_norm_proto(raw)] == [s[0] for s in heatmap_norm_json(js)]
        # A fine step over many groups is no timeline to compute: every profile still counts once.
        st, js = connect_json(srv, "SelectHeatmap", dict(doc, groupBy=["pod"], step=1e-5))
        assert st == 200 and sum(sum(sl["counts"]) for s in js["series"] for sl in s["slots"]) == len(rows), js
        # What is refused, and why (as Pyroscope refuses it).
        for bad, word in ((dict(doc, step=0), "step"), (dict(doc, end=start), "start"),
                          ({k: v for k, v in doc.items() if k != "queryType"}, "queryType"),
                          (dict(doc, queryType="HEATMAP_QUERY_TYPE_SPAN"), "exemplarType"),
                          (dict(doc, exemplarType="EXEMPLAR_TYPE_SPAN"), "exemplarType")):
            st, js = connect_json(srv, "SelectHeatmap", bad)
            assert st == 400 and js["code"] == "invalid_argument" and word in js["message"], (bad, st, js)
        st, raw = connect_proto(srv, "SelectHeatmap", pb_field(1, CPU.encode()) + pb_encode_field(5, 1, struct.pack("<d", 60)))
        assert st == 400 and b"queryType" in raw, (st, raw)


def pyroscope_tree(b):
    """{root-first path tuple: (self, total)} of Pyroscope's tree bytes, read as its
    UnmarshalTree reads them: depth first, each node owed to the last parent still owed one."""
    nodes, parents, i = {}, [()], 0
    while parents and i < len(b):
        parent = parents.pop()
        n, i = pb_uvarint(b, i)
        name = b[i:i + n].decode()
        i += n
        self_v, i = pb_uvarint(b, i)
        kids, i = pb_uvarint(b, i)
        path = parent + (name,) if parent != () or name else ("",)
        nodes[path] = nodes.get(path, 0) + self_v
        parents += [path] * kids
    assert i == len(b) and not parents, (i, len(b), len(parents))
    totals = {}
    for path, v in nodes.items():
        for k in range(1, len(path) + 1):
            totals[path[:k]] = totals.get(path[:k], 0) + v
    return {p[1:]: (nodes[p], totals[p]) for p in nodes if len(p) > 1}


@test
def connect_tree_format_is_pyroscopes_tree_bytes():
    """PROFILE_FORMAT_TREE answers Pyroscope's tree bytes: every node's self and total equal the
    flame graph's; with maxNodes the dropped children of a node become one `other` child."""
    with Server() as srv:
        for i, f in enumerate(cpu_files(3)):
            assert srv.ingest(open(f, "rb").read(), name="svc", format="pprof", **{"from": T0 + i * 10})[0] == 200
        base = {"profileTypeID": CPU, "labelSelector": '{service_name="svc"}', "start": (T0 - 10) * 1000,
                "end": (T0 + 60) * 1000}
        fb = query(srv, CPU + '{service_name="svc"}', fmt="flamegraph", max_nodes=0)["flamebearer"]
        want, stack = {}, []
        for d, lv in enumerate(fb["levels"]):  # the flamebearer's nodes by path
            x = 0
            row = []
            for k in range(0, len(lv), 4):
                x += lv[k]
                row.append((x, lv[k + 1], lv[k + 2], fb["names"][lv[k + 3]]))
                x += lv[k + 1]
            stack.append(row)
        paths = {0: [((), 0, fb["numTicks"])]}
        for d in range(1, len(stack)):
            paths[d] = []
            for x, total, self_v, name in stack[d]:
                parent = next(p for p in paths[d - 1] if p[1] <= x < p[1] + p[2] or (p[2] == 0 and p[1] == x))
                paths[d].append((parent[0] + (name,), x, total))
                want[parent[0] + (name,)] = (self_v, total)
        st, js = connect_json(srv, "SelectMergeStacktraces", {**base, "format": "PROFILE_FORMAT_TREE", "maxNodes": 65536})
        assert st == 200 and "tree" in js, (st, list(js))
        import base64
        got = pyroscope_tree(base64.b64decode(js["tree"]))
        assert got == want, (len(got), len(want), sorted(set(got.items()) ^ set(want.items()))[:4])
        # Truncated: 50 nodes, the rest folded into `other` children, every total kept.
        st, js = connect_json(srv, "SelectMergeStacktraces", {**base, "format": "PROFILE_FORMAT_TREE", "maxNodes": 50})
        small = pyroscope_tree(base64.b64decode(js["tree"]))
        assert any(p[-1] == "other" for p in small) and len(small) < len(want)
        roots = sum(t for p, (s, t) in small.items() if len(p) == 1)
        assert roots == fb["numTicks"] - fb["levels"][0][2]
        st, raw = connect_proto(srv, "SelectMergeStacktraces", pb_field(1, CPU.encode()) +
                                pb_field(2, base["labelSelector"].encode()) + pb_encode_field(3, 0, base["start"]) +
                                pb_encode_field(4, 0, base["end"]) + pb_encode_field(6, 0, 2))
        assert st == 200 and pyroscope_tree(pb_decode(raw)[2][0]) == pyroscope_tree(
            base64.b64decode(connect_json(srv, "SelectMergeStacktraces", {**base, "format": "PROFILE_FORMAT_TREE"})[1]["tree"]))


@test
def analyze_query_reports_what_a_query_would_read():
    """AnalyzeQuery (Profiles Drilldown's query-size estimate): the head as short term storage
    and the blocks as long term storage, counted without decoding; every count checked against
    what the server stores."""
    files = cpu_files(4)
    sel = '{service_name="ana"}'
    rng = {"start": (T0 - 60) * 1000, "end": (T0 + 120) * 1000}
    with Server() as srv:
        for i, p in enumerate(files[:3]):
            push(srv, p, "ana", T0 + 10 * i)
        assert srv.request("POST", "/api/v1/admin/flush")[0] == 200
        in_blocks = metric(srv, "hearth_ingested_profiles_total")
        push(srv, files[3], "ana", T0 + 40)
        in_head = metric(srv, "hearth_head_profiles")
        assert in_head > 0 and in_blocks > 0, (in_head, in_blocks)
        series = srv.get_json("/api/v1/series", query=sel)["series"]
        st, ans = connect_json(srv, "AnalyzeQuery", {**rng, "query": sel})
        assert st == 200, ans
        short, long_ = ans["queryScopes"]
        assert short["componentType"] == "Short term storage" and long_["componentType"] == "Long term storage"
        assert int(short["profileCount"]) == in_head and int(short["blockCount"]) == 0, short
        assert int(long_["blockCount"]) == 1 and int(long_["profileCount"]) == in_blocks, long_
        assert int(long_["profileBytes"]) > 0 and int(short["sampleCount"]) > 0, ans
        impact = ans["queryImpact"]
        assert int(impact["totalQueriedSeries"]) == len(series), (impact, len(series))
        assert int(impact["totalBytesInTimeRange"]) == int(short["profileBytes"]) + int(long_["profileBytes"])
        # One profile type of it: fewer series, the same partition (it holds the service's types).
        st, cpu = connect_json(srv, "AnalyzeQuery", {**rng, "query": CPU + sel})
        assert st == 200 and 0 < int(cpu["queryImpact"]["totalQueriedSeries"]) < len(series), cpu
        assert int(cpu["queryScopes"][0]["profileCount"]) < in_head, cpu
        # A range before any data, or another service, reads nothing; a bad selector is a 400.
        for doc in ({"start": (T0 - 7200) * 1000, "end": (T0 - 3600) * 1000, "query": sel},
                    {**rng, "query": '{service_name="none"}'}):
            st, empty = connect_json(srv, "AnalyzeQuery", doc)
            assert st == 200 and empty["queryImpact"]["totalBytesInTimeRange"] == "0", (doc, empty)
        st, bad = connect_json(srv, "AnalyzeQuery", {**rng, "query": "{service_name="})
        assert st == 400, bad
