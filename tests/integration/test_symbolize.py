"""Query-time symbolization: address-only profiles get function names, lines and
inlined frames from debug files found in --debuginfo-dir, uploads or a debuginfod server.

The reference answers are the tools' own: binutils' addr2line -f -i for DWARF files, and
go tool addr2line (the Go table) for the stripped Go binary. Every comparison is per address,
frame by frame, over the profile Hearth exports (format=pprof), so the flame graph, the table
and go tool pprof all read the same frames.
"""
import gzip
import io
import json
import os
import re
import shutil
import signal
import subprocess
import tarfile
import tempfile
import threading
import time
import urllib.parse

from harness import (ARGS, T0, Server, elf_with_build_id, free_port, metric, proc_status_kib, query, test,
                     wait_until)
from protowire import pb_decode, pb_field, pb_packed, pb_put_varint, pb_strs

SYM = "symbolize"
PARCA_ID = "2d6912fd3dd64542f6f6294f4bf9cb6c265b3085"
GO_ID = ("2d5745782d486738416336492d624458373872722f43476c446c45724d31434c692d6745383869752d2f5f"
         "6765757162714a666856504e464c73585830762f445a554f4e796c324b655554684d463241784b43")
STRIPPED_ID = ("595150334c6a706f4957766e4d6c7476614457742f454556526d5a2d665f79675433316e7169685f4a2f"
               "5a515a3830714d666c5a756f65714a79615154502f7057517431716e516f4b436b50696e756a474d6f")
SAMPLES = "process_cpu:samples:count:cpu:nanoseconds"
CPU_NS = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"


def td(name):
    return os.path.join(ARGS.testdata, SYM, name)


def tmpdir(prefix):
    return tempfile.mkdtemp(prefix=prefix, dir=ARGS.tmp)


def local_dir():
    """The three debug files in the three layouts --debuginfo-dir reads."""
    d = tmpdir("debuginfo-")
    shutil.copy(td(PARCA_ID + ".debuginfo"), os.path.join(d, PARCA_ID + ".debuginfo"))
    shutil.copy(td("go-example-app.debuginfo"), os.path.join(d, GO_ID))
    os.makedirs(os.path.join(d, STRIPPED_ID))
    shutil.copy(td("go-example-app-stripped.debuginfo"), os.path.join(d, STRIPPED_ID, "debuginfo"))
    return d


def push_file(srv, path, name):
    st, body = srv.ingest(open(path, "rb").read(), name=name, format="pprof", **{"from": T0})
    assert st == 200, (name, st, body)


def export(srv, sel):
    """The merged profile as pprof: ({address: [(name, file, line)] innermost first}, raw bytes)."""
    st, body, _ = srv.request("GET", "/api/v1/query?format=pprof&from=%d&until=%d&query=%s" %
                              (T0 - 10, T0 + 3600, urllib_quote(sel)))
    assert st == 200, (st, body[:200])
    raw = gzip.decompress(body)
    p = pb_decode(raw)
    strings = pb_strs(p, 6)
    funcs = {}
    for f in p.get(5, []):
        m = pb_decode(f)
        funcs[m[1][0]] = (strings[m.get(2, [0])[0]], strings[m.get(4, [0])[0]])
    locs = {}
    for l in p.get(4, []):
        m = pb_decode(l)
        frames = []
        for ln in m.get(4, []):
            lm = pb_decode(ln)
            name, file = funcs[lm[1][0]]
            frames.append((name, file, lm.get(2, [0])[0]))
        locs[m.get(3, [0])[0]] = frames
    return locs, raw


def urllib_quote(s):
    import urllib.parse
    return urllib.parse.quote(s)


def addr2line(binary, addrs):
    """binutils addr2line -f -i: {address: [(name, file, line)]} innermost first."""
    out = subprocess.run(["addr2line", "-f", "-i", "-a", "-e", binary] + ["0x%x" % a for a in addrs],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    res, cur, i = {}, None, 0
    while i < len(out):
        if re.fullmatch(r"0x[0-9a-f]+", out[i]):
            cur = int(out[i], 16)
            res[cur] = []
            i += 1
            continue
        name, (file, _, line) = out[i], out[i + 1].partition(" ")[0].rpartition(":")
        res[cur].append((name, file, int(line) if line.isdigit() else 0))
        i += 2
    return res


def go_addr2line(binary, addrs):
    """go tool addr2line (the Go pc table): {address: [(name, file, line)]}, one frame each."""
    out = subprocess.run(["go", "tool", "addr2line", binary], input="".join("0x%x\n" % a for a in addrs),
                         capture_output=True, text=True, check=True).stdout.splitlines()
    return {a: [(out[2 * k], out[2 * k + 1].rpartition(":")[0], int(out[2 * k + 1].rpartition(":")[2]))]
            for k, a in enumerate(addrs)}


def user_addrs(locs):
    return sorted(a for a in locs if a < 0xffffffff00000000 and a > 0x400000 and a < 0x1000000)


def check_against(locs, ref, binutils_go=False):
    """Every address's frames equal the reference's. binutils names a Go inlined chain's
    innermost frame by its outermost function; only that name is then read from the chain's end."""
    assert ref, "no reference answers"
    for a, want in ref.items():
        got = locs[a]
        if binutils_go and len(want) > 1 and want[0][0] == want[-1][0]:
            want = [(got[0][0],) + want[0][1:]] + want[1:]
        assert got == want, (hex(a), got, want)


@test
def symbolize_shared_profiles_from_local_dir_match_addr2line():
    d = local_dir()
    dec = os.path.join(d, "go-example-app.decompressed")  # binutils cannot read its .zdebug sections
    subprocess.run(["objcopy", "--decompress-debug-sections", td("go-example-app.debuginfo"), dec],
                   capture_output=True, check=True)
    srv = Server(extra=["--debuginfo-dir", d])
    with srv:
        push_file(srv, td("parca-main.cpu.pb.gz"), "parca-main")
        push_file(srv, td("go-example-app.cpu.pprof"), "go-app")
        push_file(srv, td("go-example-app-stripped.cpu.pprof"), "go-stripped")
        locs, raw = export(srv, SAMPLES + '{service_name="parca-main"}')
        # SOURCES.md's answer, then binutils' for every address of the Go binary.
        assert locs[0x463784] == [
            ("main.iterate", "/home/brancz/src/github.com/polarsignals/pprof-labels-example/main.go", 27),
            ("main.iteratePerTenant", "/home/brancz/src/github.com/polarsignals/pprof-labels-example/main.go", 23),
            ("main.main", "/home/brancz/src/github.com/polarsignals/pprof-labels-example/main.go", 10)], locs[0x463784]
        check_against(locs, addr2line(td(PARCA_ID + ".debuginfo"), user_addrs(locs)), binutils_go=True)
        # Kernel frames arrived with names and keep them.
        assert locs[0xffffffff94c91b8a] == [("irq_exit", "", 0)], locs[0xffffffff94c91b8a]
        top = {f["name"]: f for f in query(srv, SAMPLES + '{service_name="parca-main"}')["functions"]}
        assert top["main.iterate"]["self"] == 923 and top["main.main"]["total"] == 929, top.get("main.iterate")
        # go tool pprof reads the export's functions and lines: the inlined chain is one trace.
        path = os.path.join(d, "parca.pb")
        open(path, "wb").write(raw)
        traces = subprocess.run(["go", "tool", "pprof", "-traces", path], capture_output=True, text=True,
                                check=True).stdout
        assert re.search(r"main\.iterate \(inline\)\n\s+main\.iteratePerTenant \(inline\)\n\s+main\.main\n\s+runtime\.main", traces), traces
        # -list reads the lines: main.go's line 27 holds main.iterate's 923 samples (a stand-in
        # source file, since the original is not here), and the mappings claim their symbols.
        src = os.path.join(d, "src")
        os.makedirs(src)
        open(os.path.join(src, "main.go"), "w").write("".join("// line %d\n" % i for i in range(1, 41)))
        r = subprocess.run(["go", "tool", "pprof", "-list", "^main.iterate$", "-source_path", src, "-trim_path",
                            "/home/brancz/src/github.com/polarsignals/pprof-labels-example", path],
                           capture_output=True, text=True, check=True)
        assert re.search(r"^\s+923\s+929\s+27:// line 27$", r.stdout, re.M), r.stdout
        assert "Local symbolization failed" not in r.stderr, r.stderr

        locs, _ = export(srv, CPU_NS + '{service_name="go-app"}')
        check_against(locs, addr2line(dec, user_addrs(locs)), binutils_go=True)
        assert locs[0x4d8745] == [("math/big.nat.norm", "/usr/lib/go/src/math/big/nat.go", 52),
                                  ("math/big.nat.add", "/usr/lib/go/src/math/big/nat.go", 122)], locs[0x4d8745]

        locs, _ = export(srv, CPU_NS + '{service_name="go-stripped"}')
        check_against(locs, go_addr2line(td("go-example-app-stripped.debuginfo"), user_addrs(locs)))
        assert locs[0x6491de] == [("github.com/polarsignals/pprof-example-app-go/fib.Fibonacci",
                                   "github.com/polarsignals/pprof-example-app-go/fib/fib.go", 13)]
        flame = json.dumps(query(srv, CPU_NS + '{service_name="go-stripped"}', fmt="flamegraph"))
        assert "fib.Fibonacci" in flame and "0x6491de" not in flame
    # The answers persisted: a restart without any debug file still names every frame.
    for bid in (PARCA_ID, GO_ID, STRIPPED_ID):
        assert os.path.getsize(os.path.join(srv.data_dir, "symcache", bid)) > 8, bid
    with Server(data_dir=srv.data_dir) as again:
        locs2, _ = export(again, SAMPLES + '{service_name="parca-main"}')
        assert locs2[0x463784][0][0] == "main.iterate" and len(locs2[0x463784]) == 3, locs2[0x463784]


C_PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
static inline __attribute__((always_inline)) long mix(long x) {
    long y = x * 2654435761L;
    return y ^ (y >> 13);
}
__attribute__((noinline)) long churn(long n) {
    long s = 0;
    for (long i = 0; i < n; i++) s += mix(i ^ s);
    return s;
}
int main(int argc, char **argv) {
    printf("%ld\n", churn(argc > 1 ? atol(argv[1]) : 1000));
    return 0;
}
"""
C_START = 0x555555554000  # where a PIE is mapped: addresses are this plus the file's vaddrs


def build_c_program():
    d = tmpdir("cprog-")
    src, binary = os.path.join(d, "prog.c"), os.path.join(d, "prog")
    open(src, "w").write(C_PROGRAM)
    subprocess.run(["gcc", "-g", "-O2", "-Wl,--build-id", "-o", binary, src], check=True)
    notes = subprocess.run(["readelf", "-n", binary], capture_output=True, text=True, check=True).stdout
    build_id = re.search(r"Build ID: ([0-9a-f]+)", notes).group(1)
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", binary], capture_output=True, text=True,
                         check=True).stdout
    body = dis.split("<churn>:")[1].split("\n\n")[0]
    churn = [int(m, 16) for m in re.findall(r"^\s+([0-9a-f]+):", body, re.M)]
    body = dis.split("<main>:")[1].split("\n\n")[0]
    main = [int(m, 16) for m in re.findall(r"^\s+([0-9a-f]+):", body, re.M)]
    ref = addr2line(binary, churn + main)
    inlined = [a for a in churn if len(ref[a]) == 2 and ref[a][0][0] == "mix"]
    assert inlined, ref
    return binary, build_id, [inlined[0], churn[0], main[0]], ref


def c_profile(build_id, vaddrs, start=C_START, base=C_START):
    """An address-only pprof: one sample per stack leaf..root, addresses base + vaddr in a PIE
    mapping at start (base 0: addresses already normalized to the file's own)."""
    strings = ["", "cpu", "nanoseconds", "/opt/prog", build_id]
    prof = pb_field(1, pb_encode(1, 1) + pb_encode(2, 2))
    prof += pb_field(3, pb_encode(1, 1) + pb_encode(2, start) + pb_encode(3, start + 0x10000) +
                     pb_encode(4, 0) + pb_encode(5, 3) + pb_encode(6, 4))
    for i, a in enumerate(vaddrs):
        prof += pb_field(4, pb_encode(1, i + 1) + pb_encode(2, 1) + pb_encode(3, base + a))
    # leaf (inlined mix in churn) <- main, and churn's entry <- main.
    for locs, v in (([1, 3], 70), ([2, 3], 30)):
        prof += pb_field(2, pb_field(1, b"".join(pb_put_varint(x) for x in locs)) + pb_field(2, pb_put_varint(v)))
    prof += b"".join(pb_field(6, s.encode()) for s in strings)
    prof += pb_encode(9, T0 * 10**9) + pb_encode(10, 10**10) + pb_field(11, pb_encode(1, 1) + pb_encode(2, 2))
    prof += pb_encode(12, 10000000)
    return prof


def pb_encode(num, v):
    return pb_put_varint(num << 3) + pb_put_varint(v)


def many_binaries_profile(n):
    """An address-only pprof of n binaries: mapping i (/opt/binI, a build id of its own) holds
    one location, sampled once with value i + 1."""
    strings = ["", "cpu", "nanoseconds"]
    prof = pb_field(1, pb_encode(1, 1) + pb_encode(2, 2))
    for i in range(n):
        strings += [f"/opt/bin{i}", "%040x" % (0xB1D000 + i)]
        start = 0x400000 + i * 0x100000
        prof += pb_field(3, pb_encode(1, i + 1) + pb_encode(2, start) + pb_encode(3, start + 0x10000) +
                         pb_encode(4, 0) + pb_encode(5, len(strings) - 2) + pb_encode(6, len(strings) - 1))
        prof += pb_field(4, pb_encode(1, i + 1) + pb_encode(2, i + 1) + pb_encode(3, start + 0x123))
        prof += pb_field(2, pb_field(1, pb_put_varint(i + 1)) + pb_field(2, pb_put_varint(i + 1)))
    prof += b"".join(pb_field(6, x.encode()) for x in strings)
    prof += pb_encode(9, T0 * 10**9) + pb_encode(10, 10**10) + pb_field(11, pb_encode(1, 1) + pb_encode(2, 2))
    return prof + pb_encode(12, 10000000)


@test
def symbolize_1200_binaries_hold_no_descriptors():
    """One profile of 1,200 distinct binaries, then queries: each is named BINARY!0xADDR, and
    the server's open descriptors do not grow with the binaries (a descriptor each would pass
    select()'s 1,024 and the server would drop every new connection)."""
    n = 1200
    with Server() as srv:
        st, body = srv.ingest(many_binaries_profile(n), name="fleet", format="pprof", **{"from": T0})
        assert st == 200, body
        before = metric(srv, "process_open_fds")
        for _ in range(2):  # the second query reads the symbolization cache
            top = {f["name"]: f["self"] for f in query(srv, CPU_NS + '{service_name="fleet"}')["functions"]}
            assert len(top) == n and top["bin7!0x%x" % (0x400000 + 7 * 0x100000 + 0x123)] == 8, len(top)
        after = metric(srv, "process_open_fds")
        assert after < before + 50, f"open descriptors {before:.0f} -> {after:.0f} after symbolizing {n} binaries"
        assert srv.get("/healthz")[0] == 200
    with Server(data_dir=srv.data_dir) as srv:  # the answers were persisted: a restart reads them back
        top = {f["name"]: f["self"] for f in query(srv, CPU_NS + '{service_name="fleet"}')["functions"]}
        assert len(top) == n, len(top)
        assert len(os.listdir(os.path.join(srv.data_dir, "symcache"))) == n


@test
def symbolize_c_program_uploaded_matches_addr2line_with_inlines():
    binary, build_id, vaddrs, ref = build_c_program()
    with Server() as srv:
        st, body = srv.ingest(c_profile(build_id, vaddrs), name="cprog", format="pprof", **{"from": T0})
        assert st == 200, body
        # No debug file yet: the frames are named binary!0xADDR.
        locs, _ = export(srv, CPU_NS + '{service_name="cprog"}')
        assert locs[C_START + vaddrs[0]] == [("prog!0x%x" % (C_START + vaddrs[0]), "", 0)], locs
        st, body, _ = srv.request("PUT", "/api/v1/debuginfo/" + build_id, open(binary, "rb").read())
        assert st == 200 and json.loads(body)["build_id"] == build_id, body
        locs, raw = export(srv, CPU_NS + '{service_name="cprog"}')
        for a in vaddrs:
            assert locs[C_START + a] == ref[a], (hex(a), locs[C_START + a], ref[a])
        assert [f[0] for f in locs[C_START + vaddrs[0]]] == ["mix", "churn"]
        top = {f["name"]: f for f in query(srv, CPU_NS + '{service_name="cprog"}')["functions"]}
        assert top["mix"]["self"] == 70 and top["churn"]["self"] == 30 and top["main"]["total"] == 100, top


@test
def symbolize_upload_api_list_delete_and_refusals():
    elf = open(td(PARCA_ID + ".debuginfo"), "rb").read()
    with Server(extra=["--max-debuginfo-bytes", "2MiB"]) as srv:
        push_file(srv, td("parca-main.cpu.pb.gz"), "parca-main")
        sel = SAMPLES + '{service_name="parca-main"}'
        assert export(srv, sel)[0][0x463784] == [("main!0x463784", "", 0)]
        for bid, body, want in (("xyz1", elf, 400), ("abc", elf, 400), (PARCA_ID, b"#!/bin/sh\n", 400),
                                (PARCA_ID, elf + bytes(1 << 20), 413)):
            st, b, _ = srv.request("PUT", "/api/v1/debuginfo/" + bid, body)
            assert st == want and json.loads(b)["error"], (bid, st, b[:200])
        assert srv.get_json("/api/v1/debuginfo") == {"debuginfo": []}
        st, b, _ = srv.request("PUT", "/api/v1/debuginfo/" + PARCA_ID, elf)
        assert st == 200, b
        listed = srv.get_json("/api/v1/debuginfo")["debuginfo"]
        assert [(x["build_id"], x["size"]) for x in listed] == [(PARCA_ID, len(elf))], listed
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", listed[0]["uploaded"]), listed
        assert export(srv, sel)[0][0x463784][0][0] == "main.iterate"
        st, b, _ = srv.request("DELETE", "/api/v1/debuginfo/" + PARCA_ID)
        assert st == 200, b
        assert srv.get_json("/api/v1/debuginfo") == {"debuginfo": []}
        # The delete takes effect at once: no stale cached names.
        assert export(srv, sel)[0][0x463784] == [("main!0x463784", "", 0)]
        st, b, _ = srv.request("DELETE", "/api/v1/debuginfo/" + PARCA_ID)
        assert st == 404 and json.loads(b)["error"], (st, b)
        st, b, _ = srv.request("POST", "/api/v1/debuginfo/" + PARCA_ID, elf)
        assert st == 405, (st, b)


@test
def symbolize_debug_files_prove_their_build_id_and_belong_to_their_uploader():
    """Tenant B puts an unrelated ELF under tenant A's build id: refused, since the file does
    not carry that id (A's flame graph would show B's names). A's own file is stored; B may
    neither replace nor delete it; A may."""
    elf = open(td(PARCA_ID + ".debuginfo"), "rb").read()
    other = elf_with_build_id("00112233445566778899aabbccddeeff00112233")
    a, b = {"X-Scope-OrgID": "team-a"}, {"X-Scope-OrgID": "team-b"}
    with Server(extra=["--multitenancy"]) as srv:
        st, body, _ = srv.request("POST", "/ingest?name=parca-main&format=pprof&from=%d" % T0,
                                  open(td("parca-main.cpu.pb.gz"), "rb").read(), a)
        assert st == 200, body
        for path in ("/api/v1/debuginfo/" + PARCA_ID, "/debuginfo.v1alpha1.DebuginfoService/Upload/" + PARCA_ID):
            st, body, _ = srv.request("PUT" if path.startswith("/api") else "POST", path, other, b)
            err = json.loads(body)["error"]
            assert st == 400 and "not build ID" in err and "00112233445566778899aabbccddeeff00112233" in err, (st, err)
        st, body, _ = srv.request("PUT", "/api/v1/debuginfo/" + PARCA_ID, b"\x7fELF" + bytes(60), a)
        assert st == 400 and json.loads(body)["error"], (st, body)
        st, body, _ = srv.request("PUT", "/api/v1/debuginfo/" + PARCA_ID, elf, a)
        assert st == 200, body
        q = urllib.parse.urlencode({"query": SAMPLES + '{service_name="parca-main"}', "format": "top",
                                    "from": T0 - 10, "until": T0 + 3600})
        st, body, _ = srv.request("GET", "/api/v1/query?" + q, None, a)
        assert st == 200 and "main.iterate" in {f["name"] for f in json.loads(body)["functions"]}, (st, body[:300])
        for method, body_ in (("PUT", elf), ("DELETE", None)):
            st, body, _ = srv.request(method, "/api/v1/debuginfo/" + PARCA_ID, body_, b)
            assert st == 403 and "another tenant" in json.loads(body)["error"], (method, st, body)
        # The listing tells each tenant its own uploads only (which binaries A runs is A's).
        listed = {t: json.loads(srv.request("GET", "/api/v1/debuginfo", None, h)[1])["debuginfo"] for t, h in
                  (("a", a), ("b", b))}
        assert [x["build_id"] for x in listed["a"]] == [PARCA_ID] and listed["b"] == [], listed
        st, body, _ = srv.request("DELETE", "/api/v1/debuginfo/" + PARCA_ID, None, a)
        assert st == 200, body
        # Gone, and the owner record with it: B may now store its own proven file under the id.
        st, body, _ = srv.request("PUT", "/api/v1/debuginfo/" + PARCA_ID, elf, b)
        assert st == 200, body


def start_debuginfod(folder, build_id):
    """debuginfod serving folder on a loopback port, once it has indexed build_id."""
    port = free_port()
    db = os.path.join(tmpdir("debuginfod-db-"), "db.sqlite")
    log = open(os.path.join(ARGS.tmp, "debuginfod-%d.log" % port), "wb")
    proc = subprocess.Popen(["debuginfod", "-p", str(port), "-d", db, "-F", "-t", "1", folder], stdout=log, stderr=log)
    deadline = time.time() + 60
    url = "http://127.0.0.1:%d" % port
    while time.time() < deadline:
        r = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", url + "/buildid/%s/debuginfo" % build_id],
                           capture_output=True, text=True)
        if r.stdout == "200":
            return proc, url
        time.sleep(0.5)
    proc.kill()
    proc.wait()
    raise AssertionError("debuginfod did not index the folder")


@test
def symbolize_from_a_real_debuginfod_with_a_negative_cache():
    """debuginfod indexes GNU build IDs, so it serves the C program (the Go test binaries carry
    only Go build IDs); the Go profile's build ID is one it does not have."""
    binary, build_id, vaddrs, ref = build_c_program()
    folder = tmpdir("debuginfod-src-")
    shutil.copy(binary, os.path.join(folder, "prog"))
    proc, url = start_debuginfod(folder, build_id)
    try:
        with Server(extra=["--debuginfod-urls", url]) as srv:
            st, body = srv.ingest(c_profile(build_id, vaddrs), name="cprog", format="pprof", **{"from": T0})
            assert st == 200, body
            push_file(srv, td("go-example-app.cpu.pprof"), "go-app")
            locs, _ = export(srv, CPU_NS + '{service_name="cprog"}')
            for a in vaddrs:
                assert locs[C_START + a] == ref[a], (hex(a), locs[C_START + a], ref[a])
            assert os.listdir(os.path.join(srv.data_dir, "debuginfod", build_id)) == ["debuginfo"]
            for _ in range(3):
                locs, _ = export(srv, CPU_NS + '{service_name="go-app"}')
                assert locs[0x4d8745] == [("pprof-example-app-go!0x4d8745", "", 0)], locs[0x4d8745]
            log = srv.tail()
            assert log.count("msg=symbolize.debuginfod_missing") == 1, log
            assert log.count("msg=symbolize.debuginfod_fetched") == 1, log
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


ADDRS = (0x1130, 0x1140, 0x1150)  # c_profile's three locations, in a binary no file resolves


def zdebug_bomb(build_id, claim=512 << 20):
    """A real ELF (gcc) carrying build_id, plus .zdebug_info and .zdebug_abbrev sections
    (GNU's compressed layout: "ZLIB", the inflated size as 8 big-endian bytes, a zlib stream)
    of claim zero bytes each: about a megabyte of file that inflates to 2 x claim."""
    import zlib
    d = tmpdir("zbomb-")
    prog = os.path.join(d, "prog")
    open(prog, "wb").write(elf_with_build_id(build_id))
    z, zero, parts = zlib.compressobj(9), bytes(1 << 20), []
    for _ in range(claim >> 20):
        parts.append(z.compress(zero))
    blob = os.path.join(d, "blob")
    open(blob, "wb").write(b"ZLIB" + claim.to_bytes(8, "big") + b"".join(parts) + z.flush())
    out = os.path.join(d, "bomb")
    subprocess.run(["objcopy", "--add-section", ".zdebug_info=" + blob, "--add-section", ".zdebug_abbrev=" + blob,
                    prog, out], check=True, capture_output=True)
    return out


@test
def symbolize_a_debug_section_bomb_is_refused_before_inflating():
    """A 1 MB debug file whose compressed sections claim 512 MiB of zeros each: the query answers
    at once with addresses and the server's memory does not follow the claim."""
    build_id = "b0b0" * 10
    bomb = zdebug_bomb(build_id)
    assert os.path.getsize(bomb) < 4 << 20, os.path.getsize(bomb)
    with Server() as srv:
        st, body, _ = srv.request("PUT", "/api/v1/debuginfo/" + build_id, open(bomb, "rb").read())
        assert st == 200, body
        st, body = srv.ingest(c_profile(build_id, ADDRS), name="bomb", format="pprof", **{"from": T0})
        assert st == 200, body
        names = {f["name"] for f in query(srv, CPU_NS + '{service_name="bomb"}')["functions"]}
        assert names == {"prog!0x%x" % (C_START + a) for a in ADDRS}, names
        hwm = proc_status_kib(srv.proc.pid, "VmHWM") >> 10
        assert hwm < 400, f"peak RSS {hwm} MiB after a query of the bomb"
        assert "decompression bomb" in srv.tail()


class EndlessDebuginfod:
    """A debuginfod URL whose every file is an endless stream of zeros (no Content-Length), for
    at most limit_s seconds a request; sent counts the bytes it wrote, asks the requests."""

    def __init__(self, limit_s=30):
        import http.server
        me = self
        self.sent, self.asks = 0, 0

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                me.asks += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.end_headers()
                chunk, end = bytes(1 << 16), time.time() + limit_s
                try:
                    while time.time() < end:
                        self.wfile.write(chunk)
                        me.sent += len(chunk)
                except OSError:
                    pass  # the client hung up: what is wanted

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def tree_bytes(folder):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(folder) for f in fs
               if os.path.isfile(os.path.join(d, f)))


@test
def symbolize_an_endless_debuginfod_download_is_cut_at_the_limit():
    """A debuginfod streams one build id's file without end: the download stops at
    --max-debuginfo-bytes, the query answers with addresses, the data disk keeps nothing of it,
    and the build id is remembered as missing (not downloaded again by the next query)."""
    build_id = "feed" * 10
    endless = EndlessDebuginfod()
    try:
        with Server(extra=["--debuginfod-urls", endless.url, "--max-debuginfo-bytes", "4MiB"]) as srv:
            st, body = srv.ingest(c_profile(build_id, ADDRS), name="endless", format="pprof", **{"from": T0})
            assert st == 200, body
            for _ in range(2):  # the 60 s query timeout would let an uncut download fill the disk
                top = query(srv, CPU_NS + '{service_name="endless"}')
                names = {f["name"] for f in top["functions"]}
                assert names == {"prog!0x%x" % (C_START + a) for a in ADDRS}, names
            kept = tree_bytes(srv.data_dir)
            assert kept < 8 << 20, f"the data dir holds {kept} bytes after an endless download capped at 4 MiB"
            assert endless.asks == 1, f"the build id was downloaded {endless.asks} times"
            assert "symbolize.debuginfod_too_big" in srv.tail()
    finally:
        endless.stop()


class SilentDebuginfod:
    """A debuginfod URL that accepts connections and never answers; held counts them."""

    def __init__(self):
        import socket
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(16)
        self.lsock.settimeout(0.2)
        self.url = "http://127.0.0.1:%d" % self.lsock.getsockname()[1]
        self.held, self.stop_ = [], threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        import socket
        while not self.stop_.is_set():
            try:
                self.held.append(self.lsock.accept()[0])
            except socket.timeout:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop_.set()
        self.thread.join()
        for c in self.held:
            c.close()
        self.lsock.close()


@test
def symbolize_never_waits_past_the_query_timeout():
    """A debuginfod that accepts and never answers: the query answers by --query-timeout with
    the frames' addresses, and says so in X-Hearth-Symbolization."""
    with SilentDebuginfod() as silent, Server(extra=["--debuginfod-urls", silent.url, "--query-timeout", "2s"]) as srv:
        push_file(srv, td("parca-main.cpu.pb.gz"), "parca-main")
        path = "/api/v1/query?format=top&from=%d&until=%d&query=%s" % (
            T0 - 10, T0 + 3600, urllib_quote(SAMPLES + '{service_name="parca-main"}'))
        # A second query arriving while the first waits on the download waits for that
        # download only until its own deadline.
        second = {}

        def later():
            time.sleep(1)
            t1 = time.time()
            second["st"], _, second["hdr"] = srv.request("GET", path)
            second["took"] = time.time() - t1
        other = threading.Thread(target=later)
        other.start()
        t0 = time.time()
        st, body, hdr = srv.request("GET", path)
        took = time.time() - t0
        other.join()
        assert second["st"] == 200 and second["took"] < 3.5, second
        assert second["hdr"].get("X-Hearth-Symbolization", "").startswith("partial"), second
        assert st == 200 and 1.5 < took < 4.5, (st, took, body[:200])
        assert hdr.get("X-Hearth-Symbolization", "").startswith("partial; late="), hdr
        names = {f["name"] for f in json.loads(body)["functions"]}
        assert "main!0x463784" in names and "irq_exit" in names, names
        assert silent.held, "the server never asked the debuginfod server"
        assert "msg=symbolize.debuginfod_late" in srv.tail()


@test
def symbolize_a_silent_debuginfod_stalls_only_the_queries_that_need_it():
    """Tenant A's profile names a build id that only a silent debuginfod could serve; tenant B's
    names the C program, whose debug file B uploaded. While A's query waits on the server, B's
    answers at once, resolved; A's repeat answers at once with addresses (the timed-out lookup
    is remembered), instead of waiting out another deadline."""
    binary, build_id, vaddrs, ref = build_c_program()
    a, b = {"X-Scope-OrgID": "team-a"}, {"X-Scope-OrgID": "team-b"}
    extra = ["--multitenancy", "--query-timeout", "6s"]
    with SilentDebuginfod() as silent, Server(extra=["--debuginfod-urls", silent.url] + extra) as srv:
        st, body, _ = srv.request("POST", "/ingest?name=parca-main&format=pprof&from=%d" % T0,
                                  open(td("parca-main.cpu.pb.gz"), "rb").read(), a)
        assert st == 200, body
        st, body, _ = srv.request("PUT", "/api/v1/debuginfo/" + build_id, open(binary, "rb").read(), b)
        assert st == 200, body
        st, body, _ = srv.request("POST", "/ingest?name=cprog&format=pprof&from=%d" % T0,
                                  c_profile(build_id, vaddrs), b)
        assert st == 200, body

        def ask(svc, sample_type, hdr):
            q = urllib.parse.urlencode({"query": sample_type + '{service_name="%s"}' % svc, "format": "top",
                                        "from": T0 - 10, "until": T0 + 3600})
            st, body, h = srv.request("GET", "/api/v1/query?" + q, None, hdr)
            assert st == 200, (svc, st, body[:200])
            return {f["name"] for f in json.loads(body)["functions"]}, h
        first = {}
        th = threading.Thread(target=lambda: first.update(r=ask("parca-main", SAMPLES, a)))
        th.start()
        wait_until(lambda: silent.held, 10, 0.05, "A's query to ask the debuginfod server")  # and wait on it
        names, _ = ask("cprog", CPU_NS, b)
        assert {"mix", "churn", "main"} <= names, names
        assert th.is_alive(), "tenant B's query answered only after A's had given up on its download"
        th.join()
        names_a, h = first["r"]
        assert h.get("X-Hearth-Symbolization", "").startswith("partial"), h
        asked = len(silent.held)
        names, h = ask("parca-main", SAMPLES, a)  # the timed-out lookup is remembered: not asked again
        assert "main!0x463784" in names and h.get("X-Hearth-Symbolization", "").startswith("partial"), h
        assert len(silent.held) == asked, "the repeat asked the silent server again"


@test
def symbolize_pyroscope_debuginfo_service_upload_flow():
    """debuginfo.v1alpha1.DebuginfoService as Pyroscope's tooling calls it: ShouldInitiateUpload,
    the raw file to .../Upload/{gnu_build_id}, UploadFinished; in JSON and in binary proto."""
    binary, build_id, vaddrs, ref = build_c_program()
    svc = "/debuginfo.v1alpha1.DebuginfoService/"
    js = {"Content-Type": "application/json"}
    with Server() as srv:
        st, body = srv.ingest(c_profile(build_id, vaddrs), name="cprog", format="pprof", **{"from": T0})
        assert st == 200, body
        ask = json.dumps({"file": {"GNU": build_id, "Name": "prog"}}).encode()
        st, b, _ = srv.request("POST", svc + "ShouldInitiateUpload", ask, js)
        assert st == 200 and json.loads(b)["shouldInitiateUpload"] is True, (st, b)
        st, b, _ = srv.request("POST", svc + "UploadFinished", json.dumps({"gnuBuildId": build_id}).encode(), js)
        assert st == 412 and json.loads(b)["code"] == "failed_precondition", (st, b)
        st, b, _ = srv.request("POST", svc + "Upload/" + build_id, open(binary, "rb").read(),
                               {"Content-Type": "application/octet-stream"})
        assert st == 200, (st, b)
        st, b, _ = srv.request("POST", svc + "UploadFinished", json.dumps({"gnuBuildId": build_id}).encode(), js)
        assert st == 200 and json.loads(b) == {}, (st, b)
        # Binary proto: FileMetadata{GNU=1} inside ShouldInitiateUploadRequest{file=1}; now stored.
        msg = pb_field(1, pb_field(1, build_id.encode()))
        st, b, hdr = srv.request("POST", svc + "ShouldInitiateUpload", msg, {"Content-Type": "application/proto"})
        assert st == 200 and hdr["Content-Type"] == "application/proto", (st, hdr)
        resp = pb_decode(b)
        assert resp.get(1, [0]) == [0] and pb_strs(resp, 2) == ["debuginfo already stored"], resp
        st, b, _ = srv.request("POST", svc + "ShouldInitiateUpload", json.dumps({"file": {"GNU": "zz"}}).encode(), js)
        assert st == 400 and json.loads(b)["code"] == "invalid_argument", (st, b)
        locs, _ = export(srv, CPU_NS + '{service_name="cprog"}')
        assert [f[0] for f in locs[C_START + vaddrs[0]]] == ["mix", "churn"], locs[C_START + vaddrs[0]]


CPP_PROGRAM = r"""
#include <cstdio>
#include <cstdlib>
namespace shop {
struct Basket {
    long total = 0;
    inline __attribute__((always_inline)) void add(long x) { total += (x * 2654435761L) ^ (total >> 7); }
    __attribute__((noinline)) long fill(long n) const;
};
long Basket::fill(long n) const {
    Basket b;
    for (long i = 0; i < n; i++) b.add(i ^ total);
    return b.total;
}
}
int main(int argc, char **argv) { shop::Basket b; printf("%ld\n", b.fill(argc > 1 ? atol(argv[1]) : 100)); }
"""


def simple_cpp_name(name):
    """addr2line -C's name as flame graphs show it: no qualifiers, no parameter list."""
    name = re.sub(r"( const| volatile| &&| &)+$", "", name)
    if name.endswith(")"):
        depth = 0
        for i in range(len(name) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(name[i], 0)
            if depth == 0:
                return name[:i]
    return name


@test
def symbolize_cpp_names_are_qualified_and_demangled():
    d = tmpdir("cpp-")
    src, binary = os.path.join(d, "basket.cc"), os.path.join(d, "basket")
    open(src, "w").write(CPP_PROGRAM)
    subprocess.run(["g++", "-g", "-O2", "-Wl,--build-id", "-o", binary, src], check=True)
    build_id = re.search(r"Build ID: ([0-9a-f]+)",
                         subprocess.run(["readelf", "-n", binary], capture_output=True, text=True).stdout).group(1)
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", binary], capture_output=True, text=True).stdout
    body = dis.split("<_ZNK4shop6Basket4fillEl>:")[1].split("\n\n")[0]
    addrs = [int(m, 16) for m in re.findall(r"^\s+([0-9a-f]+):", body, re.M)]
    out = subprocess.run(["addr2line", "-C", "-f", "-i", "-a", "-e", binary] + ["0x%x" % a for a in addrs],
                         capture_output=True, text=True, check=True).stdout
    ref = addr2line(binary, addrs)  # file:line per frame; names from the -C run below
    names, cur = {}, None
    for line in out.splitlines():
        if re.fullmatch(r"0x[0-9a-f]+", line):
            cur = int(line, 16)
            names[cur] = []
        elif not line.startswith("/") and not line.startswith("??"):
            names[cur].append(simple_cpp_name(line))
    inlined = [a for a in addrs if len(ref[a]) == 2]
    assert inlined, ref
    vaddrs = [inlined[0], addrs[0]]
    st_srv = Server()
    with st_srv as srv:
        st, body = srv.ingest(c_profile(build_id, vaddrs + [addrs[0]]), name="cpp", format="pprof", **{"from": T0})
        assert st == 200, body
        st, b, _ = srv.request("PUT", "/api/v1/debuginfo/" + build_id, open(binary, "rb").read())
        assert st == 200, b
        locs, _ = export(srv, CPU_NS + '{service_name="cpp"}')
        for a in vaddrs:
            want = [(n, f, l) for n, (_, f, l) in zip(names[a], ref[a])]
            assert locs[C_START + a] == want, (hex(a), locs[C_START + a], want)
        assert [f[0] for f in locs[C_START + inlined[0]]] == ["shop::Basket::add", "shop::Basket::fill"]


@test
def symbolize_uploads_stream_to_disk():
    """A debug file upload is written to disk as it arrives, not held in memory: a 300 MiB body
    (chunked, without a Content-Length, in 1 MiB writes) leaves the server's peak RSS far below
    its size, the stored file is byte for byte the body, and an upload cut off midway leaves
    nothing behind."""
    import http.client
    from harness import vm_hwm_mb
    elf = open(td(PARCA_ID + ".debuginfo"), "rb").read()
    size = 300 << 20
    with Server(extra=["--max-debuginfo-bytes", "1GiB"]) as srv:
        before = vm_hwm_mb(srv.proc.pid)
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=120)
        conn.putrequest("PUT", "/api/v1/debuginfo/" + PARCA_ID)
        conn.putheader("Transfer-Encoding", "chunked")
        conn.endheaders()
        chunk = bytes(1 << 20)
        sent = 0
        for i in range(size >> 20):
            part = elf if i == 0 else chunk
            conn.send(b"%x\r\n" % len(part) + part + b"\r\n")
            sent += len(part)
        conn.send(b"0\r\n\r\n")
        resp = conn.getresponse()
        body = resp.read()
        assert resp.status == 200, body
        assert json.loads(body)["size"] == sent and sent >= size, (body, sent)
        grew = vm_hwm_mb(srv.proc.pid) - before
        assert grew < 64, f"peak RSS grew {grew} MiB for a {size >> 20} MiB upload"
        stored = os.path.join(srv.data_dir, "debuginfo", PARCA_ID)
        assert os.path.getsize(stored) == sent
        with open(stored, "rb") as f:
            assert f.read(len(elf)) == elf
        # Cut off midway: the client goes away, the half-written spool file goes too.
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
        conn.putrequest("PUT", "/api/v1/debuginfo/" + "ab" * 20)
        conn.putheader("Content-Length", str(50 << 20))
        conn.endheaders()
        conn.send(elf + bytes(5 << 20))
        conn.close()
        left = lambda: [f for f in os.listdir(os.path.join(srv.data_dir, "debuginfo")) if f.startswith(".upload-")]
        wait_until(lambda: not left(), 10, 0.1, "the cut upload's temporary file to go")
        assert [x["build_id"] for x in srv.get_json("/api/v1/debuginfo")["debuginfo"]] == [PARCA_ID]


@test
def symbolize_filters_match_the_resolved_names():
    """focus, ignore and the Connect call site match the names symbolization gives, not the
    stored addresses: focusing on main.iterate keeps exactly its total, ignoring it drops it."""
    with Server(extra=["--debuginfo-dir", local_dir()]) as srv:
        push_file(srv, td("parca-main.cpu.pb.gz"), "parca-main")
        sel = SAMPLES + '{service_name="parca-main"}'
        top = query(srv, sel, fmt="top", **{"from": T0 - 10, "until": T0 + 3600})
        fns = {f["name"]: f for f in top["functions"]}
        it = fns["main.iterate"]["total"]
        assert 0 < it < top["total"], (it, top["total"])
        focused = query(srv, sel, fmt="top", focus="^main\\.iterate$", **{"from": T0 - 10, "until": T0 + 3600})
        assert focused["total"] == it, (focused["total"], it)
        ignored = query(srv, sel, fmt="top", ignore="^main\\.iterate$", **{"from": T0 - 10, "until": T0 + 3600})
        assert ignored["total"] == top["total"] - it and "main.iterate" not in {f["name"] for f in ignored["functions"]}
        ts = srv.get_json("/api/v1/timeseries", query=sel, focus="^main\\.iterate$", step="60s",
                          **{"from": T0 - 10, "until": T0 + 3600})
        assert sum(p["value"] for p in ts["points"]) == it


def source_view(srv, function, **kw):
    st, body = srv.get("/api/v1/query", query=CPU_NS + '{service_name="cprog"}', format="source", function=function,
                       **{"from": T0 - 10, "until": T0 + 60}, **kw)
    assert st == 200, (st, body[:300])
    return json.loads(body)


@test
def source_view_from_debuginfod_and_source_dir_matches_lines():
    """format=source: the function's source file, every line with its text and its self and
    total (the same numbers as format=lines), fetched from a real debuginfod
    (/buildid/ID/source/PATH of a C program built with -g) or from --source-dir."""
    binary, build_id, vaddrs, ref = build_c_program()
    src = os.path.join(os.path.dirname(binary), "prog.c")
    text = open(src).read().split("\n")
    if text[-1] == "":
        text.pop()
    folder = tmpdir("debuginfod-src-")
    shutil.copy(binary, os.path.join(folder, "prog"))
    proc, url = start_debuginfod(folder, build_id)
    try:
        with Server(extra=["--debuginfod-urls", url]) as srv:
            assert srv.ingest(c_profile(build_id, vaddrs), name="cprog", format="pprof", **{"from": T0})[0] == 200
            lines = {(r["line"]): (r["self"], r["total"]) for r in
                     srv.get_json("/api/v1/query", query=CPU_NS + '{service_name="cprog"}', format="lines",
                                  function="churn", **{"from": T0 - 10, "until": T0 + 60})["lines"] if r["file"] == src}
            assert lines, "churn has lines in prog.c"
            view = source_view(srv, "churn")
            assert view["origin"] == "debuginfod" and view["file"] == src and view["buildId"] == build_id, view
            assert [r["text"] for r in view["lines"]] == text, view["lines"][:3]
            assert {r["line"]: (r["self"], r["total"]) for r in view["lines"] if r["self"] or r["total"]} == lines
            none = source_view(srv, "no_such_function")
            assert none["origin"] is None and none["lines"] == [] and none["error"], none
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    sources = tmpdir("sources-")
    shutil.copy(src, os.path.join(sources, "prog.c"))  # found by file name under --source-dir
    with Server(extra=["--source-dir", sources]) as srv:
        assert srv.ingest(c_profile(build_id, vaddrs), name="cprog", format="pprof", **{"from": T0})[0] == 200
        assert srv.request("PUT", "/api/v1/debuginfo/" + build_id, open(binary, "rb").read())[0] == 200
        view = source_view(srv, "churn")
        assert view["origin"] == "source-dir" and [r["text"] for r in view["lines"]] == text, view.get("error")
    os.rename(src, src + ".moved")  # nowhere to read it from
    with Server() as srv:
        assert srv.ingest(c_profile(build_id, vaddrs), name="cprog", format="pprof", **{"from": T0})[0] == 200
        assert srv.request("PUT", "/api/v1/debuginfo/" + build_id, open(binary, "rb").read())[0] == 200
        view = source_view(srv, "churn")
        assert view["origin"] is None and "not found" in view["error"], view
        assert view["lines"] and all(r["text"] is None for r in view["lines"]), view


def tar_bytes(files, mode="w:gz"):
    """A tar archive (gzip by default) of {name: bytes}, in insertion order."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode=mode) as t:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return out.getvalue()


@test
def source_view_from_an_uploaded_sources_archive():
    """PUT /api/v1/debuginfo/ID/sources keeps a tar of the sources a build was made from; the
    source view reads the file the debug info names from it, the entry agreeing on the most
    path components from the end (`dir/prog.c` over a bare `prog.c`). Archives that are not
    one, unpack past --max-debuginfo-bytes, or belong to another tenant are refused, and
    the stored archive survives every refusal."""
    binary, build_id, vaddrs, _ = build_c_program()
    src = os.path.join(os.path.dirname(binary), "prog.c")
    text = open(src).read().rstrip("\n").split("\n")
    parent = os.path.basename(os.path.dirname(src))
    a, b = {"X-Scope-OrgID": "team-a"}, {"X-Scope-OrgID": "team-b"}
    with Server(extra=["--max-debuginfo-bytes", "1MiB"]) as srv:
        assert srv.ingest(c_profile(build_id, vaddrs), name="cprog", format="pprof", **{"from": T0})[0] == 200
        assert srv.request("PUT", "/api/v1/debuginfo/" + build_id, open(binary, "rb").read())[0] == 200
        archive = tar_bytes({"./prog.c": b"int decoy;\n", "other/x/prog.c": b"int other;\n",
                             "checkout/" + parent + "/prog.c": open(src, "rb").read(), "README": b"hi\n"})
        st, body, _ = srv.request("PUT", "/api/v1/debuginfo/%s/sources" % build_id, archive)
        assert st == 200 and json.loads(body)["sources_size"] == len(archive), (st, body)
        listed = srv.get_json("/api/v1/debuginfo")["debuginfo"]
        assert [(x["build_id"], x.get("sources_size")) for x in listed] == [(build_id, len(archive))], listed
        view = source_view(srv, "churn")
        assert view["origin"] == "upload" and view["file"] == src, view
        assert [r["text"] for r in view["lines"]] == text, view["lines"][:3]
        bomb = tar_bytes({"zeros.c": bytes(4 << 20)})  # 4 MiB unpacked, a few KiB sent
        for bad, why in ((b"not an archive at all", "archive"), (bomb, "unpacks to more than"),
                         (archive[:len(archive) // 2], "archive")):
            st, body, _ = srv.request("PUT", "/api/v1/debuginfo/%s/sources" % build_id, bad)
            assert st == 400 and why in json.loads(body)["error"], (why, st, body)
        for method, url in (("PUT", "/api/v1/debuginfo/%s/source" % build_id),
                            ("PUT", "/api/v1/debuginfo/%s/sources/x" % build_id)):
            st, body, _ = srv.request(method, url, archive)
            assert st == 400 and "sources" in json.loads(body)["error"], (url, st, body)
        assert source_view(srv, "churn")["origin"] == "upload"  # untouched by the refusals
        st, body, _ = srv.request("DELETE", "/api/v1/debuginfo/%s/sources" % build_id)
        assert st == 200, body
        assert source_view(srv, "churn")["origin"] is None
    with Server(extra=["--multitenancy"]) as srv:  # A's archive is A's to replace or delete
        assert srv.request("PUT", "/api/v1/debuginfo/%s/sources" % build_id, archive, a)[0] == 200
        for method in ("PUT", "DELETE"):
            st, body, _ = srv.request(method, "/api/v1/debuginfo/%s/sources" % build_id,
                                      tar_bytes({"prog.c": b"evil\n"}) if method == "PUT" else None, b)
            assert st == 403 and "another tenant" in json.loads(body)["error"], (method, st, body)
