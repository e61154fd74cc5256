"""Recording rules: metrics from profiles, evaluated per interval and sent by
remote write to a real Prometheus (Debian's, started on a loopback port with its remote
write receiver). What Prometheus stores must be what /api/v1/timeseries answers for the
same query, group_by, focus and step, point by point."""
import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

from harness import ARGS, CPU, Server, free_port, test, wait_until

RULES_API = "/settings.v1.RecordingRulesService/"
STEP = 2  # seconds: --recording-rules-interval in these tests


class Prometheus:
    """prometheus --web.enable-remote-write-receiver on a loopback port, stopped by its PID."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="prom-", dir=ARGS.tmp)
        self.port = free_port()
        cfg = os.path.join(self.dir, "prometheus.yml")
        open(cfg, "w").write("global:\n  scrape_interval: 1m\n")
        self.log = open(os.path.join(self.dir, "prometheus.log"), "w")
        self.proc = subprocess.Popen(["prometheus", "--config.file", cfg, "--storage.tsdb.path",
                                      os.path.join(self.dir, "data"), "--web.listen-address", f"127.0.0.1:{self.port}",
                                      "--web.enable-remote-write-receiver"], stdout=self.log, stderr=self.log)
        ready = lambda: urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=1).status == 200
        try:
            wait_until(ready, 30, 0.2, "prometheus to become ready")
        except AssertionError:
            self.stop()
            raise AssertionError("prometheus did not become ready: " + open(self.log.name).read()[-2000:])

    def url(self):
        return f"http://127.0.0.1:{self.port}/api/v1/write"

    def samples(self, metric):
        """{frozenset(labels): {ts_ms: value}} of every raw sample of metric in the last 10 minutes."""
        q = urllib.parse.urlencode({"query": metric + "[10m]"})
        doc = json.load(urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/v1/query?{q}", timeout=10))
        assert doc["status"] == "success", doc
        return {frozenset(r["metric"].items()): {int(round(float(t) * 1000)): float(v) for t, v in r["values"]}
                for r in doc["data"]["result"]}

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def call(srv, method, doc):
    st, body, _ = srv.request("POST", RULES_API + method, json.dumps(doc).encode(), {"Content-Type": "application/json"})
    return st, json.loads(body) if body else None


def timeseries(srv, query, start, end, group_by=None, focus=None):
    """{frozenset(group labels): {ts_ms: value}} of /api/v1/timeseries with step STEP."""
    args = {"query": query, "from": start, "until": end - 1, "step": f"{STEP}s", "limit": 0}
    if group_by:
        args["group_by"] = group_by
    if focus:
        args["focus"] = focus
    doc = srv.get_json("/api/v1/timeseries", **args)
    groups = doc["groups"] if group_by else [{"labels": {}, "points": doc["points"]}]
    return {frozenset(g["labels"].items()): {int(p["timestamp"]): float(p["value"]) for p in g["points"] if p["value"]}
            for g in groups}


@test
def recording_rules_send_to_prometheus_what_timeseries_answers():
    cpu = [open(os.path.join(ARGS.testdata, "pprof", f"go-runtime-cpu-0{i}.pb.gz"), "rb").read() for i in range(6)]
    prom = Prometheus()
    try:
        rules = os.path.join(ARGS.tmp, "rules.json")
        json.dump([{"id": "cpu-by-service", "metric_name": "hearth_cpu_nanoseconds",
                    "matchers": ['{__profile_type__="%s"}' % CPU, '{env="prod"}'], "group_by": ["service_name"],
                    "external_labels": {"source": "hearth"}}], open(rules, "w"))
        with Server(extra=["--recording-rules", rules, "--remote-write-url", prom.url(),
                           "--recording-rules-interval", f"{STEP}s"]) as srv:
            # A rule through the API: CPU under one function, as Drilldown creates it.
            st, up = call(srv, "UpsertRecordingRule", {
                "metricName": "hearth_mallocgc_nanoseconds", "matchers": ['{__profile_type__="%s"}' % CPU],
                "stacktraceFilter": {"functionName": {"functionName": "runtime.mallocgc"}}})
            assert st == 200 and up["rule"]["profileType"] == CPU and up["rule"]["generation"] == "1", (st, up)
            # Profiles now, over several intervals: two services in prod, one in dev.
            start = (int(time.time()) // STEP + 1) * STEP
            while time.time() < start:
                time.sleep(0.05)
            for k in range(12):
                t = int(time.time())
                for svc, env in (("api", "prod"), ("web", "prod"), ("batch", "dev")):
                    body = cpu[(k + len(svc)) % 6]
                    assert srv.ingest(body, name="%s{env=%s}" % (svc, env), format="pprof", **{"from": t})[0] == 200
                time.sleep(0.5)
            end = (int(time.time()) // STEP) * STEP  # the last whole interval ends here
            want = timeseries(srv, CPU + '{env="prod"}', start, end, group_by="service_name")
            fwant = timeseries(srv, CPU + "{}", start, end, focus="^runtime\\.mallocgc$")
            assert want and fwant[frozenset()]
            assert {dict(labels).get("service_name") for labels in want} == {"api", "web"}

            def sent():
                """What Prometheus holds of both rules in [start, end), as the two wants are keyed."""
                got = {frozenset((k, v) for k, v in labels if k == "service_name"):
                       {t: v for t, v in pts.items() if start * 1000 <= t < end * 1000}
                       for labels, pts in prom.samples("hearth_cpu_nanoseconds").items()}
                fgot = {frozenset(): {t: v for pts in prom.samples("hearth_mallocgc_nanoseconds").values()
                                      for t, v in pts.items() if start * 1000 <= t < end * 1000}}
                return got, fgot

            # Each interval is evaluated one interval after it ends, then sent: poll until the last is in.
            try:
                wait_until(lambda: sent() == (want, fwant), 60, 0.2, "every interval in Prometheus")
            except AssertionError as e:
                raise AssertionError((str(e), sent(), want, fwant))
            raw = prom.samples("hearth_cpu_nanoseconds")
            assert all(dict(l)["source"] == "hearth" for l in raw), raw.keys()
            # The API: list (provisioned first), get, generation checks, delete; bad rules refused.
            st, ls = call(srv, "ListRecordingRules", {})
            assert st == 200 and [r["id"] for r in ls["rules"]] == ["cpu-by-service", up["rule"]["id"]], ls
            assert ls["rules"][0]["provisioned"] is True
            rid = up["rule"]["id"]
            base = {"id": rid, "metricName": "hearth_mallocgc_nanoseconds", "matchers": ['{__profile_type__="%s"}' % CPU]}
            assert call(srv, "UpsertRecordingRule", dict(base, generation="7"))[0] == 409
            st, up2 = call(srv, "UpsertRecordingRule", dict(base, generation="1"))
            assert st == 200 and up2["rule"]["generation"] == "2", up2
            for bad in ({"metricName": "1bad", "matchers": ['{__profile_type__="%s"}' % CPU]},
                        {"metricName": "ok", "matchers": ['{service_name="x"}']},
                        {"metricName": "ok", "matchers": ["service_name=x"]},
                        {"id": "cpu-by-service", "metricName": "ok", "matchers": ['{__profile_type__="%s"}' % CPU]}):
                assert call(srv, "UpsertRecordingRule", bad)[0] == 400, bad
            assert call(srv, "DeleteRecordingRule", {"id": "cpu-by-service"})[0] == 400
            assert call(srv, "DeleteRecordingRule", {"id": rid}) == (200, {})
            assert call(srv, "GetRecordingRule", {"id": rid})[0] == 404
            st, one = call(srv, "GetRecordingRule", {"id": "cpu-by-service"})
            assert st == 200 and one["rule"]["groupBy"] == ["service_name"], one
            m = srv.get("/metrics")[1].decode()
            assert "hearth_remote_write_samples_total" in m
    finally:
        prom.stop()


@test
def a_bad_rules_file_stops_the_server_with_a_clear_message():
    rules = os.path.join(ARGS.tmp, "bad-rules.json")
    json.dump([{"id": "x", "metric_name": "m", "matchers": ['{service_name="a"}']}], open(rules, "w"))
    r = subprocess.run([ARGS.binary, "--listen", f"127.0.0.1:{free_port()}", "--data-dir",
                        tempfile.mkdtemp(dir=ARGS.tmp), "--recording-rules", rules], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode != 0 and "__profile_type__" in r.stderr, (r.returncode, r.stderr[-500:])
