"""An HTTP proxy in front of the S3 server that damages answers on demand.

The cluster's reads must never turn a damaged transfer into a smaller answer. FaultProxy sits
between a node and the gateway (the node's --object-store endpoint names the proxy) and passes
every request through unchanged, Host header included, so the node's SigV4 signatures still
verify at the gateway. What it does to GET answers is set per test, and may change while the
node runs:

  proxy.faults = {"flip": p, "short": p, "stall": p}

each GET answer with a 2xx status then has, with that probability: one byte of its body
inverted ("flip"), only half its body sent under the full Content-Length before the connection
closes ("short"), or a pause of stall_s before its body ("stall"). A multipart upload's part
(a PUT with partNumber=) may instead be answered 500 without reaching the gateway ("part_fail"),
or stored and then answered only after stall_s ("part_stall"). Other requests pass untouched.
A seeded random.Random draws the faults, and the seed is printed, so a failing run can be
replayed (HEARTH_TEST_SEED=N). `damaged` counts the answers it damaged.
"""
import http.client
import http.server
import os
import random
import threading
import time

HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "upgrade"}


class FaultProxy:
    def __init__(self, upstream_port, seed=None):
        self.upstream_port = upstream_port
        self.faults = {}
        self.stall_s = 3.0
        env = os.environ.get("HEARTH_TEST_SEED")
        self.seed = seed if seed is not None else int(env) if env else random.randrange(1 << 30)
        self.rng = random.Random(self.seed)
        self.lock = threading.Lock()
        self.damaged = 0
        print(f"    faultproxy: seed {self.seed}", flush=True)
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _forward(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else None
                part = self.command == "PUT" and "partNumber=" in self.path
                part_fault = proxy.draw(("part_fail", "part_stall")) if part else None
                if part_fault == "part_fail":
                    self.send_response_only(500, "Internal Server Error")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
                up = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=60)
                try:
                    up.request(self.command, self.path, body=body, headers=headers)
                    resp = up.getresponse()
                    data = resp.read()
                finally:
                    up.close()
                if part_fault == "part_stall":
                    time.sleep(proxy.stall_s)
                fault = proxy.draw() if self.command == "GET" and 200 <= resp.status < 300 and data else None
                self.send_response_only(resp.status, resp.reason)
                for k, v in resp.getheaders():
                    if k.lower() not in HOP and k.lower() != "content-length":
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if fault == "flip":
                    i = proxy.rng.randrange(len(data))
                    data = data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1:]
                elif fault == "short":
                    self.wfile.write(data[:len(data) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                elif fault == "stall":
                    time.sleep(proxy.stall_s)
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def draw(self, kinds=("flip", "short", "stall")):
        """The fault for the next answer among kinds (a GET's by default), or None."""
        with self.lock:
            x = self.rng.random()
            for name, p in self.faults.items():
                if name not in kinds:
                    continue
                if x < p:
                    self.damaged += 1
                    return name
                x -= p
        return None

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
