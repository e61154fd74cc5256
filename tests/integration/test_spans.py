"""Span profiles and single-profile merges (issue 11, item 4 and 5): span ids are kept per
sample, not as series; Grafana's SelectMergeSpanProfile and profile_id_selector are served.

The reference is `go tool pprof -tagfocus span_id=...` on the same file: Hearth's merge of
one span must be what pprof keeps of that span's samples, in the head, in a block, and
after compaction."""
import os
import re
import subprocess
import tempfile

from harness import ARGS, CPU, T0, Server, cli, connect_json, query, test
from pprof_ref import build_goprof, pprof_raw

SEL = '{service_name="traced-go"}'
RANGE = {"start": (T0 - 10) * 1000, "end": (T0 + 60) * 1000}


def span_profile():
    """A real Go CPU profile whose work ran in eight labelled spans (goprof spans)."""
    path = os.path.join(tempfile.mkdtemp(prefix="spans-", dir=ARGS.tmp), "cpu.pb.gz")
    subprocess.run([build_goprof(), "spans", path], check=True, capture_output=True)
    return path


def pprof_span_tags(path):
    """{span id: nanoseconds} from `go tool pprof -tags`."""
    out = subprocess.run(["go", "tool", "pprof", "-tags", "-unit=ns", path], capture_output=True, text=True,
                         check=True).stdout
    section = out.split("span_id:")[1].split("span_name:")[0]
    return {m.group(2): int(m.group(1)) for m in re.finditer(r"^\s*(\d+)(?:\.0)?ns \(.*\): ([0-9a-f]{16})$", section, re.M)}


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


def span_merge(srv, spans):
    st, ans = connect_json(srv, "SelectMergeSpanProfile",
                           dict(profileTypeID=CPU, labelSelector=SEL, spanSelector=spans, **RANGE))
    assert st == 200, (st, ans)
    return ans.get("flamegraph", {})


def check_spans(srv, path, tags):
    ids = sorted(tags)
    for pick in ([ids[0]], [ids[-1]], ids[2:5]):
        fg = span_merge(srv, pick)
        assert int(fg.get("total", 0)) == sum(tags[s] for s in pick), (pick, fg.get("total"), tags)
        assert flamegraph_self(fg) == pprof_flat(path, pick), pick
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
