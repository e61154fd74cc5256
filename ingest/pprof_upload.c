/* pprof_upload.c - see pprof_upload.h. */
#include "ingest/pprof_upload.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "common/ptype.h"
#include "ingest/delta.h"
#include "ingest/pprof.h"

#define MAX_DISPLAY 64 /* sample_type_config entries read; a profile has a handful of types */

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
        if (*n == MAX_DISPLAY) break;
        json_t *d = json_object_get(v, "display-name"), *c = json_object_get(v, "cumulative");
        out[(*n)++] = (pprof_display_t){k, json_is_string(d) ? json_string_value(d) : NULL,
                                        json_is_boolean(c) ? json_is_true(c) : -1};
    }
    *root = o;
    return 0;
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
    if (rc == 0 && pprof_decode(r->aux_body, r->aux_len, o, &prev, err)) {
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

static int decode(const ingest_request_t *r, const ingest_limits_t *lim, const ingest_series_t *s, batch_t *b,
                  hr_err_t *err) {
    pprof_display_t disp[MAX_DISPLAY];
    size_t nd;
    json_t *root;
    if (parse_display(r->sample_type_config, &root, disp, &nd, err)) return -1;
    pprof_opts_t o = {.base = &s->labels,
                      .time_ns = r->has_from ? r->from_ns : 0,
                      .duration_ns = r->has_from && r->has_until ? r->until_ns - r->from_ns : 0,
                      .now_ns = r->received_ns,
                      .max_decompressed = lim->max_decompressed,
                      .max_samples = lim->max_samples,
                      .budget = lim->decode_budget,
                      .display = disp,
                      .ndisplay = nd,
                      .name = s->type_name[0] ? s->type_name : NULL};
    int rc = pprof_decode(r->body, r->body_len, &o, b, err);
    if (rc == 0 && r->aux_body) rc = apply_prev(r, &o, b, err);
    json_decref(root);
    return rc;
}

int pprof_ingest(const ingest_request_t *r, const ingest_limits_t *lim, batch_t *b, hr_err_t *err) {
    ingest_series_t s;
    int rc = ingest_series_read(r, lim, &s, err);
    if (rc == 0) rc = decode(r, lim, &s, b, err);
    labels_destroy(&s.labels);
    return rc;
}

ingest_sniff_t pprof_sniff(const ingest_peek_t *pk) { return pk->gzipped || !pk->textual ? SNIFF_MAYBE : SNIFF_NO; }
