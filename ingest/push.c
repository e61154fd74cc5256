/* push.c - see push.h. */
#include "ingest/push.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "common/base64.h"
#include "ingest/pprof.h"
#include "wire/parca_profilestore.pb-c.h"
#include "wire/push.pb-c.h"

static int finish_labels(labels_t *l, const ingest_limits_t *lim, hr_err_t *err) {
    if (!labels_get(l, "service_name") && labels_set(l, "service_name", "unknown_service"))
        return hr_fail(err, HR_ENOMEM, "out of memory");
    return ingest_check_labels(l, lim, err); /* before the series' profiles are decoded */
}

/* What every series of one request shares. */
typedef struct {
    const ingest_limits_t *lim;
    int64_t now;
    int normalized; /* Parca's `normalized`: the addresses need no mapping adjustment */
    batch_t *b;
    hr_err_t *err;
} push_ctx_t;

static int add_sample(const push_ctx_t *c, const labels_t *l, const char *name, const uint8_t *raw, size_t n) {
    pprof_opts_t o = {.base = l,
                      .now_ns = c->now,
                      .max_decompressed = c->lim->max_decompressed,
                      .max_samples = c->lim->max_samples,
                      .name = name[0] ? name : NULL,
                      .budget = c->lim->decode_budget,
                      .addresses_normalized = c->normalized};
    return pprof_decode(raw, n, &o, c->b, c->err);
}

/* Parca's series carry the profile's name as __name__; it is required, as Parca's own
 * normalizer requires it. */
static int parca_named(const char *name, hr_err_t *err) {
    return name[0] ? 0 : hr_fail(err, HR_EINVAL, "writeraw: every series needs a __name__ label (e.g. process_cpu)");
}

static int decode_binary(const push_ctx_t *c, const uint8_t *body, size_t n) {
    Push__V1__PushRequest *req = push__v1__push_request__unpack(NULL, n, body);
    if (!req) return hr_fail(c->err, HR_EINVAL, "push: the body is not a push.v1.PushRequest protobuf");
    int rc = 0;
    for (size_t i = 0; i < req->n_series && rc == 0; i++) {
        const Push__V1__RawProfileSeries *s = req->series[i];
        labels_t l;
        labels_init(&l);
        char name[128] = "";
        for (size_t j = 0; j < s->n_labels && rc == 0; j++)
            rc = ingest_label_add(&l, name, sizeof name, s->labels[j]->name, s->labels[j]->value, c->err);
        if (rc == 0) rc = finish_labels(&l, c->lim, c->err);
        for (size_t j = 0; j < s->n_samples && rc == 0; j++)
            rc = add_sample(c, &l, name, s->samples[j]->raw_profile.data, s->samples[j]->raw_profile.len);
        labels_destroy(&l);
    }
    push__v1__push_request__free_unpacked(req, NULL);
    return rc;
}

/* One series of a WriteRawRequest. executable_info (each mapping's ELF type and load
 * segment) is not needed: the symbolizer reads the same from the debug file itself. */
static int parca_series(const push_ctx_t *c, const Parca__Profilestore__V1alpha1__RawProfileSeries *s) {
    labels_t l;
    labels_init(&l);
    char name[128] = "";
    int rc = 0;
    for (size_t j = 0; s->labels && j < s->labels->n_labels && rc == 0; j++)
        rc = ingest_label_add(&l, name, sizeof name, s->labels->labels[j]->name, s->labels->labels[j]->value, c->err);
    if (rc == 0) rc = parca_named(name, c->err);
    if (rc == 0) rc = finish_labels(&l, c->lim, c->err);
    for (size_t j = 0; j < s->n_samples && rc == 0; j++)
        rc = add_sample(c, &l, name, s->samples[j]->raw_profile.data, s->samples[j]->raw_profile.len);
    labels_destroy(&l);
    return rc;
}

static int decode_parca_binary(push_ctx_t *c, const uint8_t *body, size_t n) {
    Parca__Profilestore__V1alpha1__WriteRawRequest *req =
        parca__profilestore__v1alpha1__write_raw_request__unpack(NULL, n, body);
    if (!req)
        return hr_fail(c->err, HR_EINVAL, "writeraw: the body is not a parca.profilestore.v1alpha1.WriteRawRequest");
    int rc = 0;
    if (req->tenant && req->tenant[0])
        rc = hr_fail(c->err, HR_EINVAL,
                     "writeraw: the deprecated `tenant` field is not served; name the tenant with X-Scope-OrgID");
    c->normalized = req->normalized;
    for (size_t i = 0; i < req->n_series && rc == 0; i++) rc = parca_series(c, req->series[i]);
    parca__profilestore__v1alpha1__write_raw_request__free_unpacked(req, NULL);
    return rc;
}

static int json_series(const push_ctx_t *c, json_t *s, int parca) {
    labels_t l;
    labels_init(&l);
    char name[128] = "";
    size_t i;
    json_t *v, *pairs = json_object_get(s, "labels");
    if (parca) pairs = json_object_get(pairs, "labels");
    int rc = 0;
    json_array_foreach(pairs, i, v) {
        if (rc) break;
        rc = ingest_label_add(&l, name, sizeof name, json_string_value(json_object_get(v, "name")),
                              json_string_value(json_object_get(v, "value")), c->err);
    }
    if (rc == 0 && parca) rc = parca_named(name, c->err);
    if (rc == 0) rc = finish_labels(&l, c->lim, c->err);
    json_array_foreach(json_object_get(s, "samples"), i, v) {
        if (rc) break;
        json_t *raw = json_object_get(v, "rawProfile");
        if (!raw) raw = json_object_get(v, "raw_profile");
        uint8_t *bytes;
        size_t nb;
        if (!json_is_string(raw) || base64_decode(json_string_value(raw), json_string_length(raw), &bytes, &nb)) {
            rc = hr_fail(c->err, HR_EINVAL, "push: samples[%zu].rawProfile must be base64 pprof bytes", i);
            break;
        }
        rc = add_sample(c, &l, name, bytes, nb);
        free(bytes);
    }
    labels_destroy(&l);
    return rc;
}

/* WriteRaw's fields beside its series, as protojson spells them. */
static int parca_json_fields(push_ctx_t *c, json_t *doc) {
    const char *tenant = json_string_value(json_object_get(doc, "tenant"));
    if (tenant && tenant[0])
        return hr_fail(c->err, HR_EINVAL,
                       "writeraw: the deprecated `tenant` field is not served; name the tenant with X-Scope-OrgID");
    json_t *norm = json_object_get(doc, "normalized");
    if (norm && !json_is_boolean(norm))
        return hr_fail(c->err, HR_EINVAL, "writeraw: `normalized` must be true or false");
    c->normalized = json_is_true(norm);
    return 0;
}

static int decode_json(push_ctx_t *c, const uint8_t *body, size_t n, int parca) {
    json_error_t je;
    json_t *doc = json_loadb((const char *)body, n, 0, &je);
    if (!json_is_object(doc)) {
        json_decref(doc);
        return hr_fail(c->err, HR_EINVAL, "push: the body is not a JSON PushRequest: %s", je.text);
    }
    json_t *series = json_object_get(doc, "series");
    int rc = parca ? parca_json_fields(c, doc) : 0;
    if (rc == 0 && series && !json_is_array(series)) rc = hr_fail(c->err, HR_EINVAL, "push: `series` must be an array");
    size_t i;
    json_t *s;
    json_array_foreach(series, i, s) {
        if (rc) break;
        rc = json_series(c, s, parca);
    }
    json_decref(doc);
    return rc;
}

int push_decode(const uint8_t *body, size_t n, push_encoding_t enc, const ingest_limits_t *lim, int64_t now, batch_t *b,
                hr_err_t *err) {
    push_ctx_t c = {.lim = lim, .now = now, .b = b, .err = err};
    if (enc == PUSH_PROTO) return decode_binary(&c, body, n);
    if (enc == PUSH_PARCA_PROTO) return decode_parca_binary(&c, body, n);
    return decode_json(&c, body, n, enc == PUSH_PARCA_JSON);
}

int push_ingest_proto(const ingest_request_t *r, const ingest_limits_t *lim, batch_t *b, hr_err_t *err) {
    return push_decode(r->body, r->body_len, PUSH_PROTO, lim, r->received_ns, b, err);
}

int push_ingest_json(const ingest_request_t *r, const ingest_limits_t *lim, batch_t *b, hr_err_t *err) {
    return push_decode(r->body, r->body_len, PUSH_JSON, lim, r->received_ns, b, err);
}

int parca_ingest_proto(const ingest_request_t *r, const ingest_limits_t *lim, batch_t *b, hr_err_t *err) {
    return push_decode(r->body, r->body_len, PUSH_PARCA_PROTO, lim, r->received_ns, b, err);
}

int parca_ingest_json(const ingest_request_t *r, const ingest_limits_t *lim, batch_t *b, hr_err_t *err) {
    return push_decode(r->body, r->body_len, PUSH_PARCA_JSON, lim, r->received_ns, b, err);
}
