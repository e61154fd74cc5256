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
