/* ingest_api.c - POST /ingest, Pyroscope's legacy push protocol.
 *
 * Parameters: name (app.type{k=v}), from, until, format, sampleRate, spyName,
 * units, aggregationType. The body is raw (pprof, gzipped or not; folded text) or
 * multipart/form-data with `profile` (+ `prev_profile`, whose cumulative counters
 * are subtracted, and `sample_type_config`). The request is
 * decoded completely before anything is stored, so bad input never reaches the
 * WAL; the reply comes only after the WAL record is durable. */
#include <stdlib.h>
#include <string.h>

#include "common/timeparse.h"
#include "ingest/format.h"
#include "server/app.h"

static int parse_time_arg(http_req_t *req, const char *name, int64_t now, int *has, int64_t *out, http_resp_t *resp) {
    const char *v = http_arg(req, name);
    *has = v && *v;
    if (!*has) return 0;
    if (time_parse(v, now, out) == 0) return 0;
    http_error(resp, 400, "bad `%s` time `%s`: use unix seconds/ms/us/ns, RFC 3339 or now-1h", name, v);
    return -1;
}

static int64_t sample_rate_arg(http_req_t *req) {
    const char *v = http_arg(req, "sampleRate");
    if (!v) return 100;
    char *end;
    long long n = strtoll(v, &end, 10);
    return (*end || n < 0) ? 100 : n; /* Pyroscope falls back to 100; 0 is kept */
}

/* Picks the body and format as Pyroscope does. Returns 0, or -1 with resp set. */
static int choose_body(http_req_t *req, ingest_request_t *r, http_resp_t *resp) {
    const char *fmt = http_arg(req, "format");
    if (req->multipart) {
        if (req->multipart < 0) return http_error(resp, 400, "malformed multipart/form-data body"), -1;
        const http_field_t *p = http_field(req, "profile"), *prev = http_field(req, "prev_profile");
        const http_field_t *jfr = http_field(req, "jfr");
        if (jfr) { /* the Java agent: `jfr`, and `labels` for its events' context ids */
            const http_field_t *labels = http_field(req, "labels");
            r->format = INGEST_JFR;
            r->body = jfr->data.data;
            r->body_len = jfr->data.len;
            if (labels && labels->data.len) r->aux_body = labels->data.data, r->aux_len = labels->data.len;
            return 0;
        }
        if (!p) return http_error(resp, 400, "multipart body has no `profile` (or `jfr`) field"), -1;
        r->format = INGEST_PPROF;
        r->body = p->data.data;
        r->body_len = p->data.len;
        if (prev && prev->data.len) r->aux_body = prev->data.data, r->aux_len = prev->data.len;
        const http_field_t *c = http_field(req, "sample_type_config");
        if (c && c->data.len) {
            buf_putc((buf_t *)&c->data, 0); /* NUL-terminate in place */
            r->sample_type_config = (const char *)c->data.data;
        }
        return 0;
    }
    r->body = req->body.data;
    r->body_len = req->body.len;
    /* Unnamed, the bytes decide (Pyroscope would read it as folded). */
    const ingest_format_desc_t *f = fmt ? ingest_format_named(fmt) : ingest_sniff(r->body, r->body_len);
    if (f && !f->decode) {
        buf_t names;
        buf_init(&names);
        ingest_format_names(&names);
        buf_putc(&names, 0);
        http_error(resp, 422, "format `%s` is not supported by Hearth yet (use %s)", fmt,
                   names.oom ? "?" : (const char *)names.data);
        buf_free(&names);
        return -1;
    }
    r->format = f ? f->code : INGEST_FOLDED; /* Pyroscope reads any other format as folded */
    return 0;
}

void api_ingest(app_t *a, http_req_t *req, http_resp_t *resp) {
    ingest_request_t r = {.tenant = req->tenant, .name = http_arg(req, "name"), .spy_name = http_arg(req, "spyName")};
    r.received_ns = time_now_ns();
    r.sample_rate = sample_rate_arg(req);
    if (parse_time_arg(req, "from", r.received_ns, &r.has_from, &r.from_ns, resp) ||
        parse_time_arg(req, "until", r.received_ns, &r.has_until, &r.until_ns, resp) || choose_body(req, &r, resp)) {
        metrics_ingest_error(&a->metrics, hr_code_of_status(resp->status));
        return;
    }
    hr_err_t err = {0};
    if (app_submit(a, &r, req->received, &err) == 0) http_reply_text(resp, 200, "application/json", "");
    else http_error_from(resp, &err);
}

int app_submit(app_t *a, const ingest_request_t *r, size_t body_bytes, hr_err_t *err) {
    ingest_stats_t st;
    int rc = ingest_submit(a->store, &a->limits, r, &st, err);
    if (st.decode_ns) metrics_ingest_stage(&a->metrics, STAGE_DECODE, (double)st.decode_ns / 1e9);
    if (st.store_ns) metrics_ingest_stage(&a->metrics, STAGE_STORE, (double)st.store_ns / 1e9);
    const int64_t parts[] = {st.store.series_ns, st.store.wait_ns, st.store.stage_ns, st.store.wal_ns,
                             st.store.commit_ns};
    for (size_t k = 0; k < sizeof parts / sizeof *parts; k++)
        if (parts[k]) metrics_ingest_stage(&a->metrics, (metrics_stage_t)(STAGE_SERIES + k), (double)parts[k] / 1e9);
    if (rc) {
        metrics_ingest_error(&a->metrics, err->code);
        return -1;
    }
    metrics_ingest_ok(&a->metrics, body_bytes, st.profiles, st.samples);
    metrics_dropped(&a->metrics, DROP_NEGATIVE_GAUGE, st.dropped_negative_gauge);
    a->metrics.unindexed_keys[UNINDEXED_SPAN] += st.unindexed_span_keys;
    a->metrics.unindexed_keys[UNINDEXED_HIGH_CARDINALITY] += st.unindexed_high_cardinality_keys;
    return 0;
}
