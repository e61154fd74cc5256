/* http.h - the HTTP layer: libmicrohttpd underneath, a router's three callbacks on top.
 *
 * Connections live on one epoll event-loop thread, which reads requests and writes
 * answers; an idle keep-alive connection costs memory, not a
 * thread. A complete request's connection is suspended and its handler runs on a
 * worker pool (workers.h), so a handler may block on fsync or a long merge without
 * stalling other clients; admit and the HTTP layer's own refusals run on the event
 * loop and must not block.
 *
 * A request meets the router twice, and is admitted before its body is read:
 *   admit   - called once the request line and headers have arrived, before any body
 *             byte is read: the router finds the route, authenticates, checks the role
 *             and tenant and takes its concurrency slot. A refusal is sent at once and
 *             the body is never read (MHD closes the connection after the reply), so
 *             unauthenticated or excess uploads cost no memory.
 *   handle  - called with the whole body.
 *   release - called exactly once for every request admit accepted, when it ends:
 *             answered, refused later, or abandoned by a client that vanished mid-body.
 * Between the two the HTTP layer refuses by itself: a Content-Length over max_body
 * (413, before reading), and a body that would take the bytes held by all in-flight
 * bodies past max_inflight_body (503; reserved by Content-Length up front, or chunk by
 * chunk for chunked uploads). A chunked body past max_body is read and dropped and
 * body_too_big set, which the router answers with a 413 before any handler runs. multipart/form-data bodies are split into fields by MHD's
 * post processor as they arrive.
 *
 * Slow clients: each request must fully arrive within read_timeout (deadline.h), one
 * address may hold at most max_conns_per_ip connections, and a request with more than
 * HTTP_MAX_QUERY_ARGS query parameters or HTTP_MAX_QUERY_BYTES of them is answered 414 (MHD's per-connection memory
 * would otherwise run out parsing them and drop the connection without a reply). */
#ifndef HEARTH_HTTP_H
#define HEARTH_HTTP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/err.h"

#define HTTP_MAX_FIELDS 8
#define HTTP_MAX_QUERY_ARGS 64    /* Hearth's endpoints read a dozen at most */
#define HTTP_MAX_QUERY_BYTES 8192 /* a URL's query string, as Apache's and nginx's line limits */

typedef struct {
    char name[64];
    buf_t data;
} http_field_t;

typedef struct http_req {
    void *conn; /* struct MHD_Connection *; NULL for a request of another front end (grpc.h) */
    /* Without conn: the request's headers as name, value pairs (names lowercase), which
     * http_header reads; such a request has no query parameters. */
    const char *const *headers;
    size_t nheaders;
    const char *method, *url;
    buf_t body;        /* the raw body; empty for multipart (see fields) */
    size_t received;   /* body bytes received, for limits and metrics */
    uint64_t declared; /* the Content-Length, for admit; UINT64_MAX when none (chunked) */
    int body_too_big;  /* a chunked body ran past max_body (its bytes were dropped) */
    int multipart;
    void *pp; /* struct MHD_PostProcessor * */
    http_field_t fields[HTTP_MAX_FIELDS];
    size_t nfields;
    size_t field_bytes;
    int64_t start_ns;
    char tenant[129];  /* resolved by the router (X-Scope-OrgID or "anonymous") */
    const void *route; /* the router's: set by admit, read by handle and release */
    int slot;          /* the router's: what admit holds, for release */
    size_t max_body;   /* set by admit to allow this request another body limit than
                        * http_config_t.max_body (debug file uploads); 0 = that one */
    /* Set by admit for bodies that belong on disk, not in memory (debug files, up to
     * GiBs): the body is written to a temporary file in this folder as it arrives, and
     * takes nothing from the in-flight memory budget. */
    const char *spool_dir;
    int spool_fd;          /* http.c's: the file being written; -1 when none */
    char spool_path[4096]; /* the whole body's file when the handler runs, else ""; a handler
                             * that keeps it renames it and clears this, else it is removed */
    int spool_error;       /* writing it failed (disk full): the body is incomplete */
} http_req_t;

typedef struct {
    int status;
    const char *content_type;
    const char *content_encoding; /* NULL for none */
    const char *content_disposition;
    const char *allow;      /* the Allow header of a 405; NULL for none */
    char symbolization[64]; /* X-Hearth-Symbolization header ("partial; late=N"); "" for none */
    char reason[200];       /* an error answer's message, for the request log */
    const char *tenant;     /* for the request log; set by handlers that resolve one */
    buf_t body;
} http_resp_t;

/* Called with the headers only. Returns 0 to read the body and call handle, or -1
 * with the refusal in resp (sent at once; release is then not called). */
typedef int (*http_admit_fn)(void *app, http_req_t *req, http_resp_t *resp);
typedef void (*http_handler_fn)(void *app, http_req_t *req, http_resp_t *resp);
/* Gives back what admit took; called once per admitted request, on an event-loop thread. */
typedef void (*http_release_fn)(void *app, http_req_t *req);

typedef struct {
    http_admit_fn admit;
    http_handler_fn handle;
    http_release_fn release;
    void *app;
} http_router_t;

typedef struct {
    const char *listen;             /* "host:port" */
    const char *tls_cert, *tls_key; /* PEM file paths; NULL for plain HTTP */
    unsigned max_conns;
    unsigned max_conns_per_ip;      /* 0 = no per-address limit */
    unsigned idle_timeout_s;        /* close a connection that sends nothing this long */
    int64_t read_timeout_ns;        /* a request must fully arrive this soon; 0 = no limit */
    size_t max_body;                /* largest request body */
    size_t max_inflight_body;       /* bytes of all bodies being received; 0 = no limit */
    atomic_ullong *budget_refusals; /* bumped per request refused for max_inflight_body; may be NULL */
    atomic_ullong *read_timeouts;   /* bumped per connection shut by read_timeout; may be NULL */
} http_config_t;

typedef struct http_server http_server_t;

/* Starts serving cfg->listen; with TLS paths it serves HTTPS through libmicrohttpd's
 * GnuTLS support. cfg is copied; the counters it points to must outlive the server.
 * NULL with err when the address is taken or invalid, or TLS material is bad. */
http_server_t *http_start(const http_config_t *cfg, const http_router_t *router, hr_err_t *err);
/* Stops accepting, waits for in-flight requests and frees s. */
void http_stop(http_server_t *s);

typedef struct {
    unsigned handler_threads; /* the worker pool's threads, started on demand */
    unsigned handlers_busy;   /* running a handler now */
    unsigned handlers_queued; /* complete requests waiting for a thread */
} http_stats_t;
http_stats_t http_stats(http_server_t *s);

/* The address a listen string (HOST:PORT, [IPv6]:PORT, as --listen) names. 0, or -1
 * with err. */
struct sockaddr_storage;
int http_listen_addr(const char *listen, struct sockaddr_storage *sa, hr_err_t *err);

/* Query parameter or header (case-insensitive); NULL when absent. Borrowed. */
const char *http_arg(const http_req_t *r, const char *name);
const char *http_header(const http_req_t *r, const char *name);
/* A multipart field, or NULL. */
const http_field_t *http_field(const http_req_t *r, const char *name);

/* Sets a response; the body buffer is moved into resp. */
void http_reply(http_resp_t *resp, int status, const char *content_type, buf_t *body);
void http_reply_text(http_resp_t *resp, int status, const char *content_type, const char *text);
/* A JSON {"error": "..."} response. */
void http_error(http_resp_t *resp, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void http_error_from(http_resp_t *resp, const hr_err_t *err);
/* Keeps an error answer's message for the request log (http_error does it). */
void http_set_reason(http_resp_t *resp, const char *msg);

#endif
