"""The S3 client (remote/objstore.c) against a real S3 server: Ceph's RADOS Gateway.

One gateway serves the whole area (s3server.shared(), about 13 s to start); each test works in
its own bucket. The client is driven through `hearth objstore`, so the ASan and TSan builds run
it too. Bytes are compared exactly with the files they came from; errors by their class (the
first word after `hearth objstore:`) and their message.
"""
import hashlib
import os
import subprocess
import tempfile
import time

import s3server
from harness import ARGS, CPU_FILE, read_testdata, test

_buckets = iter(range(1, 10**6))


def bucket():
    """A fresh bucket on the shared gateway; returns its s3:// URL (prefix `blocks/t1`)."""
    gw = s3server.shared()
    name = gw.create_bucket(f"hearth-it-{os.getpid()}-{next(_buckets)}")
    return gw.url(name, "blocks/t1")


def objstore(url, *args, stdin=None, env=None, timeout=120):
    """Runs `hearth objstore URL ARGS` with the gateway's keys (env overrides them)."""
    e = dict(os.environ, **s3server.shared().env())
    e.update(env or {})
    return subprocess.run([ARGS.binary, "objstore", url] + list(args), input=stdin, capture_output=True, env=e,
                          timeout=timeout)


def ok(r):
    assert r.returncode == 0, (r.returncode, r.stderr.decode())
    return r.stdout


def failed(r, cls, status=1):
    """Asserts the command failed (exit status) with error class cls; returns its message."""
    err = r.stderr.decode()
    assert r.returncode == status, (r.returncode, err)
    assert err.startswith(f"hearth objstore: {cls}: "), err
    return err


def testfile(data):
    f = tempfile.NamedTemporaryFile(dir=ARGS.tmp, delete=False)
    f.write(data)
    f.close()
    return f.name


@test
def objstore_put_get_head_round_trip_a_real_profile():
    url, data = bucket(), read_testdata(CPU_FILE)
    assert ok(objstore(url, "put", "cpu/00.pb.gz", testfile(data))) == b"stored cpu/00.pb.gz\n"
    assert ok(objstore(url, "get", "cpu/00.pb.gz")) == data
    assert ok(objstore(url, "head", "cpu/00.pb.gz")) == b"%d\n" % len(data)
    # From memory (standard input), over the first object: a plain put replaces.
    ok(objstore(url, "put", "cpu/00.pb.gz", "-", stdin=data[:1000]))
    assert ok(objstore(url, "get", "cpu/00.pb.gz")) == data[:1000]
    # An empty object is an object.
    ok(objstore(url, "put", "empty", "-", stdin=b""))
    assert ok(objstore(url, "head", "empty")) == b"0\n"
    assert ok(objstore(url, "get", "empty")) == b""


@test
def objstore_keys_with_odd_characters_sign_and_list_exactly():
    # Spaces, +, =, &, quotes, UTF-8 and a `..` segment: the path and the listing's
    # XML must round-trip byte for byte (and the signature must match what S3 computes).
    url = bucket()
    keys = ["a b+c=d&e'f\"g", "dir/../x", "ünï/cödé~_-.pb", "q?r#s%t"]
    for i, k in enumerate(keys):
        ok(objstore(url, "put", k, "-", stdin=b"x" * (i + 1)))
    for i, k in enumerate(keys):
        assert ok(objstore(url, "get", k)) == b"x" * (i + 1), k
    listed = ok(objstore(url, "ls")).decode().splitlines()
    want = sorted(keys, key=lambda k: k.encode())
    assert listed == [f"{k} {keys.index(k) + 1}" for k in want], listed


@test
def objstore_range_gets_first_last_middle_and_past_the_end():
    url, data = bucket(), read_testdata(CPU_FILE)
    n = len(data)
    ok(objstore(url, "put", "blk", testfile(data)))
    assert ok(objstore(url, "get", "blk", "--range", "0:1")) == data[:1]
    assert ok(objstore(url, "get", "blk", "--range", f"{n - 1}:1")) == data[-1:]
    assert ok(objstore(url, "get", "blk", "--range", f"{n // 2}:100")) == data[n // 2:n // 2 + 100]
    # Several ranges in one call come back one after another, in the order asked.
    got = ok(objstore(url, "get", "blk", "--range", f"{n - 8}:8,0:16,1000:3"))
    assert got == data[n - 8:] + data[:16] + data[1000:1003]
    # Starting at the end (S3: 416) and running over it (S3: a short 206) are both errors.
    err = failed(objstore(url, "get", "blk", "--range", f"{n}:1"), "EINVAL")
    assert f"range {n}-{n} is past the end of the object" in err, err
    err = failed(objstore(url, "get", "blk", "--range", f"{n - 1}:2"), "EINVAL")
    assert f"range {n - 1}-{n} is past the end of the object (got 1 of 2 bytes)" in err, err
    failed(objstore(url, "get", "nothing", "--range", "0:1"), "ENOTFOUND")


@test
def objstore_list_reads_every_page():
    url = bucket()
    sizes = {f"seg/{i:03d}": i + 1 for i in range(7)}
    for k, size in sizes.items():
        ok(objstore(url, "put", k, "-", stdin=b"s" * size))
    ok(objstore(url, "put", "other", "-", stdin=b"o"))
    want = [f"{k} {v}" for k, v in sorted(sizes.items())]
    # 2 keys a page: 4 pages, joined through the continuation tokens.
    assert ok(objstore(url, "ls", "seg/", "--page", "2")).decode().splitlines() == want
    assert ok(objstore(url, "ls", "--page", "3")).decode().splitlines() == ["other 1"] + want
    assert ok(objstore(url, "ls", "seg/00", "--page", "1")).decode().splitlines() == want
    assert ok(objstore(url, "ls", "none/")) == b""
    # Another prefix of the same bucket sees nothing of this one.
    assert ok(objstore(url.replace("/blocks/t1?", "/blocks/t2?"), "ls")) == b""


@test
def objstore_delete_then_get_is_not_found():
    url = bucket()
    ok(objstore(url, "put", "gone", "-", stdin=b"bytes"))
    ok(objstore(url, "rm", "gone"))
    bucket_name = url[len("s3://"):].split("/")[0]
    err = failed(objstore(url, "get", "gone"), "ENOTFOUND")
    assert f"{bucket_name}/blocks/t1/gone: not found (NoSuchKey)" in err, err
    failed(objstore(url, "head", "gone"), "ENOTFOUND")
    ok(objstore(url, "rm", "gone"))  # S3 deletes are idempotent
    assert ok(objstore(url, "ls")) == b""


@test
def objstore_conditional_put_creates_only_once():
    url = bucket()
    r = objstore(url, "put", "seg", "-", "--if-absent", stdin=b"first")
    assert (r.returncode, r.stdout) == (0, b"stored seg\n"), r
    r = objstore(url, "put", "seg", "-", "--if-absent", stdin=b"second")
    assert (r.returncode, r.stdout) == (3, b"exists seg (left alone)\n"), r
    assert ok(objstore(url, "get", "seg")) == b"first"


@test
def objstore_wrong_keys_are_a_clear_error_without_the_secret():
    url = bucket()
    wrong = "not-the-secret-8f3a9c"
    for env, code in (({"AWS_SECRET_ACCESS_KEY": wrong}, "SignatureDoesNotMatch"),
                      ({"AWS_ACCESS_KEY_ID": "NOSUCHKEY"}, "InvalidAccessKeyId")):
        t = time.time()
        r = objstore(url, "ls", env=env)
        err = failed(r, "EINVAL")
        assert f"object store refused the request (403 {code}): check the access key and secret key" in err, err
        assert time.time() - t < 5, "a refusal is final, not retried"
        out = (r.stdout + r.stderr).decode()
        assert wrong not in out and s3server.SECRET_KEY not in out, out
    # No keys at all is bad usage (exit 2), found before any request.
    err = failed(objstore(url, "ls", env={"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""}), "EINVAL", 2)
    assert "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" in err, err


@test
def objstore_concurrent_range_gets_agree():
    url, data = bucket(), read_testdata(CPU_FILE)
    n = len(data)
    ok(objstore(url, "put", "blk", testfile(data)))
    ranges = [(0, 64), (n // 3, 4096), (n - 100, 100), (n // 2, 1)]
    spec = ",".join(f"{o}:{k}" for o, k in ranges)
    got = ok(objstore(url, "get", "blk", "--range", spec, "--threads", "8"))
    assert got == b"".join(data[o:o + k] for o, k in ranges)
    assert ok(objstore(url, "get", "blk", "--threads", "6")) == data


def put_peak_rss_kib(url, key, path):
    """Peak resident memory of one `hearth objstore put KEY PATH` (from its own rusage)."""
    e = dict(os.environ, **s3server.shared().env())
    p = subprocess.Popen([ARGS.binary, "objstore", url, "put", key, path], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=e)
    _, status, usage = os.wait4(p.pid, 0)
    out, err = p.stdout.read(), p.stderr.read()
    p.returncode = os.waitstatus_to_exitcode(status)
    assert p.returncode == 0, err.decode()
    assert out == b"stored %s\n" % key.encode()
    return usage.ru_maxrss


@test
def objstore_streams_a_20_mib_file():
    url = bucket()
    data = os.urandom(20 << 20)
    path = testfile(data)
    small = put_peak_rss_kib(url, "small", testfile(b"tiny"))
    big = put_peak_rss_kib(url, "big", path)
    # Streamed: the 20 MiB never sit in memory at once (the hash and the upload read it in chunks).
    assert big - small < 8 << 10, (small, big)
    assert ok(objstore(url, "head", "big")) == b"20971520\n"
    got = ok(objstore(url, "get", "big"))
    assert hashlib.sha256(got).hexdigest() == hashlib.sha256(data).hexdigest()
    assert ok(objstore(url, "get", "big", "--range", f"{(20 << 20) - 5}:5")) == data[-5:]


@test
def objstore_stopped_server_is_a_transient_error_in_bounded_time():
    # Last in the area: it stops the shared gateway's S3 endpoint and starts it again.
    url, gw = bucket(), s3server.shared()
    ok(objstore(url, "put", "k", "-", stdin=b"before"))
    gw.stop_gateway()
    try:
        t = time.time()
        err = failed(objstore(url, "get", "k", "--retries", "2", "--timeout-ms", "2000"), "EIO")
        took = time.time() - t
        assert f"no answer from object store {gw.endpoint} after 3 attempts: Failed to connect" in err, err
        assert took < 5, took  # refused at once, three times, 0.1 + 0.2 s apart
        failed(objstore(url, "put", "k2", "-", "--retries", "0", stdin=b"x"), "EIO")
    finally:
        gw.start_gateway()
    assert ok(objstore(url, "get", "k")) == b"before"


def gateways():
    """Both S3 servers the cluster runs on: Ceph's radosgw and OpenStack Swift's s3api."""
    return [("radosgw", s3server.shared()), ("swift", s3server.shared_swift())]


@test
def objstore_multipart_puts_retry_parts_abort_on_failure_and_clean_up_stale_uploads():
    """A file over --multipart-threshold goes up in parts, on radosgw and on Swift's S3 API: it
    reads back byte for byte as one object. Parts answered 500 half the time are retried and the
    put succeeds; parts that always fail end the put with EIO and abort its upload, so nothing is
    left; a put killed mid-way leaves an upload that abort-stale removes once older than its
    age, and not before."""
    from faultproxy import FaultProxy
    data = os.urandom(13 << 20)
    path = testfile(data)
    thr = ["--multipart-threshold", str(6 << 20)]
    for name, gw in gateways():
        b = gw.create_bucket(f"hearth-mp-{os.getpid()}-{next(_buckets)}")
        url, env = gw.url(b, "blocks"), gw.env()
        ok(objstore(url, "put", "whole", path, *thr, env=env))
        assert ok(objstore(url, "get", "whole", env=env)) == data, name
        assert ok(objstore(url, "ls", env=env)).decode().split() == ["whole", str(len(data))], name
        with FaultProxy(gw.port) as px:
            purl = url.replace(gw.endpoint, px.endpoint)
            px.faults = {"part_fail": 0.4}
            ok(objstore(purl, "put", "retried", path, *thr, "--retries", "8", env=env))
            assert ok(objstore(url, "get", "retried", env=env)) == data, name
            px.faults = {"part_fail": 1.0}
            failed(objstore(purl, "put", "failed", path, *thr, "--retries", "1", env=env), "EIO")
            px.faults, px.stall_s = {"part_stall": 1.0}, 60
            before = px.damaged
            p = subprocess.Popen([ARGS.binary, "objstore", purl, "put", "killed", path, *thr],
                                 env=dict(os.environ, **env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.time() + 60
            while px.damaged == before:  # the first part is stored, its answer held back
                assert time.time() < deadline and p.poll() is None, name
                time.sleep(0.05)
            p.kill()
            p.wait()
        assert ok(objstore(url, "abort-stale", "3600", env=env)) == b"aborted 0\n", name
        # The killed one, once over a second old (ages count whole seconds); Swift lists
        # multipart uploads from its container listing, which it updates after the fact:
        # asked until it shows, within 15 s.
        aborted, deadline = 0, time.time() + 15
        while not aborted and time.time() < deadline:
            aborted = int(ok(objstore(url, "abort-stale", "1", env=env)).split()[1])
            time.sleep(0 if aborted else 0.5)
        assert aborted >= 1, (name, aborted)  # more only while a lagging listing still shows an aborted one
        while ok(objstore(url, "abort-stale", "0", env=env)) != b"aborted 0\n":
            assert time.time() < deadline + 15, name
            time.sleep(0.5)
        keys = ok(objstore(url, "ls", env=env)).decode().split()[::2]
        assert keys == ["retried", "whole"], (name, keys)


@test
def objstore_on_azure_blob_storage_with_a_shared_key_or_a_sas_token():
    """azblob:// against Microsoft's Azurite: put (plain, conditional, and as blocks above the
    multipart threshold), get whole and by ranges, head, list, delete, with the account key
    (Shared Key signatures) and with an account SAS token instead; a read-only SAS and a wrong
    key are refused with a clear error that carries no secret."""
    import azserver
    az = azserver.shared()
    data, big = read_testdata(CPU_FILE), os.urandom(13 << 20)
    small, large = testfile(data), testfile(big)
    for how in ("key", "sas"):
        url = az.url(az.create_bucket(f"hearth-az-{os.getpid()}-{next(_buckets)}"), "blocks/t1")
        env = az.env() if how == "key" else {"AZURE_STORAGE_ACCOUNT": azserver.ACCOUNT, "AZURE_STORAGE_KEY": "",
                                             "AZURE_STORAGE_SAS_TOKEN": az.sas()}
        assert ok(objstore(url, "put", "cpu/0 1.pb.gz", small, env=env)) == b"stored cpu/0 1.pb.gz\n", how
        assert objstore(url, "put", "cpu/0 1.pb.gz", small, "--if-absent", env=env).returncode == 3, how
        ok(objstore(url, "put", "big", large, "--multipart-threshold", str(6 << 20), env=env))
        assert ok(objstore(url, "get", "cpu/0 1.pb.gz", env=env)) == data, how
        assert ok(objstore(url, "get", "big", env=env)) == big, how
        assert ok(objstore(url, "get", "big", "--range", "0:7,%d:9" % (9 << 20), env=env)) == \
            big[:7] + big[9 << 20:(9 << 20) + 9], how
        assert ok(objstore(url, "head", "big", env=env)) == b"%d\n" % len(big), how
        assert ok(objstore(url, "ls", "--page", "1", env=env)).decode().splitlines() == ["big %d" % len(big),
                                                                           "cpu/0 1.pb.gz %d" % len(data)], how
        ok(objstore(url, "rm", "big", env=env))
        ok(objstore(url, "rm", "big", env=env))  # gone is gone, as on S3
        failed(objstore(url, "get", "big", env=env), "ENOTFOUND")
    ro = {"AZURE_STORAGE_ACCOUNT": azserver.ACCOUNT, "AZURE_STORAGE_KEY": "", "AZURE_STORAGE_SAS_TOKEN": az.sas("rl")}
    msg = failed(objstore(url, "put", "x", small, env=ro), "EINVAL")
    assert "SAS token" in msg and "sig=" not in msg, msg
    bad = dict(az.env(), AZURE_STORAGE_KEY="c2VjcmV0LWtleS10aGF0LWlzLXdyb25n")
    msg = failed(objstore(url, "get", "cpu/0 1.pb.gz", env=bad), "EINVAL")
    assert "c2VjcmV0" not in msg and "403" in msg, msg
