"""Go's own tools as the reference the suite checks Hearth against.

`go tool pprof` reads the same files Hearth ingests (and the pprof Hearth serves): its -raw,
-top and -traces outputs, parsed here into totals, per-function flat/cum values and stacks,
are the expected answers. goprof (tests/integration/goprof) is a Go program that writes real
runtime profiles or serves them over net/http/pprof, as a scrape target.
"""
import gzip
import hashlib
import os
import re
import subprocess

from harness import ARGS, HERE, ROOT
from protowire import pb_decode, pb_fields, pb_packed


# `go tool pprof`'s answers for a file, kept across the suite's runs in one checkout (the release,
# ASan and TSan runs ask the same questions of the same files; the answers depend only on the
# file's bytes, the flags and the Go toolchain), under tests/out/, which is never committed.
GO_PPROF_CACHE = os.path.join(ROOT, "tests", "out", "go-pprof-cache")
_GO_VERSION = []


def go_pprof(flags, path):
    """The standard output of `go tool pprof FLAGS PATH` (a file, not a URL), from the cache
    when the same toolchain answered the same flags for the same bytes before."""
    if not _GO_VERSION:
        _GO_VERSION.append(subprocess.run(["go", "version"], capture_output=True, text=True, check=True).stdout)
    h = hashlib.sha256(_GO_VERSION[0].encode() + b"\0" + "\0".join(flags).encode() + b"\0")
    with open(path, "rb") as f:
        h.update(f.read())
    kept = os.path.join(GO_PPROF_CACHE, h.hexdigest())
    try:
        with open(kept) as f:
            return f.read()
    except OSError:
        pass
    out = subprocess.run(["go", "tool", "pprof", *flags, path], capture_output=True, text=True, check=True).stdout
    os.makedirs(GO_PPROF_CACHE, exist_ok=True)
    tmp = f"{kept}.{os.getpid()}.tmp"  # run.py -j's processes share the folder: whole files only
    with open(tmp, "w") as f:
        f.write(out)
    os.replace(tmp, kept)
    return out


def is_gauge(sample_type):
    return sample_type.startswith("inuse_") or sample_type in ("goroutine", "goroutines")


def pprof_raw(path, *extra, gauges_as_stored=False):
    """Sample types and per-type totals, as `go tool pprof -raw [extra]` reports them (which
    leaves out samples without locations: see unlocated_totals). gauges_as_stored: leave out
    the negative samples of gauge types, as Hearth does (a delta's inuse_* differences)."""
    out = go_pprof(["-raw", *extra], path)
    lines = out.splitlines()
    i = lines.index("Samples:")
    types = []
    for t in lines[i + 1].split():
        name, _, unit = t.replace("[dflt]", "").partition("/")
        types.append((name or "unknown", unit or "unknown"))
    totals = [0] * len(types)
    sample = re.compile(r"^\s*((?:-?\d+\s+)*-?\d+):")
    for line in lines[i + 2:]:
        if not line.startswith(" "):
            break
        m = sample.match(line)
        if m:
            for k, v in enumerate(m.group(1).split()):
                if not (gauges_as_stored and int(v) < 0 and is_gauge(types[k][0])):
                    totals[k] += int(v)
    return types, totals


def unlocated_totals(path, ntypes):
    """Per type, the sum of the samples that have no locations: `go tool pprof -raw` does not
    list them, but pprof counts them in a profile's total (-top's "of N total")."""
    raw = open(path, "rb").read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    sums = [0] * ntypes
    for num, _, sample in pb_fields(raw):
        if num != 2:
            continue
        fields = pb_decode(sample)
        if fields.get(1):
            continue
        values = [v for chunk in fields.get(2, []) for v in (pb_packed(chunk) if isinstance(chunk, bytes) else [chunk])]
        for k, v in enumerate(values[:ntypes]):
            sums[k] += v
    return sums


def pprof_top(path, sample_index, unit, *extra):
    """{function: (flat, cum)} from `go tool pprof -top [extra]`, with raw integer values."""
    args = ["-top", "-nodecount=100000", "-nodefraction=0", "-edgefraction=0", f"-sample_index={sample_index}", *extra]
    if unit in ("nanoseconds", "bytes"):
        args.append("-unit=" + ("ns" if unit == "nanoseconds" else "B"))
    out = go_pprof(args, path)
    res = {}
    row = re.compile(r"^\s*(-?\d+)(?:ns|B)?\s+\S+%\s+\S+%\s+(-?\d+)(?:ns|B)?\s+\S+%\s+(.+)$")
    for line in out.splitlines():
        m = row.match(line)
        if m:
            res[re.sub(r" \((partial-)?inline\)$", "", m.group(3).strip())] = (int(m.group(1)), int(m.group(2)))
    return res


def pprof_traces(path, sample_index):
    """[(root-first frame names, value)] of every sample, from `go tool pprof -traces`."""
    out = go_pprof(["-traces", f"-sample_index={sample_index}", "-unit=ns"], path)
    traces = []
    for block in out.split("-----------+-------------------------------------------------------")[1:]:
        frames, value = [], None
        for line in block.splitlines():
            if not line.strip() or ":" in line.split()[0]:
                continue  # blank, or a label line ("endpoint:  /api/search")
            if value is None:
                v, _, name = line.strip().partition(" ")
                value, line = int(v.rstrip("ns")), name
            frames.append(line.strip().removesuffix(" (inline)"))
        if value is not None:
            traces.append((frames[::-1], value))
    return traces


def build_goprof():
    """The goprof binary, built once per run under ARGS.tmp (offline: GOPROXY=off)."""
    out = os.path.join(ARGS.tmp, "goprof-bin")
    if not os.path.exists(out):
        env = dict(os.environ, GOPROXY="off", GOFLAGS="", GOCACHE=os.path.join(ARGS.tmp, "gocache"))
        src = os.path.join(HERE, "goprof", "main.go")
        subprocess.run(["go", "build", "-o", out, src], check=True, env=env, capture_output=True)
    return out


def pprof_peek(path, function, sample_index=1, *extra):
    """`go tool pprof -peek '^function$'`: (flat, cum, {caller: value}, {callee: value}), values in ns."""
    out = go_pprof(["-peek", "^" + re.escape(function) + "$", "-unit=ns", f"-sample_index={sample_index}", *extra], path)
    callers, callees, flat, cum, seen = {}, {}, None, None, False
    for line in out.splitlines():
        left, bar, name = line.partition("|")
        if not bar or not name.strip() or "calls%" in left:
            continue
        name = re.sub(r" \((partial-)?inline\)$", "", name.strip())
        nums = [int(t[:-2] if t.endswith("ns") else t) for t in left.split() if not t.endswith("%")]
        if name == function and len(nums) == 2 and not seen:  # flat and cum (a 0 is printed without its unit)
            flat, cum, seen = nums[0], nums[1], True
        elif nums:
            (callees if seen else callers)[name] = nums[0]
    return flat, cum, callers, callees
