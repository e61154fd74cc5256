/* heatmap.c - see heatmap.h. */
#include "query/heatmap.h"

#include <stdlib.h>
#include <string.h>

#include "common/vec.h"

/* One point of the answer (a profile, or a span of one), in its group and time bucket. */
typedef struct {
    size_t group, tb;
    size_t seq; /* arrival order: groupby_profiles lists the newest first */
    catalog_profile_t p;
    size_t alt, nalt; /* spans: other series the point was summed from, ps->alt[alt..alt + nalt) */
} point_t;

typedef struct {
    point_t *v;
    size_t n, cap;
    uint32_t *alt;
    size_t nalt, altcap;
    int oom;
    int64_t from, step; /* time bucket k ends at from + k * step */
    size_t ntb;
} points_t;

static void collect(void *ctx, size_t group, const catalog_profile_t *p) {
    points_t *ps = ctx;
    if (ps->oom || VEC_RESERVE(ps->v, ps->cap, ps->n + 1)) {
        ps->oom = 1;
        return;
    }
    int64_t d = p->time_ns - ps->from;
    size_t tb = d <= 0 ? 0 : (size_t)((d - 1) / ps->step + 1); /* the first bucket ending at or after it */
    ps->v[ps->n] = (point_t){group, tb < ps->ntb ? tb : ps->ntb - 1, ps->n, *p, 0, 0};
    ps->n++;
}

static int by_span(const void *a, const void *b) {
    const point_t *x = a, *y = b;
    if (x->group != y->group) return (x->group > y->group) - (x->group < y->group);
    if (x->p.time_ns != y->p.time_ns) return (x->p.time_ns > y->p.time_ns) - (x->p.time_ns < y->p.time_ns);
    if (x->p.span != y->p.span) return (x->p.span > y->p.span) - (x->p.span < y->p.span);
    return (x->seq > y->seq) - (x->seq < y->seq);
}

/* Makes one point of each span at one instant in one group: its samples may lie in
 * several series of the group (split by sample labels). The first listed keeps its
 * series; the others are noted, for the labels they share. 0 or -1 (OOM). */
static int fold_spans(points_t *ps) {
    if (ps->n) qsort(ps->v, ps->n, sizeof *ps->v, by_span);
    size_t w = 0;
    for (size_t i = 0; i < ps->n; i++) {
        point_t *last = w ? &ps->v[w - 1] : NULL;
        if (!last || last->group != ps->v[i].group || last->p.time_ns != ps->v[i].p.time_ns ||
            last->p.span != ps->v[i].p.span) {
            ps->v[w++] = ps->v[i];
            continue;
        }
        if (VEC_RESERVE(ps->alt, ps->altcap, ps->nalt + 1)) return -1;
        if (!last->nalt++) last->alt = ps->nalt;
        ps->alt[ps->nalt++] = ps->v[i].p.series;
        last->p.total += ps->v[i].p.total;
        catalog_keep_trace(&last->p, &ps->v[i].p);
    }
    ps->n = w;
    return 0;
}

static int by_cell(const void *a, const void *b) {
    const point_t *x = a, *y = b;
    if (x->group != y->group) return (x->group > y->group) - (x->group < y->group);
    if (x->tb != y->tb) return (x->tb > y->tb) - (x->tb < y->tb);
    return (x->seq > y->seq) - (x->seq < y->seq);
}

typedef struct {
    int64_t lo[HEATMAP_BUCKETS], hi[HEATMAP_BUCKETS];
} ybuckets_t;

/* Equal buckets from the smallest to the largest value, in unsigned arithmetic as
 * Pyroscope computes them (so the same totals give the same bucket starts). */
static void ybuckets(const points_t *ps, ybuckets_t *y) {
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (size_t i = 0; i < ps->n; i++) {
        if (ps->v[i].p.total < lo) lo = ps->v[i].p.total;
        if (ps->v[i].p.total > hi) hi = ps->v[i].p.total;
    }
    if (!ps->n) lo = hi = 0;
    if (lo == hi) hi = lo + (lo < INT64_MAX ? 1 : 0);
    double size = (double)((uint64_t)hi - (uint64_t)lo) / HEATMAP_BUCKETS;
    for (int i = 0; i < HEATMAP_BUCKETS; i++) {
        y->lo[i] = (int64_t)((uint64_t)lo + (uint64_t)(i * size));
        y->hi[i] = i + 1 < HEATMAP_BUCKETS ? (int64_t)((uint64_t)lo + (uint64_t)((i + 1) * size)) : hi;
    }
}

/* The value bucket of v: the first whose [lo, hi) holds it, else the last. */
static int ybucket(const ybuckets_t *y, int64_t v) {
    for (int i = 0; i < HEATMAP_BUCKETS; i++)
        if (v >= y->lo[i] && v < y->hi[i]) return i;
    return HEATMAP_BUCKETS - 1;
}

/* Counts the sorted points v[0..n) of one group into its slots. 0 or -1 (OOM). */
static int fill_series(heatmap_series_t *s, const point_t *v, size_t first, size_t n, const ybuckets_t *y,
                       int exemplars, int64_t from, int64_t step) {
    v += first;
    size_t nslots = 0;
    for (size_t i = 0; i < n; i++) nslots += i == 0 || v[i].tb != v[i - 1].tb;
    if (!(s->slots = calloc(nslots ? nslots : 1, sizeof *s->slots))) return -1;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || v[i].tb != v[i - 1].tb) s->slots[s->n++].end_ns = from + (int64_t)v[i].tb * step;
        heatmap_slot_t *sl = &s->slots[s->n - 1];
        int b = ybucket(y, v[i].p.total);
        sl->counts[b]++;
        exemplar_t *ex = &sl->ex[b]; /* newest first: a later equal total does not replace it */
        if (exemplars && (!ex->set || v[i].p.total > ex->p.total))
            ex->set = 1, ex->p = v[i].p, sl->ex_point[b] = first + i;
    }
    return 0;
}

/* Labels every set exemplar with its series' labels; one summed from several series
 * keeps the labels they all share (Pyroscope intersects them too). */
static int label_cells(store_t *st, const merge_query_t *q, selector_t *sel, heatmap_t *h, const points_t *ps,
                       hr_err_t *err) {
    exemplar_t **set = NULL, *alt = NULL;
    const point_t **from = NULL; /* the point each of set[0..n) came from */
    size_t n = 0, cap = 0, fcap = 0, nalt = 0;
    int rc = 0;
    for (size_t g = 0; g < h->g.n; g++)
        for (size_t k = 0; k < h->s[g].n; k++)
            for (int b = 0; b < HEATMAP_BUCKETS; b++) {
                heatmap_slot_t *sl = &h->s[g].slots[k];
                if (!sl->ex[b].set) continue;
                if (VEC_RESERVE(set, cap, n + 1) || VEC_RESERVE(from, fcap, n + 1)) goto oom;
                from[n] = &ps->v[sl->ex_point[b]];
                set[n++] = &sl->ex[b];
                nalt += from[n - 1]->nalt;
            }
    /* the other series of summed points are labelled along, then intersected */
    if (nalt && (!(alt = calloc(nalt, sizeof *alt)) || VEC_RESERVE(set, cap, n + nalt))) goto oom;
    for (size_t i = 0, a = 0; i < n; i++)
        for (size_t j = 0; j < from[i]->nalt; j++, a++)
            alt[a].p.series = ps->alt[from[i]->alt + j], set[n + a] = &alt[a];
    rc = groupby_label(st, q, sel, set, n + nalt, err);
    for (size_t i = 0, a = 0; i < n; i++)
        for (size_t j = 0; j < from[i]->nalt; j++, a++) labels_intersect(&set[i]->labels, &alt[a].labels);
    for (size_t a = 0; a < nalt; a++) labels_destroy(&alt[a].labels);
    free(set), free(from), free(alt);
    return rc;
oom:
    free(set), free(from), free(alt);
    return hr_fail(err, HR_ENOMEM, "out of memory");
}

int heatmap_run(store_t *st, const merge_query_t *q, selector_t *sel, char *const *names, size_t width, size_t limit,
                heatmap_points_t points, int exemplars, heatmap_t *out, hr_err_t *err) {
    memset(out, 0, sizeof *out);
    if (q->step <= 0 || q->until < q->from) return hr_fail(err, HR_EINVAL, "a heatmap needs a step and a range");
    if (width > GROUPBY_MAX_LABELS)
        return hr_fail(err, HR_EINVAL, "a group-by takes at most %d labels, not %zu", GROUPBY_MAX_LABELS, width);
    /* The groups are ranked by their totals: no timeline is needed, so none is computed
     * (and the group-by's points cap does not apply to a fine step). */
    merge_query_t totals = *q;
    totals.step = 0;
    if (groupby_run(st, &totals, sel, names, width, limit, &out->g, err)) return -1;
    points_t ps = {.from = q->from, .step = q->step, .ntb = (size_t)((q->until - q->from) / q->step) + 1};
    int spans = points == HEATMAP_SPANS;
    int rc = groupby_profiles(st, q, sel, &out->g, spans, collect, &ps, err);
    if (rc == 0 && (ps.oom || (spans && fold_spans(&ps)))) rc = hr_fail(err, HR_ENOMEM, "out of memory");
    ybuckets_t y;
    ybuckets(&ps, &y);
    for (int i = 0; i < HEATMAP_BUCKETS; i++) out->ymin[i] = (double)y.lo[i];
    if (rc == 0 && !(out->s = calloc(out->g.n + 1, sizeof *out->s))) rc = hr_fail(err, HR_ENOMEM, "out of memory");
    if (rc == 0 && ps.n) qsort(ps.v, ps.n, sizeof *ps.v, by_cell);
    for (size_t i = 0, j; rc == 0 && i < ps.n; i = j) {
        for (j = i; j < ps.n && ps.v[j].group == ps.v[i].group; j++) {
        }
        if (fill_series(&out->s[ps.v[i].group], ps.v, i, j - i, &y, exemplars, ps.from, ps.step))
            rc = hr_fail(err, HR_ENOMEM, "out of memory");
    }
    if (rc == 0 && exemplars) rc = label_cells(st, q, sel, out, &ps, err);
    free(ps.v);
    free(ps.alt);
    return rc;
}

void heatmap_destroy(heatmap_t *h) {
    for (size_t g = 0; h->s && g < h->g.n; g++) {
        for (size_t k = 0; k < h->s[g].n; k++)
            for (int b = 0; b < HEATMAP_BUCKETS; b++) labels_destroy(&h->s[g].slots[k].ex[b].labels);
        free(h->s[g].slots);
    }
    free(h->s);
    grouped_destroy(&h->g);
    memset(h, 0, sizeof *h);
}
