/* test_objstore.c - the S3 client's encodings, its URL, and its retries against a
 * scripted server that fails on purpose.
 *
 * A real S3 server (tests/integration/test_objstore.py) cannot be made to answer 503
 * on demand; the scripted one (libmicrohttpd on a loopback port) answers each request
 * with the next status of its script, so the retry path is tested exactly: how many
 * attempts, what the caller keeps, and that a retried PUT sends the same body. */
#include <microhttpd.h>
#include <openssl/evp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/buf.h"
#include "common/base64.h"
#include "remote/azblob.h"
#include "remote/objstore.h"
#include "tests/unit/unit.h"
#include "wire/client.h"

void test_objstore_encodings(void) {
    buf_t b;
    buf_init(&b);
    objstore_encode(&b, "a b/c~d_e-f.g+h=é", strlen("a b/c~d_e-f.g+h=é"), 1);
    buf_putc(&b, 0);
    CHECK_STR((char *)b.data, "a%20b/c~d_e-f.g%2Bh%3D%C3%A9");
    b.len = 0;
    objstore_encode(&b, "x/y?", 4, 0);
    buf_putc(&b, 0);
    CHECK_STR((char *)b.data, "x%2Fy%3F");

    const char *xml = "a&amp;b&lt;&gt;&quot;&apos;&#233;&#x1F600;z";
    b.len = 0;
    CHECK_INT(objstore_xml_unescape(&b, xml, strlen(xml)), 0);
    buf_putc(&b, 0);
    CHECK_STR((char *)b.data, "a&b<>\"'\xc3\xa9\xf0\x9f\x98\x80z");
    static const char *const BAD[] = {"&", "&amp", "&nope;", "&#;", "&#x;", "&#0;", "&#xD800;", "&#x110000;", "&#12a;"};
    for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++) {
        b.len = 0;
        CHECK_INT(objstore_xml_unescape(&b, BAD[i], strlen(BAD[i])), -1);
    }
    buf_free(&b);
}

void test_objstore_open(void) {
    static const struct {
        const char *url, *want; /* a piece of the error, or NULL: opens */
    } CASES[] = {
        {"s3://hearth/pre/fix/?endpoint=http://127.0.0.1:1&region=eu-west-1", NULL},
        {"s3://hearth?endpoint=http%3A%2F%2F127.0.0.1%3A1", NULL},
        {"http://hearth/x", "must look like s3://"},
        {"s3://ab/x?endpoint=http://h", "3 to 63 characters"},
        {"s3://hearth/x", "endpoint=http://host:port (or https://) is required"},
        {"s3://hearth/x?endpoint=ftp://h", "is required"},
        {"s3://hearth/x?endpoint=http://h&colour=red", "unknown parameter `colour`"},
        {"s3://hearth/x?endpoint", "`endpoint` is not name=value"},
        {"s3://hearth/x?endpoint=http://h%zz", "bad percent-encoding"},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
        hr_err_t err = {0};
        objstore_config_t cfg = {.url = CASES[i].url, .access_key = "AK", .secret_key = "s3cr3t"};
        objstore_t *s = objstore_open(&cfg, &err);
        CHECK((s != NULL) == (CASES[i].want == NULL));
        if (CASES[i].want) {
            CHECK_INT(err.code, HR_EINVAL);
            CHECK(strstr(err.msg, CASES[i].want) != NULL);
            CHECK(strstr(err.msg, "s3cr3t") == NULL);
        }
        objstore_free(s);
    }
}

/* ---------------------------------------------------------------- the scripted server */

typedef struct {
    const int *script; /* the status of each request in turn (0: stall 2 s first); 200 after the end */
    size_t nscript;
    atomic_int requests;
    char last_method[8], last_sha[65], last_range[64];
    buf_t last_body; /* the last request's upload (the server's own thread writes it) */
} script_t;

static enum MHD_Result on_req(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_n, void **state) {
    (void)url, (void)version;
    script_t *s = cls;
    if (!*state) { /* the headers: a new request */
        *state = s;
        s->last_body.len = 0;
        return MHD_YES;
    }
    if (*upload_n) {
        buf_append(&s->last_body, upload, *upload_n);
        *upload_n = 0;
        return MHD_YES;
    }
    int i = atomic_fetch_add(&s->requests, 1);
    int status = (size_t)i < s->nscript ? s->script[i] : 200;
    if (status == 0) { /* a server that has stopped moving: the client's stall timeout must end the wait */
        struct timespec ts = {.tv_sec = 2};
        nanosleep(&ts, NULL);
        status = 200;
    }
    const char *sha = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-amz-content-sha256");
    const char *range = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Range");
    snprintf(s->last_method, sizeof s->last_method, "%s", method);
    snprintf(s->last_sha, sizeof s->last_sha, "%s", sha ? sha : "");
    snprintf(s->last_range, sizeof s->last_range, "%s", range ? range : "");
    const char *body = status >= 500   ? "<Error><Code>SlowDown</Code></Error>"
                       : status == 404 ? "<Error><Code>NoSuchKey</Code></Error>"
                                       : "0123456789"; /* a server that ignores Range */
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_PERSISTENT);
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return rc;
}

/* Starts the scripted server and opens a store on it with these timeouts and retries. */
static struct MHD_Daemon *script_start(script_t *s, objstore_t **os, long timeout_ms, int retries) {
    buf_init(&s->last_body);
    struct MHD_Daemon *d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, on_req, s,
                                            MHD_OPTION_SOCK_ADDR, NULL, MHD_OPTION_END);
    CHECK(d != NULL);
    if (!d) return NULL;
    char url[128];
    snprintf(url, sizeof url, "s3://bucket/pre?endpoint=http://127.0.0.1:%u",
             (unsigned)MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT)->port);
    objstore_config_t cfg = {
        .url = url,
        .access_key = "AK",
        .secret_key = "SK",
        .connect_timeout_ms = timeout_ms,
        .stall_timeout_ms = timeout_ms,
        .retries = retries,
    };
    hr_err_t err = {0};
    *os = objstore_open(&cfg, &err);
    CHECK(*os != NULL);
    return d;
}

static void script_stop(struct MHD_Daemon *d, script_t *s, objstore_t *os) {
    objstore_free(os);
    if (d) MHD_stop_daemon(d);
    buf_free(&s->last_body);
}

void test_objstore_retries(void) {
    client_global_init();
    /* Three 503s: three attempts (retries 2), then a transient error naming the S3 code. */
    static const int FAIL3[] = {503, 503, 503};
    script_t s = {.script = FAIL3, .nscript = 3};
    objstore_t *os = NULL;
    struct MHD_Daemon *d = script_start(&s, &os, 2000, 2);
    hr_err_t err = {0};
    buf_t out;
    buf_init(&out);
    buf_append(&out, "kept", 4);
    CHECK_INT(objstore_get(os, "k", 100, &out, &err), -1);
    CHECK_INT(err.code, HR_EIO);
    CHECK(strstr(err.msg, "answered 503 (SlowDown) after 3 attempts") != NULL);
    CHECK_INT(atomic_load(&s.requests), 3);
    CHECK_INT(out.len, 4); /* what the caller had before stays; error bodies never land in it */
    script_stop(d, &s, os);

    /* 500, then 200: the retry succeeds and the answer holds only the good body. */
    static const int FAIL1[] = {500};
    s = (script_t){.script = FAIL1, .nscript = 1};
    d = script_start(&s, &os, 2000, 2);
    out.len = 0;
    CHECK_INT(objstore_get(os, "k", 100, &out, &err), 0);
    CHECK_INT(out.len, 10);
    CHECK(out.len == 10 && !memcmp(out.data, "0123456789", 10));
    CHECK_INT(atomic_load(&s.requests), 2);
    /* Too big for max: refused, not retried. */
    int before = atomic_load(&s.requests);
    out.len = 0;
    CHECK_INT(objstore_get(os, "k", 5, &out, &err), -1);
    CHECK_INT(err.code, HR_ETOOBIG);
    CHECK_INT(atomic_load(&s.requests), before + 1);
    /* A server that ignores Range (200 with the whole object) is not the range asked for. */
    objstore_range_t r = {.off = 2, .len = 3};
    out.len = 0;
    CHECK_INT(objstore_get_ranges(os, "k", &r, 1, &out, &err), -1);
    CHECK_STR(s.last_range, "bytes=2-4");
    CHECK_INT(out.len, 0);
    script_stop(d, &s, os);

    /* 503, then 200 for a PUT: the retry sends the whole body again, with its SHA-256. */
    static const int PUT1[] = {503};
    s = (script_t){.script = PUT1, .nscript = 1};
    d = script_start(&s, &os, 2000, 2);
    static const char body[] = "a block image, say";
    CHECK_INT(objstore_put(os, "seg/1", body, sizeof body - 1, 0, &err), 0);
    CHECK_INT(atomic_load(&s.requests), 2);
    CHECK_STR(s.last_method, "PUT");
    CHECK(s.last_body.len == sizeof body - 1 && !memcmp(s.last_body.data, body, sizeof body - 1));
    unsigned char md[32];
    unsigned mdn = 0;
    EVP_Digest(body, sizeof body - 1, md, &mdn, EVP_sha256(), NULL);
    char hex[65];
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
    CHECK_STR(s.last_sha, hex);
    /* A 404 is final at once. */
    static const int NF[] = {404};
    s.script = NF, s.nscript = 1;
    atomic_store(&s.requests, 0);
    uint64_t size = 7;
    CHECK_INT(objstore_head(os, "nope", &size, &err), -1);
    CHECK_INT(err.code, HR_ENOTFOUND);
    CHECK_INT(atomic_load(&s.requests), 1);
    script_stop(d, &s, os);

    /* A stalled answer: the stall timeout (1 s here) ends each attempt; after the retries,
     * a transient error well before the server would have answered three times. */
    static const int STALL[] = {0, 0};
    s = (script_t){.script = STALL, .nscript = 2};
    d = script_start(&s, &os, 1000, 1);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    out.len = 0;
    CHECK_INT(objstore_get(os, "k", 100, &out, &err), -1);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    CHECK_INT(err.code, HR_EIO);
    CHECK(strstr(err.msg, "after 2 attempts: Operation too slow") != NULL);
#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
    CHECK(took >= 1.5 && took < 3.5); /* a sanitizer build's timing says nothing about the client's */
#else
    (void)took;
#endif
    script_stop(d, &s, os);
    buf_free(&out);
}

static int collect_blob(void *ctx, const char *name, uint64_t size) {
    buf_printf(ctx, "%s=%llu;", name, (unsigned long long)size);
    return 0;
}

/* Azure's Shared Key signatures against ones computed from the documented string to sign
 * by an independent implementation (Python's hmac, Azurite's development key); its
 * List Blobs answer and block ids. */
void test_azblob_signing_and_listing(void) {
    uint8_t *key = NULL;
    size_t keylen = 0;
    const char *k64 = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
    CHECK(base64_decode(k64, strlen(k64), &key, &keylen) == 0 && keylen == 64);
    const char *date = "Sat, 05 Dec 2026 17:00:00 GMT";
    buf_t out;
    buf_init(&out);
    hr_err_t err = {0};
    /* a listing: query parameters lowercase-sorted and decoded ('+' and %20 are spaces) */
    azblob_header_t get[] = {{"x-ms-version", AZBLOB_VERSION}, {"X-MS-Date", date}};
    CHECK_INT(azblob_sign("devstoreaccount1", key, keylen, "GET", "/devstoreaccount1/c1",
                          "restype=container&comp=list&prefix=a%2Fb+c&maxresults=2", 0, get, 2, &out, &err),
              0);
    buf_putc(&out, 0);
    CHECK_STR((char *)out.data, "SharedKey devstoreaccount1:+krnevvt12qIK77AtrvNI2937wXe90rQKjP6rxMpfyQ=");
    /* a conditional put of 5 bytes: Content-Length and If-None-Match in their places */
    azblob_header_t put[] = {
        {"x-ms-date", date}, {"If-None-Match", "*"}, {"x-ms-blob-type", "BlockBlob"}, {"x-ms-version", AZBLOB_VERSION}};
    out.len = 0;
    CHECK_INT(azblob_sign("devstoreaccount1", key, keylen, "PUT", "/devstoreaccount1/c1/p/k%20x", NULL, 5, put, 4, &out,
                          &err),
              0);
    buf_putc(&out, 0);
    CHECK_STR((char *)out.data, "SharedKey devstoreaccount1:vT+8pDPOHAHSyVltMqYL7csx9jCoFs1oi4woaX8EibU=");
    out.len = 0;
    CHECK_INT(azblob_sign("a", key, keylen, "GET", "/a/c", "x=%zz", 0, get, 2, &out, &err), -1);
    char d[64];
    azblob_date(1796490000, d, sizeof d);
    CHECK_STR(d, "Sat, 05 Dec 2026 17:00:00 GMT");

    const char *xml =
        "<?xml version=\"1.0\"?><EnumerationResults><Blobs>"
        "<Blob><Name>pre/a&amp;b</Name><Properties><Content-Length>12</Content-Length></Properties></Blob>"
        "<Blob><Name>pre/c</Name><Properties><Content-Length>0</Content-Length></Properties></Blob>"
        "</Blobs><NextMarker>m2</NextMarker></EnumerationResults>";
    buf_t names, next;
    buf_init(&names), buf_init(&next);
    CHECK_INT(objstore_azure_list_page(xml, strlen(xml), 4, collect_blob, &names, &next, &err), 0);
    buf_putc(&names, 0), buf_putc(&next, 0);
    CHECK_STR((char *)names.data, "a&b=12;c=0;");
    CHECK_STR((char *)next.data, "m2");
    const char *bad = "<Blob><Name>x</Name></Blob>";
    CHECK_INT(objstore_azure_list_page(bad, strlen(bad), 0, collect_blob, &names, &next, &err), -1);
    buf_t id;
    buf_init(&id);
    azblob_block_id(7, &id);
    buf_putc(&id, 0);
    CHECK_STR((char *)id.data, "cGFydC0wMDAwMDc="); /* "part-000007" */
    buf_free(&out), buf_free(&names), buf_free(&next), buf_free(&id);
    free(key);
}
