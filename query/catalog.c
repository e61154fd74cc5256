/* catalog.c - see catalog.h.
 *
 * Selection walks a snapshot of the tenant's series (no lock held) and, for a
 * ranged query, first marks the series with a profile in the range from the
 * segments' profile rows. Discovery answers are collected as rows of strings (a
 * label name, a type id, a group's values, a series' label pairs): deduplicated as
 * the series are visited, since most series repeat what earlier ones said, then
 * sorted once and packed into one block, so a caller frees one pointer and never
 * walks an answer to release it. */
#include "query/catalog.h"

#include <assert.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/hash.h"
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
    presence_t p = {NULL, index_series_bound(store_index(st)), q->from, q->until, q->deadline_ns, 0};
    if (!(p.present = calloc(p.n, 1))) return hr_fail(err, HR_ENOMEM, "out of memory"), NULL;
    store_filter_t f = {.from = q->from, .until = q->until, .totals_only = 1}; /* presence needs rows, not stacks */
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

/* Calls fn for the series of a fresh snapshot that q->sel selects among those marked
 * in present (NULL: all). */
static int walk(store_t *st, const catalog_query_t *q, const uint8_t *present, uint32_t npresent, catalog_series_fn fn,
                void *ctx, hr_err_t *err) {
    index_snapshot_t snap;
    int rc = index_snapshot(store_index(st), q->tenant, &snap, err);
    if (rc == 0) rc = filter(q, &snap, present, npresent, fn, ctx, err);
    index_snapshot_free(&snap);
    return rc;
}

int catalog_series(store_t *st, const catalog_query_t *q, catalog_series_fn fn, void *ctx, hr_err_t *err) {
    uint8_t *present = NULL;
    uint32_t npresent = 0;
    if (store_sync(st, err)) return -1; /* a cluster: series other nodes made since the last query */
    if (q->ranged && !(present = presence(st, q, &npresent, err))) return -1;
    int rc = walk(st, q, present, npresent, fn, ctx, err);
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
    /* The bound covers every id the mirror holds now (synced first, in a cluster); a
     * series created while the query runs is simply not part of it. */
    if (store_sync(st, err)) return NULL;
    bitmap_t b = {NULL, index_series_bound(store_index(st))};
    if (!(b.bits = calloc(b.n, 1))) return hr_fail(err, HR_ENOMEM, "out of memory"), NULL;
    if (catalog_series(st, q, set_bit, &b, err)) {
        free(b.bits);
        return NULL;
    }
    *n = b.n;
    return b.bits;
}

/* catalog_series over the union of q[0..nq): each query's selection as a bitmap,
 * OR-ed, then one walk in id order, so a series two queries select is visited once. */
static int series_of_any(store_t *st, const catalog_query_t *q, size_t nq, catalog_series_fn fn, void *ctx,
                         hr_err_t *err) {
    assert(nq >= 1);
    if (nq == 1) return catalog_series(st, q, fn, ctx, err);
    uint8_t *any = NULL;
    uint32_t n = 0;
    for (size_t i = 0; i < nq; i++) {
        assert(!strcmp(q[i].tenant, q->tenant));
        uint32_t nb;
        uint8_t *bits = catalog_select(st, &q[i], &nb, err);
        if (!bits) return free(any), -1;
        if (!any) {
            any = bits, n = nb;
            continue;
        }
        /* a series created between the two selections is not in the answer */
        for (uint32_t j = 0; j < n && j < nb; j++) any[j] |= bits[j];
        free(bits);
    }
    catalog_query_t all = {q->tenant, NULL, 0, 0, 0, q->deadline_ns};
    int rc = walk(st, &all, any, n, fn, ctx, err);
    free(any);
    return rc;
}

typedef struct {
    const uint8_t *bits;
    uint32_t nbits;
    int64_t from, until;
    int spans; /* list each profile's spans instead of the profile */
    catalog_profile_t *v;
    size_t len, cap;
} plist_t;

static int list_entry(plist_t *l, const seg_profile_t *r, int64_t total, const span_sample_t *sp) {
    if (VEC_RESERVE(l->v, l->cap, l->len + 1)) return -1;
    l->v[l->len++] = sp ? (catalog_profile_t){r->series, r->time_ns, total, sp->span, sp->trace_hi, sp->trace_lo}
                        : (catalog_profile_t){r->series, r->time_ns, total, 0, 0, 0};
    return 0;
}

static int by_span(const void *a, const void *b) {
    uint64_t x = ((const catalog_profile_t *)a)->span, y = ((const catalog_profile_t *)b)->span;
    return (x > y) - (x < y);
}

/* Lists row r's spans, each with the sum of its span samples. They are sorted by
 * stack, then span, so they are summed here, row by row: the list grows with the
 * spans, not with their samples. */
static int list_row_spans(plist_t *l, const segment_t *seg, const seg_profile_t *r) {
    size_t start = l->len, w = start;
    for (uint32_t j = 0; j < r->nspans; j++) {
        const span_sample_t *sp = &seg->spans[r->span_first + j];
        if (list_entry(l, r, sp->value, sp)) return -1;
    }
    if (l->len - start > 1) qsort(l->v + start, l->len - start, sizeof *l->v, by_span);
    for (size_t i = start; i < l->len; i++)
        if (w > start && l->v[w - 1].span == l->v[i].span) {
            l->v[w - 1].total += l->v[i].total;
            catalog_keep_trace(&l->v[w - 1], &l->v[i]);
        } else {
            l->v[w++] = l->v[i];
        }
    l->len = w;
    return 0;
}

static int list_segment(void *ctx, const segment_t *seg) {
    plist_t *l = ctx;
    for (size_t i = 0; i < seg->nprofiles; i++) {
        const seg_profile_t *r = &seg->profiles[i];
        if (r->series >= l->nbits || !l->bits[r->series] || r->time_ns < l->from || r->time_ns > l->until) continue;
        if (!l->spans && list_entry(l, r, r->total, NULL)) return -1;
        if (l->spans && list_row_spans(l, seg, r)) return -1;
    }
    return 0;
}

static int newest_first(const void *a, const void *b) {
    const catalog_profile_t *x = a, *y = b;
    if (x->time_ns != y->time_ns) return x->time_ns < y->time_ns ? 1 : -1;
    if (x->series != y->series) return (x->series > y->series) - (x->series < y->series);
    return (x->span > y->span) - (x->span < y->span);
}

static int list_profiles(store_t *st, const catalog_query_t *q, int spans, catalog_profile_t **out, size_t *n,
                         hr_err_t *err) {
    plist_t l = {.from = q->from, .until = q->until, .spans = spans};
    *out = NULL, *n = 0;
    if (!q->sel || !q->sel->profile_type) return hr_fail(err, HR_EINVAL, "the query must name a profile type");
    uint32_t nbits;
    uint8_t *bits = catalog_select(st, q, &nbits, err);
    if (!bits) return -1;
    l.bits = bits, l.nbits = nbits;
    /* a profile list needs the rows' totals only; spans are in the samples' partitions */
    store_filter_t f = {.from = q->from, .until = q->until, .series = bits, .nseries = nbits, .totals_only = !spans};
    int rc = store_scan(st, q->tenant, &f, list_segment, &l, err);
    free(bits);
    if (rc) {
        free(l.v);
        return err->code ? -1 : hr_fail(err, HR_ENOMEM, "out of memory listing profiles");
    }
    if (l.len) qsort(l.v, l.len, sizeof *l.v, newest_first);
    size_t w = 0; /* fold same series + instant (+ span): a profile split over segments, a span's stacks */
    for (size_t i = 0; i < l.len; i++) {
        catalog_profile_t *last = w ? &l.v[w - 1] : NULL;
        if (last && last->series == l.v[i].series && last->time_ns == l.v[i].time_ns && last->span == l.v[i].span) {
            last->total += l.v[i].total;
            catalog_keep_trace(last, &l.v[i]);
        } else {
            l.v[w++] = l.v[i];
        }
    }
    *out = l.v, *n = w;
    return 0;
}

int catalog_profiles(store_t *st, const catalog_query_t *q, catalog_profile_t **out, size_t *n, hr_err_t *err) {
    return list_profiles(st, q, 0, out, n, err);
}

int catalog_spans(store_t *st, const catalog_query_t *q, catalog_profile_t **out, size_t *n, hr_err_t *err) {
    return list_profiles(st, q, 1, out, n, err);
}

/* ---- discovery answers: rows of strings, deduplicated, sorted, packed ---- */

typedef struct {
    char *s;      /* the row's strings, each NUL-terminated, one after the other */
    size_t bytes; /* of s */
    size_t len;   /* how many strings */
} row_t;

typedef struct {
    row_t *v;
    size_t n, cap;
    idset_t seen; /* indexes into v, by the hash of a row's bytes */
    buf_t cur;    /* the row being built */
    size_t cur_len;
    int oom;
} rows_t;

/* What a visit adds rows for: the rows and the question's own parameters. */
typedef struct {
    rows_t rows;
    const char *label;  /* catalog_label_values */
    char *const *names; /* catalog_label_sets, catalog_groups */
    size_t nnames;
    unsigned flags; /* catalog_label_names */
} visit_t;

static void row_put(rows_t *r, const char *s) {
    buf_append(&r->cur, s, strlen(s) + 1);
    r->cur_len++;
}

static int row_eq(const void *ctx, uint32_t id, const void *key) {
    const row_t *x = &((const rows_t *)ctx)->v[id], *k = key;
    return x->len == k->len && x->bytes == k->bytes && (!k->bytes || !memcmp(x->s, k->s, k->bytes));
}

/* Ends the row being built: kept unless an equal row already is. */
static void row_end(rows_t *r) {
    row_t k = {(char *)r->cur.data, r->cur.len, r->cur_len};
    r->cur.len = 0, r->cur_len = 0;
    if (r->cur.oom) return (void)(r->oom = 1);
    uint64_t h = hash_bytes(k.s, k.bytes, k.len);
    if (idset_find(&r->seen, h, &k, row_eq, r) != UINT32_MAX) return;
    char *copy = malloc(k.bytes + 1);
    if (!copy || VEC_RESERVE(r->v, r->cap, r->n + 1) || idset_add(&r->seen, h, (uint32_t)r->n)) {
        free(copy);
        return (void)(r->oom = 1);
    }
    if (k.bytes) memcpy(copy, k.s, k.bytes);
    r->v[r->n++] = (row_t){copy, k.bytes, k.len};
}

static void rows_free(rows_t *r) {
    for (size_t i = 0; i < r->n; i++) free(r->v[i].s);
    free(r->v);
    idset_free(&r->seen);
    buf_free(&r->cur);
}

/* String by string; a row that is a prefix of another comes first. */
static int row_cmp(const void *a, const void *b) {
    const row_t *x = a, *y = b;
    const char *p = x->s, *q = y->s;
    for (size_t i = 0; i < x->len && i < y->len; i++) {
        int c = strcmp(p, q);
        if (c) return c;
        p += strlen(p) + 1, q += strlen(q) + 1;
    }
    return (x->len > y->len) - (x->len < y->len);
}

/* Called for row i of a packed answer, whose len strings start at strs, to fill the
 * caller's own entry for it in head. */
typedef void (*place_fn)(void *head, size_t i, const char **strs, size_t len);

/* Visits the series any of q[0..nq) selects with fn, which adds rows to c->rows, then
 * sorts the rows and packs them into one block: per_row bytes a row for the caller's
 * own array (the block's start, padded to keep what follows aligned; place, when not
 * NULL, fills it), every row's strings as pointers (*strs, row after row), then the
 * strings. *nrows receives the number of rows. NULL with err set on failure; c->rows
 * is freed either way. */
static void *answer(store_t *st, const catalog_query_t *q, size_t nq, catalog_series_fn fn, visit_t *c, size_t per_row,
                    place_fn place, const char ***strs, size_t *nrows, hr_err_t *err) {
    rows_t *r = &c->rows;
    char *block = NULL;
    int rc = series_of_any(st, q, nq, fn, c, err);
    if (rc == 0 && r->oom) rc = hr_fail(err, HR_ENOMEM, "out of memory");
    size_t nstr = 0, bytes = 0, align = _Alignof(max_align_t);
    for (size_t i = 0; i < r->n; i++) nstr += r->v[i].len, bytes += r->v[i].bytes;
    size_t head = (r->n * per_row + align - 1) / align * align;
    if (rc == 0 && !(block = malloc(head + nstr * sizeof(char *) + bytes + 1)))
        hr_fail(err, HR_ENOMEM, "out of memory");
    if (block) {
        if (r->n) qsort(r->v, r->n, sizeof *r->v, row_cmp);
        const char **p = (const char **)(block + head);
        char *text = (char *)(p + nstr);
        *strs = p, *nrows = r->n;
        for (size_t i = 0; i < r->n; i++) {
            if (place) place(block, i, p, r->v[i].len);
            if (r->v[i].bytes) memcpy(text, r->v[i].s, r->v[i].bytes);
            for (size_t j = 0; j < r->v[i].len; j++, text += strlen(text) + 1) *p++ = text;
        }
    }
    rows_free(r);
    return block;
}

/* An answer of one string a row (label names, values, type ids). */
static int strings(store_t *st, const catalog_query_t *q, size_t nq, catalog_series_fn fn, visit_t *c,
                   catalog_strings_t *out, hr_err_t *err) {
    *out = (catalog_strings_t){0};
    return answer(st, q, nq, fn, c, 0, NULL, &out->v, &out->n, err) ? 0 : -1;
}

static void add_one(visit_t *c, const char *s) {
    row_put(&c->rows, s);
    row_end(&c->rows);
}

static void visit_names(void *ctx, const series_t *s) {
    visit_t *c = ctx;
    for (size_t i = 0; i < s->labels.n; i++) add_one(c, s->labels.v[i].name);
    if (c->flags & CATALOG_PSEUDO_LABELS) add_one(c, "__name__"), add_one(c, "__profile_type__");
}

static void visit_values(void *ctx, const series_t *s) {
    visit_t *c = ctx;
    char buf[128];
    const char *v = catalog_label_value(s, c->label, buf, sizeof buf);
    if (v) add_one(c, v);
}

static void visit_apps(void *ctx, const series_t *s) {
    char buf[512];
    const char *v = catalog_app_name(s, buf, sizeof buf);
    if (v) add_one(ctx, v);
}

static void visit_types(void *ctx, const series_t *s) { add_one(ctx, s->profile_type); }

int catalog_label_names(store_t *st, const catalog_query_t *q, size_t nq, unsigned flags, catalog_strings_t *out,
                        hr_err_t *err) {
    visit_t c = {.flags = flags};
    return strings(st, q, nq, visit_names, &c, out, err);
}

int catalog_label_values(store_t *st, const catalog_query_t *q, size_t nq, const char *name, catalog_strings_t *out,
                         hr_err_t *err) {
    visit_t c = {.label = name};
    return strings(st, q, nq, visit_values, &c, out, err);
}

int catalog_app_names(store_t *st, const catalog_query_t *q, size_t nq, catalog_strings_t *out, hr_err_t *err) {
    visit_t c = {0};
    return strings(st, q, nq, visit_apps, &c, out, err);
}

/* The type ids of the selected series, sorted. */
static int type_ids(store_t *st, const catalog_query_t *q, catalog_strings_t *out, hr_err_t *err) {
    visit_t c = {0};
    return strings(st, q, 1, visit_types, &c, out, err);
}

int catalog_profile_types(store_t *st, const catalog_query_t *q, size_t nq, catalog_types_t *out, hr_err_t *err) {
    visit_t c = {0};
    const char **ids;
    size_t n;
    *out = (catalog_types_t){0};
    if (!(out->v = answer(st, q, nq, visit_types, &c, sizeof *out->v, NULL, &ids, &n, err))) return -1;
    for (size_t i = 0; i < n; i++)
        if (ptype_split(ids[i], &out->v[out->n].parts) == 0) out->v[out->n++].id = ids[i];
    return 0;
}

static int wanted(const visit_t *c, const char *name) {
    if (!c->nnames) return 1;
    for (size_t i = 0; i < c->nnames; i++)
        if (!strcmp(c->names[i], name)) return 1;
    return 0;
}

static void put_pair(visit_t *c, const char *name, const char *value) {
    if (!wanted(c, name)) return;
    row_put(&c->rows, name);
    row_put(&c->rows, value);
}

static void visit_set(void *ctx, const series_t *s) {
    visit_t *c = ctx;
    char buf[128];
    put_pair(c, "__name__", catalog_label_value(s, "__name__", buf, sizeof buf));
    put_pair(c, "__profile_type__", s->profile_type);
    for (size_t i = 0; i < s->labels.n; i++) put_pair(c, s->labels.v[i].name, s->labels.v[i].value);
    row_end(&c->rows);
}

static void place_set(void *head, size_t i, const char **strs, size_t len) {
    ((catalog_label_set_t *)head)[i] = (catalog_label_set_t){strs, len / 2};
}

int catalog_label_sets(store_t *st, const catalog_query_t *q, size_t nq, char *const *names, size_t nnames,
                       catalog_label_sets_t *out, hr_err_t *err) {
    visit_t c = {.names = names, .nnames = nnames};
    const char **kv;
    *out = (catalog_label_sets_t){0};
    out->v = answer(st, q, nq, visit_set, &c, sizeof *out->v, place_set, &kv, &out->n, err);
    return out->v ? 0 : -1;
}

static void visit_group(void *ctx, const series_t *s) {
    visit_t *c = ctx;
    for (size_t i = 0; i < c->nnames; i++) {
        const char *v = labels_get(&s->labels, c->names[i]);
        row_put(&c->rows, v ? v : "");
    }
    row_end(&c->rows);
}

int catalog_groups(store_t *st, const catalog_query_t *q, size_t nq, char *const *names, size_t width,
                   catalog_groups_t *out, hr_err_t *err) {
    visit_t c = {.names = names, .nnames = width};
    *out = (catalog_groups_t){.width = width};
    return answer(st, q, nq, visit_group, &c, 0, NULL, &out->v, &out->n, err) ? 0 : -1;
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

/* The name a user can query type v[i] by: its short name when that short name
 * would pick exactly it among v (so `app.SHORT` works), else the full id. */
static const char *query_name(const char *const *v, size_t n, size_t i) {
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
static void list_types(buf_t *b, const char *const *v, size_t n) {
    for (size_t i = 0; i < n; i++) buf_printf(b, "%s%s", i ? ", " : "", query_name(v, n, i));
    buf_putc(b, 0);
}

/* The stored type sel->short_type means: the one best-ranked fit among t (sorted)
 * into *out (malloc'd); an error naming the candidates when none or several fit. */
static int pick_short(const selector_t *sel, const catalog_strings_t *t, hr_err_t *err, char **out) {
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

/* `shop.cpu{}` when no series of service "shop" exist: a pprof pushed with the name
 * `shop.cpu` is stored as service "shop.cpu", and the legacy name then means that
 * service (its type picked by the short name as for any app) rather than an empty
 * answer. The service_name matcher legacy_type added becomes the whole name when the
 * store has series of it. 1 when rewritten, 0 when not, -1 with err. */
static int legacy_whole_name(store_t *st, const catalog_query_t *q, selector_t *sel, catalog_strings_t *t,
                             hr_err_t *err) {
    matcher_t *m = sel->n ? &sel->m[0] : NULL;
    if (!sel->short_type || !m || m->op != MATCH_EQ || strcmp(m->name, "service_name")) return 0;
    size_t n = strlen(m->value) + strlen(sel->short_type) + 2;
    char *whole = malloc(n);
    if (!whole) return hr_fail(err, HR_ENOMEM, "out of memory");
    snprintf(whole, n, "%s.%s", m->value, sel->short_type);
    char *was = m->value;
    m->value = whole;
    selector_t probe = *sel;
    probe.profile_type = NULL;
    catalog_query_t all = {q->tenant, &probe, 0, 0, 0, q->deadline_ns};
    catalog_strings_t w = {0};
    int rc = type_ids(st, &all, &w, err);
    if (rc == 0 && w.n) { /* the whole name's series: keep it */
        free(was);
        free(t->v);
        *t = w;
        return 1;
    }
    free(w.v);
    m->value = was;
    free(whole);
    return rc;
}

int catalog_resolve_type(store_t *st, const catalog_query_t *q, selector_t *sel, int need_type, hr_err_t *err) {
    if (!sel->short_type && (sel->profile_type || !need_type)) return 0;
    selector_t probe = *sel; /* the same matchers, any type */
    probe.profile_type = NULL;
    catalog_query_t all = {q->tenant, &probe, 0, 0, 0, q->deadline_ns};
    catalog_strings_t t;
    int rc = type_ids(st, &all, &t, err);
    if (rc == 0 && sel->short_type && !t.n && legacy_whole_name(st, q, sel, &t, err) < 0) rc = -1;
    if (rc == 0 && sel->short_type && t.n) {
        char *type = NULL;
        if ((rc = pick_short(sel, &t, err, &type)) == 0) free(sel->profile_type), sel->profile_type = type;
    } else if (rc == 0 && !sel->profile_type) {
        buf_t b;
        buf_init(&b);
        list_types(&b, t.v, t.n);
        rc = t.n ? hr_fail(err, HR_EINVAL,
                           "the query names no profile type; its series have: %s (query app.NAME, "
                           "or a type id)",
                           b.oom ? "?" : (char *)b.data)
                 : hr_fail(err, HR_EINVAL,
                           "the query must name a profile type, e.g. "
                           "process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name=\"api\"}");
        buf_free(&b);
    }
    free(t.v);
    return rc;
}
