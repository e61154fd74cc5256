#!/usr/bin/env python3
"""Integration tests: the real ./hearth binary, real profiles, go tool pprof as the reference.

Each test starts its own server on a free port with a fresh data dir, pushes profiles over
HTTP exactly as agents do, and checks answers against `go tool pprof` run on the same files.
Ends with the line "integration: N passed, M failed"; exits non-zero if anything failed.

The tests live in test_AREA.py, one file an area (ingest, durability, queries, connect, ...);
`--area ingest,queries` runs those areas alone. harness.py holds the server control, the
shared helpers and the runner; pprof_ref.py the go tool pprof reference; protowire.py the
hand-written protobuf encoding; heatmap_ref.py Pyroscope's heatmap layout.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import threading

import harness


def run_parallel(args, chosen):
    """The chosen tests in args.j processes at once, test k in process k % j (so each area's
    tests spread over all of them), each process on its own range of ports. Their lines are
    printed as they come, prefixed [i]; the summary adds theirs up."""
    base = [sys.executable, os.path.abspath(__file__), "--binary", args.binary, "--testdata", args.testdata,
            "--area", ",".join(chosen), "-k", args.k] + sum([["--skip", x] for x in args.skip], [])
    if args.quick:
        base.append("--quick")
    lock, totals, procs = threading.Lock(), [0, 0], []

    def pump(i, p):
        for line in p.stdout:
            m = line.startswith("integration: ")
            if m:
                n = line.split()
                with lock:
                    totals[0] += int(n[1])
                    totals[1] += int(n[3])
                continue
            with lock:
                print(f"[{i}] {line}", end="", flush=True)

    for i in range(args.j):
        env = dict(os.environ, HEARTH_TEST_PORT_BASE=str(10000 + 4000 * i))
        p = subprocess.Popen(base + ["--shard", f"{i}/{args.j}"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, env=env)
        t = threading.Thread(target=pump, args=(i, p))
        t.start()
        procs.append((p, t))
    rc = 0
    for p, t in procs:
        t.join()
        rc |= p.wait() != 0
    print(f"integration: {totals[0]} passed, {totals[1]} failed")
    return 1 if rc or totals[1] else 0


def main():
    areas = harness.areas()
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="./hearth")
    ap.add_argument("--testdata", default="../shared/testdata")
    ap.add_argument("--quick", action="store_true", help="(kept for the ASan run; every test still runs)")
    ap.add_argument("-k", default="", help="run only tests whose name contains this")
    ap.add_argument("--skip", action="append", default=[], help="skip tests whose name contains this (repeatable)")
    ap.add_argument("--valgrind", action="store_true", help="run only the valgrind cycles")
    ap.add_argument("--area", default=",".join(areas), metavar="NAME[,NAME]",
                    help="run only these areas (default: all): " + ", ".join(areas))
    ap.add_argument("-j", type=int, default=1, help="run the tests in this many processes at once")
    ap.add_argument("--shard", default="0/1", help=argparse.SUPPRESS)  # I/N: -j's worker I of N
    args = ap.parse_args()
    chosen = [a for a in args.area.split(",") if a]
    unknown = [a for a in chosen if a not in areas]
    if unknown or not chosen:
        what = f"unknown area {', '.join(unknown)}" if unknown else "--area names no area"
        ap.error(f"{what}: choose from {', '.join(areas)}")
    if args.j > 1 and not args.valgrind:
        sys.exit(run_parallel(args, chosen))
    harness.configure(binary=os.path.abspath(args.binary), testdata=args.testdata, quick=args.quick,
                      tmp=tempfile.mkdtemp(prefix="hearth-it-"))
    if args.valgrind:
        from test_operations import valgrind_full_cycle, valgrind_symbolize_and_connect_cycle
        tests = [valgrind_full_cycle, valgrind_symbolize_and_connect_cycle]
    else:
        tests = harness.load_areas(chosen)
    tests = [fn for fn in tests if args.k in fn.__name__ and not any(x in fn.__name__ for x in args.skip)]
    shard, shards = (int(x) for x in args.shard.split("/"))
    tests = tests[shard::shards]
    sys.exit(harness.run_tests(tests))


if __name__ == "__main__":
    main()
