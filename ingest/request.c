/* request.c - see request.h. */
#include "ingest/request.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/ptype.h"
#include "ingest/appname.h"
#include "ingest/delta.h"
#include "ingest/folded.h"
#include "ingest/jfr.h"
#include "ingest/pprof.h"
#include "ingest/push.h"

/* 2 added prev_body; version-1 records (no prev_body) still replay. */
#define RECORD_VERSION 2

static void put_str(buf_t *b, const char *s) {
    if (!s) {
        buf_putc(b, 0);
        return;
    }
    buf_putc(b, 1);
    buf_put_bytes(b, s, strlen(s) + 1); /* keep the NUL so decode can borrow */
}

static const char *get_str(buf_reader_t *r) {
    const uint8_t *present = buf_get_raw(r, 1);
    if (!present || !*present) return NULL;
    size_t n;
    const uint8_t *s = buf_get_bytes(r, &n);
    if (!s || n == 0 || s[n - 1] != 0) {
        r->bad = 1;
        return NULL;
    }
    return (const char *)s;
}

void ingest_request_encode(const ingest_request_t *r, buf_t *b) {
    buf_putc(b, RECORD_VERSION);
    put_str(b, r->tenant);
    put_str(b, r->name);
    buf_putc(b, (uint8_t)r->format);
    put_str(b, r->spy_name);
    put_str(b, r->sample_type_config);
    buf_putc(b, (uint8_t)(r->has_from | r->has_until << 1));
    buf_put_svarint(b, r->from_ns);
    buf_put_svarint(b, r->until_ns);
    buf_put_svarint(b, r->received_ns);
    buf_put_svarint(b, r->sample_rate);
    buf_put_bytes(b, r->body, r->body_len);
    buf_putc(b, r->prev_body != NULL);
    if (r->prev_body) buf_put_bytes(b, r->prev_body, r->prev_len);
}

int ingest_request_decode(const uint8_t *p, size_t n, ingest_request_t *r, hr_err_t *err) {
    buf_reader_t rd;
    buf_reader_init(&rd, p, n);
    memset(r, 0, sizeof *r);
    const uint8_t *v = buf_get_raw(&rd, 1);
    if (!v || *v < 1 || *v > RECORD_VERSION) return hr_fail(err, HR_EUNPROC, "WAL record: unknown version");
    int version = *v;
    r->tenant = get_str(&rd);
    r->name = get_str(&rd);
    const uint8_t *f = buf_get_raw(&rd, 1);
    r->format = f ? (ingest_format_t)*f : 0;
    r->spy_name = get_str(&rd);
    r->sample_type_config = get_str(&rd);
    const uint8_t *flags = buf_get_raw(&rd, 1);
    r->has_from = flags && (*flags & 1);
    r->has_until = flags && (*flags & 2);
    r->from_ns = buf_get_svarint(&rd);
    r->until_ns = buf_get_svarint(&rd);
    r->received_ns = buf_get_svarint(&rd);
    r->sample_rate = buf_get_svarint(&rd);
    r->body = buf_get_bytes(&rd, &r->body_len);
    const uint8_t *has_prev = version >= 2 ? buf_get_raw(&rd, 1) : NULL;
    if (has_prev && *has_prev) r->prev_body = buf_get_bytes(&rd, &r->prev_len);
    if (rd.bad || !r->tenant || !r->name || r->format < INGEST_PPROF || r->format > INGEST_JFR)
        return hr_fail(err, HR_EUNPROC, "WAL record: malformed");
    return 0;
}

/* Display names and cumulative flags from Pyroscope's sample_type_config JSON
 * ({"type": {"display-name": ..., "cumulative": true}}). */
static int parse_display(const char *json, json_t **root, pprof_display_t *out, size_t *n, hr_err_t *err) {
    *n = 0;
    *root = NULL;
    if (!json || !*json) return 0;
    json_error_t je;
    json_t *o = json_loads(json, 0, &je);
    if (!json_is_object(o)) {
        json_decref(o);
        return hr_fail(err, HR_EINVAL, "sample_type_config is not a JSON object: %s", je.text);
    }
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        if (*n == 64) break;
        json_t *d = json_object_get(v, "display-name"), *c = json_object_get(v, "cumulative");
        out[(*n)++] = (pprof_display_t){k, json_is_string(d) ? json_string_value(d) : NULL,
                                        json_is_boolean(c) ? json_is_true(c) : -1};
    }
    *root = o;
    return 0;
}

/* Pyroscope's mapping of a text upload's name suffix to a profile type. cpu and wall
 * values are samples at sampleRate Hz, scaled to nanoseconds by the period. */
static int folded_type(const char *suffix, int64_t rate, char *out, size_t n, int64_t *scale, hr_err_t *err) {
    *scale = 1;
    const char *type = ptype_from_suffix(suffix);
    if (!type)
        return hr_fail(err, HR_EINVAL, "unknown profile type `%s` (the name's last .suffix; use cpu, wall, "
                                       "alloc_space, inuse_space, ... or upload pprof)", suffix);
    int cpu = !strcmp(suffix, "cpu") || !strcmp(suffix, "itimer");
    if (cpu || !strcmp(suffix, "wall")) {
        if (rate > 0) *scale = 1000000000LL / rate;
        else type = cpu ? "process_cpu:samples:count:cpu:nanoseconds" : "wall:samples:count:wall:nanoseconds";
    }
    snprintf(out, n, "%s", type);
    return 0;
}

static int base_labels(const ingest_request_t *r, const char *service, labels_t *labels,
                       const ingest_limits_t *lim, hr_err_t *err) {
    if (!labels_get(labels, "service_name") && labels_set(labels, "service_name", service))
        return hr_fail(err, HR_ENOMEM, "out of memory");
    if (r->spy_name && *r->spy_name && labels_set(labels, "pyroscope_spy", r->spy_name))
        return hr_fail(err, HR_ENOMEM, "out of memory");
    return ingest_check_labels(labels, lim, err);
}

static int decode_folded(const ingest_request_t *r, const ingest_limits_t *lim, char *app, labels_t *labels,
                         batch_t *b, hr_err_t *err) {
    char *dot = strrchr(app, '.');
    const char *suffix = dot ? dot + 1 : "cpu";
    if (dot) *dot = 0;
    char type[256];
    int64_t scale;
    if (folded_type(suffix, r->sample_rate, type, sizeof type, &scale, err)) return -1;
    if (!app[0]) return hr_fail(err, HR_EINVAL, "empty application name");
    if (base_labels(r, app, labels, lim, err)) return -1;
    int64_t t = r->has_from ? r->from_ns : r->received_ns;
    int64_t d = r->has_from && r->has_until ? r->until_ns - r->from_ns : 0;
    batch_profile_t *p = batch_profile(b, type, labels, t, d);
    if (!p) return hr_fail(err, HR_ENOMEM, "out of memory");
    return folded_decode((const char *)r->body, r->body_len, r->format == INGEST_LINES, scale, b, p, err);
}

/* Cumulative unless sample_type_config says otherwise: Pyroscope's defaults are the
 * heap's alloc_* and the mutex/block contentions and delay. */
static int is_cumulative(const char *type_id, const pprof_opts_t *o) {
    ptype_parts_t p;
    if (ptype_split(type_id, &p)) return 0;
    for (size_t i = 0; i < o->ndisplay; i++)
        if (!strcmp(o->display[i].sample_type, p.sample_type) && o->display[i].cumulative >= 0)
            return o->display[i].cumulative;
    static const char *const dflt[] = {"alloc_objects", "alloc_space", "contentions", "delay"};
    for (size_t i = 0; i < sizeof dflt / sizeof *dflt; i++)
        if (!strcmp(p.sample_type, dflt[i])) return 1;
    return 0;
}

/* Decodes prev_profile like the profile and keeps only what happened since it. */
static int apply_prev(const ingest_request_t *r, const pprof_opts_t *o, batch_t *b, hr_err_t *err) {
    batch_t prev;
    if (batch_init(&prev)) return hr_fail(err, HR_ENOMEM, "out of memory");
    uint8_t *cum = calloc(b->n + 1, 1);
    int rc = cum ? 0 : hr_fail(err, HR_ENOMEM, "out of memory");
    if (rc == 0 && pprof_decode(r->prev_body, r->prev_len, o, &prev, err)) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        rc = hr_fail(err, err->code, "prev_profile: %s", msg);
    }
    for (size_t i = 0; rc == 0 && i < b->n; i++) cum[i] = (uint8_t)is_cumulative(b->p[i].profile_type, o);
    if (rc == 0) rc = delta_subtract(b, cum, &prev, err);
    free(cum);
    batch_destroy(&prev);
    return rc;
}

static int decode_jfr(const ingest_request_t *r, const ingest_limits_t *lim, const char *app, labels_t *labels,
                      batch_t *b, hr_err_t *err) {
    if (base_labels(r, app, labels, lim, err)) return -1;
    jfr_opts_t o = {.base = labels,
                    .time_ns = r->has_from ? r->from_ns : 0,
                    .duration_ns = r->has_from && r->has_until ? r->until_ns - r->from_ns : 0,
                    .max_decompressed = lim->max_decompressed,
                    .max_samples = lim->max_samples};
    return jfr_decode(r->body, r->body_len, &o, b, err);
}

static int decode_any(const ingest_request_t *r, const ingest_limits_t *lim, batch_t *b, hr_err_t *err) {
    if (r->format >= INGEST_PUSH_PROTO && r->format <= INGEST_PARCA_JSON)
        return push_decode(r->body, r->body_len, (push_encoding_t)(r->format - INGEST_PUSH_PROTO), lim, r->received_ns,
                           b, err);
    char app[512];
    labels_t labels;
    labels_init(&labels);
    int rc = appname_parse(r->name, app, sizeof app, &labels, err);
    if (rc == 0 && r->format == INGEST_JFR) {
        rc = decode_jfr(r, lim, app, &labels, b, err);
    } else if (rc == 0 && r->format != INGEST_PPROF) {
        rc = decode_folded(r, lim, app, &labels, b, err);
    } else if (rc == 0) {
        pprof_display_t disp[64];
        size_t nd;
        json_t *root;
        rc = base_labels(r, app, &labels, lim, err);
        if (rc == 0 && (rc = parse_display(r->sample_type_config, &root, disp, &nd, err)) == 0) {
            pprof_opts_t o = {.base = &labels,
                              .time_ns = r->has_from ? r->from_ns : 0,
                              .duration_ns = r->has_from && r->has_until ? r->until_ns - r->from_ns : 0,
                              .now_ns = r->received_ns,
                              .max_decompressed = lim->max_decompressed,
                              .max_samples = lim->max_samples,
                              .budget = lim->decode_budget,
                              .display = disp,
                              .ndisplay = nd};
            rc = pprof_decode(r->body, r->body_len, &o, b, err);
            if (rc == 0 && r->prev_body) rc = apply_prev(r, &o, b, err);
            json_decref(root);
        }
    }
    labels_destroy(&labels);
    return rc;
}

int ingest_check_labels(const labels_t *l, const ingest_limits_t *lim, hr_err_t *err) {
    if (lim->max_labels && l->n > lim->max_labels)
        return hr_fail(err, HR_EINVAL, "a series has %zu labels, over the limit of %zu", l->n, lim->max_labels);
    for (size_t k = 0; lim->max_label_value_bytes && k < l->n; k++) {
        size_t nn = strlen(l->v[k].name), vn = strlen(l->v[k].value);
        if (nn > LABEL_NAME_MAX)
            return hr_fail(err, HR_EINVAL, "label name `%.40s...` is %zu bytes, over the limit of %d", l->v[k].name, nn,
                           LABEL_NAME_MAX);
        if (vn > lim->max_label_value_bytes)
            return hr_fail(err, HR_EINVAL, "label %s has a %zu-byte value, over the limit of %zu (--max-label-value-bytes)",
                           l->v[k].name, vn, lim->max_label_value_bytes);
    }
    return 0;
}

/* Every series of every format passes here, whatever its decoder checked before. */
static int check_labels(const batch_t *b, const ingest_limits_t *lim, hr_err_t *err) {
    for (size_t i = 0; i < b->n; i++)
        if (ingest_check_labels(&b->p[i].labels, lim, err)) return -1;
    return 0;
}

/* A gauge (in-use memory, goroutines) is a level, and no part of a level is below
 * zero. Negative samples of one come from a writer that subtracted two snapshots
 * (Go's allocs?seconds=N delta carries inuse_* differences); kept, they make a
 * negative total and break the flame graph's layout. They are left out and counted
 * rather than refusing the upload, whose other types are sound. */
static void drop_negative_gauges(batch_t *b) {
    for (size_t i = 0; i < b->n; i++) {
        batch_profile_t *p = &b->p[i];
        ptype_parts_t parts;
        if (ptype_split(p->profile_type, &parts) || !ptype_is_gauge(&parts)) continue;
        size_t k = 0;
        for (size_t j = 0; j < p->n; j++) {
            if (p->values[j] < 0) continue;
            p->stacks[k] = p->stacks[j], p->values[k] = p->values[j];
            k++;
        }
        b->dropped_negative_gauge += p->n - k;
        p->n = k;
        k = 0;
        for (size_t j = 0; j < p->nspans; j++)
            if (p->spans[j].value >= 0) p->spans[k++] = p->spans[j]; /* copies of samples: counted above */
        p->nspans = k;
    }
}

/* Sums of a profile's values (per stack, per profile, per series over time) are
 * int64: values whose magnitudes add up past INT64_MAX would wrap into nonsense
 * (a negative CPU total), so such a profile is refused whole. */
static int check_values(const batch_t *b, hr_err_t *err) {
    for (size_t i = 0; i < b->n; i++) {
        int64_t sum = 0;
        for (size_t k = 0; k < b->p[i].n; k++) {
            int64_t v = b->p[i].values[k];
            if (v == INT64_MIN || __builtin_add_overflow(sum, v < 0 ? -v : v, &sum))
                return hr_fail(err, HR_EUNPROC, "sample values of %s add up past the 64-bit range", b->p[i].profile_type);
        }
    }
    return 0;
}

int ingest_to_batch(const ingest_request_t *r, const ingest_limits_t *lim, batch_t *b, hr_err_t *err) {
    if (decode_any(r, lim, b, err) || check_labels(b, lim, err)) return -1;
    drop_negative_gauges(b);
    return check_values(b, err);
}
