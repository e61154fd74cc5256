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
import sys
import tempfile

import harness


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
    args = ap.parse_args()
    chosen = [a for a in args.area.split(",") if a]
    unknown = [a for a in chosen if a not in areas]
    if unknown or not chosen:
        what = f"unknown area {', '.join(unknown)}" if unknown else "--area names no area"
        ap.error(f"{what}: choose from {', '.join(areas)}")
    harness.configure(binary=os.path.abspath(args.binary), testdata=args.testdata, quick=args.quick,
                      tmp=tempfile.mkdtemp(prefix="hearth-it-"))
    if args.valgrind:
        from test_operations import valgrind_full_cycle, valgrind_symbolize_and_connect_cycle
        tests = [valgrind_full_cycle, valgrind_symbolize_and_connect_cycle]
    else:
        tests = harness.load_areas(chosen)
    tests = [fn for fn in tests if args.k in fn.__name__ and not any(x in fn.__name__ for x in args.skip)]
    sys.exit(harness.run_tests(tests))


if __name__ == "__main__":
    main()
