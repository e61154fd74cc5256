/* sort.h - sorting arrays of 32-bit ids.
 *
 * A cut sorts the stack ids each partition names (tens of thousands per partition, a
 * partition per service): qsort's comparator call per comparison was a visible part of
 * a cut. Ids are small dense numbers, so a byte-wise radix sort sorts them in a few
 * linear passes, skipping every byte all of them share (the high ones, mostly). */
#ifndef HEARTH_SORT_H
#define HEARTH_SORT_H

#include <stddef.h>
#include <stdint.h>

/* Sorts v[0..n) ascending (v may be NULL when n is 0). Never fails: without memory
 * for its scratch copy it falls back to qsort, in place. */
void sort_u32(uint32_t *v, size_t n);

#endif
