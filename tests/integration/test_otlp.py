"""OTLP profiles ingest: POST /v1development/profiles and /otlp/v1development/profiles.

Requests are built here from opentelemetry-proto v1.10's field numbers (written out below,
not taken from Hearth's .proto), from real pprof files of the shared test data: the pprof's
samples, locations, functions and mappings become an OTLP dictionary and one Profile per
sample type. The same pprof sent to /ingest under another name is the twin every answer is
compared with.
"""
import gzip
import json
import os

from harness import Server, T0, connect_json, read_testdata, test
from protowire import pb_decode, pb_encode_field, pb_field, pb_packed, pb_put_varint

OTLP_PATHS = ("/v1development/profiles", "/otlp/v1development/profiles")
PB = {"Content-Type": "application/x-protobuf"}
JS = {"Content-Type": "application/json"}
BUILD_ID_GNU = "process.executable.build_id.gnu"


# ---------------------------------------------------------------- pprof, read

def ints(m, num):
    """A repeated varint field, packed or not."""
    out = []
    for v in m.get(num, []):
        out.extend(pb_packed(v) if isinstance(v, bytes) else [v])
    return out


def one(m, num, default=0):
    return m.get(num, [default])[-1]


def pprof_parse(raw):
    """A pprof (profile.proto) as plain Python: what the converter below needs."""
    p = pb_decode(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    strs = [s.decode() for s in p.get(6, [])]
    vt = lambda b: (strs[one(pb_decode(b), 1)], strs[one(pb_decode(b), 2)])
    samples = []
    for b in p.get(2, []):
        s = pb_decode(b)
        labels = [(strs[one(pb_decode(lb), 1)], strs[one(pb_decode(lb), 2)]) for lb in s.get(3, [])]
        samples.append({"locs": ints(s, 1), "values": ints(s, 2), "labels": [lv for lv in labels if lv[1]]})
    mappings = {}
    for b in p.get(3, []):
        m = pb_decode(b)
        mappings[one(m, 1)] = {"start": one(m, 2), "limit": one(m, 3), "offset": one(m, 4),
                               "file": strs[one(m, 5)], "build_id": strs[one(m, 6)]}
    functions = {}
    for b in p.get(5, []):
        f = pb_decode(b)
        functions[one(f, 1)] = {"name": strs[one(f, 2)], "system_name": strs[one(f, 3)],
                                "file": strs[one(f, 4)], "start_line": one(f, 5)}
    locations = {}
    for b in p.get(4, []):
        lo = pb_decode(b)
        lines = [(one(pb_decode(ln), 1), one(pb_decode(ln), 2)) for ln in lo.get(4, [])]
        locations[one(lo, 1)] = {"mapping": one(lo, 2), "address": one(lo, 3), "lines": lines}
    return {"types": [vt(b) for b in p.get(1, [])], "samples": samples, "mappings": mappings,
            "functions": functions, "locations": locations, "time": one(p, 9), "duration": one(p, 10),
            "period_type": vt(p[11][-1]) if 11 in p else None, "period": one(p, 12)}


# ---------------------------------------------------------------- OTLP, a neutral model

class Otlp:
    """A request's dictionary and profiles, indices as v1.10 lays them out: each table's
    entry 0 is its null entry (string "", mapping, location, function, link, stack)."""

    def __init__(self):
        self.strings, self.str_ix = [""], {"": 0}
        self.mappings = [{"start": 0, "limit": 0, "offset": 0, "file": 0, "attrs": []}]
        self.locations = [{"mapping": 0, "address": 0, "lines": []}]
        self.functions = [{"name": 0, "system_name": 0, "file": 0, "start_line": 0}]
        self.links = [(b"", b"")]
        self.stacks, self.stack_ix = [[]], {(): 0}
        self.attrs, self.attr_ix = [], {}
        self.resources = []  # [(resource attrs [(k, v)], scope attrs, [profile dict])]

    def s(self, text):
        if text not in self.str_ix:
            self.str_ix[text] = len(self.strings)
            self.strings.append(text)
        return self.str_ix[text]

    def attr(self, key, value):
        k = (key, value)
        if k not in self.attr_ix:
            self.attr_ix[k] = len(self.attrs)
            self.attrs.append((self.s(key), value))
        return self.attr_ix[k]

    def stack(self, locs):
        t = tuple(locs)
        if t not in self.stack_ix:
            self.stack_ix[t] = len(self.stacks)
            self.stacks.append(list(locs))
        return self.stack_ix[t]

    def add_pprof(self, p, resource, scope=(), build_id=None):
        """One Profile per sample type of pprof p, under one resource and scope. build_id:
        the GNU build id attribute given to every mapping (pprof's own when None)."""
        fmap, mmap, lmap = {}, {}, {}
        for fid, f in sorted(p["functions"].items()):
            fmap[fid] = len(self.functions)
            self.functions.append({"name": self.s(f["name"]), "system_name": self.s(f["system_name"]),
                                   "file": self.s(f["file"]), "start_line": f["start_line"]})
        for mid, m in sorted(p["mappings"].items()):
            mmap[mid] = len(self.mappings)
            bid = build_id if build_id is not None else m["build_id"]
            self.mappings.append({"start": m["start"], "limit": m["limit"], "offset": m["offset"],
                                  "file": self.s(m["file"]), "attrs": [self.attr(BUILD_ID_GNU, bid)] if bid else []})
        for lid, lo in sorted(p["locations"].items()):
            lmap[lid] = len(self.locations)
            self.locations.append({"mapping": mmap.get(lo["mapping"], 0), "address": lo["address"],
                                   "lines": [(fmap[f], line) for f, line in lo["lines"]]})
        profiles = []
        for i, (t, u) in enumerate(p["types"]):
            samples = [{"stack": self.stack([lmap[x] for x in s["locs"]]),
                        "attrs": [self.attr(k, v) for k, v in s["labels"]], "values": [s["values"][i]]}
                       for s in p["samples"]]
            profiles.append({"type": (self.s(t), self.s(u)), "samples": samples, "time": p["time"],
                             "duration": p["duration"], "period": p["period"],
                             "period_type": (self.s(p["period_type"][0]), self.s(p["period_type"][1]))
                             if p["period_type"] else None})
        self.resources.append((list(resource), list(scope), profiles))
        return profiles

    # ---- protobuf, field numbers of opentelemetry-proto v1.10

    @staticmethod
    def packed(nums, num):
        return pb_field(num, b"".join(pb_put_varint(x) for x in nums)) if nums else b""

    @staticmethod
    def kv(k, v):  # common.v1.KeyValue{key=1, value=2 AnyValue{string_value=1}}
        return pb_field(1, k.encode()) + pb_field(2, pb_field(1, v.encode()))

    def profile_pb(self, p):
        vt = lambda tu: pb_encode_field(1, 0, tu[0]) + pb_encode_field(2, 0, tu[1])
        out = pb_field(1, vt(p["type"]))  # Profile.sample_type = 1
        for s in p["samples"]:  # Sample{stack_index=1, attribute_indices=2, link_index=3, values=4, timestamps=5}
            if getattr(self, "v19", False):  # v1.9's Sample{values=2, attribute_indices=3, link_index=4}
                body = pb_encode_field(1, 0, s["stack"]) + self.packed(s.get("values", []), 2)
                body += self.packed(s["attrs"], 3) + (pb_encode_field(4, 0, s["link"]) if s.get("link") else b"")
            else:
                body = pb_encode_field(1, 0, s["stack"]) + self.packed(s["attrs"], 2)
                body += pb_encode_field(3, 0, s.get("link", 0)) + self.packed(s.get("values", []), 4)
            if s.get("timestamps"):
                body += pb_field(5, b"".join(t.to_bytes(8, "little") for t in s["timestamps"]))
            out += pb_field(2, body)
        out += pb_encode_field(3, 1, p["time"].to_bytes(8, "little"))  # time_unix_nano, fixed64
        out += pb_encode_field(4, 0, p["duration"])  # duration_nano
        if p["period_type"]:
            out += pb_field(5, vt(p["period_type"]))
        out += pb_encode_field(6, 0, p["period"]) + self.packed(p.get("attrs", []), 11)
        return out

    def dictionary_pb(self):
        d = b""
        for m in self.mappings:  # mapping_table = 1
            d += pb_field(1, pb_encode_field(1, 0, m["start"]) + pb_encode_field(2, 0, m["limit"]) +
                          pb_encode_field(3, 0, m["offset"]) + pb_encode_field(4, 0, m["file"]) +
                          self.packed(m["attrs"], 5))
        for lo in self.locations:  # location_table = 2, Location{mapping_index=1, address=2, lines=3}
            lines = b"".join(pb_field(3, pb_encode_field(1, 0, f) + pb_encode_field(2, 0, ln)) for f, ln in lo["lines"])
            d += pb_field(2, pb_encode_field(1, 0, lo["mapping"]) + pb_encode_field(2, 0, lo["address"]) + lines +
                          self.packed(lo.get("attrs", []), 4))
        for f in self.functions:  # function_table = 3
            d += pb_field(3, pb_encode_field(1, 0, f["name"]) + pb_encode_field(2, 0, f["system_name"]) +
                          pb_encode_field(3, 0, f["file"]) + pb_encode_field(4, 0, f["start_line"]))
        for trace, span in self.links:  # link_table = 4
            d += pb_field(4, pb_field(1, trace) + pb_field(2, span))
        for text in self.strings:  # string_table = 5
            d += pb_field(5, text.encode())
        for k, v in self.attrs:  # attribute_table = 6, KeyValueAndUnit{key_strindex=1, value=2}
            d += pb_field(6, pb_encode_field(1, 0, k) + pb_field(2, pb_field(1, v.encode())))
        for st in self.stacks:  # stack_table = 7
            d += pb_field(7, self.packed(st, 1))
        return d

    def to_protobuf(self):
        out = b""
        for res, scope, profiles in self.resources:  # resource_profiles = 1
            rp = pb_field(1, b"".join(pb_field(1, self.kv(k, v)) for k, v in res))
            sc = pb_field(1, pb_field(1, b"hearth-test") + b"".join(pb_field(3, self.kv(k, v)) for k, v in scope))
            rp += pb_field(2, sc + b"".join(pb_field(2, self.profile_pb(p)) for p in profiles))
            out += pb_field(1, rp)
        return out + pb_field(2, self.dictionary_pb())  # dictionary = 2

    # ---- OTLP JSON: lowerCamelCase, 64-bit integers as strings, ids in hex

    def to_json(self):
        kvs = lambda attrs: [{"key": k, "value": {"stringValue": v}} for k, v in attrs]
        vt = lambda tu: {"typeStrindex": tu[0], "unitStrindex": tu[1]}

        def profile(p):
            out = {"sampleType": vt(p["type"]), "timeUnixNano": str(p["time"]), "durationNano": str(p["duration"]),
                   "period": str(p["period"]), "attributeIndices": p.get("attrs", []), "samples": [
                       {"stackIndex": s["stack"], "attributeIndices": s["attrs"], "linkIndex": s.get("link", 0),
                        "values": [str(v) for v in s.get("values", [])],
                        "timestampsUnixNano": [str(t) for t in s.get("timestamps", [])]} for s in p["samples"]]}
            if p["period_type"]:
                out["periodType"] = vt(p["period_type"])
            return out

        return json.dumps({
            "resourceProfiles": [{"resource": {"attributes": kvs(res)},
                                  "scopeProfiles": [{"scope": {"name": "hearth-test", "attributes": kvs(scope)},
                                                     "profiles": [profile(p) for p in profiles]}]}
                                 for res, scope, profiles in self.resources],
            "dictionary": {
                "mappingTable": [{"memoryStart": str(m["start"]), "memoryLimit": str(m["limit"]),
                                  "fileOffset": str(m["offset"]), "filenameStrindex": m["file"],
                                  "attributeIndices": m["attrs"]} for m in self.mappings],
                "locationTable": [{"mappingIndex": lo["mapping"], "address": str(lo["address"]),
                                   "lines": [{"functionIndex": f, "line": str(ln)} for f, ln in lo["lines"]],
                                   "attributeIndices": lo.get("attrs", [])} for lo in self.locations],
                "functionTable": [{"nameStrindex": f["name"], "systemNameStrindex": f["system_name"],
                                   "filenameStrindex": f["file"], "startLine": str(f["start_line"])}
                                  for f in self.functions],
                "linkTable": [{"traceId": t.hex(), "spanId": s.hex()} for t, s in self.links],
                "stringTable": self.strings,
                "attributeTable": [{"keyStrindex": k, "value": {"stringValue": v}} for k, v in self.attrs],
                "stackTable": [{"locationIndices": st} for st in self.stacks]}}).encode()


# ---------------------------------------------------------------- answers compared

def series_of(srv, service):
    """{profile type: sorted label sets without service_name} of one service."""
    out = {}
    for s in srv.get_json("/api/v1/series", query='{service_name="%s"}' % service)["series"]:
        labels = {k: v for k, v in s["labels"].items() if k != "service_name"}
        out.setdefault(s["profileType"], []).append(sorted(labels.items()))
    return {k: sorted(v) for k, v in out.items()}


def answers(srv, service, span):
    """Per profile type of the service: the top table, the folded stacks and the flame graph."""
    out = {}
    for ptype in series_of(srv, service):
        sel = ptype + '{service_name="%s"}' % service
        top = srv.get_json("/api/v1/query", query=sel, format="top", **span)
        folded = srv.get("/api/v1/query", query=sel, format="folded", **span)
        fg = srv.get_json("/api/v1/query", query=sel, format="flamegraph", **span)["flamebearer"]
        out[ptype] = (top["total"], sorted((f["name"], f["self"], f["total"]) for f in top["functions"]),
                      folded, fg["numTicks"], fg["names"], fg["levels"])
    return out


def span_of(p):
    t = p["time"] // 10**9
    return {"from": t - 60, "until": t + 3600}


def post(srv, path, body, headers):
    return srv.request("POST", path, body, headers)


def otlp_of(path, service, **kw):
    p = pprof_parse(read_testdata(path))
    o = Otlp()
    o.add_pprof(p, [("service.name", service), ("host.name", "box-1")], **kw)
    return p, o


TWINS = ("pprof/go-runtime-cpu-00.pb.gz", "pprof/go-runtime-heap.pb.gz")


@test
def otlp_requests_land_like_their_pprof_twin():
    """A CPU profile with sample labels and a heap profile of four types, each sent as OTLP in
    protobuf and JSON, plain and gzipped, on both paths: every answer (series labels, top table,
    folded stacks, flame graph) equals the pprof twin's, also after a restart (WAL replay)."""
    with Server() as srv:
        cases = []
        for path in TWINS:
            p = pprof_parse(read_testdata(path))
            twin = "twin-" + os.path.basename(path).split(".")[0]
            st, body = srv.ingest(read_testdata(path), name=twin, format="pprof")
            assert st == 200, body
            for enc in ("pb", "json", "pb.gz", "json.gz"):
                svc = f"otlp-{enc}-{os.path.basename(path).split('.')[0]}"
                o = Otlp()
                o.add_pprof(p, [("service.name", svc), ("host.name", "box-1")])
                body = o.to_protobuf() if enc.startswith("pb") else o.to_json()
                hdr = dict(PB if enc.startswith("pb") else JS)
                if enc.endswith(".gz"):
                    body, hdr["Content-Encoding"] = gzip.compress(body), "gzip"
                st, answer, h = post(srv, OTLP_PATHS[len(cases) % 2], body, hdr)
                assert st == 200, (enc, st, answer)
                # an ExportProfilesServiceResponse without partial_success, in the request's encoding
                assert answer == (b"" if enc.startswith("pb") else b"{}"), answer
                assert h["Content-Type"] == hdr["Content-Type"], h
                cases.append((twin, svc, span_of(p)))

        def check():
            for twin, svc, span in cases:
                p = pprof_parse(read_testdata(next(x for x in TWINS if x.split("/")[1].startswith(twin[5:]))))
                # the twin's totals are the file's: the comparison below is not between two empty answers
                for ptype, ans in answers(srv, twin, span).items():
                    i = p["types"].index(tuple(ptype.split(":")[1:3]))
                    assert ans[0] == sum(s["values"][i] for s in p["samples"]) > 0, (twin, ptype, ans[0])
                want = series_of(srv, twin)
                # resource attributes become labels (host.name -> host_name) on every series
                assert {t: sorted([kv for kv in ls if kv[0] != "host_name"] for ls in v)
                        for t, v in series_of(srv, svc).items()} == want, svc
                assert all(("host_name", "box-1") in ls for v in series_of(srv, svc).values() for ls in v)
                assert answers(srv, svc, span) == answers(srv, twin, span), svc

        check()
        cpu = series_of(srv, "twin-go-runtime-cpu-00")
        assert sorted(cpu) == ["process_cpu:cpu:nanoseconds:cpu:nanoseconds",
                               "process_cpu:samples:count:cpu:nanoseconds"], cpu
        # the pprof sample label `endpoint` splits the CPU profile into four series (one for the
        # samples without it), in both
        assert [dict(ls).get("endpoint") for ls in cpu["process_cpu:cpu:nanoseconds:cpu:nanoseconds"]] == \
            [None, "/api/checksum", "/api/orders", "/api/search"]
        assert len(series_of(srv, "twin-go-runtime-heap")) == 4
        data = srv.data_dir
    with Server(data_dir=data) as srv:
        check()


def two_profile_request(bad_field):
    """One good CPU profile and a second whose field bad_field is out of range."""
    p, o = otlp_of("pprof/go-runtime-cpu-00.pb.gz", "partial")
    good, second = o.resources[0][2]
    if bad_field == "stack":
        second["samples"][3]["stack"] = 999999
    elif bad_field == "attribute":
        second["samples"][0]["attrs"] = [len(o.attrs) + 5]
    elif bad_field == "location":
        o.stacks.append([len(o.locations) + 7])
        second["samples"][0]["stack"] = len(o.stacks) - 1
    return p, o, good


@test
def partial_success_names_the_profiles_left_out():
    """Of two profiles, the one with an out-of-range index is left out (partial_success in the
    request's encoding); the other is stored whole, with the totals of its pprof twin."""
    for enc in ("pb", "json"):
        for bad, why in (("stack", "stack index 999999 is out of range"),
                         ("attribute", "attribute index %d is out of range"),
                         ("location", "location index %d is out of range")):
            with Server() as srv:
                p, o, good = two_profile_request(bad)
                why = why % (len(o.attrs) + 5 if bad == "attribute" else len(o.locations) + 7) if "%" in why else why
                body, hdr = (o.to_protobuf(), PB) if enc == "pb" else (o.to_json(), JS)
                st, answer, _ = post(srv, OTLP_PATHS[0], body, hdr)
                assert st == 200, (bad, st, answer)
                if enc == "pb":
                    ps = pb_decode(pb_decode(answer)[1][0])  # ExportProfilesServiceResponse.partial_success = 1
                    rejected, msg = ps[1][0], ps[2][0].decode()
                else:
                    ps = json.loads(answer)["partialSuccess"]
                    rejected, msg = int(ps["rejectedProfiles"]), ps["errorMessage"]
                assert rejected == 1 and why in msg, (bad, rejected, msg)
                types = series_of(srv, "partial")
                assert list(types) == ["process_cpu:samples:count:cpu:nanoseconds"], types
                sel = 'process_cpu:samples:count:cpu:nanoseconds{service_name="partial"}'
                total = srv.get_json("/api/v1/query", query=sel, format="top", **span_of(p))["total"]
                assert total == sum(s["values"][0] for s in p["samples"]), total
                if bad == "stack":  # WAL replay leaves out what live ingest left out
                    srv.stop()
                    srv.start()
                    assert list(series_of(srv, "partial")) == ["process_cpu:samples:count:cpu:nanoseconds"]
                    assert srv.get_json("/api/v1/query", query=sel, format="top", **span_of(p))["total"] == total


@test
def bad_requests_are_refused_whole_and_store_nothing():
    p, o = otlp_of("pprof/go-runtime-cpu-00.pb.gz", "bad")
    every_bad = Otlp()
    every_bad.add_pprof(p, [("service.name", "bad")])
    for prof in every_bad.resources[0][2]:
        prof["samples"][0]["stack"] = 12345
    no_values = Otlp()
    no_values.add_pprof(p, [("service.name", "bad")])
    for prof in no_values.resources[0][2]:
        prof["samples"][0]["values"] = []
    bad_strings = Otlp()
    bad_strings.add_pprof(p, [("service.name", "bad")])
    bad_strings.strings[0] = "not empty"
    long_key = Otlp()
    long_key.add_pprof(p, [("service.name", "bad"), ("k" * 5000, "v")])
    good = o.to_protobuf()
    cases = [
        ("a 5,000-byte attribute name", OTLP_PATHS[0], long_key.to_protobuf(), PB, 400, "over the limit of 1024"),
        ("garbage protobuf", OTLP_PATHS[0], b"\x0a\xff\xff\xff\xff\x0f", PB, 400, "protobuf"),
        ("JSON that is no object", OTLP_PATHS[1], b"[1, 2]", JS, 400, "JSON"),
        ("JSON of the wrong types", OTLP_PATHS[1], b'{"resourceProfiles": 5}', JS, 400, "resourceProfiles"),
        ("every profile bad", OTLP_PATHS[0], every_bad.to_protobuf(), PB, 400, "stack index 12345 is out of range"),
        ("a sample without values", OTLP_PATHS[0], no_values.to_protobuf(), PB, 400, "neither values nor timestamps"),
        ("string_table[0] not empty", OTLP_PATHS[0], bad_strings.to_protobuf(), PB, 400, "string_table[0]"),
        ("unknown content type", OTLP_PATHS[0], good, {"Content-Type": "text/plain"}, 415, "Content-Type"),
        ("gzip said, not sent", OTLP_PATHS[0], good, dict(PB, **{"Content-Encoding": "gzip"}), 400, "gzip"),
        ("corrupt gzip", OTLP_PATHS[0], b"\x1f\x8b\x08\x00garbage", dict(PB, **{"Content-Encoding": "gzip"}), 400,
         "gzip"),
        ("unknown encoding", OTLP_PATHS[0], good, dict(PB, **{"Content-Encoding": "br"}), 415, "Content-Encoding"),
    ]
    with Server() as srv:
        for name, path, body, hdr, want, words in cases:
            st, answer, _ = post(srv, path, body, hdr)
            assert st == want, (name, st, answer)
            assert words in json.loads(answer)["error"], (name, answer)
        assert srv.get("/v1development/profiles")[0] == 405
        assert srv.get_json("/api/v1/series", query="{}")["series"] == []
        # an empty export is a valid request, storing nothing
        assert post(srv, OTLP_PATHS[0], b"", PB)[:2] == (200, b"")
        assert post(srv, OTLP_PATHS[1], b"{}", JS)[:2] == (200, b"{}")
        assert srv.get_json("/api/v1/series", query="{}")["series"] == []
    with Server(extra=["--max-body-bytes", "1000"]) as srv:
        st, answer, _ = post(srv, OTLP_PATHS[0], good, PB)
        assert st == 413 and "max-body-bytes" in json.loads(answer)["error"], (st, answer)
    # the decode memory is counted from the wire before unpacking: a request that could never
    # fit the budget is refused (a gzip body once inflated, JSON by its size), and nothing stored
    with Server(extra=["--max-decode-memory", "1MiB"]) as srv:
        for body, hdr in ((good, PB), (gzip.compress(good), dict(PB, **{"Content-Encoding": "gzip"})),
                          (o.to_json(), JS)):
            st, answer, _ = post(srv, OTLP_PATHS[0], body, hdr)
            assert st == 413 and "--max-decode-memory" in json.loads(answer)["error"], (st, answer)
        assert srv.get_json("/api/v1/series", query="{}")["series"] == []
        small = Otlp()
        small.add_pprof(pprof_parse(read_testdata("pprof/go-runtime-mutex.pb.gz")), [("service.name", "small")])
        assert post(srv, OTLP_PATHS[0], small.to_protobuf(), PB)[0] == 200


@test
def long_attribute_names_are_kept_whole_not_cut():
    """Two 300-byte attribute names that share their first 255 bytes stay two labels (names
    were cut to 255 bytes, so they merged into one)."""
    p = pprof_parse(read_testdata("pprof/go-runtime-mutex.pb.gz"))
    a, b = "x" * 255 + "a" * 45, "x" * 255 + "b" * 45
    o = Otlp()
    o.add_pprof(p, [("service.name", "long"), (a, "1"), (b, "2")])
    with Server() as srv:
        st, answer, _ = post(srv, OTLP_PATHS[0], o.to_protobuf(), PB)
        assert st == 200, answer
        names = srv.get_json("/api/v1/labels")
        names = names.get("names", names.get("labels", names)) if isinstance(names, dict) else names
        assert a in names and b in names, [n[:20] + "..." + n[-5:] for n in names]


def export_mappings(srv, sel, span):
    """(file, build id) of every mapping of the pprof export of a merge."""
    st, raw = srv.get("/api/v1/query", query=sel, format="pprof", **span)
    assert st == 200, raw
    p = pb_decode(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    strs = [s.decode() for s in p.get(6, [])]
    return sorted((strs[one(pb_decode(m), 5)], strs[one(pb_decode(m), 6)]) for m in p.get(3, []))


@test
def build_ids_links_and_ebpf_cpu_samples():
    """The eBPF profiler's shape: samples counted at a cpu period, addresses only, a build id
    on the mapping, a kernel frame, a span link on one sample. The type and values follow Pyroscope's mapping
    (process_cpu, count x period); the build id reaches the pprof export's mapping; the link
    makes a span sample, as a pprof span_id label does."""
    o = Otlp()
    bid = "2d6912fd3dd64542f6f6294f4bf9cb6c265b3085"
    o.mappings.append({"start": 0x400000, "limit": 0x800000, "offset": 0, "file": o.s("/usr/bin/app"),
                       "attrs": [o.attr(BUILD_ID_GNU, bid)]})
    o.locations += [{"mapping": 1, "address": 0x401000 + i * 16, "lines": []} for i in range(3)]
    # a kernel frame, as the eBPF profiler marks it, on the null mapping
    o.locations.append({"mapping": 0, "address": 0xffffffff81000010, "lines": [],
                        "attrs": [o.attr("profile.frame.type", "kernel")]})
    o.links.append((bytes(range(16)), bytes.fromhex("00000c0ffee00001")))
    leaf, mid, root = 1, 2, 3
    period = 10_000_000  # 100 Hz
    t = T0 * 10**9
    samples = [{"stack": o.stack([leaf, mid, root]), "attrs": [], "values": [3, 4]},  # two events: 7
               {"stack": o.stack([mid, root]), "attrs": [], "timestamps": [t + 1, t + 2, t + 3]},  # no values: 3
               {"stack": o.stack([4, leaf, root]), "attrs": [o.attr("thread.name", "worker")], "values": [5],
                "link": 1}]
    # `__` names are Pyroscope's own: an attribute cannot set one
    o.resources.append(([("service.name", "ebpf"), ("process.executable.name", "app"), ("__name__", "x")], [], [{
        "type": (o.s("samples"), o.s("count")), "period_type": (o.s("cpu"), o.s("nanoseconds")), "period": period,
        "time": t, "duration": 0, "samples": samples}]))
    with Server() as srv:
        for enc, body, hdr in (("pb", o.to_protobuf(), PB), ("json", o.to_json(), JS)):
            st, answer, _ = post(srv, OTLP_PATHS[0], body, hdr)
            assert st == 200, (enc, st, answer)
        span = {"from": T0 - 60, "until": T0 + 3600}
        cpu = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
        exe = ("process_executable_name", "app")
        assert series_of(srv, "ebpf") == {cpu: [[exe], [exe, ("thread_name", "worker")]]}, series_of(srv, "ebpf")
        sel = cpu + '{service_name="ebpf"}'
        # sent twice (protobuf, then JSON): (7 + 3 + 5) events x period, twice
        assert srv.get_json("/api/v1/query", query=sel, format="top", **span)["total"] == 2 * 15 * period
        # the kernel frame's mapping is named as Pyroscope names it; its address is kept past INT64_MAX
        assert export_mappings(srv, sel, span) == [("/usr/bin/app", bid), ("[kernel]", "")]
        # the linked sample is a span sample of span 00000c0ffee00001, twice; no other span ran
        for spans, total in ((["00000c0ffee00001"], 2 * 5 * period), (["00000000deadbeef"], 0)):
            st, ans = connect_json(srv, "SelectMergeSpanProfile", dict(
                profileTypeID=cpu, labelSelector='{service_name="ebpf"}', spanSelector=spans,
                start=str((T0 - 60) * 1000), end=str((T0 + 3600) * 1000)))
            assert st == 200 and int(ans.get("flamegraph", {}).get("total", 0)) == total, (spans, st, ans)
        # ... of the link's trace, 000102...0f, which traceIdSelector selects
        for traces, total in (([bytes(range(16)).hex()], 2 * 5 * period), (["0f" * 16], 0)):
            st, ans = connect_json(srv, "SelectMergeStacktraces", dict(
                profileTypeID=cpu, labelSelector='{service_name="ebpf"}', traceIdSelector=traces,
                start=str((T0 - 60) * 1000), end=str((T0 + 3600) * 1000)))
            assert st == 200 and int(ans.get("flamegraph", {}).get("total", 0)) == total, (traces, st, ans)


@test
def otlp_routes_take_the_write_role_and_tenant():
    _, o = otlp_of("pprof/go-runtime-cpu-00.pb.gz", "tenanted")
    body = o.to_protobuf()
    with Server(extra=["--multitenancy"]) as srv:
        st, answer, _ = post(srv, OTLP_PATHS[0], body, PB)
        assert st == 401 and "X-Scope-OrgID" in json.loads(answer)["error"], (st, answer)
        assert post(srv, OTLP_PATHS[1], body, dict(PB, **{"X-Scope-OrgID": "team-a"}))[0] == 200
        st, b, _ = srv.request("GET", "/api/v1/series?query=%7B%7D", headers={"X-Scope-OrgID": "team-a"})
        assert st == 200 and {s["labels"]["service_name"] for s in json.loads(b)["series"]} == {"tenanted"}
        st, b, _ = srv.request("GET", "/api/v1/series?query=%7B%7D", headers={"X-Scope-OrgID": "team-b"})
        assert st == 200 and json.loads(b)["series"] == []


@test
def an_older_otlp_layout_is_named_in_the_error():
    """A request whose samples are in opentelemetry-proto v1.9's layout (values = 2,
    attribute_indices = 3) is refused with a message naming the layout and the fix, whether
    the mismatch breaks the protobuf (attributes in field 3) or not (values alone in field
    2, which v1.10 reads as attribute indices); nothing is stored."""
    with Server() as srv:
        for attrs in (True, False):
            p, o = otlp_of("pprof/go-runtime-cpu-00.pb.gz", "old-layout")
            o.v19 = True
            for prof in o.resources[0][2]:
                for smp in prof["samples"]:
                    smp["attrs"] = smp["attrs"] if attrs else []
            st, body, _ = post(srv, OTLP_PATHS[0], o.to_protobuf(), PB)
            err = json.loads(body)["error"]  # no profile could be read: the whole request is refused
            assert st == 400 and "v1.9" in err and "upgrade the sender" in err, (attrs, st, err)
        assert series_of(srv, "old-layout") == {}
