#!/bin/sh
# Installs the Debian packages Hearth needs to build and test, only those missing.
# Usage: deploy/install-deps.sh [build|test]
set -eu
BUILD="make gcc g++ pkg-config libmicrohttpd-dev libsqlite3-dev libzstd-dev libprotobuf-c-dev protobuf-c-compiler libjansson-dev zlib1g-dev libcurl4-openssl-dev libssl-dev libre2-dev libdw-dev libelf-dev libdebuginfod-dev libpq-dev libsnappy-dev libarchive-dev libnghttp2-dev"
TEST="golang-go python3 systemd binutils debuginfod curl openssl clang clang-format libclang-rt-14-dev valgrind chromium fonts-liberation prometheus ceph-mon ceph-osd ceph-common radosgw postgresql python3-grpcio python3-h2 openjdk-17-jdk-headless swift-proxy swift-account swift-container swift-object memcached"
# clang (TEST, for make fuzz) also provides clang++, which links the libFuzzer harnesses.
# Node.js 20 (for the real Pyroscope agent and the browser tests) is the machine's own: Debian 12
# ships 18. chromium is driven headless by tests/browser (playwright-core from npm).
# ceph-mon, ceph-osd and radosgw (with ceph-common's `ceph` tool) are the real S3 server the objstore tests
# start: Ceph's RADOS Gateway over one in-memory OSD (tests/integration/s3server.py).
want="$BUILD"
[ "${1:-build}" = "test" ] && want="$BUILD $TEST"
missing=""
for p in $want; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "hearth: missing Debian packages:$missing" >&2
  echo "hearth: run as root, or: sudo apt-get install$missing" >&2
  exit 1
fi
echo "hearth: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $missing >/dev/null
