"""Scraping: Hearth pulls profiles from Go programs that serve net/http/pprof.

All six profiles of a real target with its health, metrics and a target that is down; then
what each endpoint is stored as, and each (target, profile) scraped on its
own schedule.

The target is tests/integration/goprof in `serve` mode, which keeps every /debug/pprof/ answer
it sent (/served, /served/body?i=N): the tests compare what Hearth stored with exactly what the
target answered, read by `go tool pprof`, and measure the schedule from the target's side."""
import json
import os
import subprocess
import tempfile
import time
import urllib.request

from harness import ARGS, CPU, Server, cli, free_port, query, sanitized, test, wait_until
from pprof_ref import build_goprof, pprof_raw


NOW = {"frm": "now-5m", "until": "now"}


class Target:
    """A goprof net/http/pprof server on a free port."""

    def __enter__(self):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen([build_goprof(), "serve", f"127.0.0.1:{self.port}"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(lambda: urllib.request.urlopen(self.url + "/served", timeout=2).read() is not None,
                   what="goprof serve to start")
        return self

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait()

    def served(self):
        """[(index, path, start_s, end_s)] of every profile answer so far."""
        log = json.loads(urllib.request.urlopen(self.url + "/served", timeout=10).read()) or []
        return [(i, x["path"], x["start"] / 1e9, x["end"] / 1e9) for i, x in enumerate(log)]

    def body_file(self, i):
        data = urllib.request.urlopen(f"{self.url}/served/body?i={i}", timeout=10).read()
        f = tempfile.NamedTemporaryFile(dir=ARGS.tmp, suffix=".pb.gz", delete=False)
        f.write(data)
        f.close()
        return f.name


def scrape_config(name, doc):
    path = os.path.join(ARGS.tmp, name + ".json")
    json.dump(doc, open(path, "w"))
    return path


def wait_scraped(srv, at_least, timeout):
    def done():
        t = srv.get_json("/api/v1/targets")["targets"]
        return t and all(x["scrapes"] >= at_least for x in t) and {x["profile"]: x for x in t}
    return wait_until(done, timeout, 0.2, f"every profile scraped {at_least} times")


def type_ids(srv, sel):
    return {t["id"] for t in srv.get_json("/api/v1/profile-types", query=sel)["profileTypes"]}


@test
def scrapes_go_net_http_pprof_targets():
    port = free_port()
    target = subprocess.Popen([build_goprof(), "serve", f"127.0.0.1:{port}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/debug/pprof/", timeout=2).read() is not None,
                   what="the Go program to serve")
        cfg = os.path.join(ARGS.tmp, "scrape.json")
        json.dump({"interval": "3s", "cpu_seconds": 1, "targets": [
            {"job": "goapp", "url": f"http://127.0.0.1:{port}", "labels": {"env": "test"}},
            {"job": "down", "url": "http://127.0.0.1:1", "profiles": ["heap"]}]}, open(cfg, "w"))
        with Server(extra=["--scrape-config", cfg]) as srv:
            def all_scraped():
                t = srv.get_json("/api/v1/targets")["targets"]
                return t if all(x["scrapes"] >= 1 for x in t) else None
            t = wait_until(all_scraped, 40, 0.5, "every target scraped once")
            by = {(x["job"], x["profile"]): x for x in t}
            assert set(p for j, p in by if j == "goapp") == {"cpu", "heap", "allocs", "mutex", "block", "goroutine"}
            for p in ("cpu", "heap", "allocs", "mutex", "block", "goroutine"):
                x = by[("goapp", p)]
                assert x["health"] == "up" and not x["lastError"], x
            down = by[("down", "heap")]
            assert down["health"] == "down" and "cannot reach" in down["lastError"], down
            assert down["labels"]["instance"] == "127.0.0.1:1"
            sel = '{service_name="goapp",job="goapp",instance="127.0.0.1:%d",env="test"}' % port
            types = {t["id"] for t in srv.get_json("/api/v1/profile-types", query=sel)["profileTypes"]}
            for want in (CPU, "memory:alloc_space:bytes:space:bytes", "memory:inuse_space:bytes:space:bytes",
                         "goroutine:goroutine:count:goroutine:count"):
                assert want in types, (want, types)
            cpu = query(srv, CPU + sel, frm="now-5m", until="now")
            assert cpu["total"] > 0 and cpu["profiles"] >= 1
            assert "crypto/sha256.block" in [f["name"] for f in cpu["functions"][:10]], cpu["functions"][:5]
            m = srv.get("/metrics")[1].decode()
            assert 'hearth_scrape_up{scrape_job="goapp",scrape_instance="127.0.0.1:%d",profile="cpu"} 1' % port in m
            assert 'hearth_scrape_up{scrape_job="down",scrape_instance="127.0.0.1:1",profile="heap"} 0' in m
            r = subprocess.run(["promtool", "check", "metrics"], input=m.encode(), capture_output=True, timeout=60)
            assert r.returncode == 0, (r.stdout + r.stderr).decode()
            # A target that stays down logs once, not on every failed scrape.
            down = 'hearth_scrapes_total{scrape_job="down",scrape_instance="127.0.0.1:1",profile="heap"} '
            wait_until(lambda: int(srv.get("/metrics")[1].decode().split(down)[1].split()[0]) >= 3, 15, 0.5,
                       "three failed scrapes of the down target")
            log = open(os.path.join(srv.log_dir, "server.log")).read()
            assert log.count("msg=scrape.failed job=down") == 1, log.count("msg=scrape.failed job=down")
        bad = os.path.join(ARGS.tmp, "bad-scrape.json")
        json.dump({"targets": [{"job": "x", "url": "http://a", "profiles": ["nope"]}]}, open(bad, "w"))
        r = cli("--data-dir", os.path.join(ARGS.tmp, "badscrape"), "--listen", f"127.0.0.1:{free_port()}",
                "--scrape-config", bad)
        assert r.returncode == 1 and "unknown profile `nope`" in r.stderr, r.stderr
    finally:
        target.kill()
        target.wait()


@test
def scraped_block_mutex_and_memory_keep_their_meaning():
    """/debug/pprof/block is block:*, /debug/pprof/mutex is mutex:*, each with the totals go tool
    pprof reads from the very answer the target sent; the allocs delta gives alloc_* only, the
    heap snapshot inuse_* only, and no type has a negative total."""
    with Target() as tgt:
        cfg = scrape_config("types", {"interval": "30s", "cpu_seconds": 1, "targets": [
            {"job": "gotypes", "url": tgt.url, "profiles": ["mutex", "block", "allocs", "heap"]}]})
        with Server(extra=["--scrape-config", cfg]) as srv:
            by = wait_scraped(srv, 1, 20)  # one round: the next is 30 s away
            assert all(x["health"] == "up" for x in by.values()), by
            answers = {p.rsplit("/", 1)[1]: i for i, p, _, _ in tgt.served()}
            sel = '{service_name="gotypes"}'
            ids = type_ids(srv, sel)
            for kind in ("block", "mutex"):
                types, totals = pprof_raw(tgt.body_file(answers[kind]))
                assert dict(types) == {"contentions": "count", "delay": "nanoseconds"}, types
                for (st, unit), want in zip(types, totals):
                    tid = f"{kind}:{st}:{unit}:contentions:count"
                    assert tid in ids, (tid, ids)
                    got = query(srv, tid + sel, **NOW)["total"]
                    assert got == want, (tid, got, want)
            assert pprof_raw(tgt.body_file(answers["block"]))[1][0] > 0  # a real block profile
            want = {}
            for kind, kept in (("allocs", "alloc_"), ("heap", "inuse_")):
                types, totals = pprof_raw(tgt.body_file(answers[kind]))
                want.update({st: t for (st, _), t in zip(types, totals) if st.startswith(kept)})
            for st, total in want.items():
                unit = "bytes" if st.endswith("space") else "count"
                tid = f"memory:{st}:{unit}:space:bytes"
                got = query(srv, tid + sel, **NOW)["total"]
                assert got == total, (tid, got, total)
            for tid in ids:
                fg = query(srv, tid + sel, fmt="flamegraph", **NOW)
                assert fg["flamebearer"]["numTicks"] >= 0, (tid, fg["flamebearer"]["numTicks"])
                assert query(srv, tid + sel, **NOW)["total"] >= 0, tid


def gaps(spans):
    spans = sorted(spans)
    return [b[0] - a[1] for a, b in zip(spans, spans[1:])]


@test
def each_scraped_profile_keeps_its_own_schedule():
    """Four 2 s profiles at a 3 s interval: scraped one after another they would take 8 s a
    round. Each (target, profile) runs on its own: CPU profiles follow each other without gaps,
    the delta profiles start every 3 s; stopping the server cancels the fetches in flight."""
    with Target() as tgt:
        cfg = scrape_config("schedule", {"interval": "3s", "cpu_seconds": 2, "targets": [
            {"job": "gosched", "url": tgt.url, "profiles": ["cpu", "allocs", "mutex", "block"]}]})
        srv = Server(extra=["--scrape-config", cfg]).start()
        try:
            time.sleep(10.5)
            log = tgt.served()
            by = wait_scraped(srv, 1, 5)
            assert all(x["health"] == "up" for x in by.values()), by
            m = srv.get("/metrics")[1].decode()
            assert 'hearth_scrape_up{scrape_job="gosched",scrape_instance="127.0.0.1:%d",profile="cpu"} 1' % tgt.port in m
            sel = '{service_name="gosched"}'
            assert query(srv, CPU + sel, **NOW)["total"] > 0
            t0 = time.time()
        finally:
            srv.stop()
        stop_s = time.time() - t0
    cpu = [(s, e) for _, p, s, e in log if p.endswith("/profile")]
    assert len(cpu) >= 4, cpu  # 10 s of 2 s profiles
    start, end = min(s for s, _ in cpu), max(e for _, e in cpu)
    covered = sum(e - s for s, e in cpu) / (end - start)
    timed = not sanitized()  # a sanitizer build's timing says nothing about the schedule
    assert not timed or (max(gaps(cpu)) < 0.5 and covered > 0.9), (gaps(cpu), covered)  # back to back: 25% before
    for kind in ("allocs", "mutex", "block"):
        starts = sorted(s for _, p, s, _ in log if p.endswith("/" + kind))
        steps = [b - a for a, b in zip(starts, starts[1:])]
        assert len(starts) >= 3 and (not timed or all(abs(x - 3) < 0.5 for x in steps)), (kind, steps)
    assert not timed or stop_s < 3, stop_s  # CPU fetches are always in flight here: stopping cancels them


@test
def scrape_cpu_seconds_over_the_interval_warns_and_runs_back_to_back():
    with Target() as tgt:
        cfg = scrape_config("long-cpu", {"interval": "2s", "cpu_seconds": 3, "targets": [
            {"job": "golong", "url": tgt.url, "profiles": ["cpu", "goroutine"]}]})
        srv = Server(extra=["--scrape-config", cfg]).start()
        def enough():  # two 3 s CPU profiles and three goroutine ones: about 7 s
            log = tgt.served()
            n = lambda kind: sum(1 for _, p, _, _ in log if p.endswith(kind))
            return log if n("/profile") >= 2 and n("/goroutine") >= 3 else None
        try:
            log = wait_until(enough, 60, 0.2, "two CPU and three goroutine profiles served")
            t0 = time.time()
        finally:
            srv.stop()
        stop_s = time.time() - t0
        warned = [l for l in srv.tail().splitlines() if "cpu_seconds" in l and "golong" in l]
        assert warned and "level=warn" in warned[0], srv.tail()
    timed = not sanitized()  # a sanitizer build's timing says nothing about the schedule
    cpu = [(s, e) for _, p, s, e in log if p.endswith("/profile")]
    assert len(cpu) >= 2 and (not timed or max(gaps(cpu)) < 0.5), cpu
    goroutine = sorted(s for _, p, s, _ in log if p.endswith("/goroutine"))
    assert len(goroutine) >= 3 and (not timed or all(abs(b - a - 2) < 0.5 for a, b in zip(goroutine, goroutine[1:]))), goroutine
    assert not timed or stop_s < 3, stop_s


def shard_of(address, modulus):
    """Prometheus's hashmod: md5 of the value, its last 8 bytes big-endian, modulo."""
    import hashlib
    return int.from_bytes(hashlib.md5(address.encode()).digest()[8:], "big") % modulus


@test
def scrape_targets_from_files_and_http_discovery_relabeled():
    """Targets discovered from files (file_sd, a glob) and an HTTP endpoint (http_sd), in
    Prometheus's target-group format, relabeled with its rules: a file's targets come and go
    as files are written and removed, `drop` and `keep` filter, `replace` with a capture group,
    `labelmap` and `labeldrop` rename labels, `hashmod` shards (the same shard Prometheus
    computes); a file that does not parse keeps the last good targets; scraped profiles carry
    the relabeled labels."""
    import http.server
    import threading
    sd_dir = tempfile.mkdtemp(prefix="sd-", dir=ARGS.tmp)
    with Target() as a, Target() as b:
        addr_a, addr_b = f"127.0.0.1:{a.port}", f"127.0.0.1:{b.port}"
        json.dump([{"targets": [addr_a], "labels": {"k8s_pod": "p1", "role": "main"}},
                   {"targets": [addr_b], "labels": {"role": "canary"}}], open(os.path.join(sd_dir, "sd-a.json"), "w"))
        groups = json.dumps([{"targets": [addr_a, addr_b], "labels": {"zone": "z1"}}]).encode()

        class SD(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(groups)

            def log_message(self, *args):
                pass

        sd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), SD)
        threading.Thread(target=sd.serve_forever, daemon=True).start()
        shard = shard_of(addr_a, 2)
        cfg = scrape_config("sd", {"interval": "2s", "cpu_seconds": 1, "jobs": [
            {"job": "files", "profiles": ["heap"],
             "file_sd_configs": [{"files": [os.path.join(sd_dir, "sd-*.json")], "refresh_interval": "1s"}],
             "relabel_configs": [
                 {"source_labels": ["__meta_filepath"], "regex": ".*/sd-(.*)\\.json", "target_label": "team"},
                 {"source_labels": ["role"], "regex": "canary", "action": "drop"},
                 {"action": "labelmap", "regex": "k8s_(.*)", "replacement": "$1"},
                 {"action": "labeldrop", "regex": "k8s_.*"}]},
            {"job": "web", "profiles": ["goroutine"],
             "http_sd_configs": [{"url": "http://127.0.0.1:%d/sd" % sd.server_address[1], "refresh_interval": "1s"}],
             "relabel_configs": [
                 {"source_labels": ["__address__"], "action": "hashmod", "modulus": 2, "target_label": "__tmp_shard"},
                 {"source_labels": ["__tmp_shard"], "regex": str(shard), "action": "keep"}]}]})

        def targets(srv):
            return sorted((t["job"], t["labels"]["instance"], tuple(sorted(t["labels"].items())))
                          for t in srv.get_json("/api/v1/targets")["targets"])

        def wait_for(srv, want, timeout=20):
            wait_until(lambda: [(j, i) for j, i, _ in targets(srv)] == sorted(want), timeout, 0.2,
                       f"the targets {sorted(want)}")

        try:
            with Server(extra=["--scrape-config", cfg]) as srv:
                web = [("web", x) for x in (addr_a, addr_b) if shard_of(x, 2) == shard]
                wait_for(srv, [("files", addr_a)] + web)
                labels = dict(next(l for j, i, l in targets(srv) if j == "files"))
                assert labels == {"instance": addr_a, "job": "files", "pod": "p1", "role": "main", "team": "a",
                                  "service_name": "files"}, labels
                for _, _, l in targets(srv):
                    assert not any(k.startswith("__") for k, _ in l), l
                json.dump([{"targets": [addr_b], "labels": {"role": "main"}}], open(os.path.join(sd_dir, "sd-b.json"), "w"))
                wait_for(srv, [("files", addr_a), ("files", addr_b)] + web)
                os.remove(os.path.join(sd_dir, "sd-a.json"))
                wait_for(srv, [("files", addr_b)] + web)
                open(os.path.join(sd_dir, "sd-b.json"), "w").write("not json")  # the last good targets stay
                log = os.path.join(srv.log_dir, "server.log")
                wait_until(lambda: "sd-b.json: not a JSON array" in open(log).read(), 20, 0.2, "the failed read logged")
                assert "msg=scrape.discovery_failed" in open(log).read(), open(log).read()[-2000:]
                assert [(j, i) for j, i, _ in targets(srv)] == sorted([("files", addr_b)] + web)
                wait_scraped(srv, 1, 30)
                sel = '{service_name="files",team="b",role="main"}'
                assert "memory:inuse_space:bytes:space:bytes" in type_ids(srv, sel), type_ids(srv, sel)
        finally:
            sd.shutdown()
    bad = scrape_config("sd-bad", {"jobs": [{"job": "x", "relabel_configs": [{"action": "explode"}]}]})
    r = cli("--data-dir", os.path.join(ARGS.tmp, "badsd"), "--listen", f"127.0.0.1:{free_port()}",
            "--scrape-config", bad)
    assert r.returncode == 1 and "unknown action `explode`" in r.stderr, r.stderr
