/* deadline.c - see deadline.h.
 *
 * The watched connections are a doubly linked list under one mutex: opening and
 * closing are O(1), and the watchdog's scan is O(connections) a few times a second:
 * a pass over the list, plus one poll(2) for each connection whose request is still
 * arriving. */
#include "server/deadline.h"

#include <poll.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "common/log.h"
#include "common/timeparse.h"

typedef enum { CONN_READING, CONN_HANDLING, CONN_IDLE } conn_state_t;

struct deadline_conn {
    struct deadline_conn *prev, *next;
    int fd;
    conn_state_t state;
    int64_t deadline_ns; /* CLOCK_MONOTONIC; meaningful while READING or IDLE */
    int shut;            /* shutdown already called: do it once */
    int gone_ticks;      /* consecutive ticks the client was seen gone mid-request */
};

struct deadline_watch {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* signalled to stop */
    pthread_t thread;
    int stop;
    int64_t read_ns, idle_ns, tick_ns;
    struct deadline_conn *head;
    atomic_ullong *expired;
};

/* Whether a connection's client has closed its side with nothing left unread. While a
 * request is arriving that means it never will: libmicrohttpd 0.9.75's epoll loop misses
 * a close that arrives together with the last bytes it reads (the edge is spent on the
 * data), and would hold the connection, its spool file and its body budget until the
 * idle timeout. */
static int client_gone(int fd) {
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    int unread = 0;
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) && !ioctl(fd, FIONREAD, &unread) &&
           unread == 0;
}

/* Shuts a connection: MHD's event loop then sees it closed. late: for a read deadline
 * (counted and logged), else for a client gone mid-request. */
static void shut(deadline_watch_t *w, struct deadline_conn *c, int late) {
    c->shut = 1;
    shutdown(c->fd, SHUT_RDWR);
    if (!late) {
        log_debug("http.client_gone", "%s", "state=reading");
        return;
    }
    if (w->expired) atomic_fetch_add(w->expired, 1);
    log_info("http.read_timeout", "state=%s", c->state == CONN_IDLE ? "idle" : "reading");
}

/* Shuts every late connection, and every one whose client left mid-request (seen on two
 * ticks in a row, so a request whose last bytes MHD is still parsing is not cut); called
 * with w->mu held, which keeps each fd open. */
static void expire_late(deadline_watch_t *w, int64_t now) {
    for (struct deadline_conn *c = w->head; c; c = c->next) {
        if (c->shut || c->state == CONN_HANDLING) continue;
        if (now >= c->deadline_ns) shut(w, c, 1);
        else if (c->state == CONN_READING && !client_gone(c->fd)) c->gone_ticks = 0;
        else if (c->state == CONN_READING && ++c->gone_ticks >= 2) shut(w, c, 0);
    }
}

static void *watch_main(void *arg) {
    deadline_watch_t *w = arg;
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        struct timespec ts;
        int64_t until = time_mono_ns() + w->tick_ns;
        ts.tv_sec = until / 1000000000;
        ts.tv_nsec = until % 1000000000;
        pthread_cond_timedwait(&w->cv, &w->mu, &ts);
        if (!w->stop) expire_late(w, time_mono_ns());
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

deadline_watch_t *deadline_start(int64_t read_timeout_ns, int64_t idle_timeout_ns, atomic_ullong *expired,
                                 hr_err_t *err) {
    deadline_watch_t *w = calloc(1, sizeof *w);
    if (!w) {
        hr_fail(err, HR_ENOMEM, "out of memory");
        return NULL;
    }
    w->read_ns = read_timeout_ns;
    /* Past MHD's own idle timeout, which closes silent connections first: what is left
     * for the watchdog is a next request line trickled in to keep the connection. */
    w->idle_ns = idle_timeout_ns + read_timeout_ns;
    /* A tenth of the timeout, within [50 ms, 1 s]: late by at most that much. */
    w->tick_ns = read_timeout_ns / 10;
    if (w->tick_ns < 50000000) w->tick_ns = 50000000;
    if (w->tick_ns > 1000000000) w->tick_ns = 1000000000;
    w->expired = expired;
    pthread_mutex_init(&w->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&w->thread, NULL, watch_main, w)) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        free(w);
        hr_fail(err, HR_EINTERNAL, "cannot start the read-deadline thread");
        return NULL;
    }
    return w;
}

void deadline_stop(deadline_watch_t *w) {
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    /* MHD closed every connection before we were called; nothing should be left. */
    while (w->head) {
        struct deadline_conn *c = w->head;
        w->head = c->next;
        free(c);
    }
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

deadline_conn_t *deadline_open(deadline_watch_t *w, int fd) {
    struct deadline_conn *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->fd = fd;
    c->state = CONN_READING;
    c->deadline_ns = time_mono_ns() + w->read_ns;
    pthread_mutex_lock(&w->mu);
    c->next = w->head;
    if (w->head) w->head->prev = c;
    w->head = c;
    pthread_mutex_unlock(&w->mu);
    return c;
}

/* Moves c to state; a READING or IDLE state gets its deadline `after` from now. */
static void set_state(deadline_watch_t *w, deadline_conn_t *c, conn_state_t state, int64_t after) {
    if (!c) return;
    int64_t now = time_mono_ns();
    pthread_mutex_lock(&w->mu);
    c->state = state;
    c->deadline_ns = now + after;
    pthread_mutex_unlock(&w->mu);
}

void deadline_request_begins(deadline_watch_t *w, deadline_conn_t *c) {
    if (!c) return;
    int64_t now = time_mono_ns();
    pthread_mutex_lock(&w->mu);
    if (c->state == CONN_IDLE) {
        c->state = CONN_READING;
        c->deadline_ns = now + w->read_ns;
    }
    pthread_mutex_unlock(&w->mu);
}

void deadline_request_arrived(deadline_watch_t *w, deadline_conn_t *c) { set_state(w, c, CONN_HANDLING, 0); }

void deadline_request_done(deadline_watch_t *w, deadline_conn_t *c) {
    if (!c) return; /* no watch (--request-read-timeout 0): w is NULL too */
    set_state(w, c, CONN_IDLE, w->idle_ns);
}

void deadline_close(deadline_watch_t *w, deadline_conn_t *c) {
    if (!c) return;
    pthread_mutex_lock(&w->mu);
    if (c->prev) c->prev->next = c->next;
    else w->head = c->next;
    if (c->next) c->next->prev = c->prev;
    pthread_mutex_unlock(&w->mu);
    free(c);
}
