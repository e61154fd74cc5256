"""A real PostgreSQL for the tests: Debian's postgresql-15, one throwaway cluster per run.

PostgresServer().start() runs initdb in a temporary folder and postgres in the foreground as our
child, on a free loopback port, with fsync off (nothing here has to survive the machine) and trust
authentication over TCP from 127.0.0.1 for the superuser `hearth`. It creates the database
`hearth`; url() is what Hearth takes as --catalog. stop() ends exactly the process it started, by
PID; restart() starts it again over the same data dir on the same port, for the tests where the
catalog goes away and comes back.

PostgreSQL refuses to run as root, and the tests run as root in CI: then the cluster belongs to an
unprivileged system user (`hearthpg`, created if missing) and initdb and postgres run as it. The
folder sits directly under the system temp dir, not under the run's tmp (which is root's, 0700,
and that user could not enter it). Start-up takes about 1-2 s; an area shares one (shared()) and
each test takes its own database (create_database()).
"""
import atexit
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time

from harness import free_port

BIN = "/usr/lib/postgresql/15/bin"
USER = "hearth"  # the database role (superuser, trust over loopback TCP)
OS_USER = "hearthpg"  # the system user the cluster runs as when we are root


def _os_user():
    """(uid, gid) to run PostgreSQL as: ourselves, or hearthpg when we are root."""
    if os.geteuid() != 0:
        return None
    try:
        pw = pwd.getpwnam(OS_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", OS_USER],
                       check=True, capture_output=True)
        pw = pwd.getpwnam(OS_USER)
    return pw.pw_uid, pw.pw_gid


class PostgresServer:
    def __init__(self, port=None):
        self.dir = tempfile.mkdtemp(prefix="hearth-pg-")
        self.data = os.path.join(self.dir, "data")
        self.sock = os.path.join(self.dir, "sock")
        self.port = port or free_port()
        self.ids = _os_user()
        self.proc = None
        self.log = None

    def _as_owner(self):
        """preexec_fn: drop to the cluster's system user (only when we are root)."""
        if self.ids:
            uid, gid = self.ids
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)

    def _run(self, *args, timeout=60, as_owner=False):
        r = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout,
                           preexec_fn=self._as_owner if as_owner else None)
        if r.returncode:
            raise RuntimeError(f"{' '.join(args)}: exit {r.returncode}: {(r.stderr or r.stdout)[-2000:]}")
        return r.stdout

    def start(self):
        """initdb, start, wait until ready, create database hearth. On failure stops what it
        started (keeping the logs) and raises."""
        try:
            os.makedirs(self.sock)
            if self.ids:
                for d in (self.dir, self.sock):
                    os.chown(d, *self.ids)
            self._run(f"{BIN}/initdb", "-D", self.data, "-U", USER, "--auth=trust", "-E", "UTF8",
                      "--locale=C", "--no-sync", as_owner=True)
            with open(os.path.join(self.data, "pg_hba.conf"), "w") as f:
                f.write("local all all trust\nhost all all 127.0.0.1/32 trust\n")
            self._spawn()
            self.psql("CREATE DATABASE hearth", db="postgres")
            return self
        except BaseException:
            self.stop(keep=True)
            raise

    def _spawn(self):
        self.log = open(os.path.join(self.dir, "postgres.log"), "ab")
        self.proc = subprocess.Popen(
            [f"{BIN}/postgres", "-D", self.data, "-p", str(self.port), "-k", self.sock,
             "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
             "-c", "full_page_writes=off", "-c", "max_connections=200"],
            stdout=self.log, stderr=self.log, preexec_fn=self._as_owner)
        end = time.time() + 30
        while time.time() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited {self.proc.returncode}: {self.tail()}")
            r = subprocess.run([f"{BIN}/pg_isready", "-q", "-h", "127.0.0.1", "-p", str(self.port), "-U", USER],
                               capture_output=True)
            if r.returncode == 0:
                return
            time.sleep(0.1)
        raise RuntimeError(f"postgres not ready after 30 s: {self.tail()}")

    def tail(self):
        try:
            with open(os.path.join(self.dir, "postgres.log"), "rb") as f:
                return f.read()[-3000:].decode(errors="replace")
        except OSError:
            return "(no log)"

    def url(self, db="hearth"):
        """The connection URL Hearth takes as --catalog."""
        return f"postgres://{USER}@127.0.0.1:{self.port}/{db}"

    def psql(self, sql, db="hearth"):
        """Runs sql with psql -At over TCP; returns the rows, each a list of column strings."""
        out = self._run(f"{BIN}/psql", "-X", "-At", "-v", "ON_ERROR_STOP=1", "-F", "\t", "-h", "127.0.0.1",
                        "-p", str(self.port), "-U", USER, "-d", db, "-c", sql)
        return [line.split("\t") for line in out.splitlines()]

    def create_database(self, name):
        """A fresh, empty database; returns its URL."""
        self.psql(f'CREATE DATABASE "{name}"', db="postgres")
        return self.url(name)

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, keep=True):
        """Stops postgres (SIGINT: fast shutdown) by PID and waits. keep=False also removes
        the folder."""
        if self.running():
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.log:
            self.log.close()
            self.log = None
        if not keep:
            shutil.rmtree(self.dir, ignore_errors=True)

    def restart(self):
        """Starts postgres again over the same data dir on the same port."""
        self.stop(keep=True)
        self._spawn()
        return self

    def remove(self):
        self.stop(keep=False)


_SHARED = None
_FAILED = None


def shared():
    """One PostgreSQL for the whole run, started on first use and removed at exit. One that
    failed to start is not tried again: every later test fails at once with its error."""
    global _SHARED, _FAILED
    if _FAILED:
        raise RuntimeError(f"PostgreSQL did not start: {_FAILED}")
    if _SHARED is None:
        pg = PostgresServer()
        try:
            _SHARED = pg.start()
        except Exception as e:
            _FAILED = e
            raise
        atexit.register(pg.remove)
    return _SHARED
