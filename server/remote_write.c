/* remote_write.c - see remote_write.h. */
#include "server/remote_write.h"

#include <pthread.h>
#include <snappy-c.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "wire/client.h"
#include "wire/prompb.pb-c.h"

#define BATCH_MAX 500 /* samples per request */
#define BACKOFF_MIN_MS 500
#define BACKOFF_MAX_MS 30000

typedef struct {
    char **kv; /* 2n strings, sorted by name */
    size_t n;
    double value;
    int64_t ts_ms;
} rw_sample_t;

struct remote_write {
    char *url;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    rw_sample_t *ring; /* queue of cap samples from head, len of them */
    size_t cap, head, len;
    int stopping;
    remote_write_stats_t st;
};

static void sample_free(rw_sample_t *s) {
    for (size_t i = 0; s->kv && i < 2 * s->n; i++) free(s->kv[i]);
    free(s->kv);
    memset(s, 0, sizeof *s);
}

static int cmp_pair(const void *a, const void *b) { return strcmp(((char *const *)a)[0], ((char *const *)b)[0]); }

int remote_write_push(remote_write_t *w, const char *const *kv, size_t n, double value, int64_t ts_ms) {
    rw_sample_t s = {calloc(2 * n + 1, sizeof(char *)), n, value, ts_ms};
    int ok = s.kv != NULL;
    for (size_t i = 0; ok && i < 2 * n; i++) ok = (s.kv[i] = strdup(kv[i])) != NULL;
    if (!ok) return sample_free(&s), -1;
    qsort(s.kv, n, 2 * sizeof *s.kv, cmp_pair);
    pthread_mutex_lock(&w->mu);
    if (w->len == w->cap) { /* full: the oldest goes */
        sample_free(&w->ring[w->head]);
        w->head = (w->head + 1) % w->cap, w->len--;
        w->st.dropped++;
    }
    w->ring[(w->head + w->len++) % w->cap] = s;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return 0;
}

/* The snappy-compressed WriteRequest of b[0..n) into out (malloc'd). 0 or -1 (OOM). */
static int encode(const rw_sample_t *b, size_t n, char **out, size_t *outlen) {
    Prometheus__TimeSeries *ts = calloc(n + 1, sizeof *ts), **tsp = calloc(n + 1, sizeof *tsp);
    Prometheus__Sample *sm = calloc(n + 1, sizeof *sm), **smp = calloc(n + 1, sizeof *smp);
    size_t nl = 0;
    for (size_t i = 0; i < n; i++) nl += b[i].n;
    Prometheus__Label *lb = calloc(nl + 1, sizeof *lb), **lbp = calloc(nl + 1, sizeof *lbp);
    int rc = ts && tsp && sm && smp && lb && lbp ? 0 : -1;
    size_t k = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        prometheus__time_series__init(&ts[i]);
        prometheus__sample__init(&sm[i]);
        sm[i].value = b[i].value, sm[i].timestamp = b[i].ts_ms;
        smp[i] = &sm[i], tsp[i] = &ts[i];
        ts[i].samples = &smp[i], ts[i].n_samples = 1;
        ts[i].labels = &lbp[k], ts[i].n_labels = b[i].n;
        for (size_t j = 0; j < b[i].n; j++, k++) {
            prometheus__label__init(&lb[k]);
            lb[k].name = b[i].kv[2 * j], lb[k].value = b[i].kv[2 * j + 1];
            lbp[k] = &lb[k];
        }
    }
    Prometheus__WriteRequest wr;
    prometheus__write_request__init(&wr);
    wr.timeseries = tsp, wr.n_timeseries = n;
    size_t plen = rc == 0 ? prometheus__write_request__get_packed_size(&wr) : 0;
    uint8_t *packed = rc == 0 ? malloc(plen + 1) : NULL;
    *outlen = snappy_max_compressed_length(plen);
    *out = packed ? malloc(*outlen + 1) : NULL;
    if (!*out) rc = -1;
    if (rc == 0) prometheus__write_request__pack(&wr, packed);
    if (rc == 0 && snappy_compress((const char *)packed, plen, *out, outlen) != SNAPPY_OK) rc = -1;
    if (rc) free(*out), *out = NULL;
    free(packed), free(ts), free(tsp), free(sm), free(smp), free(lb), free(lbp);
    return rc;
}

/* Sends b[0..n): 0 done (sent or refused for good), -1 to send again later. */
static int send_batch(remote_write_t *w, const rw_sample_t *b, size_t n) {
    char *body;
    size_t len;
    if (encode(b, n, &body, &len)) return -1;
    static const char *const hdr[] = {"Content-Encoding: snappy", "X-Prometheus-Remote-Write-Version: 0.1.0",
                                      "User-Agent: hearth", NULL};
    client_resp_t r;
    int rc = client_http_headers("POST", w->url, hdr, body, len, "application/x-protobuf", 10, &r);
    free(body);
    pthread_mutex_lock(&w->mu);
    int again = rc != 0 && (r.status == 0 || r.status == 429 || r.status >= 500);
    if (rc == 0) w->st.sent += n;
    else if (!again) w->st.failed += n;
    pthread_mutex_unlock(&w->mu);
    if (rc && !again)
        log_warn("remote_write.refused", "url=%s status=%ld samples=%zu err=\"%s\"", w->url, r.status, n, r.error);
    if (again) log_warn("remote_write.retry", "url=%s status=%ld err=\"%s\"", w->url, r.status, r.error);
    buf_free(&r.body);
    return again ? -1 : 0;
}

/* Waits up to ms or until stopping (mu held). */
static void nap(remote_write_t *w, long ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000, ts.tv_nsec += (ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    if (!w->stopping) pthread_cond_timedwait(&w->cv, &w->mu, &ts);
}

/* Sends b[0..n) until it is taken or refused for good, backing off between tries;
 * a stop gives up on it (counted dropped). mu not held. */
static void deliver(remote_write_t *w, const rw_sample_t *b, size_t n) {
    long backoff = BACKOFF_MIN_MS;
    while (send_batch(w, b, n)) {
        pthread_mutex_lock(&w->mu);
        int stop = w->stopping;
        if (stop) w->st.dropped += n;
        else w->st.retries++, nap(w, backoff);
        pthread_mutex_unlock(&w->mu);
        if (stop) return;
        backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
    }
}

/* Takes batches out of the queue (so a full queue dropping its oldest never touches
 * a batch being sent) and delivers them. */
static void *sender(void *arg) {
    remote_write_t *w = arg;
    rw_sample_t batch[BATCH_MAX];
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->len && !w->stopping) pthread_cond_wait(&w->cv, &w->mu);
        if (!w->len) break;
        size_t n = w->len < BATCH_MAX ? w->len : BATCH_MAX;
        for (size_t i = 0; i < n; i++) batch[i] = w->ring[(w->head + i) % w->cap];
        w->head = (w->head + n) % w->cap, w->len -= n;
        pthread_mutex_unlock(&w->mu);
        deliver(w, batch, n);
        for (size_t i = 0; i < n; i++) sample_free(&batch[i]);
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

remote_write_t *remote_write_start(const char *url, size_t max_queue, hr_err_t *err) {
    remote_write_t *w = calloc(1, sizeof *w);
    if (!w || !(w->url = strdup(url)) || !(w->ring = calloc(max_queue ? max_queue : 1, sizeof *w->ring))) {
        if (w) free(w->url);
        free(w);
        return hr_fail(err, HR_ENOMEM, "out of memory"), NULL;
    }
    w->cap = max_queue ? max_queue : 1;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    if (pthread_create(&w->thread, NULL, sender, w)) {
        free(w->ring), free(w->url), free(w);
        return hr_fail(err, HR_ENOMEM, "cannot start the remote write thread"), NULL;
    }
    return w;
}

void remote_write_stop(remote_write_t *w) {
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    w->stopping = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    for (size_t i = 0; i < w->len; i++) sample_free(&w->ring[(w->head + i) % w->cap]);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w->ring), free(w->url), free(w);
}

void remote_write_stats(remote_write_t *w, remote_write_stats_t *out) {
    pthread_mutex_lock(&w->mu);
    *out = w->st;
    out->queued = w->len;
    pthread_mutex_unlock(&w->mu);
}
