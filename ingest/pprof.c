/* pprof.c - see pprof.h. */
#include "ingest/pprof.h"

#include "ingest/request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/arena.h"
#include "common/ptype.h"
#include "wire/gzip.h"
#include "wire/profile.pb-c.h"

typedef Perftools__Profiles__Profile pb_profile_t;

/* Maps pprof's arbitrary uint64 ids to array positions: a direct table when ids are
 * dense (what every real writer produces), a sorted table otherwise. */
typedef struct {
    uint64_t *ids; /* sorted, for the sparse case */
    uint32_t *pos;
    size_t n;
    uint32_t *direct;
    uint64_t max;
} idmap_t;

static int cmp_idpos(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static int idmap_build(idmap_t *m, size_t n, uint64_t (*id_of)(const void *, size_t), const void *arr, const char *what,
                       hr_err_t *err) {
    memset(m, 0, sizeof *m);
    for (size_t i = 0; i < n; i++)
        if (id_of(arr, i) > m->max) m->max = id_of(arr, i);
    if (m->max <= 4 * n + 64) {
        m->direct = malloc((m->max + 1) * sizeof *m->direct);
        if (!m->direct) return hr_fail(err, HR_ENOMEM, "out of memory");
        memset(m->direct, 0xff, (m->max + 1) * sizeof *m->direct);
        for (size_t i = 0; i < n; i++) {
            uint64_t id = id_of(arr, i);
            if (id == 0 || m->direct[id] != UINT32_MAX)
                return hr_fail(err, HR_EUNPROC, "invalid pprof: %s id %llu is zero or repeated", what,
                               (unsigned long long)id);
            m->direct[id] = (uint32_t)i;
        }
        return 0;
    }
    uint64_t *pairs = malloc(n * 2 * sizeof *pairs);
    if (!pairs) return hr_fail(err, HR_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        pairs[2 * i] = id_of(arr, i);
        pairs[2 * i + 1] = i;
    }
    qsort(pairs, n, 2 * sizeof *pairs, cmp_idpos);
    m->ids = pairs;
    m->n = n;
    for (size_t i = 0; i < n; i++)
        if (pairs[2 * i] == 0 || (i && pairs[2 * i] == pairs[2 * i - 2]))
            return hr_fail(err, HR_EUNPROC, "invalid pprof: %s id %llu is zero or repeated", what,
                           (unsigned long long)pairs[2 * i]);
    return 0;
}

/* Position of id, or UINT32_MAX. */
static uint32_t idmap_get(const idmap_t *m, uint64_t id) {
    if (m->direct) return id <= m->max ? m->direct[id] : UINT32_MAX;
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (m->ids[2 * mid] == id) return (uint32_t)m->ids[2 * mid + 1];
        if (m->ids[2 * mid] < id) lo = mid + 1;
        else hi = mid;
    }
    return UINT32_MAX;
}

static void idmap_free(idmap_t *m) {
    free(m->ids);
    free(m->direct);
}

static uint64_t loc_id(const void *a, size_t i) { return ((Perftools__Profiles__Location *const *)a)[i]->id; }
static uint64_t fn_id(const void *a, size_t i) { return ((Perftools__Profiles__Function *const *)a)[i]->id; }
static uint64_t map_id(const void *a, size_t i) { return ((Perftools__Profiles__Mapping *const *)a)[i]->id; }

typedef struct {
    const pb_profile_t *p;
    batch_t *b;
    idmap_t locs, fns, maps;
    uint32_t *str_ids;   /* pprof string index -> batch symtab id, 0 = not yet (except "") */
    uint32_t *loc_ids;   /* pprof location position -> batch location id, 0 = not yet */
    uint8_t *off_series; /* pprof string index of a label key -> 1: not a series label */
    int normalized;      /* pprof_opts_t.addresses_normalized */
    hr_err_t *err;
} ctx_t;

static int index_ok(const pb_profile_t *p, int64_t i) { return i >= 0 && (size_t)i < p->n_string_table; }
static int str_ok(const ctx_t *c, int64_t i) { return index_ok(c->p, i); }

/* The batch's id of pprof string i, or SYM_NONE (out of memory; not remembered). */
static uint32_t intern_str(ctx_t *c, int64_t i) {
    if (i == 0) return 0;
    if (!c->str_ids[i]) {
        const char *s = c->p->string_table[i];
        uint32_t id = symtab_string(c->b->sym, s, strlen(s));
        if (id == SYM_NONE) return SYM_NONE;
        c->str_ids[i] = id;
    }
    return c->str_ids[i];
}

static uint32_t intern_function(ctx_t *c, uint64_t id) {
    uint32_t pos = idmap_get(&c->fns, id);
    if (pos == UINT32_MAX) {
        hr_fail(c->err, HR_EUNPROC, "invalid pprof: line refers to unknown function %llu", (unsigned long long)id);
        return SYM_NONE;
    }
    const Perftools__Profiles__Function *f = c->p->function[pos];
    if (!str_ok(c, f->name) || !str_ok(c, f->system_name) || !str_ok(c, f->filename)) {
        hr_fail(c->err, HR_EUNPROC, "invalid pprof: function %llu has a bad string index", (unsigned long long)id);
        return SYM_NONE;
    }
    sym_function_t g = {intern_str(c, f->name), intern_str(c, f->system_name), intern_str(c, f->filename),
                        f->start_line};
    if (g.name == SYM_NONE || g.system_name == SYM_NONE || g.filename == SYM_NONE) return SYM_NONE;
    return symtab_function(c->b->sym, &g);
}

static uint32_t intern_mapping(ctx_t *c, uint64_t id) {
    if (id == 0) return 0;
    uint32_t pos = idmap_get(&c->maps, id);
    if (pos == UINT32_MAX) {
        hr_fail(c->err, HR_EUNPROC, "invalid pprof: location refers to unknown mapping %llu", (unsigned long long)id);
        return SYM_NONE;
    }
    const Perftools__Profiles__Mapping *m = c->p->mapping[pos];
    if (!str_ok(c, m->filename) || !str_ok(c, m->build_id)) {
        hr_fail(c->err, HR_EUNPROC, "invalid pprof: mapping %llu has a bad string index", (unsigned long long)id);
        return SYM_NONE;
    }
    sym_mapping_t g = {m->memory_start, m->memory_limit, m->file_offset, intern_str(c, m->filename),
                       intern_str(c, m->build_id)};
    if (c->normalized) g.start = g.limit = g.offset = 0; /* pprof's "take addresses as they are" */
    if (g.filename == SYM_NONE || g.build_id == SYM_NONE) return SYM_NONE;
    return symtab_mapping(c->b->sym, &g);
}

static uint32_t intern_location(ctx_t *c, uint64_t id) {
    uint32_t pos = idmap_get(&c->locs, id);
    if (pos == UINT32_MAX) {
        hr_fail(c->err, HR_EUNPROC, "invalid pprof: sample refers to unknown location %llu", (unsigned long long)id);
        return SYM_NONE;
    }
    if (c->loc_ids[pos]) return c->loc_ids[pos];
    const Perftools__Profiles__Location *l = c->p->location[pos];
    sym_line_t small[32], *lines = small;
    if (l->n_line > 32 && !(lines = malloc(l->n_line * sizeof *lines))) return SYM_NONE;
    uint32_t out = SYM_NONE;
    for (size_t i = 0; i < l->n_line; i++) {
        lines[i].function = intern_function(c, l->line[i]->function_id);
        lines[i].line = l->line[i]->line;
        if (lines[i].function == SYM_NONE) goto done;
    }
    uint32_t m = intern_mapping(c, l->mapping_id);
    if (m != SYM_NONE) out = symtab_location(c->b->sym, m, l->address, lines, (uint32_t)l->n_line);
    c->loc_ids[pos] = out == SYM_NONE ? 0 : out;
done:
    if (lines != small) free(lines);
    return out;
}

/* The stack id of a sample: pprof lists locations leaf first; the trie goes root first. */
static uint32_t sample_stack(ctx_t *c, const Perftools__Profiles__Sample *s) {
    uint32_t stack = 0;
    for (size_t i = s->n_location_id; i-- > 0;) {
        uint32_t loc = intern_location(c, s->location_id[i]);
        if (loc == SYM_NONE) return SYM_NONE;
        stack = symtab_stack(c->b->sym, stack, loc);
        if (stack == SYM_NONE) return SYM_NONE;
    }
    return stack;
}

static const char *display_of(const pprof_opts_t *o, const char *t) {
    for (size_t i = 0; i < o->ndisplay; i++)
        if (!strcmp(o->display[i].sample_type, t) && o->display[i].display_name) return o->display[i].display_name;
    const char *d = ptype_default_display(t);
    return d ? d : t;
}

static const char *nonempty(const char *s) { return s[0] ? s : "unknown"; }

/* Builds "name:type:unit:ptype:punit" for every sample type. */
static int profile_types(const pb_profile_t *p, const pprof_opts_t *o, char (*ids)[512], hr_err_t *err) {
    const char *shown[64];
    size_t n = p->n_sample_type;
    for (size_t i = 0; i < n; i++) {
        const Perftools__Profiles__ValueType *v = p->sample_type[i];
        if (!v || !index_ok(p, v->type) || !index_ok(p, v->unit))
            return hr_fail(err, HR_EUNPROC, "invalid pprof: sample type %zu has a bad string index", i);
        shown[i] = display_of(o, p->string_table[v->type]);
    }
    char name[128];
    if (o->name && *o->name) snprintf(name, sizeof name, "%s", o->name);
    else ptype_name(shown, n, name, sizeof name);
    const char *pt = "", *pu = "";
    if (p->period_type) {
        if (!index_ok(p, p->period_type->type) || !index_ok(p, p->period_type->unit))
            return hr_fail(err, HR_EUNPROC, "invalid pprof: period type has a bad string index");
        pt = p->string_table[p->period_type->type];
        pu = p->string_table[p->period_type->unit];
    }
    for (size_t i = 0; i < n; i++) {
        const Perftools__Profiles__ValueType *v = p->sample_type[i];
        const char *t = nonempty(p->string_table[v->type]), *u = nonempty(p->string_table[v->unit]);
        /* A profile without a period type (hand-written ones) reuses the sample type. */
        snprintf(ids[i], 512, "%s:%s:%s:%s:%s", name, t, u, pt[0] ? pt : t, pu[0] ? pu : u);
    }
    return 0;
}

/* Label set of one sample: base labels plus its string labels. */
static int sample_labels(ctx_t *c, const Perftools__Profiles__Sample *s, labels_t *out) {
    for (size_t i = 0; i < s->n_label; i++) {
        const Perftools__Profiles__Label *l = s->label[i];
        if (!str_ok(c, l->key) || !str_ok(c, l->str))
            return hr_fail(c->err, HR_EUNPROC, "invalid pprof: sample label has a bad string index");
        if (l->str == 0 || c->off_series[l->key]) continue; /* numeric, or per-sample (plan_label_keys) */
        const char *k = c->p->string_table[l->key], *v = c->p->string_table[l->str];
        if (!utf8_valid(k, strlen(k)) || !utf8_valid(v, strlen(v)))
            return hr_fail(c->err, HR_EUNPROC, "invalid pprof: sample label is not valid UTF-8");
        size_t kn = strlen(k);
        if (kn > LABEL_NAME_MAX) /* refused, not cut: two long names sharing a prefix would merge */
            return hr_fail(c->err, HR_EINVAL, "sample label name `%.40s...` is %zu bytes, over the limit of %d", k, kn,
                           LABEL_NAME_MAX);
        char name[LABEL_NAME_MAX + 1];
        size_t j = 0;
        for (; k[j]; j++) {
            char ch = k[j];
            int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || ch == '.' ||
                     (j > 0 && ch >= '0' && ch <= '9');
            name[j] = ok ? ch : '_'; /* as Prometheus-style stores sanitize label names */
        }
        name[j] = 0;
        if (!j) continue;
        if (labels_set(out, name, v)) return hr_fail(c->err, HR_ENOMEM, "out of memory");
    }
    return 0;
}

/* Sample label keys that identify a sample, not a series: trace-to-profile links, as
 * Pyroscope keeps them (it renames profile_id to span_id). */
static const char *const PER_SAMPLE_KEYS[] = {"span_id", "trace_id", "profile_id", "span_name"};

int pprof_per_sample_key(const char *key) {
    for (size_t s = 0; s < sizeof PER_SAMPLE_KEYS / sizeof *PER_SAMPLE_KEYS; s++)
        if (!strcmp(key, PER_SAMPLE_KEYS[s])) return 1;
    return 0;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Decides which string label keys stay off the series labels: the per-sample keys,
 * and any key with more than PPROF_MAX_SERIES_LABEL_VALUES distinct values in this
 * profile, which would split one upload into that many series (a request id, a
 * user id ...). Counts them in the batch. */
static int plan_label_keys(ctx_t *c) {
    const pb_profile_t *p = c->p;
    size_t n = 0;
    for (size_t i = 0; i < p->n_sample; i++) n += p->sample[i]->n_label;
    uint64_t *pairs = malloc((n ? n : 1) * sizeof *pairs);
    if (!pairs) return -1;
    n = 0;
    for (size_t i = 0; i < p->n_sample; i++)
        for (size_t k = 0; k < p->sample[i]->n_label; k++) {
            const Perftools__Profiles__Label *l = p->sample[i]->label[k];
            if (str_ok(c, l->key) && str_ok(c, l->str) && l->str)
                pairs[n++] = (uint64_t)l->key << 32 | (uint64_t)l->str;
        }
    qsort(pairs, n, sizeof *pairs, cmp_u64);
    for (size_t i = 0; i < n;) {
        uint32_t key = (uint32_t)(pairs[i] >> 32);
        size_t distinct = 0, j = i;
        for (; j < n && (uint32_t)(pairs[j] >> 32) == key; j++) distinct += j == i || pairs[j] != pairs[j - 1];
        int per_sample = pprof_per_sample_key(p->string_table[key]);
        if (per_sample || distinct > PPROF_MAX_SERIES_LABEL_VALUES) {
            c->off_series[key] = 1;
            (*(per_sample ? &c->b->unindexed_span_keys : &c->b->unindexed_high_cardinality_keys))++;
        }
        i = j;
    }
    free(pairs);
    return 0;
}

/* The span id a sample carries (`span_id`, or `profile_id` as Pyroscope renames it):
 * 16 hex digits, as OpenTelemetry writes them; 0 when absent or not a span id. Its
 * `trace_id` label (32 hex digits) goes to trace[0..1] (zeros: none). */
static uint64_t sample_span(const ctx_t *c, const Perftools__Profiles__Sample *s, uint64_t trace[2]) {
    uint64_t span = 0;
    int named = 0; /* a span_id label seen: profile_id no longer counts */
    trace[0] = trace[1] = 0;
    int traced = 0; /* a trace_id label seen */
    for (size_t i = 0; i < s->n_label && !(named && traced); i++) {
        const Perftools__Profiles__Label *l = s->label[i];
        if (!str_ok(c, l->key) || !str_ok(c, l->str) || !l->str) continue;
        const char *k = c->p->string_table[l->key], *v = c->p->string_table[l->str];
        uint64_t x;
        if (!strcmp(k, "trace_id")) {
            traced = 1;
            if (trace_id_parse(v, &trace[0], &trace[1])) trace[0] = trace[1] = 0;
        } else if (!strcmp(k, "span_id")) {
            if (span_id_parse(v, &x) == 0) span = x;
            named = 1;
        } else if (!strcmp(k, "profile_id") && !named && !span && span_id_parse(v, &x) == 0) {
            span = x;
        }
    }
    return span;
}

/* 1 when samples a and b carry the same series labels (what sample_labels keeps: the
 * string labels whose keys go on series), in the same order. */
static int same_series_labels(const ctx_t *c, const Perftools__Profiles__Sample *a,
                              const Perftools__Profiles__Sample *b) {
    size_t i = 0, j = 0;
    for (;;) {
        while (i < a->n_label && (!a->label[i]->str || c->off_series[a->label[i]->key])) i++;
        while (j < b->n_label && (!b->label[j]->str || c->off_series[b->label[j]->key])) j++;
        if (i == a->n_label || j == b->n_label) return i == a->n_label && j == b->n_label;
        if (a->label[i]->key != b->label[j]->key || a->label[i]->str != b->label[j]->str) return 0;
        i++, j++;
    }
}

/* The batch profile of each sample type for sample s, into idx (indices: the batch's
 * array may move). 0 or -1 (c->err set). */
static int sample_profiles(ctx_t *c, const pprof_opts_t *o, char (*ids)[512], int64_t t, int64_t d,
                           const Perftools__Profiles__Sample *s, size_t *idx) {
    labels_t own;
    labels_init(&own);
    const labels_t *labels = o->base;
    int has_str = 0, rc = 0;
    for (size_t i = 0; i < s->n_label; i++) has_str |= s->label[i]->str != 0;
    if (has_str) {
        if (labels_copy(&own, o->base) || sample_labels(c, s, &own)) rc = -1;
        labels = &own;
    }
    for (size_t i = 0; i < c->p->n_sample_type && rc == 0; i++) {
        batch_profile_t *bp = batch_profile(c->b, ids[i], labels, t, d);
        if (!bp) rc = -1;
        else idx[i] = (size_t)(bp - c->b->p);
    }
    labels_destroy(&own);
    if (rc && c->err && c->err->code == HR_OK) hr_fail(c->err, HR_ENOMEM, "out of memory");
    return rc;
}

/* The batch profiles found for the last few label sets, by a sample that carried each
 * (what same_series_labels compares). */
#define LABEL_CACHE 4
typedef struct {
    const Perftools__Profiles__Sample *by[LABEL_CACHE];
    size_t idx[LABEL_CACHE][64];
    unsigned next; /* the entry a miss replaces */
} label_cache_t;

/* The batch profiles (indices, one per sample type) of s's series, from the cache or
 * found and cached. NULL (c->err set) on failure. */
static const size_t *profiles_of(ctx_t *c, const pprof_opts_t *o, char (*ids)[512], int64_t t, int64_t d,
                                 const Perftools__Profiles__Sample *s, label_cache_t *lc) {
    for (unsigned k = 0; k < LABEL_CACHE; k++)
        if (lc->by[k] && same_series_labels(c, lc->by[k], s)) return lc->idx[k];
    unsigned k = lc->next++ % LABEL_CACHE;
    lc->by[k] = NULL;
    if (sample_profiles(c, o, ids, t, d, s, lc->idx[k])) return NULL;
    lc->by[k] = s;
    return lc->idx[k];
}

/* Each sample into its series' batch profile, one per sample type. A profile's samples
 * carry few distinct label sets (often none), so the profiles found for one serve the
 * next samples with the same labels (label_cache_t): a lookup compares every type id
 * and label set in the batch, and building a sample's label set allocates. */
static int add_samples(ctx_t *c, const pprof_opts_t *o, char (*ids)[512], int64_t t, int64_t d) {
    const pb_profile_t *p = c->p;
    size_t nt = p->n_sample_type;
    if (p->n_sample == 0) { /* an empty profile is still a profile: record it */
        for (size_t i = 0; i < nt; i++)
            if (!batch_profile(c->b, ids[i], o->base, t, d)) return hr_fail(c->err, HR_ENOMEM, "out of memory");
        return 0;
    }
    label_cache_t lc = {{0}, {{0}}, 0};
    for (size_t si = 0; si < p->n_sample; si++) {
        const Perftools__Profiles__Sample *s = p->sample[si];
        if (s->n_value != nt)
            return hr_fail(c->err, HR_EUNPROC, "invalid pprof: sample %zu has %zu values for %zu sample types", si,
                           s->n_value, nt);
        uint32_t stack = sample_stack(c, s);
        if (stack == SYM_NONE) {
            if (c->err && c->err->code == HR_OK) hr_fail(c->err, HR_ENOMEM, "out of memory");
            return -1;
        }
        const size_t *idx = profiles_of(c, o, ids, t, d, s, &lc);
        if (!idx) return -1;
        uint64_t trace[2];
        uint64_t span = sample_span(c, s, trace);
        for (size_t i = 0; i < nt; i++) {
            batch_profile_t *bp = &c->b->p[idx[i]];
            if (span ? batch_span_sample(bp, stack, s->value[i], span, trace) : batch_sample(bp, stack, s->value[i]))
                return hr_fail(c->err, HR_ENOMEM, "out of memory");
        }
    }
    return 0;
}

static int decode_profile(const pb_profile_t *p, const pprof_opts_t *o, batch_t *b, hr_err_t *err) {
    if (p->n_string_table == 0 || p->string_table[0][0] != 0)
        return hr_fail(err, HR_EUNPROC, "invalid pprof: string table must start with the empty string");
    if (p->n_sample_type == 0) return hr_fail(err, HR_EUNPROC, "invalid pprof: no sample types");
    if (p->n_sample_type > 64) return hr_fail(err, HR_EUNPROC, "invalid pprof: over 64 sample types");
    if (o->max_samples && p->n_sample > o->max_samples)
        return hr_fail(err, HR_ETOOBIG, "profile has %zu samples, over the limit of %zu", p->n_sample, o->max_samples);
    for (size_t i = 0; i < p->n_string_table; i++)
        if (!utf8_valid(p->string_table[i], strlen(p->string_table[i])))
            return hr_fail(err, HR_EUNPROC, "invalid pprof: string %zu is not valid UTF-8", i);
    char(*ids)[512] = calloc(p->n_sample_type, 512);
    /* The symbol sets sized for the counts the profile declares (symbols are interned
     * as samples reach them, so this is a bound; a declared entry already cost the
     * unpacked message more than its 8-byte slot). The stack trie is left to grow: its
     * bound, every sample's frames, is often ten times what shared prefixes leave. */
    const size_t room[5] = {p->n_string_table, p->n_function, p->n_mapping, p->n_location, 0};
    ctx_t c = {.p = p, .b = b, .normalized = o->addresses_normalized, .err = err};
    c.str_ids = calloc(p->n_string_table, sizeof *c.str_ids);
    c.loc_ids = calloc(p->n_location ? p->n_location : 1, sizeof *c.loc_ids);
    c.off_series = calloc(p->n_string_table, 1);
    int rc = -1;
    if (!ids || !c.str_ids || !c.loc_ids || !c.off_series || symtab_reserve(b->sym, room) || plan_label_keys(&c)) {
        hr_fail(err, HR_ENOMEM, "out of memory");
        goto out;
    }
    if (profile_types(p, o, ids, err) || idmap_build(&c.locs, p->n_location, loc_id, p->location, "location", err) ||
        idmap_build(&c.fns, p->n_function, fn_id, p->function, "function", err) ||
        idmap_build(&c.maps, p->n_mapping, map_id, p->mapping, "mapping", err))
        goto out;
    /* Pyroscope's rule: the upload's `from` wins; a profile time of 0 or in 1970 is
     * not a real time. */
    int64_t t = o->time_ns;
    if (!t) t = p->time_nanos > 365LL * 86400 * 1000000000 ? p->time_nanos : o->now_ns;
    int64_t d = o->duration_ns ? o->duration_ns : p->duration_nanos;
    rc = add_samples(&c, o, ids, t, d);
out:
    idmap_free(&c.locs);
    idmap_free(&c.fns);
    idmap_free(&c.maps);
    free(c.str_ids);
    free(c.loc_ids);
    free(c.off_series);
    free(ids);
    return rc;
}

int pprof_decode(const uint8_t *body, size_t n, const pprof_opts_t *o, batch_t *b, hr_err_t *err) {
    uint8_t *raw = NULL;
    size_t rawlen = n;
    const uint8_t *data = body;
    if (gz_is_gzip(body, n)) {
        if (gz_inflate(body, n, o->max_decompressed, &raw, &rawlen, err)) return -1;
        data = raw;
    } else if (n > o->max_decompressed) {
        return hr_fail(err, HR_ETOOBIG, "profile exceeds the limit of %zu bytes", o->max_decompressed);
    }
    if (rawlen == 0) {
        free(raw);
        return hr_fail(err, HR_EUNPROC, "empty profile: the body holds no pprof data");
    }
    /* Counted from the wire before anything is built: unpacking allocates per element. */
    pprof_census_t c;
    if (pprof_census(data, rawlen, &c, err)) return free(raw), -1;
    if (o->max_samples && c.samples > o->max_samples) {
        free(raw);
        return hr_fail(err, HR_ETOOBIG, "profile has %zu samples, over the limit of %zu", c.samples, o->max_samples);
    }
    if (budget_take(o->budget, c.bytes, "this profile", err)) return free(raw), -1;
    /* Unpacked into an arena: one allocation per element, freed in one go. */
    arena_t *ar = arena_new();
    ProtobufCAllocator pa = ar ? arena_pb_allocator(ar) : (ProtobufCAllocator){0};
    pb_profile_t *p = ar ? perftools__profiles__profile__unpack(&pa, rawlen, data) : NULL;
    free(raw);
    int rc = p                      ? decode_profile(p, o, b, err)
             : ar && !arena_oom(ar) ? hr_fail(err, HR_EUNPROC,
                                              "not a pprof profile: the body does not parse as profile.proto "
                                              "(gzipped or plain protobuf expected)")
                                    : hr_fail(err, HR_ENOMEM, "out of memory decoding the profile");
    arena_free(ar);
    budget_give(o->budget, c.bytes);
    return rc;
}
