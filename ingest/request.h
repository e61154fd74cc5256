/* request.h - an ingest request: what the WAL stores and replays.
 *
 * The HTTP layer (and the scraper) turn an upload into an ingest_request_t
 * (parameters resolved, multipart fields extracted), ingest_to_batch decodes it with
 * its format's decoder (format.h), and the same request, encoded by
 * ingest_request_encode, is the WAL record. Replay decodes the record and runs
 * ingest_to_batch again: one code path for live ingest and recovery (pipeline.h),
 * so a replayed profile is bit-for-bit the profile that was acknowledged. */
#ifndef HEARTH_REQUEST_H
#define HEARTH_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/err.h"
#include "common/budget.h"
#include "storage/batch.h"

/* A format's code in the WAL record (storage/format/wal.md): a code is never reused or
 * renumbered, since records written by older binaries must replay. The table of
 * formats is format.c. PUSH_* are Pyroscope push.v1 bodies (binary protobuf or
 * JSON), kept as received. */
typedef enum {
    INGEST_PPROF = 1,
    INGEST_FOLDED = 2,
    INGEST_LINES = 3,
    INGEST_PUSH_PROTO = 4,
    INGEST_PUSH_JSON = 5,
    INGEST_PARCA_JSON = 6,  /* Parca's WriteRaw over its HTTP/JSON gateway */
    INGEST_JFR = 7,         /* Java Flight Recorder (format=jfr, or multipart `jfr`) */
    INGEST_OTLP_PROTO = 8,  /* OpenTelemetry profiles: ExportProfilesServiceRequest, protobuf */
    INGEST_OTLP_JSON = 9,   /* the same in OTLP JSON */
    INGEST_PARCA_PROTO = 10 /* Parca's WriteRaw in binary protobuf (gRPC) */
} ingest_format_t;

/* What a decoder refused of an upload it otherwise stored: OTLP answers a request
 * whose profiles are not all sound with a partial success. Only structural faults
 * of a profile (bad indices, missing values) count, never a limit, so that WAL
 * replay, which runs without some limits, refuses exactly what live ingest did. */
typedef struct {
    size_t rejected;   /* profiles left out */
    char message[256]; /* why the first of them was */
} ingest_partial_t;

typedef struct {
    const char *tenant;
    const char *name; /* app.name{k=v} */
    ingest_format_t format;
    const char *spy_name;           /* NULL when absent */
    const char *sample_type_config; /* JSON, NULL when absent */
    int has_from, has_until;
    int64_t from_ns, until_ns, received_ns;
    int64_t sample_rate;
    const uint8_t *body;
    size_t body_len;
    /* The upload's second multipart part, NULL if absent: a pprof's `prev_profile`
     * (deltas are computed, delta.h), or a JFR recording's `labels` (the
     * LabelsSnapshot its events' context ids refer to, jfr.h). */
    const uint8_t *aux_body;
    size_t aux_len;
    /* The series' labels, for a pprof or JFR upload that carries them instead of a
     * `name` (the scraper: no need to wrap a fetched pprof in a push body), packed
     * by ingest_labels_pack; NULL when absent. As in a push series, __name__ names
     * a pprof's profile type and service_name defaults to "unknown_service". */
    const char *labels;
    size_t labels_len;
    /* Not logged: where a decoder that leaves out part of an upload (OTLP) says what
     * it left out; NULL when the caller does not ask. */
    ingest_partial_t *partial;
} ingest_request_t;

typedef struct {
    size_t max_decompressed;      /* gunzipped pprof bytes */
    size_t max_samples;           /* per profile, 0 = unlimited */
    size_t max_labels;            /* per series */
    mem_budget_t *decode_budget;  /* shared by concurrent decodes; NULL = unbounded (WAL replay) */
    size_t max_label_value_bytes; /* 0 = unchecked (WAL replay); names are then also held to LABEL_NAME_MAX */
} ingest_limits_t;

#define LABEL_NAME_MAX 1024 /* bytes, as Pyroscope's default */

/* Checks one series' labels against lim: count, name and value sizes. Decoders call
 * it as early as they know a series' labels (before decoding its profile);
 * ingest_to_batch checks every series again at the end. 0, or -1 with HR_EINVAL. */
int ingest_check_labels(const labels_t *l, const ingest_limits_t *lim, hr_err_t *err);

/* Appends l to out as a request's `labels`: name\0value\0 per label (C strings hold
 * no NUL, so the form is unambiguous, and a decoded record can borrow it). */
void ingest_labels_pack(const labels_t *l, buf_t *out);

/* One label of a push-style series (push.v1, Parca's WriteRaw, a request's
 * `labels`): __name__ is the profile type name (copied into type_name, cap bytes),
 * other __-prefixed labels are Pyroscope-internal and dropped, names must be valid
 * and values UTF-8. 0, or -1 with HR_EINVAL (HR_ENOMEM). */
int ingest_label_add(labels_t *l, char *type_name, size_t cap, const char *name, const char *value, hr_err_t *err);

/* The series a pprof, JFR or folded upload is stored under. */
typedef struct {
    labels_t labels;
    char app[512];       /* application name: service_name unless a label sets it */
    char type_name[128]; /* __name__ of carried labels; "": Pyroscope's rules decide */
} ingest_series_t;

/* Reads r's series: from r->labels when it carries them (app "unknown_service"),
 * else from r->name (app.type{k=v}, appname.h). s->labels is initialized either
 * way: the caller destroys it. 0, or -1 with HR_EINVAL. */
int ingest_series_parse(const ingest_request_t *r, ingest_series_t *s, hr_err_t *err);
/* Sets service_name to s->app (unless a label set it) and pyroscope_spy to r's
 * spyName, then checks the labels against lim (ingest_check_labels). */
int ingest_series_finish(const ingest_request_t *r, ingest_series_t *s, const ingest_limits_t *lim, hr_err_t *err);
/* Both, for formats that store under the request's series as it is (pprof, JFR). */
int ingest_series_read(const ingest_request_t *r, const ingest_limits_t *lim, ingest_series_t *s, hr_err_t *err);

/* Appends the WAL form of r. */
void ingest_request_encode(const ingest_request_t *r, buf_t *out);
/* Parses a WAL record; r's strings and body borrow from p (which must outlive r;
 * strings are NUL-terminated in the record). */
int ingest_request_decode(const uint8_t *p, size_t n, ingest_request_t *r, hr_err_t *err);

/* Decodes the upload into b (initialized by the caller) with its format's decoder
 * (format.h), then checks every series' labels and values. Negative samples of gauge
 * types (ptype_is_gauge: inuse_*, goroutines) are left out and counted in
 * b->dropped_negative_gauge: a level cannot be below zero. */
int ingest_to_batch(const ingest_request_t *r, const ingest_limits_t *lim, batch_t *b, hr_err_t *err);

#endif
