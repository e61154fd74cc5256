/* deadline.h - read deadlines per connection: a request must finish arriving in time.
 *
 * libmicrohttpd's connection timeout is an idle timeout: every byte restarts it, so a
 * client that sends one byte every few seconds (slowloris) holds its connection
 * forever, and enough of them exhaust the connection limit. Like Go's
 * http.Server ReadTimeout, a request here must have fully arrived (request line,
 * headers and body) within --request-read-timeout of its start, however the bytes
 * trickle in. A watchdog thread checks the watched connections a few times a second
 * and shutdown(2)s the socket of any whose current request is late; the event loop
 * then sees the socket closed and cleans up as for any vanished client. The same
 * watchdog shuts a connection whose client closed mid-request (see client_gone in
 * deadline.c: libmicrohttpd's epoll loop can miss that close).
 *
 * A connection goes READING (from accept, or from the request line of a kept-alive
 * connection's next request) -> HANDLING (request complete: no deadline while the
 * handler works) -> IDLE (response sent; MHD's idle timeout closes a silent
 * connection, and a next request line trickled in to dodge it must still be complete
 * within the idle timeout plus the read timeout) -> READING ...
 *
 * Lifetime of the fd: MHD calls the connection-closed notification before it
 * close(2)s the socket (checked on 0.9.75), and deadline_close removes the entry under
 * the same mutex the watchdog holds while calling shutdown, so the watchdog never
 * touches an fd number that has been closed and perhaps reused. */
#ifndef HEARTH_DEADLINE_H
#define HEARTH_DEADLINE_H

#include <stdatomic.h>
#include <stdint.h>

#include "common/err.h"

typedef struct deadline_watch deadline_watch_t;
typedef struct deadline_conn deadline_conn_t;

/* Starts the watchdog. read_timeout_ns > 0 bounds each request's arrival;
 * idle_timeout_ns + read_timeout_ns bounds the wait for a kept-alive connection's
 * next request line. Each connection shut for being late bumps *expired
 * (borrowed; may be NULL). NULL with err on failure. */
deadline_watch_t *deadline_start(int64_t read_timeout_ns, int64_t idle_timeout_ns, atomic_ullong *expired,
                                 hr_err_t *err);
/* Stops the watchdog and frees it; call after the HTTP daemon has stopped (every
 * connection has been closed). NULL is a no-op. */
void deadline_stop(deadline_watch_t *w);

/* A connection was accepted on fd: its first request must arrive in time. NULL when
 * out of memory (the connection is then served unwatched; the idle timeout still applies). */
deadline_conn_t *deadline_open(deadline_watch_t *w, int fd);
/* The request line of a kept-alive connection's next request arrived: its clock starts.
 * A no-op while already READING (the first request's clock started at accept). */
void deadline_request_begins(deadline_watch_t *w, deadline_conn_t *c);
/* The whole request has arrived, or was refused: no deadline while it is handled. */
void deadline_request_arrived(deadline_watch_t *w, deadline_conn_t *c);
/* The response was sent: the connection waits for its next request. */
void deadline_request_done(deadline_watch_t *w, deadline_conn_t *c);
/* The connection is closing (before its fd is closed): forgets and frees c. */
void deadline_close(deadline_watch_t *w, deadline_conn_t *c);

#endif
