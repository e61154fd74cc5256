/* workers.c - see workers.h.
 *
 * One mutex guards the queue and the counts; idle threads wait on `work`, and
 * workers_close waits on `idle` for the last job to return. Threads never exit before
 * the pool stops: a burst that needed 100 threads leaves 100 parked threads (their
 * stacks' touched pages, a few KiB each), which is cheaper than creating threads per
 * burst and keeps workers_stop a plain join. */
#include "server/workers.h"

#include <pthread.h>
#include <stdlib.h>

#include "common/log.h"

struct workers {
    pthread_mutex_t mu;
    pthread_cond_t work; /* a job was queued, or the pool is stopping */
    pthread_cond_t idle; /* a job returned: workers_close may be done */
    workers_job_t *head, *tail;
    unsigned max, threads, busy, queued;
    int closed, stopping;
    pthread_t *tids;
};

static void *worker_main(void *arg) {
    workers_t *w = arg;
    pthread_setname_np(pthread_self(), "hearth-handler"); /* else MHD's name, inherited */
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->head && !w->stopping) pthread_cond_wait(&w->work, &w->mu);
        if (!w->head) break; /* stopping, nothing left */
        workers_job_t *job = w->head;
        if (!(w->head = job->next)) w->tail = NULL;
        w->queued--;
        w->busy++;
        pthread_mutex_unlock(&w->mu);
        job->run(job); /* may free the job: not touched after */
        pthread_mutex_lock(&w->mu);
        w->busy--;
        if (!w->busy && !w->head) pthread_cond_broadcast(&w->idle);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

workers_t *workers_start(unsigned max_threads, hr_err_t *err) {
    workers_t *w = calloc(1, sizeof *w);
    if (w) w->tids = calloc(max_threads ? max_threads : 1, sizeof *w->tids);
    if (!w || !w->tids) {
        free(w);
        hr_fail(err, HR_ENOMEM, "out of memory");
        return NULL;
    }
    w->max = max_threads ? max_threads : 1;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->work, NULL);
    pthread_cond_init(&w->idle, NULL);
    return w;
}

/* Starts one more thread when every started one is busy or already claimed by a
 * queued job; called with w->mu held. A failed start is fine while one thread runs. */
static void grow(workers_t *w) {
    if (w->threads >= w->max || w->busy + w->queued <= w->threads) return;
    if (pthread_create(&w->tids[w->threads], NULL, worker_main, w)) {
        log_warn("http.workers", "threads=%u detail=\"cannot start another handler thread\"", w->threads);
        return;
    }
    w->threads++;
}

int workers_submit(workers_t *w, workers_job_t *job) {
    pthread_mutex_lock(&w->mu);
    if (w->closed) {
        pthread_mutex_unlock(&w->mu);
        return -1;
    }
    job->next = NULL;
    if (w->tail) w->tail->next = job;
    else w->head = job;
    w->tail = job;
    w->queued++;
    grow(w);
    int ok = w->threads > 0;
    if (!ok) { /* not even one thread: take the job back */
        w->head = w->tail = NULL;
        w->queued = 0;
    }
    pthread_cond_signal(&w->work);
    pthread_mutex_unlock(&w->mu);
    return ok ? 0 : -1;
}

void workers_close(workers_t *w) {
    pthread_mutex_lock(&w->mu);
    w->closed = 1;
    while (w->busy || w->head) pthread_cond_wait(&w->idle, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

void workers_stop(workers_t *w) {
    if (!w) return;
    workers_close(w);
    pthread_mutex_lock(&w->mu);
    w->stopping = 1;
    pthread_cond_broadcast(&w->work);
    pthread_mutex_unlock(&w->mu);
    for (unsigned i = 0; i < w->threads; i++) pthread_join(w->tids[i], NULL);
    pthread_cond_destroy(&w->idle);
    pthread_cond_destroy(&w->work);
    pthread_mutex_destroy(&w->mu);
    free(w->tids);
    free(w);
}

workers_stats_t workers_stats(workers_t *w) {
    pthread_mutex_lock(&w->mu);
    workers_stats_t s = {w->threads, w->busy, w->queued};
    pthread_mutex_unlock(&w->mu);
    return s;
}
