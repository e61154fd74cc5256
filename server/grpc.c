/* grpc.c - see grpc.h. */
#include "server/grpc.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <nghttp2/nghttp2.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/timeparse.h"
#include "server/workers.h"
#include "common/fsutil.h"
#include "wire/gzip.h"

#define GRPC_MAX_STREAMS 100 /* concurrent calls per connection (SETTINGS_MAX_CONCURRENT_STREAMS) */
#define GRPC_MAX_HEADERS 32  /* metadata entries a call may send */
#define GRPC_MAX_HEADER_BYTES 16384
#define GRPC_MAX_HANDLERS 256
#define GRPC_PREFIX 5 /* a message's frame: compressed flag, then its length (u32, big-endian) */

#define PARCA_DEBUGINFO "/parca.debuginfo.v1alpha1.DebuginfoService/"

/* The calls served, and the route each stands for: a unary call's message is that
 * route's body, with the Content-Type the route's handler reads; a client-streaming
 * call's body is its messages as framed on the wire (GRPC_CONTENT_TYPE, grpc.h). */
static const struct {
    const char *path, *url, *content_type;
    int client_stream;
} SERVICES[] = {
    {"/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export", "/v1development/profiles",
     "application/x-protobuf", 0},
    {"/push.v1.PusherService/Push", "/push.v1.PusherService/Push", "application/proto", 0},
    {"/parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw",
     "/parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw", "application/proto", 0},
    {PARCA_DEBUGINFO "ShouldInitiateUpload", PARCA_DEBUGINFO "ShouldInitiateUpload", "application/proto", 0},
    {PARCA_DEBUGINFO "InitiateUpload", PARCA_DEBUGINFO "InitiateUpload", "application/proto", 0},
    {PARCA_DEBUGINFO "MarkUploadFinished", PARCA_DEBUGINFO "MarkUploadFinished", "application/proto", 0},
    {PARCA_DEBUGINFO "Upload", PARCA_DEBUGINFO "Upload", GRPC_CONTENT_TYPE, 1},
};

/* gRPC status codes (grpc/doc/statuscodes.md). */
enum {
    G_OK = 0,
    G_UNKNOWN = 2,
    G_INVALID_ARGUMENT = 3,
    G_DEADLINE_EXCEEDED = 4,
    G_NOT_FOUND = 5,
    G_ALREADY_EXISTS = 6,
    G_PERMISSION_DENIED = 7,
    G_RESOURCE_EXHAUSTED = 8,
    G_FAILED_PRECONDITION = 9,
    G_UNIMPLEMENTED = 12,
    G_INTERNAL = 13,
    G_UNAVAILABLE = 14,
    G_UNAUTHENTICATED = 16,
};

static const struct {
    int http, code;
} CODES[] = {
    {400, G_INVALID_ARGUMENT},   {401, G_UNAUTHENTICATED},    {403, G_PERMISSION_DENIED}, {404, G_NOT_FOUND},
    {405, G_UNIMPLEMENTED},      {408, G_DEADLINE_EXCEEDED},  {409, G_ALREADY_EXISTS},    {412, G_FAILED_PRECONDITION},
    {413, G_RESOURCE_EXHAUSTED}, {414, G_RESOURCE_EXHAUSTED}, {415, G_INVALID_ARGUMENT},  {422, G_INVALID_ARGUMENT},
    {429, G_RESOURCE_EXHAUSTED}, {500, G_INTERNAL},           {501, G_UNIMPLEMENTED},     {503, G_UNAVAILABLE},
    {504, G_DEADLINE_EXCEEDED},  {507, G_RESOURCE_EXHAUSTED},
};

int grpc_timeout_parse(const char *s, int64_t *ns) {
    static const struct {
        char unit;
        int64_t ns;
    } UNITS[] = {{'H', 3600000000000LL}, {'M', 60000000000LL}, {'S', 1000000000LL},
                 {'m', 1000000LL},       {'u', 1000LL},        {'n', 1}};
    size_t n = strlen(s);
    if (n < 2 || n > 9) return -1; /* at most 8 digits, then the unit */
    int64_t v = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    for (size_t i = 0; i < sizeof UNITS / sizeof *UNITS; i++)
        if (UNITS[i].unit == s[n - 1]) {
            /* 99999999 hours overflows int64 ns: such a deadline is no deadline */
            *ns = v > INT64_MAX / UNITS[i].ns ? INT64_MAX / 2 : v * UNITS[i].ns;
            return 0;
        }
    return -1;
}

int grpc_code_of_http(int status) {
    if (status >= 200 && status < 300) return G_OK;
    for (size_t i = 0; i < sizeof CODES / sizeof *CODES; i++)
        if (CODES[i].http == status) return CODES[i].code;
    return status >= 500 ? G_INTERNAL : G_UNKNOWN;
}

typedef struct conn conn_t;

/* One call. Owned by its connection's list; while its handler runs (running) the pool
 * holds it too, and a connection that closes meanwhile leaves it to be freed when the
 * handler returns. */
typedef struct stream {
    workers_job_t job;
    conn_t *c;
    struct stream *next, *next_done;
    int32_t id;
    char path[256], grpc_encoding[32];
    char *hdrs[2 * GRPC_MAX_HEADERS + 4]; /* name, value pairs for req.headers */
    size_t nhdrs, hdr_bytes;
    int too_many_headers;
    http_req_t req;
    http_resp_t resp;
    size_t reserved; /* bytes of the server's in-flight budget this call holds */
    int admitted, released, running, answered;
    int compressed;      /* the message is gzip (grpc-encoding), inflated on the pool */
    int client_stream;   /* the body is every message, framed (SERVICES) */
    int64_t deadline_ns; /* grpc-timeout as a monotonic time; 0: none */
    buf_t out;           /* the response message, framed */
    size_t out_off;
} stream_t;

struct conn {
    struct grpc_server *s;
    int fd;
    nghttp2_session *h2;
    stream_t *streams;
    unsigned running;  /* streams whose handler runs */
    int closed;        /* the socket is gone; freed once running is 0 */
    int64_t last_ns;   /* monotonic time of the last bytes read */
    SSL *ssl;          /* with TLS: the connection's, over fd */
    int write_blocked; /* TLS: the last write waits for the peer's bytes, not for room */
    conn_t *next;
};

struct grpc_server {
    grpc_config_t cfg;
    char listen[256];
    http_router_t router;
    SSL_CTX *tls; /* NULL: h2c */
    int lfd, ep, wake;
    pthread_t loop;
    atomic_int stop;
    workers_t *workers;
    pthread_mutex_t mu; /* done */
    stream_t *done;     /* handlers returned, for the loop to answer */
    conn_t *conns;      /* the loop's */
    unsigned nconns;
    size_t inflight; /* the loop's: message bytes buffered by all calls */
};

/* epoll's data for the two descriptors that are not connections. */
static char LISTENER, WAKER;

/* ---- streams */

static void release(stream_t *st) {
    if (st->admitted && !st->released) st->c->s->router.release(st->c->s->router.app, &st->req);
    st->released = 1;
}

static void stream_free(stream_t *st) {
    release(st);
    if (st->req.spool_fd >= 0) close(st->req.spool_fd);
    if (st->req.spool_path[0]) unlink(st->req.spool_path); /* not kept by the handler, or never handled */
    st->c->s->inflight -= st->reserved;
    for (size_t i = 0; i < st->nhdrs; i++) free(st->hdrs[i]);
    buf_free(&st->req.body);
    buf_free(&st->resp.body);
    buf_free(&st->out);
    free(st);
}

static void stream_unlink(stream_t *st) {
    for (stream_t **p = &st->c->streams; *p; p = &(*p)->next)
        if (*p == st) {
            *p = st->next;
            return;
        }
}

static stream_t *stream_of(nghttp2_session *h2, int32_t id) { return nghttp2_session_get_stream_user_data(h2, id); }

/* grpc-message is percent-encoded: bytes outside printable ASCII, and '%'. */
static void percent_encode(const char *in, char *out, size_t cap) {
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)in; *p && o + 4 < cap; p++) {
        if (*p >= 0x20 && *p <= 0x7e && *p != '%') out[o++] = (char)*p;
        else o += (size_t)snprintf(out + o, cap - o, "%%%02X", *p);
    }
    out[o] = 0;
}

#define NV(n, v)                                                                                                       \
    { (uint8_t *)(n), (uint8_t *)(v), strlen(n), strlen(v), NGHTTP2_NV_FLAG_NONE }

/* Ends the call with grpc-status code and message, in a trailers-only response. */
static void answer_error(stream_t *st, int code, const char *msg) {
    char status[16], text[1024];
    snprintf(status, sizeof status, "%d", code);
    percent_encode(msg, text, sizeof text);
    nghttp2_nv nv[] = {NV(":status", "200"), NV("content-type", "application/grpc"), NV("grpc-status", status),
                       NV("grpc-message", text)};
    st->answered = 1;
    nghttp2_submit_response(st->c->h2, st->id, nv, sizeof nv / sizeof *nv, NULL);
    /* The rest of a refused message is read and dropped, not buffered. No RST_STREAM
     * (NO_ERROR) to stop it: RFC 9113 8.1 allows one, but gRPC's C core then reports
     * INTERNAL instead of the status it was sent. */
    release(st);
}

static ssize_t read_out(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                        nghttp2_data_source *src, void *user) {
    (void)src, (void)user;
    stream_t *st = stream_of(h2, id);
    if (!st) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    size_t n = st->out.len - st->out_off < len ? st->out.len - st->out_off : len;
    memcpy(buf, st->out.data + st->out_off, n);
    st->out_off += n;
    if (st->out_off == st->out.len) {
        *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        nghttp2_nv trailers[] = {NV("grpc-status", "0")};
        if (nghttp2_submit_trailer(h2, id, trailers, 1)) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    return (ssize_t)n;
}

/* Sends the handler's answer: one message on success, else the error's code and text. */
static void answer(stream_t *st) {
    http_resp_t *r = &st->resp;
    int code = grpc_code_of_http(r->status);
    log_event(code ? LOG_INFO : LOG_DEBUG, "grpc.call",
              "tenant=%s path=%s status=%d grpc_status=%d req_bytes=%zu "
              "duration_ms=%.2f%s%s%s",
              st->req.tenant[0] ? st->req.tenant : "-", st->path, r->status, code, st->req.received,
              (double)(time_now_ns() - st->req.start_ns) / 1e6, code ? " err=\"" : "", code ? r->reason : "",
              code ? "\"" : "");
    if (code) return answer_error(st, code, r->reason[0] ? r->reason : "the request failed");
    uint8_t prefix[GRPC_PREFIX] = {0, (uint8_t)(r->body.len >> 24), (uint8_t)(r->body.len >> 16),
                                   (uint8_t)(r->body.len >> 8), (uint8_t)r->body.len};
    buf_append(&st->out, prefix, sizeof prefix);
    buf_append(&st->out, r->body.data, r->body.len);
    if (st->out.oom) return answer_error(st, G_RESOURCE_EXHAUSTED, "out of memory");
    nghttp2_nv nv[] = {NV(":status", "200"), NV("content-type", "application/grpc")};
    nghttp2_data_provider dp = {.read_callback = read_out};
    st->answered = 1;
    nghttp2_submit_response(st->c->h2, st->id, nv, 2, &dp);
    release(st);
}

/* ---- a call's life: headers, admission, message, handler */

static int find_service(const char *path) {
    for (size_t i = 0; i < sizeof SERVICES / sizeof *SERVICES; i++)
        if (!strcmp(SERVICES[i].path, path)) return (int)i;
    return -1;
}

static int add_header(stream_t *st, const char *name, size_t nlen, const char *value, size_t vlen) {
    if (st->nhdrs + 2 > 2 * GRPC_MAX_HEADERS) return -1;
    char *n = strndup(name, nlen), *v = strndup(value, vlen);
    if (!n || !v) {
        free(n);
        free(v);
        return -1;
    }
    st->hdrs[st->nhdrs++] = n;
    st->hdrs[st->nhdrs++] = v;
    return 0;
}

/* The headers are in: finds the service and admits the call (tenant, credential, role,
 * concurrency), before any message byte is kept. */
static void start_call(stream_t *st) {
    int svc = find_service(st->path);
    if (st->too_many_headers) return answer_error(st, G_RESOURCE_EXHAUSTED, "too much metadata");
    if (svc < 0) return answer_error(st, G_UNIMPLEMENTED, "no such method on this server");
    /* The route's own Content-Type: the message is its body (a gzip one inflated first,
     * run_handler). */
    if (add_header(st, "content-type", 12, SERVICES[svc].content_type, strlen(SERVICES[svc].content_type)))
        return answer_error(st, G_RESOURCE_EXHAUSTED, "too much metadata");
    /* A streamed call's handler unframes the messages itself, inflating gzip ones. */
    if (SERVICES[svc].client_stream && st->grpc_encoding[0] &&
        add_header(st, "grpc-encoding", 13, st->grpc_encoding, strlen(st->grpc_encoding)))
        return answer_error(st, G_RESOURCE_EXHAUSTED, "too much metadata");
    st->client_stream = SERVICES[svc].client_stream;
    st->req.method = "POST";
    st->req.url = SERVICES[svc].url;
    st->req.headers = (const char *const *)st->hdrs;
    st->req.nheaders = st->nhdrs / 2;
    st->req.declared = UINT64_MAX;
    st->req.spool_fd = -1;
    st->req.start_ns = time_now_ns();
    grpc_server_t *s = st->c->s;
    if (s->router.admit(s->router.app, &st->req, &st->resp)) return answer(st);
    st->admitted = 1;
}

/* A compressed message inflated in place of itself, within max_inflated bytes; 0, or
 * -1 with the refusal in the response. Every route reads the inflated message, whatever
 * Content-Encoding it takes over HTTP. */
static int inflate_message(stream_t *st) {
    uint8_t *out = NULL;
    size_t n = 0;
    hr_err_t err = {0};
    if (gz_inflate(st->req.body.data, st->req.body.len, st->c->s->cfg.max_inflated, &out, &n, &err)) {
        http_error(&st->resp, err.code == HR_ETOOBIG ? 413 : 400, "the gzip message %s",
                   err.code == HR_ETOOBIG ? "inflates past --max-decompressed-bytes" : "does not inflate");
        return -1;
    }
    buf_free(&st->req.body);
    st->req.body = (buf_t){.data = out, .len = n, .cap = n};
    return 0;
}

static void run_handler(workers_job_t *job) {
    stream_t *st = (stream_t *)((char *)job - offsetof(stream_t, job));
    grpc_server_t *s = st->c->s;
    /* A call whose client gave up while it waited for a thread is not run: the client
     * retries it, and an upload run now would then be stored twice. */
    if (st->deadline_ns && time_mono_ns() > st->deadline_ns)
        http_error(&st->resp, 504, "the call's deadline (grpc-timeout) passed before it could run");
    else if (!st->compressed || inflate_message(st) == 0) s->router.handle(s->router.app, &st->req, &st->resp);
    pthread_mutex_lock(&s->mu);
    st->next_done = s->done;
    s->done = st;
    pthread_mutex_unlock(&s->mu);
    uint64_t one = 1;
    ssize_t w = write(s->wake, &one, sizeof one);
    (void)w; /* an eventfd write fails only at 2^64-1 pending wakes */
}

static void submit(stream_t *st);

/* The message is complete (a unary call's), or all of them (a streamed call's): unframes
 * a unary message and runs the handler on the pool. */
static void complete_call(stream_t *st) {
    buf_t *b = &st->req.body;
    if (st->answered) return;
    if (st->client_stream) {
        if (st->req.spool_fd >= 0) close(st->req.spool_fd); /* complete: the handler's to keep */
        st->req.spool_fd = -1;
        return submit(st);
    }
    if (b->len < GRPC_PREFIX) return answer_error(st, G_INVALID_ARGUMENT, "the call carries no message");
    size_t n = (size_t)b->data[1] << 24 | (size_t)b->data[2] << 16 | (size_t)b->data[3] << 8 | b->data[4];
    if (b->len != GRPC_PREFIX + n)
        return answer_error(st, G_INVALID_ARGUMENT, "a unary call carries exactly one whole message");
    if (b->data[0] && strcasecmp(st->grpc_encoding, "gzip"))
        return answer_error(st, G_UNIMPLEMENTED, "compressed message: only grpc-encoding gzip is accepted");
    st->compressed = b->data[0];
    memmove(b->data, b->data + GRPC_PREFIX, n);
    b->len = n;
    st->req.received = n;
    submit(st);
}

/* Runs the call's handler on the pool. */
static void submit(stream_t *st) {
    st->job.run = run_handler;
    st->running = 1;
    st->c->running++;
    if (workers_submit(st->c->s->workers, &st->job)) {
        st->running = 0;
        st->c->running--;
        answer_error(st, G_UNAVAILABLE, "the server is shutting down");
    }
}

/* ---- nghttp2 callbacks */

static int on_begin_headers(nghttp2_session *h2, const nghttp2_frame *f, void *user) {
    conn_t *c = user;
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    stream_t *st = calloc(1, sizeof *st);
    if (!st) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    st->c = c;
    st->id = f->hd.stream_id;
    st->req.spool_fd = -1;
    buf_init(&st->req.body);
    buf_init(&st->resp.body);
    buf_init(&st->out);
    st->next = c->streams;
    c->streams = st;
    nghttp2_session_set_stream_user_data(h2, st->id, st);
    return 0;
}

static int on_header(nghttp2_session *h2, const nghttp2_frame *f, const uint8_t *name, size_t nlen,
                     const uint8_t *value, size_t vlen, uint8_t flags, void *user) {
    (void)flags, (void)user;
    stream_t *st = stream_of(h2, f->hd.stream_id);
    if (!st || f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    const char *n = (const char *)name, *v = (const char *)value;
    if (nlen == 5 && !memcmp(n, ":path", 5)) snprintf(st->path, sizeof st->path, "%.*s", (int)vlen, v);
    else if (nlen == 13 && !memcmp(n, "grpc-encoding", 13))
        snprintf(st->grpc_encoding, sizeof st->grpc_encoding, "%.*s", (int)vlen, v);
    else if (nlen == 12 && !memcmp(n, "grpc-timeout", 12)) {
        char t[32];
        int64_t ns;
        snprintf(t, sizeof t, "%.*s", (int)vlen, v);
        if (grpc_timeout_parse(t, &ns) == 0) st->deadline_ns = time_mono_ns() + ns;
    } else if (n[0] != ':' && !(nlen == 12 && !memcmp(n, "content-type", 12))) {
        st->hdr_bytes += nlen + vlen;
        if (st->hdr_bytes > GRPC_MAX_HEADER_BYTES || add_header(st, n, nlen, v, vlen)) st->too_many_headers = 1;
    }
    return 0;
}

/* Bytes of a call whose route keeps bodies on disk (debug files): written to a file in
 * the route's spool folder as they arrive, within the route's own limit (plus the
 * messages' framing), taking nothing from the in-flight memory budget. The write is the
 * loop thread's, into the page cache. */
static void spool_data(stream_t *st, const uint8_t *data, size_t len) {
    http_req_t *r = &st->req;
    size_t cap = r->max_body + r->max_body / 64 + 65536; /* each message's frame and tag, generously */
    if (r->received + len > cap) {
        char msg[160];
        snprintf(msg, sizeof msg, "the upload exceeds --max-debuginfo-bytes %zu", r->max_body);
        return answer_error(st, G_RESOURCE_EXHAUSTED, msg);
    }
    if (r->spool_fd < 0) {
        snprintf(r->spool_path, sizeof r->spool_path, "%s/.upload-XXXXXX", r->spool_dir);
        if ((r->spool_fd = mkostemp(r->spool_path, O_CLOEXEC)) < 0) {
            r->spool_path[0] = 0;
            return answer_error(st, G_RESOURCE_EXHAUSTED, "cannot store the upload on disk");
        }
    }
    hr_err_t e = {0};
    if (fs_write_all(r->spool_fd, data, len, r->spool_path, &e))
        return answer_error(st, G_RESOURCE_EXHAUSTED, "the upload could not be written to disk");
    r->received += len;
}

static int on_data(nghttp2_session *h2, uint8_t flags, int32_t id, const uint8_t *data, size_t len, void *user) {
    (void)flags, (void)user;
    stream_t *st = stream_of(h2, id);
    if (!st || st->answered || !st->admitted) return 0;
    if (st->req.spool_dir) return spool_data(st, data, len), 0;
    grpc_server_t *s = st->c->s;
    if (st->req.body.len + len > s->cfg.max_message + GRPC_PREFIX) {
        char msg[160];
        snprintf(msg, sizeof msg, "message exceeds --max-body-bytes %zu", s->cfg.max_message);
        return answer_error(st, G_RESOURCE_EXHAUSTED, msg), 0;
    }
    if (s->cfg.max_inflight && s->inflight + len > s->cfg.max_inflight)
        return answer_error(st, G_RESOURCE_EXHAUSTED,
                            "too many bytes of messages in flight (--max-inflight-body-bytes): retry"),
               0;
    s->inflight += len;
    st->reserved += len;
    buf_append(&st->req.body, data, len);
    if (st->req.body.oom) answer_error(st, G_RESOURCE_EXHAUSTED, "out of memory");
    return 0;
}

static int on_frame(nghttp2_session *h2, const nghttp2_frame *f, void *user) {
    (void)user;
    stream_t *st = stream_of(h2, f->hd.stream_id);
    if (!st) return 0;
    if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST) start_call(st);
    if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) && (f->hd.flags & NGHTTP2_FLAG_END_STREAM))
        complete_call(st);
    return 0;
}

static int on_close(nghttp2_session *h2, int32_t id, uint32_t code, void *user) {
    (void)code, (void)user;
    stream_t *st = stream_of(h2, id);
    if (!st) return 0;
    nghttp2_session_set_stream_user_data(h2, id, NULL);
    stream_unlink(st);
    if (st->running) st->id = -1; /* the handler's return frees it */
    else stream_free(st);
    return 0;
}

/* Reads into buf: bytes, 0 at the end of the stream, -1 on an error, -2 when nothing
 * more is there for now. */
static ssize_t io_recv(conn_t *c, uint8_t *buf, size_t cap) {
    if (!c->ssl) {
        ssize_t n = recv(c->fd, buf, cap, 0);
        return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? -2 : n;
    }
    int n = SSL_read(c->ssl, buf, (int)(cap > INT32_MAX ? INT32_MAX : cap));
    if (n > 0) {
        c->write_blocked = 0;
        return n;
    }
    int e = SSL_get_error(c->ssl, n);
    ERR_clear_error();
    return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE ? -2 : e == SSL_ERROR_ZERO_RETURN ? 0 : -1;
}

static ssize_t on_send(nghttp2_session *h2, const uint8_t *data, size_t len, int flags, void *user) {
    (void)h2, (void)flags;
    conn_t *c = user;
    if (c->ssl) {
        int n = SSL_write(c->ssl, data, (int)(len > INT32_MAX ? INT32_MAX : len));
        if (n > 0) return n;
        int e = SSL_get_error(c->ssl, n);
        ERR_clear_error();
        c->write_blocked = e == SSL_ERROR_WANT_READ; /* mid-handshake: poll for input, not room */
        return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE ? NGHTTP2_ERR_WOULDBLOCK
                                                                     : NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    ssize_t n = send(c->fd, data, len, MSG_NOSIGNAL);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? NGHTTP2_ERR_WOULDBLOCK : NGHTTP2_ERR_CALLBACK_FAILURE;
    return n;
}

/* ---- connections */

static void conn_close(conn_t *c) {
    if (c->closed) return;
    c->closed = 1;
    epoll_ctl(c->s->ep, EPOLL_CTL_DEL, c->fd, NULL);
    SSL_free(c->ssl); /* no close_notify: the peer sees the socket close */
    c->ssl = NULL;
    close(c->fd);
    c->fd = -1;
    for (stream_t *st = c->streams, *next; st; st = next) {
        next = st->next;
        if (st->running) st->id = -1; /* freed when its handler returns */
        else stream_free(st);
    }
    c->streams = NULL;
    nghttp2_session_del(c->h2);
    c->h2 = NULL;
    c->s->nconns--;
}

/* Frees closed connections no handler still needs. */
static void conns_reap(grpc_server_t *s) {
    for (conn_t **p = &s->conns; *p;) {
        conn_t *c = *p;
        if (c->closed && !c->running) {
            *p = c->next;
            free(c);
        } else {
            p = &c->next;
        }
    }
}

/* Sends what nghttp2 has queued, and polls for writability while the socket is full. */
static void conn_flush(conn_t *c) {
    if (c->closed) return;
    if (nghttp2_session_send(c->h2)) return conn_close(c);
    if (!nghttp2_session_want_read(c->h2) && !nghttp2_session_want_write(c->h2)) return conn_close(c);
    int out = nghttp2_session_want_write(c->h2) && !c->write_blocked;
    struct epoll_event ev = {.events = EPOLLIN | (out ? EPOLLOUT : 0), .data.ptr = c};
    epoll_ctl(c->s->ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static void conn_read(conn_t *c) {
    uint8_t buf[65536];
    for (;;) {
        ssize_t n = io_recv(c, buf, sizeof buf);
        if (n == -2) break;
        if (n <= 0 || nghttp2_session_mem_recv(c->h2, buf, (size_t)n) < 0) return conn_close(c);
        c->last_ns = time_mono_ns();
    }
    conn_flush(c);
}

static void conn_accept(grpc_server_t *s) {
    for (;;) {
        int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;
        conn_t *c = s->nconns < s->cfg.max_conns ? calloc(1, sizeof *c) : NULL;
        nghttp2_session_callbacks *cb = NULL;
        if (!c || nghttp2_session_callbacks_new(&cb)) {
            free(c);
            close(fd);
            continue;
        }
        nghttp2_session_callbacks_set_send_callback(cb, on_send);
        nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
        nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
        nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame);
        nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
        c->s = s;
        c->fd = fd;
        c->last_ns = time_mono_ns();
        if (s->tls && (!(c->ssl = SSL_new(s->tls)) || !SSL_set_fd(c->ssl, fd))) {
            SSL_free(c->ssl);
            nghttp2_session_callbacks_del(cb);
            free(c);
            close(fd);
            continue;
        }
        if (c->ssl) SSL_set_accept_state(c->ssl);
        int rc = nghttp2_session_server_new(&c->h2, cb, c);
        nghttp2_session_callbacks_del(cb);
        /* Windows of 1 MiB per call and 16 MiB per connection: a profile of a few MB
         * arrives in a round trip or two, not one per 64 KiB. */
        nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, GRPC_MAX_STREAMS},
                                             {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, GRPC_MAX_HEADER_BYTES * 2},
                                             {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20}};
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (rc || nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, settings, 3) ||
            nghttp2_session_set_local_window_size(c->h2, NGHTTP2_FLAG_NONE, 0, 16 << 20) ||
            epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &ev)) {
            if (c->h2) nghttp2_session_del(c->h2);
            SSL_free(c->ssl);
            free(c);
            close(fd);
            continue;
        }
        c->next = s->conns;
        s->conns = c;
        s->nconns++;
        conn_flush(c);
    }
}

/* Handlers that returned: answers their calls (or frees those whose connection or
 * stream went away meanwhile). */
/* The calls whose handlers returned, taken from the pool's list, no longer running. */
static stream_t *take_done(grpc_server_t *s) {
    pthread_mutex_lock(&s->mu);
    stream_t *done = s->done;
    s->done = NULL;
    pthread_mutex_unlock(&s->mu);
    for (stream_t *st = done; st; st = st->next_done) {
        st->running = 0;
        st->c->running--;
    }
    return done;
}

static void answer_done(grpc_server_t *s) {
    uint64_t n;
    ssize_t r = read(s->wake, &n, sizeof n);
    (void)r;
    for (stream_t *st = take_done(s), *next; st; st = next) {
        next = st->next_done;
        conn_t *c = st->c;
        if (c->closed || st->id < 0) {
            stream_free(st);
            continue;
        }
        answer(st);
        conn_flush(c);
    }
}

/* Connections that sent nothing for idle_timeout_ns, with no handler running, get a
 * GOAWAY and are closed: an idle agent, or one that began a call and went silent, costs
 * its socket and session only until then, as over HTTP. */
static void close_idle(grpc_server_t *s) {
    int64_t now = time_mono_ns();
    for (conn_t *c = s->conns; c && s->cfg.idle_timeout_ns > 0; c = c->next) {
        if (c->closed || c->running || now - c->last_ns < s->cfg.idle_timeout_ns) continue;
        nghttp2_session_terminate_session(c->h2, NGHTTP2_NO_ERROR);
        nghttp2_session_send(c->h2); /* the GOAWAY, if the socket takes it; then closed anyway */
        conn_close(c);
    }
}

static void *loop_main(void *arg) {
    grpc_server_t *s = arg;
    struct epoll_event evs[64];
    int64_t scanned = time_mono_ns();
    while (!atomic_load(&s->stop)) {
        int n = epoll_wait(s->ep, evs, 64, 1000);
        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;
            if (p == &LISTENER) conn_accept(s);
            else if (p == &WAKER) answer_done(s);
            else conn_read(p); /* with TLS a write may wait for input and a read for room */
        }
        if (time_mono_ns() - scanned >= 1000000000LL) {
            close_idle(s);
            scanned = time_mono_ns();
        }
        conns_reap(s);
    }
    return NULL;
}

/* ---- the messages of a streamed call, for its handler */

int grpc_reader_open(grpc_reader_t *r, const http_req_t *req, size_t max, hr_err_t *err) {
    const char *ct = http_header(req, "content-type"), *enc = http_header(req, "grpc-encoding");
    r->fd = -1;
    if (!req->spool_path[0] || !ct || strcmp(ct, GRPC_CONTENT_TYPE))
        return hr_fail(err, HR_EINVAL, "%s is a client-streaming gRPC call: send it to --grpc-listen", req->url);
    if ((r->fd = open(req->spool_path, O_RDONLY | O_CLOEXEC)) < 0)
        return hr_fail(err, HR_EIO, "cannot read the call's messages: %s", strerror(errno));
    r->gzip = enc && !strcasecmp(enc, "gzip");
    r->max = max;
    return 0;
}

/* Reads exactly n bytes: n, fewer at the end of the file, or -1. */
static ssize_t read_exact(int fd, uint8_t *p, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t k = read(fd, p + got, n - got);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return -1;
        if (k == 0) break;
        got += (size_t)k;
    }
    return (ssize_t)got;
}

int grpc_reader_next(grpc_reader_t *r, buf_t *msg, hr_err_t *err) {
    uint8_t prefix[GRPC_PREFIX];
    ssize_t k = read_exact(r->fd, prefix, sizeof prefix);
    if (k == 0) return 0;
    if (k != GRPC_PREFIX) return hr_fail(err, HR_EINVAL, "the call's last message is cut short");
    size_t n = (size_t)prefix[1] << 24 | (size_t)prefix[2] << 16 | (size_t)prefix[3] << 8 | prefix[4];
    if (n > r->max) return hr_fail(err, HR_ETOOBIG, "a message of %zu bytes exceeds --max-body-bytes %zu", n, r->max);
    if (prefix[0] && !r->gzip)
        return hr_fail(err, HR_EINVAL, "compressed message: only grpc-encoding gzip is accepted");
    msg->len = 0;
    if (buf_reserve(msg, n + 1)) return hr_fail(err, HR_ENOMEM, "out of memory");
    if (read_exact(r->fd, msg->data, n) != (ssize_t)n)
        return hr_fail(err, HR_EINVAL, "the call's last message is cut short");
    msg->len = n;
    if (!prefix[0]) return 1;
    uint8_t *out = NULL;
    size_t m = 0;
    if (gz_inflate(msg->data, n, r->max, &out, &m, err)) return -1;
    buf_free(msg);
    *msg = (buf_t){.data = out, .len = m, .cap = m};
    return 1;
}

void grpc_reader_close(grpc_reader_t *r) {
    if (r->fd >= 0) close(r->fd);
    r->fd = -1;
}

/* ---- start and stop */

/* gRPC runs on HTTP/2 only: a client that does not offer h2 is refused in the handshake. */
static int select_h2(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
                     unsigned inlen, void *arg) {
    (void)ssl, (void)arg;
    static const unsigned char H2[] = "\x02h2";
    unsigned char *sel = NULL;
    if (SSL_select_next_proto(&sel, outlen, H2, sizeof H2 - 1, in, inlen) != OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    *out = sel;
    return SSL_TLSEXT_ERR_OK;
}

/* The server's TLS context from PEM files (TLS 1.2 and later, ALPN h2); NULL with err. */
static SSL_CTX *tls_context(const char *cert, const char *key, hr_err_t *err) {
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx || !SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) ||
        SSL_CTX_use_certificate_chain_file(ctx, cert) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
        char why[256] = "";
        ERR_error_string_n(ERR_get_error(), why, sizeof why);
        ERR_clear_error();
        SSL_CTX_free(ctx);
        hr_fail(err, HR_EINVAL, "gRPC TLS: cannot use --tls-cert %s with --tls-key %s: %s", cert, key, why);
        return NULL;
    }
    SSL_CTX_set_alpn_select_cb(ctx, select_h2, NULL);
    return ctx;
}

static int listen_on(const char *addr, hr_err_t *err) {
    struct sockaddr_storage sa;
    if (http_listen_addr(addr, &sa, err)) return -1;
    int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), on = 1, off = 0;
    socklen_t len = sa.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (fd >= 0 && sa.ss_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, len) || listen(fd, 1024)) {
        hr_fail(err, HR_EIO, "cannot listen on %s for gRPC: %s", addr, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

grpc_server_t *grpc_start(const grpc_config_t *cfg, const http_router_t *router, hr_err_t *err) {
    grpc_server_t *s = calloc(1, sizeof *s);
    if (!s) {
        hr_fail(err, HR_ENOMEM, "out of memory");
        return NULL;
    }
    s->cfg = *cfg;
    snprintf(s->listen, sizeof s->listen, "%s", cfg->listen);
    s->cfg.listen = s->listen;
    s->router = *router;
    s->lfd = s->ep = s->wake = -1;
    pthread_mutex_init(&s->mu, NULL);
    struct epoll_event lev = {.events = EPOLLIN, .data.ptr = &LISTENER}, wev = {.events = EPOLLIN, .data.ptr = &WAKER};
    if ((cfg->tls_cert && !(s->tls = tls_context(cfg->tls_cert, cfg->tls_key, err))) ||
        (s->lfd = listen_on(cfg->listen, err)) < 0 || !(s->workers = workers_start(GRPC_MAX_HANDLERS, err)) ||
        (s->ep = epoll_create1(EPOLL_CLOEXEC)) < 0 || (s->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0 ||
        epoll_ctl(s->ep, EPOLL_CTL_ADD, s->lfd, &lev) || epoll_ctl(s->ep, EPOLL_CTL_ADD, s->wake, &wev) ||
        pthread_create(&s->loop, NULL, loop_main, s)) {
        if (!err->code) hr_fail(err, HR_EIO, "cannot start the gRPC server: %s", strerror(errno));
        workers_stop(s->workers);
        if (s->lfd >= 0) close(s->lfd);
        if (s->ep >= 0) close(s->ep);
        if (s->wake >= 0) close(s->wake);
        SSL_CTX_free(s->tls);
        pthread_mutex_destroy(&s->mu);
        free(s);
        return NULL;
    }
    return s;
}

void grpc_stop(grpc_server_t *s) {
    if (!s) return;
    atomic_store(&s->stop, 1);
    pthread_join(s->loop, NULL);
    close(s->lfd);
    workers_close(s->workers); /* every handler has returned after this */
    for (stream_t *st = take_done(s), *next; st; st = next) {
        next = st->next_done;
        if (st->c->closed || st->id < 0) stream_free(st);
    }
    for (conn_t *c = s->conns; c; c = c->next) conn_close(c);
    for (conn_t *c = s->conns, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    workers_stop(s->workers);
    close(s->ep);
    close(s->wake);
    SSL_CTX_free(s->tls);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
