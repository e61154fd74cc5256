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

/* ---- exemplars ---- */

typedef struct {
    uint32_t series;
    size_t bucket;
} ref_t;

typedef struct {
    exemplar_t *ex;
    ref_t *refs; /* the set exemplars, ordered by series id */
    size_t n;
    int oom;
} labeller_t;

static int by_series(const void *a, const void *b) {
    const ref_t *x = a, *y = b;
    return (x->series > y->series) - (x->series < y->series);
}

/* Copies series s's labels into the exemplars it shows. */
static void label_exemplars(void *ctx, const series_t *s) {
    labeller_t *l = ctx;
    size_t lo = 0, hi = l->n;
    while (lo < hi) { /* the first exemplar of series s */
        size_t mid = (lo + hi) / 2;
        if (l->refs[mid].series < s->id) lo = mid + 1;
        else hi = mid;
    }
    for (size_t k = lo; k < l->n && l->refs[k].series == s->id; k++)
        if (labels_copy(&l->ex[l->refs[k].bucket].labels, &s->labels)) l->oom = 1;
}

/* The group's largest profile per bucket, and their labels; sel narrowed to it. */
static int group_exemplars(store_t *st, const merge_query_t *q, const selector_t *sel, group_t *g, hr_err_t *err) {
    const merge_result_t *m = &g->m;
    if (!m->nbuckets || !m->tl_step) return 0;
    if (!(g->ex = calloc(m->nbuckets, sizeof *g->ex))) return hr_fail(err, HR_ENOMEM, "out of memory");
    catalog_query_t cq = {q->tenant, sel, 0, q->from, q->until, q->deadline_ns};
    catalog_profile_t *p;
    size_t np;
    if (catalog_profiles(st, &cq, &p, &np, err)) return -1;
    for (size_t i = 0; i < np; i++) { /* newest first: among equals the newest stays */
        if (p[i].time_ns < m->tl_start) continue;
        size_t b = (size_t)((p[i].time_ns - m->tl_start) / m->tl_step);
        if (b < m->nbuckets && (!g->ex[b].set || p[i].total > g->ex[b].p.total)) g->ex[b].set = 1, g->ex[b].p = p[i];
    }
    free(p);
    labeller_t l = {.ex = g->ex};
    if (!(l.refs = malloc((m->nbuckets + 1) * sizeof *l.refs))) return hr_fail(err, HR_ENOMEM, "out of memory");
    for (size_t b = 0; b < m->nbuckets; b++)
        if (g->ex[b].set) l.refs[l.n++] = (ref_t){g->ex[b].p.series, b};
    qsort(l.refs, l.n, sizeof *l.refs, by_series);
    int rc = l.n ? catalog_series(st, &cq, label_exemplars, &l, err) : 0;
    free(l.refs);
    return rc == 0 && l.oom ? hr_fail(err, HR_ENOMEM, "out of memory") : rc;
}

int groupby_exemplars(store_t *st, const merge_query_t *q, selector_t *sel, grouped_t *g, hr_err_t *err) {
    int rc = 0;
    for (size_t i = 0; i < g->n && rc == 0; i++) {
        size_t n0 = sel->n;
        for (size_t k = 0; k < g->width && rc == 0; k++) rc = selector_add_eq(sel, g->names[k], g->v[i].vals[k], err);
        if (rc == 0) rc = group_exemplars(st, q, sel, &g->v[i], err);
        selector_truncate(sel, n0);
    }
    return rc;
}

static void exemplars_free(group_t *g) {
    for (size_t b = 0; g->ex && b < g->m.nbuckets; b++) labels_destroy(&g->ex[b].labels);
    free(g->ex);
}

void grouped_destroy(grouped_t *g) {
    for (size_t i = 0; i < g->n; i++) merge_result_destroy(&g->v[i].m), exemplars_free(&g->v[i]);
    free(g->v);
    free(g->g.v);
    free(g->other);
    memset(g, 0, sizeof *g);
}
