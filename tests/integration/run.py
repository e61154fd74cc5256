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


NEXT = "@@next"  # a worker's line asking for its next test


def run_parallel(args, tests):
    """The tests in args.j worker processes at once, each on its own range of ports. A
    worker asks for its next test when it finishes one, so the slow ones do not pile up in
    one worker; they are handed out in run order. Workers' lines are printed as they
    come, prefixed [i]; the summary adds theirs up."""
    base = [sys.executable, os.path.abspath(__file__), "--binary", args.binary, "--testdata", args.testdata,
            "--area", args.area]
    if args.quick:
        base.append("--quick")
    lock, totals, procs = threading.Lock(), [0, 0], []
    queue = [fn.__name__ for fn in tests]  # workers find each test by its name
    twice = sorted({n for n in queue if queue.count(n) > 1})
    assert not twice, f"tests share a name, so a worker cannot tell them apart: {twice}"

    def pump(i, p, feed):
        for line in p.stdout:
            text = line.rstrip("\n")
            if text.endswith(NEXT):  # after any unfinished line a test left on stdout
                if text != NEXT:
                    with lock:
                        print(f"[{i}] {text[:-len(NEXT)]}", flush=True)
                with lock:
                    name = queue.pop(0) if queue else None
                if name is None:
                    feed.close()
                else:
                    feed.write(name + "\n")
                    feed.flush()
                continue
            if line.startswith("integration: "):
                n = line.split()
                with lock:
                    totals[0] += int(n[1])
                    totals[1] += int(n[3])
                continue
            with lock:
                print(f"[{i}] {line}", end="", flush=True)

    for i in range(args.j):
        env = dict(os.environ, HEARTH_TEST_PORT_BASE=str(10000 + 4000 * i))
        r, w = os.pipe()  # the worker's queue: test names, one a line
        p = subprocess.Popen(base + ["--worker-fd", str(r)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, env=env, pass_fds=(r,))
        os.close(r)
        t = threading.Thread(target=pump, args=(i, p, os.fdopen(w, "w")))
        t.start()
        procs.append((p, t))
    rc = 0
    for p, t in procs:
        t.join()
        rc |= p.wait() != 0
    print(f"integration: {totals[0]} passed, {totals[1]} failed")
    return 1 if rc or totals[1] else 0


def handed_out(fd, tests):
    """A worker's tests: each one named on fd, asked for (NEXT) when the last is done,
    until fd closes."""
    by_name = {fn.__name__: fn for fn in tests}
    with os.fdopen(fd, "r") as feed:  # not inherited by the servers tests start (Python's default)
        while True:
            print(NEXT, flush=True)
            name = feed.readline().strip()
            if not name:
                return
            yield by_name[name]


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
    ap.add_argument("--worker-fd", type=int, help=argparse.SUPPRESS)  # -j's worker: test names on this fd
    args = ap.parse_args()
    chosen = [a for a in args.area.split(",") if a]
    unknown = [a for a in chosen if a not in areas]
    if unknown or not chosen:
        what = f"unknown area {', '.join(unknown)}" if unknown else "--area names no area"
        ap.error(f"{what}: choose from {', '.join(areas)}")
    if args.valgrind:
        from test_operations import valgrind_full_cycle, valgrind_symbolize_and_connect_cycle
        tests = [valgrind_full_cycle, valgrind_symbolize_and_connect_cycle]
    else:
        tests = harness.load_areas(chosen)
    tests = [fn for fn in tests if args.k in fn.__name__ and not any(x in fn.__name__ for x in args.skip)]
    if args.j > 1 and not args.valgrind:
        sys.exit(run_parallel(args, tests))
    harness.configure(binary=os.path.abspath(args.binary), testdata=args.testdata, quick=args.quick,
                      tmp=tempfile.mkdtemp(prefix="hearth-it-"))
    sys.exit(harness.run_tests(handed_out(args.worker_fd, tests) if args.worker_fd is not None else tests))


if __name__ == "__main__":
    main()
