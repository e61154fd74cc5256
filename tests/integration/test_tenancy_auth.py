"""Tenancy and auth: a tenant never sees another's data, and a credential decides the role.

Every read endpoint and Connect method with two tenants, before and after a restart; bearer and
basic credentials with read, write and admin roles bound to a tenant, reloaded on SIGHUP, and
never written to the log.
"""
import json
import os
import signal
import tempfile
import urllib.parse

from harness import ARGS, CPU, T0, Server, query, test, wait_until
from pprof_ref import pprof_raw


@test
def tenants_are_isolated_on_every_read_endpoint():
    cpu0 = open(os.path.join(ARGS.testdata, "pprof", "go-runtime-cpu-00.pb.gz"), "rb").read()
    heap = open(os.path.join(ARGS.testdata, "pprof", "go-runtime-heap.pb.gz"), "rb").read()
    total = pprof_raw(os.path.join(ARGS.testdata, "pprof", "go-runtime-cpu-00.pb.gz"))[1][1]
    data_dir = tempfile.mkdtemp(prefix="hearth-mt-", dir=ARGS.tmp)

    def h(t):
        return {"X-Scope-OrgID": t}

    def get(srv, tenant, path, **params):
        st, body, _ = srv.request("GET", path + "?" + urllib.parse.urlencode(params), None, h(tenant))
        return st, body

    with Server(data_dir, extra=["--multitenancy"]) as srv:
        post = lambda t, body, **p: srv.request("POST", "/ingest?" + urllib.parse.urlencode(p), body, h(t))[0]
        assert post("team-a", cpu0, name="alpha{env=a}", format="pprof", **{"from": T0}) == 200
        assert post("team-b", heap, name="beta{env=b}", format="pprof", **{"from": T0}) == 200
        st, b, _ = srv.request("POST", "/ingest?name=x&format=pprof", cpu0, {})
        assert st == 401 and "X-Scope-OrgID" in json.loads(b)["error"]
        for bad in ("../etc", ".hidden", "a/b", "x" * 129):
            st, b, _ = srv.request("POST", "/ingest?name=x&format=pprof", cpu0, h(bad))
            assert st == 400, (bad, st)
        assert srv.get("/healthz")[0] == 200 and srv.get("/metrics")[0] == 200  # no tenant needed
        span = {"from": T0 - 10, "until": T0 + 60}
        checks = [
            ("/api/v1/query", dict(query=CPU, format="top", **span)),
            ("/api/v1/timeseries", dict(query=CPU, step="1s", **span)),
            ("/api/v1/series", {}), ("/api/v1/profile-types", {}), ("/api/v1/labels", {}),
            ("/api/v1/labels/service_name/values", {}), ("/pyroscope/label-values", dict(label="service_name")),
            ("/pyroscope/labels", {}), ("/pyroscope/render", dict(query="alpha.cpu", **span)),
            ("/api/v1/profiles", dict(query=CPU, **span)),
            ("/api/v1/diff", dict(query=CPU, left_from=T0 - 10, left_until=T0 + 60, right_from=T0 - 10,
                                  right_until=T0 + 60)),
            ("/pyroscope/render-diff", dict(leftQuery="alpha.cpu", rightQuery="alpha.cpu", leftFrom=T0 - 10,
                                            leftUntil=T0 + 60, rightFrom=T0 - 10, rightUntil=T0 + 60)),
        ]
        for path, params in checks:
            sa, ba = get(srv, "team-a", path, **params)
            sb, bb = get(srv, "team-b", path, **params)
            assert sa == 200 and sb == 200, (path, sa, sb, bb[:200])
            assert b"alpha" in ba or b"crypto/sha256" in ba or b"env" in ba or b"process_cpu" in ba or path.endswith(
                "timeseries"), (path, ba[:300])
            assert b"alpha" not in bb and b"beta" not in ba, (path, ba[:300], bb[:300])
        # The Connect querier (Grafana) is tenant-scoped too.
        rng = {"start": (T0 - 10) * 1000, "end": (T0 + 60) * 1000}
        for method, doc in (("ProfileTypes", rng), ("LabelNames", rng), ("LabelValues", {"name": "service_name", **rng}),
                            ("Series", rng), ("SelectMergeStacktraces", {"profileTypeID": CPU, **rng}),
                            ("SelectSeries", {"profileTypeID": CPU, "step": 10, **rng}),
                            ("SelectMergeProfile", {"profileTypeID": CPU, **rng})):
            res = {}
            for t in ("team-a", "team-b"):
                st, b, _ = srv.request("POST", "/querier.v1.QuerierService/" + method, json.dumps(doc).encode(),
                                       {**h(t), "Content-Type": "application/json"})
                assert st == 200, (method, t, st, b[:200])
                res[t] = b
            a, b = res["team-a"], res["team-b"]
            assert any(m in a for m in (b"alpha", b"sha256", b"endpoint", b"process_cpu", b'"points":[{')), (method, a[:300])
            assert not any(m in b for m in (b"alpha", b"sha256", b"endpoint", b"process_cpu", b'"points":[{')), (method, b[:300])
            assert b"beta" not in a, method
        a_top = json.loads(get(srv, "team-a", "/api/v1/query", query=CPU, format="top", **span)[1])
        b_top = json.loads(get(srv, "team-b", "/api/v1/query", query=CPU, format="top", **span)[1])
        assert a_top["total"] == total and b_top["total"] == 0
        a_ts = json.loads(get(srv, "team-a", "/api/v1/timeseries", query=CPU, step="1s", **span)[1])
        b_ts = json.loads(get(srv, "team-b", "/api/v1/timeseries", query=CPU, step="1s", **span)[1])
        assert a_ts["total"] == total and b_ts["total"] == 0
        st, _ = get(srv, "", "/api/v1/series")
        assert st == 401
        srv.request("POST", "/api/v1/admin/flush", b"", h("team-a"))
    assert sorted(os.listdir(os.path.join(data_dir, "blocks"))) == ["team-a", "team-b"]
    with Server(data_dir, extra=["--multitenancy"]) as srv:  # isolation holds for blocks after restart
        st, b = get(srv, "team-b", "/api/v1/query", query=CPU, format="top", **{"from": T0 - 10, "until": T0 + 60})
        assert json.loads(b)["total"] == 0
        st, b = get(srv, "team-a", "/api/v1/query", query=CPU, format="top", **{"from": T0 - 10, "until": T0 + 60})
        assert json.loads(b)["total"] == total
    with Server(data_dir) as srv:  # without --multitenancy everything is tenant "anonymous"
        assert query(srv, CPU)["total"] == 0


@test
def auth_tokens_roles_and_sighup_reload():
    import base64
    path = os.path.join(ARGS.tmp, "tokens")
    open(path, "w").write("# kind secret tenant role\n"
                          "bearer agent-token-1 team-a write\n"
                          "bearer reader-token-1 team-a read\n"
                          "basic grafana:pa55 team-a read\n"
                          "bearer admin-token-1 team-a admin\n"
                          "bearer other-reader team-b read\n")
    body = b"main;a 1\n"
    bearer = lambda t: {"Authorization": "Bearer " + t}
    with Server(extra=["--auth-file", path]) as srv:
        ing = lambda hdr: srv.request("POST", "/ingest?name=auth.cpu&format=folded&from=%d" % T0, body, hdr)[0]
        get = lambda hdr: srv.request("GET", "/api/v1/query?" + urllib.parse.urlencode(
            {"query": CPU, "format": "top", "from": T0 - 10, "until": T0 + 60}), None, hdr)
        assert ing({}) == 401 and ing(bearer("nope")) == 401
        assert ing(bearer("reader-token-1")) == 403
        assert ing(bearer("agent-token-1")) == 200
        assert get(bearer("agent-token-1"))[0] == 403
        st, b, _ = get(bearer("reader-token-1"))
        assert st == 200 and json.loads(b)["total"] == 10000000
        basic = {"Authorization": "Basic " + base64.b64encode(b"grafana:pa55").decode()}
        assert get(basic)[0] == 200
        assert get({"Authorization": "Basic " + base64.b64encode(b"grafana:wrong").decode()})[0] == 401
        st, b, _ = get(bearer("other-reader"))  # another tenant sees nothing
        assert st == 200 and json.loads(b)["total"] == 0
        st, b, _ = get(dict(bearer("reader-token-1"), **{"X-Scope-OrgID": "team-b"}))
        assert st == 403
        assert srv.request("POST", "/api/v1/admin/flush", b"", bearer("reader-token-1"))[0] == 403
        assert srv.request("POST", "/api/v1/admin/flush", b"", bearer("admin-token-1"))[0] == 200
        assert srv.get("/healthz")[0] == 200 and srv.get("/metrics")[0] == 200
        # SIGHUP reloads: the reader token is revoked, a new one works; a broken file changes nothing.
        open(path, "w").write("bearer agent-token-1 team-a write\nbearer reader-token-2 team-a read\n")
        srv.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: get(bearer("reader-token-2"))[0] == 200, 10, 0.1, "the reloaded token file")
        assert get(bearer("reader-token-1"))[0] == 401
        open(path, "w").write("this is not a token file\n")
        srv.proc.send_signal(signal.SIGHUP)
        log_path = os.path.join(srv.data_dir, "server.log")
        wait_until(lambda: "auth.reload_failed" in open(log_path).read(), 10, 0.05, "the refused reload")
        assert get(bearer("reader-token-2"))[0] == 200
    log = open(os.path.join(srv.data_dir, "server.log")).read()
    for secret in ("agent-token-1", "reader-token", "pa55", "admin-token"):
        assert secret not in log, f"{secret} leaked into the log"
    assert "auth.reload_failed" in log and "auth.reloaded" in log
