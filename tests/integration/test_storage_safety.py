"""Attacks on stored data (issue 10): inputs and misuse that must never lose what was acknowledged."""
import os
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
