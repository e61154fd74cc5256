/* catalog.c - see catalog.h. */
#include "query/catalog.h"

#include <stdlib.h>

#include "common/vec.h"
#include "query/merge.h"

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

typedef struct {
    const uint8_t *bits;
    uint32_t nbits;
    int64_t from, until;
    catalog_profile_t *v;
    size_t len, cap;
} plist_t;

static int list_segment(void *ctx, const segment_t *seg) {
    plist_t *l = ctx;
    for (size_t i = 0; i < seg->nprofiles; i++) {
        const seg_profile_t *r = &seg->profiles[i];
        if (r->series >= l->nbits || !l->bits[r->series] || r->time_ns < l->from || r->time_ns > l->until) continue;
        if (VEC_RESERVE(l->v, l->cap, l->len + 1)) return -1;
        l->v[l->len++] = (catalog_profile_t){r->series, r->time_ns, r->total};
    }
    return 0;
}

static int newest_first(const void *a, const void *b) {
    const catalog_profile_t *x = a, *y = b;
    if (x->time_ns != y->time_ns) return x->time_ns < y->time_ns ? 1 : -1;
    return (x->series > y->series) - (x->series < y->series);
}

int catalog_profiles(store_t *st, const char *tenant, const selector_t *sel, int64_t from, int64_t until,
                     catalog_profile_t **out, size_t *n, hr_err_t *err) {
    plist_t l = {.from = from, .until = until};
    *out = NULL, *n = 0;
    if (!sel->profile_type) return hr_fail(err, HR_EINVAL, "the query must name a profile type");
    uint32_t nbits;
    uint8_t *bits = merge_select_series(st, tenant, sel, &nbits);
    if (!bits) return hr_fail(err, HR_ENOMEM, "out of memory");
    l.bits = bits, l.nbits = nbits;
    int rc = store_scan(st, tenant, from, until, list_segment, &l, err);
    free(bits);
    if (rc) {
        free(l.v);
        return err->code ? -1 : hr_fail(err, HR_ENOMEM, "out of memory listing profiles");
    }
    if (l.len) qsort(l.v, l.len, sizeof *l.v, newest_first);
    size_t w = 0; /* fold same series + same instant (a profile split over segments) */
    for (size_t i = 0; i < l.len; i++) {
        if (w && l.v[w - 1].series == l.v[i].series && l.v[w - 1].time_ns == l.v[i].time_ns) l.v[w - 1].total += l.v[i].total;
        else l.v[w++] = l.v[i];
    }
    *out = l.v, *n = w;
    return 0;
}
