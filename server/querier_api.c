/* querier_api.c - querier.v1.QuerierService: the Connect API that Grafana's
 * Pyroscope data source (and Pyroscope's own tools) read.
 *
 * POST /querier.v1.QuerierService/<Method>, body and reply in application/proto
 * (what Grafana sends) or application/json (curl), see connect.h. Each method
 * decodes its request into the arena, runs the same catalog and merge code as the
 * REST API (discovery calls get the catalog's sorted answers and only encode them),
 * and builds its response message in the arena too, so one arena_free releases
 * everything. Times are milliseconds: a zero end means now, a zero start
 * means an hour before end for merges and all time for discovery calls.
 *
 * A request option Hearth cannot serve (go_pgo) is answered with a Connect error
 * (501 unimplemented), never by a merge that ignores it: that would be a different
 * answer to the question asked. Served: stack_trace_selector.call_site
 * (query/callsite.h), profile_id_selector (Hearth's SERIES-TIME_NS ids) and
 * SelectMergeSpanProfile's span_selector (span samples, storage/segment.h). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/ptype.h"
#include "common/timeparse.h"
#include "query/catalog.h"
#include "query/groupby.h"
#include "query/heatmap.h"
#include "query/merge.h"
#include "query/render.h"
#include "query/tree.h"
#include "server/app.h"
#include "server/connect.h"
#include "wire/profile.pb-c.h"
#include "wire/querier.pb-c.h"

#define HOUR_NS (3600LL * 1000000000)
#define MS 1000000LL

typedef struct {
    app_t *a;
    const http_req_t *req; /* the call, for a merge split across nodes (split_api.c) */
    const char *tenant;
    arena_t *arena;
    int64_t deadline_ns; /* for every merge of the call */
    budget_hold_t mem;   /* what the call's merges hold of --max-query-memory, until it answers */
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

/* The largest request time (ms) whose last nanosecond fits in int64 (year 2262). */
#define MAX_MS (INT64_MAX / MS - 1)

/* ms request times to an inclusive ns range; def_span 0 = all time when start is 0. */
static int ms_range(qctx_t *c, int64_t start, int64_t end, int64_t def_span, int64_t *from, int64_t *until) {
    if (start < 0 || end < 0 || start > MAX_MS || end > MAX_MS)
        return fail(c, 400, "`start` and `end` must be milliseconds since 1970 (0: unset), before the year 2262"), -1;
    *until = end > 0 ? end * MS + (MS - 1) : time_now_ns();
    *from = start > 0 ? start * MS : def_span && *until > def_span ? *until - def_span : 0;
    if (*until < *from) return fail(c, 400, "`end` is before `start`"), -1;
    return 0;
}

/* ---- discovery: the catalog's sorted answers, copied into the arena ---- */

/* A discovery call's selection: one catalog query per matcher (one over every series
 * without matchers), each settled as REST settles its selector, over [start, end]
 * ms (all time when both are 0). */
typedef struct {
    selector_t *sels;
    catalog_query_t *q;
    size_t nq;
} discovery_t;

/* 0 or -1 (c->err set); discovery_end in both cases. */
static int discovery_begin(qctx_t *c, char **matchers, size_t n, int64_t start, int64_t end, discovery_t *d) {
    int64_t from, until;
    *d = (discovery_t){NULL, NULL, n ? n : 1};
    if (ms_range(c, start, end, 0, &from, &until)) return -1;
    if (!(d->q = calloc(d->nq, sizeof *d->q)) || (n && !(d->sels = calloc(n, sizeof *d->sels)))) return oom(c), -1;
    for (size_t i = 0; i < d->nq; i++) {
        d->q[i] = (catalog_query_t){c->tenant, n ? &d->sels[i] : NULL, start || end, from, until, c->deadline_ns};
        if (n && (selector_parse(matchers[i], &d->sels[i], &c->err) ||
                  catalog_resolve_type(c->a->store, &d->q[i], &d->sels[i], 0, &c->err)))
            return -1;
    }
    return 0;
}

static void discovery_end(discovery_t *d) {
    for (size_t i = 0; d->sels && i < d->nq; i++) selector_destroy(&d->sels[i]);
    free(d->sels);
    free(d->q);
}

/* v[0..n) copied into the arena (as protobuf-c's repeated string field); NULL on OOM. */
static char **arena_strings(qctx_t *c, const char *const *v, size_t n) {
    char **out = arena_alloc(c->arena, (n + 1) * sizeof *out);
    for (size_t i = 0; out && i < n; i++)
        if (!(out[i] = arena_strdup(c->arena, v[i]))) return NULL;
    return out;
}

/* LabelNames (label NULL, with the pseudo-labels) and LabelValues share everything
 * but the question. */
static char **label_answer(qctx_t *c, const char *label, char **matchers, size_t nm, int64_t start, int64_t end,
                           size_t *n) {
    discovery_t d;
    catalog_strings_t s = {0};
    char **v = NULL;
    store_t *st = c->a->store;
    if (discovery_begin(c, matchers, nm, start, end, &d) == 0 &&
        (label ? catalog_label_values(st, d.q, d.nq, label, &s, &c->err)
               : catalog_label_names(st, d.q, d.nq, CATALOG_PSEUDO_LABELS, &s, &c->err)) == 0) {
        if ((v = arena_strings(c, s.v, s.n))) *n = s.n;
        else oom(c);
    }
    free(s.v);
    discovery_end(&d);
    return v;
}

static ProtobufCMessage *label_names(qctx_t *c, const ProtobufCMessage *in) {
    const Querier__V1__LabelNamesRequest *q = (const void *)in;
    Querier__V1__LabelNamesResponse *r = arena_alloc(c->arena, sizeof *r);
    if (!r) return oom(c);
    querier__v1__label_names_response__init(r);
    r->names = label_answer(c, NULL, q->matchers, q->n_matchers, q->start, q->end, &r->n_names);
    return r->names ? &r->base : NULL;
}

static ProtobufCMessage *label_values(qctx_t *c, const ProtobufCMessage *in) {
    const Querier__V1__LabelValuesRequest *q = (const void *)in;
    if (!q->name || !*q->name) return fail(c, 400, "`name` (the label whose values to list) is required");
    Querier__V1__LabelValuesResponse *r = arena_alloc(c->arena, sizeof *r);
    if (!r) return oom(c);
    querier__v1__label_values_response__init(r);
    r->names = label_answer(c, q->name, q->matchers, q->n_matchers, q->start, q->end, &r->n_names);
    return r->names ? &r->base : NULL;
}

/* Fills item i of a repeated message field from answer; 0 or -1 (OOM). */
typedef int (*fill_fn)(qctx_t *c, void *field, size_t i, const void *answer);

/* A repeated message field of n items in the arena, each built by fill; NULL on OOM.
 * Every message pointer has the size of a ProtobufCMessage pointer (C11 6.2.5: all
 * pointers to structures have one representation), so one size serves every field. */
static void *repeated(qctx_t *c, size_t n, fill_fn fill, const void *answer) {
    void *field = arena_alloc(c->arena, (n + 1) * sizeof(ProtobufCMessage *));
    for (size_t i = 0; field && i < n; i++)
        if (fill(c, field, i, answer)) return NULL;
    return field;
}

static Querier__V1__LabelPair *label_pair(qctx_t *c, const char *name, const char *value) {
    Querier__V1__LabelPair *p = arena_alloc(c->arena, sizeof *p);
    if (!p) return NULL;
    querier__v1__label_pair__init(p);
    p->name = arena_strdup(c->arena, name), p->value = arena_strdup(c->arena, value);
    return p->name && p->value ? p : NULL;
}

/* ---- ProfileTypes ---- */

static char *dup(qctx_t *c, const char *s, int *ok) {
    char *d = arena_strdup(c->arena, s);
    if (!d) *ok = 0;
    return d;
}

static int fill_type(qctx_t *c, void *field, size_t i, const void *answer) {
    const catalog_type_t *ct = &((const catalog_types_t *)answer)->v[i];
    const ptype_parts_t *p = &ct->parts;
    Querier__V1__ProfileType *t = arena_alloc(c->arena, sizeof *t);
    int ok = t != NULL;
    if (!ok) return -1;
    querier__v1__profile_type__init(t);
    t->id = dup(c, ct->id, &ok), t->name = dup(c, p->name, &ok);
    t->sample_type = dup(c, p->sample_type, &ok), t->sample_unit = dup(c, p->sample_unit, &ok);
    t->period_type = dup(c, p->period_type, &ok), t->period_unit = dup(c, p->period_unit, &ok);
    ((Querier__V1__ProfileType **)field)[i] = t;
    return ok ? 0 : -1;
}

static ProtobufCMessage *profile_types(qctx_t *c, const ProtobufCMessage *in) {
    const Querier__V1__ProfileTypesRequest *q = (const void *)in;
    Querier__V1__ProfileTypesResponse *r = arena_alloc(c->arena, sizeof *r);
    discovery_t d;
    catalog_types_t t = {0};
    if (!r) return oom(c);
    querier__v1__profile_types_response__init(r);
    int rc =
        discovery_begin(c, NULL, 0, q->start, q->end, &d) || catalog_profile_types(c->a->store, d.q, d.nq, &t, &c->err);
    if (rc == 0) r->n_profile_types = t.n;
    if (rc == 0 && !(r->profile_types = repeated(c, t.n, fill_type, &t))) rc = -1, oom(c);
    free(t.v);
    discovery_end(&d);
    return rc ? NULL : &r->base;
}

/* ---- Series ---- */

static int fill_labels(qctx_t *c, void *field, size_t i, const void *answer) {
    const catalog_label_set_t *set = &((const catalog_label_sets_t *)answer)->v[i];
    Querier__V1__Labels *l = arena_alloc(c->arena, sizeof *l);
    if (!l) return -1;
    querier__v1__labels__init(l);
    if (!(l->labels = arena_alloc(c->arena, (set->n + 1) * sizeof *l->labels))) return -1;
    for (size_t k = 0; k < set->n; k++)
        if (!(l->labels[l->n_labels++] = label_pair(c, set->kv[2 * k], set->kv[2 * k + 1]))) return -1;
    ((Querier__V1__Labels **)field)[i] = l;
    return 0;
}

static ProtobufCMessage *series(qctx_t *c, const ProtobufCMessage *in) {
    const Querier__V1__SeriesRequest *q = (const void *)in;
    Querier__V1__SeriesResponse *r = arena_alloc(c->arena, sizeof *r);
    discovery_t d;
    catalog_label_sets_t sets = {0};
    if (!r) return oom(c);
    querier__v1__series_response__init(r);
    int rc = discovery_begin(c, q->matchers, q->n_matchers, q->start, q->end, &d) ||
             catalog_label_sets(c->a->store, d.q, d.nq, q->label_names, q->n_label_names, &sets, &c->err);
    if (rc == 0) r->n_labels_set = sets.n;
    if (rc == 0 && !(r->labels_set = repeated(c, sets.n, fill_labels, &sets))) rc = -1, oom(c);
    free(sets.v);
    discovery_end(&d);
    return rc ? NULL : &r->base;
}

/* ---- merges ---- */

/* profile_typeID + label_selector as one selector. 0 or -1 (c->err set). */
static int request_selector(qctx_t *c, const char *type, const char *labels, selector_t *sel) {
    memset(sel, 0, sizeof *sel);
    if (!type || !*type)
        return fail(c, 400, "`profileTypeID` is required, e.g. process_cpu:cpu:nanoseconds:cpu:nanoseconds"), -1;
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
            return fail(c, 400,
                        "bad `profile_id_selector` entry: Hearth's profile ids are SERIES-TIME_NS, as "
                        "/api/v1/profiles lists them"),
                   -1;
    profile_refs_sort(v, n);
    o->profiles = v, o->nprofiles = n;
    return 0;
}

/* A request's merge options besides its selection. */
typedef struct {
    callsite_t cs;
    const callsite_t *call_site; /* &cs, or NULL: no call-site filter */
    merge_only_t only;           /* profile_id_selector's profiles */
} merge_opts_t;

/* span_selector's span ids, parsed and sorted into only (16 hex digits each, as
 * OpenTelemetry and the pyroscope-go span labels write them). 0 or -1 (c->err set). */
static int span_selector(qctx_t *c, char **ids, size_t n, merge_only_t *only) {
    uint64_t *spans = arena_alloc(c->arena, (n ? n : 1) * sizeof *spans);
    if (!spans) return oom(c), -1;
    for (size_t i = 0; i < n; i++)
        if (span_id_parse(ids[i], &spans[i]))
            return fail(c, 400, "bad `spanSelector` entry: span ids are up to 16 hex digits, not all zero"), -1;
    span_ids_sort(spans, n);
    only->spans = spans, only->nspans = n;
    return 0;
}

/* trace_id_selector's trace ids (32 hex digits each, not with span_selector, as
 * upstream checks them), parsed and sorted into only: the merge then reads the span
 * samples whose span belongs to one of those traces. 0 or -1 (c->err set). */
static int trace_id_selector(qctx_t *c, char **ids, size_t n, size_t nspans, merge_only_t *only) {
    if (!n) return 0;
    if (nspans) return fail(c, 400, "`spanSelector` and `traceIdSelector` cannot be combined"), -1;
    uint64_t *v = arena_alloc(c->arena, 2 * n * sizeof *v);
    if (!v) return oom(c), -1;
    for (size_t i = 0; i < n; i++)
        if (trace_id_parse(ids[i], &v[2 * i], &v[2 * i + 1]))
            return fail(c, 400, "bad `traceIdSelector` entry: trace ids are 32 hex digits, not all zero"), -1;
    trace_ids_sort(v, n);
    only->traces = v, only->ntraces = n;
    return 0;
}

/* The selectors a merge request may carry besides its labels. */
typedef struct {
    const Querier__V1__StackTraceSelector *stack;
    char **profiles, **spans, **traces;
    size_t nprofiles, nspans, ntraces;
} request_selectors_t;

/* The merge options a request may carry besides its selection: served, or refused
 * with a Connect error, never ignored (a merge that ignored them would answer a
 * different question). The call site comes from stack_trace_selector.call_site (its
 * names in the arena), the profiles from profile_id_selector, the spans from
 * span_selector. 0 or -1 (c->err set). */
static int merge_options(qctx_t *c, const request_selectors_t *r, merge_opts_t *o) {
    *o = (merge_opts_t){0};
    const Querier__V1__StackTraceSelector *st = r->stack;
    if (trace_id_selector(c, r->traces, r->ntraces, r->nspans, &o->only)) return -1;
    if (r->nprofiles && profile_ids(c, r->profiles, r->nprofiles, &o->only)) return -1;
    if (r->nspans && span_selector(c, r->spans, r->nspans, &o->only)) return -1;
    if (!st) return 0;
    if (st->go_pgo) return fail(c, 501, "`stack_trace_selector.go_pgo` is not supported; use call_site"), -1;
    const char **names = arena_alloc(c->arena, (st->n_call_site + 1) * sizeof *names);
    if (!names) return oom(c), -1;
    for (size_t i = 0; i < st->n_call_site; i++) {
        if (!st->call_site[i] || !st->call_site[i]->name || !*st->call_site[i]->name)
            return fail(c, 400, "`stack_trace_selector.call_site` has a location without a name"), -1;
        names[i] = st->call_site[i]->name;
    }
    o->cs = (callsite_t){names, st->n_call_site};
    o->call_site = st->n_call_site > 0 ? &o->cs : NULL; /* empty: "the filter is ignored", as upstream */
    return 0;
}

/* merge_options of a SelectMergeStacktraces request (also each side of a Diff). */
static int stacktraces_options(qctx_t *c, const Querier__V1__SelectMergeStacktracesRequest *q, merge_opts_t *o) {
    if (q->async) return fail(c, 501, "`async` queries are not supported: ask without it"), -1;
    request_selectors_t r = {q->stack_trace_selector, q->profile_id_selector,   q->span_selector,
                             q->trace_id_selector,    q->n_profile_id_selector, q->n_span_selector,
                             q->n_trace_id_selector};
    return merge_options(c, &r, o);
}

/* What run_merge's caller reads of the stacks: the merged profile, or only its call
 * tree (tree_build, which may then be partly built during the merge: merge_query_t.tree). */
enum { WANT_STACKS = 1, WANT_TREE = 3 };

/* Selects and merges; 0 or -1 (c->err set). The caller destroys m. */
static int run_merge(qctx_t *c, const char *type, const char *labels, int64_t start, int64_t end, int64_t step,
                     int want, const callsite_t *cs, const merge_only_t *only, merge_result_t *m, int64_t *from,
                     int64_t *until) {
    selector_t sel = {0};
    memset(m, 0, sizeof *m);
    if (ms_range(c, start, end, HOUR_NS, from, until) || request_selector(c, type, labels, &sel)) {
        selector_destroy(&sel);
        return -1;
    }
    merge_query_t mq = {.tenant = c->tenant,
                        .sel = &sel,
                        .from = *from,
                        .until = *until,
                        .step = step,
                        .want_stacks = (want & WANT_STACKS) != 0,
                        .tree = want == WANT_TREE,
                        .only = only,
                        .deadline_ns = c->deadline_ns,
                        .call_site = cs,
                        .symbolizer = c->a->symbolizer,
                        .mem = &c->mem};
    /* A stack merge may be split among the cluster's query nodes (merge.h says which). */
    char *text = want ? arena_alloc(c->arena, strlen(type) + (labels ? strlen(labels) : 0) + 1) : NULL;
    if (text) sprintf(text, "%s%s", type, labels ? labels : "");
    app_remote_t remote;
    if (text && app_remote_begin(c->a, c->req, text, *from, *until, &remote)) mq.remote = &remote.rm;
    int rc = merge_run(c->a->store, &mq, m, &c->err);
    if (mq.remote) app_remote_end(&remote, rc == 0 ? m : NULL);
    selector_destroy(&sel);
    return rc;
}

/* fb's names and levels copied into the arena (FlameGraph and FlameGraphDiff share
 * the shape). 0 or -1 (OOM). */
static int bearer_arrays(qctx_t *c, const flamebearer_t *fb, char ***names, size_t *nnames,
                         Querier__V1__Level ***levels, size_t *nlevels) {
    arena_t *ar = c->arena;
    *names = arena_alloc(ar, (fb->nnames + 1) * sizeof **names);
    *levels = arena_alloc(ar, (fb->nlevels + 1) * sizeof **levels);
    if (!*names || !*levels) return -1;
    for (size_t i = 0; i < fb->nnames; i++)
        if (!((*names)[i] = arena_strdup(ar, fb->names[i]))) return -1;
    *nnames = fb->nnames;
    for (size_t d = 0; d < fb->nlevels; d++) {
        Querier__V1__Level *l = arena_alloc(ar, sizeof *l);
        if (!l) return -1;
        querier__v1__level__init(l);
        if (!(l->values = arena_alloc(ar, (fb->levels[d].len + 1) * sizeof *l->values))) return -1;
        memcpy(l->values, fb->levels[d].v, fb->levels[d].len * sizeof *l->values);
        l->n_values = fb->levels[d].len;
        (*levels)[(*nlevels)++] = l;
    }
    return 0;
}

static Querier__V1__FlameGraph *flamegraph_msg(qctx_t *c, const flamebearer_t *fb) {
    Querier__V1__FlameGraph *g = arena_alloc(c->arena, sizeof *g);
    if (!g) return NULL;
    querier__v1__flame_graph__init(g);
    if (bearer_arrays(c, fb, &g->names, &g->n_names, &g->levels, &g->n_levels)) return NULL;
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

/* PROFILE_FORMAT_TREE: the merge as Pyroscope's tree bytes (render_pyroscope_tree). */
static Querier__V1__SelectMergeStacktracesResponse *tree_msg(qctx_t *c, const tree_t *t, size_t max) {
    buf_t b;
    buf_init(&b);
    Querier__V1__SelectMergeStacktracesResponse *r = NULL;
    if (render_pyroscope_tree(t, max, &b) == 0 && (r = arena_alloc(c->arena, sizeof *r))) {
        querier__v1__select_merge_stacktraces_response__init(r);
        r->tree.len = b.len;
        if (b.len && !(r->tree.data = arena_alloc(c->arena, b.len))) r = NULL;
        else if (b.len) memcpy(r->tree.data, b.data, b.len);
    }
    buf_free(&b);
    return r;
}

/* PROFILE_FORMAT_DOT: the merge's call graph as Graphviz DOT (render_dot), as
 * upstream answers it (100 nodes unless maxNodes says otherwise). */
static Querier__V1__SelectMergeStacktracesResponse *dot_msg(qctx_t *c, const tree_t *t, const merge_result_t *m,
                                                            size_t max) {
    buf_t b;
    buf_init(&b);
    Querier__V1__SelectMergeStacktracesResponse *r = NULL;
    int rc = render_dot(t, m, max, &b);
    buf_putc(&b, 0);
    if (rc == 0 && !b.oom && (r = arena_alloc(c->arena, sizeof *r))) {
        querier__v1__select_merge_stacktraces_response__init(r);
        if (!(r->dot = arena_strdup(c->arena, (const char *)b.data))) r = NULL;
    }
    buf_free(&b);
    return r;
}

/* 1 when maxNodes n is one a call may ask for, else 0 with the failure in c. */
static int max_nodes_ok(qctx_t *c, int64_t n) {
    size_t limit = c->a->cfg.max_nodes_limit;
    if (n < 0) fail(c, 400, "`maxNodes` must not be negative");
    else if (limit && (uint64_t)n > limit) fail(c, 400, "`maxNodes` is over --max-nodes-limit");
    else return 1;
    return 0;
}

static ProtobufCMessage *merged_flamegraph(qctx_t *c, const fg_query_t *q) {
    if (!max_nodes_ok(c, q->max_nodes)) return NULL;
    int dot = q->format == QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_DOT;
    if (q->format != QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_UNSPECIFIED &&
        q->format != QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_FLAMEGRAPH &&
        q->format != QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_TREE && !dot)
        return fail(c, 400, "unknown `format`: PROFILE_FORMAT_FLAMEGRAPH, TREE, DOT or PPROF");
    merge_result_t m;
    int64_t from, until;
    tree_t t = {0};
    flamebearer_t fb = {0};
    Querier__V1__SelectMergeStacktracesResponse *r = NULL;
    if (run_merge(c, q->type, q->labels, q->start, q->end, 0, WANT_TREE, q->cs, q->only, &m, &from, &until) == 0 &&
        tree_build(&t, &m, &c->err) == 0) {
        size_t max = q->max_nodes ? (size_t)q->max_nodes : dot ? RENDER_DOT_MAX_NODES : RENDER_DEFAULT_MAX_NODES;
        if (q->format == QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_TREE) r = tree_msg(c, &t, max);
        else if (dot) r = dot_msg(c, &t, &m, max);
        else if (flamebearer_build(&t, max, &fb) == 0 && (r = arena_alloc(c->arena, sizeof *r))) {
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

/* The merge as a profile.proto message in the arena (both codecs then encode the same
 * message); NULL with c->err set. */
static ProtobufCMessage *merged_pprof(qctx_t *c, const char *type, const char *labels, int64_t start, int64_t end,
                                      const merge_opts_t *o) {
    merge_result_t m;
    int64_t from, until;
    buf_t raw;
    buf_init(&raw);
    ProtobufCMessage *p = NULL;
    if (run_merge(c, type, labels, start, end, 0, WANT_STACKS, o->call_site, &o->only, &m, &from, &until) == 0 &&
        render_pprof_raw(&m, &raw, &c->err) == 0) {
        ProtobufCAllocator al = arena_pb_allocator(c->arena);
        if (!(p = protobuf_c_message_unpack(&perftools__profiles__profile__descriptor, &al, raw.len, raw.data))) oom(c);
    }
    buf_free(&raw);
    merge_result_destroy(&m);
    return p;
}

/* PROFILE_FORMAT_PPROF (Pyroscope 2.2): the merged profile in the response's pprof field. */
static ProtobufCMessage *stacktraces_pprof(qctx_t *c, const Querier__V1__SelectMergeStacktracesRequest *q,
                                           const merge_opts_t *o) {
    Querier__V1__SelectMergeStacktracesResponse *r = arena_alloc(c->arena, sizeof *r);
    Querier__V1__PprofProfile *pp = arena_alloc(c->arena, sizeof *pp);
    if (!r || !pp) return oom(c);
    querier__v1__select_merge_stacktraces_response__init(r);
    querier__v1__pprof_profile__init(pp);
    ProtobufCMessage *p = merged_pprof(c, q->profile_typeid, q->label_selector, q->start, q->end, o);
    if (!p) return NULL;
    pp->profile = (Perftools__Profiles__Profile *)p;
    r->pprof = pp;
    return &r->base;
}

static ProtobufCMessage *select_merge_stacktraces(qctx_t *c, const ProtobufCMessage *in) {
    const Querier__V1__SelectMergeStacktracesRequest *q = (const void *)in;
    merge_opts_t o;
    if (stacktraces_options(c, q, &o)) return NULL;
    if (q->format == QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_PPROF)
        return max_nodes_ok(c, q->max_nodes) ? stacktraces_pprof(c, q, &o) : NULL;
    fg_query_t f = {q->profile_typeid, q->label_selector, q->start,    q->end,
                    q->max_nodes,      q->format,         o.call_site, &o.only};
    return merged_flamegraph(c, &f);
}

static ProtobufCMessage *select_merge_profile(qctx_t *c, const ProtobufCMessage *in) {
    const Querier__V1__SelectMergeProfileRequest *q = (const void *)in;
    merge_opts_t o;
    request_selectors_t r = {q->stack_trace_selector, q->profile_id_selector,   NULL,
                             q->trace_id_selector,    q->n_profile_id_selector, 0,
                             q->n_trace_id_selector};
    if (merge_options(c, &r, &o)) return NULL;
    return merged_pprof(c, q->profile_typeid, q->label_selector, q->start, q->end, &o);
}

/* ---- SelectSeries ---- */

/* A point's exemplar: the individual profile of the step with the largest total. */
static Querier__V1__Exemplar *exemplar_msg(qctx_t *c, const exemplar_t *e) {
    Querier__V1__Exemplar *x = arena_alloc(c->arena, sizeof *x);
    char id[PROFILE_REF_MAX];
    profile_ref_format(e->p.series, e->p.time_ns, id);
    if (!x) return NULL;
    querier__v1__exemplar__init(x);
    if (!(x->labels = arena_alloc(c->arena, (e->labels.n + 1) * sizeof *x->labels))) return NULL;
    x->timestamp = e->p.time_ns / MS;
    x->value = e->p.total;
    /* a span exemplar names its span, as the span selector takes it, and no profile (as Pyroscope) */
    if (e->p.span) snprintf(id, sizeof id, "%016" PRIx64, e->p.span);
    if (!(e->p.span ? (x->span_id = arena_strdup(c->arena, id)) : (x->profile_id = arena_strdup(c->arena, id))))
        return NULL;
    char trace[33];
    snprintf(trace, sizeof trace, "%016" PRIx64 "%016" PRIx64, e->p.trace_hi, e->p.trace_lo);
    if (e->p.span && (e->p.trace_hi | e->p.trace_lo) && !(x->trace_id = arena_strdup(c->arena, trace))) return NULL;
    for (size_t i = 0; i < e->labels.n; i++)
        if (!(x->labels[x->n_labels++] = label_pair(c, e->labels.v[i].name, e->labels.v[i].value))) return NULL;
    return x;
}

/* Attaches bucket b's exemplar, if the group has one, to point p. 0 or -1 (OOM). */
static int point_exemplar(qctx_t *c, const group_t *g, size_t b, Querier__V1__Point *p) {
    if (!g->ex || !g->ex[b].set) return 0;
    if (!(p->exemplars = arena_alloc(c->arena, sizeof *p->exemplars))) return -1;
    p->n_exemplars = 1;
    return (p->exemplars[0] = exemplar_msg(c, &g->ex[b])) ? 0 : -1;
}

/* One series of the answer: the group's labels (names[i] = vals[i], left out where
 * the value is "", a label the group lacks) and its non-empty steps, with their
 * exemplars when the group has them. */
static Querier__V1__Series *series_msg(qctx_t *c, char *const *names, size_t width, const group_t *g, double *total) {
    const char *const *vals = g->vals;
    const merge_result_t *m = &g->m;
    arena_t *ar = c->arena;
    Querier__V1__Series *s = arena_alloc(ar, sizeof *s);
    if (!s) return NULL;
    querier__v1__series__init(s);
    s->labels = arena_alloc(ar, (width + 1) * sizeof *s->labels);
    s->points = arena_alloc(ar, (m->nbuckets + 1) * sizeof *s->points);
    if (!s->labels || !s->points) return NULL;
    for (size_t i = 0; i < width; i++) {
        if (!*vals[i]) continue;
        if (!(s->labels[s->n_labels++] = label_pair(c, names[i], vals[i]))) return NULL;
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
        if (point_exemplar(c, g, i, p)) return NULL;
        s->points[s->n_points++] = p;
        *total += m->timeline[i];
    }
    return s;
}

static ProtobufCMessage *select_series(qctx_t *c, const ProtobufCMessage *in) {
    const Querier__V1__SelectSeriesRequest *q = (const void *)in;
    int64_t from, until;
    selector_t sel = {0};
    if (!(q->step >= 0) || q->step > 1e9) return fail(c, 400, "`step` must be a positive number of seconds");
    if (q->limit < 0) return fail(c, 400, "`limit` must not be negative");
    if (q->exemplar_type == QUERIER__V1__EXEMPLAR_TYPE__EXEMPLAR_TYPE_SPAN)
        return fail(c, 501, "`exemplarType` SPAN is not served: ask for INDIVIDUAL or none");
    if (q->exemplar_type < 0 || q->exemplar_type > QUERIER__V1__EXEMPLAR_TYPE__EXEMPLAR_TYPE_SPAN)
        return fail(c, 400, "unknown `exemplarType`");
    if (q->aggregation != QUERIER__V1__TIME_SERIES_AGGREGATION_TYPE__TIME_SERIES_AGGREGATION_TYPE_SUM &&
        q->aggregation != QUERIER__V1__TIME_SERIES_AGGREGATION_TYPE__TIME_SERIES_AGGREGATION_TYPE_AVERAGE)
        return fail(c, 400, "unknown `aggregation`: SUM or AVERAGE");
    merge_opts_t o;
    request_selectors_t rs = {.stack = q->stack_trace_selector};
    if (merge_options(c, &rs, &o)) return NULL;
    if (ms_range(c, q->start, q->end, HOUR_NS, &from, &until) ||
        request_selector(c, q->profile_typeid, q->label_selector, &sel)) {
        selector_destroy(&sel);
        return NULL;
    }
    int64_t step = q->step > 0 ? (int64_t)llround(q->step * 1e9) : 0;
    if (q->step > 0 && step <= 0) {
        selector_destroy(&sel);
        return fail(c, 400, "`step` must be at least a nanosecond");
    }
    if (step <= 0) step = (until - from) / 1500 > 15000000000LL ? (until - from) / 1500 : 15000000000LL;
    merge_query_t mq = {.tenant = c->tenant,
                        .sel = &sel,
                        .from = from,
                        .until = until,
                        .step = step,
                        .deadline_ns = c->deadline_ns,
                        .mem = &c->mem,
                        .call_site = o.call_site,
                        .average_timeline =
                            q->aggregation ==
                            QUERIER__V1__TIME_SERIES_AGGREGATION_TYPE__TIME_SERIES_AGGREGATION_TYPE_AVERAGE};
    grouped_t g;
    int rc = groupby_run(c->a->store, &mq, &sel, q->group_by, q->n_group_by, (size_t)q->limit, &g, &c->err);
    if (rc == 0 && q->exemplar_type == QUERIER__V1__EXEMPLAR_TYPE__EXEMPLAR_TYPE_INDIVIDUAL)
        rc = groupby_exemplars(c->a->store, &mq, &sel, &g, &c->err);
    selector_destroy(&sel);
    Querier__V1__SelectSeriesResponse *r = rc ? NULL : arena_alloc(c->arena, sizeof *r);
    if (r) querier__v1__select_series_response__init(r);
    if (rc == 0 && (!r || !(r->series = arena_alloc(c->arena, (g.n + 1) * sizeof *r->series)))) rc = -1, oom(c);
    for (size_t i = 0; i < g.n && rc == 0; i++) {
        double total;
        Querier__V1__Series *s = series_msg(c, q->group_by, q->n_group_by, &g.v[i], &total);
        if (!s) rc = -1, oom(c);
        else r->series[r->n_series++] = s;
    }
    grouped_destroy(&g);
    return rc ? NULL : &r->base;
}

/* ---- SelectHeatmap ---- */

/* An exemplar of the heatmap: as SelectSeries' but without the group-by labels,
 * which its series already names (Pyroscope leaves them out too). */
static Querier__V1__Exemplar *cell_exemplar(qctx_t *c, const exemplar_t *e, char *const *names, size_t width) {
    Querier__V1__Exemplar *x = exemplar_msg(c, e);
    size_t k = 0;
    for (size_t i = 0; x && i < x->n_labels; i++) {
        size_t j = 0;
        while (j < width && strcmp(names[j], x->labels[i]->name)) j++;
        if (j == width) x->labels[k++] = x->labels[i];
    }
    if (x) x->n_labels = k;
    return x;
}

static Querier__V1__HeatmapSlot *slot_msg(qctx_t *c, const heatmap_t *h, const heatmap_slot_t *sl, char *const *names,
                                          size_t width) {
    Querier__V1__HeatmapSlot *m = arena_alloc(c->arena, sizeof *m);
    if (!m) return NULL;
    querier__v1__heatmap_slot__init(m);
    m->timestamp = sl->end_ns / MS;
    m->y_min = arena_alloc(c->arena, HEATMAP_BUCKETS * sizeof *m->y_min);
    m->counts = arena_alloc(c->arena, HEATMAP_BUCKETS * sizeof *m->counts);
    m->exemplars = arena_alloc(c->arena, HEATMAP_BUCKETS * sizeof *m->exemplars);
    if (!m->y_min || !m->counts || !m->exemplars) return NULL;
    m->n_y_min = m->n_counts = HEATMAP_BUCKETS;
    for (int b = 0; b < HEATMAP_BUCKETS; b++) {
        m->y_min[b] = h->ymin[b];
        m->counts[b] = sl->counts[b];
        if (sl->ex[b].set && !(m->exemplars[m->n_exemplars++] = cell_exemplar(c, &sl->ex[b], names, width)))
            return NULL;
    }
    return m;
}

static Querier__V1__HeatmapSeries *heatmap_series_msg(qctx_t *c, const heatmap_t *h, size_t g, char *const *names,
                                                      size_t width) {
    Querier__V1__HeatmapSeries *s = arena_alloc(c->arena, sizeof *s);
    if (!s) return NULL;
    querier__v1__heatmap_series__init(s);
    s->labels = arena_alloc(c->arena, (width + 1) * sizeof *s->labels);
    s->slots = arena_alloc(c->arena, (h->s[g].n + 1) * sizeof *s->slots);
    if (!s->labels || !s->slots) return NULL;
    for (size_t i = 0; i < width; i++)
        if (*h->g.v[g].vals[i] && !(s->labels[s->n_labels++] = label_pair(c, names[i], h->g.v[g].vals[i]))) return NULL;
    for (size_t k = 0; k < h->s[g].n; k++)
        if (!(s->slots[s->n_slots++] = slot_msg(c, h, &h->s[g].slots[k], names, width))) return NULL;
    return s;
}

/* The points a heatmap request asks for, checked as Pyroscope checks them: a query
 * type must be given, and exemplars must be of its kind. -1 after fail(). */
static int heatmap_points(qctx_t *c, const Querier__V1__SelectHeatmapRequest *q, heatmap_points_t *points, int *ex) {
    static const struct {
        Querier__V1__HeatmapQueryType type;
        heatmap_points_t points;
        Querier__V1__ExemplarType exemplars; /* the exemplar type that goes with it */
    } KINDS[] = {
        {QUERIER__V1__HEATMAP_QUERY_TYPE__HEATMAP_QUERY_TYPE_INDIVIDUAL, HEATMAP_PROFILES,
         QUERIER__V1__EXEMPLAR_TYPE__EXEMPLAR_TYPE_INDIVIDUAL},
        {QUERIER__V1__HEATMAP_QUERY_TYPE__HEATMAP_QUERY_TYPE_SPAN, HEATMAP_SPANS,
         QUERIER__V1__EXEMPLAR_TYPE__EXEMPLAR_TYPE_SPAN},
    };
    size_t k = 0, n = sizeof KINDS / sizeof *KINDS;
    while (k < n && KINDS[k].type != q->query_type) k++;
    if (k == n) return fail(c, 400, "`queryType` must be HEATMAP_QUERY_TYPE_INDIVIDUAL or HEATMAP_QUERY_TYPE_SPAN"), -1;
    *points = KINDS[k].points;
    *ex = q->exemplar_type == KINDS[k].exemplars;
    if (!*ex && q->exemplar_type != QUERIER__V1__EXEMPLAR_TYPE__EXEMPLAR_TYPE_UNSPECIFIED &&
        q->exemplar_type != QUERIER__V1__EXEMPLAR_TYPE__EXEMPLAR_TYPE_NONE)
        return fail(c, 400,
                    "`exemplarType` must match `queryType`: INDIVIDUAL exemplars for individual profiles, SPAN "
                    "exemplars for spans, or NONE"),
               -1;
    return 0;
}

static ProtobufCMessage *select_heatmap(qctx_t *c, const ProtobufCMessage *in) {
    const Querier__V1__SelectHeatmapRequest *q = (const void *)in;
    heatmap_points_t points;
    int ex;
    if (!(q->step > 0) || q->step > 1e9) return fail(c, 400, "`step` must be a positive number of seconds");
    if (q->limit < 0) return fail(c, 400, "`limit` must not be negative");
    if (heatmap_points(c, q, &points, &ex)) return NULL;
    if (q->end > 0 && q->start >= q->end) return fail(c, 400, "`start` must be before `end`");
    int64_t from, until;
    selector_t sel = {0};
    if (ms_range(c, q->start, q->end, HOUR_NS, &from, &until) ||
        request_selector(c, q->profile_typeid, q->label_selector, &sel)) {
        selector_destroy(&sel);
        return NULL;
    }
    merge_query_t mq = {.tenant = c->tenant,
                        .sel = &sel,
                        .from = from,
                        .until = until,
                        .step = (int64_t)llround(q->step * 1e9),
                        .deadline_ns = c->deadline_ns,
                        .mem = &c->mem};
    heatmap_t h;
    int rc = heatmap_run(c->a->store, &mq, &sel, q->group_by, q->n_group_by, (size_t)q->limit, points, ex, &h, &c->err);
    selector_destroy(&sel);
    Querier__V1__SelectHeatmapResponse *r = rc ? NULL : arena_alloc(c->arena, sizeof *r);
    if (r) querier__v1__select_heatmap_response__init(r);
    if (rc == 0 && (!r || !(r->series = arena_alloc(c->arena, (h.g.n + 1) * sizeof *r->series)))) rc = -1, oom(c);
    for (size_t g = 0; rc == 0 && g < h.g.n; g++) {
        if (!h.s[g].n) continue; /* a group with no profile in the range */
        if (!(r->series[r->n_series++] = heatmap_series_msg(c, &h, g, q->group_by, q->n_group_by))) rc = -1, oom(c);
    }
    heatmap_destroy(&h);
    return rc ? NULL : &r->base;
}

/* ---- Diff, GetProfileStats ---- */

/* Merges one side of a Diff and builds its call tree. 0 or -1 (c->err set). */
static int diff_side(qctx_t *c, const Querier__V1__SelectMergeStacktracesRequest *q, merge_result_t *m, tree_t *t) {
    merge_opts_t o;
    int64_t from, until;
    if (!max_nodes_ok(c, q->max_nodes)) return -1;
    if (stacktraces_options(c, q, &o)) return -1;
    if (run_merge(c, q->profile_typeid, q->label_selector, q->start, q->end, 0, WANT_TREE, o.call_site, &o.only, m,
                  &from, &until))
        return -1;
    return tree_build(t, m, &c->err);
}

static ProtobufCMessage *diff(qctx_t *c, const ProtobufCMessage *in) {
    const Querier__V1__DiffRequest *q = (const void *)in;
    if (!q->left || !q->right) return fail(c, 400, "`left` and `right` are both required");
    merge_result_t m[2] = {0};
    tree_t t[2] = {0};
    flamebearer_t fb = {0};
    Querier__V1__DiffResponse *r = NULL;
    Querier__V1__FlameGraphDiff *g = NULL;
    int rc = diff_side(c, q->left, &m[0], &t[0]) || diff_side(c, q->right, &m[1], &t[1]) ? -1 : 0;
    if (rc == 0 && strcmp(m[0].type_id, m[1].type_id))
        rc = -1, fail(c, 400, "`left` and `right` must be of one profile type");
    /* the larger side's maxNodes, as Pyroscope's query frontend takes it */
    int64_t want = q->left->max_nodes > q->right->max_nodes ? q->left->max_nodes : q->right->max_nodes;
    size_t max = want ? (size_t)want : RENDER_DEFAULT_MAX_NODES;
    if (rc == 0 && (diffbearer_build(&t[0], &t[1], max, &fb) || !(r = arena_alloc(c->arena, sizeof *r)) ||
                    !(g = arena_alloc(c->arena, sizeof *g))))
        rc = -1, oom(c);
    if (rc == 0) {
        querier__v1__diff_response__init(r);
        querier__v1__flame_graph_diff__init(g);
        if (bearer_arrays(c, &fb, &g->names, &g->n_names, &g->levels, &g->n_levels)) rc = -1, oom(c);
        g->total = fb.total, g->max_self = fb.max_self;
        g->leftticks = t[0].n[0].total, g->rightticks = t[1].n[0].total;
        r->flamegraph = g;
    }
    flamebearer_destroy(&fb);
    for (int i = 0; i < 2; i++) tree_destroy(&t[i]), merge_result_destroy(&m[i]);
    return rc ? NULL : &r->base;
}

/* Whether the tenant has data, and its oldest and newest profile (Grafana's Profiles
 * Drilldown asks before it shows anything). */
static ProtobufCMessage *get_profile_stats(qctx_t *c, const ProtobufCMessage *in) {
    (void)in;
    Querier__V1__GetProfileStatsResponse *r = arena_alloc(c->arena, sizeof *r);
    if (!r) return oom(c);
    querier__v1__get_profile_stats_response__init(r);
    int64_t oldest, newest;
    if (store_time_range(c->a->store, c->tenant, &oldest, &newest)) {
        r->data_ingested = 1;
        r->oldest_profile_time = oldest / MS, r->newest_profile_time = newest / MS;
    }
    return &r->base;
}

/* ---- SelectMergeSpanProfile ---- */

/* The merge of the samples that carried one of span_selector's span ids: what
 * Grafana's trace view links to. Span ids are 16 hex digits, as OpenTelemetry and
 * the pyroscope-go span labels write them. */
static ProtobufCMessage *select_merge_span_profile(qctx_t *c, const ProtobufCMessage *in) {
    const Querier__V1__SelectMergeSpanProfileRequest *q = (const void *)in;
    if (!q->n_span_selector) return fail(c, 400, "`spanSelector` is empty: give one or more span ids");
    merge_only_t only = {0};
    if (span_selector(c, q->span_selector, q->n_span_selector, &only)) return NULL;
    fg_query_t f = {q->profile_typeid, q->label_selector, q->start, q->end, q->max_nodes, q->format, NULL, &only};
    return merged_flamegraph(c, &f);
}

/* ---- AnalyzeQuery ---- */

static Querier__V1__QueryScope *scope_msg(qctx_t *c, const char *type, uint64_t blocks, uint64_t series,
                                          uint64_t profiles, uint64_t samples, uint64_t bytes) {
    Querier__V1__QueryScope *q = arena_alloc(c->arena, sizeof *q);
    if (!q) return NULL;
    querier__v1__query_scope__init(q);
    q->component_type = (char *)type; /* static; the arena's message only borrows it */
    q->component_count = 1, q->block_count = blocks, q->series_count = series;
    q->profile_count = profiles, q->sample_count = samples, q->profile_bytes = bytes;
    return q;
}

/* What the query would read, as Pyroscope reports it to Profiles Drilldown: the heads
 * as its short term storage, the blocks as its long term storage (counts and bytes
 * from the block footers: nothing is decoded), and the series the selector selects in
 * the range. One node answers, with nothing stored twice: no deduplication. */
static ProtobufCMessage *analyze_query(qctx_t *c, const ProtobufCMessage *in) {
    const Querier__V1__AnalyzeQueryRequest *q = (const void *)in;
    int64_t from, until;
    selector_t sel = {0};
    if (ms_range(c, q->start, q->end, HOUR_NS, &from, &until)) return NULL;
    if (q->query && *q->query && selector_parse(q->query, &sel, &c->err)) return selector_destroy(&sel), NULL;
    catalog_query_t cq = {c->tenant, q->query && *q->query ? &sel : NULL, 1, from, until, c->deadline_ns};
    uint32_t nbits = 0;
    uint8_t *bits = catalog_resolve_type(c->a->store, &cq, &sel, 0, &c->err)
                        ? NULL
                        : catalog_select(c->a->store, &cq, &nbits, &c->err);
    selector_destroy(&sel);
    if (!bits) return NULL;
    uint64_t nseries = 0;
    for (uint32_t i = 0; i < nbits; i++) nseries += bits[i] != 0;
    store_filter_t f = {.from = from, .until = until, .series = bits, .nseries = nbits};
    store_analysis_t an;
    int rc = store_analyze(c->a->store, c->tenant, &f, &an, &c->err);
    free(bits);
    if (rc) return NULL;
    Querier__V1__AnalyzeQueryResponse *r = arena_alloc(c->arena, sizeof *r);
    Querier__V1__QueryImpact *im = arena_alloc(c->arena, sizeof *im);
    Querier__V1__QueryScope **scopes = arena_alloc(c->arena, 2 * sizeof *scopes);
    if (!r || !im || !scopes) return oom(c);
    querier__v1__analyze_query_response__init(r);
    querier__v1__query_impact__init(im);
    scopes[0] = scope_msg(c, "Short term storage", 0, nseries, an.head_profiles, an.head_samples, an.head_bytes);
    scopes[1] =
        scope_msg(c, "Long term storage", an.blocks, nseries, an.block_profiles, an.block_samples, an.block_bytes);
    if (!scopes[0] || !scopes[1]) return oom(c);
    im->total_bytes_in_time_range = an.head_bytes + an.block_bytes;
    im->total_queried_series = nseries;
    r->query_scopes = scopes, r->n_query_scopes = 2, r->query_impact = im;
    return &r->base;
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
    {"Diff", &querier__v1__diff_request__descriptor, diff},
    {"GetProfileStats", &querier__v1__get_profile_stats_request__descriptor, get_profile_stats},
    {"SelectHeatmap", &querier__v1__select_heatmap_request__descriptor, select_heatmap},
    {"AnalyzeQuery", &querier__v1__analyze_query_request__descriptor, analyze_query},
};

void api_querier(app_t *a, http_req_t *req, http_resp_t *resp) {
    connect_codec_t codec;
    long i = connect_method(req, QUERIER_PREFIX, "querier.v1.QuerierService", METHODS, sizeof METHODS / sizeof *METHODS,
                            sizeof *METHODS, &codec, resp);
    if (i < 0) return;
    int64_t t0 = time_now_ns();
    qctx_t c = {a, req, req->tenant, arena_new(), app_query_deadline(a, req), {&a->query_budget, 0}, {0}, 0};
    if (!c.arena) return connect_error(resp, 500, "out of memory");
    const ProtobufCMessage *in = connect_read(req, codec, METHODS[i].in, a->cfg.max_body_bytes, 1, c.arena, resp);
    if (in) {
        ProtobufCMessage *out = METHODS[i].fn(&c, in);
        if (out) connect_reply(resp, codec, out);
        else
            connect_error(resp, c.status ? c.status : hr_http_status(c.err.code ? c.err.code : HR_ENOMEM),
                          c.err.code ? c.err.msg : "out of memory");
        metrics_query(&a->metrics, (double)(time_now_ns() - t0) / 1e9, out == NULL);
    }
    budget_hold_release(&c.mem);
    arena_free(c.arena);
}
