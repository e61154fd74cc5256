/* pprof_edit.h - rewriting a pprof before it is stored.
 *
 * Sometimes the writer knows more than the profile says. Go's allocs?seconds=N
 * delta carries inuse_* values too, but there they are differences (negative where
 * memory was freed), and a heap snapshot's alloc_* count since the process
 * started; stored as they are, the first shows a negative heap and the second
 * re-counts a process's whole life in every snapshot. The scraper keeps only the
 * sample types that mean what their names say, by rewriting the profile: the WAL
 * then holds exactly what is stored, and replay needs no extra parameters. */
#ifndef HEARTH_PPROF_EDIT_H
#define HEARTH_PPROF_EDIT_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/err.h"

/* Appends to out a raw (not gzipped) pprof that holds only the sample types named
 * in keep[0..nkeep), every sample losing the values of the others. in may be
 * gzipped (inflated up to max_decompressed bytes). Returns 0, or -1 with err:
 * HR_EUNPROC when in is not a pprof or has none of the kept types, HR_ETOOBIG past
 * max_decompressed, HR_ENOMEM. Samples whose value count does not match the sample
 * types are left alone (the decoder refuses them with a message). */
int pprof_keep_types(const uint8_t *in, size_t n, size_t max_decompressed, const char *const *keep, size_t nkeep,
                     buf_t *out, hr_err_t *err);

#endif
