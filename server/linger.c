/* linger.c - see linger.h.
 *
 * linger_add queues a descriptor under the mutex and wakes the thread through an
 * eventfd; the thread owns the sockets being drained (an array it polls) and takes the
 * queued ones in at each turn, so the poll set is never shared. */
#include "server/linger.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/timeparse.h"

typedef struct {
    int fd;
    int64_t until_ns; /* CLOCK_MONOTONIC */
    uint64_t left;    /* bytes still to read before giving up */
} lingering_t;

struct linger_pool {
    pthread_mutex_t mu;
    int wake; /* eventfd */
    int stop;
    lingering_t queued[LINGER_MAX];
    size_t nqueued;
    pthread_t thread;
    /* the thread's own */
    lingering_t live[LINGER_MAX];
    size_t nlive;
    struct pollfd pfd[LINGER_MAX + 1]; /* [0] is the eventfd */
};

/* Wakes the thread. A failed write means the counter is saturated: it is awake anyway. */
static void wake(linger_t *l) {
    uint64_t one = 1;
    ssize_t n = write(l->wake, &one, sizeof one);
    (void)n;
}

/* Moves the queued sockets into the live set; returns the stop flag. */
static int take_queued(linger_t *l) {
    pthread_mutex_lock(&l->mu);
    for (size_t i = 0; i < l->nqueued; i++) {
        if (l->nlive < LINGER_MAX) l->live[l->nlive++] = l->queued[i];
        else close(l->queued[i].fd);
    }
    l->nqueued = 0;
    int stop = l->stop;
    pthread_mutex_unlock(&l->mu);
    return stop;
}

/* Reads and drops what has arrived; 1 when the socket is done (end, error, cap). */
static int drain(lingering_t *e) {
    char sink[16384];
    for (;;) {
        ssize_t n = recv(e->fd, sink, sizeof sink, MSG_DONTWAIT);
        if (n <= 0) return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
        if ((uint64_t)n >= e->left) return 1;
        e->left -= (uint64_t)n;
    }
}

/* One poll over the live set: drains what is readable, closes what is done or late. */
static void turn(linger_t *l) {
    struct pollfd *pfd = l->pfd;
    int64_t now = time_mono_ns(), next = now + (int64_t)LINGER_MS * 1000000;
    pfd[0] = (struct pollfd){.fd = l->wake, .events = POLLIN};
    for (size_t i = 0; i < l->nlive; i++) {
        pfd[i + 1] = (struct pollfd){.fd = l->live[i].fd, .events = POLLIN};
        if (l->live[i].until_ns < next) next = l->live[i].until_ns;
    }
    int wait_ms = next > now ? (int)((next - now + 999999) / 1000000) : 0;
    if (poll(pfd, l->nlive + 1, wait_ms) > 0 && (pfd[0].revents & POLLIN)) {
        uint64_t count; /* only a wake-up: the queue is read under the mutex */
        ssize_t n = read(l->wake, &count, sizeof count);
        (void)n;
    }
    now = time_mono_ns();
    size_t kept = 0;
    for (size_t i = 0; i < l->nlive; i++) {
        lingering_t *e = &l->live[i];
        int done = (pfd[i + 1].revents && drain(e)) || now >= e->until_ns;
        if (done) close(e->fd);
        else l->live[kept++] = *e;
    }
    l->nlive = kept;
}

static void *linger_main(void *arg) {
    linger_t *l = arg;
    pthread_setname_np(pthread_self(), "hearth-linger");
    while (!take_queued(l)) turn(l);
    for (size_t i = 0; i < l->nlive; i++) close(l->live[i].fd);
    l->nlive = 0;
    return NULL;
}

linger_t *linger_start(hr_err_t *err) {
    linger_t *l = calloc(1, sizeof *l);
    if (!l) {
        hr_fail(err, HR_ENOMEM, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&l->mu, NULL);
    if ((l->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 || pthread_create(&l->thread, NULL, linger_main, l)) {
        if (l->wake >= 0) close(l->wake);
        pthread_mutex_destroy(&l->mu);
        free(l);
        hr_fail(err, HR_EINTERNAL, "cannot start the lingering-close thread");
        return NULL;
    }
    return l;
}

void linger_add(linger_t *l, int fd, uint64_t max_bytes) {
    int dup = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (dup < 0) return; /* out of descriptors: the caller's close resets, as without lingering */
    /* The reply is out by now; the FIN tells the client no more is coming. */
    shutdown(dup, SHUT_WR);
    pthread_mutex_lock(&l->mu);
    int queued = l->nqueued < LINGER_MAX;
    if (queued) {
        l->queued[l->nqueued++] =
            (lingering_t){.fd = dup, .until_ns = time_mono_ns() + (int64_t)LINGER_MS * 1000000, .left = max_bytes};
    }
    pthread_mutex_unlock(&l->mu);
    if (!queued) {
        close(dup);
        return;
    }
    wake(l);
}

void linger_stop(linger_t *l) {
    if (!l) return;
    pthread_mutex_lock(&l->mu);
    l->stop = 1;
    pthread_mutex_unlock(&l->mu);
    wake(l);
    pthread_join(l->thread, NULL);
    for (size_t i = 0; i < l->nqueued; i++) close(l->queued[i].fd);
    close(l->wake);
    pthread_mutex_destroy(&l->mu);
    free(l);
}
