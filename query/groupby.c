/* groupby.c - see groupby.h. */
#include "query/groupby.h"

#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/vec.h"

/* A value tuple as one string, each value prefixed by its length (so no two tuples
 * share a key, whatever bytes the values hold). */
static void tuple_key(buf_t *b, const char *const *vals, size_t width) {
    b->len = 0;
    for (size_t k = 0; k < width; k++) {
        size_t n = strlen(vals[k]);
        buf_printf(b, "%zu:", n);
        buf_append(b, vals[k], n);
    }
    buf_putc(b, 0);
}

typedef struct {
    char *key;
    uint32_t group;
} gkey_t;

static int by_key(const void *a, const void *b) { return strcmp(((const gkey_t *)a)->key, ((const gkey_t *)b)->key); }

typedef struct {
    char *const *names; /* the group-by's labels */
    size_t width, n;    /* labels, and groups */
    gkey_t *keys;       /* the groups', sorted (n of them) */
    int32_t *group_of;  /* by series id: the kept group, or -1 */
    size_t ngroup_of, cap;
    const char **vals; /* width of them: a series' values */
    char (*bufs)[256]; /* width of them: room for computed ones (__name__) */
    buf_t key;
    int oom;
} mapper_t;

static void map_series(void *ctx, const series_t *s) {
    mapper_t *m = ctx;
    for (size_t k = 0; k < m->width; k++) {
        m->vals[k] = catalog_label_value(s, m->names[k], m->bufs[k], sizeof m->bufs[k]);
        if (!m->vals[k]) m->vals[k] = "";
    }
    tuple_key(&m->key, m->vals, m->width);
    gkey_t want = {(char *)m->key.data, 0},
           *hit = m->key.oom ? NULL : bsearch(&want, m->keys, m->n, sizeof *m->keys, by_key);
    if (VEC_RESERVE(m->group_of, m->cap, (size_t)s->id + 1)) {
        m->oom = 1;
        return;
    }
    while (m->ngroup_of <= s->id) m->group_of[m->ngroup_of++] = -1;
    m->group_of[s->id] = hit ? (int32_t)hit->group : -1;
}

/* The sorted keys of n value tuples, tuple i at vals(ctx, i); NULL on OOM. */
static gkey_t *group_keys(size_t n, size_t width, const char *const *(*vals)(const void *, size_t), const void *ctx) {
    gkey_t *keys = calloc(n + 1, sizeof *keys);
    buf_t b;
    buf_init(&b);
    for (size_t i = 0; keys && i < n; i++) {
        tuple_key(&b, vals(ctx, i), width);
        keys[i] = (gkey_t){b.oom ? NULL : strdup((char *)b.data), (uint32_t)i};
        if (!keys[i].key) {
            for (size_t k = 0; k < i; k++) free(keys[k].key);
            free(keys);
            keys = NULL;
        }
    }
    buf_free(&b);
    if (keys) qsort(keys, n, sizeof *keys, by_key);
    return keys;
}

/* Maps every series q selects to its group among the n tuples at vals(ctx, i): m->group_of
 * by series id (-1: none). 0, or -1 with err; mapper_destroy either way. */
static int map_groups(store_t *st, const catalog_query_t *cq, char *const *names, size_t width, size_t n,
                      const char *const *(*vals)(const void *, size_t), const void *ctx, mapper_t *m, hr_err_t *err) {
    memset(m, 0, sizeof *m);
    m->names = names, m->width = width, m->n = n;
    m->keys = group_keys(n, width, vals, ctx);
    m->vals = calloc(width + 1, sizeof *m->vals);
    m->bufs = calloc(width + 1, sizeof *m->bufs);
    buf_init(&m->key);
    int rc = m->keys && m->vals && m->bufs ? catalog_series(st, cq, map_series, m, err)
                                           : hr_fail(err, HR_ENOMEM, "out of memory");
    if (rc == 0 && (m->oom || m->key.oom)) rc = hr_fail(err, HR_ENOMEM, "out of memory");
    return rc;
}

static void mapper_destroy(mapper_t *m) {
    for (size_t i = 0; m->keys && i < m->n; i++) free(m->keys[i].key);
    free(m->keys);
    free(m->group_of);
    free(m->vals);
    free(m->bufs);
    buf_free(&m->key);
}

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

/* Tuple i of a catalog_groups_t. */
static const char *const *found_vals(const void *ctx, size_t i) {
    const catalog_groups_t *g = ctx;
    return g->v + i * g->width;
}

/* Merges every group in one pass over q's selection (merge_run_split): rk[i].g.m. */
static int merge_groups(store_t *st, const merge_query_t *q, selector_t *sel, grouped_t *out, ranked_t *rk,
                        hr_err_t *err) {
    catalog_query_t cq = {q->tenant, sel, 0, q->from, q->until, q->deadline_ns};
    mapper_t mp;
    int rc = map_groups(st, &cq, out->names, out->width, out->g.n, found_vals, &out->g, &mp, err);
    merge_result_t *parts = rc ? NULL : calloc(out->g.n + 1, sizeof *parts);
    if (rc == 0 && !parts) rc = hr_fail(err, HR_ENOMEM, "out of memory");
    merge_query_t one = *q;
    one.sel = sel;
    one.want_stacks = 0;
    merge_split_t split = {mp.group_of, mp.ngroup_of, parts, out->g.n};
    if (rc == 0) rc = merge_run_split(st, &one, &split, err);
    for (size_t i = 0; parts && i < out->g.n; i++) rk[i].g.m = parts[i];
    free(parts);
    mapper_destroy(&mp);
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
    if (width > GROUPBY_MAX_LABELS)
        return hr_fail(err, HR_EINVAL, "a group-by takes at most %d labels, not %zu", GROUPBY_MAX_LABELS, width);
    out->names = names, out->width = width;
    catalog_query_t cq = {q->tenant, sel, 1, q->from, q->until, q->deadline_ns};
    if (catalog_groups(st, &cq, 1, names, width, &out->g, err)) return -1;
    size_t n = out->g.n;
    uint64_t buckets = q->step > 0 && q->until >= q->from ? (uint64_t)((q->until - q->from) / q->step) + 1 : 1;
    if (n && buckets > GROUPBY_MAX_POINTS / n)
        return hr_fail(err, HR_EINVAL,
                       "%zu groups of %llu steps each is more than %d points: raise the step, narrow the range or "
                       "the selection",
                       n, (unsigned long long)buckets, GROUPBY_MAX_POINTS);
    ranked_t *rk = calloc(n + 1, sizeof *rk);
    int rc = rk ? 0 : hr_fail(err, HR_ENOMEM, "out of memory");
    if (rc == 0 && n) rc = merge_groups(st, q, sel, out, rk, err);
    for (size_t i = 0; i < n && rc == 0; i++) {
        rk[i].order = i;
        rk[i].g.vals = (const char *const *)out->g.v + i * width;
        rk[i].key = rank_key(&rk[i].g.m);
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

/* ---- exemplars ----
 *
 * One pass for every group: the series walk maps each selected series to its kept
 * group (by its value tuple), one totals-only profile list picks each group's
 * largest profile per bucket, and a second walk copies the chosen series' labels. */

typedef struct {
    uint32_t series;
    exemplar_t *ex;
} ref_t;

typedef struct {
    ref_t *refs; /* ordered by series id */
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
        if (labels_copy(&l->refs[k].ex->labels, &s->labels)) l->oom = 1;
}

int groupby_label(store_t *st, const merge_query_t *q, selector_t *sel, exemplar_t *const *ex, size_t n,
                  hr_err_t *err) {
    catalog_query_t cq = {q->tenant, sel, 0, q->from, q->until, q->deadline_ns};
    labeller_t l = {.refs = malloc((n ? n : 1) * sizeof *l.refs), .n = n};
    if (!l.refs) return hr_fail(err, HR_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) l.refs[i] = (ref_t){ex[i]->p.series, ex[i]};
    qsort(l.refs, l.n, sizeof *l.refs, by_series);
    int rc = l.n ? catalog_series(st, &cq, label_exemplars, &l, err) : 0;
    free(l.refs);
    return rc == 0 && l.oom ? hr_fail(err, HR_ENOMEM, "out of memory") : rc;
}

/* Tuple i of the kept groups. */
static const char *const *kept_vals(const void *ctx, size_t i) { return ((const grouped_t *)ctx)->v[i].vals; }

int groupby_profiles(store_t *st, const merge_query_t *q, selector_t *sel, const grouped_t *g, int spans,
                     groupby_profile_fn fn, void *ctx, hr_err_t *err) {
    catalog_query_t cq = {q->tenant, sel, 0, q->from, q->until, q->deadline_ns};
    mapper_t mp;
    int rc = map_groups(st, &cq, g->names, g->width, g->n, kept_vals, g, &mp, err);
    catalog_profile_t *p = NULL;
    size_t np = 0;
    if (rc == 0) rc = (spans ? catalog_spans : catalog_profiles)(st, &cq, &p, &np, err);
    for (size_t i = 0; rc == 0 && i < np; i++)
        if (p[i].series < mp.ngroup_of && mp.group_of[p[i].series] >= 0)
            fn(ctx, (size_t)mp.group_of[p[i].series], &p[i]);
    free(p);
    mapper_destroy(&mp);
    return rc;
}

/* Keeps profile p as its group's bucket exemplar if it is the largest so far
 * (profiles come newest first: among equals the newest stays). */
static void offer(void *ctx, size_t group, const catalog_profile_t *p) {
    group_t *g = &((grouped_t *)ctx)->v[group];
    const merge_result_t *m = &g->m;
    if (!g->ex || p->time_ns < m->tl_start) return;
    size_t b = (size_t)((p->time_ns - m->tl_start) / m->tl_step);
    if (b < m->nbuckets && (!g->ex[b].set || p->total > g->ex[b].p.total)) g->ex[b].set = 1, g->ex[b].p = *p;
}

int groupby_exemplars(store_t *st, const merge_query_t *q, selector_t *sel, grouped_t *g, hr_err_t *err) {
    for (size_t i = 0; i < g->n; i++) {
        const merge_result_t *m = &g->v[i].m;
        if (!m->nbuckets || !m->tl_step) continue;
        if (!(g->v[i].ex = calloc(m->nbuckets, sizeof *g->v[i].ex))) return hr_fail(err, HR_ENOMEM, "out of memory");
        g->v[i].nex = m->nbuckets;
    }
    if (groupby_profiles(st, q, sel, g, 0, offer, g, err)) return -1;
    exemplar_t **set = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = 0; i < g->n; i++)
        for (size_t b = 0; b < g->v[i].nex; b++) {
            if (!g->v[i].ex[b].set) continue;
            if (VEC_RESERVE(set, cap, n + 1)) return free(set), hr_fail(err, HR_ENOMEM, "out of memory");
            set[n++] = &g->v[i].ex[b];
        }
    int rc = groupby_label(st, q, sel, set, n, err);
    free(set);
    return rc;
}

static void exemplars_free(group_t *g) {
    for (size_t b = 0; g->ex && b < g->nex; b++) labels_destroy(&g->ex[b].labels);
    free(g->ex);
}

void grouped_destroy(grouped_t *g) {
    for (size_t i = 0; i < g->n; i++) merge_result_destroy(&g->v[i].m), exemplars_free(&g->v[i]);
    free(g->v);
    free(g->g.v);
    free(g->other);
    memset(g, 0, sizeof *g);
}
