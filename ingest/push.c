/* push.c - see push.h. */
#include "ingest/push.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "common/base64.h"
#include "ingest/pprof.h"
#include "wire/push.pb-c.h"

static int finish_labels(labels_t *l, const ingest_limits_t *lim, hr_err_t *err) {
    if (!labels_get(l, "service_name") && labels_set(l, "service_name", "unknown_service"))
        return hr_fail(err, HR_ENOMEM, "out of memory");
    return ingest_check_labels(l, lim, err); /* before the series' profiles are decoded */
}

static int add_sample(const labels_t *l, const char *name, const uint8_t *raw, size_t n, const ingest_limits_t *lim,
                      int64_t now, batch_t *b, hr_err_t *err) {
    pprof_opts_t o = {.base = l,
                      .now_ns = now,
                      .max_decompressed = lim->max_decompressed,
                      .max_samples = lim->max_samples,
                      .name = name[0] ? name : NULL,
                      .budget = lim->decode_budget};
    return pprof_decode(raw, n, &o, b, err);
}

static int decode_binary(const uint8_t *body, size_t n, const ingest_limits_t *lim, int64_t now, batch_t *b,
                         hr_err_t *err) {
    Push__V1__PushRequest *req = push__v1__push_request__unpack(NULL, n, body);
    if (!req) return hr_fail(err, HR_EINVAL, "push: the body is not a push.v1.PushRequest protobuf");
    int rc = 0;
    for (size_t i = 0; i < req->n_series && rc == 0; i++) {
        const Push__V1__RawProfileSeries *s = req->series[i];
        labels_t l;
        labels_init(&l);
        char name[128] = "";
        for (size_t j = 0; j < s->n_labels && rc == 0; j++)
            rc = ingest_label_add(&l, name, sizeof name, s->labels[j]->name, s->labels[j]->value, err);
        if (rc == 0) rc = finish_labels(&l, lim, err);
        for (size_t j = 0; j < s->n_samples && rc == 0; j++)
            rc =
                add_sample(&l, name, s->samples[j]->raw_profile.data, s->samples[j]->raw_profile.len, lim, now, b, err);
        labels_destroy(&l);
    }
    push__v1__push_request__free_unpacked(req, NULL);
    return rc;
}

static int json_series(json_t *s, int parca, const ingest_limits_t *lim, int64_t now, batch_t *b, hr_err_t *err) {
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
                              json_string_value(json_object_get(v, "value")), err);
    }
    if (rc == 0 && parca && !name[0])
        rc = hr_fail(err, HR_EINVAL, "writeraw: every series needs a __name__ label (e.g. process_cpu)");
    if (rc == 0) rc = finish_labels(&l, lim, err);
    json_array_foreach(json_object_get(s, "samples"), i, v) {
        if (rc) break;
        json_t *raw = json_object_get(v, "rawProfile");
        if (!raw) raw = json_object_get(v, "raw_profile");
        uint8_t *bytes;
        size_t nb;
        if (!json_is_string(raw) || base64_decode(json_string_value(raw), json_string_length(raw), &bytes, &nb)) {
            rc = hr_fail(err, HR_EINVAL, "push: samples[%zu].rawProfile must be base64 pprof bytes", i);
            break;
        }
        rc = add_sample(&l, name, bytes, nb, lim, now, b, err);
        free(bytes);
    }
    labels_destroy(&l);
    return rc;
}

static int decode_json(const uint8_t *body, size_t n, int parca, const ingest_limits_t *lim, int64_t now, batch_t *b,
                       hr_err_t *err) {
    json_error_t je;
    json_t *doc = json_loadb((const char *)body, n, 0, &je);
    if (!json_is_object(doc)) {
        json_decref(doc);
        return hr_fail(err, HR_EINVAL, "push: the body is not a JSON PushRequest: %s", je.text);
    }
    json_t *series = json_object_get(doc, "series");
    int rc = 0;
    if (series && !json_is_array(series)) rc = hr_fail(err, HR_EINVAL, "push: `series` must be an array");
    size_t i;
    json_t *s;
    json_array_foreach(series, i, s) {
        if (rc) break;
        rc = json_series(s, parca, lim, now, b, err);
    }
    json_decref(doc);
    return rc;
}

int push_decode(const uint8_t *body, size_t n, push_encoding_t enc, const ingest_limits_t *lim, int64_t now, batch_t *b,
                hr_err_t *err) {
    if (enc == PUSH_PROTO) return decode_binary(body, n, lim, now, b, err);
    return decode_json(body, n, enc == PUSH_PARCA_JSON, lim, now, b, err);
}

int push_ingest_proto(const ingest_request_t *r, const ingest_limits_t *lim, batch_t *b, hr_err_t *err) {
    return push_decode(r->body, r->body_len, PUSH_PROTO, lim, r->received_ns, b, err);
}

int push_ingest_json(const ingest_request_t *r, const ingest_limits_t *lim, batch_t *b, hr_err_t *err) {
    return push_decode(r->body, r->body_len, PUSH_JSON, lim, r->received_ns, b, err);
}

int parca_ingest_json(const ingest_request_t *r, const ingest_limits_t *lim, batch_t *b, hr_err_t *err) {
    return push_decode(r->body, r->body_len, PUSH_PARCA_JSON, lim, r->received_ns, b, err);
}
