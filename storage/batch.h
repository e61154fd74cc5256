/* batch.h - the decoded content of one upload, before it reaches the head.
 *
 * Decoders (pprof, folded) intern the upload's symbols into the batch's own symtab
 * and add one batch profile per (profile type, label set); the store then copies
 * the symbols into the tenant's head symtab. Keeping the batch separate means a bad
 * upload is rejected before anything shared is touched. */
#ifndef HEARTH_BATCH_H
#define HEARTH_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "common/labels.h"
#include "storage/segment.h"
#include "storage/symtab.h"

typedef struct {
    char *profile_type;
    labels_t labels;
    int64_t time_ns, duration_ns;
    uint32_t *stacks;
    int64_t *values;
    size_t n, cap;
    span_sample_t *spans; /* the samples that carried a span id, also in stacks/values */
    size_t nspans, spans_cap;
} batch_profile_t;

typedef struct {
    symtab_t *sym;
    batch_profile_t *p;
    size_t n, cap;
    size_t last;                                                 /* batch_profile's lookup hint */
    size_t dropped_negative_gauge;                               /* samples ingest_to_batch left out (request.h) */
    size_t unindexed_span_keys, unindexed_high_cardinality_keys; /* pprof label keys kept off series (pprof.h) */
} batch_t;

int batch_init(batch_t *b); /* 0 or -1 (OOM) */
void batch_destroy(batch_t *b);
/* Returns the profile for (type, labels, time), adding it if new; NULL on OOM. */
batch_profile_t *batch_profile(batch_t *b, const char *profile_type, const labels_t *labels, int64_t time_ns,
                               int64_t duration_ns);
int batch_sample(batch_profile_t *p, uint32_t stack, int64_t value);
/* A sample that carried span id `span` (not 0), and trace id trace[0..1] (hi, lo; NULL
 * or zeros: none): added as batch_sample adds it, and kept as a span sample too
 * (segment.h). 0 or -1 (OOM). */
int batch_span_sample(batch_profile_t *p, uint32_t stack, int64_t value, uint64_t span, const uint64_t trace[2]);
/* Total number of samples over all profiles. */
size_t batch_samples(const batch_t *b);

#endif
