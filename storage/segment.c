/* segment.c - see segment.h. */
#include "storage/segment.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "common/sort.h"
#include "common/vec.h"
#include "storage/functab.h"

segment_t *segment_new(void) {
    segment_t *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    if (!(s->sym = symtab_new())) {
        free(s);
        return NULL;
    }
    s->min_time = INT64_MAX;
    s->max_time = INT64_MIN;
    return s;
}

void segment_free(segment_t *s) {
    if (!s) return;
    symtab_free(s->sym);
    free(s->profiles);
    free(s->stacks);
    free(s->values);
    free(s->spans);
    functab_free(s->funcs);
    free(s->stack_fp);
    free(s->stack_src);
    free(s);
}

static int cmp_stack(const void *a, const void *b) {
    uint32_t x = ((const stack_value_t *)a)->stack, y = ((const stack_value_t *)b)->stack;
    return (x > y) - (x < y);
}

size_t stack_values_fold(stack_value_t *p, size_t n) {
    if (n) qsort(p, n, sizeof *p, cmp_stack);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && p[m - 1].stack == p[i].stack) p[m - 1].value += p[i].value;
        else p[m++] = p[i];
    }
    size_t k = 0;
    for (size_t i = 0; i < m; i++)
        if (p[i].value != 0) p[k++] = p[i];
    return k;
}

int segment_reserve(segment_t *s, size_t profiles, size_t samples, size_t spans) {
    if (VEC_RESERVE(s->profiles, s->profiles_cap, s->nprofiles + profiles) ||
        VEC_RESERVE(s->spans, s->spans_cap, s->nspans + spans))
        return -1;
    size_t cap = s->samples_cap;
    if (VEC_RESERVE(s->stacks, cap, s->nsamples + samples)) return -1;
    if (cap != s->samples_cap) { /* values grow in step with stacks */
        int64_t *v = realloc(s->values, cap * sizeof *v);
        if (!v) return -1;
        s->values = v;
        s->samples_cap = cap;
    }
    return 0;
}

int segment_add_folded(segment_t *s, uint32_t series, int64_t time_ns, int64_t duration_ns, const stack_value_t *p,
                       size_t k) {
    if (segment_reserve(s, 1, k, 0)) return -1;
    seg_profile_t *row = &s->profiles[s->nprofiles++];
    *row = (seg_profile_t){series, (uint32_t)k, time_ns, duration_ns, s->nsamples, 0, 0, s->nspans};
    for (size_t i = 0; i < k; i++) {
        s->stacks[s->nsamples + i] = p[i].stack;
        s->values[s->nsamples + i] = p[i].value;
        row->total += p[i].value;
    }
    s->nsamples += k;
    if (time_ns < s->min_time) s->min_time = time_ns;
    if (time_ns > s->max_time) s->max_time = time_ns;
    assert(segment_row_valid(s, s->nprofiles - 1));
    return 0;
}

int segment_add(segment_t *s, uint32_t series, int64_t time_ns, int64_t duration_ns, const uint32_t *stacks,
                const int64_t *values, size_t n) {
    stack_value_t *p = malloc((n ? n : 1) * sizeof *p);
    if (!p) return -1;
    for (size_t i = 0; i < n; i++) p[i] = (stack_value_t){stacks[i], values[i]};
    int rc = segment_add_folded(s, series, time_ns, duration_ns, p, stack_values_fold(p, n));
    free(p);
    return rc;
}

int span_id_parse(const char *s, uint64_t *span) {
    size_t n = strspn(s, "0123456789abcdefABCDEF");
    if (!n || n > 16 || s[n]) return -1;
    *span = strtoull(s, NULL, 16);
    return *span ? 0 : -1;
}

static int cmp_span_sample(const void *a, const void *b) {
    const span_sample_t *x = a, *y = b;
    if (x->stack != y->stack) return x->stack < y->stack ? -1 : 1;
    return (x->span > y->span) - (x->span < y->span);
}

int trace_id_parse(const char *s, uint64_t *hi, uint64_t *lo) {
    if (!s || strlen(s) != 32 || strspn(s, "0123456789abcdefABCDEF") != 32) return -1;
    uint64_t v[2] = {0, 0};
    for (int i = 0; i < 32; i++) {
        int c = s[i], d = c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
        v[i / 16] = v[i / 16] << 4 | (uint64_t)d;
    }
    if (!(v[0] | v[1])) return -1;
    *hi = v[0], *lo = v[1];
    return 0;
}

size_t span_samples_fold(span_sample_t *p, size_t n) {
    if (n) qsort(p, n, sizeof *p, cmp_span_sample);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && p[m - 1].stack == p[i].stack && p[m - 1].span == p[i].span) {
            p[m - 1].value += p[i].value;
            if (!span_has_trace(&p[m - 1])) p[m - 1].trace_hi = p[i].trace_hi, p[m - 1].trace_lo = p[i].trace_lo;
        } else {
            p[m++] = p[i];
        }
    }
    size_t k = 0;
    for (size_t i = 0; i < m; i++)
        if (p[i].value != 0 && p[i].span != 0) p[k++] = p[i];
    return k;
}

int segment_add_spans(segment_t *s, const span_sample_t *p, size_t n) {
    if (!n || !s->nprofiles) return 0;
    if (VEC_RESERVE(s->spans, s->spans_cap, s->nspans + n)) return -1;
    span_sample_t *at = s->spans + s->nspans;
    memcpy(at, p, n * sizeof *p);
    size_t k = span_samples_fold(at, n);
    seg_profile_t *row = &s->profiles[s->nprofiles - 1];
    assert(row->nspans == 0); /* once per profile: its span samples are one sorted run */
    row->nspans += (uint32_t)k;
    s->nspans += k;
    assert(segment_row_valid(s, s->nprofiles - 1));
    return 0;
}

int segment_import_spans(segment_t *s, symtab_remap_t *m, const span_sample_t *p, size_t n) {
    if (!n) return 0;
    span_sample_t *v = malloc(n * sizeof *v);
    if (!v) return -1;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        v[i] = p[i];
        if (p[i].stack >= m->src->nstacks) rc = -2;
        else if ((v[i].stack = symtab_import_stack(s->sym, m, p[i].stack)) == SYM_NONE) rc = -1;
    }
    if (rc == 0) rc = segment_add_spans(s, v, n);
    free(v);
    return rc;
}

size_t segment_bytes(const segment_t *s) {
    return (s->sym ? symtab_bytes(s->sym) : 0) + s->profiles_cap * sizeof(seg_profile_t) +
           s->samples_cap * (sizeof(uint32_t) + sizeof(int64_t)) + s->spans_cap * sizeof(span_sample_t) +
           functab_bytes(s->funcs);
}

static int cmp_row(const void *a, const void *b, void *ctx) {
    const segment_t *s = ctx;
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    const seg_profile_t *x = &s->profiles[i], *y = &s->profiles[j];
    if (x->series != y->series) return x->series < y->series ? -1 : 1;
    if (x->time_ns != y->time_ns) return x->time_ns < y->time_ns ? -1 : 1;
    return (i > j) - (i < j);
}

int segment_sorted_order(const segment_t *s, uint32_t **order) {
    uint32_t *o = malloc((s->nprofiles ? s->nprofiles : 1) * sizeof *o);
    if (!o) return -1;
    int sorted = 1;
    for (size_t i = 0; i < s->nprofiles; i++) {
        o[i] = (uint32_t)i;
        if (i) sorted &= cmp_row(&o[i - 1], &o[i], (void *)s) <= 0;
    }
    /* A block partition's rows arrive in order already (a cut copies them so): no sort. */
    if (!sorted) qsort_r(o, s->nprofiles, sizeof *o, cmp_row, (void *)s);
    *order = o;
    return 0;
}

int segment_row_valid(const segment_t *s, size_t i) {
    const seg_profile_t *row = &s->profiles[i];
    if (row->first + row->nsamples > s->nsamples || row->span_first + row->nspans > s->nspans) return 0;
    for (uint32_t j = 0; j < row->nsamples; j++) {
        uint32_t st = s->stacks[row->first + j];
        if (st >= s->sym->nstacks || (j && st <= s->stacks[row->first + j - 1])) return 0;
    }
    for (uint32_t j = 0; j < row->nspans; j++) {
        const span_sample_t *p = &s->spans[row->span_first + j];
        if (!p->span || p->stack >= s->sym->nstacks) return 0;
        if (j && (p->stack < p[-1].stack || (p->stack == p[-1].stack && p->span <= p[-1].span))) return 0;
    }
    return 1;
}

/* ---- segment_select ---- */

/* Imports into p the stacks rows[0..n) of s use (samples and spans), in increasing
 * order of s's ids. A stack's ancestors have smaller ids than it, so the stacks used
 * get ids in the same order they had in s, and rows that were sorted by stack stay
 * sorted. Only the distinct ids used are listed and sorted (a mark per stack of s
 * tells them apart, and calloc's pages of a large head cost nothing until touched), so
 * a partition of a large head costs its own samples, not a pass over every stack of
 * the head (a cut writes a partition per service). 0, -1 (OOM) or -2 (an id out of
 * range). */
static int import_in_order(segment_t *p, symtab_remap_t *m, const segment_t *s, const uint32_t *rows, size_t n) {
    size_t ns = s->sym->nstacks;
    uint8_t *seen = calloc(ns ? ns : 1, 1);
    uint32_t *ids = NULL;
    size_t k = 0, cap = 0;
    int rc = seen ? 0 : -1;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const seg_profile_t *r = &s->profiles[rows[i]];
        for (uint32_t j = 0; j < r->nsamples + r->nspans && rc == 0; j++) {
            uint32_t id = j < r->nsamples ? s->stacks[r->first + j] : s->spans[r->span_first + j - r->nsamples].stack;
            if (id >= ns) rc = -2; /* a broken segment: never written */
            else if (!seen[id] && VEC_RESERVE(ids, cap, k + 1)) rc = -1;
            else if (!seen[id]) seen[id] = 1, ids[k++] = id;
        }
    }
    if (rc == 0) sort_u32(ids, k);
    for (size_t i = 0; i < k && rc == 0; i++)
        if (symtab_import_stack(p->sym, m, ids[i]) == SYM_NONE) rc = -1;
    free(seen);
    free(ids);
    return rc;
}

/* Row r of s into p, its stacks mapped by m (all imported already): as it is when the
 * mapping kept its samples in order (import_in_order), else sorted again. */
static int copy_row(segment_t *p, symtab_remap_t *m, const segment_t *s, const seg_profile_t *r, stack_value_t *sv,
                    uint32_t *stacks) {
    int sorted = 1;
    for (uint32_t j = 0; j < r->nsamples; j++) {
        stacks[j] = symtab_import_stack(p->sym, m, s->stacks[r->first + j]); /* a lookup: imported */
        if (stacks[j] == SYM_NONE) return -1;
        sv[j] = (stack_value_t){stacks[j], s->values[r->first + j]};
        sorted &= (j == 0 || stacks[j] > stacks[j - 1]) && sv[j].value != 0;
    }
    if (sorted) return segment_add_folded(p, r->series, r->time_ns, r->duration_ns, sv, r->nsamples);
    return segment_add(p, r->series, r->time_ns, r->duration_ns, stacks, s->values + r->first, r->nsamples);
}

segment_t *segment_select(const segment_t *s, const uint32_t *rows, size_t n, hr_err_t *err) {
    segment_t *p = segment_new();
    symtab_remap_t m;
    if (!p || symtab_remap_init(&m, s->sym)) {
        segment_free(p);
        return hr_fail(err, HR_ENOMEM, "out of memory"), NULL;
    }
    uint32_t *stacks = NULL;
    stack_value_t *sv = NULL;
    size_t cap = 0, svcap = 0;
    int rc = import_in_order(p, &m, s, rows, n);
    for (size_t i = 0; i < n && rc == 0; i++) {
        const seg_profile_t *r = &s->profiles[rows[i]];
        if (VEC_RESERVE(stacks, cap, (size_t)r->nsamples + 1) || VEC_RESERVE(sv, svcap, (size_t)r->nsamples + 1))
            rc = -1;
        if (rc == 0 && copy_row(p, &m, s, r, sv, stacks)) rc = -1;
        if (rc == 0) rc = segment_import_spans(p, &m, r->nspans ? s->spans + r->span_first : NULL, r->nspans);
    }
    free(stacks);
    free(sv);
    symtab_remap_destroy(&m);
    if (rc) {
        segment_free(p);
        if (rc == -2) return hr_fail(err, HR_EINTERNAL, "refusing to write a block with a stack id out of range"), NULL;
        return hr_fail(err, HR_ENOMEM, "out of memory"), NULL;
    }
    return p;
}

/* ---- merging segments ---- */

/* Copies one segment's profiles into out, remapping stack ids into out's symtab. */
static int copy_segment(segment_t *out, const segment_t *in, uint32_t **stacks, size_t *cap, hr_err_t *err) {
    symtab_remap_t m;
    if (symtab_remap_init(&m, in->sym)) return hr_fail(err, HR_ENOMEM, "out of memory");
    int rc = 0;
    for (size_t i = 0; i < in->nprofiles && rc == 0; i++) {
        const seg_profile_t *p = &in->profiles[i];
        if (VEC_RESERVE(*stacks, *cap, p->nsamples + 1)) {
            rc = hr_fail(err, HR_ENOMEM, "out of memory");
            break;
        }
        for (uint32_t k = 0; k < p->nsamples && rc == 0; k++) {
            uint32_t id = symtab_import_stack(out->sym, &m, in->stacks[p->first + k]);
            if (id == SYM_NONE) rc = hr_fail(err, HR_ENOMEM, "out of memory interning symbols");
            (*stacks)[k] = id;
        }
        if (rc == 0 &&
            (segment_add(out, p->series, p->time_ns, p->duration_ns, *stacks, in->values + p->first, p->nsamples) ||
             segment_import_spans(out, &m, p->nspans ? in->spans + p->span_first : NULL, p->nspans)))
            rc = hr_fail(err, HR_ENOMEM, "out of memory");
    }
    symtab_remap_destroy(&m);
    return rc;
}

int segment_append(segment_t *out, const segment_t *in, hr_err_t *err) {
    uint32_t *stacks = NULL;
    size_t cap = 0;
    int rc = copy_segment(out, in, &stacks, &cap, err);
    free(stacks);
    return rc;
}

segment_t *segment_merge(const segment_t *const *in, size_t n, hr_err_t *err) {
    segment_t *out = segment_new();
    if (!out) return hr_fail(err, HR_ENOMEM, "out of memory"), NULL;
    uint32_t *stacks = NULL;
    size_t cap = 0;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) rc = copy_segment(out, in[i], &stacks, &cap, err);
    free(stacks);
    if (rc) {
        segment_free(out);
        return NULL;
    }
    return out;
}
