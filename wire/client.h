/* client.h - the HTTP client (libcurl underneath): one request, its answer in memory.
 *
 * `hearth push` and `hearth query` talk to a running server through it, over the
 * same public API scripts use; the scraper (server/scrape.c) fetches targets' pprof
 * endpoints with it. libcurl must be initialised once per process before any thread
 * starts (client_global_init). */
#ifndef HEARTH_CLIENT_H
#define HEARTH_CLIENT_H

#include <stdatomic.h>
#include <stddef.h>

#include "common/buf.h"

typedef struct {
    long status; /* HTTP status, 0 when the request never got an answer */
    buf_t body;
    char error[512]; /* transport error, or the server's {"error": ...} message */
} client_resp_t;

/* Initialises libcurl; once, in main, before any thread exists (libcurl's implicit
 * init is not thread-safe). */
void client_global_init(void);

/* Performs one request, giving up after timeout_s seconds. Returns 0 when a 2xx answer arrived, -1 otherwise (with
 * out->error saying why). The caller frees out->body. */
int client_http(const char *method, const char *url, const void *body, size_t n, const char *content_type,
                long timeout_s, client_resp_t *out);

/* client_http with more request headers: headers[] holds "Name: value" strings, NULL
 * last (a node asking a peer forwards the tenant and the caller's credential). */
int client_http_headers(const char *method, const char *url, const char *const *headers, const void *body, size_t n,
                        const char *content_type, long timeout_s, client_resp_t *out);

/* A GET for a long-running poller (the scraper): as client_http, and also gives up
 * when *cancel becomes nonzero (libcurl looks about once a second while it waits,
 * so a stop never waits for the timeout) or when the body passes max_body bytes. */
int client_get_bounded(const char *url, long timeout_s, size_t max_body, const atomic_int *cancel, client_resp_t *out);

/* Builds SERVER + PATH + "?k=v&..." from NULL-terminated key/value pairs (NULL values
 * are skipped), URL-encoding the values. Caller frees. */
char *client_url(const char *server, const char *path, const char *const *kv);

#endif
