/* workers.h - the threads that run request handlers, apart from the threads that move bytes.
 *
 * The HTTP layer reads and writes every connection on a few event-loop threads, so an
 * idle keep-alive connection costs a little memory and no thread. A handler may block
 * for a long time (a WAL fsync, a merge over a month), so it must not run on an event
 * loop: it runs here. The pool starts empty, adds a thread when a job arrives and every
 * thread is busy, up to max_threads, and keeps its threads until it stops; past the cap
 * jobs wait in FIFO order. The router's concurrency limits (--max-concurrent-ingests,
 * --max-concurrent-queries) bound how many handlers are in flight, so the cap is a
 * backstop, not the working limit.
 *
 * Jobs are intrusive: the caller embeds a workers_job_t in its own request and the
 * pool never allocates per job. */
#ifndef HEARTH_WORKERS_H
#define HEARTH_WORKERS_H

#include "common/err.h"

typedef struct workers_job {
    struct workers_job *next; /* the pool's */
    void (*run)(struct workers_job *job);
} workers_job_t;

typedef struct workers workers_t;

typedef struct {
    unsigned threads; /* started so far */
    unsigned busy;    /* running a job now */
    unsigned queued;  /* waiting for a thread */
} workers_stats_t;

/* A pool of at most max_threads (>= 1); no thread starts until the first job. NULL
 * with err when out of memory. */
workers_t *workers_start(unsigned max_threads, hr_err_t *err);
/* Queues job; job->run(job) is called once on a pool thread. Returns -1 (and job is
 * not run) once workers_close has been called, or when no thread runs and none can
 * be started. */
int workers_submit(workers_t *w, workers_job_t *job);
/* Refuses further jobs and waits until every queued and running job has returned. */
void workers_close(workers_t *w);
/* Closes the pool if still open, joins its threads and frees it. NULL is a no-op. */
void workers_stop(workers_t *w);
workers_stats_t workers_stats(workers_t *w);

#endif
