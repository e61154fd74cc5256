"""Web: what a browser shows, checked against what the API answers.

The real UI in headless Chromium (tests/browser/ui.test.mjs), and the provisioned Grafana
dashboard (deploy/grafana): its data-source queries and its /embed iframes against a live server.
"""
import html
import json
import os
import re
import subprocess
import tempfile
import time
import urllib.parse

from harness import ARGS, CPU, T0, Server, npm_installed, query, test
from pprof_ref import pprof_raw


def js_value(v, unit):
    """The UI's formatValue (web/js/format.js) for ns and bytes, to compare shown text."""
    if unit == "nanoseconds":
        for div, suf in ((60e9, " min"), (1e9, " s"), (1e6, " ms"), (1e3, " \u00b5s")):
            if abs(v) >= div:
                x = v / div  # three significant digits, as sig3
                return (f"{x:.0f}" if abs(x) >= 100 else f"{x:.1f}" if abs(x) >= 10 else f"{x:.2f}") + suf
        return f"{round(v)} ns"
    raise ValueError(unit)


def js_percent(part, whole):
    p = 100 * part / whole
    return f"{p:.1f}%" if p >= 10 else f"{p:.2f}%"


@test
def web_ui_in_headless_chromium():
    """The real UI in Debian's Chromium (tests/browser/ui.test.mjs) shows what the API answers."""
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "browser")
    assert os.path.exists("/usr/bin/chromium"), "Debian chromium is missing: run deploy/install-deps.sh test"
    npm_installed(here, "node_modules/playwright-core", "playwright-core")
    files = [os.path.join(ARGS.testdata, "pprof", f"go-runtime-cpu-0{i}.pb.gz") for i in range(6)]
    tenant = "ui-team"
    sel = CPU + '{service_name="shop"}'
    span = {"from": T0 - 10, "until": T0 + 60}
    sources = tempfile.mkdtemp(prefix="ui-sources-", dir=ARGS.tmp)
    with Server(extra=["--multitenancy", "--source-dir", sources]) as srv:
        hdr = {"X-Scope-OrgID": tenant}

        def get_json(path, **params):
            st, body, _ = srv.request("GET", path + "?" + urllib.parse.urlencode(params), None, hdr)
            assert st == 200, (path, st, body[:300])
            return json.loads(body)

        for i, f in enumerate(files):
            env = "prod" if i % 2 else "canary"
            st = srv.request("POST", "/ingest?" + urllib.parse.urlencode(
                {"name": f"shop{{env={env}}}", "format": "pprof", "from": T0 + 10 * i}), open(f, "rb").read(), hdr)[0]
            assert st == 200
        fb = get_json("/api/v1/query", query=sel, format="flamegraph", **span)
        top = get_json("/api/v1/query", query=sel, format="top", **span)
        total = fb["flamebearer"]["numTicks"]
        fns = {f["name"]: f for f in top["functions"]}
        search = "crypto/sha256.block"
        canary = get_json("/api/v1/query", query=CPU + '{service_name="shop",env="canary"}', format="top", **span)
        left = get_json("/api/v1/query", query=sel, format="top", **{"from": T0 - 10, "until": T0 + 25})
        right = get_json("/api/v1/query", query=sel, format="top", **{"from": T0 + 26, "until": T0 + 60})
        profiles = get_json("/api/v1/profiles", query=sel, **span)["profiles"]
        fn = top["functions"][0]["name"]
        sw = get_json("/api/v1/query", query=sel, format="sandwich", function=fn, **span)
        lines = get_json("/api/v1/query", query=sel, format="lines", function=fn, **span)
        # The function's file, as --source-dir finds it by name: numbered lines, a few past its last.
        rows = [r for r in lines["lines"] if r["total"]]
        if rows:
            main = max({r["file"] for r in rows}, key=lambda f: sum(r["total"] for r in rows if r["file"] == f))
            last = max(r["line"] for r in rows if r["file"] == main)
            with open(os.path.join(sources, os.path.basename(main)), "w") as f:
                f.write("".join(f"// line {k}\n" for k in range(1, last + 4)))
        src = get_json("/api/v1/query", query=sel, format="source", function=fn, **span)
        assert not rows or src["origin"] == "source-dir", src.get("error")
        focused = get_json("/api/v1/query", query=sel, format="top", focus="sort\\.", hide="^runtime\\.", **span)
        fleet = get_json("/api/v1/query", query=CPU, format="top", group_by="env", limit=200, **span)["functions"]
        expect = {
            "tenant": tenant, "query": sel, "from": span["from"], "until": span["until"],
            "total": total, "totalText": js_value(total, "nanoseconds"),
            "top": {"name": top["functions"][0]["name"],
                    "selfText": js_value(top["functions"][0]["self"], "nanoseconds")},
            "search": {"text": "sha256.block", "name": search, "other": "main.sortWords",
                       "percent": float(js_percent(fns[search]["total"], total)[:-1])},
            "zoom": "main.hashBlocks", "canaryTotal": canary["total"],
            "diff": {"leftFrom": T0 - 10, "leftUntil": T0 + 25, "rightFrom": T0 + 26, "rightUntil": T0 + 60,
                     "left": left["total"], "right": right["total"], "leftText": js_value(left["total"], "nanoseconds"),
                     "functions": len({f["name"] for f in left["functions"] + right["functions"] if f["self"]})},
            "profiles": {"count": len(profiles), "firstTotal": profiles[0]["total"]},
            "fn": {"name": fn, "callers": len(sw["callers"]["flamebearer"]["levels"][2]) // 4,
                   "callees": len(sw["callees"]["flamebearer"]["levels"][2]) // 4 if len(sw["callees"]["flamebearer"]["levels"]) > 2 else 0,
                   "lines": len(lines["lines"]), "total": lines["total"]},
            "source": {"rows": len(src["lines"]), "hot": sum(1 for r in src["lines"] if r["total"]),
                       "first": src["lines"][0]["text"] if src["lines"] else None},
            "fleet": {"query": CPU, "top": fleet[0]["name"], "selfText": js_value(fleet[0]["self"], "nanoseconds"),
                      "groups": [g["labels"]["env"] for g in fleet[0]["groups"]], "rows": len(fleet)},
            "filter": {"focus": "sort\\.", "hide": "^runtime\\.", "total": focused["total"],
                       "top": focused["functions"][0]["name"], "names": [f["name"] for f in focused["functions"]]},
        }
        out = os.path.join(here, "..", "out", "browser")  # kept: tests/out/ is not committed
        exp = os.path.join(ARGS.tmp, "browser-expect.json")
        with open(exp, "w") as f:
            json.dump(expect, f)
        r = subprocess.run(["node", "ui.test.mjs"], cwd=here, capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, HEARTH_URL=srv.url(""), EXPECT=exp, OUT=out))
        assert r.returncode == 0, (r.stdout[-3000:] + r.stderr[-3000:])
        dl = re.search(r"download (\S+)", r.stdout).group(1)
        assert pprof_raw(dl)[1] == [profiles[0]["total"]], "the UI's pprof download is the opened profile"
        print("   ", r.stdout.strip().splitlines()[-1], "- screenshots in", out)


@test
def grafana_provisioning_queries_work():
    """deploy/grafana: the data source is Pyroscope-typed, and every dashboard query - the
    data-source panels (as the Connect calls Grafana makes) and the /embed iframes - answers
    with the pushed data once the dashboard variables are filled in."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    g = os.path.join(root, "deploy", "grafana")
    ds = open(os.path.join(g, "provisioning", "datasources", "hearth.yaml")).read()
    assert re.search(r"^\s+type: grafana-pyroscope-datasource$", ds, re.M) and re.search(r"^\s+uid: hearth$", ds, re.M)
    prov = open(os.path.join(g, "provisioning", "dashboards", "hearth.yaml")).read()
    assert "type: file" in prov and "/var/lib/grafana/dashboards/hearth" in prov
    dash = json.load(open(os.path.join(g, "dashboards", "hearth.json")))
    cpu = os.path.join(ARGS.testdata, "pprof", "go-runtime-cpu-02.pb.gz")
    total = pprof_raw(cpu)[1][1]
    now_ms = int(time.time() * 1000)
    with Server() as srv:
        assert srv.ingest(open(cpu, "rb").read(), name="my-service", format="pprof", **{"from": now_ms // 1000})[0] == 200
        env = {"service": "my-service", "hearth_url": srv.url(""), "__from": str(now_ms - 3600000), "__to": str(now_ms + 60000)}
        fill = lambda s: re.sub(r"\$\{?(\w+)\}?", lambda m: env[m.group(1)], s)
        kinds = set()
        for p in dash["panels"]:
            for t in p.get("targets", []):
                assert p["datasource"]["uid"] == t["datasource"]["uid"] == "hearth", p["title"]
                doc = {"profileTypeID": t["profileTypeId"], "labelSelector": fill(t["labelSelector"]),
                       "start": int(env["__from"]), "end": int(env["__to"])}
                method = "SelectSeries" if t["queryType"] == "metrics" else "SelectMergeStacktraces"
                if method == "SelectSeries":
                    doc.update(step=15, groupBy=t["groupBy"])
                st, b, _ = srv.request("POST", "/querier.v1.QuerierService/" + method, json.dumps(doc).encode(),
                                       {"Content-Type": "application/json"})
                assert st == 200, (p["title"], st, b[:300])
                r = json.loads(b)
                got = (sum(pt["value"] for s in r["series"] for pt in s["points"]) if method == "SelectSeries"
                       else int(r["flamegraph"]["total"]))
                assert got == total, (p["title"], got, total)
                kinds.add(p["type"])
            if p["type"] == "text":
                src = fill(html.unescape(re.search(r'<iframe src="([^"]+)"', p["options"]["content"]).group(1)))
                u = urllib.parse.urlparse(src)
                assert u.path == "/embed", src
                st, b, hdr = srv.request("GET", u.path + "?" + u.query)
                assert st == 200 and "text/html" in hdr["Content-Type"], (src, st)
                q = dict(urllib.parse.parse_qsl(u.query))
                assert q["view"] in ("flamegraph", "timeseries", "table") and q["theme"] in ("dark", "light")
                assert query(srv, q["query"], frm=q["from"], until=q["until"])["total"] == total, src
                kinds.add("embed-" + q["view"])
        assert kinds == {"timeseries", "flamegraph", "embed-flamegraph", "embed-timeseries", "embed-table"}, kinds
