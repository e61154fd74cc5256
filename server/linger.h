/* linger.h - lingering close, off the event loop.
 *
 * A reply sent before the request's body was read (a refused upload: 401, 413, 429)
 * leaves the client's body arriving at a socket about to be closed, and the kernel
 * answers unread data at close with a reset, which can destroy the reply before a
 * client that reads only after sending (Python's http.client, many scripts) sees it.
 * Like nginx's lingering close and Go's server, the socket is kept open for a moment
 * and whatever arrives is read and discarded: no byte is kept, and the time and the
 * bytes are capped.
 *
 * The HTTP layer runs every connection on a few event-loop threads, which must not
 * block for a second per refused upload, so one thread here drains them all: it takes
 * a duplicate of the connection's descriptor (the HTTP layer closes its own as usual),
 * shuts it for writing, and closes it when the client has sent its end, the bytes cap
 * is reached, or LINGER_MS have passed. At most LINGER_MAX sockets linger at once; past
 * that a socket is closed at once, which only risks the reset described above. */
#ifndef HEARTH_LINGER_H
#define HEARTH_LINGER_H

#include <stdint.h>

#include "common/err.h"

#define LINGER_MS 1000
#define LINGER_MAX 1024

typedef struct linger_pool linger_t; /* not `struct linger`: <sys/socket.h> has one */

/* Starts the draining thread. NULL with err on failure. */
linger_t *linger_start(hr_err_t *err);
/* Drains fd (borrowed: a duplicate is kept, fd itself stays the caller's) for up to
 * LINGER_MS, reading at most max_bytes. */
void linger_add(linger_t *l, int fd, uint64_t max_bytes);
/* Closes every lingering socket, stops the thread and frees l. NULL is a no-op. */
void linger_stop(linger_t *l);

#endif
