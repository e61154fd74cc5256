"""Span profiles and single-profile merges: span ids are kept per
sample, not as series; Grafana's SelectMergeSpanProfile and profile_id_selector are served.

The reference is `go tool pprof -tagfocus span_id=...` on the same file: Hearth's merge of
one span must be what pprof keeps of that span's samples, in the head, in a block, and
after compaction."""
import os
import re
import subprocess
import tempfile

from harness import ARGS, CPU, T0, Server, cli, connect_json, connect_proto, query, test
from pprof_ref import build_goprof, pprof_raw
from heatmap_ref import expected_heatmap, heatmap_norm_json, heatmap_norm_proto, heatmap_request_proto

SEL = '{service_name="traced-go"}'
RANGE = {"start": (T0 - 10) * 1000, "end": (T0 + 60) * 1000}


def span_profile(mode="spans"):
    """A real Go CPU profile whose work ran in eight labelled spans (goprof spans), each span's
    halves under worker=a and worker=b with mode split-spans."""
    path = os.path.join(tempfile.mkdtemp(prefix="spans-", dir=ARGS.tmp), "cpu.pb.gz")
    subprocess.run([build_goprof(), mode, path], check=True, capture_output=True)
    return path


def pprof_span_tags(path):
    """{span id: nanoseconds} from `go tool pprof -tags`."""
    out = subprocess.run(["go", "tool", "pprof", "-tags", "-unit=ns", path], capture_output=True, text=True,
                         check=True).stdout
    section = out.split("span_id:")[1].split("span_name:")[0]
    return {m.group(2): int(m.group(1)) for m in re.finditer(r"^\s*(\d+)(?:\.0)?ns \(.*\): ([0-9a-f]{16})$", section, re.M)}


def pprof_sample_labels(path):
    """{(span_id, worker or None): nanoseconds} of the samples in spans, from `go tool pprof -traces`."""
    out = subprocess.run(["go", "tool", "pprof", "-traces", "-unit=ns", path], capture_output=True, text=True,
                         check=True).stdout
    sums = {}
    for block in out.split("-----------+-------------------------------------------------------")[1:]:
        tags = dict(re.findall(r"^\s*(\w+):\s+(.+?)\s*$", block, re.M))
        value = re.search(r"^(\d+)ns ", block, re.M)
        if "span_id" in tags and value:
            key = (tags["span_id"], tags.get("worker"))
            sums[key] = sums.get(key, 0) + int(value.group(1))
    return sums


def pprof_flat(path, spans):
    """{function: flat ns} of the samples of the given spans, from `go tool pprof -top`."""
    focus = "span_id=^(%s)$" % "|".join(spans)
    out = subprocess.run(["go", "tool", "pprof", "-top", "-nodecount=100000", "-nodefraction=0", "-edgefraction=0",
                          "-unit=ns", "-tagfocus=" + focus, path], capture_output=True, text=True, check=True).stdout
    row = re.compile(r"^\s*(\d+)ns\s+\S+%\s+\S+%\s+\d+ns\s+\S+%\s+(.+)$")
    flat = {}
    for line in out.splitlines():
        m = row.match(line)
        if m and int(m.group(1)):
            flat[re.sub(r" \((partial-)?inline\)$", "", m.group(2).strip())] = int(m.group(1))
    return flat


def flamegraph_self(fg):
    """{function: self} summed over a Connect FlameGraph message's nodes."""
    names, out = fg["names"], {}
    for level in fg.get("levels", []):
        v = [int(x) for x in level.get("values", [])]
        for i in range(0, len(v), 4):
            if v[i + 2]:
                out[names[v[i + 3]]] = out.get(names[v[i + 3]], 0) + v[i + 2]
    return out


def span_merge(srv, spans, method="SelectMergeSpanProfile"):
    """The span merge through SelectMergeSpanProfile, or through SelectMergeStacktraces with its
    span_selector (Pyroscope 2.2's shape, which Grafana moves to)."""
    st, ans = connect_json(srv, method, dict(profileTypeID=CPU, labelSelector=SEL, spanSelector=spans, **RANGE))
    assert st == 200, (method, st, ans)
    return ans.get("flamegraph", {})


def check_spans(srv, path, tags):
    ids = sorted(tags)
    for pick in ([ids[0]], [ids[-1]], ids[2:5]):
        fg = span_merge(srv, pick)
        assert int(fg.get("total", 0)) == sum(tags[s] for s in pick), (pick, fg.get("total"), tags)
        assert flamegraph_self(fg) == pprof_flat(path, pick), pick
        assert span_merge(srv, pick, "SelectMergeStacktraces") == fg, pick
    # A span that ran nowhere selects nothing; the merge of everything is not narrowed.
    assert int(span_merge(srv, ["00000000deadbeef"]).get("total", 0)) == 0
    whole = query(srv, CPU + SEL)["total"]
    assert whole == pprof_raw(path)[1][1] and whole > sum(tags.values()), whole


@test
def span_profiles_merge_only_their_spans_in_head_blocks_and_after_compaction():
    path = span_profile()
    tags = pprof_span_tags(path)
    assert len(tags) >= 4, tags  # the spans that got CPU samples on a busy machine
    body = open(path, "rb").read()
    with Server(extra=["--compact-min-blocks", "2"]) as srv:
        assert srv.ingest(body, name="traced-go", format="pprof", **{"from": T0})[0] == 200
        series = srv.get_json("/api/v1/series", query=CPU + SEL)["series"]
        assert len(series) == 1 and not {"span_id", "span_name"} & set(series[0]["labels"]), series
        check_spans(srv, path, tags)  # the head
        assert srv.request("POST", "/api/v1/admin/flush")[0] == 200
        check_spans(srv, path, tags)  # one block
        assert srv.ingest(open(os.path.join(ARGS.testdata, "pprof", "go-runtime-cpu-00.pb.gz"), "rb").read(),
                          name="other", format="pprof", **{"from": T0 + 5})[0] == 200
        assert srv.request("POST", "/api/v1/admin/flush")[0] == 200
        assert srv.request("POST", "/api/v1/admin/compact")[0] == 200
        check_spans(srv, path, tags)  # compacted
        data = srv.data_dir
    with Server(data_dir=data) as srv:  # read back cold
        check_spans(srv, path, tags)
    r = cli("check", data)
    assert r.returncode == 0, r.stdout + r.stderr


@test
def span_selector_and_profile_ids_refuse_bad_input():
    with Server() as srv:
        for bad in ([], ["xyz"], ["0000000000000000"], ["1" * 17]):
            st, ans = connect_json(srv, "SelectMergeSpanProfile",
                                   dict(profileTypeID=CPU, labelSelector=SEL, spanSelector=bad, **RANGE))
            assert st == 400 and "span" in ans["message"].lower(), (bad, st, ans)
        for bad in (["a2a7d9e5-uuid"], ["0-1"], ["1-0"], ["-1-5"], ["1-"]):
            st, ans = connect_json(srv, "SelectMergeStacktraces",
                                   dict(profileTypeID=CPU, labelSelector=SEL, profileIdSelector=bad, **RANGE))
            assert st == 400 and "profile_id_selector" in ans["message"], (bad, st, ans)
        # Pyroscope 2.2's selectors on SelectMergeStacktraces (and Diff's sides, SelectMergeProfile):
        # a bad span id or trace id (32 hex digits, not all zero) is a 400; both selectors at once
        # are a 400, as upstream; async is refused.
        base = dict(profileTypeID=CPU, labelSelector=SEL, **RANGE)
        for method, extra, want in (
                ("SelectMergeStacktraces", dict(spanSelector=["xyz"]), (400, "span")),
                ("SelectMergeStacktraces", dict(traceIdSelector=["7c9e"]), (400, "32 hex")),
                ("SelectMergeStacktraces", dict(traceIdSelector=["0" * 32]), (400, "32 hex")),
                ("SelectMergeStacktraces", dict(traceIdSelector=["7c9e66797425440de944be07fc1f90ae"],
                                                spanSelector=["9a517183f26a089d"]), (400, "cannot be combined")),
                ("SelectMergeStacktraces", dict(async_={"requestId": "x"}), (501, "async")),
                ("SelectMergeProfile", dict(traceIdSelector=["7c9e66797425440de944be07fc1f90a"]),
                 (400, "traceIdSelector")),
                ("Diff", dict(left={**base, "spanSelector": ["1"]}, right={**base, "spanSelector": ["zz"]}),
                 (400, "span"))):
            doc = {**(base if method != "Diff" else {}), **{k.rstrip("_"): v for k, v in extra.items()}}
            st, ans = connect_json(srv, method, doc)
            assert (st, want[1] in ans.get("message", "")) == (want[0], True), (method, extra, st, ans)


@test
def profile_id_selector_merges_the_listed_profiles():
    files = [os.path.join(ARGS.testdata, "pprof", f"go-runtime-cpu-0{i}.pb.gz") for i in range(3)]
    each = [pprof_raw(p)[1][1] for p in files]
    sel = '{service_name="picked"}'
    with Server() as srv:
        for i, p in enumerate(files):
            assert srv.ingest(open(p, "rb").read(), name="picked", format="pprof", **{"from": T0 + 10 * i})[0] == 200
        assert srv.request("POST", "/api/v1/admin/flush")[0] == 200  # from a block: no pre-merged shortcut
        listed = srv.get_json("/api/v1/profiles", query=CPU + sel, **{"from": T0 - 10, "until": T0 + 60})["profiles"]
        # A profile with pprof labels is several series (one row each): an instant's rows sum to the file.
        at = {}
        for p in listed:
            at.setdefault(p["timestamp"] // 1000 - T0, []).append(p)
        assert sorted(at) == [0, 10, 20] and [sum(p["total"] for p in at[k]) for k in (0, 10, 20)] == each, listed
        rows = at[0] + at[20]
        for pick in ([rows[0]], [rows[-1]], rows, at[0]):
            doc = dict(profileTypeID=CPU, labelSelector=sel, profileIdSelector=[p["id"] for p in pick], **RANGE)
            st, ans = connect_json(srv, "SelectMergeStacktraces", doc)
            assert st == 200, ans
            got = int(ans["flamegraph"].get("total", 0))
            assert got == sum(p["total"] for p in pick), ([p["id"] for p in pick], got)
        # An id of another instant selects nothing rather than something else.
        gone = rows[0]["id"].split("-")[0] + "-1"
        st, ans = connect_json(srv, "SelectMergeStacktraces",
                               dict(profileTypeID=CPU, labelSelector=sel, profileIdSelector=[gone], **RANGE))
        assert st == 200 and int(ans["flamegraph"].get("total", 0)) == 0, ans


@test
def span_heatmap_counts_each_span_once_per_profile():
    """SelectHeatmap with HEATMAP_QUERY_TYPE_SPAN: each span of each profile is one point, valued at
    its samples' sum (go tool pprof's per span_id total), even when its samples lie in two series
    (worker=a and worker=b); counted per step and value bucket as Pyroscope lays them out. With
    EXEMPLAR_TYPE_SPAN each non-empty cell names its largest span by the id SelectMergeSpanProfile
    takes, with the labels its series share; merging that span gives the exemplar's value.
    Binary and JSON answers agree."""
    split, plain = span_profile("split-spans"), span_profile()
    parts = pprof_sample_labels(split)
    plain_tags = pprof_span_tags(plain)
    assert {s for s, w in parts} == set(pprof_span_tags(split)) and len(plain_tags) >= 4, (parts, plain_tags)
    assert any(w == "b" for _, w in parts) and any(w == "a" for _, w in parts), parts
    uploads = [(split, "prod", 0), (plain, "prod", 40), (plain, "dev", 100)]
    with Server() as srv:
        for path, env, dt in uploads:
            assert srv.ingest(open(path, "rb").read(), name="traced-go{env=%s}" % env, format="pprof",
                              **{"from": T0 + dt})[0] == 200
        rows = srv.get_json("/api/v1/profiles", query=CPU + SEL, limit=1000,
                            **{"from": T0 - 10, "until": T0 + 200})["profiles"]
        series_at = {}  # (time ms, worker) -> (that series' id, its labels)
        for r in rows:
            series_at[(r["timestamp"], r["labels"].get("worker"))] = (int(r["id"].split("-")[0]), r["labels"])
        points = []  # the expected points: (time ms, env, span, value, labels shared by its series, lowest series)
        for path, env, dt in uploads:
            ts = (T0 + dt) * 1000
            by_span = {}
            for (span, worker), v in (parts.items() if path == split else
                                      (((sp, None), v) for sp, v in plain_tags.items())):
                total, labels, low = by_span.get(span, (0, None, 1 << 32))
                sid, mine = series_at[(ts, worker)]
                shared = mine if labels is None else {k: v2 for k, v2 in labels.items() if mine.get(k) == v2}
                by_span[span] = (total + v, shared, min(low, sid))
            points += [(ts, env, span, total, labels, low) for span, (total, labels, low) in by_span.items()]
        start, end, step = T0 * 1000, (T0 + 120) * 1000, 60000
        # As rows laid out like profiles, in the server's order among equal values (the newest,
        # then the lowest series, then span id): the first of equals in a cell stays.
        span_rows = [{"timestamp": ts, "total": value, "env": env, "span": span, "labels": labels}
                     for ts, env, span, value, labels, _ in sorted(points, key=lambda p: (-p[0], p[5], p[2]))]
        cells, los = expected_heatmap(span_rows, start, end, step, lambda r: r["env"])
        want = {env: {ts: (counts, {b: (r["timestamp"], r["span"], r["total"],
                                         {k: v for k, v in r["labels"].items() if k != "env"})
                                    for b, r in best.items()})
                      for ts, (counts, best) in slots.items()}
                for env, slots in cells.items()}
        doc = {"profileTypeID": CPU, "labelSelector": SEL, "start": start, "end": end, "step": 60, "groupBy": ["env"],
               "queryType": "HEATMAP_QUERY_TYPE_SPAN", "exemplarType": "EXEMPLAR_TYPE_SPAN"}
        st, js = connect_json(srv, "SelectHeatmap", doc)
        assert st == 200, (st, js)
        got = {}
        for series in js["series"]:
            env = {l["name"]: l["value"] for l in series["labels"]}["env"]
            for sl in series["slots"]:
                assert sl["yMin"] == [float(v) for v in los], (sl["yMin"], los)
                exs = {b: (int(e["timestamp"]), e["spanId"], int(e["value"]), {l["name"]: l["value"] for l in e["labels"]})
                       for b, e in zip((i for i, c in enumerate(sl["counts"]) if c), sl["exemplars"])}
                assert not any(e.get("profileId") for e in sl["exemplars"]), sl["exemplars"]
                got.setdefault(env, {})[int(sl["timestamp"])] = (sl["counts"], exs)
        assert got == want, (got, want)
        # The split spans' exemplars lost the worker label (their series disagree on it).
        split_ex = [e for sl in got["prod"].values() for e in sl[1].values()
                    if e[0] == T0 * 1000 and parts.get((e[1], "a")) and parts.get((e[1], "b"))]
        assert split_ex and all("worker" not in e[3] for e in split_ex), got["prod"]
        # An exemplar's span merges to its value (at its instant).
        ts, span, value, _ = max((e for sl in got["dev"].values() for e in sl[1].values()), key=lambda e: e[2])
        st, ans = connect_json(srv, "SelectMergeSpanProfile", dict(profileTypeID=CPU, labelSelector=SEL + "", spanSelector=[span],
                                                                   start=ts, end=ts + 1))
        assert st == 200 and int(ans["flamegraph"]["total"]) == value, (st, ans, value)
        st, raw = connect_proto(srv, "SelectHeatmap", heatmap_request_proto(doc))
        assert st == 200 and heatmap_norm_proto(raw) == heatmap_norm_json(js), (st, raw[:200])
        # Without exemplars asked for, none.
        st, js = connect_json(srv, "SelectHeatmap", dict(doc, exemplarType="EXEMPLAR_TYPE_NONE"))
        assert st == 200 and not any(sl.get("exemplars") for s in js["series"] for sl in s["slots"]), js
        assert {s["labels"][0]["value"]: [sl["counts"] for sl in s["slots"]] for s in js["series"]} == \
            {env: [want[env][k][0] for k in sorted(want[env])] for env in want}
        # The individual heatmap of the same data counts profiles (its rows), not spans.
        st, js = connect_json(srv, "SelectHeatmap", dict(doc, queryType="HEATMAP_QUERY_TYPE_INDIVIDUAL",
                                                         exemplarType="EXEMPLAR_TYPE_NONE"))
        profiles, _ = expected_heatmap(rows, start, end, step, lambda r: r["labels"]["env"])
        assert st == 200 and {s["labels"][0]["value"]: {int(sl["timestamp"]): sl["counts"] for sl in s["slots"]}
                              for s in js["series"]} == \
            {env: {ts: c for ts, (c, _) in slots.items()} for env, slots in profiles.items()}, js


def pprof_trace_tags(path):
    """{trace id: nanoseconds} from `go tool pprof -tags`."""
    out = subprocess.run(["go", "tool", "pprof", "-tags", "-unit=ns", path], capture_output=True, text=True,
                         check=True).stdout
    section = out.split("trace_id:")[1]
    return {m.group(2): int(m.group(1)) for m in re.finditer(r"^\s*(\d+)(?:\.0)?ns \(.*\): ([0-9a-f]{32})$", section, re.M)}


def trace_flat(path, traces):
    """{function: flat ns} of the samples of the given traces (`go tool pprof -tagfocus trace_id=...`)."""
    out = subprocess.run(["go", "tool", "pprof", "-top", "-nodecount=100000", "-nodefraction=0", "-edgefraction=0",
                          "-unit=ns", "-tagfocus=trace_id=^(%s)$" % "|".join(traces), path], capture_output=True,
                         text=True, check=True).stdout
    row = re.compile(r"^\s*(\d+)ns\s+\S+%\s+\S+%\s+\d+ns\s+\S+%\s+(.+)$")
    return {re.sub(r" \((partial-)?inline\)$", "", m.group(2).strip()): int(m.group(1))
            for m in map(row.match, out.splitlines()) if m and int(m.group(1))}


def trace_merge(srv, traces):
    st, ans = connect_json(srv, "SelectMergeStacktraces", dict(profileTypeID=CPU, labelSelector=SEL,
                                                               traceIdSelector=traces, **RANGE))
    assert st == 200, (st, ans)
    return ans.get("flamegraph", {})


def check_traces(srv, path, tags):
    ids = sorted(tags)
    for pick in ([ids[0]], ids[1:]):
        fg = trace_merge(srv, pick)
        assert int(fg.get("total", 0)) == sum(tags[t] for t in pick), (pick, fg.get("total"), tags)
        assert flamegraph_self(fg) == trace_flat(path, pick), pick
    assert int(trace_merge(srv, ["0123456789abcdef0123456789abcdef"]).get("total", 0)) == 0


@test
def trace_id_selector_merges_the_spans_of_its_traces_in_head_blocks_and_after_compaction():
    """Pyroscope 2.2's traceIdSelector: the samples whose pprof `trace_id` label names one of
    the traces, exactly what `go tool pprof -tagfocus trace_id=...` keeps, through the head, a
    block, compaction and a restart; span heatmap exemplars carry their span's traceId."""
    path = span_profile()
    tags = pprof_trace_tags(path)
    assert len(tags) == 3, tags
    spans = pprof_span_tags(path)
    body = open(path, "rb").read()
    with Server(extra=["--compact-min-blocks", "2"]) as srv:
        assert srv.ingest(body, name="traced-go", format="pprof", **{"from": T0})[0] == 200
        series = srv.get_json("/api/v1/series", query=CPU + SEL)["series"]
        assert len(series) == 1 and "trace_id" not in series[0]["labels"], series
        check_traces(srv, path, tags)  # the head
        assert srv.request("POST", "/api/v1/admin/flush")[0] == 200
        check_traces(srv, path, tags)  # one block
        assert srv.ingest(open(os.path.join(ARGS.testdata, "pprof", "go-runtime-cpu-00.pb.gz"), "rb").read(),
                          name="other", format="pprof", **{"from": T0 + 5})[0] == 200
        assert srv.request("POST", "/api/v1/admin/flush")[0] == 200
        assert srv.request("POST", "/api/v1/admin/compact")[0] == 200
        check_traces(srv, path, tags)  # compacted
        # Both selectors, or a malformed id: 400, as upstream answers InvalidArgument.
        for bad in (dict(traceIdSelector=[sorted(tags)[0]], spanSelector=[sorted(spans)[0]]),
                    dict(traceIdSelector=["4bf92f35"]), dict(traceIdSelector=["0" * 32])):
            st, _ = connect_json(srv, "SelectMergeStacktraces", dict(profileTypeID=CPU, labelSelector=SEL, **RANGE,
                                                                     **bad))
            assert st == 400, bad
        # Span exemplars name the trace of their span (span i ran in trace i % 3).
        doc = {"profileTypeID": CPU, "labelSelector": SEL, "start": T0 * 1000, "end": (T0 + 60) * 1000, "step": 60,
               "queryType": "HEATMAP_QUERY_TYPE_SPAN", "exemplarType": "EXEMPLAR_TYPE_SPAN"}
        st, js = connect_json(srv, "SelectHeatmap", doc)
        exs = [e for s in js["series"] for sl in s["slots"] for e in sl.get("exemplars", [])]
        assert st == 200 and exs, js
        for e in exs:
            i = (int(e["spanId"], 16) - 0x00000c0ffee00000) // 0x1111
            assert e["traceId"] == "4bf92f3577b34da6a3ce929d0e0e47%02x" % (i % 3), e
        data = srv.data_dir
    with Server(data_dir=data) as srv:  # read back cold
        check_traces(srv, path, tags)
    r = cli("check", data)
    assert r.returncode == 0, r.stdout + r.stderr
