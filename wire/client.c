/* client.c - see client.h. */
#include "wire/client.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    buf_t *body;
    size_t max;               /* 0 = unbounded */
    const atomic_int *cancel; /* NULL = never */
    int over;                 /* the body passed max */
} sink_t;

static size_t on_data(char *p, size_t size, size_t n, void *ctx) {
    sink_t *s = ctx;
    if (s->max && s->body->len + size * n > s->max) {
        s->over = 1;
        return 0; /* curl stops with a write error */
    }
    buf_append(s->body, p, size * n);
    return s->body->oom ? 0 : size * n;
}

static int on_progress(void *ctx, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un) {
    (void)dt, (void)dn, (void)ut, (void)un;
    const sink_t *s = ctx;
    return s->cancel && atomic_load(s->cancel);
}

/* Copies the server's {"error": "..."} message, or the raw body, into out->error. */
static void server_error(client_resp_t *out) {
    json_t *doc = json_loadb((const char *)out->body.data, out->body.len, 0, NULL);
    const char *msg = json_string_value(json_object_get(doc, "error"));
    if (msg) snprintf(out->error, sizeof out->error, "HTTP %ld: %s", out->status, msg);
    else
        snprintf(out->error, sizeof out->error, "HTTP %ld: %.*s", out->status,
                 (int)(out->body.len > 300 ? 300 : out->body.len), out->body.data ? (const char *)out->body.data : "");
    json_decref(doc);
}

#define CONNECT_TIMEOUT_S 5L

static int perform(const char *method, const char *url, const char *const *headers, const void *body, size_t n,
                   const char *ctype, long timeout_s, size_t max_body, const atomic_int *cancel, client_resp_t *out) {
    memset(out, 0, sizeof *out);
    buf_init(&out->body);
    CURL *c = curl_easy_init();
    if (!c) {
        snprintf(out->error, sizeof out->error, "cannot initialise libcurl");
        return -1;
    }
    struct curl_slist *hdr = NULL;
    char ct[256];
    if (ctype) {
        snprintf(ct, sizeof ct, "Content-Type: %s", ctype);
        hdr = curl_slist_append(hdr, ct);
    }
    for (size_t i = 0; headers && headers[i]; i++) hdr = curl_slist_append(hdr, headers[i]);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)n);
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
    sink_t sink = {.body = &out->body, .max = max_body, .cancel = cancel};
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
    if (cancel) {
        curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(c, CURLOPT_XFERINFODATA, &sink);
        curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    }
    curl_easy_setopt(c, CURLOPT_USERAGENT, "hearth-cli");
    curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout_s);
    /* A host that does not answer at all (down, no RST) fails in seconds, not at the timeout. */
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, timeout_s < CONNECT_TIMEOUT_S ? timeout_s : CONNECT_TIMEOUT_S);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L); /* thread-safe timeouts */
    char errbuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    CURLcode rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(c);
    if (sink.over) {
        snprintf(out->error, sizeof out->error, "%s: the answer exceeds the limit of %zu bytes", url, max_body);
        return -1;
    }
    if (rc == CURLE_ABORTED_BY_CALLBACK) {
        snprintf(out->error, sizeof out->error, "stopped while fetching %s", url);
        return -1;
    }
    if (rc != CURLE_OK) {
        snprintf(out->error, sizeof out->error, "cannot reach %s: %s", url,
                 errbuf[0] ? errbuf : curl_easy_strerror(rc));
        return -1;
    }
    if (out->status < 200 || out->status > 299) {
        server_error(out);
        return -1;
    }
    return 0;
}

void client_global_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

int client_http(const char *method, const char *url, const void *body, size_t n, const char *ctype, long timeout_s,
                client_resp_t *out) {
    return perform(method, url, NULL, body, n, ctype, timeout_s, 0, NULL, out);
}

int client_http_headers(const char *method, const char *url, const char *const *headers, const void *body, size_t n,
                        const char *content_type, long timeout_s, client_resp_t *out) {
    return perform(method, url, headers, body, n, content_type, timeout_s, 0, NULL, out);
}

int client_get_bounded(const char *url, long timeout_s, size_t max_body, const atomic_int *cancel, client_resp_t *out) {
    return perform("GET", url, NULL, NULL, 0, NULL, timeout_s, max_body, cancel, out);
}

char *client_url(const char *server, const char *path, const char *const *kv) {
    buf_t b;
    buf_init(&b);
    size_t sl = strlen(server);
    while (sl && server[sl - 1] == '/') sl--;
    buf_append(&b, server, sl);
    buf_append(&b, path, strlen(path));
    char sep = '?';
    for (size_t i = 0; kv[i]; i += 2) {
        if (!kv[i + 1]) continue;
        char *v = curl_easy_escape(NULL, kv[i + 1], 0);
        buf_printf(&b, "%c%s=%s", sep, kv[i], v ? v : "");
        curl_free(v);
        sep = '&';
    }
    buf_putc(&b, 0);
    return (char *)buf_steal(&b, NULL);
}
