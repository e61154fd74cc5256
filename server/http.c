/* http.c - see http.h.
 *
 * MHD calls, per request: the URI log callback (request line parsed; we allocate the
 * request there, since MHD documents it as called once per request) -> on_request
 * with the headers (admission) -> on_request per body chunk -> on_request once more
 * (body complete: handle) -> NOTIFY_COMPLETED (release, always, also after a refusal
 * or a vanished client). Per connection: NOTIFY_CONNECTION STARTED/CLOSED, which
 * register the socket with the read-deadline watchdog. */
#include "server/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/jsonw.h"
#include "common/log.h"
#include "common/timeparse.h"
#include "server/deadline.h"
#include "server/linger.h"
#include "server/workers.h"
#include "common/fsutil.h"

/* MHD's per-connection memory holds the request line, headers and one record per
 * query parameter, and libmicrohttpd 0.9.75 zeroes all of it after every request, so
 * an idle keep-alive connection keeps all of it resident: 16 KiB makes 10,000 idle
 * agents cost about 170 MiB (128 KiB made it 1.3 GiB). It holds HTTP_MAX_QUERY_ARGS
 * parameters in HTTP_MAX_QUERY_BYTES with a few KiB of headers; larger headers get
 * MHD's own 431. */
#define HTTP_CONN_MEMORY (16 * 1024)

/* The worker pool's cap (see workers.h): above what the router's limits let run at
 * once by default (64 ingests + 16 queries) plus the unlimited routes (health,
 * metrics, UI files). Past it requests wait in turn for a thread. */
#define HTTP_MAX_HANDLERS 256
/* A chunked body past its limit is read and dropped for this much more, so a client that
 * sends a finite body gets its 413 at the end; one that goes on (an endless stream) gets
 * the 413 written at once and the connection closed, instead of nothing until the read
 * timeout. */
#define HTTP_DRAIN_MAX (16u << 20)

struct http_server {
    struct MHD_Daemon *d;
    http_router_t router;
    http_config_t cfg;
    deadline_watch_t *deadlines; /* NULL without a read timeout */
    workers_t *workers;          /* runs handlers (see dispatch) */
    linger_t *linger;            /* drains refused uploads' sockets */
    atomic_size_t inflight;      /* body bytes reserved by requests in flight */
};

/* What the HTTP layer keeps per request besides what handlers see. */
typedef struct {
    http_req_t pub;
    deadline_conn_t *watch; /* the connection's deadline entry; may be NULL */
    int admitted;           /* admit accepted: release is owed */
    int headers_seen;       /* on_request has run admission */
    int has_length;         /* Content-Length given: the budget was reserved up front */
    int too_many_args;      /* the query string was cut off (see cut_query) */
    size_t dropped;         /* body bytes dropped past max_body (see HTTP_DRAIN_MAX) */
    int nul_in_url;         /* %00 in the request line: MHD's decoding would end the path or a
                             * parameter there, so `/x/ab%00cd` would act on `ab` */
    int over_budget;        /* a chunked body ran past max_inflight_body: dropped */
    int refused;            /* answered on the headers, body unread */
    uint64_t body_declared; /* POST/PUT Content-Length, or max_body when chunked: what linger may drain */
    size_t reserved;        /* bytes of the in-flight budget held */
    /* Handled on the worker pool (see dispatch): the job, its server, its answer, and
     * whether the answer is ready for the event loop to send. */
    workers_job_t job;
    struct http_server *server;
    http_resp_t resp;
    int handled;
} req_ctx_t;

const char *http_arg(const http_req_t *r, const char *name) {
    return r->conn ? MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name) : NULL;
}

const char *http_header(const http_req_t *r, const char *name) {
    if (r->conn) return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
    for (size_t i = 0; i + 1 < r->nheaders * 2; i += 2)
        if (!strcasecmp(r->headers[i], name)) return r->headers[i + 1];
    return NULL;
}

const http_field_t *http_field(const http_req_t *r, const char *name) {
    for (size_t i = 0; i < r->nfields; i++)
        if (!strcmp(r->fields[i].name, name)) return &r->fields[i];
    return NULL;
}

void http_reply(http_resp_t *resp, int status, const char *ctype, buf_t *body) {
    buf_free(&resp->body);
    resp->status = status;
    resp->content_type = ctype;
    resp->body = *body;
    buf_init(body);
}

void http_reply_text(http_resp_t *resp, int status, const char *ctype, const char *text) {
    buf_t b;
    buf_init(&b);
    buf_append(&b, text, strlen(text));
    http_reply(resp, status, ctype, &b);
}

void http_error(http_resp_t *resp, int status, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    buf_t b;
    buf_init(&b);
    buf_printf(&b, "{\"error\":");
    jsonw_str(&b, msg);
    buf_printf(&b, "}");
    resp->content_encoding = NULL;
    resp->content_disposition = NULL;
    http_set_reason(resp, msg);
    http_reply(resp, status, "application/json", &b);
}

void http_error_from(http_resp_t *resp, const hr_err_t *err) {
    http_error(resp, hr_http_status(err->code), "%s", err->msg[0] ? err->msg : "internal error");
}

static enum MHD_Result post_field(void *cls, enum MHD_ValueKind kind, const char *key, const char *filename,
                                  const char *ctype, const char *enc, const char *data, uint64_t off, size_t size) {
    (void)kind, (void)filename, (void)ctype, (void)enc, (void)off;
    http_req_t *r = cls;
    if (!key) return MHD_YES; /* a part without a name (MHD passes NULL): nothing can ask for it */
    http_field_t *f = (http_field_t *)http_field(r, key);
    if (!f) {
        if (r->nfields == HTTP_MAX_FIELDS) return MHD_YES; /* ignore extra fields */
        f = &r->fields[r->nfields++];
        snprintf(f->name, sizeof f->name, "%s", key);
        buf_init(&f->data);
    }
    if (size) buf_append(&f->data, data, size);
    return MHD_YES;
}

static void req_free(req_ctx_t *x) {
    http_req_t *r = &x->pub;
    if (r->spool_fd >= 0) close(r->spool_fd);
    if (r->spool_path[0]) unlink(r->spool_path); /* not kept by the handler, or never handled */
    if (r->pp) MHD_destroy_post_processor(r->pp);
    buf_free(&r->body);
    for (size_t i = 0; i < r->nfields; i++) buf_free(&r->fields[i].data);
    buf_free(&x->resp.body);
    free(x);
}

/* Frees the body collected so far (a request over the budget keeps none of it). */
static void drop_body(http_req_t *r) {
    buf_free(&r->body);
    for (size_t i = 0; i < r->nfields; i++) buf_free(&r->fields[i].data);
}

/* Reserves n bytes of the in-flight body budget; -1 (and counted) when it is spent. */
static int budget_take(struct http_server *s, size_t n) {
    if (!s->cfg.max_inflight_body) return 0;
    size_t before = atomic_fetch_add(&s->inflight, n);
    if (before + n <= s->cfg.max_inflight_body) return 0;
    atomic_fetch_sub(&s->inflight, n);
    if (s->cfg.budget_refusals) atomic_fetch_add(s->cfg.budget_refusals, 1);
    return -1;
}

static void budget_give(struct http_server *s, size_t n) {
    if (s->cfg.max_inflight_body && n) atomic_fetch_sub(&s->inflight, n);
}

static enum MHD_Result send_response(struct MHD_Connection *c, http_resp_t *resp) {
    size_t len;
    uint8_t *data = buf_steal(&resp->body, &len);
    struct MHD_Response *mr = MHD_create_response_from_buffer_with_free_callback(len, data, free);
    if (!mr) {
        free(data);
        return MHD_NO;
    }
    MHD_add_response_header(mr, "Content-Type", resp->content_type ? resp->content_type : "application/json");
    if (resp->content_encoding) MHD_add_response_header(mr, "Content-Encoding", resp->content_encoding);
    if (resp->content_disposition) MHD_add_response_header(mr, "Content-Disposition", resp->content_disposition);
    if (resp->allow) MHD_add_response_header(mr, "Allow", resp->allow);
    if (resp->symbolization[0]) MHD_add_response_header(mr, "X-Hearth-Symbolization", resp->symbolization);
    MHD_add_response_header(mr, "Cache-Control", "no-store");
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)resp->status, mr);
    MHD_destroy_response(mr);
    return rc;
}

void http_set_reason(http_resp_t *resp, const char *msg) {
    /* Double quotes would end the logfmt value early. */
    size_t i = 0;
    for (; msg[i] && i + 1 < sizeof resp->reason; i++) resp->reason[i] = msg[i] == '"' ? '\'' : msg[i];
    resp->reason[i] = 0;
}

static void client_addr(struct MHD_Connection *c, char *out, size_t n) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    snprintf(out, n, "-");
    if (sa && sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out, (socklen_t)n);
    else if (sa && sa->sa_family == AF_INET6) {
        const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a6)) inet_ntop(AF_INET, a6->s6_addr + 12, out, (socklen_t)n); /* via [::] */
        else inet_ntop(AF_INET6, a6, out, (socklen_t)n);
    }
}

/* Queues resp and logs the request: health probes at debug (they come every few
 * seconds), failures with their reason and the client's address. */
static enum MHD_Result reply(struct MHD_Connection *c, http_req_t *r, http_resp_t *resp) {
    size_t resp_len = resp->body.len;
    enum MHD_Result rc = send_response(c, resp);
    buf_free(&resp->body);
    char addr[64];
    client_addr(c, addr, sizeof addr);
    int probe = !strcmp(r->url, "/healthz") || !strcmp(r->url, "/ready");
    log_level_t level = probe && resp->status < 500 ? LOG_DEBUG : resp->status >= 500 ? LOG_WARN : LOG_INFO;
    /* The path only: query strings can carry names users consider private. */
    log_event(level, "http.request",
              "tenant=%s client=%s method=%s path=%s status=%d req_bytes=%zu resp_bytes=%zu duration_ms=%.2f%s%s%s",
              resp->tenant ? resp->tenant : "-", addr, r->method, r->url, resp->status, r->received, resp_len,
              (double)(time_now_ns() - r->start_ns) / 1e6, resp->status >= 400 ? " err=\"" : "",
              resp->status >= 400 ? resp->reason : "", resp->status >= 400 ? "\"" : "");
    return rc;
}

/* Answers before the body is read: MHD then neither reads a POST or PUT body nor keeps
 * the connection, so a refused upload costs no memory (linger drains it unread for a
 * moment at most). */
static enum MHD_Result refuse(struct http_server *s, struct MHD_Connection *c, req_ctx_t *x, http_resp_t *resp) {
    x->refused = 1;
    deadline_request_arrived(s->deadlines, x->watch);
    return reply(c, &x->pub, resp);
}

/* The declared body length, if any; -1 for a malformed one. */
static int content_length(struct MHD_Connection *c, uint64_t *len) {
    const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
    if (!v) return 0;
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (errno || end == v || *end) return -1;
    *len = n;
    return 1;
}

/* The first call, headers only: admit or refuse before any body byte is read. */
static enum MHD_Result on_headers(struct http_server *s, struct MHD_Connection *c, req_ctx_t *x, const char *url,
                                  const char *method) {
    http_req_t *r = &x->pub;
    r->url = url;
    r->method = method;
    x->headers_seen = 1;
    uint64_t len = 0;
    int has = content_length(c, &len);
    const char *te = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Transfer-Encoding");
    /* Only POST and PUT: for other methods MHD reads and discards the body itself. */
    int upload = !strcmp(method, "POST") || !strcmp(method, "PUT");
    r->declared = !upload ? 0 : has > 0 ? len : te && strcasestr(te, "chunked") ? UINT64_MAX : 0;
    x->body_declared = r->declared == UINT64_MAX ? s->cfg.max_body : r->declared;
    http_resp_t resp = {.status = 500};
    buf_init(&resp.body);
    if (x->too_many_args)
        return http_error(&resp, 414, "more than %d query parameters or %d bytes of them", HTTP_MAX_QUERY_ARGS,
                          HTTP_MAX_QUERY_BYTES),
               refuse(s, c, x, &resp);
    if (x->nul_in_url) return http_error(&resp, 400, "the URL holds a NUL byte (%%00)"), refuse(s, c, x, &resp);
    if (s->router.admit(s->router.app, r, &resp)) return refuse(s, c, x, &resp);
    x->admitted = 1;
    size_t max_body = r->max_body ? r->max_body : s->cfg.max_body;
    if (has > 0 && len > max_body)
        return http_error(&resp, 413, "request body of %llu bytes exceeds %s %zu", (unsigned long long)len,
                          r->max_body ? "--max-debuginfo-bytes" : "--max-body-bytes", max_body),
               refuse(s, c, x, &resp);
    if (r->spool_dir) {
        snprintf(r->spool_path, sizeof r->spool_path, "%s/.upload-XXXXXX", r->spool_dir);
        if ((r->spool_fd = mkostemp(r->spool_path, O_CLOEXEC)) < 0) {
            r->spool_path[0] = 0;
            return http_error(&resp, 507, "cannot store the upload: %s", strerror(errno)), refuse(s, c, x, &resp);
        }
    }
    if (has > 0 && !r->spool_dir && budget_take(s, (size_t)len))
        return http_error(&resp, 503, "too many request bodies in flight (--max-inflight-body-bytes %zu); retry later",
                          s->cfg.max_inflight_body),
               refuse(s, c, x, &resp);
    x->has_length = has > 0;
    x->reserved = has > 0 && !r->spool_dir ? (size_t)len : 0;
    const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
    if (ct && !strncasecmp(ct, "multipart/form-data", 19)) {
        r->multipart = 1;
        r->pp = MHD_create_post_processor(c, 64 * 1024, post_field, r);
    }
    return MHD_YES;
}

/* A body chunk: kept, or dropped past max_body or the in-flight budget. Returns 1 when
 * the connection is to be closed now (a chunked body far past its limit: see
 * HTTP_DRAIN_MAX). */
static int on_body(struct http_server *s, req_ctx_t *x, const char *data, size_t n) {
    http_req_t *r = &x->pub;
    if (r->body_too_big) return (x->dropped += n) > HTTP_DRAIN_MAX;
    if (x->over_budget) return 0;
    if (r->received + n > (r->max_body ? r->max_body : s->cfg.max_body)) {
        r->body_too_big = 1; /* chunked (no Content-Length): keep reading so the client gets the 413 */
        return 0;
    }
    if (r->spool_fd >= 0) { /* to disk: no memory budget to take */
        hr_err_t e = {0};
        if (!r->spool_error && fs_write_all(r->spool_fd, data, n, r->spool_path, &e)) r->spool_error = 1;
        r->received += n;
        return 0;
    }
    if (!x->has_length) {
        if (budget_take(s, n)) {
            x->over_budget = 1; /* MHD cannot answer mid-body: drop the rest, answer 503 at the end */
            drop_body(r);
            budget_give(s, x->reserved);
            x->reserved = 0;
            return 0;
        }
        x->reserved += n;
    }
    r->received += n;
    if (r->pp) {
        if (MHD_post_process(r->pp, data, n) != MHD_YES) r->multipart = -1;
    } else {
        buf_append(&r->body, data, n);
    }
    return 0;
}

static void linger(struct http_server *s, struct MHD_Connection *c, uint64_t max_bytes);

/* Answers 413 on the socket itself, mid-body (MHD answers only once a body has ended),
 * before the connection is closed: plain HTTP only (under TLS the bytes are MHD's). */
static void answer_too_big(struct http_server *s, struct MHD_Connection *c, const http_req_t *r) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci || s->cfg.tls_cert) return;
    char body[200], msg[400];
    int nb = snprintf(body, sizeof body, "{\"error\":\"request body exceeds %s %zu\"}",
                      r->max_body ? "--max-debuginfo-bytes" : "--max-body-bytes",
                      r->max_body ? r->max_body : s->cfg.max_body);
    int n = snprintf(msg, sizeof msg,
                     "HTTP/1.1 413 Payload Too Large\r\nContent-Type: application/json\r\nConnection: close\r\n"
                     "Content-Length: %d\r\n\r\n%s",
                     nb, body);
    if (send(ci->connect_fd, msg, (size_t)n, MSG_NOSIGNAL) == n) shutdown(ci->connect_fd, SHUT_WR);
}

/* Runs on a worker thread: the handler may block (fsync, a long merge) without holding
 * up the event loop. Resuming hands the connection back to MHD, which calls on_request
 * again to send x->resp (MHD's mutex orders the writes here before that read). */
static void run_handler(workers_job_t *job) {
    req_ctx_t *x = (req_ctx_t *)((char *)job - offsetof(req_ctx_t, job));
    x->server->router.handle(x->server->router.app, &x->pub, &x->resp);
    x->handled = 1;
    MHD_resume_connection(x->pub.conn);
}

/* The request is complete: its connection is suspended (MHD stops polling it) and the
 * handler queued for the pool. A pool that is shutting down answers 503 at once. */
static enum MHD_Result dispatch(struct http_server *s, struct MHD_Connection *c, req_ctx_t *x) {
    http_req_t *r = &x->pub;
    if (r->spool_fd >= 0) close(r->spool_fd), r->spool_fd = -1; /* complete: the handler's to keep */
    x->server = s;
    x->job.run = run_handler;
    MHD_suspend_connection(c);
    if (workers_submit(s->workers, &x->job)) {
        http_error(&x->resp, 503, "the server is shutting down");
        x->handled = 1;
        MHD_resume_connection(c);
    }
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **state) {
    (void)version;
    struct http_server *s = cls;
    req_ctx_t *x = *state;
    if (!x) return MHD_NO; /* on_uri could not allocate it */
    if (x->handled) return reply(c, &x->pub, &x->resp);
    if (!x->headers_seen) return on_headers(s, c, x, url, method);
    if (*upload_size) {
        int close_now = on_body(s, x, upload, *upload_size);
        *upload_size = 0;
        if (close_now) answer_too_big(s, c, &x->pub), linger(s, c, HTTP_DRAIN_MAX);
        return close_now ? MHD_NO : MHD_YES;
    }
    deadline_request_arrived(s->deadlines, x->watch);
    if (x->over_budget)
        http_error(&x->resp, 503, "too many request bodies in flight (--max-inflight-body-bytes %zu); retry later",
                   s->cfg.max_inflight_body);
    else if (x->pub.body.oom) http_error(&x->resp, 500, "out of memory reading the body");
    else return dispatch(s, c, x);
    return reply(c, &x->pub, &x->resp);
}

/* A refused upload's socket is drained for a moment before it closes (linger.h). */
static void linger(struct http_server *s, struct MHD_Connection *c, uint64_t max_bytes) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci) linger_add(s->linger, ci->connect_fd, max_bytes);
}

/* Called once per request however it ended (answered, refused, client gone): gives
 * back the router's slot and the body budget. */
static void on_done(void *cls, struct MHD_Connection *c, void **state, enum MHD_RequestTerminationCode tc) {
    struct http_server *s = cls;
    req_ctx_t *x = *state;
    *state = NULL;
    if (!x) return;
    if (x->admitted) s->router.release(s->router.app, &x->pub);
    budget_give(s, x->reserved);
    /* Whatever the termination code: MHD may end an early-answered request as an error
     * while the client is still sending, and a close then resets the answer away. A
     * client that has gone makes recv return 0 at once. A body somewhat past the limit
     * (413) is read away whole, so its client sees the answer rather than a reset. */
    (void)tc;
    uint64_t cap = s->cfg.max_body > HTTP_DRAIN_MAX ? s->cfg.max_body : HTTP_DRAIN_MAX;
    if (x->refused && x->body_declared) linger(s, c, x->body_declared < cap ? x->body_declared : cap);
    deadline_request_done(s->deadlines, x->watch);
    req_free(x);
}

/* A query string with more than HTTP_MAX_QUERY_ARGS parameters, or longer than
 * HTTP_MAX_QUERY_BYTES: MHD would allocate a record for each parameter from the
 * connection's fixed memory (HTTP_CONN_MEMORY), run out, and leave the client without a
 * reply. MHD calls the URI callback with the request line's own buffer before it splits
 * the arguments (libmicrohttpd 0.9.75 parse_initial_message_line, which documents the
 * order: "log callback before we modify URI *or* args"), so ending the query string
 * right after its '?' leaves MHD nothing to split, and on_headers answers 414.
 * tests/integration/test_http_attacks.py checks the reply on a real socket. */
static int cut_query(const char *uri) {
    char *q = strchr(uri, '?');
    if (!q) return 0;
    size_t args = 1;
    for (const char *p = q; *p; p++) args += *p == '&';
    if (args <= HTTP_MAX_QUERY_ARGS && strlen(q) <= HTTP_MAX_QUERY_BYTES) return 0;
    q[1] = 0;
    return 1;
}

static deadline_conn_t *conn_watch(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/* The request line arrived: the request begins (MHD: once per request). */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c) {
    struct http_server *s = cls;
    req_ctx_t *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->pub.conn = c;
    x->pub.spool_fd = -1;
    x->pub.start_ns = time_now_ns();
    x->resp.status = 500;
    buf_init(&x->resp.body);
    x->watch = conn_watch(c);
    deadline_request_begins(s->deadlines, x->watch);
    x->nul_in_url = strstr(uri, "%00") != NULL;
    x->too_many_args = cut_query(uri);
    return x;
}

/* Registers each connection's socket with the read-deadline watchdog. MHD calls
 * CLOSED before it closes the fd (see deadline.h). */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    struct http_server *s = cls;
    if (!s->deadlines) return;
    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        deadline_close(s->deadlines, *socket_context);
        *socket_context = NULL;
        return;
    }
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    *socket_context = ci ? deadline_open(s->deadlines, ci->connect_fd) : NULL;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    msg[strcspn(msg, "\n")] = 0;
    log_warn("http.mhd", "detail=\"%s\"", msg);
}

/* A listen address: HOST:PORT with an IPv4 host (empty: all), `localhost`, or an IPv6
 * host in brackets ([::1]:4040; [::]:4040 takes IPv4 connections too). */
typedef struct {
    struct sockaddr_storage sa;
    unsigned mhd_flags; /* MHD_USE_IPv6 or MHD_USE_DUAL_STACK for an IPv6 address */
} listen_addr_t;

static int parse_listen(const char *listen, listen_addr_t *la, hr_err_t *err) {
    char host[256];
    const char *colon = strrchr(listen, ':');
    if (!colon || (size_t)(colon - listen) >= sizeof host)
        return hr_fail(err, HR_EINVAL, "--listen `%s`: want HOST:PORT", listen);
    memcpy(host, listen, (size_t)(colon - listen));
    host[colon - listen] = 0;
    const char *digits = colon + 1;
    long port = 0;
    for (; *digits >= '0' && *digits <= '9' && port <= 65535; digits++) port = port * 10 + (*digits - '0');
    if (*digits || digits == colon + 1 || port > 65535)
        return hr_fail(err, HR_EINVAL, "--listen `%s`: bad port", listen);
    memset(la, 0, sizeof *la);
    size_t hl = strlen(host);
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
        /* getaddrinfo, not inet_pton: it reads a zone too ([fe80::1%eth0]) */
        struct addrinfo hints = {.ai_family = AF_INET6, .ai_flags = AI_NUMERICHOST}, *ai = NULL;
        host[hl - 1] = 0;
        if (getaddrinfo(host + 1, NULL, &hints, &ai) || !ai || ai->ai_addrlen > sizeof la->sa) {
            if (ai) freeaddrinfo(ai);
            return hr_fail(err, HR_EINVAL, "--listen `%s`: bad IPv6 address in brackets", listen);
        }
        memcpy(&la->sa, ai->ai_addr, ai->ai_addrlen);
        freeaddrinfo(ai);
        struct sockaddr_in6 *sa = (struct sockaddr_in6 *)&la->sa;
        sa->sin6_port = htons((uint16_t)port);
        /* [::] (and an IPv4-mapped address) take IPv4 connections as well */
        int dual = IN6_IS_ADDR_UNSPECIFIED(&sa->sin6_addr) || IN6_IS_ADDR_V4MAPPED(&sa->sin6_addr);
        la->mhd_flags = dual ? MHD_USE_DUAL_STACK : MHD_USE_IPv6;
        return 0;
    }
    struct sockaddr_in *sa = (struct sockaddr_in *)&la->sa;
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    if (!host[0] || !strcmp(host, "0.0.0.0")) sa->sin_addr.s_addr = htonl(INADDR_ANY);
    else if (!strcmp(host, "localhost")) sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    else if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
        return hr_fail(err, HR_EINVAL, "--listen `%s`: host must be an IPv4 address, or IPv6 in brackets ([::1]:4040)",
                       listen);
    return 0;
}

int http_listen_addr(const char *listen, struct sockaddr_storage *sa, hr_err_t *err) {
    listen_addr_t la;
    if (parse_listen(listen, &la, err)) return -1;
    *sa = la.sa;
    return 0;
}

/* Reads a PEM file into a NUL-terminated string (MHD takes certificates in memory). */
static char *read_pem(const char *path, hr_err_t *err) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        hr_fail(err, HR_EINVAL, "cannot read %s", path);
        return NULL;
    }
    buf_t b;
    buf_init(&b);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) buf_append(&b, chunk, n);
    fclose(f);
    buf_putc(&b, 0);
    if (b.oom || !strstr((char *)b.data, "-----BEGIN")) {
        buf_free(&b);
        hr_fail(err, HR_EINVAL, "%s is not a PEM file", path);
        return NULL;
    }
    return (char *)buf_steal(&b, NULL);
}

/* Reads the TLS certificate and key, if configured, into NUL-terminated strings. */
static int load_tls(const http_config_t *cfg, char **cert, char **key, hr_err_t *err) {
    *cert = *key = NULL;
    if ((cfg->tls_cert != NULL) != (cfg->tls_key != NULL))
        return hr_fail(err, HR_EINVAL, "TLS needs both --tls-cert and --tls-key");
    if (!cfg->tls_cert) return 0;
    if (!(*cert = read_pem(cfg->tls_cert, err)) || !(*key = read_pem(cfg->tls_key, err))) {
        free(*cert);
        *cert = NULL;
        return -1;
    }
    return 0;
}

static struct MHD_Daemon *start_daemon(struct http_server *s, const listen_addr_t *la, char *cert, char *key) {
    /* epoll event loops: a connection costs its socket and MHD's per-connection memory,
     * not a thread, and epoll has no FD_SETSIZE limit (select() closes every connection
     * past descriptor 1023). Suspend/resume lets a handler run on the worker pool. */
    unsigned flags =
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG | la->mhd_flags;
    if (cert) flags |= MHD_USE_TLS;
    /* Certificate options only with TLS: MHD warns about them otherwise. */
    struct MHD_OptionItem tls[] = {
        {MHD_OPTION_HTTPS_MEM_CERT, 0, cert}, {MHD_OPTION_HTTPS_MEM_KEY, 0, key}, {MHD_OPTION_END, 0, NULL}};
    struct MHD_OptionItem none[] = {{MHD_OPTION_END, 0, NULL}};
    /* No MHD_OPTION_LISTENING_ADDRESS_REUSE: SO_REUSEPORT would let a second server
     * bind the same port and silently take half the connections. MHD still sets
     * SO_REUSEADDR, so a restart does not wait for TIME_WAIT. */
    /* One event loop: it only moves bytes (and TLS), handlers run on the worker pool, so
     * it keeps up with thousands of uploads a second. MHD's thread pool would split
     * --max-connections evenly between loops the kernel does not feed evenly, refusing
     * connections before the limit. */
    return MHD_start_daemon(flags, 0, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s,
                            MHD_OPTION_ARRAY, cert ? tls : none, MHD_OPTION_SOCK_ADDR, (const struct sockaddr *)&la->sa,
                            MHD_OPTION_CONNECTION_LIMIT, s->cfg.max_conns, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                            s->cfg.max_conns_per_ip, MHD_OPTION_CONNECTION_TIMEOUT, s->cfg.idle_timeout_s,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_CONN_MEMORY, MHD_OPTION_URI_LOG_CALLBACK,
                            on_uri, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_NOTIFY_COMPLETED,
                            on_done, s, MHD_OPTION_END);
}

/* Descriptors the rest of the server needs beside its connections: the data dir's
 * files, WAL, SQLite, open debug files, object-store and debuginfod transfers. */
#define FD_RESERVE 256

/* Every connection is a descriptor: raises the soft RLIMIT_NOFILE to the hard one when
 * max_conns would not fit under it (as nginx's worker_rlimit_nofile and Go's runtime
 * do), and warns when even the hard limit is too low, naming the figure that will hold. */
static void fit_fd_limit(unsigned max_conns) {
    struct rlimit rl;
    rlim_t need = (rlim_t)max_conns + FD_RESERVE;
    if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= need) return;
    rlim_t want = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need ? need : rl.rlim_max;
    if (want > rl.rlim_cur) {
        rl.rlim_cur = want;
        if (setrlimit(RLIMIT_NOFILE, &rl)) getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur < need)
        log_warn("http.fd_limit",
                 "max_connections=%u open_files_limit=%llu: connections past about %llu will be refused; raise the "
                 "limit (ulimit -n, LimitNOFILE=) or lower --max-connections",
                 max_conns, (unsigned long long)rl.rlim_cur,
                 (unsigned long long)(rl.rlim_cur > FD_RESERVE ? rl.rlim_cur - FD_RESERVE : 0));
}

/* Frees what http_start made, after the daemon (if any) has stopped: every connection
 * is closed by then, so no deadline entry or lingering socket is still being added. */
static void free_server(struct http_server *s) {
    workers_stop(s->workers);
    linger_stop(s->linger);
    deadline_stop(s->deadlines);
    free(s);
}

http_server_t *http_start(const http_config_t *cfg, const http_router_t *router, hr_err_t *err) {
    listen_addr_t la;
    if (parse_listen(cfg->listen, &la, err)) return NULL;
    fit_fd_limit(cfg->max_conns);
    if (cfg->max_inflight_body && cfg->max_inflight_body < cfg->max_body) {
        hr_fail(err, HR_EINVAL, "--max-inflight-body-bytes (%zu) must be at least --max-body-bytes (%zu)",
                cfg->max_inflight_body, cfg->max_body);
        return NULL;
    }
    char *cert, *key;
    if (load_tls(cfg, &cert, &key, err)) return NULL;
    http_server_t *s = calloc(1, sizeof *s);
    if (!s) {
        free(cert);
        free(key);
        hr_fail(err, HR_ENOMEM, "out of memory");
        return NULL;
    }
    s->router = *router;
    s->cfg = *cfg;
    if (!(s->workers = workers_start(HTTP_MAX_HANDLERS, err)) || !(s->linger = linger_start(err)) ||
        (cfg->read_timeout_ns > 0 &&
         !(s->deadlines = deadline_start(cfg->read_timeout_ns, (int64_t)cfg->idle_timeout_s * 1000000000,
                                         cfg->read_timeouts, err)))) {
        free(cert);
        free(key);
        free_server(s);
        return NULL;
    }
    s->d = start_daemon(s, &la, cert, key);
    if (key) memset(key, 0, strlen(key)); /* MHD has parsed the key by now */
    free(cert);
    free(key);
    if (!s->d) {
        free_server(s);
        hr_fail(err, HR_EIO,
                "cannot listen on %s: the address is in use (another server?), is not this machine's, or the TLS "
                "certificate/key is invalid",
                cfg->listen);
        return NULL;
    }
    return s;
}

/* Stops accepting; lets running handlers finish and refuses new ones (every suspended
 * connection is resumed by then, as MHD requires before it stops); then closes the
 * connections. */
void http_stop(http_server_t *s) {
    if (!s) return;
    MHD_socket listener = MHD_quiesce_daemon(s->d);
    workers_close(s->workers);
    MHD_stop_daemon(s->d);
    if (listener != MHD_INVALID_SOCKET) close(listener);
    s->d = NULL;
    free_server(s);
}

http_stats_t http_stats(http_server_t *s) {
    workers_stats_t w = workers_stats(s->workers);
    return (http_stats_t){.handler_threads = w.threads, .handlers_busy = w.busy, .handlers_queued = w.queued};
}
