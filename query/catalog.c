/* catalog.c - see catalog.h. */
#include "query/catalog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/ptype.h"
#include "common/timeparse.h"
#include "common/vec.h"

#define TIMEOUT_MSG "the query ran past --query-timeout; narrow the time range or the selection"

static int past(int64_t deadline_ns) { return deadline_ns && time_now_ns() > deadline_ns; }

typedef struct {
    uint8_t *present;
    uint32_t n;
    int64_t from, until, deadline_ns;
    int timeout;
} presence_t;

static int mark(void *ctx, const segment_t *seg) {
    presence_t *p = ctx;
    /* Per segment, as merges check: the overrun is one segment's rows at most. */
    if (past(p->deadline_ns)) return p->timeout = 1, -1;
    for (size_t i = 0; i < seg->nprofiles; i++) {
        const seg_profile_t *r = &seg->profiles[i];
        if (r->series < p->n && r->time_ns >= p->from && r->time_ns <= p->until) p->present[r->series] = 1;
    }
    return 0;
}

/* The series of q's tenant with a profile in q's range, as a bitmap (*n bytes). */
static uint8_t *presence(store_t *st, const catalog_query_t *q, uint32_t *n, hr_err_t *err) {
    presence_t p = {NULL, (uint32_t)index_series_total(store_index(st)) + 1, q->from, q->until, q->deadline_ns, 0};
    if (!(p.present = calloc(p.n, 1))) return hr_fail(err, HR_ENOMEM, "out of memory"), NULL;
    store_filter_t f = {q->from, q->until, NULL, 0, 1, 0}; /* presence needs rows, not stacks */
    if (store_scan(st, q->tenant, &f, mark, &p, err)) {
        free(p.present);
        if (p.timeout) hr_fail(err, HR_ETIMEOUT, TIMEOUT_MSG);
        return NULL;
    }
    *n = p.n;
    return p.present;
}

/* Matches q->sel against each series of the snapshot; no lock is held here. */
static int filter(const catalog_query_t *q, const index_snapshot_t *snap, const uint8_t *present, uint32_t npresent,
                  catalog_series_fn fn, void *ctx, hr_err_t *err) {
    for (size_t i = 0; i < snap->n; i++) {
        const series_t *s = snap->v[i];
        if (past(q->deadline_ns)) return hr_fail(err, HR_ETIMEOUT, TIMEOUT_MSG);
        if (present && (s->id >= npresent || !present[s->id])) continue;
        if (q->sel && !selector_matches(q->sel, s->profile_type, &s->labels)) continue;
        fn(ctx, s);
    }
    return 0;
}

int catalog_series(store_t *st, const catalog_query_t *q, catalog_series_fn fn, void *ctx, hr_err_t *err) {
    uint8_t *present = NULL;
    uint32_t npresent = 0;
    if (q->ranged && !(present = presence(st, q, &npresent, err))) return -1;
    index_snapshot_t snap;
    int rc = index_snapshot(store_index(st), q->tenant, &snap, err);
    if (rc == 0) rc = filter(q, &snap, present, npresent, fn, ctx, err);
    index_snapshot_free(&snap);
    free(present);
    return rc;
}

typedef struct {
    uint8_t *bits;
    uint32_t n;
} bitmap_t;

static void set_bit(void *ctx, const series_t *s) {
    bitmap_t *b = ctx;
    if (s->id < b->n) b->bits[s->id] = 1;
}

uint8_t *catalog_select(store_t *st, const catalog_query_t *q, uint32_t *n, hr_err_t *err) {
    /* Series ids are dense, so total + 1 covers every id that exists now; a series
     * created while the query runs is simply not part of it. */
    bitmap_t b = {NULL, (uint32_t)index_series_total(store_index(st)) + 1};
    if (!(b.bits = calloc(b.n, 1))) return hr_fail(err, HR_ENOMEM, "out of memory"), NULL;
    if (catalog_series(st, q, set_bit, &b, err)) {
        free(b.bits);
        return NULL;
    }
    *n = b.n;
    return b.bits;
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

int catalog_profiles(store_t *st, const catalog_query_t *q, catalog_profile_t **out, size_t *n, hr_err_t *err) {
    plist_t l = {.from = q->from, .until = q->until};
    *out = NULL, *n = 0;
    if (!q->sel || !q->sel->profile_type) return hr_fail(err, HR_EINVAL, "the query must name a profile type");
    uint32_t nbits;
    uint8_t *bits = catalog_select(st, q, &nbits, err);
    if (!bits) return -1;
    l.bits = bits, l.nbits = nbits;
    store_filter_t f = {q->from, q->until, bits, nbits, 1, 0}; /* a profile list needs totals only */
    int rc = store_scan(st, q->tenant, &f, list_segment, &l, err);
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

/* ---- one meaning of __name__, and short type names ---- */

const char *catalog_label_value(const series_t *s, const char *name, char *buf, size_t n) {
    return selector_label(s->profile_type, &s->labels, name, buf, n);
}

const char *catalog_app_name(const series_t *s, char *buf, size_t n) {
    const char *app = labels_get(&s->labels, "service_name"), *shrt = ptype_short_name(s->profile_type);
    if (!app || !*app || !shrt) return NULL;
    snprintf(buf, n, "%s.%s", app, shrt);
    return buf;
}

typedef struct {
    char **v;
    size_t n, cap;
    int oom;
} typeset_t;

static void add_type_id(void *ctx, const series_t *s) {
    typeset_t *t = ctx;
    for (size_t i = 0; i < t->n; i++)
        if (!strcmp(t->v[i], s->profile_type)) return;
    if (VEC_RESERVE(t->v, t->cap, t->n + 1) || !(t->v[t->n] = strdup(s->profile_type))) t->oom = 1;
    else t->n++;
}

static int cmp_strp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void typeset_free(typeset_t *t) {
    for (size_t i = 0; i < t->n; i++) free(t->v[i]);
    free(t->v);
}

/* The name a user can query type v[i] by: its short name when that short name
 * would pick exactly it among v (so `app.SHORT` works), else the full id. */
static const char *query_name(char *const *v, size_t n, size_t i) {
    const char *s = ptype_short_name(v[i]);
    if (!s) return v[i];
    int mine = ptype_short_rank(s, v[i]);
    for (size_t j = 0; j < n; j++) {
        int r = ptype_short_rank(s, v[j]);
        if (j != i && r >= 0 && r <= mine) return v[i];
    }
    return s;
}

/* "a, b, c" into b: the types' query names, short where one works (an error
 * message holds 256 bytes, and `cpu` is what the user will type anyway). */
static void list_types(buf_t *b, char *const *v, size_t n) {
    for (size_t i = 0; i < n; i++) buf_printf(b, "%s%s", i ? ", " : "", query_name(v, n, i));
    buf_putc(b, 0);
}

/* The stored type sel->short_type means: the one best-ranked fit among t (sorted)
 * into *out (malloc'd); an error naming the candidates when none or several fit. */
static int pick_short(const selector_t *sel, typeset_t *t, hr_err_t *err, char **out) {
    int best = -1;
    size_t nbest = 0, at = 0;
    for (size_t i = 0; i < t->n; i++) {
        int r = ptype_short_rank(sel->short_type, t->v[i]);
        if (r < 0 || (best >= 0 && r > best)) continue;
        if (r == best) nbest++;
        else best = r, nbest = 1, at = i;
    }
    buf_t b;
    buf_init(&b);
    int rc = 0;
    if (nbest == 1) {
        if (!(*out = strdup(t->v[at]))) rc = hr_fail(err, HR_ENOMEM, "out of memory");
    } else if (nbest > 1) {
        for (size_t i = 0, k = 0; i < t->n; i++)
            if (ptype_short_rank(sel->short_type, t->v[i]) == best) buf_printf(&b, "%s%s", k++ ? ", " : "", t->v[i]);
        buf_putc(&b, 0);
        rc = hr_fail(err, HR_EINVAL, "`%s` fits several stored types; name one of: %s", sel->short_type,
                     b.oom ? "?" : (char *)b.data);
    } else {
        list_types(&b, t->v, t->n);
        rc = hr_fail(err, HR_EINVAL, "the selected series have no `%s` profile; their types are: %s", sel->short_type,
                     b.oom ? "?" : (char *)b.data);
    }
    buf_free(&b);
    return rc;
}

int catalog_resolve_type(store_t *st, const catalog_query_t *q, selector_t *sel, int need_type, hr_err_t *err) {
    if (!sel->short_type && (sel->profile_type || !need_type)) return 0;
    selector_t probe = *sel; /* the same matchers, any type */
    probe.profile_type = NULL;
    catalog_query_t all = {q->tenant, &probe, 0, 0, 0, q->deadline_ns};
    typeset_t t = {0};
    int rc = catalog_series(st, &all, add_type_id, &t, err);
    if (rc == 0 && t.oom) rc = hr_fail(err, HR_ENOMEM, "out of memory");
    if (rc == 0 && t.n) qsort(t.v, t.n, sizeof *t.v, cmp_strp);
    if (rc == 0 && sel->short_type && t.n) {
        char *type = NULL;
        if ((rc = pick_short(sel, &t, err, &type)) == 0) free(sel->profile_type), sel->profile_type = type;
    } else if (rc == 0 && !sel->profile_type) {
        buf_t b;
        buf_init(&b);
        list_types(&b, t.v, t.n);
        rc = t.n ? hr_fail(err, HR_EINVAL, "the query names no profile type; its series have: %s (query app.NAME, "
                                           "or a type id)", b.oom ? "?" : (char *)b.data)
                 : hr_fail(err, HR_EINVAL, "the query must name a profile type, e.g. "
                                           "process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name=\"api\"}");
        buf_free(&b);
    }
    typeset_free(&t);
    return rc;
}
