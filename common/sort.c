#include "common/sort.h"

#include <stdlib.h>
#include <string.h>

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Below this a scratch copy and four histograms cost more than they save. */
enum { RADIX_MIN = 64 };

void sort_u32(uint32_t *v, size_t n) {
    if (n < 2) return; /* sorted already, and v may be NULL when n is 0 */
    uint32_t *tmp = n >= RADIX_MIN ? malloc(n * sizeof *tmp) : NULL;
    if (!tmp) {
        qsort(v, n, sizeof *v, cmp_u32);
        return;
    }
    size_t count[4][256] = {{0}};
    for (size_t i = 0; i < n; i++)
        for (int d = 0; d < 4; d++) count[d][(v[i] >> (8 * d)) & 0xff]++;
    uint32_t *src = v, *dst = tmp;
    for (int d = 0; d < 4; d++) {
        if (count[d][(v[0] >> (8 * d)) & 0xff] == n) continue; /* every id shares this byte */
        size_t at = 0;
        for (int b = 0; b < 256; b++) {
            size_t c = count[d][b];
            count[d][b] = at, at += c;
        }
        for (size_t i = 0; i < n; i++) dst[count[d][(src[i] >> (8 * d)) & 0xff]++] = src[i];
        uint32_t *t = src;
        src = dst, dst = t;
    }
    if (src != v) memcpy(v, src, n * sizeof *v);
    free(tmp);
}
