/* vec.h - growing a plain C array in place.
 *
 * Hearth keeps its columns and tables as plain arrays (pointer, length, capacity)
 * so they can be walked, encoded and freed without indirection; vec_reserve is the
 * one place that grows them. */
#ifndef HEARTH_VEC_H
#define HEARTH_VEC_H

#include <stddef.h>
#include <stdlib.h>

/* Makes *arr hold at least `need` elements of `size` bytes. Returns 0 or -1 (OOM,
 * *arr unchanged). */
static inline int vec_reserve(void *arr, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void **p = arr;
    void *n = realloc(*p, c * size);
    if (!n) return -1;
    *p = n;
    *cap = c;
    return 0;
}

#define VEC_RESERVE(arr, cap, need) vec_reserve(&(arr), &(cap), (need), sizeof *(arr))

/* vec_reserve to exactly `need` elements, for arrays whose final size is known (a
 * decoded table): no doubling slack. */
static inline int vec_reserve_exact(void *arr, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return 0;
    void **p = arr;
    void *n = realloc(*p, need * size);
    if (!n) return -1;
    *p = n;
    *cap = need;
    return 0;
}

#define VEC_RESERVE_EXACT(arr, cap, need) vec_reserve_exact(&(arr), &(cap), (need), sizeof *(arr))

#endif
