/* pprof.h - decoding pprof (profile.proto, gzipped or not) into a batch.
 *
 * The wire format is parsed by protobuf-c code generated from wire/profile.proto.
 * Every reference in the profile (string indices, location/function/mapping ids) is
 * checked before use: a profile that refers to something it does not contain is
 * rejected with a message naming the first bad reference.
 *
 * Before unpacking, a census of the wire counts the samples and estimates the
 * memory the decode takes: a profile over max_samples is refused there, and the
 * estimate is reserved from the shared decode budget for the decode's duration.
 *
 * Each sample type becomes its own profile type; each distinct set of string
 * sample labels becomes its own series. Not series labels: numeric labels; the
 * per-sample keys span_id, trace_id, profile_id and span_name (trace links: one
 * series per span would exhaust the series limit within minutes); and any key with
 * more than PPROF_MAX_SERIES_LABEL_VALUES values in one profile. Those are not stored
 * yet: samples carry no attributes until the block format does. */
#ifndef HEARTH_PPROF_H
#define HEARTH_PPROF_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/budget.h"
#include "storage/batch.h"
#include "common/labels.h"

/* A pprof sample label key with more distinct values than this in one profile is not
 * made a series label (it would split the upload into as many series). */
#define PPROF_MAX_SERIES_LABEL_VALUES 64

typedef struct {
    const char *sample_type, *display_name; /* from sample_type_config */
    int cumulative;                         /* its "cumulative": 1, 0, or -1 when not given */
} pprof_display_t;

typedef struct {
    const labels_t *base; /* series labels every sample gets */
    int64_t time_ns;      /* 0: take time_nanos (or now) */
    int64_t duration_ns;  /* 0: take duration_nanos */
    int64_t now_ns;
    size_t max_decompressed;
    size_t max_samples; /* 0 = unlimited */
    const pprof_display_t *display;
    size_t ndisplay;
    const char *name;         /* the profile name (__name__ of a push), NULL: Pyroscope's rules */
    mem_budget_t *budget;     /* decode memory shared across requests; NULL = unbounded */
    int addresses_normalized; /* the addresses are the files' own: mappings are stored with no range */
} pprof_opts_t;

/* Element counts of a raw (not gzipped) profile, read without allocating, and the
 * bytes unpacking and decoding it would take at peak (an estimate from those counts). */
typedef struct {
    size_t samples, location_ids, values, labels;
    size_t locations, lines, functions, mappings, strings, string_bytes;
    size_t bytes;
} pprof_census_t;
int pprof_census(const uint8_t *p, size_t n, pprof_census_t *c, hr_err_t *err);

int pprof_decode(const uint8_t *body, size_t n, const pprof_opts_t *opts, batch_t *out, hr_err_t *err);

/* 1 when a sample label key names a trace link (span_id, trace_id, profile_id,
 * span_name): per sample, never a series label. Shared with OTLP's sample attributes. */
int pprof_per_sample_key(const char *key);

#endif
