/* otlp.c - see otlp.h.
 *
 * Two passes per profile: check_profile follows every index the profile reaches and
 * checks it against its table, allocating nothing; only a profile that passes is
 * converted, so a faulty one is left out whole and the batch never holds half of
 * it. Dictionary entries are shared by all the request's profiles: each is checked
 * once (a memo per table) and interned once (an id cache per table). */
#include "ingest/otlp.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/arena.h"
#include "common/base64.h"
#include "common/pbjson.h"
#include "common/ptype.h"
#include "ingest/pprof.h"
#include "ingest/request.h"
#include "wire/gzip.h"
#include "wire/otlp_profiles.pb-c.h"

typedef Otlp__ExportProfilesServiceRequest otlp_request_t;
typedef Otlp__ProfilesDictionary otlp_dict_t;

#define NS_1971 (365LL * 86400 * 1000000000) /* an earlier profile time is no real time */
#define DEFAULT_DURATION_NS 10000000000LL    /* Pyroscope's, for a profile without one */

/* What check_* found of a dictionary entry. */
enum { UNCHECKED = 0, SOUND = 1, FAULTY = 2 };

/* One table's memo and ids: per entry, its check and its id in the batch (0: not yet). */
typedef struct {
    uint8_t *state;
    uint32_t *id;
} table_memo_t;

typedef struct {
    const otlp_dict_t *d;
    batch_t *b;
    const ingest_limits_t *lim;
    table_memo_t strs, maps, locs, fns, stacks, attrs;
    uint32_t *kernel_maps; /* per mapping index: its kernel copy's id in the batch (0: not yet) */
    uint8_t *off_series;   /* per attribute index: not a series label in the current profile */
    char fault[256];       /* why the profile being checked is left out */
    hr_err_t *err;
} ctx_t;

__attribute__((format(printf, 2, 3))) static int fault(ctx_t *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->fault, sizeof c->fault, fmt, ap);
    va_end(ap);
    return 0;
}

static int memo_init(table_memo_t *m, size_t n) {
    m->state = calloc(n ? n : 1, 1);
    m->id = calloc(n ? n : 1, sizeof *m->id);
    return m->state && m->id ? 0 : -1;
}

static void memo_destroy(table_memo_t *m) {
    free(m->state);
    free(m->id);
}

/* What an old sender's request is told: v1.10 renumbered Sample. */
#define OLD_LAYOUT "opentelemetry-proto v1.9 or older (Sample values = 2, attribute_indices = 3): upgrade the sender"
/* ---- reading the dictionary: every index checked before use ---- */

/* String i of the table, or NULL when i is out of range. An empty table still has
 * its null string. */
static const char *dstr(const ctx_t *c, int32_t i) {
    if (i == 0 && c->d->n_string_table == 0) return "";
    return i >= 0 && (size_t)i < c->d->n_string_table ? c->d->string_table[i] : NULL;
}

/* The string an attribute value holds (string_value, or v1.10's index into the
 * string table), or NULL for another kind or a bad index. */
static const char *value_str(const ctx_t *c, const Otlp__AnyValue *v) {
    if (!v) return NULL;
    if (v->value_case == OTLP__ANY_VALUE__VALUE_STRING_VALUE) return v->string_value;
    if (v->value_case == OTLP__ANY_VALUE__VALUE_STRING_VALUE_STRINDEX) return dstr(c, v->string_value_strindex);
    return NULL;
}

/* Checks entry i of a table of n entries with sound(), once: later calls answer from
 * the memo. A fault found now keeps the message sound() gave it, which names the
 * innermost bad reference. */
static int memo_check(ctx_t *c, table_memo_t *m, size_t n, int32_t i, const char *what,
                      int (*sound)(ctx_t *c, int32_t i)) {
    if (i < 0 || (size_t)i >= n) return fault(c, "%s index %d is out of range", what, i);
    if (m->state[i] == UNCHECKED) {
        int ok = sound(c, i);
        m->state[i] = ok ? SOUND : FAULTY;
        return ok;
    }
    return m->state[i] == SOUND ? 1 : fault(c, "%s %d refers to something out of range", what, i);
}

static int attr_sound(ctx_t *c, int32_t i) {
    const Otlp__KeyValueAndUnit *a = c->d->attribute_table[i];
    const char *s = value_str(c, a->value);
    int bad_index = a->value && a->value->value_case == OTLP__ANY_VALUE__VALUE_STRING_VALUE_STRINDEX && !s;
    if (!dstr(c, a->key_strindex) || bad_index) return fault(c, "attribute %d has a bad string index", i);
    return !s || utf8_valid(s, strlen(s)) ? 1 : fault(c, "attribute %d has a value that is not UTF-8", i);
}

static int check_attr(ctx_t *c, int32_t i) {
    return memo_check(c, &c->attrs, c->d->n_attribute_table, i, "attribute", attr_sound);
}

static int check_attrs(ctx_t *c, const int32_t *idx, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!check_attr(c, idx[i])) return 0;
    return 1;
}

static int function_sound(ctx_t *c, int32_t i) {
    const Otlp__Function *f = c->d->function_table[i];
    if (dstr(c, f->name_strindex) && dstr(c, f->system_name_strindex) && dstr(c, f->filename_strindex)) return 1;
    return fault(c, "function %d has a bad string index", i);
}

static int mapping_sound(ctx_t *c, int32_t i) {
    const Otlp__Mapping *m = c->d->mapping_table[i];
    if (!dstr(c, m->filename_strindex)) return fault(c, "mapping %d has a bad filename index", i);
    return check_attrs(c, m->attribute_indices, m->n_attribute_indices);
}

static int location_sound(ctx_t *c, int32_t i) {
    const Otlp__Location *l = c->d->location_table[i];
    if (l->mapping_index && !memo_check(c, &c->maps, c->d->n_mapping_table, l->mapping_index, "mapping", mapping_sound))
        return 0;
    for (size_t k = 0; k < l->n_lines; k++)
        if (!memo_check(c, &c->fns, c->d->n_function_table, l->lines[k]->function_index, "function", function_sound))
            return 0;
    return check_attrs(c, l->attribute_indices, l->n_attribute_indices);
}

static int stack_sound(ctx_t *c, int32_t i) {
    const Otlp__Stack *s = c->d->stack_table[i];
    for (size_t k = 0; k < s->n_location_indices; k++)
        if (!memo_check(c, &c->locs, c->d->n_location_table, s->location_indices[k], "location", location_sound))
            return 0;
    return 1;
}

static int check_stack(ctx_t *c, int32_t i) {
    return memo_check(c, &c->stacks, c->d->n_stack_table, i, "stack", stack_sound);
}

static int check_value_type(ctx_t *c, const Otlp__ValueType *v, const char *what) {
    if (!v || (dstr(c, v->type_strindex) && dstr(c, v->unit_strindex))) return 1;
    return fault(c, "%s has a bad string index", what);
}

/* A sample's value: the sum of its values (one per event), or its number of events
 * when it has only timestamps; times mult. 0 with a fault when it has neither, when
 * the two disagree, or when the value leaves the 64-bit range. */
static int sample_value(ctx_t *c, const Otlp__Sample *s, int64_t mult, int64_t *out) {
    if (!s->n_values && !s->n_timestamps_unix_nano) return fault(c, "a sample has neither values nor timestamps");
    if (s->n_values && s->n_timestamps_unix_nano && s->n_values != s->n_timestamps_unix_nano)
        return fault(c, "a sample has %zu values but %zu timestamps", s->n_values, s->n_timestamps_unix_nano);
    int64_t v = (int64_t)s->n_timestamps_unix_nano;
    if (s->n_values) {
        v = 0;
        for (size_t i = 0; i < s->n_values; i++)
            if (__builtin_add_overflow(v, s->values[i], &v)) return fault(c, "sample values add up past 64 bits");
    }
    if (__builtin_mul_overflow(v, mult, out)) return fault(c, "a sample value times the period passes 64 bits");
    return 1;
}

/* ---- the profile's type, as Pyroscope names it ---- */

static int vt_is(const ctx_t *c, const Otlp__ValueType *v, const char *type, const char *unit) {
    return v && !strcmp(dstr(c, v->type_strindex), type) && !strcmp(dstr(c, v->unit_strindex), unit);
}

/* The eBPF profiler's CPU profile: samples counted at a cpu:nanoseconds period. */
static int is_ebpf_cpu(const ctx_t *c, const Otlp__Profile *p) {
    return vt_is(c, p->sample_type, "samples", "count") && vt_is(c, p->period_type, "cpu", "nanoseconds") &&
           p->period > 0;
}

static const char *nonempty(const char *s) { return s[0] ? s : "unknown"; }

/* The profile type id; *mult is what sample values are multiplied by. */
static void profile_type(const ctx_t *c, const Otlp__Profile *p, int scope_has_cpu_ns, char *id, size_t cap,
                         int64_t *mult) {
    *mult = 1;
    if (is_ebpf_cpu(c, p) && !scope_has_cpu_ns) {
        snprintf(id, cap, "process_cpu:cpu:nanoseconds:cpu:nanoseconds");
        *mult = p->period;
        return;
    }
    const char *t = dstr(c, p->sample_type->type_strindex), *u = dstr(c, p->sample_type->unit_strindex);
    const char *pt = p->period_type ? dstr(c, p->period_type->type_strindex) : "";
    const char *pu = p->period_type ? dstr(c, p->period_type->unit_strindex) : "";
    const char *shown = ptype_default_display(t);
    char name[128];
    ptype_name(shown ? &shown : &t, 1, name, sizeof name);
    snprintf(id, cap, "%s:%s:%s:%s:%s", name, nonempty(t), nonempty(u), pt[0] ? pt : nonempty(t),
             pu[0] ? pu : nonempty(u));
}

/* ---- checking a profile: every index it reaches, nothing allocated ---- */

/* Checks p and names its type (profile_type, into type; *mult: the value factor).
 * 0 with c->fault when p is faulty. */
static int check_profile(ctx_t *c, const Otlp__Profile *p, int scope_has_cpu_ns, char *type, size_t cap,
                         int64_t *mult) {
    if (!p->sample_type) return fault(c, "the profile has no sample_type");
    if (!check_value_type(c, p->sample_type, "sample_type") || !check_value_type(c, p->period_type, "period_type") ||
        !check_attrs(c, p->attribute_indices, p->n_attribute_indices))
        return 0;
    profile_type(c, p, scope_has_cpu_ns, type, cap, mult);
    if (c->lim->max_samples && p->n_samples > c->lim->max_samples)
        return fault(c, "the profile has %zu samples, over the limit of %zu", p->n_samples, c->lim->max_samples);
    for (size_t i = 0; i < p->n_samples; i++) {
        const Otlp__Sample *s = p->samples[i];
        int64_t v;
        /* the layout first: an older sender's values read as attribute indices */
        if (!s->n_values && !s->n_timestamps_unix_nano && s->n_attribute_indices)
            return fault(c, "a sample has attributes but neither values nor timestamps, as from " OLD_LAYOUT);
        if (!check_stack(c, s->stack_index) || !check_attrs(c, s->attribute_indices, s->n_attribute_indices) ||
            !sample_value(c, s, *mult, &v))
            return 0;
        if (s->link_index && (s->link_index < 0 || (size_t)s->link_index >= c->d->n_link_table))
            return fault(c, "link index %d is out of range", s->link_index);
    }
    return 1;
}

/* ---- interning: the profile is sound, only memory can fail ---- */

static uint32_t intern_str(ctx_t *c, int32_t i) {
    const char *s = dstr(c, i);
    if (!s[0]) return 0;
    uint32_t *id = &c->strs.id[i];
    if (!*id) *id = symtab_string(c->b->sym, s, strlen(s));
    return *id;
}

static uint32_t intern_function(ctx_t *c, int32_t i) {
    uint32_t *id = &c->fns.id[i];
    if (*id) return *id;
    const Otlp__Function *f = c->d->function_table[i];
    sym_function_t g = {.name = intern_str(c, f->name_strindex),
                        .system_name = intern_str(c, f->system_name_strindex),
                        .filename = intern_str(c, f->filename_strindex),
                        .start_line = f->start_line};
    if (g.name == SYM_NONE || g.system_name == SYM_NONE || g.filename == SYM_NONE) return SYM_NONE;
    return *id = symtab_function(c->b->sym, &g);
}

/* The build id attribute keys, most specific first (semantic conventions). */
static const char *const BUILD_ID_KEYS[] = {"process.executable.build_id.gnu", "process.executable.build_id.go",
                                            "process.executable.build_id.htlhash"};

static const char *build_id(const ctx_t *c, const Otlp__Mapping *m) {
    for (size_t k = 0; k < sizeof BUILD_ID_KEYS / sizeof *BUILD_ID_KEYS; k++)
        for (size_t i = 0; i < m->n_attribute_indices; i++) {
            const Otlp__KeyValueAndUnit *a = c->d->attribute_table[m->attribute_indices[i]];
            const char *v = value_str(c, a->value);
            if (v && v[0] && !strcmp(dstr(c, a->key_strindex), BUILD_ID_KEYS[k])) return v;
        }
    return "";
}

/* Mapping i in the batch; kernel: its copy named "[kernel] FILE" ("[kernel]" for the null
 * mapping), which is how Pyroscope tells the eBPF profiler's kernel frames apart. */
static uint32_t intern_mapping(ctx_t *c, int32_t i, int kernel) {
    if (i == 0 && !kernel) return 0; /* mapping_table[0] is the null mapping */
    uint32_t *id = kernel ? &c->kernel_maps[i] : &c->maps.id[i];
    if (*id) return *id;
    static const Otlp__Mapping NONE = OTLP__MAPPING__INIT;
    const Otlp__Mapping *m = i ? c->d->mapping_table[i] : &NONE;
    const char *bid = build_id(c, m), *file = dstr(c, m->filename_strindex);
    char name[1024];
    snprintf(name, sizeof name, "%s%s%s", kernel ? "[kernel]" : "", kernel && file[0] ? " " : "", file);
    sym_mapping_t g = {.start = m->memory_start,
                       .limit = m->memory_limit,
                       .offset = m->file_offset,
                       .filename = name[0] ? symtab_string(c->b->sym, name, strlen(name)) : 0,
                       .build_id = bid[0] ? symtab_string(c->b->sym, bid, strlen(bid)) : 0};
    if (g.filename == SYM_NONE || g.build_id == SYM_NONE) return SYM_NONE;
    return *id = symtab_mapping(c->b->sym, &g);
}

/* 1 when the location's profile.frame.type attribute says "kernel". */
static int kernel_frame(const ctx_t *c, const Otlp__Location *l) {
    for (size_t i = 0; i < l->n_attribute_indices; i++) {
        const Otlp__KeyValueAndUnit *a = c->d->attribute_table[l->attribute_indices[i]];
        const char *v = value_str(c, a->value);
        if (v && !strcmp(v, "kernel") && !strcmp(dstr(c, a->key_strindex), "profile.frame.type")) return 1;
    }
    return 0;
}

static uint32_t intern_location(ctx_t *c, int32_t i) {
    uint32_t *id = &c->locs.id[i];
    if (*id) return *id;
    const Otlp__Location *l = c->d->location_table[i];
    sym_line_t small[32], *lines = small;
    if (l->n_lines > 32 && !(lines = malloc(l->n_lines * sizeof *lines))) return SYM_NONE;
    uint32_t out = intern_mapping(c, l->mapping_index, kernel_frame(c, l));
    for (size_t k = 0; out != SYM_NONE && k < l->n_lines; k++) {
        lines[k] = (sym_line_t){.function = intern_function(c, l->lines[k]->function_index), .line = l->lines[k]->line};
        if (lines[k].function == SYM_NONE) out = SYM_NONE;
    }
    if (out != SYM_NONE) out = symtab_location(c->b->sym, out, l->address, lines, (uint32_t)l->n_lines);
    if (lines != small) free(lines);
    return out == SYM_NONE ? SYM_NONE : (*id = out);
}

/* The stack's id in the batch: OTLP lists locations leaf first, the trie goes root first. */
static uint32_t intern_stack(ctx_t *c, int32_t i) {
    uint32_t *id = &c->stacks.id[i];
    if (*id) return *id;
    const Otlp__Stack *s = c->d->stack_table[i];
    uint32_t stack = 0;
    for (size_t k = s->n_location_indices; k-- > 0 && stack != SYM_NONE;) {
        uint32_t loc = intern_location(c, s->location_indices[k]);
        stack = loc == SYM_NONE ? SYM_NONE : symtab_stack(c->b->sym, stack, loc);
    }
    if (stack != SYM_NONE && stack) *id = stack;
    return stack;
}

/* ---- labels ---- */

/* name as a label name: anything but letters, digits and `_` becomes `_`, as does a
 * leading digit (service.name -> service_name). */
static void label_name(const char *name, char out[LABEL_NAME_MAX + 1]) {
    size_t j = 0;
    for (; name[j]; j++) {
        char ch = name[j];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || (j && ch >= '0' && ch <= '9');
        out[j] = ok ? ch : '_';
    }
    out[j] = 0;
}

/* Adds name=value unless the label is set already (the first of a name wins, unless
 * override); empty names and values carry no label, and names starting with `__` are
 * Pyroscope's own, never an attribute's (as in a push series). */
static int label_add(labels_t *l, const char *name, const char *value, int override, hr_err_t *err) {
    size_t len = name ? strlen(name) : 0;
    if (len > LABEL_NAME_MAX) /* refused, not cut: two long keys sharing a prefix would merge */
        return hr_fail(err, HR_EINVAL, "attribute name `%.40s...` is %zu bytes, over the limit of %d", name, len,
                       LABEL_NAME_MAX);
    char n[LABEL_NAME_MAX + 1];
    label_name(name ? name : "", n);
    if (!n[0] || !strncmp(n, "__", 2) || !value || !value[0] || (!override && labels_get(l, n))) return 0;
    return labels_set(l, n, value) ? hr_fail(err, HR_ENOMEM, "out of memory") : 0;
}

/* Resource or scope attributes (common.v1 KeyValue, whose key may be v1.10's index
 * into the string table). */
static int key_values_add(ctx_t *c, Otlp__KeyValue *const *kv, size_t n, labels_t *l) {
    for (size_t i = 0; i < n; i++) {
        const char *k = kv[i]->key && kv[i]->key[0] ? kv[i]->key : dstr(c, kv[i]->key_strindex);
        const char *v = value_str(c, kv[i]->value);
        if (!k || !v) continue;
        if (!utf8_valid(k, strlen(k)) || !utf8_valid(v, strlen(v)))
            return hr_fail(c->err, HR_EINVAL, "invalid OTLP: attribute `%.40s` is not valid UTF-8", k);
        if (label_add(l, k, v, 0, c->err)) return -1;
    }
    return 0;
}

static const char *key_value_get(ctx_t *c, Otlp__KeyValue *const *kv, size_t n, const char *key) {
    for (size_t i = 0; i < n; i++) {
        const char *k = kv[i]->key && kv[i]->key[0] ? kv[i]->key : dstr(c, kv[i]->key_strindex);
        const char *v = value_str(c, kv[i]->value);
        if (k && v && v[0] && !strcmp(k, key) && utf8_valid(v, strlen(v))) return v;
    }
    return NULL;
}

/* The series labels every sample of p gets: resource, scope and profile attributes,
 * then service_name's default. Checked against the limits here, before p is decoded. */
static int base_labels(ctx_t *c, const Otlp__ResourceProfiles *rp, const Otlp__ScopeProfiles *sp,
                       const Otlp__Profile *p, labels_t *l) {
    const Otlp__Resource *res = rp->resource;
    const Otlp__InstrumentationScope *scope = sp->scope;
    if ((res && key_values_add(c, res->attributes, res->n_attributes, l)) ||
        (scope && key_values_add(c, scope->attributes, scope->n_attributes, l)))
        return -1;
    for (size_t i = 0; i < p->n_attribute_indices; i++) {
        const Otlp__KeyValueAndUnit *a = c->d->attribute_table[p->attribute_indices[i]];
        if (label_add(l, dstr(c, a->key_strindex), value_str(c, a->value), 0, c->err)) return -1;
    }
    if (!labels_get(l, "service_name")) {
        const char *exe = res ? key_value_get(c, res->attributes, res->n_attributes, "process.executable.name") : NULL;
        char svc[512];
        snprintf(svc, sizeof svc, "unknown_service%s%s", exe ? ":" : "", exe ? exe : "");
        if (labels_set(l, "service_name", svc)) return hr_fail(c->err, HR_ENOMEM, "out of memory");
    }
    return ingest_check_labels(l, c->lim, c->err);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Marks the sample attributes of p that stay off the series labels, as pprof does
 * its sample labels (pprof.h): trace links, and keys with more than
 * PPROF_MAX_SERIES_LABEL_VALUES values in the profile. Counts the keys in the batch. */
static int plan_attrs(ctx_t *c, const Otlp__Profile *p) {
    size_t n = 0;
    for (size_t i = 0; i < p->n_samples; i++) n += p->samples[i]->n_attribute_indices;
    uint64_t *pairs = malloc((n ? n : 1) * sizeof *pairs); /* key string index << 32 | attribute index */
    if (!pairs) return hr_fail(c->err, HR_ENOMEM, "out of memory");
    n = 0;
    for (size_t i = 0; i < p->n_samples; i++)
        for (size_t k = 0; k < p->samples[i]->n_attribute_indices; k++) {
            int32_t a = p->samples[i]->attribute_indices[k];
            pairs[n++] = (uint64_t)(uint32_t)c->d->attribute_table[a]->key_strindex << 32 | (uint32_t)a;
        }
    qsort(pairs, n, sizeof *pairs, cmp_u64);
    for (size_t i = 0; i < n;) {
        uint32_t key = (uint32_t)(pairs[i] >> 32);
        size_t distinct = 0, j = i;
        for (; j < n && (uint32_t)(pairs[j] >> 32) == key; j++) distinct += j == i || pairs[j] != pairs[j - 1];
        int per_sample = pprof_per_sample_key(dstr(c, (int32_t)key));
        if (per_sample || distinct > PPROF_MAX_SERIES_LABEL_VALUES) {
            for (size_t k = i; k < j; k++) c->off_series[(uint32_t)pairs[k]] = 1;
            (*(per_sample ? &c->b->unindexed_span_keys : &c->b->unindexed_high_cardinality_keys))++;
        }
        i = j;
    }
    free(pairs);
    return 0;
}

static void unplan_attrs(ctx_t *c, const Otlp__Profile *p) {
    for (size_t i = 0; i < p->n_samples; i++)
        for (size_t k = 0; k < p->samples[i]->n_attribute_indices; k++)
            c->off_series[p->samples[i]->attribute_indices[k]] = 0;
}

/* The span a sample is linked to: its link's span id (and the link's trace id into
 * trace[0..1]), else a span_id attribute (16 hex digits, as a pprof span_id label,
 * with a trace_id attribute of 32); 0 for none. */
static uint64_t sample_span(const ctx_t *c, const Otlp__Sample *s, uint64_t trace[2]) {
    trace[0] = trace[1] = 0;
    if (s->link_index) {
        const Otlp__Link *l = c->d->link_table[s->link_index];
        uint64_t span = 0;
        for (size_t i = 0; l->span_id.len == 8 && i < 8; i++) span = span << 8 | l->span_id.data[i];
        for (size_t i = 0; span && l->trace_id.len == 16 && i < 16; i++)
            trace[i / 8] = trace[i / 8] << 8 | l->trace_id.data[i];
        if (span) return span;
    }
    uint64_t span = 0;
    for (size_t i = 0; i < s->n_attribute_indices; i++) {
        const Otlp__KeyValueAndUnit *a = c->d->attribute_table[s->attribute_indices[i]];
        const char *v = value_str(c, a->value), *k = dstr(c, a->key_strindex);
        if (v && !strcmp(k, "span_id") && !span && span_id_parse(v, &span)) span = 0;
        if (v && !strcmp(k, "trace_id") && trace_id_parse(v, &trace[0], &trace[1])) trace[0] = trace[1] = 0;
    }
    if (!span) trace[0] = trace[1] = 0;
    return span;
}

/* The sample's own labels over base when it has series attributes (own is then
 * filled); base itself otherwise. NULL on OOM. */
static const labels_t *sample_labels(ctx_t *c, const Otlp__Sample *s, const labels_t *base, labels_t *own) {
    int any = 0;
    for (size_t i = 0; i < s->n_attribute_indices; i++) any |= !c->off_series[s->attribute_indices[i]];
    if (!any) return base;
    if (labels_copy(own, base)) return NULL;
    for (size_t i = 0; i < s->n_attribute_indices; i++) {
        int32_t ai = s->attribute_indices[i];
        const Otlp__KeyValueAndUnit *a = c->d->attribute_table[ai];
        /* a sample's own service.name moves it to that service, as Pyroscope splits by it */
        if (!c->off_series[ai] && label_add(own, dstr(c, a->key_strindex), value_str(c, a->value), 1, c->err))
            return NULL;
    }
    return own;
}

/* Converts a checked profile into the batch; -1 only when out of memory. */
static int convert_profile(ctx_t *c, const Otlp__Profile *p, const labels_t *base, const char *type, int64_t mult,
                           int64_t now_ns) {
    int64_t t = (int64_t)p->time_unix_nano > NS_1971 ? (int64_t)p->time_unix_nano : now_ns;
    int64_t d = p->duration_nano && p->duration_nano <= INT64_MAX ? (int64_t)p->duration_nano : DEFAULT_DURATION_NS;
    if (p->n_samples == 0) /* an empty profile is still a profile, as in pprof */
        return batch_profile(c->b, type, base, t, d) ? 0 : hr_fail(c->err, HR_ENOMEM, "out of memory");
    if (plan_attrs(c, p)) return -1;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < p->n_samples; i++) {
        const Otlp__Sample *s = p->samples[i];
        int64_t v;
        (void)sample_value(c, s, mult, &v); /* checked: cannot fail */
        uint32_t stack = intern_stack(c, s->stack_index);
        labels_t own;
        labels_init(&own);
        const labels_t *l = stack == SYM_NONE ? NULL : sample_labels(c, s, base, &own);
        uint64_t trace[2];
        uint64_t span = sample_span(c, s, trace);
        batch_profile_t *bp = l ? batch_profile(c->b, type, l, t, d) : NULL;
        if (!bp || (span ? batch_span_sample(bp, stack, v, span, trace) : batch_sample(bp, stack, v)))
            rc = c->err->code ? -1 : hr_fail(c->err, HR_ENOMEM, "out of memory");
        labels_destroy(&own);
    }
    unplan_attrs(c, p);
    return rc;
}

/* ---- the request ---- */

/* 1 when one of the scope's profiles is a cpu:nanoseconds one: its samples:count
 * sibling then keeps its own type (see otlp.h). */
static int scope_has_cpu_ns(const ctx_t *c, const Otlp__ScopeProfiles *sp) {
    for (size_t i = 0; i < sp->n_profiles; i++) {
        const Otlp__ValueType *v = sp->profiles[i]->sample_type;
        if (v && dstr(c, v->type_strindex) && dstr(c, v->unit_strindex) && vt_is(c, v, "cpu", "nanoseconds")) return 1;
    }
    return 0;
}

static void note_fault(ingest_partial_t *part, size_t *rejected, const char *why) {
    if (!(*rejected)++ && part) snprintf(part->message, sizeof part->message, "%s", why);
}

static int one_profile(ctx_t *c, const Otlp__ResourceProfiles *rp, const Otlp__ScopeProfiles *sp,
                       const Otlp__Profile *p, int cpu_ns, int64_t now_ns, int *converted) {
    *converted = 0;
    int64_t mult = 1;
    char type[512];
    if (!check_profile(c, p, cpu_ns, type, sizeof type, &mult)) return 0; /* left out, not an error */
    labels_t base;
    labels_init(&base);
    int rc = base_labels(c, rp, sp, p, &base);
    if (rc == 0) rc = convert_profile(c, p, &base, type, mult, now_ns);
    labels_destroy(&base);
    *converted = rc == 0;
    return rc;
}

static int check_strings(const otlp_dict_t *d, hr_err_t *err) {
    if (d->n_string_table && d->string_table[0][0])
        return hr_fail(err, HR_EINVAL, "invalid OTLP: string_table[0] must be the empty string");
    for (size_t i = 0; i < d->n_string_table; i++)
        if (!utf8_valid(d->string_table[i], strlen(d->string_table[i])))
            return hr_fail(err, HR_EINVAL, "invalid OTLP: string %zu is not valid UTF-8", i);
    return 0;
}

static int convert_request(const otlp_request_t *req, const ingest_limits_t *lim, int64_t now_ns, batch_t *b,
                           ingest_partial_t *part, hr_err_t *err) {
    static const otlp_dict_t EMPTY = OTLP__PROFILES_DICTIONARY__INIT;
    const otlp_dict_t *d = req->dictionary ? req->dictionary : &EMPTY;
    if (check_strings(d, err)) return -1;
    ctx_t c = {.d = d, .b = b, .lim = lim, .err = err};
    int rc = memo_init(&c.strs, d->n_string_table) | memo_init(&c.maps, d->n_mapping_table) |
             memo_init(&c.locs, d->n_location_table) | memo_init(&c.fns, d->n_function_table) |
             memo_init(&c.stacks, d->n_stack_table) | memo_init(&c.attrs, d->n_attribute_table);
    c.off_series = calloc(d->n_attribute_table ? d->n_attribute_table : 1, 1);
    c.kernel_maps = calloc(d->n_mapping_table ? d->n_mapping_table : 1, sizeof *c.kernel_maps);
    if (rc || !c.off_series || !c.kernel_maps) rc = hr_fail(err, HR_ENOMEM, "out of memory");
    size_t accepted = 0, rejected = 0;
    for (size_t i = 0; rc == 0 && i < req->n_resource_profiles; i++) {
        const Otlp__ResourceProfiles *rp = req->resource_profiles[i];
        for (size_t j = 0; rc == 0 && j < rp->n_scope_profiles; j++) {
            const Otlp__ScopeProfiles *sp = rp->scope_profiles[j];
            int cpu_ns = scope_has_cpu_ns(&c, sp);
            for (size_t k = 0; rc == 0 && k < sp->n_profiles; k++) {
                int converted;
                rc = one_profile(&c, rp, sp, sp->profiles[k], cpu_ns, now_ns, &converted);
                if (rc == 0 && converted) accepted++;
                else if (rc == 0) note_fault(part, &rejected, c.fault);
            }
        }
    }
    if (part) part->rejected = rejected;
    if (rc == 0 && rejected && !accepted)
        rc = hr_fail(err, HR_EINVAL, "invalid OTLP: no profile could be read; the first: %s", c.fault);
    memo_destroy(&c.strs), memo_destroy(&c.maps), memo_destroy(&c.locs);
    memo_destroy(&c.fns), memo_destroy(&c.stacks), memo_destroy(&c.attrs);
    free(c.off_series);
    free(c.kernel_maps);
    return rc;
}

static int hex_digit(uint8_t ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* OTLP JSON writes trace and span ids in hex, where proto3 JSON (and so pbjson)
 * reads base64. Hex digits are base64 digits too, and 16 or 32 of them decode to
 * 12 or 24 bytes without padding, so the decoded bytes encode back to the very hex
 * text: a 12- or 24-byte id is that text, read again as hex. An id of 8 or 16 bytes
 * came as base64 and stays. */
static void id_from_hex(ProtobufCBinaryData *id, arena_t *a) {
    if (id->len != 12 && id->len != 24) return;
    buf_t text;
    buf_init(&text);
    base64_encode(id->data, id->len, &text);
    size_t n = text.len / 2;
    uint8_t *raw = text.oom ? NULL : arena_alloc(a, n);
    for (size_t i = 0; raw && i < n; i++) {
        int hi = hex_digit(text.data[2 * i]), lo = hex_digit(text.data[2 * i + 1]);
        if (hi < 0 || lo < 0) raw = NULL;
        else raw[i] = (uint8_t)(hi << 4 | lo);
    }
    *id = raw ? (ProtobufCBinaryData){n, raw} : (ProtobufCBinaryData){0, NULL}; /* not hex: no id */
    buf_free(&text);
}

static otlp_request_t *read_json(const uint8_t *p, size_t n, arena_t *a, hr_err_t *err) {
    otlp_request_t *req = (otlp_request_t *)pbjson_decode(&otlp__export_profiles_service_request__descriptor,
                                                          (const char *)p, n, a, 0, err);
    if (!req) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        if (err->code != HR_ENOMEM) hr_fail(err, HR_EINVAL, "not an OTLP JSON ExportProfilesServiceRequest: %s", msg);
        return NULL;
    }
    for (size_t i = 0; req->dictionary && i < req->dictionary->n_link_table; i++) {
        id_from_hex(&req->dictionary->link_table[i]->trace_id, a);
        id_from_hex(&req->dictionary->link_table[i]->span_id, a);
    }
    return req;
}

/* ---- the memory an unpack takes, from the wire ---- */

#define ALLOC_OVERHEAD 16 /* malloc's per-allocation bookkeeping, about */

static int read_varint(const uint8_t *p, size_t n, size_t *off, uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 64 && *off < n; shift += 7) {
        uint8_t b = p[(*off)++];
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (b < 0x80) return 0;
    }
    return -1;
}

/* The cost of one length-delimited field of len bytes at p (field f, NULL: unknown). */
static int delimited_cost(const ProtobufCFieldDescriptor *f, const uint8_t *p, size_t len, size_t *cost,
                          hr_err_t *err) {
    size_t slot = f && f->label == PROTOBUF_C_LABEL_REPEATED ? sizeof(void *) : 0;
    if (!f) { /* protobuf-c keeps unknown fields, bytes and all */
        *cost += len + 32 + ALLOC_OVERHEAD;
        return 0;
    }
    if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
        const ProtobufCMessageDescriptor *d = f->descriptor;
        *cost += d->sizeof_message + ALLOC_OVERHEAD + slot;
        return otlp_unpack_cost(d, p, len, cost, err);
    }
    if (f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_BYTES) {
        *cost += len + 1 + ALLOC_OVERHEAD + slot + sizeof(ProtobufCBinaryData);
        return 0;
    }
    *cost += len * pbjson_elem_size(f->type); /* packed: at most one element per byte */
    return 0;
}

/* A field that came length-delimited where the schema has one scalar: protobuf-c
 * refuses the body. In a Sample that is a sender of an older layout (v1.9's
 * attribute_indices = 3, where v1.10 has link_index), which the message names. */
static int wire_mismatch(const ProtobufCMessageDescriptor *d, const ProtobufCFieldDescriptor *f, hr_err_t *err) {
    if (d == &otlp__sample__descriptor)
        return hr_fail(err, HR_EINVAL, "OTLP Sample field %u (%s) arrived as a list, as from " OLD_LAYOUT, f->id,
                       f->name);
    return hr_fail(err, HR_EINVAL,
                   "not an OTLP ExportProfilesServiceRequest: %s field %u (%s) arrived length-delimited, where the "
                   "schema (opentelemetry-proto v1.10) has one scalar",
                   d->short_name, f->id, f->name);
}

int otlp_unpack_cost(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t n, size_t *cost, hr_err_t *err) {
    size_t off = 0;
    while (off < n) {
        uint64_t key, v;
        if (read_varint(p, n, &off, &key) || key >> 3 == 0 || key >> 3 > UINT32_MAX) goto bad;
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(d, (unsigned)(key >> 3));
        /* a repeated scalar: its element (arrays grow to fit); an unknown field: kept */
        size_t elem = !f ? 32 + ALLOC_OVERHEAD : f->label == PROTOBUF_C_LABEL_REPEATED ? pbjson_elem_size(f->type) : 0;
        switch (key & 7) {
        case 0:
            if (read_varint(p, n, &off, &v)) goto bad;
            *cost += elem;
            continue;
        case 1:
        case 5: {
            size_t w = (key & 7) == 1 ? 8 : 4;
            if (n - off < w) goto bad;
            off += w, *cost += elem;
            continue;
        }
        case 2:
            if (f && f->label != PROTOBUF_C_LABEL_REPEATED && f->type != PROTOBUF_C_TYPE_MESSAGE &&
                f->type != PROTOBUF_C_TYPE_STRING && f->type != PROTOBUF_C_TYPE_BYTES)
                return wire_mismatch(d, f, err);
            if (read_varint(p, n, &off, &v) || v > n - off) goto bad;
            if (delimited_cost(f, p + off, (size_t)v, cost, err)) return -1;
            off += (size_t)v;
            continue;
        default: goto bad;
        }
    }
    return 0;
bad:
    return hr_fail(err, HR_EINVAL, "not an OTLP ExportProfilesServiceRequest: the body does not parse as protobuf");
}

int otlp_decode(const uint8_t *body, size_t n, otlp_encoding_t enc, const ingest_limits_t *lim, int64_t now_ns,
                batch_t *b, ingest_partial_t *partial, hr_err_t *err) {
    if (partial) *partial = (ingest_partial_t){0};
    uint8_t *raw = NULL;
    const uint8_t *data = body;
    if (gz_is_gzip(body, n)) {
        if (gz_inflate(body, n, lim->max_decompressed, &raw, &n, err))
            return err->code == HR_EUNPROC ? hr_fail(err, HR_EINVAL, "invalid OTLP: a corrupt gzip body") : -1;
        data = raw;
    } else if (n > lim->max_decompressed) {
        return hr_fail(err, HR_ETOOBIG, "OTLP request exceeds the limit of %zu bytes", lim->max_decompressed);
    }
    size_t cost = n > SIZE_MAX / OTLP_JSON_DECODE_FACTOR ? SIZE_MAX : n * OTLP_JSON_DECODE_FACTOR;
    if (enc == OTLP_PROTO && otlp_unpack_cost(&otlp__export_profiles_service_request__descriptor, data, n, &cost, err))
        return free(raw), -1;
    if (budget_take(lim->decode_budget, cost, "this OTLP request", err)) return free(raw), -1;
    int rc = -1;
    arena_t *a = NULL;
    otlp_request_t *req = NULL;
    if (enc == OTLP_JSON) {
        a = arena_new();
        req = a ? read_json(data, n, a, err) : NULL;
        if (!a) hr_fail(err, HR_ENOMEM, "out of memory");
    } else {
        req = otlp__export_profiles_service_request__unpack(NULL, n, data);
        if (!req)
            hr_fail(err, HR_EINVAL, "not an OTLP ExportProfilesServiceRequest: the body does not parse as protobuf");
    }
    if (req) rc = convert_request(req, lim, now_ns, b, partial, err);
    if (req && enc == OTLP_PROTO) otlp__export_profiles_service_request__free_unpacked(req, NULL);
    arena_free(a);
    free(raw);
    budget_give(lim->decode_budget, cost);
    return rc;
}

int otlp_ingest_proto(const ingest_request_t *r, const ingest_limits_t *lim, batch_t *b, hr_err_t *err) {
    return otlp_decode(r->body, r->body_len, OTLP_PROTO, lim, r->received_ns, b, r->partial, err);
}

int otlp_ingest_json(const ingest_request_t *r, const ingest_limits_t *lim, batch_t *b, hr_err_t *err) {
    return otlp_decode(r->body, r->body_len, OTLP_JSON, lim, r->received_ns, b, r->partial, err);
}
