/* ptype.h - profile types: names, aggregation and display units.
 *
 * A profile type is named as in Pyroscope v1 and Parca:
 *   NAME:SAMPLE_TYPE:SAMPLE_UNIT:PERIOD_TYPE:PERIOD_UNIT
 * e.g. process_cpu:cpu:nanoseconds:cpu:nanoseconds. NAME comes from the upload's
 * sample types by Pyroscope's rules (ptype_name). Types whose values are a level
 * at an instant (inuse_*, goroutine counts) are gauges and merge by averaging;
 * everything else is a per-interval count and merges by summing. */
#ifndef HEARTH_PTYPE_H
#define HEARTH_PTYPE_H

#include <stddef.h>

/* The NAME part for a profile whose sample types (after display-name mapping) are
 * types[0..n). Writes into out. */
void ptype_name(const char *const *types, size_t n, char *out, size_t outlen);
/* Pyroscope's default display names (samples -> cpu, contentions -> mutex_count,
 * delay -> mutex_duration, goroutine -> goroutines); NULL when none. */
const char *ptype_default_display(const char *sample_type);

typedef struct {
    char name[64], sample_type[128], sample_unit[64], period_type[128], period_unit[64];
} ptype_parts_t;

/* Splits an id into its parts; returns 0, or -1 if it does not have 5 parts. */
int ptype_split(const char *id, ptype_parts_t *out);
/* 1 when samples of this type merge by averaging (gauges). */
int ptype_is_gauge(const ptype_parts_t *p);
/* Pyroscope flamebearer units and sampleRate for a type: "samples" with rate 1e9 for
 * nanoseconds (so UIs show seconds), "bytes", "objects", "goroutines", ... */
const char *ptype_units(const ptype_parts_t *p, long long *sample_rate);

/* The type a Pyroscope legacy name suffix stands for (cpu, wall, alloc_space,
 * inuse_objects, mutex_count, block_duration, goroutines, ...), or NULL. cpu and
 * wall map to their nanosecond types. */
const char *ptype_from_suffix(const char *suffix);

/* Pyroscope's short profile names (cpu, itimer, wall, alloc_objects, alloc_space,
 * inuse_objects, inuse_space, heap (= inuse_space), goroutines, mutex_count,
 * mutex_duration, block_count, block_duration, lock_count, lock_duration, the JFR
 * TLAB names, live, exceptions) stand for a sample type that different agents store
 * under different type ids (the Node agent's CPU time is wall:cpu:nanoseconds:...).
 * ptype_short_rank says how well type_id fits short_name: 0 is the best fit, higher
 * is worse, -1 is no fit; the query side picks the best fit among the types an
 * application actually has (query/catalog.h). */
int ptype_short_rank(const char *short_name, const char *type_id);
/* The type id a short name means when nothing is stored to choose from; "" when
 * the name is known but has no usual id; NULL when the name is unknown. */
const char *ptype_short_default(const char *short_name);
/* The short name a type id answers to (its best-ranked one), or NULL. */
const char *ptype_short_name(const char *type_id);

#endif
