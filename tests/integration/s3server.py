"""A real S3 server for the tests: Ceph's RADOS Gateway over one in-memory OSD.

RadosGateway().start() builds a throwaway Ceph cluster in a temporary folder: one monitor on a
loopback port, one OSD on the memstore backend (objects live in the OSD's memory, so nothing is
written but logs), and radosgw serving S3 on another loopback port, with one user whose keys
the tests use. No cephx (auth none, loopback only). Each daemon runs in the foreground as our
child, so stop() ends exactly the processes it started, by PID. Start-up takes about 10 s, so
an area starts one gateway and shares it (shared()), each test in its own bucket.

Debian's ceph 16 (pacific) needs two things spelled out: the OSD's mkfs takes the UUID the
monitor allocated (`ceph osd new`), or the monitor ignores its boot; and the messenger modes
set to crc, or a daemon with auth none offers the monitor no mode and is refused (EACCES).
"""
import atexit
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid

from harness import free_port

ACCESS_KEY = "HEARTHTESTKEY"
SECRET_KEY = "hearth-test-secret-0123456789"
EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

CONF = """[global]
fsid = {fsid}
mon host = v2:127.0.0.1:{mon_port}
mon initial members = a
public addr = 127.0.0.1
auth cluster required = none
auth service required = none
auth client required = none
ms bind msgr1 = false
ms client mode = crc
ms cluster mode = crc
ms service mode = crc
ms mon client mode = crc
ms mon cluster mode = crc
ms mon service mode = crc
run dir = {dir}/run
admin socket = {dir}/run/$name.asok
log file = {dir}/$name.log
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
mon allow pool size one = true
mon warn on pool no redundancy = false
mon data avail warn = 1
mon data avail crit = 0
osd crush chooseleaf type = 0
[mon]
mon data = {dir}/mon
[osd]
osd data = {dir}/osd
osd objectstore = memstore
memstore device bytes = 1073741824
[client.rgw]
rgw frontends = beast endpoint=127.0.0.1:{rgw_port}
"""


class RadosGateway:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="hearth-rgw-")
        self.mon_port, self.rgw_port = free_port(), free_port()
        self.conf = os.path.join(self.dir, "ceph.conf")
        self.procs = {}  # name -> Popen, in start order
        self.endpoint = f"http://127.0.0.1:{self.rgw_port}"
        self.startup_s = None

    def _run(self, *args, timeout=30):
        r = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)
        if r.returncode:
            raise RuntimeError(f"{' '.join(args)}: exit {r.returncode}: {r.stderr[-2000:]}")
        return r.stdout

    def _daemon(self, name, *args):
        log = open(os.path.join(self.dir, f"{name}.out"), "a")  # a restarted gateway appends
        self.procs[name] = subprocess.Popen(list(args) + ["-f", "-c", self.conf], stdout=log, stderr=log)

    def _ceph(self, *args):
        return self._run("ceph", "-c", self.conf, "--connect-timeout", "20", *args)

    def _wait(self, what, ready, timeout=60):
        end = time.time() + timeout
        while time.time() < end:
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise RuntimeError(f"{name} exited {p.returncode} while waiting for {what}; logs in {self.dir}")
            if ready():
                return
            time.sleep(0.2)
        raise RuntimeError(f"{what} not ready after {timeout}s; logs in {self.dir}")

    def _http_up(self):
        try:
            urllib.request.urlopen(self.endpoint + "/", timeout=1).read()
            return True
        except OSError:
            return False

    def start(self):
        """Builds and starts the cluster; on any failure stops what it started and raises."""
        try:
            return self._start()
        except BaseException:
            self.stop(keep_logs=True)
            raise

    def _start(self):
        t = time.time()
        fsid = str(uuid.uuid4())
        for d in ("mon", "osd", "run"):
            os.makedirs(os.path.join(self.dir, d))
        with open(self.conf, "w") as f:
            f.write(CONF.format(fsid=fsid, mon_port=self.mon_port, rgw_port=self.rgw_port, dir=self.dir))
        monmap, keyring = os.path.join(self.dir, "monmap"), os.path.join(self.dir, "mon.keyring")
        self._run("monmaptool", "--create", "--add", "a", f"v2:127.0.0.1:{self.mon_port}", "--fsid", fsid, monmap)
        self._run("ceph-authtool", "--create-keyring", keyring, "--gen-key", "-n", "mon.")
        self._run("ceph-mon", "-c", self.conf, "-i", "a", "--mkfs", "--monmap", monmap, "--keyring", keyring)
        self._daemon("mon", "ceph-mon", "-i", "a")
        osd_uuid = str(uuid.uuid4())
        self._ceph("osd", "new", osd_uuid)
        self._run("ceph-osd", "-c", self.conf, "-i", "0", "--mkfs", "--osd-uuid", osd_uuid)
        self._daemon("osd", "ceph-osd", "-i", "0")
        self._wait("the OSD", lambda: " 1 up" in self._ceph("osd", "stat"))
        self._daemon("rgw", "radosgw", "-n", "client.rgw")
        self._wait("radosgw", self._http_up)
        self._run("radosgw-admin", "-c", self.conf, "user", "create", "--uid=hearth", "--display-name=hearth",
                  f"--access-key={ACCESS_KEY}", f"--secret-key={SECRET_KEY}")
        self.startup_s = time.time() - t
        return self

    def stop_gateway(self):
        """Stops radosgw alone (the S3 endpoint goes away; the cluster stays)."""
        self._stop("rgw")

    def start_gateway(self):
        """Starts radosgw again on the same port (the port is in ceph.conf). The OSD kept every
        object in its memory meanwhile, so nothing stored before stop_gateway() is lost."""
        self._daemon("rgw", "radosgw", "-n", "client.rgw")
        self._wait("radosgw", self._http_up)

    def _stop(self, name):
        p = self.procs.pop(name, None)
        if p is None or p.poll() is not None:
            return
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()

    def stop(self, keep_logs=False):
        """Stops every daemon this object started (gateway, OSD, monitor), by PID; removes the folder."""
        for name in reversed(list(self.procs)):
            self._stop(name)
        if not keep_logs:
            shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def port(self):
        return self.rgw_port

    def url(self, bucket, prefix=""):
        """The s3:// URL Hearth takes for bucket/prefix on this gateway."""
        return f"s3://{bucket}/{prefix}?endpoint={self.endpoint}&region=us-east-1"

    def env(self):
        """The environment variables carrying the test user's keys."""
        return {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}

    def create_bucket(self, bucket):
        """Creates a bucket with curl's own SigV4 (a second, independent S3 client)."""
        self._run("curl", "-sS", "--fail", "-X", "PUT", "--aws-sigv4", "aws:amz:us-east-1:s3",
                  "-u", f"{ACCESS_KEY}:{SECRET_KEY}", "-H", f"x-amz-content-sha256: {EMPTY_SHA256}",
                  f"{self.endpoint}/{bucket}")
        return bucket


_SHARED = None
_FAILED = None


def shared():
    """One gateway for the whole run, started on first use and stopped at exit. A gateway
    that failed to start is not tried again: every later test fails at once with its error."""
    global _SHARED, _FAILED
    if _FAILED:
        raise RuntimeError(f"the S3 server did not start: {_FAILED}")
    if _SHARED is None:
        gw = RadosGateway()
        atexit.register(gw.stop)
        try:
            _SHARED = gw.start()
        except Exception as e:
            atexit.unregister(gw.stop)  # start() stopped it and kept its logs for the error
            _FAILED = e
            raise
    return _SHARED


# ---------------------------------------------------------------- OpenStack Swift's S3 API

SWIFT_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "scripts",
                            "swift-s3.sh")
SWIFT_ACCESS, SWIFT_SECRET = "test:tester", "testing"


class SwiftS3:
    """A single-node OpenStack Swift from Debian (swift-proxy with the s3api middleware, and its
    account, container and object servers), started by ../shared/scripts/swift-s3.sh on loopback
    ports, with a memcached of its own; every daemon is stopped by its PID. Swift's S3 API answers
    a conditional put (If-None-Match) 501 NotImplemented: the store a cluster must work on
    without conditional writes. The same interface as RadosGateway."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="hearth-swift-")
        self.port, self.mc_port = free_port(), free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.memcached = None

    def start(self):
        self.memcached = subprocess.Popen(["memcached", "-l", "127.0.0.1", "-p", str(self.mc_port), "-U", "0",
                                           "-u", "root"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        env = dict(os.environ, D=os.path.join(self.dir, "swift"), PORT=str(self.port),
                   MEMCACHE_PORT=str(self.mc_port))
        r = subprocess.run(["sh", os.path.realpath(SWIFT_SCRIPT)], env=env, capture_output=True, text=True, timeout=120)
        # The script gives its daemons 10 s, which a loaded machine (a sanitizer run on two
        # cores) can exceed; they go on starting, so they get a minute more here.
        if r.returncode and "did not start" in r.stderr and self._up(60):
            return self
        if r.returncode:
            self.stop(keep_logs=True)
            raise RuntimeError(f"swift-s3.sh failed: {r.stdout[-1000:]} {r.stderr[-2000:]}")
        return self

    def _up(self, timeout):
        """Whether the proxy and its three servers answer within timeout seconds (the ports
        swift-s3.sh gives them: the proxy's + 120, 121, 122)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                urllib.request.urlopen(f"{self.endpoint}/healthcheck", timeout=2).read()
                for p in (self.port + 120, self.port + 121, self.port + 122):
                    try:
                        urllib.request.urlopen(f"http://127.0.0.1:{p}/", timeout=2).read()
                    except urllib.error.HTTPError:
                        pass  # it answers
                return True
            except OSError:
                time.sleep(0.5)
        return False

    def stop(self, keep_logs=False):
        run = os.path.join(self.dir, "swift", "run")
        for f in sorted(os.listdir(run)) if os.path.isdir(run) else []:
            try:
                os.kill(int(open(os.path.join(run, f)).read()), signal.SIGTERM)
            except (OSError, ValueError):
                pass
        if self.memcached and self.memcached.poll() is None:
            self.memcached.terminate()
            self.memcached.wait(timeout=10)
        if not keep_logs:
            shutil.rmtree(self.dir, ignore_errors=True)

    def url(self, bucket, prefix=""):
        return f"s3://{bucket}/{prefix}?endpoint={self.endpoint}&region=us-east-1"

    def env(self):
        return {"AWS_ACCESS_KEY_ID": SWIFT_ACCESS, "AWS_SECRET_ACCESS_KEY": SWIFT_SECRET}

    def create_bucket(self, bucket):
        """Creates the bucket as a container through Swift's own API (a tempauth token), a
        client independent of Hearth's S3 one (curl's SigV4 cannot take an access key with a
        colon in it)."""
        req = urllib.request.Request(f"{self.endpoint}/auth/v1.0",
                                     headers={"X-Auth-User": SWIFT_ACCESS, "X-Auth-Key": SWIFT_SECRET})
        with urllib.request.urlopen(req, timeout=30) as r:
            token, storage = r.headers["X-Auth-Token"], r.headers["X-Storage-Url"]
        put = urllib.request.Request(f"{storage}/{bucket}", method="PUT", headers={"X-Auth-Token": token})
        urllib.request.urlopen(put, timeout=30).read()
        return bucket


_SWIFT = None


def shared_swift():
    """One Swift for the whole run, started on first use and stopped at exit."""
    global _SWIFT
    if _SWIFT is None:
        sw = SwiftS3()
        atexit.register(sw.stop)
        _SWIFT = sw.start()
    return _SWIFT
