/* segment.h - profiles as columns over one symbol table.
 *
 * A segment is the unit both the head (recent data, in memory) and a block (a
 * file, once decoded) present to queries: a symtab plus one row per profile
 * (series, time, duration, where its samples start, how many) and the sample
 * columns (stack id, value) those rows point into. Within a profile, samples are
 * sorted by stack id with equal stacks summed, which makes block encoding compact
 * (stack deltas) and merges cheap. */
#ifndef HEARTH_SEGMENT_H
#define HEARTH_SEGMENT_H

#include <stddef.h>
#include <stdint.h>

#include "storage/symtab.h"

typedef struct {
    uint32_t series;
    uint32_t nsamples;
    int64_t time_ns, duration_ns;
    uint64_t first; /* index of the profile's first sample */
    int64_t total;  /* sum of its values, kept for time series */
} seg_profile_t;

typedef struct segment {
    symtab_t *sym; /* owned */
    seg_profile_t *profiles;
    size_t nprofiles, profiles_cap;
    uint32_t *stacks;
    int64_t *values;
    size_t nsamples, samples_cap;
    int64_t min_time, max_time; /* over profiles; INT64_MAX/INT64_MIN when empty */
} segment_t;

/* A sample as (stack id, value): the unit segment rows and deltas are built from. */
typedef struct {
    uint32_t stack;
    int64_t value;
} stack_value_t;

/* Sorts p by stack, sums repeated stacks and drops zero sums, in place; returns the
 * new count. */
size_t stack_values_fold(stack_value_t *p, size_t n);

/* Returns an empty segment with its own new symtab, or NULL (OOM). */
segment_t *segment_new(void);
void segment_free(segment_t *s);

/* Appends one profile. stacks/values (n of them, ids valid in s->sym, in any order,
 * repeats allowed) are copied, sorted and summed per stack; zero sums are dropped.
 * Returns 0, or -1 on OOM (the segment is unchanged). */
int segment_add(segment_t *s, uint32_t series, int64_t time_ns, int64_t duration_ns,
                const uint32_t *stacks, const int64_t *values, size_t n);

/* Approximate heap bytes held (columns and symbols). */
size_t segment_bytes(const segment_t *s);

/* Sorts *order (nprofiles indices) by (series, time): the block row order. */
int segment_sorted_order(const segment_t *s, uint32_t **order);

#endif
