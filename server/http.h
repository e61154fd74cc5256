/* http.h - the HTTP layer: libmicrohttpd underneath, one handler on top.
 *
 * Each connection gets its own thread (MHD thread-per-connection), so a handler
 * may block on fsync or a long merge without stalling other clients. The body is
 * collected up to max_body bytes; past that the rest is read and dropped and the
 * handler sees body_too_big. multipart/form-data bodies are split into fields by
 * MHD's post processor as they arrive. */
#ifndef HEARTH_HTTP_H
#define HEARTH_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/err.h"

#define HTTP_MAX_FIELDS 8

typedef struct {
    char name[64];
    buf_t data;
} http_field_t;

typedef struct http_req {
    void *conn; /* struct MHD_Connection * */
    const char *method, *url;
    buf_t body;         /* the raw body; empty for multipart (see fields) */
    size_t received;    /* body bytes received, for limits and metrics */
    int body_too_big;
    int multipart;
    void *pp; /* struct MHD_PostProcessor * */
    http_field_t fields[HTTP_MAX_FIELDS];
    size_t nfields;
    size_t field_bytes;
    int64_t start_ns;
    char tenant[129]; /* resolved by the router (X-Scope-OrgID or "anonymous") */
} http_req_t;

typedef struct {
    int status;
    const char *content_type;
    const char *content_encoding; /* NULL for none */
    const char *content_disposition;
    const char *tenant; /* for the request log; set by handlers that resolve one */
    buf_t body;
} http_resp_t;

typedef void (*http_handler_fn)(void *app, http_req_t *req, http_resp_t *resp);

typedef struct http_server http_server_t;

/* Starts serving on "host:port"; with tls_cert and tls_key (PEM file paths, NULL for
 * plain HTTP) it serves HTTPS through libmicrohttpd's GnuTLS support. A connection
 * that sends nothing for idle_timeout_s seconds is closed (slow clients cannot hold
 * threads). */
http_server_t *http_start(const char *listen, unsigned max_conns, unsigned idle_timeout_s, size_t max_body,
                          const char *tls_cert, const char *tls_key, http_handler_fn fn, void *app, hr_err_t *err);
void http_stop(http_server_t *s);

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

#endif
