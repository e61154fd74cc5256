"""Microsoft's Azure Blob Storage emulator, Azurite (npm `azurite`, installed once into
tests/integration/azurite), started on a loopback port for the run and stopped by its PID.

It serves the emulator's well-known development account, path-style: the endpoint is
http://127.0.0.1:PORT/devstoreaccount1. Containers are created here with a Shared Key
signature computed in Python (hmac), a signer independent of Hearth's C one; the same
interface as s3server's gateways (url, env, create_bucket)."""
import atexit
import base64
import email.utils
import hashlib
import hmac
import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

from harness import HERE, free_port, npm_installed

ACCOUNT = "devstoreaccount1"
# The key every Azurite has (documented by Microsoft for the emulator; not a secret).
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
VERSION = "2021-08-06"


def azurite_dir():
    return npm_installed(os.path.join(HERE, "azurite"), "node_modules/.bin/azurite-blob", "azurite")


class Azurite:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="hearth-azurite-")
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}/{ACCOUNT}"
        self.proc = None

    def start(self):
        exe = os.path.join(azurite_dir(), "node_modules", ".bin", "azurite-blob")
        self.log = open(os.path.join(self.dir, "azurite.log"), "ab")
        self.proc = subprocess.Popen([exe, "--blobHost", "127.0.0.1", "--blobPort", str(self.port), "--location",
                                      os.path.join(self.dir, "data"), "--skipApiVersionCheck", "--disableProductStyleUrl",
                                      "--disableTelemetry"],
                                     stdout=self.log, stderr=self.log)
        deadline = time.time() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/{ACCOUNT}?comp=list", timeout=2)
            except urllib.error.HTTPError:
                return self  # it answers (403 without a signature)
            except OSError:
                if time.time() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("azurite did not start: see " + self.log.name)
                time.sleep(0.2)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=20)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def url(self, container, prefix=""):
        """The azblob:// URL Hearth takes for container/prefix on this emulator."""
        return f"azblob://{container}/{prefix}?endpoint={self.endpoint}"

    def env(self):
        return {"AZURE_STORAGE_ACCOUNT": ACCOUNT, "AZURE_STORAGE_KEY": KEY}

    def sas(self, permissions="rwdlac"):
        """An account SAS token for the blob service (version 2021-08-06's string to sign),
        valid for a day: what an operator hands out instead of the account key."""
        expiry = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 86400))
        to_sign = "\n".join([ACCOUNT, permissions, "b", "sco", "", expiry, "", "", VERSION, "", ""])
        sig = base64.b64encode(hmac.new(base64.b64decode(KEY), to_sign.encode(), hashlib.sha256).digest()).decode()
        return urllib.parse.urlencode({"sv": VERSION, "ss": "b", "srt": "sco", "sp": permissions, "se": expiry,
                                       "sig": sig})

    def create_bucket(self, container):
        """Creates a container (Create Container, Shared Key signed in Python)."""
        path = f"/{ACCOUNT}/{container}"
        date = email.utils.formatdate(usegmt=True)
        # verb, then the eleven standard headers: only Content-Type (the fifth) is sent
        to_sign = "\n".join(["PUT", "", "", "", "", "application/octet-stream"] + [""] * 6) + "\n" + \
            f"x-ms-date:{date}\nx-ms-version:{VERSION}\n" + f"/{ACCOUNT}{path}\nrestype:container"
        sig = base64.b64encode(hmac.new(base64.b64decode(KEY), to_sign.encode(), hashlib.sha256).digest()).decode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}?restype=container", method="PUT", data=b"",
                                     headers={"x-ms-date": date, "x-ms-version": VERSION,
                                              "Content-Type": "application/octet-stream",
                                              "Authorization": f"SharedKey {ACCOUNT}:{sig}"})
        urllib.request.urlopen(req, timeout=30).read()
        return container


_SHARED = None


def shared():
    """One Azurite for the whole run, started on first use and stopped at exit."""
    global _SHARED
    if _SHARED is None:
        az = Azurite()
        atexit.register(az.stop)
        _SHARED = az.start()
    return _SHARED
