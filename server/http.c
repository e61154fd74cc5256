/* http.c - see http.h. */
#include "server/http.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/jsonw.h"
#include "common/log.h"
#include "common/timeparse.h"

struct http_server {
    struct MHD_Daemon *d;
    http_handler_fn fn;
    void *app;
    size_t max_body;
};

const char *http_arg(const http_req_t *r, const char *name) {
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

const char *http_header(const http_req_t *r, const char *name) {
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
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

static void req_free(http_req_t *r) {
    if (r->pp) MHD_destroy_post_processor(r->pp);
    buf_free(&r->body);
    for (size_t i = 0; i < r->nfields; i++) buf_free(&r->fields[i].data);
    free(r);
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
    MHD_add_response_header(mr, "Cache-Control", "no-store");
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)resp->status, mr);
    MHD_destroy_response(mr);
    return rc;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **state) {
    (void)version;
    struct http_server *s = cls;
    http_req_t *r = *state;
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r) return MHD_NO;
        r->conn = c;
        r->url = url;
        r->method = method;
        r->start_ns = time_now_ns();
        const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
        if (ct && !strncasecmp(ct, "multipart/form-data", 19)) {
            r->multipart = 1;
            r->pp = MHD_create_post_processor(c, 64 * 1024, post_field, r);
        }
        *state = r;
        return MHD_YES;
    }
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (r->body_too_big || r->received + n > s->max_body) {
            r->body_too_big = 1; /* keep reading so the client gets the 413 */
            return MHD_YES;
        }
        r->received += n;
        if (r->pp) {
            if (MHD_post_process(r->pp, upload, n) != MHD_YES) r->multipart = -1;
        } else {
            buf_append(&r->body, upload, n);
        }
        return MHD_YES;
    }
    http_resp_t resp = {.status = 500};
    buf_init(&resp.body);
    if (r->body.oom) http_error(&resp, 500, "out of memory reading the body");
    else s->fn(s->app, r, &resp);
    size_t resp_len = resp.body.len;
    enum MHD_Result rc = send_response(c, &resp);
    buf_free(&resp.body);
    /* The path only: query strings can carry names users consider private. */
    log_info("http.request", "tenant=%s method=%s path=%s status=%d req_bytes=%zu resp_bytes=%zu duration_ms=%.2f",
             resp.tenant ? resp.tenant : "-", method, url, resp.status, r->received, resp_len,
             (double)(time_now_ns() - r->start_ns) / 1e6);
    return rc;
}

static void on_done(void *cls, struct MHD_Connection *c, void **state, enum MHD_RequestTerminationCode tc) {
    (void)cls, (void)c, (void)tc;
    if (*state) req_free(*state);
    *state = NULL;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    msg[strcspn(msg, "\n")] = 0;
    log_warn("http.mhd", "detail=\"%s\"", msg);
}

static int parse_listen(const char *listen, struct sockaddr_in *sa, hr_err_t *err) {
    char host[256];
    const char *colon = strrchr(listen, ':');
    if (!colon || (size_t)(colon - listen) >= sizeof host)
        return hr_fail(err, HR_EINVAL, "--listen `%s`: want HOST:PORT", listen);
    memcpy(host, listen, (size_t)(colon - listen));
    host[colon - listen] = 0;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 0 || port > 65535) return hr_fail(err, HR_EINVAL, "--listen `%s`: bad port", listen);
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    if (!host[0] || !strcmp(host, "0.0.0.0")) sa->sin_addr.s_addr = htonl(INADDR_ANY);
    else if (!strcmp(host, "localhost")) sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    else if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
        return hr_fail(err, HR_EINVAL, "--listen `%s`: host must be an IPv4 address", listen);
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

http_server_t *http_start(const char *listen, unsigned max_conns, unsigned idle_timeout_s, size_t max_body,
                          const char *tls_cert, const char *tls_key, http_handler_fn fn, void *app, hr_err_t *err) {
    struct sockaddr_in sa;
    if (parse_listen(listen, &sa, err)) return NULL;
    if ((tls_cert != NULL) != (tls_key != NULL)) {
        hr_fail(err, HR_EINVAL, "TLS needs both --tls-cert and --tls-key");
        return NULL;
    }
    char *cert = NULL, *key = NULL;
    if (tls_cert && (!(cert = read_pem(tls_cert, err)) || !(key = read_pem(tls_key, err)))) {
        free(cert);
        return NULL;
    }
    http_server_t *s = calloc(1, sizeof *s);
    if (!s) {
        hr_fail(err, HR_ENOMEM, "out of memory");
        return NULL;
    }
    s->fn = fn;
    s->app = app;
    s->max_body = max_body;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG;
    if (cert) flags |= MHD_USE_TLS;
    /* Certificate options only with TLS: MHD warns about them otherwise. */
    struct MHD_OptionItem tls[] = {{MHD_OPTION_HTTPS_MEM_CERT, 0, cert},
                                   {MHD_OPTION_HTTPS_MEM_KEY, 0, key},
                                   {MHD_OPTION_END, 0, NULL}};
    struct MHD_OptionItem none[] = {{MHD_OPTION_END, 0, NULL}};
    s->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s,
                            MHD_OPTION_ARRAY, cert ? tls : none, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
                            MHD_OPTION_CONNECTION_LIMIT, max_conns, MHD_OPTION_CONNECTION_TIMEOUT, idle_timeout_s,
                            MHD_OPTION_NOTIFY_COMPLETED, on_done, s, MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u,
                            MHD_OPTION_END);
    if (key) memset(key, 0, strlen(key)); /* MHD has parsed the key by now */
    free(cert);
    free(key);
    if (!s->d) {
        free(s);
        hr_fail(err, HR_EIO, "cannot listen on %s (address in use, or the TLS certificate/key is invalid)", listen);
        return NULL;
    }
    return s;
}

void http_stop(http_server_t *s) {
    if (!s) return;
    MHD_stop_daemon(s->d);
    free(s);
}
