/* merge.c - see merge.h. */
#include "query/merge.h"

#include <assert.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog/index.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/timeparse.h"
#include "common/vec.h"
#include "query/catalog.h"
#include "query/share.h"
#include "query/split.h"
#include "query/tree.h"
#include "storage/functab.h"
#include "storage/symdict.h"

/* A merge reads the store in up to four passes, each with the least it needs:
 * COUNT (gauges): rows per series, for the averaging weights, from block footers;
 * TOTALS: totals, timeline, span and profile count, from footers too (or, with a call
 *   site, from the samples: then it also does STACKS' work and STACKS is skipped); a
 *   split merge that deals whole blocks deals them here, and the peers answer the
 *   totals of theirs, so this node reads only its own blocks' footers;
 * STACKS: the per-stack sums, from the partitions of the selected series, taking a
 *   partition's pre-merged rows when the range covers it (a split merge: this node's
 *   share of them, the peers being asked for theirs meanwhile);
 * REMOTE (a split merge; a scan of its own once the others are done and their lock is
 *   released, the peers' shares added meanwhile): the partitions of the peers that
 *   failed, merged here (after a TOTALS pass over them when the peers were to answer
 *   their totals). */
typedef enum { PASS_COUNT = 1, PASS_TOTALS, PASS_STACKS, PASS_REMOTE } pass_t;

/* The per-stack sums of the partitions that share one dictionary (storage/symdict.h:
 * a service's partitions, in the block cache). They are summed here, by the
 * dictionary's ids, and copied into the result once after the scan, so a service's
 * symbols are mapped once per query, not once per partition. */
typedef struct {
    symdict_t *dict;
    const symtab_t *ver; /* the newest version seen, acquired: every id summed is in it */
    double *acc;         /* by stack id in ver; n of them */
    size_t n, cap;
    /* The per-function sums of its function tables (storage/functab.h), by string id in
     * ver: nfn of them each. */
    int64_t *fself, *ftotal;
    size_t nfn, fcap;
} dict_acc_t;

/* A split merge's state (q->remote): the shares (shares[0] this node's), the peers'
 * requests in flight, and the partitions merged here again because their peer failed. */
typedef struct {
    size_t nodes;
    store_part_ref_t **shares;
    size_t *nshares;
    split_run_t *run;
    int *ok; /* the peers' answers (split_join), per node */
    buf_t *body;
    hr_err_t *errs;
    store_part_ref_t *retry;
    size_t nretry;
    int planned; /* split or not, decided (at the totals pass or the stacks pass) */
    int totals;  /* dealt at the totals pass: the peers answer their totals too */
} split_state_t;

typedef struct {
    const merge_query_t *q;
    merge_result_t *r;
    store_t *st;
    store_filter_t *filters; /* the passes' filters: begin_pass narrows a split merge's */
    size_t nfilters;
    int retrying; /* the scan of failed peers' shares */
    uint8_t *bits;
    uint32_t nbits;
    pass_t pass, passes[4]; /* the current pass, and the passes in order */
    split_state_t sp;
    int missing;      /* a share names a partition this node does not know (any more) */
    int overflow;     /* function sums past int64 */
    int split_failed; /* planning or adding the split failed (split_err says why) */
    hr_err_t split_err;
    u64map_t per_series, per_bucket; /* profiles per series (and per series and bucket), for gauge weights */
    sym_fpmap_t copied;              /* output stack ids by fingerprint: a stack already copied from one
                         * segment (or dictionary) is recognised in the next by content,
                         * without interning it again */
    uint32_t *in_bucket;             /* profiles per timeline step, for average_timeline */
    const merge_split_t *split;      /* NULL, or the groups a split merge also sums into */
    size_t charged;                  /* bytes taken from q->mem so far */
    hr_err_t limit_err;              /* why q->mem refused more */
    uint32_t *part_in_bucket;        /* in_bucket per part, nparts x nbuckets */
    double *acc;
    size_t acc_cap;
    dict_acc_t *daccs; /* one per dictionary the scan met */
    size_t ndaccs, daccs_cap, last_dacc;
    int oom, timeout, limit;
} scan_ctx_t;

static int cmp_ref(const void *a, const void *b) {
    const profile_ref_t *x = a, *y = b;
    if (x->series != y->series) return x->series < y->series ? -1 : 1;
    return (x->time_ns > y->time_ns) - (x->time_ns < y->time_ns);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

int profile_ref_parse(const char *s, profile_ref_t *r) {
    char *end;
    if (*s < '1' || *s > '9') return -1;
    unsigned long long series = strtoull(s, &end, 10);
    long long t = *end == '-' && end[1] >= '1' && end[1] <= '9' ? strtoll(end + 1, &end, 10) : 0;
    if (*end || series > UINT32_MAX || t <= 0 || t == LLONG_MAX) return -1;
    *r = (profile_ref_t){(uint32_t)series, t};
    return 0;
}

void profile_ref_format(uint32_t series, int64_t time_ns, char *out) {
    snprintf(out, PROFILE_REF_MAX, "%u-%lld", series, (long long)time_ns);
}

void profile_refs_sort(profile_ref_t *v, size_t n) { qsort(v, n, sizeof *v, cmp_ref); }
void span_ids_sort(uint64_t *v, size_t n) { qsort(v, n, sizeof *v, cmp_u64); }

static int cmp_u128(const void *a, const void *b) {
    const uint64_t *x = a, *y = b;
    if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
    return (x[1] > y[1]) - (x[1] < y[1]);
}

void trace_ids_sort(uint64_t *v, size_t n) { qsort(v, n, 2 * sizeof *v, cmp_u128); }

int trace_ids_has(const uint64_t *v, size_t n, uint64_t hi, uint64_t lo) {
    const uint64_t key[2] = {hi, lo};
    return bsearch(key, v, n, 2 * sizeof *v, cmp_u128) != NULL;
}

/* 1 when the query reads span samples (a span or trace selection), not samples. */
static int span_mode(const merge_only_t *o) { return o && (o->nspans || o->ntraces); }

/* 1 when span sample sp passes the query's span and trace selection. */
static int span_kept(const merge_only_t *o, const span_sample_t *sp) {
    if (o->nspans && !bsearch(&sp->span, o->spans, o->nspans, sizeof *o->spans, cmp_u64)) return 0;
    return !o->ntraces || trace_ids_has(o->traces, o->ntraces, sp->trace_hi, sp->trace_lo);
}

static int row_selected(const scan_ctx_t *c, const seg_profile_t *p) {
    if (p->series >= c->nbits || !c->bits[p->series] || p->time_ns < c->q->from || p->time_ns > c->q->until) return 0;
    const merge_only_t *o = c->q->only;
    profile_ref_t key = {p->series, p->time_ns};
    return !o || !o->nprofiles || bsearch(&key, o->profiles, o->nprofiles, sizeof key, cmp_ref);
}

/* 1 when totals come from the samples: a call site or spans keep only some of them. */
static int samples_filtered(const merge_query_t *q) {
    return q->call_site || span_mode(q->only) || stackfilter_active(q->filter);
}

static size_t bucket_of(const scan_ctx_t *c, int64_t t) { return (size_t)((t - c->r->tl_start) / c->r->tl_step); }

static int count_segment(scan_ctx_t *c, const segment_t *seg) {
    for (size_t i = 0; i < seg->nprofiles; i++) {
        const seg_profile_t *p = &seg->profiles[i];
        if (!row_selected(c, p)) continue;
        uint64_t *a = u64map_put(&c->per_series, p->series, NULL);
        uint64_t *b = c->r->nbuckets
                          ? u64map_put(&c->per_bucket, (uint64_t)p->series << 24 | bucket_of(c, p->time_ns), NULL)
                          : NULL;
        if (!a || (c->r->nbuckets && !b)) return -1;
        (*a)++;
        if (b) (*b)++;
    }
    return 0;
}

/* Grows r->self to cover every stack of r->sym, zero-filling new entries. */
static int ensure_self(merge_result_t *r) {
    size_t n = r->sym->nstacks;
    if (n <= r->nself) return 0;
    if (VEC_RESERVE(r->self, r->self_cap, n)) return -1;
    memset(r->self + r->nself, 0, (n - r->nself) * sizeof *r->self);
    r->nself = n;
    return 0;
}

/* The output id of stack s of seg: known by its fingerprint, or copied now (through
 * *m, set up on first use). SYM_NONE on OOM. */
static uint32_t output_stack(scan_ctx_t *c, const symtab_t *sym, uint32_t s, symtab_remap_t *m, int *have_m) {
    if (s == 0) return 0; /* the empty stack is stack 0 in every symtab */
    assert(s < sym->nstacks && sym->nfp[SYM_FP_STACKS] <= sym->nstacks);
    uint32_t *slot = NULL;
    if (s < sym->nfp[SYM_FP_STACKS]) { /* the head's newest stacks may not have one yet */
        if (!(slot = sym_fpmap_slot(&c->copied, sym->fp[SYM_FP_STACKS][s]))) return SYM_NONE;
        if (*slot) return *slot;
    }
    if (!*have_m && symtab_remap_init(m, sym)) return SYM_NONE;
    *have_m = 1;
    uint32_t out = symtab_import_stack(c->r->sym, m, s);
    if (slot) *slot = out == SYM_NONE ? 0 : out;
    return out;
}

/* Takes from the query's memory budget (q->mem) what the result and the scan's working
 * tables have grown to since the last charge. 0, or -1 with c->limit set. Charged every
 * CHARGE_EVERY new stacks and after each segment, so a merge stops within that much of
 * its share instead of growing until it is done. */
#define CHARGE_EVERY 4096
static int charge(scan_ctx_t *c) {
    if (!c->q->mem) return 0;
    const merge_result_t *r = c->r;
    size_t now = symtab_bytes(r->sym) + r->self_cap * sizeof *r->self + c->acc_cap * sizeof *c->acc +
                 sym_fpmap_bytes(&c->copied) + c->daccs_cap * sizeof *c->daccs + 2 * r->fn_cap * sizeof *r->fn_self +
                 (r->tree ? tree_bytes(r->tree) : 0);
    for (size_t i = 0; i < c->ndaccs; i++)
        now += c->daccs[i].cap * sizeof *c->daccs[i].acc + 2 * c->daccs[i].fcap * sizeof *c->daccs[i].fself;
    if (now <= c->charged) return 0;
    if (budget_hold_more(c->q->mem, now - c->charged, "this query's merge", &c->limit_err)) return c->limit = 1, -1;
    c->charged = now;
    return 0;
}

static int has_addresses(const symtab_t *t);

/* Folds a per-stack accumulator (n sums by stack id in sym) into the result symtab. */
static int fold_acc(scan_ctx_t *c, const symtab_t *sym, const double *acc, size_t n) {
    symtab_remap_t m;
    int have_m = 0, rc = 0;
    merge_result_t *r = c->r;
    /* From 0: the empty stack (a sample with no locations, as in Go's threadcreate
     * profile) counts in the total like any other, as pprof counts it. */
    size_t fresh = r->sym->nstacks;
    for (size_t s = 0; s < n && rc == 0; s++) {
        if (acc[s] == 0) continue;
        uint32_t out = output_stack(c, sym, (uint32_t)s, &m, &have_m);
        if (out == SYM_NONE || ensure_self(r)) rc = -1;
        else r->self[out] += acc[s];
        if (rc == 0 && r->sym->nstacks - fresh >= CHARGE_EVERY) fresh = r->sym->nstacks, rc = charge(c);
    }
    if (have_m) symtab_remap_destroy(&m);
    return rc ? rc : charge(c);
}

/* The accumulators of seg's dictionary, holding a version of it with every id seg
 * uses (the newest seen so far). NULL on OOM. */
static dict_acc_t *dict_of_seg(scan_ctx_t *c, const segment_t *seg) {
    dict_acc_t *a = c->last_dacc < c->ndaccs ? &c->daccs[c->last_dacc] : NULL;
    for (size_t i = 0; (!a || a->dict != seg->dict) && i < c->ndaccs; i++) a = &c->daccs[c->last_dacc = i];
    if (!a || a->dict != seg->dict) {
        if (VEC_RESERVE(c->daccs, c->daccs_cap, c->ndaccs + 1)) return NULL;
        a = &c->daccs[c->last_dacc = c->ndaccs];
        *a = (dict_acc_t){.dict = seg->dict};
        if (!(a->ver = symdict_acquire(seg->dict, seg->dict_stacks, seg->dict_strings))) return NULL;
        c->ndaccs++;
    }
    if (a->ver->nstacks < seg->dict_stacks || a->ver->nstrings < seg->dict_strings) { /* it grew: ids stay valid */
        const symtab_t *v = symdict_acquire(seg->dict, seg->dict_stacks, seg->dict_strings);
        if (!v) return NULL;
        symdict_release(a->dict, a->ver);
        a->ver = v;
    }
    return a;
}

/* The per-stack accumulator of seg's dictionary, grown to its version's stacks
 * (zero-filled). NULL on OOM. */
static double *dict_acc(scan_ctx_t *c, const segment_t *seg) {
    dict_acc_t *a = dict_of_seg(c, seg);
    if (!a) return NULL;
    size_t n = a->ver->nstacks;
    if (n > a->n) {
        if (vec_reserve(&a->acc, &a->cap, n, sizeof *a->acc)) return NULL;
        memset(a->acc + a->n, 0, (n - a->n) * sizeof *a->acc);
        a->n = n;
    }
    return a->acc;
}

/* Sums the selected series of a function table (segment.h's funcs: its names are
 * strings of its dictionary) into the dictionary's per-function sums. */
static int merge_funcs(scan_ctx_t *c, const segment_t *seg) {
    const functab_t *ft = seg->funcs;
    dict_acc_t *a = seg->dict ? dict_of_seg(c, seg) : NULL; /* the block cache always gives one */
    if (!a) return -1;
    size_t n = a->ver->nstrings;
    if (n > a->nfn) {
        size_t cap = a->fcap;
        if (VEC_RESERVE(a->fself, cap, n) || VEC_RESERVE(a->ftotal, a->fcap, n)) return -1;
        memset(a->fself + a->nfn, 0, (n - a->nfn) * sizeof *a->fself);
        memset(a->ftotal + a->nfn, 0, (n - a->nfn) * sizeof *a->ftotal);
        a->nfn = n;
    }
    int over = 0;
    for (size_t i = 0; i < ft->nseries; i++) {
        if (ft->series[i] >= c->nbits || !c->bits[ft->series[i]]) continue;
        over |= __builtin_add_overflow(c->r->fn_all, ft->all[i], &c->r->fn_all);
        for (size_t e = ft->first[i]; e < ft->first[i + 1]; e++) {
            assert(ft->fn[e] < n);
            over |= __builtin_add_overflow(a->fself[ft->fn[e]], ft->self[e], &a->fself[ft->fn[e]]);
            over |= __builtin_add_overflow(a->ftotal[ft->fn[e]], ft->total[e], &a->ftotal[ft->fn[e]]);
        }
    }
    if (over) return c->overflow = 1, -1;
    return charge(c);
}

/* Adds one function's sums to the result's, by name (r->sym's strings). 0, -1 (OOM) or -2
 * (a sum past int64). */
static int add_function(merge_result_t *r, const symtab_t *sym, uint32_t name, int64_t self, int64_t total) {
    uint32_t id = symtab_string(r->sym, symtab_str(sym, name), sym->slen[name]);
    if (id == SYM_NONE) return -1;
    if (id >= r->nfn) {
        size_t cap = r->fn_cap, n = r->sym->nstrings;
        if (VEC_RESERVE(r->fn_self, cap, n) || VEC_RESERVE(r->fn_total, r->fn_cap, n)) return -1;
        memset(r->fn_self + r->nfn, 0, (n - r->nfn) * sizeof *r->fn_self);
        memset(r->fn_total + r->nfn, 0, (n - r->nfn) * sizeof *r->fn_total);
        r->nfn = n;
    }
    /* Sums of int64 values: past int64 the answer would be wrong, so it is refused. */
    if (__builtin_add_overflow(r->fn_self[id], self, &r->fn_self[id]) ||
        __builtin_add_overflow(r->fn_total[id], total, &r->fn_total[id]))
        return -2;
    return 0;
}

/* Adds a dictionary's per-function sums to the result's. */
static int fold_funcs(scan_ctx_t *c, const dict_acc_t *a) {
    for (size_t k = 0; k < a->nfn; k++) {
        int rc = a->fself[k] || a->ftotal[k] ? add_function(c->r, a->ver, (uint32_t)k, a->fself[k], a->ftotal[k]) : 0;
        if (rc) return c->overflow = rc == -2, -1;
    }
    return charge(c);
}

/* Folds every dictionary's sums into the result, once each, after the scan: straight
 * into the result's tree when there is one, unless the dictionary has frames the
 * symbolizer must name first (it names the result's symtab). */
static int fold_dicts(scan_ctx_t *c) {
    for (size_t i = 0; i < c->ndaccs; i++) {
        const dict_acc_t *a = &c->daccs[i];
        int rc;
        if (c->r->tree && !(c->q->symbolizer && has_addresses(a->ver)))
            rc = tree_add(c->r->tree, a->ver, a->acc, a->n) ? -1 : charge(c);
        else rc = fold_acc(c, a->ver, a->acc, a->n);
        if (rc || fold_funcs(c, a)) return -1;
    }
    return 0;
}

static void free_daccs(scan_ctx_t *c) {
    for (size_t i = 0; i < c->ndaccs; i++) {
        symdict_release(c->daccs[i].dict, c->daccs[i].ver);
        free(c->daccs[i].acc);
        free(c->daccs[i].fself);
        free(c->daccs[i].ftotal);
    }
    free(c->daccs);
}

static void note_span(merge_result_t *r, const seg_profile_t *p) {
    int64_t end = p->time_ns + (p->duration_ns > 0 ? p->duration_ns : 0);
    if (!r->profiles || p->time_ns < r->first_ns) r->first_ns = p->time_ns;
    if (!r->profiles || end > r->end_ns) r->end_ns = end;
}

/* The sum of p's samples that pass the filters (keep: the call site's stacks or NULL;
 * the query's spans), each also added times w to acc[stack] when acc is not NULL.
 * With spans, p's span samples are the ones read. */
static int64_t kept_samples(const scan_ctx_t *c, const segment_t *seg, const seg_profile_t *p, const uint8_t *keep,
                            double *acc, double w) {
    const merge_only_t *o = c->q->only;
    int spans = span_mode(o);
    uint32_t n = spans ? p->nspans : p->nsamples;
    int64_t sum = 0;
    for (uint32_t j = 0; j < n; j++) {
        const span_sample_t *sp = spans ? &seg->spans[p->span_first + j] : NULL;
        uint32_t st = sp ? sp->stack : seg->stacks[p->first + j];
        int64_t v = sp ? sp->value : seg->values[p->first + j];
        assert(st < seg->sym->nstacks); /* acc and keep have one entry per stack */
        if ((keep && !keep[st]) || (sp && !span_kept(o, sp))) continue;
        sum += v;
        if (acc) acc[st] += (double)v * w;
    }
    return sum;
}

/* Adds a row's total (times w) to r, and to its timeline's bucket b: times bw, or
 * counted in in_bucket for an average timeline. */
static void add_to(merge_result_t *r, uint32_t *in_bucket, size_t b, const seg_profile_t *p, int64_t total, double w,
                   double bw) {
    note_span(r, p);
    r->profiles++;
    r->total += (double)total * w;
    if (!r->nbuckets) return;
    if (in_bucket) r->timeline[b] += (double)total, in_bucket[b]++;
    else r->timeline[b] += (double)total * bw;
}

/* Adds one selected row's total to the result's total, timeline and span, and to its
 * series' group's in a split merge. */
static int add_totals(scan_ctx_t *c, const seg_profile_t *p, int64_t total, double w) {
    merge_result_t *r = c->r;
    size_t b = r->nbuckets ? bucket_of(c, p->time_ns) : 0;
    double bw = 1;
    int avg = r->nbuckets && c->q->average_timeline;
    if (r->nbuckets && !avg && r->gauge) {
        uint64_t *n = u64map_put(&c->per_bucket, (uint64_t)p->series << 24 | b, NULL);
        if (!n) return -1;
        bw = 1.0 / *n;
    }
    add_to(r, avg ? c->in_bucket : NULL, b, p, total, w, bw);
    const merge_split_t *sp = c->split;
    if (!sp || p->series >= sp->ngroup_of || sp->group_of[p->series] < 0) return 0;
    size_t g = (size_t)sp->group_of[p->series];
    add_to(&sp->parts[g], avg ? c->part_in_bucket + g * r->nbuckets : NULL, b, p, total, w, bw);
    return 0;
}

/* 1 when this pass sums stacks: STACKS, or TOTALS doing both (samples_filtered). */
static int stacks_pass(const scan_ctx_t *c) {
    return c->q->want_stacks &&
           (c->pass == PASS_STACKS || c->pass == PASS_REMOTE || (c->pass == PASS_TOTALS && samples_filtered(c->q)));
}

/* Adds the selected rows of one segment to the result and, with stacks wanted, to
 * acc, the per-stack accumulator (*touched set then). keep: the call-site filter or NULL. */
static int merge_rows(scan_ctx_t *c, const segment_t *seg, const uint8_t *keep, double *acc, int *touched) {
    merge_result_t *r = c->r;
    for (size_t i = 0; i < seg->nprofiles; i++) {
        const seg_profile_t *p = &seg->profiles[i];
        if (!row_selected(c, p)) continue;
        double w = 1;
        if (r->gauge) {
            uint64_t *n = u64map_put(&c->per_series, p->series, NULL);
            if (!n) return -1;
            if (!*n) continue; /* not counted: cannot happen under one read lock, but never divide by 0 */
            w = 1.0 / *n;
        }
        int sum = stacks_pass(c);
        *touched |= sum;
        int64_t total = sum || samples_filtered(c->q) ? kept_samples(c, seg, p, keep, sum ? acc : NULL, w) : p->total;
        if (c->pass == PASS_TOTALS && add_totals(c, p, total, w)) return -1;
    }
    return 0;
}

/* 1 when a location of t has no frames yet (an address, for the symbolizer). */
static int has_addresses(const symtab_t *t) {
    for (size_t i = 1; i < t->nlocations; i++)
        if (!t->locations[i].nlines) return 1;
    return 0;
}

/* The symtab the name filters (call site, focus, ignore) read: seg's own, or, when the
 * query symbolizes and seg holds addresses, a symbolized copy. The symbolizer gives
 * locations their frames in place, so stack ids are the same, and the filters match
 * the names the answer will show. *copy receives what to free; NULL on failure. */
static const symtab_t *filter_names(scan_ctx_t *c, const segment_t *seg, symtab_t **copy, hr_err_t *err) {
    *copy = NULL;
    if (!c->q->symbolizer || !has_addresses(seg->sym)) return seg->sym;
    buf_t b;
    buf_init(&b);
    symtab_encode(seg->sym, &b); /* a copy: the segment is shared with other queries */
    symtab_t *t = b.oom ? NULL : symtab_decode(b.data, b.len, err);
    buf_free(&b);
    symbolize_stats_t st = {0};
    if (t && symbolizer_rewrite(c->q->symbolizer, t, c->q->deadline_ns, &st, err)) symtab_free(t), t = NULL;
    return *copy = t;
}

/* A segment sharing a dictionary sums into the dictionary's accumulator (folded after
 * the scan); any other (a head) into its own, folded now. */
static int merge_segment(scan_ctx_t *c, const segment_t *seg) {
    if (seg->funcs) return merge_funcs(c, seg); /* only a STACKS pass with funcs_ok meets one */
    int touched = 0;
    double *acc = c->acc;
    if (stacks_pass(c) && seg->dict) {
        if (!(acc = dict_acc(c, seg))) return -1;
    } else if (stacks_pass(c)) {
        if (vec_reserve(&c->acc, &c->acc_cap, seg->sym->nstacks, sizeof *c->acc)) return -1;
        memset(acc = c->acc, 0, seg->sym->nstacks * sizeof *c->acc);
    }
    uint8_t *keep = NULL, *also = NULL;
    symtab_t *copy = NULL;
    hr_err_t e = {0};
    const symtab_t *names =
        c->q->call_site || stackfilter_active(c->q->filter) ? filter_names(c, seg, &copy, &e) : NULL;
    if ((c->q->call_site || stackfilter_active(c->q->filter)) && !names) return -1;
    if (c->q->call_site && !(keep = callsite_match(names, c->q->call_site))) return symtab_free(copy), -1;
    if (stackfilter_active(c->q->filter)) {
        if (!(also = stackfilter_match(names, c->q->filter))) return free(keep), symtab_free(copy), -1;
        for (size_t s = 0; keep && s < seg->sym->nstacks; s++) keep[s] &= also[s];
        if (!keep) keep = also, also = NULL;
    }
    free(also);
    symtab_free(copy);
    int rc = merge_rows(c, seg, keep, acc, &touched);
    free(keep);
    if (rc) return -1;
    return touched && !seg->dict ? fold_acc(c, seg->sym, c->acc, seg->sym->nstacks) : 0;
}

/* ---- a merge split across nodes (split.h) ---- */

static const store_part_ref_t NO_PARTS[1]; /* `only` of a scan that reads no partition */

static void split_fail(scan_ctx_t *c, const hr_err_t *e) {
    if (!c->split_failed) c->split_err = *e;
    c->split_failed = 1;
}

static void split_oom(scan_ctx_t *c) {
    hr_err_t e = {0};
    hr_fail(&e, HR_ENOMEM, "out of memory splitting the merge");
    split_fail(c, &e);
}

/* The share of the tenant's series that the merge selects: what a plan by whole blocks
 * scales the blocks' bytes by to guess what the merge decodes (series are not all the
 * same size, so it is a guess, for --query-split-min-bytes only). */
static double selected_share(const scan_ctx_t *c) {
    index_snapshot_t snap;
    hr_err_t e = {0};
    size_t picked = 0;
    for (uint32_t i = 0; i < c->nbits; i++) picked += c->bits[i] != 0;
    double share = index_snapshot(store_index(c->st), c->q->tenant, &snap, &e) == 0 && snap.n > picked
                       ? (double)picked / (double)snap.n
                       : 1.0;
    index_snapshot_free(&snap);
    return share;
}

/* What the merge may read, as units to deal (split.h): whole blocks from the catalog's
 * list when there are enough of them, so no footer is read to plan and each node reads
 * only its own blocks' footers; else (only at the stacks pass: at_totals returns 1
 * then, to wait for it) the partitions the footers name. *total: the bytes it decodes,
 * or a guess of them. 0, 1, -1 (OOM) or -2 (a footer did not load: e). */
static int plan_units(scan_ctx_t *c, const store_filter_t *f, int at_totals, store_part_ref_t **refs, uint64_t **bytes,
                      size_t *n, uint64_t *total, hr_err_t *e) {
    *total = 0;
    if (store_plan_blocks_locked(c->st, c->q->tenant, f, refs, bytes, n)) return -1;
    if (split_by_blocks(*n, 1 + c->q->remote->npeers)) {
        for (size_t i = 0; i < *n; i++) *total += (*bytes)[i];
        *total = (uint64_t)((double)*total * selected_share(c));
        return 0;
    }
    free(*refs), free(*bytes);
    *refs = NULL, *bytes = NULL;
    if (at_totals) return 1;
    if (store_plan_locked(c->st, c->q->tenant, f, refs, bytes, n, e)) return -2;
    for (size_t i = 0; i < *n; i++) *total += (*bytes)[i];
    return 0;
}

/* Passes k.. of the scan read only refs[0..n) of the blocks (and the heads). */
static void narrow(scan_ctx_t *c, size_t k, const store_part_ref_t *refs, size_t n) {
    for (; k < c->nfilters; k++) c->filters[k].only = refs, c->filters[k].nonly = n;
}

/* At the totals pass (when whole blocks can be dealt: the peers then answer their
 * totals too) or else at the stacks pass: plans the shares, asks the peers for theirs
 * and narrows this pass and the next to this node's own (and the heads). Everything
 * finish_split needs is allocated here, before any peer is asked. */
static void start_split(scan_ctx_t *c, size_t k) {
    split_state_t *sp = &c->sp;
    store_part_ref_t *refs = NULL;
    uint64_t *bytes = NULL, total = 0;
    size_t n = 0;
    hr_err_t e = {0};
    int at_totals = c->pass == PASS_TOTALS;
    int rc = plan_units(c, &c->filters[k], at_totals, &refs, &bytes, &n, &total, &e);
    if (rc == 1) return; /* planned at the stacks pass */
    sp->planned = 1;
    if (rc == 0 && total < c->q->remote->min_bytes) { /* small: merged here, as if not split */
        free(refs);
        free(bytes);
        return;
    }
    sp->nodes = 1 + c->q->remote->npeers;
    sp->totals = at_totals;
    sp->shares = calloc(sp->nodes, sizeof *sp->shares), sp->nshares = calloc(sp->nodes, sizeof *sp->nshares);
    sp->ok = calloc(sp->nodes, sizeof *sp->ok), sp->body = calloc(sp->nodes, sizeof *sp->body);
    sp->errs = calloc(sp->nodes, sizeof *sp->errs);
    if (rc == 0 && (!sp->shares || !sp->nshares || !sp->ok || !sp->body || !sp->errs)) rc = -1;
    narrow(c, k, NO_PARTS, 0); /* until the plan stands (a failed split reads nothing) */
    if (rc) return free(refs), free(bytes), rc == -2 ? split_fail(c, &e) : split_oom(c);
    rc = split_plan(refs, bytes, n, sp->nodes, sp->shares, sp->nshares);
    free(refs);
    free(bytes);
    merge_share_ask_t ask = {c->filters[c->nfilters - 1].funcs_ok, at_totals, c->q->step};
    if (rc || !(sp->retry = malloc((n + 1) * sizeof *sp->retry))) return split_oom(c);
    if (!(sp->run = split_start(c->q->remote, sp->shares, sp->nshares, &ask))) return split_oom(c);
    narrow(c, k, sp->shares[0], sp->nshares[0]);
    c->r->split.parts_here = sp->nshares[0];
    c->r->split.parts_sent = n - sp->nshares[0];
}

/* A share's totals, timeline and span into r (a share dealt at the totals pass). */
static int add_share_totals(merge_result_t *r, const share_t *s, hr_err_t *err) {
    if (!s->has_totals || s->nbuckets != r->nbuckets)
        return hr_fail(err, HR_EUNPROC, "a peer's share has no totals for this timeline");
    if (s->profiles && (!r->profiles || s->first_ns < r->first_ns)) r->first_ns = s->first_ns;
    if (s->profiles && (!r->profiles || s->end_ns > r->end_ns)) r->end_ns = s->end_ns;
    r->profiles += s->profiles;
    r->total += (double)s->total;
    for (size_t b = 0; b < r->nbuckets; b++) r->timeline[b] += (double)s->timeline[b];
    return 0;
}

/* Adds a peer's share (its stacks by fingerprint, its functions by name). 0 or -1. */
static int add_share(scan_ctx_t *c, const buf_t *body, hr_err_t *err) {
    share_t s;
    int rc = share_decode(body->data, body->len, &s, err);
    if (rc == 0 && c->sp.totals) rc = add_share_totals(c->r, &s, err);
    double *acc = rc == 0 ? malloc((s.sym->nstacks + 1) * sizeof *acc) : NULL;
    if (rc == 0 && (!acc || symtab_fingerprint_stacks(s.sym))) rc = hr_fail(err, HR_ENOMEM, "out of memory");
    for (size_t i = 0; rc == 0 && i < s.sym->nstacks; i++) acc[i] = (double)s.self[i];
    if (rc == 0 && fold_acc(c, s.sym, acc, s.sym->nstacks)) rc = -1;
    for (size_t k = 0; rc == 0 && k < s.nfn; k++) rc = add_function(c->r, s.sym, s.fn[k], s.fself[k], s.ftotal[k]);
    if (rc == 0 && __builtin_add_overflow(c->r->fn_all, s.fn_all, &c->r->fn_all)) rc = -2;
    if (rc == -2) hr_fail(err, HR_EINVAL, "the function sums of this selection exceed int64; narrow the range");
    else if (rc && c->limit) *err = c->limit_err;
    else if (rc && !err->code) hr_fail(err, HR_ENOMEM, "out of memory adding a peer's share");
    if (rc == 0) {
        c->r->split.peer_parts_decoded += s.parts_decoded;
        c->r->split.peer_cpu_us += s.cpu_us;
    }
    free(acc);
    share_destroy(&s);
    return rc;
}

/* After the scan, its lock released (a peer's share may wait for this node's own
 * catalog sync): waits for the peers and adds their shares; the partitions of those
 * that failed go to sp->retry, for a scan of their own. */
static void finish_split(scan_ctx_t *c) {
    split_state_t *sp = &c->sp;
    if (!sp->run) return;
    split_join(sp->run, sp->ok, sp->body, sp->errs);
    sp->run = NULL;
    for (size_t k = 1; !c->split_failed && k < sp->nodes; k++) {
        hr_err_t e = sp->errs[k];
        if (!sp->nshares[k]) continue;
        if (sp->ok[k] && add_share(c, &sp->body[k], &e) == 0) {
            c->r->split.shares_ok++;
            continue;
        }
        if (e.code == HR_ENOMEM || e.code == HR_EINVAL || c->limit) { /* ours: merging here would not help */
            split_fail(c, &e);
            break;
        }
        log_warn("query.share_failed", "peer=%zu partitions=%zu err=\"%s\" (merged here instead)", k - 1,
                 sp->nshares[k], e.msg);
        c->r->split.shares_failed++;
        memcpy(sp->retry + sp->nretry, sp->shares[k], sp->nshares[k] * sizeof *sp->retry);
        sp->nretry += sp->nshares[k];
    }
    store_part_refs_sort(sp->retry, sp->nretry);
    c->r->split.parts_here += sp->nretry;
}

static void free_split(split_state_t *sp) {
    if (sp->run) split_join(sp->run, sp->ok, sp->body, sp->errs); /* a failed scan: the peers still end */
    for (size_t k = 0; sp->body && k < sp->nodes; k++) buf_free(&sp->body[k]);
    for (size_t k = 0; sp->shares && k < sp->nodes; k++) free(sp->shares[k]);
    free(sp->shares);
    free(sp->nshares);
    free(sp->ok);
    free(sp->body);
    free(sp->errs);
    free(sp->retry);
}

static void begin_pass(void *ctx, size_t k) {
    scan_ctx_t *c = ctx;
    c->pass = c->passes[k];
    /* A peer's share, or the shares of failed peers merged here after the scan that planned
     * them: every partition must still be there, or the answer would be smaller. */
    if (k == 0 && c->q->parts && !store_has_parts_locked(c->st, c->q->parts, c->q->nparts)) c->missing = 1;
    if (k == 0 && c->retrying && !store_has_parts_locked(c->st, c->sp.retry, c->sp.nretry)) c->missing = 1;
    /* Dealt at the totals pass unless each step's mean is wanted (the peers would need
     * their profile counts per step too): the stacks pass deals it then. */
    int totals_ok = c->pass == PASS_TOTALS && !c->q->average_timeline;
    if (c->q->remote && !c->sp.planned && (totals_ok || c->pass == PASS_STACKS)) start_split(c, k);
}

static int scan_one(void *ctx, const segment_t *seg) {
    scan_ctx_t *c = ctx;
    if (c->missing || c->split_failed) return -1;
    /* Checked per segment: blocks are bounded (--head-max-bytes, --compact-max-bytes), so
     * the overrun past the deadline is one segment's merge at most. */
    if (c->q->deadline_ns && time_now_ns() > c->q->deadline_ns) return c->timeout = 1, -1;
    int rc = c->pass == PASS_COUNT ? count_segment(c, seg) : merge_segment(c, seg);
    if (rc) c->oom = 1;
    return rc;
}

/* Narrows the selected series to those of the listed profiles. */
static void only_listed_series(scan_ctx_t *c, const merge_only_t *o) {
    for (uint32_t i = 0; i < c->nbits; i++) {
        profile_ref_t key = {i, INT64_MIN};
        size_t lo = 0, hi = o->nprofiles; /* the first listed profile of series i */
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (cmp_ref(&o->profiles[mid], &key) < 0) lo = mid + 1;
            else hi = mid;
        }
        c->bits[i] = c->bits[i] && lo < o->nprofiles && o->profiles[lo].series == i;
    }
}

/* A result's type, gauge rule and empty timeline, without a symtab (a split's part,
 * which holds no stacks). */
static int init_totals(const merge_query_t *q, merge_result_t *r, hr_err_t *err) {
    memset(r, 0, sizeof *r);
    if (!q->sel->profile_type)
        return hr_fail(err, HR_EINVAL,
                       "the query must name a profile type, e.g. "
                       "process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name=\"api\"}");
    snprintf(r->type_id, sizeof r->type_id, "%s", q->sel->profile_type);
    if (ptype_split(r->type_id, &r->type)) return hr_fail(err, HR_EINVAL, "bad profile type %s", r->type_id);
    r->gauge = ptype_is_gauge(&r->type);
    if (q->step > 0) {
        r->tl_step = q->step;
        r->tl_start = q->from - (q->from % q->step + q->step) % q->step; /* snapped to the step */
        r->nbuckets = (size_t)((q->until - r->tl_start) / q->step) + 1;
        if (r->nbuckets > 100000) return hr_fail(err, HR_EINVAL, "step too small for the range (over 100000 points)");
        if (!(r->timeline = calloc(r->nbuckets, sizeof *r->timeline))) return hr_fail(err, HR_ENOMEM, "out of memory");
    }
    return 0;
}

static int init_result(const merge_query_t *q, merge_result_t *r, hr_err_t *err) {
    if (init_totals(q, r, err)) return -1;
    if (!(r->sym = symtab_new()) || ensure_self(r)) return hr_fail(err, HR_ENOMEM, "out of memory");
    /* Gauges sum fractions, which the tree would round per dictionary, not per stack;
     * `hide` rewrites the result's symtab. Both keep every stack there. */
    if (q->tree && q->want_stacks && !r->gauge && !(q->filter && q->filter->hide) &&
        (!(r->tree = malloc(sizeof *r->tree)) || tree_init(r->tree, r->sym)))
        return hr_fail(err, HR_ENOMEM, "out of memory");
    return 0;
}

/* The partitions of the peers that failed, merged here after the scan: their stacks
 * (f[n - 1]'s pass) and, when the peers were to answer their totals, their totals
 * (f[n - 2]'s) first. */
static int merge_retry(scan_ctx_t *c, const store_filter_t *f, size_t n, hr_err_t *err) {
    store_filter_t again[2];
    size_t m = 0;
    assert(!c->sp.totals || (n >= 2 && c->passes[n - 2] == PASS_TOTALS));
    if (c->sp.totals) again[m] = f[n - 2], c->passes[m++] = PASS_TOTALS;
    again[m] = f[n - 1], c->passes[m++] = PASS_REMOTE;
    for (size_t k = 0; k < m; k++) again[k].only = c->sp.retry, again[k].nonly = c->sp.nretry, again[k].no_heads = 1;
    c->filters = again, c->nfilters = m, c->retrying = 1;
    int rc = store_scan_passes(c->st, c->q->tenant, again, m, begin_pass, scan_one, c, err);
    c->filters = NULL, c->nfilters = 0;
    return rc;
}

/* merge_run, and with split (NULL for none) the same totals split by group. */
static int merge_exec(store_t *st, const merge_query_t *q, merge_result_t *r, const merge_split_t *split,
                      hr_err_t *err) {
    if (init_result(q, r, err)) return -1;
    if (q->until < q->from) return hr_fail(err, HR_EINVAL, "`until` is before `from`");
    scan_ctx_t c = {.q = q, .r = r, .st = st, .split = split};
    catalog_query_t cq = {.tenant = q->tenant, .sel = q->sel, .deadline_ns = q->deadline_ns};
    if (!(c.bits = catalog_select(st, &cq, &c.nbits, err))) return -1;
    if (q->only && q->only->nprofiles) only_listed_series(&c, q->only);
    /* See pass_t. Only the selected series' partitions are ever decoded; pre-merged
     * rows hold neither single profiles nor spans. One read lock over all passes, so
     * the counts, the totals and the stacks are of the same profiles. */
    int filtered = samples_filtered(q), whole = !q->only || (!q->only->nprofiles && !span_mode(q->only));
    store_filter_t f[4];
    size_t n = 0;
    if (r->gauge)
        c.passes[n] = PASS_COUNT, f[n++] = (store_filter_t){q->from, q->until, c.bits, c.nbits, .totals_only = 1};
    if (!q->parts || q->share_totals)
        c.passes[n] = PASS_TOTALS,
        f[n++] = (store_filter_t){q->from, q->until, c.bits, c.nbits, .totals_only = !filtered};
    /* Function tables are sums per series and name: no gauge averaging, no filter. */
    int funcs = q->functions && whole && !r->gauge && !(q->filter && q->filter->hide);
    if (q->want_stacks && !filtered)
        c.passes[n] = PASS_STACKS,
        f[n++] = (store_filter_t){q->from,           q->until,      c.bits, c.nbits, .merged_ok = whole,
                                  .funcs_ok = funcs, .window_ok = 1}; /* rows out of range are not wanted, nor spans */
    /* Sums only travel between nodes (share.h); a restricted merge is small anyway. */
    merge_query_t local = *q;
    if (q->remote && (!q->remote->npeers || !q->want_stacks || filtered || !whole || r->gauge || q->parts ||
                      (q->filter && q->filter->hide)))
        local.remote = NULL;
    c.q = q = &local;
    for (size_t k = 0; q->parts && k < n; k++)
        f[k].only = q->parts, f[k].nonly = q->nparts, f[k].no_heads = 1, f[k].strict = 1;
    c.filters = f, c.nfilters = n;
    int rc = 0;
    if (q->average_timeline && r->nbuckets && !(c.in_bucket = calloc(r->nbuckets, sizeof *c.in_bucket)))
        rc = hr_fail(err, HR_ENOMEM, "out of memory");
    if (rc == 0 && split && q->average_timeline && r->nbuckets &&
        !(c.part_in_bucket = calloc(split->nparts * r->nbuckets + 1, sizeof *c.part_in_bucket)))
        rc = hr_fail(err, HR_ENOMEM, "out of memory");
    if (rc == 0) rc = store_scan_passes(st, q->tenant, f, n, begin_pass, scan_one, &c, err);
    finish_split(&c);
    if (rc == 0 && !c.split_failed && c.sp.nretry) rc = merge_retry(&c, f, n, err);
    if (c.overflow) rc = hr_fail(err, HR_EINVAL, "the function sums of this selection exceed int64; narrow the range");
    else if (c.missing)
        rc = hr_fail(err, HR_EIO,
                     "a block partition of this merge is not known to this node (its catalog is behind, or "
                     "compaction replaced the block meanwhile); ask again");
    else if (c.split_failed) rc = -1, *err = c.split_err;
    if (rc == 0 && fold_dicts(&c)) rc = -1, c.oom = !c.limit;
    for (size_t i = 0; rc == 0 && c.in_bucket && i < r->nbuckets; i++)
        if (c.in_bucket[i]) r->timeline[i] /= c.in_bucket[i];
    for (size_t g = 0; rc == 0 && c.part_in_bucket && g < split->nparts; g++)
        for (size_t i = 0; i < r->nbuckets; i++)
            if (c.part_in_bucket[g * r->nbuckets + i])
                split->parts[g].timeline[i] /= c.part_in_bucket[g * r->nbuckets + i];
    free(c.in_bucket);
    free(c.part_in_bucket);
    if (rc && c.timeout)
        hr_fail(err, HR_ETIMEOUT, "the query ran past --query-timeout; narrow the time range or the selection");
    else if (rc && c.limit)
        hr_fail(err, c.limit_err.code, "%s; narrow the time range or the selection", c.limit_err.msg);
    else if (rc && c.oom) hr_fail(err, HR_ENOMEM, "out of memory during merge");
    free(c.bits);
    free(c.acc);
    u64map_free(&c.per_series);
    u64map_free(&c.per_bucket);
    sym_fpmap_free(&c.copied);
    free_daccs(&c);
    free_split(&c.sp);
    if (rc == 0 && ensure_self(r)) rc = hr_fail(err, HR_ENOMEM, "out of memory");
    /* The one place frames get names: every renderer reads r->sym after this. */
    if (rc == 0 && q->want_stacks && q->symbolizer)
        rc = symbolizer_rewrite(q->symbolizer, r->sym, q->deadline_ns, &r->symbolized, err);
    if (rc == 0 && q->want_stacks && q->filter && q->filter->hide &&
        stackfilter_hide(&r->sym, &r->self, &r->nself, &r->self_cap, q->filter->hide))
        rc = hr_fail(err, HR_ENOMEM, "out of memory hiding frames");
    return rc;
}

int merge_run(store_t *st, const merge_query_t *q, merge_result_t *r, hr_err_t *err) {
    return merge_exec(st, q, r, NULL, err);
}

int merge_run_split(store_t *st, const merge_query_t *q, const merge_split_t *split, hr_err_t *err) {
    assert(!q->want_stacks);
    int rc = 0;
    for (size_t g = 0; g < split->nparts && rc == 0; g++) rc = init_totals(q, &split->parts[g], err);
    merge_result_t all;
    if (rc == 0) rc = merge_exec(st, q, &all, split, err);
    merge_result_destroy(&all);
    return rc;
}

void merge_result_destroy(merge_result_t *r) {
    if (r->tree) tree_destroy(r->tree);
    free(r->tree);
    symtab_free(r->sym);
    free(r->self);
    free(r->timeline);
    free(r->fn_self);
    free(r->fn_total);
    memset(r, 0, sizeof *r);
}
