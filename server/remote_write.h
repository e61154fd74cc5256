/* remote_write.h - sending samples to Prometheus by remote write (protocol 1.0:
 * a snappy-compressed prompb.WriteRequest POSTed to --remote-write-url).
 *
 * Samples are queued and sent by a thread of their own, so whoever produces them
 * (the recording rules' evaluator) never waits for the network. A batch that fails
 * with a network error, a 5xx or a 429 is sent again after a backoff that doubles
 * from 500 ms to 30 s; any other 4xx drops it (the receiver refused its content:
 * sending it again would only repeat that). When the queue is full the oldest
 * samples are dropped, and counted. */
#ifndef HEARTH_REMOTE_WRITE_H
#define HEARTH_REMOTE_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef struct remote_write remote_write_t;

typedef struct {
    uint64_t sent, dropped, failed; /* samples: accepted by the receiver, dropped (queue full or refused) */
    uint64_t retries;               /* batches sent again */
    size_t queued;
} remote_write_stats_t;

/* Starts the sender for url, holding at most max_queue samples. NULL with err. */
remote_write_t *remote_write_start(const char *url, size_t max_queue, hr_err_t *err);
/* Sends what is queued (for at most a few seconds), stops the thread, frees w. */
void remote_write_stop(remote_write_t *w);
/* Queues one sample: labels kv[0..2n) as name, value pairs (copied; sorted here by
 * name, as the protocol wants), value at ts_ms. 0, or -1 on OOM. */
int remote_write_push(remote_write_t *w, const char *const *kv, size_t n, double value, int64_t ts_ms);
void remote_write_stats(remote_write_t *w, remote_write_stats_t *out);

#endif
