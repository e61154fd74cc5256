"""The gRPC front end (--grpc-listen), called by a real gRPC client: Debian's python3-grpcio
over an insecure channel (HTTP/2 with prior knowledge), as the OpenTelemetry Collector and
Alloy call it. Messages are sent as raw bytes (no generated stubs), built from the same
field numbers as the HTTP tests' requests, and every answer is compared with the same
request sent over HTTP."""
import json
import os
import sys

from harness import ARGS, Server, free_port, read_testdata, test
from protowire import pb_decode, pb_encode_field, pb_field, pb_strs, push_request_proto
from test_otlp import PB, Otlp, answers, pprof_parse, span_of

try:
    import grpc
except ImportError:  # Debian's python3-grpcio (make test-deps), under another python3 of the same version
    sys.path.append("/usr/lib/python3/dist-packages")
    try:
        import grpc
    except ImportError:
        grpc = None

EXPORT = "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"
PUSH = "/push.v1.PusherService/Push"
CPU_FILE = "pprof/go-runtime-cpu-00.pb.gz"


def grpc_server(extra=()):
    port = free_port()
    return Server(extra=["--grpc-listen", "127.0.0.1:%d" % port, *extra]), port


def call(port, method, body, metadata=(), compression=None):
    """One unary call with raw bytes; (status code name, details, response bytes)."""
    with grpc.insecure_channel("127.0.0.1:%d" % port) as ch:
        fn = ch.unary_unary(method)
        try:
            resp = fn(body, metadata=list(metadata), timeout=30, compression=compression)
            return "OK", "", resp
        except grpc.RpcError as e:
            return e.code().name, e.details(), None


def otlp_body(service):
    p = pprof_parse(read_testdata(CPU_FILE))
    o = Otlp()
    o.add_pprof(p, [("service.name", service), ("host.name", "box-1")])
    return p, o.to_protobuf()


@test
def grpc_otlp_export_and_push_land_like_their_http_twins():
    """OTLP Export and Pyroscope's Push over gRPC (plain and gzip-compressed messages) store
    what the same bodies over HTTP store: every answer (top table, folded stacks, flame
    graph) is equal, and the replies are the HTTP replies' protobuf messages."""
    assert grpc, "python3-grpcio is missing (make test-deps)"
    p, otlp = otlp_body("via-grpc")
    _, otlp_http = otlp_body("via-http")
    cpu = read_testdata(CPU_FILE)
    srv, port = grpc_server()
    with srv:
        for comp in (None, grpc.Compression.Gzip):
            code, detail, resp = call(port, EXPORT, otlp, compression=comp)
            assert code == "OK" and resp == b"", (code, detail, resp)
        st, body, _ = srv.request("POST", "/v1development/profiles", otlp_http, dict(PB))
        assert st == 200, body
        span = span_of(p)
        via_grpc, via_http = answers(srv, "via-grpc", span), answers(srv, "via-http", span)
        assert via_http and all(v[0] for v in via_http.values()), via_http.keys()
        # the gRPC service got the same request twice: every total is twice the HTTP one
        assert {k: v[0] for k, v in via_grpc.items()} == {k: 2 * v[0] for k, v in via_http.items()}
        push = push_request_proto([({"__name__": "process_cpu", "service_name": "push-grpc"}, [cpu])])
        for comp in (None, grpc.Compression.Gzip):
            code, detail, resp = call(port, PUSH, push, compression=comp)
            assert code == "OK" and resp == b"", (code, detail, resp)
        twin = push_request_proto([({"__name__": "process_cpu", "service_name": "push-http"}, [cpu])])
        st, body, _ = srv.request("POST", PUSH, twin, {"Content-Type": "application/proto"})
        assert st == 200, body
        span = {"from": 0, "until": "now"}
        twice = {k: (2 * v[0],) + v[1:] for k, v in answers(srv, "push-http", span).items()}
        got = answers(srv, "push-grpc", span)
        assert {k: v[0] for k, v in got.items()} == {k: v[0] for k, v in twice.items()} != {}, (got.keys(), twice.keys())


@test
def grpc_errors_carry_the_http_refusals_as_status_codes():
    """Each refusal the HTTP routes make arrives as its gRPC status with the same text: an
    unknown method UNIMPLEMENTED, a body that does not parse INVALID_ARGUMENT, no credential
    UNAUTHENTICATED, a read-only token PERMISSION_DENIED, a message past --max-body-bytes
    RESOURCE_EXHAUSTED (before it is buffered); nothing refused is stored, and the
    connection serves the next call."""
    assert grpc, "python3-grpcio is missing (make test-deps)"
    auth = os.path.join(ARGS.tmp, "grpc-auth.json")
    with open(auth, "w") as f:
        f.write("bearer w-token team-a write\nbearer r-token team-a read\n")
    _, otlp = otlp_body("svc")
    srv, port = grpc_server(["--auth-file", auth, "--max-body-bytes", "64KiB", "--max-decompressed-bytes", "1MiB"])
    with srv:
        w = [("authorization", "Bearer w-token")]
        cases = [(EXPORT.replace("Export", "Nope"), otlp, w, "UNIMPLEMENTED", "no such method"),
                 (EXPORT, b"\xff\xff\xff", w, "INVALID_ARGUMENT", "protobuf"),
                 (EXPORT, otlp, [], "UNAUTHENTICATED", ""),
                 (EXPORT, otlp, [("authorization", "Bearer r-token")], "PERMISSION_DENIED", ""),
                 (EXPORT, os.urandom(100 << 10), w, "RESOURCE_EXHAUSTED", "--max-body-bytes"),
                 (PUSH, bytes(2 << 20), w, "RESOURCE_EXHAUSTED", "--max-decompressed-bytes")]  # a gzip bomb
        for method, body, md, want, text in cases:
            comp = grpc.Compression.Gzip if len(body) == 2 << 20 else None
            code, detail, _ = call(port, method, body, md, compression=comp)
            assert code == want and text in detail, (method, want, code, detail)
        code, detail, resp = call(port, EXPORT, otlp, w)
        assert code == "OK", (code, detail)
        st, body, _ = srv.request("GET", "/api/v1/series?query=%7B%7D", None, {"Authorization": "Bearer r-token"})
        names = {s["labels"].get("service_name") for s in json.loads(body)["series"]}
        assert st == 200 and names == {"svc"}, (st, body[:300])


@test
def grpc_idle_and_silent_connections_are_closed():
    """A connection that sends nothing for --idle-timeout after the HTTP/2 preface is sent a
    GOAWAY and closed; a new connection is then served."""
    import socket
    srv, port = grpc_server(["--idle-timeout", "1s"])
    with srv:
        preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # empty SETTINGS
        socks = []
        for _ in range(3):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(preface)
            socks.append(s)
        for s in socks:  # each recv is bounded by the socket's 10 s timeout
            got = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                got += chunk
            # the server's SETTINGS, its ACK of ours, then a GOAWAY (type 7) before the close
            assert b"\x07\x00\x00\x00\x00\x00" in got, got
            s.close()
        # the server still serves a new connection
        code, detail, _ = call(port, PUSH, push_request_proto([({"__name__": "process_cpu", "service_name": "x"},
                                                                 [read_testdata(CPU_FILE)])]))
        assert code == "OK", (code, detail)


@test
def grpc_over_tls_with_the_http_certificate():
    """With --tls-cert/--tls-key the gRPC port speaks TLS with ALPN h2, the certificate the
    HTTPS port uses: a secure channel trusting it is served; an insecure one is not."""
    import ssl
    import subprocess
    import time
    import urllib.request
    assert grpc, "python3-grpcio is missing (make test-deps)"
    cert, key = os.path.join(ARGS.tmp, "grpc-cert.pem"), os.path.join(ARGS.tmp, "grpc-key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    http_port, port = free_port(), free_port()
    data = os.path.join(ARGS.tmp, "grpc-tls-data")
    log = open(os.path.join(ARGS.tmp, "grpc-tls.log"), "ab")
    proc = subprocess.Popen([ARGS.binary, "--listen", "127.0.0.1:%d" % http_port, "--data-dir", data,
                             "--tls-cert", cert, "--tls-key", key, "--grpc-listen", "127.0.0.1:%d" % port],
                            stdout=log, stderr=log)
    ctx = ssl.create_default_context(cafile=cert)
    try:
        deadline = time.time() + 30
        while True:
            try:
                urllib.request.urlopen("https://127.0.0.1:%d/ready" % http_port, context=ctx, timeout=5).read()
                break
            except OSError:
                assert time.time() < deadline and proc.poll() is None, "TLS server did not start"
                time.sleep(0.1)
        push = push_request_proto([({"__name__": "process_cpu", "service_name": "tls"}, [read_testdata(CPU_FILE)])])
        creds = grpc.ssl_channel_credentials(root_certificates=open(cert, "rb").read())
        with grpc.secure_channel("127.0.0.1:%d" % port, creds) as ch:
            assert ch.unary_unary(PUSH)(push, timeout=30) == b""
        code, _, _ = call(port, PUSH, push)  # h2c on a TLS port
        assert code == "UNAVAILABLE", code
        q = "https://127.0.0.1:%d/api/v1/series?query=%%7B%%7D" % http_port
        names = {s["labels"].get("service_name") for s in json.loads(urllib.request.urlopen(q, context=ctx).read())["series"]}
        assert names == {"tls"}, names
    finally:
        proc.terminate()
        assert proc.wait(timeout=60) == 0
        log.close()


@test
def grpc_many_concurrent_calls_on_one_connection():
    """48 calls in flight at once on one channel (one HTTP/2 connection, many streams; under
    the default --max-concurrent-ingests of 64), each a distinct upload: every one is answered
    OK, and the stored total is exactly 48 uploads'."""
    assert grpc, "python3-grpcio is missing (make test-deps)"
    cpu = read_testdata(CPU_FILE)
    srv, port = grpc_server()
    with srv:
        with grpc.insecure_channel("127.0.0.1:%d" % port) as ch:
            fn = ch.unary_unary(PUSH)
            futures = [fn.future(push_request_proto([({"__name__": "process_cpu", "service_name": "many",
                                                        "call": str(i)}, [cpu])]), timeout=60) for i in range(48)]
            assert all(f.result() == b"" for f in futures)
        st, body, _ = srv.request("POST", PUSH, push_request_proto([({"__name__": "process_cpu",
                                                                       "service_name": "one"}, [cpu])]),
                                  {"Content-Type": "application/proto"})
        assert st == 200, body
        span = {"from": 0, "until": "now"}
        many, one = answers(srv, "many", span), answers(srv, "one", span)
        assert {k: v[0] for k, v in many.items()} == {k: 48 * v[0] for k, v in one.items()} != {}, (many.keys(), one.keys())
        series = srv.get_json("/api/v1/series", query='{service_name="many"}')["series"]
        assert len({s["labels"]["call"] for s in series}) == 48


PARCA_WRITERAW = "/parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw"
PARCA_DEBUGINFO = "/parca.debuginfo.v1alpha1.DebuginfoService/"


def parca_writeraw(labels, raw, normalized=False, tenant=""):
    """parca.profilestore.v1alpha1.WriteRawRequest with one series of one sample; the sample
    carries one ExecutableInfo (ET_DYN, a load segment at offset 0) as the agent sends it."""
    lset = b"".join(pb_field(1, pb_field(1, k.encode()) + pb_field(2, v.encode())) for k, v in labels.items())
    exe = pb_encode_field(1, 0, 3) + pb_field(2, pb_encode_field(1, 0, 0) + pb_encode_field(2, 0, 0))
    series = pb_field(1, lset) + pb_field(2, pb_field(1, raw) + pb_field(2, exe))
    return ((pb_field(1, tenant.encode()) if tenant else b"") + pb_field(2, series) +
            (pb_encode_field(3, 0, 1) if normalized else b""))


def parca_upload(port, build_id, data, kind=0, metadata=(), compression=None, first=None):
    """The client-streamed Upload: UploadInfo{build_id, upload_id, type}, then 64 KiB chunks.
    (status code name, details, response bytes)."""
    info = first if first is not None else pb_field(1, pb_field(1, build_id.encode()) + pb_field(2, b"u-1") +
                                                      (pb_encode_field(3, 0, kind) if kind else b""))
    msgs = [info] + [pb_field(2, data[i:i + 65536]) for i in range(0, len(data), 65536)]
    with grpc.insecure_channel("127.0.0.1:%d" % port) as ch:
        try:
            return "OK", "", ch.stream_unary(PARCA_DEBUGINFO + "Upload")(iter(msgs), metadata=list(metadata),
                                                                         timeout=60, compression=compression)
        except grpc.RpcError as e:
            return e.code().name, e.details(), None


@test
def grpc_parca_agent_writes_profiles_and_uploads_debug_files():
    """Parca's agent flow over gRPC: WriteRaw with `normalized` addresses (file vaddrs in a
    mapping placed low, so adjusting them would misplace them), and the debug file through
    ShouldInitiateUpload, InitiateUpload (strategy gRPC), the streamed Upload and
    MarkUploadFinished; the sources archive the same way (gzip messages). The frames equal
    addr2line's, and equal those of the same stacks sent unnormalized over the JSON gateway.
    Refused: an Upload not led by its UploadInfo, a source map, the deprecated tenant field,
    a file past --max-debuginfo-bytes (the owner rules are the HTTP upload's own code)."""
    import base64
    import io
    import tarfile
    from test_symbolize import CPU_NS, build_c_program, c_profile, export
    assert grpc, "python3-grpcio is missing (make test-deps)"
    binary, build_id, vaddrs, ref = build_c_program()
    elf = open(binary, "rb").read()
    srv, port = grpc_server(["--max-debuginfo-bytes", str(len(elf) + 4096)])
    with srv:
        normalized = c_profile(build_id, vaddrs, start=0x1000, base=0)
        code, detail, resp = call(port, PARCA_WRITERAW, parca_writeraw(
            {"__name__": "process_cpu", "service_name": "cprog-grpc"}, normalized, normalized=True))
        assert code == "OK" and resp == b"", (code, detail)
        doc = {"series": [{"labels": {"labels": [{"name": "__name__", "value": "process_cpu"},
                                                 {"name": "service_name", "value": "cprog-http"}]},
                           "samples": [{"rawProfile": base64.b64encode(c_profile(build_id, vaddrs)).decode()}]}],
               "normalized": False}
        st, body, _ = srv.request("POST", "/api/profiles/writeraw", json.dumps(doc).encode(),
                                  {"Content-Type": "application/json"})
        assert st == 200, body
        should = pb_field(1, build_id.encode())
        code, _, resp = call(port, PARCA_DEBUGINFO + "ShouldInitiateUpload", should)
        assert code == "OK" and pb_decode(resp).get(1) == [1], resp
        code, detail, resp = call(port, PARCA_DEBUGINFO + "InitiateUpload",
                                  pb_field(1, build_id.encode()) + pb_encode_field(2, 0, len(elf)))
        ins = pb_decode(pb_decode(resp)[1][0])
        assert code == "OK" and pb_strs(ins, 1) == [build_id] and ins[3] == [1] and ins[2], (code, detail, ins)
        code, detail, _ = call(port, PARCA_DEBUGINFO + "MarkUploadFinished", pb_field(1, build_id.encode()))
        assert code == "FAILED_PRECONDITION", (code, detail)
        code, detail, resp = parca_upload(port, build_id, elf)
        assert code == "OK" and pb_strs(pb_decode(resp), 1) == [build_id] and pb_decode(resp)[2] == [len(elf)], \
            (code, detail)
        code, detail, _ = call(port, PARCA_DEBUGINFO + "MarkUploadFinished", pb_field(1, build_id.encode()))
        assert code == "OK", (code, detail)
        code, _, resp = call(port, PARCA_DEBUGINFO + "ShouldInitiateUpload", should)
        assert code == "OK" and pb_decode(resp).get(1, [0]) == [0], resp
        # the sources, type SOURCES (2), as gzip-compressed messages
        tar = io.BytesIO()
        with tarfile.open(fileobj=tar, mode="w") as t:
            t.add(os.path.join(os.path.dirname(binary), "prog.c"), arcname="prog.c")
        code, detail, resp = parca_upload(port, build_id, tar.getvalue(), kind=2, compression=grpc.Compression.Gzip)
        assert code == "OK", (code, detail)
        listed = srv.get_json("/api/v1/debuginfo")["debuginfo"]
        assert [(x["build_id"], x["size"], x["sources_size"]) for x in listed] == \
            [(build_id, len(elf), len(tar.getvalue()))], listed
        for sel, addr in (("cprog-grpc", vaddrs[0]), ("cprog-http", 0x555555554000 + vaddrs[0])):
            locs, _ = export(srv, CPU_NS + '{service_name="%s"}' % sel)
            assert [f[0] for f in locs[addr]] == [f[0] for f in ref[vaddrs[0]]] == ["mix", "churn"], (sel, locs)
        refusals = [(parca_upload(port, build_id, elf, first=pb_field(2, b"x")), "INVALID_ARGUMENT", "UploadInfo"),
                    (parca_upload(port, build_id, elf, kind=3), "INVALID_ARGUMENT", "UploadInfo"),
                    (call(port, PARCA_DEBUGINFO + "ShouldInitiateUpload", should + pb_encode_field(4, 0, 3)),
                     "INVALID_ARGUMENT", "source maps"),
                    (call(port, PARCA_WRITERAW, parca_writeraw({"__name__": "process_cpu"}, normalized, tenant="t")),
                     "INVALID_ARGUMENT", "tenant"),
                    (call(port, PARCA_WRITERAW, parca_writeraw({"service_name": "x"}, normalized)),
                     "INVALID_ARGUMENT", "__name__"),
                    (parca_upload(port, build_id, elf + bytes(8192)), "RESOURCE_EXHAUSTED", "--max-debuginfo-bytes")]
        for (code, detail, _), want, text in refusals:
            assert code == want and text in detail, (want, code, detail)
        assert len(srv.get_json("/api/v1/series", query="{}")["series"]) == 2
        leftovers = [f for f in os.listdir(os.path.join(srv.data_dir, "debuginfo")) if f.startswith(".upload")]
        assert leftovers == [], leftovers


def h2_call(port, method, body, headers=()):
    """One gRPC call through python3-h2 (an HTTP/2 library, not a gRPC client), so a test can
    send the metadata a gRPC client computes itself, such as grpc-timeout; the response and
    trailer headers as one dict."""
    import socket
    try:
        import h2.connection
        import h2.events
    except ImportError:  # Debian's python3-h2 (make test-deps), under another python3 of the same version
        sys.path.append("/usr/lib/python3/dist-packages")
        import h2.connection
        import h2.events
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    conn = h2.connection.H2Connection()
    conn.initiate_connection()
    sid = conn.get_next_available_stream_id()
    conn.send_headers(sid, [(":method", "POST"), (":scheme", "http"), (":path", method),
                            (":authority", "127.0.0.1:%d" % port), ("content-type", "application/grpc"),
                            ("te", "trailers"), *headers])
    conn.send_data(sid, b"\0" + len(body).to_bytes(4, "big") + body, end_stream=True)
    s.sendall(conn.data_to_send())
    got, done = {}, False
    while not done:
        data = s.recv(65536)
        assert data, "the server closed the connection"
        for ev in conn.receive_data(data):
            if isinstance(ev, (h2.events.ResponseReceived, h2.events.TrailersReceived)):
                got.update({k.decode(): v.decode() for k, v in ev.headers})
            if isinstance(ev, h2.events.DataReceived):
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            if isinstance(ev, (h2.events.StreamEnded, h2.events.StreamReset)):
                done = True
        s.sendall(conn.data_to_send())
    s.close()
    return got


@test
def grpc_a_call_whose_deadline_passed_is_not_run():
    """grpc-timeout is the call's deadline: a call that arrives with 1 ns left answers
    DEADLINE_EXCEEDED and stores nothing (its client retries it: storing it too would count the
    upload twice); with 30 s left the same call is stored; a malformed grpc-timeout is no deadline."""
    cpu = read_testdata(CPU_FILE)
    srv, port = grpc_server()
    with srv:
        push = push_request_proto([({"__name__": "process_cpu", "service_name": "late"}, [cpu])])
        got = h2_call(port, PUSH, push, [("grpc-timeout", "1n")])
        assert got.get("grpc-status") == "4" and "deadline" in got.get("grpc-message", ""), got
        assert srv.get_json("/api/v1/series", query='{service_name="late"}')["series"] == []
        for timeout in ("30S", "garbage"):
            got = h2_call(port, PUSH, push, [("grpc-timeout", timeout)])
            assert got.get("grpc-status") == "0", (timeout, got)
        assert srv.get_json("/api/v1/series", query='{service_name="late"}')["series"] != []
