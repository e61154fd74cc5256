/* jfr.h - Java Flight Recorder recordings (async-profiler, JDK JFR) into a batch.
 *
 * A recording is a sequence of chunks. Each chunk carries its own metadata (the
 * classes of every event and value, with their fields) and constant pools (stack
 * traces, methods, classes, symbols), so the reader is driven by the metadata
 * rather than by hard-coded layouts: any event is parsed, or skipped, field by
 * field. Only chunks with compressed integers (JDK 11+, async-profiler) are read.
 * Strings come UTF-8, Latin-1 or (the JDK's metadata) as UTF-16 code units; a
 * string pool reference reads as NULL.
 *
 * Events become profile types as in Pyroscope:
 *   jdk.ExecutionSample               process_cpu:cpu:nanoseconds:cpu:nanoseconds
 *                                     (one sampling interval per sample: the
 *                                     recording's `interval` setting, else 10 ms)
 *   jdk.ObjectAllocationInNewTLAB     memory:alloc_in_new_tlab_{objects,bytes}
 *   jdk.ObjectAllocationOutsideTLAB   memory:alloc_outside_tlab_{objects,bytes}
 *   jdk.JavaMonitorEnter              mutex:contentions:count:mutex:count and
 *                                     mutex:delay:nanoseconds:mutex:count
 *   jdk.ThreadPark                    block:contentions:count:block:count and
 *                                     block:delay:nanoseconds:block:count
 *   profiler.WallClockSample          wall:wall:nanoseconds:wall:nanoseconds
 *                                     (async-profiler's wall mode: `samples`
 *                                     intervals per event)
 * With async-profiler's `event` setting "wall", execution samples are wall-clock
 * samples too, and a wall-clock sample of a running thread CPU too; an execution
 * sample of a sleeping thread is not CPU (Pyroscope's rules).
 *
 * Context labels: async-profiler gives events a `contextId`, and Pyroscope's Java
 * agent sends the labels of each id beside the recording (LabelsSnapshot, the
 * multipart `labels` part): an event with a listed context counts under the base
 * labels plus its context's (its own series); an event's `spanId` makes its sample a
 * span sample (span_id, as a pprof `profile_id` label does).
 * Frames are `class.method` with the frame's line; lambda and generated accessor
 * class names lose their per-run numbers (`$$Lambda_`, `GeneratedMethodAccessor_`)
 * so profiles from different runs merge. */
#ifndef HEARTH_JFR_H
#define HEARTH_JFR_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "ingest/format.h"
#include "storage/batch.h"
#include "common/labels.h"

typedef struct {
    const labels_t *base;    /* series labels of every profile */
    int64_t time_ns;         /* 0: the first chunk's start */
    int64_t duration_ns;     /* 0: the chunks' total duration */
    size_t max_decompressed; /* a gzipped recording is inflated up to this */
    size_t max_samples;      /* 0 = unlimited */
    const uint8_t *labels;   /* the LabelsSnapshot of the events' context ids (gzip allowed); NULL: none */
    size_t labels_len;
} jfr_opts_t;

/* Decodes a recording (gzipped or not). HR_EUNPROC for anything that is not a
 * readable recording, with what was wrong. */
int jfr_decode(const uint8_t *body, size_t n, const jfr_opts_t *o, batch_t *b, hr_err_t *err);

/* The ingest format `jfr` (format.h): a recording under the request's series, at
 * `from` (else the first chunk's start). */
int jfr_ingest(const ingest_request_t *r, const ingest_limits_t *lim, batch_t *b, hr_err_t *err);
/* SURE when the content (inflated, if gzipped) starts with the chunk magic FLR\0. */
ingest_sniff_t jfr_sniff(const ingest_peek_t *pk);

#endif
