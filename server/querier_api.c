/* querier_api.c - querier.v1.QuerierService: the Connect API that Grafana's
 * Pyroscope data source (and Pyroscope's own tools) read.
 *
 * POST /querier.v1.QuerierService/<Method>, body and reply in application/proto
 * (what Grafana sends) or application/json (curl), see connect.h. Each method
 * decodes its request into the arena, runs the same catalog and merge code as the
 * REST API, and builds its response message in the arena too, so one arena_free
 * releases everything. Times are milliseconds: a zero end means now, a zero start
 * means an hour before end for merges and all time for discovery calls.
 *
 * A request option Hearth cannot serve (go_pgo) is answered with a Connect error
 * (501 unimplemented), never by a merge that ignores it: that would be a different
 * answer to the question asked. Served: stack_trace_selector.call_site
 * (query/callsite.h), profile_id_selector (Hearth's SERIES-TIME_NS ids) and
 * SelectMergeSpanProfile's span_selector (span samples, storage/segment.h). */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/ptype.h"
#include "common/timeparse.h"
#include "common/vec.h"
#include "ingest/profile.pb-c.h"
#include "query/catalog.h"
#include "query/merge.h"
#include "query/render.h"
#include "query/tree.h"
#include "server/app.h"
#include "server/connect.h"
#include "server/querier.pb-c.h"

#define HOUR_NS (3600LL * 1000000000)
#define MS 1000000LL

typedef struct {
    app_t *a;
    const char *tenant;
    arena_t *arena;
    int64_t deadline_ns; /* for every merge of the call */
    hr_err_t err;
    int status; /* HTTP status of the failure when it is not err's usual one */
} qctx_t;

static ProtobufCMessage *fail(qctx_t *c, int status, const char *msg) {
    hr_fail(&c->err, HR_EINVAL, "%s", msg);
    c->status = status;
    return NULL;
}

static ProtobufCMessage *oom(qctx_t *c) {
    if (!c->err.code) hr_fail(&c->err, HR_ENOMEM, "out of memory");
    return NULL;
}

/* ms request times to an inclusive ns range; def_span 0 = all time when start is 0. */
static int ms_range(qctx_t *c, int64_t start, int64_t end, int64_t def_span, int64_t *from, int64_t *until) {
    *until = end > 0 ? end * MS + (MS - 1) : time_now_ns();
    *from = start > 0 ? start * MS : def_span ? *until - def_span : 0;
    if (*until < *from) return fail(c, 400, "`end` is before `start`"), -1;
    return 0;
}

/* ---- sets of strings, answered sorted ---- */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The keys of a jansson object as a sorted array in the arena. */
static char **sorted_keys(qctx_t *c, json_t *set, size_t *n) {
    *n = json_object_size(set);
    char **v = arena_alloc(c->arena, (*n + 1) * sizeof *v);
    if (!v) return NULL;
    size_t i = 0;
    const char *k;
    json_t *x;
    json_object_foreach(set, k, x) if (!(v[i++] = arena_strdup(c->arena, k))) return NULL;
    qsort(v, *n, sizeof *v, cmp_str);
    return v;
}

/* Calls fn for the series any matcher selects (every series without matchers). */
static int each_series(qctx_t *c, char **matchers, size_t n, int ranged, int64_t from, int64_t until,
                       catalog_series_fn fn, void *ctx) {
    for (size_t i = 0; i < (n ? n : 1); i++) {
        selector_t sel = {0};
        catalog_query_t q = {c->tenant, n ? &sel : NULL, ranged, from, until, c->deadline_ns};
        int rc = n ? selector_parse(matchers[i], &sel, &c->err) : 0;
        if (rc == 0 && n) rc = catalog_resolve_type(c->a->store, &q, &sel, 0, &c->err);
        if (rc == 0) rc = catalog_series(c->a->store, &q, fn, ctx, &c->err);
        selector_destroy(&sel);
        if (rc) return -1;
    }
    return 0;
}

typedef struct {
    json_t *set;
    const char *label; /* NULL: label names */
} collect_t;

static void add_name(json_t *set, const char *s) { json_object_set_new(set, s, json_true()); }

static void collect(void *ctx, const series_t *s) {
    collect_t *k = ctx;
    if (!k->label) {
        add_name(k->set, "__name__");
        add_name(k->set, "__profile_type__");
        for (size_t i = 0; i < s->labels.n; i++) add_name(k->set, s->labels.v[i].name);
        return;
    }
    char buf[128];
    const char *v = catalog_label_value(s, k->label, buf, sizeof buf); /* as the REST API answers */
    if (v) add_name(k->set, v);
}

/* LabelNames and LabelValues share everything but the label. */
static char **collect_names(qctx_t *c, const char *label, char **matchers, size_t nm, int64_t start, int64_t end,
                            size_t *n) {
    int64_t from, until;
    if (ms_range(c, start, end, 0, &from, &until)) return NULL;
    collect_t k = {json_object(), label};
    char **v = NULL;
    if (k.set && each_series(c, matchers, nm, start || end, from, until, collect, &k) == 0)
        if (!(v = sorted_keys(c, k.set, n))) oom(c);
    json_decref(k.set);
    return v;
}

static ProtobufCMessage *label_names(qctx_t *c, const ProtobufCMessage *in) {
    const Querier__V1__LabelNamesRequest *q = (const void *)in;
    Querier__V1__LabelNamesResponse *r = arena_alloc(c->arena, sizeof *r);
    if (!r) return oom(c);
    querier__v1__label_names_response__init(r);
    r->names = collect_names(c, NULL, q->matchers, q->n_matchers, q->start, q->end, &r->n_names);
    return r->names ? &r->base : NULL;
}

static ProtobufCMessage *label_values(qctx_t *c, const ProtobufCMessage *in) {
    const Querier__V1__LabelValuesRequest *q = (const void *)in;
    if (!q->name || !*q->name) return fail(c, 400, "`name` (the label whose values to list) is required");
    Querier__V1__LabelValuesResponse *r = arena_alloc(c->arena, sizeof *r);
    if (!r) return oom(c);
    querier__v1__label_values_response__init(r);
    r->names = collect_names(c, q->name, q->matchers, q->n_matchers, q->start, q->end, &r->n_names);
    return r->names ? &r->base : NULL;
}

/* ---- ProfileTypes ---- */

static void collect_type(void *ctx, const series_t *s) { add_name(ctx, s->profile_type); }

static char *dup(qctx_t *c, const char *s, int *ok) {
    char *d = arena_strdup(c->arena, s);
    if (!d) *ok = 0;
    return d;
}

static ProtobufCMessage *profile_types(qctx_t *c, const ProtobufCMessage *in) {
    const Querier__V1__ProfileTypesRequest *q = (const void *)in;
    int64_t from, until;
    if (ms_range(c, q->start, q->end, 0, &from, &until)) return NULL;
    json_t *set = json_object();
    Querier__V1__ProfileTypesResponse *r = arena_alloc(c->arena, sizeof *r);
    char **ids = NULL;
    size_t n = 0;
    catalog_query_t cq = {c->tenant, NULL, q->start || q->end, from, until, c->deadline_ns};
    if (!set || !r) {
        json_decref(set);
        return oom(c);
    }
    int ok = catalog_series(c->a->store, &cq, collect_type, set, &c->err) == 0;
    if (ok) ok = (ids = sorted_keys(c, set, &n)) != NULL;
    json_decref(set);
    if (!ok) return oom(c);
    querier__v1__profile_types_response__init(r);
    r->profile_types = arena_alloc(c->arena, (n + 1) * sizeof *r->profile_types);
    if (!r->profile_types) return oom(c);
    for (size_t i = 0; i < n; i++) {
        ptype_parts_t p;
        Querier__V1__ProfileType *t = arena_alloc(c->arena, sizeof *t);
        if (!t) return oom(c);
        querier__v1__profile_type__init(t);
        if (ptype_split(ids[i], &p)) continue;
        t->id = ids[i];
        t->name = dup(c, p.name, &ok), t->sample_type = dup(c, p.sample_type, &ok);
        t->sample_unit = dup(c, p.sample_unit, &ok), t->period_type = dup(c, p.period_type, &ok);
        t->period_unit = dup(c, p.period_unit, &ok);
        r->profile_types[r->n_profile_types++] = t;
    }
    return ok ? &r->base : oom(c);
}

/* ---- Series ---- */

typedef struct {
    qctx_t *c;
    char **names; /* label_names filter; none = every label */
    size_t nnames;
    json_t *seen; /* canonical keys already answered */
    Querier__V1__Labels **v;
    size_t len, cap;
    int oom;
} series_acc_t;

static int wanted(const series_acc_t *s, const char *name) {
    if (!s->nnames) return 1;
    for (size_t i = 0; i < s->nnames; i++)
        if (!strcmp(s->names[i], name)) return 1;
    return 0;
}

static int add_pair(series_acc_t *s, Querier__V1__Labels *l, const char *name, const char *value, buf_t *key) {
    if (!wanted(s, name)) return 0;
    Querier__V1__LabelPair *p = arena_alloc(s->c->arena, sizeof *p);
    if (!p) return -1;
    querier__v1__label_pair__init(p);
    if (!(p->name = arena_strdup(s->c->arena, name)) || !(p->value = arena_strdup(s->c->arena, value))) return -1;
    l->labels[l->n_labels++] = p;
    buf_printf(key, "%s\x01%s\x02", name, value);
    return 0;
}

static void add_series_labels(void *ctx, const series_t *se) {
    series_acc_t *s = ctx;
    arena_t *ar = s->c->arena;
    char buf[128];
    const char *name = selector_label(se->profile_type, NULL, "__name__", buf, sizeof buf);
    Querier__V1__Labels *l = arena_alloc(ar, sizeof *l);
    if (s->oom || !l) {
        s->oom = 1;
        return;
    }
    querier__v1__labels__init(l);
    l->labels = arena_alloc(ar, (se->labels.n + 2) * sizeof *l->labels);
    buf_t key;
    buf_init(&key);
    int rc = !l->labels || add_pair(s, l, "__name__", name, &key) || add_pair(s, l, "__profile_type__", se->profile_type, &key);
    for (size_t i = 0; i < se->labels.n && !rc; i++) rc = add_pair(s, l, se->labels.v[i].name, se->labels.v[i].value, &key);
    buf_putc(&key, 0);
    if (rc || key.oom || VEC_RESERVE(s->v, s->cap, s->len + 1)) s->oom = 1;
    else if (!json_object_get(s->seen, (char *)key.data)) {
        json_object_set_new(s->seen, (char *)key.data, json_true());
        s->v[s->len++] = l;
    }
    buf_free(&key);
}

static ProtobufCMessage *series(qctx_t *c, const ProtobufCMessage *in) {
    const Querier__V1__SeriesRequest *q = (const void *)in;
    int64_t from, until;
    if (ms_range(c, q->start, q->end, 0, &from, &until)) return NULL;
    series_acc_t s = {c, q->label_names, q->n_label_names, json_object(), NULL, 0, 0, 0};
    Querier__V1__SeriesResponse *r = arena_alloc(c->arena, sizeof *r);
    int rc = s.seen && r ? each_series(c, q->matchers, q->n_matchers, q->start || q->end, from, until, add_series_labels, &s)
                         : -1;
    json_decref(s.seen);
    if (rc == 0 && !s.oom && r) {
        querier__v1__series_response__init(r);
        r->n_labels_set = s.len;
        r->labels_set = arena_alloc(c->arena, (s.len + 1) * sizeof *r->labels_set);
        if (r->labels_set) memcpy(r->labels_set, s.v, s.len * sizeof *s.v);
    }
    free(s.v);
    if (rc) return NULL;
    return s.oom || !r || !r->labels_set ? oom(c) : &r->base;
}

/* ---- merges ---- */

/* profile_typeID + label_selector as one selector. 0 or -1 (c->err set). */
static int request_selector(qctx_t *c, const char *type, const char *labels, selector_t *sel) {
    memset(sel, 0, sizeof *sel);
    if (!type || !*type) return fail(c, 400, "`profileTypeID` is required, e.g. process_cpu:cpu:nanoseconds:cpu:nanoseconds"), -1;
    if (labels && *labels && labels[strspn(labels, " ")] != '{')
        return fail(c, 400, "`labelSelector` must look like {service_name=\"api\"}"), -1;
    size_t n = strlen(type) + (labels ? strlen(labels) : 0) + 1;
    char *s = malloc(n);
    if (!s) return oom(c), -1;
    snprintf(s, n, "%s%s", type, labels ? labels : "");
    int rc = selector_parse(s, sel, &c->err);
    free(s);
    if (rc == 0 && !sel->profile_type) return fail(c, 400, "`profileTypeID` must be a full profile type id"), -1;
    return rc;
}

/* profile_id_selector: Hearth's profile ids (SERIES-TIME_NS, as /api/v1/profiles and
 * its exemplars give them) into o->profiles, sorted, in the arena. 0 or -1. */
static int profile_ids(qctx_t *c, char **ids, size_t n, merge_only_t *o) {
    profile_ref_t *v = arena_alloc(c->arena, (n + 1) * sizeof *v);
    if (!v) return oom(c), -1;
    for (size_t i = 0; i < n; i++)
        if (profile_ref_parse(ids[i], &v[i]))
            return fail(c, 400, "bad `profile_id_selector` entry: Hearth's profile ids are SERIES-TIME_NS, as "
                                "/api/v1/profiles lists them"), -1;
    profile_refs_sort(v, n);
    o->profiles = v, o->nprofiles = n;
    return 0;
}

/* The merge options a request may carry besides its selection: served, or refused
 * with a Connect error, never ignored (a merge that ignored them would answer a
 * different question). *cs is filled from stack_trace_selector.call_site (in the
 * arena); *use_cs says whether to filter; profile ids go to o. 0 or -1 (c->err set). */
static int merge_options(qctx_t *c, const Querier__V1__StackTraceSelector *st, char **pids, size_t npids,
                         callsite_t *cs, int *use_cs, merge_only_t *o) {
    *use_cs = 0;
    *o = (merge_only_t){0};
    if (npids && profile_ids(c, pids, npids, o)) return -1;
    if (!st) return 0;
    if (st->go_pgo)
        return fail(c, 501, "`stack_trace_selector.go_pgo` is not supported; use call_site"), -1;
    const char **names = arena_alloc(c->arena, (st->n_call_site + 1) * sizeof *names);
    if (!names) return oom(c), -1;
    for (size_t i = 0; i < st->n_call_site; i++) {
        if (!st->call_site[i] || !st->call_site[i]->name || !*st->call_site[i]->name)
            return fail(c, 400, "`stack_trace_selector.call_site` has a location without a name"), -1;
        names[i] = st->call_site[i]->name;
    }
    *cs = (callsite_t){names, st->n_call_site};
    *use_cs = st->n_call_site > 0; /* empty: "the filter is ignored", as upstream */
    return 0;
}

/* Selects and merges; 0 or -1 (c->err set). The caller destroys m. */
static int run_merge(qctx_t *c, const char *type, const char *labels, int64_t start, int64_t end, int64_t step,
                     int want_stacks, const callsite_t *cs, const merge_only_t *only, merge_result_t *m, int64_t *from,
                     int64_t *until) {
    selector_t sel = {0};
    memset(m, 0, sizeof *m);
    if (ms_range(c, start, end, HOUR_NS, from, until) || request_selector(c, type, labels, &sel)) {
        selector_destroy(&sel);
        return -1;
    }
    merge_query_t mq = {c->tenant, &sel, *from, *until, step, want_stacks, only, c->deadline_ns, cs};
    int rc = merge_run(c->a->store, &mq, m, &c->err);
    selector_destroy(&sel);
    return rc;
}

static Querier__V1__FlameGraph *flamegraph_msg(qctx_t *c, const flamebearer_t *fb) {
    arena_t *ar = c->arena;
    Querier__V1__FlameGraph *g = arena_alloc(ar, sizeof *g);
    if (!g) return NULL;
    querier__v1__flame_graph__init(g);
    g->names = arena_alloc(ar, (fb->nnames + 1) * sizeof *g->names);
    g->levels = arena_alloc(ar, (fb->nlevels + 1) * sizeof *g->levels);
    if (!g->names || !g->levels) return NULL;
    for (size_t i = 0; i < fb->nnames; i++)
        if (!(g->names[i] = arena_strdup(ar, fb->names[i]))) return NULL;
    g->n_names = fb->nnames;
    for (size_t d = 0; d < fb->nlevels; d++) {
        Querier__V1__Level *l = arena_alloc(ar, sizeof *l);
        if (!l) return NULL;
        querier__v1__level__init(l);
        if (!(l->values = arena_alloc(ar, (fb->levels[d].len + 1) * sizeof *l->values))) return NULL;
        memcpy(l->values, fb->levels[d].v, fb->levels[d].len * sizeof *l->values);
        l->n_values = fb->levels[d].len;
        g->levels[g->n_levels++] = l;
    }
    g->total = fb->total, g->max_self = fb->max_self;
    return g;
}

/* What SelectMergeStacktraces and SelectMergeSpanProfile share: the request's merge
 * as a flame graph message. */
typedef struct {
    const char *type, *labels;
    int64_t start, end, max_nodes;
    int format;
    const callsite_t *cs;
    const merge_only_t *only;
} fg_query_t;

static ProtobufCMessage *merged_flamegraph(qctx_t *c, const fg_query_t *q) {
    if (q->format == QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_TREE)
        return fail(c, 501, "PROFILE_FORMAT_TREE is not supported: ask for PROFILE_FORMAT_FLAMEGRAPH");
    if (q->max_nodes < 0) return fail(c, 400, "`maxNodes` must not be negative");
    merge_result_t m;
    int64_t from, until;
    tree_t t = {0};
    flamebearer_t fb = {0};
    Querier__V1__SelectMergeStacktracesResponse *r = NULL;
    if (run_merge(c, q->type, q->labels, q->start, q->end, 0, 1, q->cs, q->only, &m, &from, &until) == 0 &&
        tree_build(&t, &m, &c->err) == 0) {
        size_t max = q->max_nodes ? (size_t)q->max_nodes : RENDER_DEFAULT_MAX_NODES;
        if (flamebearer_build(&t, max, &fb) == 0 && (r = arena_alloc(c->arena, sizeof *r))) {
            querier__v1__select_merge_stacktraces_response__init(r);
            if (!(r->flamegraph = flamegraph_msg(c, &fb))) r = NULL;
        }
        if (!r) oom(c);
    }
    flamebearer_destroy(&fb);
    tree_destroy(&t);
    merge_result_destroy(&m);
    return r ? &r->base : NULL;
}

static ProtobufCMessage *select_merge_stacktraces(qctx_t *c, const ProtobufCMessage *in) {
    const Querier__V1__SelectMergeStacktracesRequest *q = (const void *)in;
    callsite_t cs;
    int use_cs;
    merge_only_t only;
    if (merge_options(c, q->stack_trace_selector, q->profile_id_selector, q->n_profile_id_selector, &cs, &use_cs, &only))
        return NULL;
    fg_query_t f = {q->profile_typeid, q->label_selector, q->start, q->end, q->max_nodes, q->format,
                    use_cs ? &cs : NULL, &only};
    return merged_flamegraph(c, &f);
}

static ProtobufCMessage *select_merge_profile(qctx_t *c, const ProtobufCMessage *in) {
    const Querier__V1__SelectMergeProfileRequest *q = (const void *)in;
    callsite_t cs;
    int use_cs;
    merge_only_t only;
    if (merge_options(c, q->stack_trace_selector, q->profile_id_selector, q->n_profile_id_selector, &cs, &use_cs, &only))
        return NULL;
    merge_result_t m;
    int64_t from, until;
    buf_t raw;
    buf_init(&raw);
    ProtobufCMessage *p = NULL;
    if (run_merge(c, q->profile_typeid, q->label_selector, q->start, q->end, 0, 1, use_cs ? &cs : NULL, &only, &m,
                  &from, &until) == 0 &&
        render_pprof_raw(&m, &raw, &c->err) == 0) {
        /* Unpacked into the arena so both codecs encode the same message. */
        ProtobufCAllocator al = arena_pb_allocator(c->arena);
        if (!(p = protobuf_c_message_unpack(&perftools__profiles__profile__descriptor, &al, raw.len, raw.data))) oom(c);
    }
    buf_free(&raw);
    merge_result_destroy(&m);
    return p;
}

/* ---- SelectSeries ---- */

typedef struct {
    char **names;
    size_t n;
    json_t *groups; /* key -> [values...] */
} groups_t;

static void collect_group(void *ctx, const series_t *s) {
    groups_t *g = ctx;
    json_t *vals = json_array();
    buf_t key;
    buf_init(&key);
    for (size_t i = 0; i < g->n; i++) {
        const char *v = labels_get(&s->labels, g->names[i]);
        json_array_append_new(vals, json_string(v ? v : ""));
        buf_printf(&key, "%s\x01", v ? v : "");
    }
    buf_putc(&key, 0);
    if (!key.oom) json_object_set_new(g->groups, (char *)key.data, vals);
    else json_decref(vals);
    buf_free(&key);
}

/* One series of the answer: the group's labels and its non-empty steps. */
static Querier__V1__Series *series_msg(qctx_t *c, const groups_t *g, json_t *vals, const merge_result_t *m, double *total) {
    arena_t *ar = c->arena;
    Querier__V1__Series *s = arena_alloc(ar, sizeof *s);
    if (!s) return NULL;
    querier__v1__series__init(s);
    s->labels = arena_alloc(ar, (g->n + 1) * sizeof *s->labels);
    s->points = arena_alloc(ar, (m->nbuckets + 1) * sizeof *s->points);
    if (!s->labels || !s->points) return NULL;
    for (size_t i = 0; i < g->n; i++) {
        const char *v = json_string_value(json_array_get(vals, i));
        if (!v || !*v) continue; /* absent label: not part of the series' labels */
        Querier__V1__LabelPair *p = arena_alloc(ar, sizeof *p);
        if (!p) return NULL;
        querier__v1__label_pair__init(p);
        if (!(p->name = arena_strdup(ar, g->names[i])) || !(p->value = arena_strdup(ar, v))) return NULL;
        s->labels[s->n_labels++] = p;
    }
    *total = 0;
    Querier__V1__Point *pts = arena_alloc(ar, (m->nbuckets + 1) * sizeof *pts);
    if (!pts) return NULL;
    for (size_t i = 0; i < m->nbuckets; i++) {
        if (m->timeline[i] == 0) continue;
        Querier__V1__Point *p = &pts[s->n_points];
        querier__v1__point__init(p);
        p->value = m->timeline[i];
        p->timestamp = (m->tl_start + (int64_t)i * m->tl_step) / MS;
        s->points[s->n_points++] = p;
        *total += m->timeline[i];
    }
    return s;
}

typedef struct {
    Querier__V1__Series *s;
    double total;
} ranked_t;

static int by_total_desc(const void *a, const void *b) {
    double x = ((const ranked_t *)a)->total, y = ((const ranked_t *)b)->total;
    return (x < y) - (x > y);
}

/* Merges one group (the selection narrowed to its label values) into a series. */
static Querier__V1__Series *group_series(qctx_t *c, const Querier__V1__SelectSeriesRequest *q, const groups_t *g,
                                         json_t *vals, int64_t step, const callsite_t *cs, double *total) {
    selector_t sel = {0};
    int64_t from, until;
    Querier__V1__Series *s = NULL;
    if (ms_range(c, q->start, q->end, HOUR_NS, &from, &until) || request_selector(c, q->profile_typeid, q->label_selector, &sel)) {
        selector_destroy(&sel);
        return NULL;
    }
    int rc = 0;
    for (size_t i = 0; i < g->n && !rc; i++) rc = selector_add_eq(&sel, g->names[i], json_string_value(json_array_get(vals, i)), &c->err);
    merge_query_t mq = {c->tenant, &sel, from, until, step, 0, 0, c->deadline_ns, cs};
    merge_result_t m = {0};
    if (rc == 0 && merge_run(c->a->store, &mq, &m, &c->err) == 0 && !(s = series_msg(c, g, vals, &m, total))) oom(c);
    merge_result_destroy(&m);
    selector_destroy(&sel);
    return s;
}

static ProtobufCMessage *select_series(qctx_t *c, const ProtobufCMessage *in) {
    const Querier__V1__SelectSeriesRequest *q = (const void *)in;
    int64_t from, until;
    selector_t sel = {0};
    if (!(q->step >= 0) || q->step > 1e9) return fail(c, 400, "`step` must be a positive number of seconds");
    if (q->limit < 0) return fail(c, 400, "`limit` must not be negative");
    callsite_t cs;
    int use_cs;
    merge_only_t only;
    if (merge_options(c, q->stack_trace_selector, NULL, 0, &cs, &use_cs, &only)) return NULL;
    if (ms_range(c, q->start, q->end, HOUR_NS, &from, &until) || request_selector(c, q->profile_typeid, q->label_selector, &sel)) {
        selector_destroy(&sel);
        return NULL;
    }
    int64_t step = q->step > 0 ? (int64_t)llround(q->step * 1e9) : 0;
    if (step <= 0) step = (until - from) / 1500 > 15000000000LL ? (until - from) / 1500 : 15000000000LL;
    groups_t g = {q->group_by, q->n_group_by, json_object()};
    catalog_query_t cq = {c->tenant, &sel, 1, from, until, c->deadline_ns};
    int rc = catalog_series(c->a->store, &cq, collect_group, &g, &c->err);
    selector_destroy(&sel);
    size_t ng = json_object_size(g.groups), n = 0;
    ranked_t *rk = calloc(ng + 1, sizeof *rk);
    Querier__V1__SelectSeriesResponse *r = arena_alloc(c->arena, sizeof *r);
    if (!rk || !r) rc = -1, oom(c);
    const char *k;
    json_t *vals;
    json_object_foreach(g.groups, k, vals) {
        if (rc) break;
        if (!(rk[n].s = group_series(c, q, &g, vals, step, use_cs ? &cs : NULL, &rk[n].total))) rc = -1;
        else n++;
    }
    json_decref(g.groups);
    if (rc == 0) {
        qsort(rk, n, sizeof *rk, by_total_desc);
        if (q->limit > 0 && (size_t)q->limit < n) n = (size_t)q->limit;
        querier__v1__select_series_response__init(r);
        if (!(r->series = arena_alloc(c->arena, (n + 1) * sizeof *r->series))) rc = -1, oom(c);
        for (size_t i = 0; i < n && rc == 0; i++) r->series[r->n_series++] = rk[i].s;
    }
    free(rk);
    return rc ? NULL : &r->base;
}

/* ---- SelectMergeSpanProfile ---- */

/* The merge of the samples that carried one of span_selector's span ids: what
 * Grafana's trace view links to. Span ids are 16 hex digits, as OpenTelemetry and
 * the pyroscope-go span labels write them. */
static ProtobufCMessage *select_merge_span_profile(qctx_t *c, const ProtobufCMessage *in) {
    const Querier__V1__SelectMergeSpanProfileRequest *q = (const void *)in;
    if (!q->n_span_selector) return fail(c, 400, "`spanSelector` is empty: give one or more span ids");
    uint64_t *spans = arena_alloc(c->arena, q->n_span_selector * sizeof *spans);
    if (!spans) return oom(c);
    for (size_t i = 0; i < q->n_span_selector; i++)
        if (span_id_parse(q->span_selector[i], &spans[i]))
            return fail(c, 400, "bad `spanSelector` entry: span ids are up to 16 hex digits, not all zero");
    span_ids_sort(spans, q->n_span_selector);
    merge_only_t only = {NULL, 0, spans, q->n_span_selector};
    fg_query_t f = {q->profile_typeid, q->label_selector, q->start, q->end, q->max_nodes, q->format, NULL, &only};
    return merged_flamegraph(c, &f);
}

/* ---- dispatch ---- */

typedef ProtobufCMessage *(*method_fn)(qctx_t *c, const ProtobufCMessage *in);

static const struct {
    const char *name;
    const ProtobufCMessageDescriptor *in;
    method_fn fn;
} METHODS[] = {
    {"ProfileTypes", &querier__v1__profile_types_request__descriptor, profile_types},
    {"LabelNames", &querier__v1__label_names_request__descriptor, label_names},
    {"LabelValues", &querier__v1__label_values_request__descriptor, label_values},
    {"Series", &querier__v1__series_request__descriptor, series},
    {"SelectMergeStacktraces", &querier__v1__select_merge_stacktraces_request__descriptor, select_merge_stacktraces},
    {"SelectMergeProfile", &querier__v1__select_merge_profile_request__descriptor, select_merge_profile},
    {"SelectSeries", &querier__v1__select_series_request__descriptor, select_series},
    {"SelectMergeSpanProfile", &querier__v1__select_merge_span_profile_request__descriptor, select_merge_span_profile},
};

void api_querier(app_t *a, http_req_t *req, http_resp_t *resp) {
    const char *method = req->url + strlen(QUERIER_PREFIX);
    size_t i = 0, n = sizeof METHODS / sizeof *METHODS;
    while (i < n && strcmp(METHODS[i].name, method)) i++;
    if (i == n) return connect_error(resp, 404, "no such method in querier.v1.QuerierService");
    if (strcmp(req->method, "POST")) return connect_error(resp, 405, "use POST (Connect unary)");
    if (req->body_too_big) return connect_error(resp, 413, "request body exceeds --max-body-bytes");
    connect_codec_t codec;
    if (connect_codec(req, &codec, resp)) return;
    int64_t t0 = time_now_ns();
    qctx_t c = {a, req->tenant, arena_new(), app_query_deadline(a, req), {0}, 0};
    if (!c.arena) return connect_error(resp, 500, "out of memory");
    const ProtobufCMessage *in = connect_read(req, codec, METHODS[i].in, a->cfg.max_body_bytes, c.arena, resp);
    if (in) {
        ProtobufCMessage *out = METHODS[i].fn(&c, in);
        if (out) connect_reply(resp, codec, out);
        else connect_error(resp, c.status ? c.status : hr_http_status(c.err.code ? c.err.code : HR_ENOMEM),
                           c.err.code ? c.err.msg : "out of memory");
        metrics_query(&a->metrics, (double)(time_now_ns() - t0) / 1e9, out == NULL);
    }
    arena_free(c.arena);
}
