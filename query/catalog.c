/* catalog.c - see catalog.h. */
#include "query/catalog.h"

#include <stdlib.h>

typedef struct {
    uint8_t *present;
    uint32_t n;
    int64_t from, until;
} presence_t;

static int mark(void *ctx, const segment_t *seg) {
    presence_t *p = ctx;
    for (size_t i = 0; i < seg->nprofiles; i++) {
        const seg_profile_t *r = &seg->profiles[i];
        if (r->series < p->n && r->time_ns >= p->from && r->time_ns <= p->until) p->present[r->series] = 1;
    }
    return 0;
}

typedef struct {
    const selector_t *sel;
    const uint8_t *present;
    uint32_t n;
    index_series_fn fn;
    void *ctx;
} filter_t;

static void filter(void *ctx, const series_t *s) {
    filter_t *f = ctx;
    if (f->present && (s->id >= f->n || !f->present[s->id])) return;
    if (f->sel && !selector_matches(f->sel, s->profile_type, &s->labels)) return;
    f->fn(f->ctx, s);
}

int catalog_series(store_t *st, const char *tenant, const selector_t *sel, int ranged, int64_t from, int64_t until,
                   index_series_fn fn, void *ctx, hr_err_t *err) {
    presence_t p = {NULL, 0, from, until};
    if (ranged) {
        p.n = (uint32_t)index_series_total(store_index(st)) + 1; /* ids are dense */
        if (!(p.present = calloc(p.n, 1))) return hr_fail(err, HR_ENOMEM, "out of memory");
        store_scan(st, tenant, from, until, mark, &p, err);
    }
    filter_t f = {sel, p.present, p.n, fn, ctx};
    index_each_series(store_index(st), tenant, filter, &f);
    free(p.present);
    return 0;
}
