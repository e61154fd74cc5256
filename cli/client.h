/* client.h - the HTTP client the CLI subcommands share (libcurl underneath).
 *
 * `hearth push` and `hearth query` talk to a running server through the same
 * public API scripts use; nothing here reaches into the store directly. */
#ifndef HEARTH_CLIENT_H
#define HEARTH_CLIENT_H

#include <stdatomic.h>
#include <stddef.h>

#include "common/buf.h"

#define CLI_DEFAULT_SERVER "http://127.0.0.1:4040"

typedef struct {
    long status;     /* HTTP status, 0 when the request never got an answer */
    buf_t body;
    char error[512]; /* transport error, or the server's {"error": ...} message */
} cli_resp_t;

/* Performs one request, giving up after timeout_s seconds. Returns 0 when a 2xx answer arrived, -1 otherwise (with
 * out->error saying why). The caller frees out->body. */
int cli_http(const char *method, const char *url, const void *body, size_t n, const char *content_type,
             long timeout_s, cli_resp_t *out);

/* A GET for a long-running poller (the scraper): as cli_http, and also gives up
 * when *cancel becomes nonzero (libcurl looks about once a second while it waits,
 * so a stop never waits for the timeout) or when the body passes max_body bytes. */
int cli_get_bounded(const char *url, long timeout_s, size_t max_body, const atomic_int *cancel, cli_resp_t *out);

/* Builds SERVER + PATH + "?k=v&..." from NULL-terminated key/value pairs (NULL values
 * are skipped), URL-encoding the values. Caller frees. */
char *cli_url(const char *server, const char *path, const char *const *kv);

/* Prints, for a request that got no answer, what to check next. */
void cli_hint(const cli_resp_t *r);

/* The server from --server, else HEARTH_SERVER, else the default. */
const char *cli_server(const char *flag);

#endif
