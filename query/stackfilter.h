/* stackfilter.h - pprof's -focus, -ignore and -hide on merges.
 *
 * Each is a regex searched (unanchored, as Go's MatchString) in a location's
 * function names and file names and its mapping's file, as pprof's
 * FilterSamplesByName does:
 *   focus   keeps the samples with at least one location that matches;
 *   ignore  drops the samples with any location that matches (ignore wins over focus
 *           on a location matching both);
 *   hide    removes the matching frames (a location's lines that match; the whole
 *           location when its mapping matches or no line is left), and drops samples
 *           left with no frame.
 * With any of them set, a sample without locations is dropped too, as in pprof. The
 * first two (and hide's dropping) decide per stack, so they apply in the merge itself
 * (stackfilter_match): the totals and the timeline are those of the kept samples.
 * Hiding frames then rewrites the merged result (stackfilter_hide). */
#ifndef HEARTH_STACKFILTER_H
#define HEARTH_STACKFILTER_H

#include <stdint.h>

#include "common/regex.h"
#include "storage/symtab.h"

typedef struct {
    const hr_regex_t *focus, *ignore, *hide; /* borrowed; NULL: not set */
} stackfilter_t;

/* 1 when f sets anything. */
static inline int stackfilter_active(const stackfilter_t *f) { return f && (f->focus || f->ignore || f->hide); }

/* One byte per stack of sym: 1 when the filter keeps its samples. malloc'd (caller
 * frees); NULL on OOM. sym is only read. */
uint8_t *stackfilter_match(const symtab_t *sym, const stackfilter_t *f);

/* Rewrites a merged profile (its symtab, owned, and self values by stack id) with
 * the frames matching hide removed; stacks that become equal are summed. On success
 * *sym and *self are replaced (the old ones freed) and *nself updated. 0 or -1 (OOM;
 * nothing changed). */
int stackfilter_hide(symtab_t **sym, double **self, size_t *nself, size_t *self_cap, const hr_regex_t *hide);

#endif
