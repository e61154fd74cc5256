/* groupby.c - see groupby.h. */
#include "query/groupby.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    group_t g;
    double key; /* what the chart shows of it: the sum of its timeline (else its total) */
    size_t order;
} ranked_t;

static int by_key_desc(const void *a, const void *b) {
    const ranked_t *x = a, *y = b;
    if (x->key != y->key) return (x->key < y->key) - (x->key > y->key);
    return (x->order > y->order) - (x->order < y->order);
}

static double rank_key(const merge_result_t *m) {
    if (!m->nbuckets) return m->total;
    double s = 0;
    for (size_t b = 0; b < m->nbuckets; b++) s += m->timeline[b];
    return s;
}

/* Merges one group: sel narrowed to vals, then restored. */
static int merge_group(store_t *st, const merge_query_t *q, selector_t *sel, char *const *names, size_t width,
                       const char *const *vals, merge_result_t *m, hr_err_t *err) {
    size_t n0 = sel->n;
    int rc = 0;
    for (size_t i = 0; i < width && rc == 0; i++) rc = selector_add_eq(sel, names[i], vals[i], err);
    merge_query_t g = *q;
    g.sel = sel;
    g.want_stacks = 0;
    if (rc == 0) rc = merge_run(st, &g, m, err);
    selector_truncate(sel, n0);
    return rc;
}

/* Sums the timelines of v[from..n) into out->other. 0 or -1. */
static int sum_other(grouped_t *out, const ranked_t *v, size_t from, size_t n) {
    size_t nb = v[from].g.m.nbuckets;
    if (!(out->other = calloc(nb ? nb : 1, sizeof *out->other))) return -1;
    for (size_t i = from; i < n; i++) {
        for (size_t b = 0; b < nb && b < v[i].g.m.nbuckets; b++) out->other[b] += v[i].g.m.timeline[b];
        out->other_total += v[i].g.m.total;
    }
    out->nother = n - from;
    return 0;
}

int groupby_run(store_t *st, const merge_query_t *q, selector_t *sel, char *const *names, size_t width, size_t limit,
                grouped_t *out, hr_err_t *err) {
    memset(out, 0, sizeof *out);
    out->names = names, out->width = width;
    catalog_query_t cq = {q->tenant, sel, 1, q->from, q->until, q->deadline_ns};
    if (catalog_groups(st, &cq, 1, names, width, &out->g, err)) return -1;
    size_t n = out->g.n;
    ranked_t *rk = calloc(n + 1, sizeof *rk);
    int rc = rk ? 0 : hr_fail(err, HR_ENOMEM, "out of memory");
    for (size_t i = 0; i < n && rc == 0; i++) {
        rk[i].order = i;
        rk[i].g.vals = (const char *const *)out->g.v + i * width;
        rc = merge_group(st, q, sel, names, width, rk[i].g.vals, &rk[i].g.m, err);
        rk[i].key = rc ? 0 : rank_key(&rk[i].g.m);
    }
    if (rc == 0) {
        qsort(rk, n, sizeof *rk, by_key_desc);
        size_t keep = limit && limit < n ? limit : n;
        if (keep < n && sum_other(out, rk, keep, n)) rc = hr_fail(err, HR_ENOMEM, "out of memory");
        if (rc == 0 && !(out->v = calloc(keep + 1, sizeof *out->v))) rc = hr_fail(err, HR_ENOMEM, "out of memory");
        for (size_t i = 0; rc == 0 && i < keep; i++) out->v[out->n++] = rk[i].g, rk[i].g.m = (merge_result_t){0};
    }
    for (size_t i = 0; rk && i < n; i++) merge_result_destroy(&rk[i].g.m);
    free(rk);
    return rc;
}

void grouped_destroy(grouped_t *g) {
    for (size_t i = 0; i < g->n; i++) merge_result_destroy(&g->v[i].m);
    free(g->v);
    free(g->g.v);
    free(g->other);
    memset(g, 0, sizeof *g);
}
