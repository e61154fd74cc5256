/* pipeline.c - see pipeline.h. */
#include "ingest/pipeline.h"

#include <time.h>

#include "common/log.h"
#include "common/timeparse.h"

int ingest_submit(store_t *s, const ingest_limits_t *lim, const ingest_request_t *r, ingest_stats_t *st,
                  hr_err_t *err) {
    *st = (ingest_stats_t){0};
    batch_t b;
    if (batch_init(&b)) return hr_fail(err, HR_ENOMEM, "out of memory");
    buf_t rec;
    buf_init(&rec);
    int64_t t0 = time_mono_ns(), t1 = 0, t2 = 0;
    store_ingest_times_t times = {0};
    int rc = ingest_to_batch(r, lim, &b, err); /* decoded whole before anything is logged */
    if (rc == 0) {
        t1 = time_mono_ns();
        ingest_request_encode(r, &rec);
        rc = rec.oom ? hr_fail(err, HR_ENOMEM, "out of memory")
                     : store_ingest(s, r->tenant, rec.data, rec.len, &b, &times, err);
        t2 = time_mono_ns();
    }
    if (rc == 0)
        *st = (ingest_stats_t){.profiles = b.n,
                               .samples = batch_samples(&b),
                               .dropped_negative_gauge = b.dropped_negative_gauge,
                               .unindexed_span_keys = b.unindexed_span_keys,
                               .unindexed_high_cardinality_keys = b.unindexed_high_cardinality_keys};
    else if (err->code == HR_EIO) log_error("ingest.storage_failed", "err=\"%s\"", err->msg);
    st->decode_ns = t1 ? t1 - t0 : 0;
    st->store_ns = t2 ? t2 - t1 : 0;
    st->store = times;
    buf_free(&rec);
    batch_destroy(&b);
    return rc;
}

int ingest_replay_one(store_t *s, const ingest_limits_t *lim, const uint8_t *p, size_t n, hr_err_t *err) {
    ingest_request_t r;
    if (ingest_request_decode(p, n, &r, err)) {
        log_warn("wal.bad_record", "err=\"%s\"", err->msg);
        return -1;
    }
    batch_t b;
    if (batch_init(&b)) return hr_fail(err, HR_ENOMEM, "out of memory");
    ingest_limits_t relaxed = *lim;
    relaxed.decode_budget = NULL;
    relaxed.max_label_value_bytes = 0;
    int rc = ingest_to_batch(&r, &relaxed, &b, err);
    if (rc == 0) rc = store_apply(s, r.tenant, &b, err);
    if (rc) log_warn("wal.replay_failed", "err=\"%s\"", err->msg);
    batch_destroy(&b);
    return rc;
}

typedef struct {
    store_t *store;
    const ingest_limits_t *lim;
    size_t records;
    int64_t started, last_report; /* seconds */
    hr_err_t stop;                /* why the replay stopped */
} replay_t;

static int replay_record(void *ctx, const uint8_t *p, size_t n) {
    replay_t *rp = ctx;
    int64_t now = time(NULL);
    if (++rp->records % 256 == 0 && now - rp->last_report >= 2) {
        log_info("wal.replay_progress", "records=%zu seconds=%lld", rp->records, (long long)(now - rp->started));
        rp->last_report = now;
    }
    hr_err_t err = {0};
    if (ingest_replay_one(rp->store, rp->lim, p, n, &err) == 0) return 0;
    /* A bad record is skipped; out of memory is not the record's fault, and skipping
     * it would lose it at the next cut: stop, and the next start replays it. */
    if (err.code != HR_ENOMEM) return -1;
    rp->stop = err;
    return WAL_REPLAY_STOP;
}

int ingest_replay_wal(store_t *s, const ingest_limits_t *lim, wal_scan_t *ws, hr_err_t *err) {
    int64_t t0 = time(NULL);
    replay_t rp = {s, lim, 0, t0, t0, {0}};
    int rc = store_replay(s, replay_record, &rp, ws, err);
    if (rc && rp.stop.code) *err = rp.stop;
    return rc;
}
