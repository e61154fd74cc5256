#!/usr/bin/env bash
# A throwaway three-node Hearth cluster on one Debian 12 machine, for trying cluster mode out:
# a PostgreSQL (postgresql-15) and an S3 server (Ceph's radosgw over an in-memory OSD), both
# started by the integration tests' own helpers (tests/integration/pgserver.py, s3server.py),
# then three nodes on 127.0.0.1:4101-4103. Everything runs in the foreground; Ctrl-C stops it
# all and removes the temporary folders. Nothing is installed and nothing survives.
#
#   deploy/cluster/up.sh [HEARTH_BINARY]        (default: ./hearth at the repo's root)
#
# Needs: postgresql-15 and ceph (radosgw, ceph-mon, ceph-osd) from Debian, python3, curl.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=$(realpath "${1:-$root/hearth}")
[ -x "$bin" ] || { echo "up.sh: no hearth binary at $bin (run make, or pass its path)" >&2; exit 2; }
for tool in /usr/lib/postgresql/15/bin/postgres radosgw ceph-mon ceph-osd curl python3; do
    command -v "$tool" >/dev/null || { echo "up.sh: $tool is missing (apt-get install postgresql-15 ceph radosgw curl)" >&2; exit 2; }
done
exec env HEARTH_BIN="$bin" PYTHONPATH="$root/tests/integration" python3 - <<'PY'
import os, signal, subprocess, sys, tempfile, time, urllib.request

import pgserver, s3server

testdata = os.path.normpath(os.path.join(os.environ["PYTHONPATH"], "..", "..", "..", "shared", "testdata"))

run = tempfile.mkdtemp(prefix="hearth-cluster-")
procs = []


def stop_all(code=1):
    for p in reversed(procs):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
    gw.stop()
    pg.remove()
    print(f"stopped; node logs kept in {run}")
    sys.exit(code)


print("starting PostgreSQL ...", flush=True)
pg = pgserver.PostgresServer().start()
print("starting the S3 server (radosgw, about 15 s) ...", flush=True)
try:
    gw = s3server.RadosGateway().start()
except BaseException:
    pg.remove()
    raise
signal.signal(signal.SIGINT, lambda *_: stop_all(0))
signal.signal(signal.SIGTERM, lambda *_: stop_all(0))
gw.create_bucket("hearth-blocks")
store = gw.url("hearth-blocks", "demo")
env = dict(os.environ, **gw.env())
for i in (1, 2, 3):
    data = os.path.join(run, f"node-{i}")
    os.makedirs(data)
    log = open(os.path.join(data, "server.log"), "ab")
    procs.append(subprocess.Popen(
        [os.environ["HEARTH_BIN"], "--listen", f"127.0.0.1:410{i}", "--data-dir", data,
         "--cache-dir", os.path.join(data, "cache"), "--catalog", pg.url(), "--object-store", store,
         "--node-name", f"node-{i}", "--target", "all"], stdout=log, stderr=log, env=env))
for i, p in enumerate(procs, 1):
    end = time.time() + 60
    while True:
        if p.poll() is not None:
            log = os.path.join(run, f"node-{i}", "server.log")
            print(f"node-{i} exited {p.returncode}:\n{open(log).read()[-2000:]}", file=sys.stderr, flush=True)
            stop_all()
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:410{i}/ready", timeout=1).status == 200:
                break
        except OSError:
            pass
        if time.time() > end:
            print(f"node-{i} not ready after 60 s", file=sys.stderr)
            stop_all()
        time.sleep(0.1)

print(f"""
Hearth cluster up: nodes on http://127.0.0.1:4101, :4102, :4103
  catalog      {pg.url()}   (psql -h 127.0.0.1 -p {pg.port} -U hearth hearth)
  object store {store}
  keys         AWS_ACCESS_KEY_ID={s3server.ACCESS_KEY} AWS_SECRET_ACCESS_KEY={s3server.SECRET_KEY}
  node logs    {run}/node-N/server.log

Push to one node (a real profile, dated now):
  curl --data-binary @{testdata}/pprof/go-runtime-cpu-00.pb.gz \\
       "http://127.0.0.1:4101/ingest?name=demo&format=pprof&from=$(date +%s)"
Query through another (-G with --data-urlencode: curl would read the braces as a glob):
  curl -G http://127.0.0.1:4103/api/v1/query -d format=top -d from=now-1h -d until=now \\
       --data-urlencode 'query=process_cpu:cpu:nanoseconds:cpu:nanoseconds{{service_name="demo"}}'
See the blocks:
  psql -h 127.0.0.1 -p {pg.port} -U hearth hearth -c 'SELECT id, key, profiles FROM hearth_blocks'

Ctrl-C stops everything.""", flush=True)
while True:
    for i, p in enumerate(procs, 1):
        if p.poll() is not None:
            print(f"node-{i} exited {p.returncode}; stopping", file=sys.stderr)
            stop_all()
    time.sleep(1)
PY
