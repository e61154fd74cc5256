#!/usr/bin/env python3
"""Benchmark of query-time symbolization: one address-only profile of N distinct
addresses (default 20,000) spread over the text of the shared Go test binary (DWARF,
../shared/testdata/symbolize), queried as pprof four times:

  off     --symbolize=false: the merge and the export alone, the baseline
  first   symbolization from the debug file (DWARF CU table, lines, inlines), written to the cache
  again   the same query: every address from the cache in memory
  restart the same query after a restart: the cache file read back, no DWARF

Usage: python3 tests/bench/symbolize.py --binary ./hearth --testdata ../shared/testdata [--locations N]
Prints measured wall times only (median of --runs for the cached cases).
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import ARGS, T0, Server, configure  # noqa: E402
from protowire import pb_field, pb_put_varint  # noqa: E402

BUILD_ID = "2d6912fd3dd64542f6f6294f4bf9cb6c265b3085"
TEXT_START, TEXT_END = 0x401000, 0x463800  # .text of that binary (readelf -S)
SEL = 'process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name="bench"}'


def enc(num, v):
    return pb_put_varint(num << 3) + pb_put_varint(v)


def profile(n):
    """n locations at distinct addresses, each the leaf of one sample under a shared root."""
    step = max(1, (TEXT_END - TEXT_START) // n)
    strings = ["", "cpu", "nanoseconds", "/main", BUILD_ID]
    out = pb_field(1, enc(1, 1) + enc(2, 2))
    out += pb_field(3, enc(1, 1) + enc(2, 0x400000) + enc(3, 0x464000) + enc(4, 0) + enc(5, 3) + enc(6, 4))
    for i in range(n):
        out += pb_field(4, enc(1, i + 1) + enc(2, 1) + enc(3, TEXT_START + i * step))
    for i in range(1, n):
        out += pb_field(2, pb_field(1, pb_put_varint(i + 1) + pb_put_varint(1)) + pb_field(2, pb_put_varint(10)))
    out += b"".join(pb_field(6, s.encode()) for s in strings)
    out += enc(9, T0 * 10**9) + enc(10, 10**10) + pb_field(11, enc(1, 1) + enc(2, 2)) + enc(12, 10)
    return out


def timed_query(srv):
    path = "/api/v1/query?format=pprof&from=%d&until=%d&query=%s" % (T0 - 10, T0 + 3600, urllib.parse.quote(SEL))
    t0 = time.perf_counter()
    st, body, _ = srv.request("GET", path)
    took = time.perf_counter() - t0
    assert st == 200, (st, body[:200])
    return took, len(body)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--testdata", required=True)
    ap.add_argument("--locations", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="hearth-bench-sym-")
    configure(binary=os.path.abspath(a.binary), testdata=os.path.abspath(a.testdata), tmp=tmp, quick=False)
    dbg = os.path.join(tmp, "debuginfo")
    os.makedirs(dbg)
    shutil.copy(os.path.join(ARGS.testdata, "symbolize", BUILD_ID + ".debuginfo"), dbg)
    body = profile(a.locations)
    data = os.path.join(tmp, "data")
    with Server(data_dir=data, extra=["--symbolize=false"]) as srv:
        st, resp = srv.ingest(body, name="bench", format="pprof", **{"from": T0})
        assert st == 200, resp
        off = statistics.median(timed_query(srv)[0] for _ in range(a.runs))
    with Server(data_dir=data, extra=["--debuginfo-dir", dbg]) as srv:
        first, size = timed_query(srv)
        again = statistics.median(timed_query(srv)[0] for _ in range(a.runs))
    cache = os.path.getsize(os.path.join(data, "symcache", BUILD_ID))
    with Server(data_dir=data, extra=["--debuginfo-dir", dbg]) as srv:
        restart, _ = timed_query(srv)
    print(f"locations {a.locations}; pprof export {size} bytes; cache file {cache} bytes")
    print(f"off (no symbolization, median of {a.runs}): {off * 1000:.1f} ms")
    print(f"first (DWARF):                        {first * 1000:.1f} ms")
    print(f"again (cache in memory, median of {a.runs}): {again * 1000:.1f} ms")
    print(f"after restart (cache file):           {restart * 1000:.1f} ms")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
