/* grpc.h - the gRPC front end: unary gRPC calls over HTTP/2 (libnghttp2), --grpc-listen.
 *
 * eBPF profilers and the OpenTelemetry Collector send profiles by gRPC only, so Hearth
 * takes them straight in: HTTP/2 over TLS (ALPN h2, OpenSSL) with --tls-cert/--tls-key,
 * else without TLS ("h2c" with prior knowledge, as gRPC's insecure channels speak it). A call's path names the route it stands for (SERVICES in
 * grpc.c): the message becomes the body of that route's HTTP request and goes through
 * the same router as HTTP (http.h): admission with the call's metadata as headers
 * (authorization, x-scope-orgid) before a message byte is buffered, the same limits,
 * the handler on a worker pool. Its answer goes back as one gRPC message with
 * grpc-status 0, or, for an error, as a trailers-only response whose grpc-status is
 * the HTTP status's gRPC code (400 INVALID_ARGUMENT, 401 UNAUTHENTICATED, 403
 * PERMISSION_DENIED, 413 and 429 RESOURCE_EXHAUSTED, 503 UNAVAILABLE, ...) and whose
 * grpc-message is the error's text.
 *
 * Calls carry exactly one message (unary), of at most max_message bytes as sent; a
 * message compressed with grpc-encoding gzip is inflated, within max_inflated, on the
 * worker pool before its route's handler reads it. One thread runs every
 * connection (epoll); handlers run on the pool; a connection that sends nothing for
 * idle_timeout_ns while no handler of its runs gets a GOAWAY and is closed. A call
 * whose grpc-timeout passes before a thread runs it answers DEADLINE_EXCEEDED unrun:
 * its client retries, and the upload must not be stored twice.
 *
 * Client-streaming calls (Parca's debug file Upload) are served too: their route keeps
 * bodies on disk (http.h spool_dir), so the messages are written to a file as they
 * arrive, framed as on the wire, and the handler reads them with grpc_reader_*. Not
 * served: server-streaming and bidirectional calls. */
#ifndef HEARTH_GRPC_H
#define HEARTH_GRPC_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "server/http.h"

typedef struct {
    const char *listen;             /* "host:port", as --listen */
    const char *tls_cert, *tls_key; /* PEM files: serve TLS with ALPN h2; NULL for h2c */
    unsigned max_conns;             /* connections past it are closed at once */
    size_t max_message;             /* largest request message (--max-body-bytes): RESOURCE_EXHAUSTED past it */
    size_t max_inflight;            /* bytes of all messages being received at once; 0 = no limit */
    size_t max_inflated;            /* largest gzip-compressed message inflated (--max-decompressed-bytes) */
    int64_t idle_timeout_ns;        /* a connection silent this long is closed (--idle-timeout); 0 = never */
} grpc_config_t;

typedef struct grpc_server grpc_server_t;

/* Listens on cfg->listen and serves calls through router (whose app must outlive the
 * server). NULL with err when the address is bad or taken. */
grpc_server_t *grpc_start(const grpc_config_t *cfg, const http_router_t *router, hr_err_t *err);
/* Stops accepting, lets running handlers finish, closes every connection, frees s.
 * NULL is a no-op. */
void grpc_stop(grpc_server_t *s);

/* The Content-Type a client-streaming call's route sees: its body is the messages, each
 * with its 5-byte gRPC frame. */
#define GRPC_CONTENT_TYPE "application/grpc"

/* The messages of a client-streaming call, one by one, from its spooled body. */
typedef struct {
    int fd;
    int gzip;   /* grpc-encoding gzip: flagged messages are inflated */
    size_t max; /* largest message, as sent and as inflated */
} grpc_reader_t;

/* Opens req's spooled messages, each at most max bytes. 0, or -1 with err (HR_EINVAL
 * when req is not a streamed gRPC call's). */
int grpc_reader_open(grpc_reader_t *r, const http_req_t *req, size_t max, hr_err_t *err);
/* The next message into msg (replaced): 1, 0 after the last, -1 with err (HR_EINVAL for
 * a truncated frame or a compressed message in an encoding other than gzip, HR_ETOOBIG
 * past max). */
int grpc_reader_next(grpc_reader_t *r, buf_t *msg, hr_err_t *err);
void grpc_reader_close(grpc_reader_t *r);

/* A grpc-timeout value (1-8 digits and a unit: H M S m u n) in ns: 0, or -1 when
 * malformed (the call then has no deadline). */
int grpc_timeout_parse(const char *s, int64_t *ns);

/* The gRPC status code for an HTTP status (2xx: 0, OK). */
int grpc_code_of_http(int status);

#endif
