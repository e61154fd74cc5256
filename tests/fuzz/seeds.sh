#!/bin/sh
# Builds seed corpora for the fuzzers from ../shared/testdata and from a real
# server's WAL and blocks. Usage: tests/fuzz/seeds.sh BINARY TESTDATA OUTDIR
set -eu
bin=$1 td=$2 out=$3
rm -rf "$out"
mkdir -p "$out/pprof" "$out/folded" "$out/selector" "$out/push" "$out/querier" "$out/jfr" "$out/multipart" "$out/block" "$out/wal" "$out/otlp" "$out/elf"
for f in "$td"/pprof/*.pb.gz "$td"/corpus/*.pb "$td"/corpus/*.pb.gz; do cp "$f" "$out/pprof/"; done
cp "$td"/folded/* "$out/folded/"
head -c 20000 "$td"/corpus/flamegraph__test__results__perf-java-stacks-01-collapsed-pid.txt > "$out/folded/java.txt"
i=0
for s in 'process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name="api",env!="dev"}' \
         '{env=~"pr.*", region!~"eu|us"}' 'api.cpu{env=prod}' '{__name__="memory"}' "{a='b\\'c'}"; do
  i=$((i+1)); printf '%s' "$s" > "$out/selector/$i"
done
printf '{"series":[{"labels":[{"name":"__name__","value":"process_cpu"}],"samples":[{"rawProfile":"H4sIAAAAAAAA/wMAAAAAAAAAAAA="}]}]}' > "$out/push/1.json"
printf '{"series":[{"labels":{"labels":[{"name":"__name__","value":"x"}]},"samples":[]}]}' > "$out/push/2.json"
printf '{"profileTypeID":"process_cpu:cpu:nanoseconds:cpu:nanoseconds","labelSelector":"{env=\\"prod\\"}","start":"1","end":2,"maxNodes":"9","format":"PROFILE_FORMAT_TREE","groupBy":["env"],"step":15.5}' > "$out/querier/1.json"
printf '{"flamegraph":{"names":["total"],"levels":[{"values":["0","4",1,0]}],"total":"4"},"tree":"aGVsbG8="}' > "$out/querier/2.json"
printf '{"series":[{"labels":[{"name":"a","value":"b"}],"points":[{"value":"NaN","timestamp":"5"},{"value":1e300}]}]}' > "$out/querier/3.json"
# Binary bodies as Grafana sends them (SelectMergeStacktraces, SelectSeries).
unhex() { python3 -c 'import sys; sys.stdout.buffer.write(bytes.fromhex(sys.argv[1]))' "$1"; }
unhex '0a2b70726f636573735f6370753a6370753a6e616e6f7365636f6e64733a6370753a6e616e6f7365636f6e6473120c7b656e763d2270726f64227d18012080f0cc86a63728063001' > "$out/querier/4.bin"
unhex '0a036370751a02656e76310000000000004e40' > "$out/querier/5.bin"
# Debug files (symbolize/): the first 256 KiB of each (headers, tables) and a raw .gopclntab.
for f in "$td"/symbolize/*.debuginfo; do head -c 262144 "$f" > "$out/elf/$(basename "$f")"; done
dd if="$td/symbolize/go-example-app-stripped.debuginfo" of="$out/elf/gopclntab" bs=1 skip=12448 count=200000 2>/dev/null
# The real async-profiler recording, whole and as its first chunk's first 64 KiB.
for f in "$td"/corpus/*.jfr.gz; do
  gzip -dc "$f" > "$out/jfr/$(basename "$f" .gz)"
  head -c 65536 "$out/jfr/$(basename "$f" .gz)" > "$out/jfr/head-$(basename "$f" .gz)"
done
# Multipart bodies as pyroscope-go and the Java agent send them (first line: the boundary).
printf 'XyZ\n--XyZ\r\nContent-Disposition: form-data; name="profile"; filename="profile.pprof"\r\nContent-Type: application/octet-stream\r\n\r\nabc\r\n--XyZ\r\nContent-Disposition: form-data; name="sample_type_config"\r\n\r\n{"alloc_space":{"cumulative":true}}\r\n--XyZ--\r\n' > "$out/multipart/1"
printf 'b0\n--b0\r\nContent-Disposition: form-data; name="jfr"\r\n\r\nFLR\0\r\n--b0\r\nContent-Disposition: form-data; name="labels"\r\n\r\n\r\n--b0--\r\n' > "$out/multipart/2"
# OTLP requests as the integration tests build them from real profiles (protobuf and JSON).
PYTHONPATH=tests/integration python3 - "$td" "$out/otlp" <<'PY'
import sys, harness
harness.configure(testdata=sys.argv[1])
from test_otlp import Otlp, pprof_parse, read_testdata
for name in ("go-runtime-cpu-00", "go-runtime-heap"):
    o = Otlp()
    o.add_pprof(pprof_parse(read_testdata("pprof/%s.pb.gz" % name)), [("service.name", name)], build_id="abc123")
    open("%s/%s.pb" % (sys.argv[2], name), "wb").write(o.to_protobuf())
    open("%s/%s.json" % (sys.argv[2], name), "wb").write(o.to_json())
PY
# A real server: a WAL segment (kill -9 keeps it) and a block (flushed).
dd="$out/.data"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$bin" --listen 127.0.0.1:$port --data-dir "$dd" --log-level error & pid=$!
for _ in $(seq 50); do curl -fs "http://127.0.0.1:$port/ready" >/dev/null 2>&1 && break; sleep 0.1; done
curl -fs --data-binary @"$td"/pprof/go-runtime-cpu-00.pb.gz "http://127.0.0.1:$port/ingest?name=a&format=pprof" >/dev/null
printf 'main;a 1\nmain;b 2\n' | curl -fs --data-binary @- "http://127.0.0.1:$port/ingest?name=b.cpu" >/dev/null
# A pprof whose samples carry span ids (span samples, SPANS block section).
python3 - <<'PY' | curl -fs --data-binary @- "http://127.0.0.1:$port/ingest?name=c&format=pprof" >/dev/null
import sys
def v(n):
    out = b""
    while n > 0x7f: out += bytes([n & 0x7f | 0x80]); n >>= 7
    return out + bytes([n])
def f(num, b): return v(num << 3 | 2) + v(len(b)) + b
def e(num, n): return v(num << 3) + v(n)
strs = ["", "cpu", "nanoseconds", "main", "work", "span_id", "00000c0ffee00000", "00000c0ffee01111"]
p = f(1, e(1, 1) + e(2, 2)) + f(4, e(1, 1) + f(4, e(1, 1))) + f(4, e(1, 2) + f(4, e(1, 2)))
p += f(5, e(1, 1) + e(2, 3)) + f(5, e(1, 2) + e(2, 4))
for loc, val, span in ((1, 10, 6), (2, 20, 7), (2, 5, 6), (1, 7, 0)):
    lab = f(3, e(1, 5) + e(2, span)) if span else b""
    p += f(2, f(1, v(loc)) + f(2, v(val)) + lab)
sys.stdout.buffer.write(p + b"".join(f(6, x.encode()) for x in strs))
PY
cp "$dd"/wal/*.wal "$out/wal/"
curl -fs -XPOST "http://127.0.0.1:$port/api/v1/admin/flush" >/dev/null
cp "$dd"/blocks/anonymous/*.blk "$out/block/"
kill -9 $pid
rm -rf "$dd"
