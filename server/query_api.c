/* query_api.c - the read endpoints: the /api/v1 family and Pyroscope-compatible routes.
 *
 * Every handler parses its parameters (errors are 400 with a message naming the
 * parameter), runs the query against the store and encodes the answer: merges are
 * rendered by the renderer table's row for the format asked (query_render,
 * query/render.h). Times default to the last hour for merges and to "all time" for
 * discovery endpoints. */
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/timeparse.h"
#include "query/catalog.h"
#include "query/fleet.h"
#include "query/merge.h"
#include "query/render.h"
#include "server/app.h"
#include "common/fsutil.h"
#include "symbolize/debuginfo.h"

#define HOUR_NS (3600LL * 1000000000)

typedef struct {
    int64_t from, until;
    int ranged; /* from or until was given */
} range_t;

static int parse_range(http_req_t *req, const char *fk, const char *uk, int64_t def_span, range_t *r,
                       http_resp_t *resp) {
    int64_t now = time_now_ns();
    const char *f = http_arg(req, fk), *u = http_arg(req, uk);
    r->ranged = (f && *f) || (u && *u);
    r->until = now;
    r->from = def_span ? now - def_span : 0;
    if (u && *u && time_parse(u, now, &r->until))
        return http_error(resp, 400, "bad `%s` time `%s`: use unix seconds/ms/ns, RFC 3339 or now-1h", uk, u), -1;
    if (f && *f && time_parse(f, now, &r->from))
        return http_error(resp, 400, "bad `%s` time `%s`: use unix seconds/ms/ns, RFC 3339 or now-1h", fk, f), -1;
    if (r->until < r->from) return http_error(resp, 400, "`%s` is before `%s`", uk, fk), -1;
    return 0;
}

/* Parses the selector in parameter key and settles its profile type from what the
 * tenant stores (catalog_resolve_type: `app.cpu` is the type the app has; with
 * need_type a selector without a type is a 400 listing the types). */
static int parse_selector(app_t *a, http_req_t *req, const char *key, int need_type, selector_t *sel,
                          http_resp_t *resp) {
    const char *q = http_arg(req, key);
    hr_err_t err = {0};
    memset(sel, 0, sizeof *sel); /* callers destroy it on every path */
    if (need_type && (!q || !*q))
        return http_error(resp, 400,
                          "missing `%s`, e.g. %s=process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name=\"api\"}"
                          " or %s=api.cpu",
                          key, key, key),
               -1;
    catalog_query_t cq = {req->tenant, sel, 0, 0, 0, app_query_deadline(a, req)};
    if (selector_parse(q, sel, &err) || catalog_resolve_type(a->store, &cq, sel, need_type, &err))
        return http_error_from(resp, &err), -1;
    return 0;
}

static long long num_arg(http_req_t *req, const char *key, long long def) {
    const char *v = http_arg(req, key);
    if (!v || !*v) return def;
    char *end;
    long long n = strtoll(v, &end, 10);
    return *end || n < 0 ? -1 : n;
}

/* Pyroscope's timeline step: range/1500, at least 15 s, whole seconds. */
static int64_t auto_step(const range_t *r) {
    int64_t s = (r->until - r->from) / 1500;
    if (s < 15000000000LL) s = 15000000000LL;
    return s / 1000000000 * 1000000000;
}

static void reply_buf(http_resp_t *resp, const char *ctype, buf_t *b) {
    if (b->oom) {
        buf_free(b);
        return http_error(resp, 500, "out of memory rendering the response");
    }
    http_reply(resp, 200, ctype, b);
}

/* pprof's stack filters, from the `focus`, `ignore` and `hide` parameters
 * (query/stackfilter.h): regexes in RE2 syntax, searched in frame names. */
typedef struct {
    hr_regex_t *re[3];
    stackfilter_t f;
} filter_args_t;

static int parse_filter(http_req_t *req, filter_args_t *fa, http_resp_t *resp) {
    static const char *const KEYS[3] = {"focus", "ignore", "hide"};
    memset(fa, 0, sizeof *fa);
    for (int i = 0; i < 3; i++) {
        const char *v = http_arg(req, KEYS[i]);
        hr_err_t err = {0};
        if (v && *v && !(fa->re[i] = hr_regex_compile(v, &err))) {
            if (err.code == HR_ENOMEM) return http_error_from(resp, &err), -1;
            return http_error(resp, 400, "bad `%s` regex `%s`: %s", KEYS[i], v, err.msg), -1;
        }
    }
    fa->f = (stackfilter_t){fa->re[0], fa->re[1], fa->re[2]};
    return 0;
}

static void filter_destroy(filter_args_t *fa) {
    for (int i = 0; i < 3; i++) hr_regex_free(fa->re[i]);
}

/* The labels to group timelines by: `group_by` (comma-separated), or Pyroscope's
 * `groupBy` (only its first label, as Pyroscope uses only the first). */
typedef struct {
    char *copy;
    char *names[GROUPBY_MAX_LABELS];
    size_t n;
} group_args_t;

static int parse_group_by(http_req_t *req, group_args_t *g, http_resp_t *resp) {
    memset(g, 0, sizeof *g);
    const char *v = http_arg(req, "group_by"), *py = http_arg(req, "groupBy");
    if ((!v || !*v) && py && *py) v = py;
    if (!v || !*v) return 0;
    if (!(g->copy = strdup(v))) return http_error(resp, 500, "out of memory"), -1;
    for (char *save = NULL, *t = strtok_r(g->copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (g->n == GROUPBY_MAX_LABELS)
            return http_error(resp, 400, "`group_by` takes at most %d labels", GROUPBY_MAX_LABELS), -1;
        if (g->n == 0 || v != py) g->names[g->n++] = t;
    }
    return 0;
}

/* Runs q once per group of g's labels into *out (limit 0: every group); args->groups
 * points at it. 0 or -1 (err). */
static int run_groups(app_t *a, const merge_query_t *q, selector_t *sel, const group_args_t *g, size_t limit,
                      grouped_t *out, render_args_t *args, hr_err_t *err) {
    memset(out, 0, sizeof *out);
    if (!g->n) return 0;
    args->groups = out;
    return groupby_run(a->store, q, sel, g->names, g->n, limit, out, err);
}

/* The merge renderer rd needs: stacks and a timeline of step as its row says. */
static merge_query_t merge_for(const renderer_t *rd, app_t *a, http_req_t *req, const selector_t *sel, const range_t *r,
                               int64_t step, const merge_only_t *only, const filter_args_t *fa, budget_hold_t *mem) {
    return (merge_query_t){.tenant = req->tenant,
                           .sel = sel,
                           .from = r->from,
                           .until = r->until,
                           .step = rd->needs & RENDER_TIMELINE ? step : 0,
                           .want_stacks = (rd->needs & RENDER_STACKS) != 0,
                           .only = only,
                           .deadline_ns = app_query_deadline(a, req),
                           .filter = &fa->f,
                           .symbolizer = a->symbolizer,
                           .functions = (rd->needs & RENDER_FUNCTIONS) != 0,
                           .tree = (rd->needs & RENDER_TREE) != 0,
                           .mem = mem};
}

/* Says in a header when the deadline left frames unsymbolized (symbolizer.h): the
 * answer is complete in values, partial in names. */
static void note_symbolization(http_resp_t *resp, const merge_result_t *m) {
    if (m->symbolized.late)
        snprintf(resp->symbolization, sizeof resp->symbolization, "partial; late=%zu", m->symbolized.late);
}

/* Replies with what query_render wrote into out (rc 0), or with the error that stopped
 * the merge or the render. */
static void reply_render(http_resp_t *resp, const renderer_t *rd, int rc, const hr_err_t *err, buf_t *out) {
    if (rc) {
        buf_free(out);
        return http_error_from(resp, err);
    }
    resp->content_disposition = rd->disposition;
    reply_buf(resp, rd->content_type, out);
}

/* 0 when max_nodes is one a query may ask for; else -1 with a 400 in resp. */
static int check_max_nodes(const app_t *a, long long max_nodes, http_resp_t *resp) {
    if (max_nodes < 0) return http_error(resp, 400, "`max_nodes` must be a non-negative integer"), -1;
    if (a->cfg.max_nodes_limit && (unsigned long long)max_nodes > a->cfg.max_nodes_limit)
        return http_error(resp, 400, "`max_nodes` %lld is over --max-nodes-limit %zu", max_nodes,
                          a->cfg.max_nodes_limit),
               -1;
    return 0;
}

/* format=top&group_by=...: the fleet function table (query/fleet.h). */
static void run_fleet(app_t *a, http_req_t *req, http_resp_t *resp, const renderer_t *rd, selector_t *sel,
                      const range_t *r, const filter_args_t *fa, const group_args_t *ga) {
    int64_t t0 = time_now_ns();
    long long limit = num_arg(req, "limit", 0);
    budget_hold_t hold = {&a->query_budget, 0};
    merge_query_t q = merge_for(rd, a, req, sel, r, 0, NULL, fa, &hold);
    fleet_t f;
    hr_err_t err = {0};
    buf_t out;
    buf_init(&out);
    int rc = fleet_run(a->store, &q, sel, ga->names, ga->n, &f, &err);
    if (rc == 0 && fleet_render(&f, limit > 0 ? (size_t)limit : 0, &out))
        rc = hr_fail(&err, HR_ENOMEM, "out of memory");
    fleet_destroy(&f);
    metrics_query(&a->metrics, (double)(time_now_ns() - t0) / 1e9, rc != 0);
    reply_render(resp, rd, rc, &err, &out);
    budget_hold_release(&hold);
}

/* Merges the selection and renders it in the format named `format` into resp. */
#define SOURCE_MAX (4u << 20) /* bytes of a source file the source view shows */

typedef struct {
    app_t *a;
    int64_t deadline_ns;
} source_ctx_t;

/* dir/path (path's leading '/' kept as a folder), else dir/basename(path), read when
 * it resolves inside dir (no `..`, no symlink out of it). 0 or -1. */
static int read_under(const char *dir, const char *path, buf_t *out) {
    char root[PATH_MAX], full[PATH_MAX * 2], real[PATH_MAX];
    if (!realpath(dir, root) || strstr(path, "..")) return -1;
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    const char *tries[2] = {path, base};
    for (int i = 0; i < 2; i++) {
        snprintf(full, sizeof full, "%s/%s", root, tries[i][0] == '/' ? tries[i] + 1 : tries[i]);
        size_t n = strlen(root);
        if (!realpath(full, real) || strncmp(real, root, n) || (real[n] && real[n] != '/')) continue;
        uint8_t *data = NULL;
        size_t len = 0;
        hr_err_t err = {0};
        if (fs_read_file(real, SOURCE_MAX, &data, &len, &err)) continue;
        buf_append(out, data, len);
        free(data);
        return out->oom ? -1 : 0;
    }
    return -1;
}

/* A source file for format=source: the sources archive uploaded for the build ID (the
 * very sources it was built from), --source-dir, then the debuginfod servers. */
static const char *fetch_source(void *ctx, const char *build_id, const char *path, buf_t *out, char *why, size_t cap) {
    const source_ctx_t *c = ctx;
    if (c->a->debuginfo && *build_id &&
        debuginfo_find_uploaded_source(c->a->debuginfo, build_id, path, SOURCE_MAX, c->deadline_ns, out) == 0)
        return "upload";
    out->len = 0;
    if (c->a->cfg.source_dir[0] && read_under(c->a->cfg.source_dir, path, out) == 0) return "source-dir";
    out->len = 0;
    if (c->a->debuginfo && *build_id &&
        debuginfo_find_source(c->a->debuginfo, build_id, path, SOURCE_MAX, c->deadline_ns, out) == 0)
        return "debuginfod";
    out->len = 0;
    snprintf(why, cap,
             "%s not found in an uploaded sources archive, --source-dir or on a debuginfod server (build ID %s)", path,
             *build_id ? build_id : "unknown");
    return NULL;
}

static void run_merge(app_t *a, http_req_t *req, http_resp_t *resp, selector_t *sel, const range_t *r,
                      const char *format, long long max_nodes, const merge_only_t *only) {
    if (check_max_nodes(a, max_nodes, resp)) return;
    if (!max_nodes) max_nodes = (long long)a->cfg.max_nodes_limit; /* "all": as many as any query gets */
    const renderer_t *rd = render_find(format, RENDER_MERGE);
    if (!rd) {
        buf_t names;
        buf_init(&names);
        render_names(RENDER_MERGE, &names);
        buf_putc(&names, 0);
        http_error(resp, 400, "unknown format `%s`: use %s", format, names.oom ? "?" : (char *)names.data);
        return buf_free(&names);
    }
    int64_t t0 = time_now_ns();
    long long limit = num_arg(req, "limit", 0);
    filter_args_t fa = {0};
    group_args_t ga = {0};
    if (parse_filter(req, &fa, resp) || parse_group_by(req, &ga, resp)) {
        free(ga.copy);
        return filter_destroy(&fa);
    }
    if (ga.n && (rd->needs & RENDER_FUNCTIONS)) { /* the fleet function table */
        run_fleet(a, req, resp, rd, sel, r, &fa, &ga);
        free(ga.copy);
        return filter_destroy(&fa);
    }
    if (ga.n && !(rd->needs & RENDER_TIMELINE)) { /* refused, never ignored */
        http_error(resp, 400, "`group_by` needs a format with a timeline (flamegraph) or format=top, not `%s`", format);
        free(ga.copy);
        return filter_destroy(&fa);
    }
    budget_hold_t hold = {&a->query_budget, 0}; /* released once the answer is written */
    merge_query_t q = merge_for(rd, a, req, sel, r, auto_step(r), only, &fa, &hold);
    merge_result_t m;
    source_ctx_t sctx = {a, app_query_deadline(a, req)};
    source_fetch_t source = {fetch_source, &sctx};
    render_args_t args = {.m = &m,
                          .max_nodes = (size_t)max_nodes,
                          .limit = limit > 0 ? (size_t)limit : 0,
                          .function = http_arg(req, "function"),
                          .source = &source};
    hr_err_t err = {0};
    buf_t out;
    buf_init(&out);
    grouped_t groups;
    app_remote_t remote;
    if (app_remote_begin(a, req, http_arg(req, "query"), r->from, r->until, &remote)) q.remote = &remote.rm;
    int rc = merge_run(a->store, &q, &m, &err);
    app_remote_end(&remote, rc == 0 ? &m : NULL);
    q.remote = NULL;
    if (rc == 0) rc = run_groups(a, &q, sel, &ga, 0, &groups, &args, &err);
    else memset(&groups, 0, sizeof groups);
    if (rc == 0) rc = query_render(rd, &args, &out, &err);
    note_symbolization(resp, &m);
    merge_result_destroy(&m);
    grouped_destroy(&groups);
    filter_destroy(&fa);
    free(ga.copy);
    metrics_query(&a->metrics, (double)(time_now_ns() - t0) / 1e9, rc != 0);
    reply_render(resp, rd, rc, &err, &out);
    budget_hold_release(&hold);
}

/* `profile=SERIES-TIME_NS` names one stored profile, as /api/v1/profiles lists it;
 * it replaces the time range. Returns 0, 1 (not given) or -1 (resp set). */
static int parse_profile_id(http_req_t *req, profile_ref_t *ref, range_t *r, http_resp_t *resp) {
    const char *v = http_arg(req, "profile");
    if (!v || !*v) return 1;
    if (profile_ref_parse(v, ref))
        return http_error(resp, 400, "bad `profile` id `%s`: use an id from /api/v1/profiles (SERIES-TIME_NS)", v), -1;
    r->from = r->until = ref->time_ns;
    return 0;
}

void api_query(app_t *a, http_req_t *req, http_resp_t *resp) {
    selector_t sel;
    range_t r;
    profile_ref_t ref;
    merge_only_t one = {&ref, 1, NULL, 0, NULL, 0};
    int pid = 1;
    const char *format = http_arg(req, "format");
    long long max_nodes = num_arg(req, "max_nodes", RENDER_DEFAULT_MAX_NODES);
    if (max_nodes < 0) return http_error(resp, 400, "`max_nodes` must be a non-negative integer");
    /* Refused here, before the merge, as /api/v1/profiles refuses it: never read as "all". */
    if (num_arg(req, "limit", 0) < 0)
        return http_error(resp, 400, "`limit` must be a non-negative integer (0 = all rows)");
    if (parse_selector(a, req, "query", 1, &sel, resp) == 0 &&
        parse_range(req, "from", "until", HOUR_NS, &r, resp) == 0 && (pid = parse_profile_id(req, &ref, &r, resp)) >= 0)
        run_merge(a, req, resp, &sel, &r, format && *format ? format : "flamegraph", max_nodes, pid ? NULL : &one);
    selector_destroy(&sel);
}

/* ---- diff: two merges in one "double" flame graph ---- */

typedef struct {
    const char *query, *from, *until; /* parameter names of one side */
} side_keys_t;

typedef struct {
    selector_t sel;
    range_t r;
    merge_result_t m;
} side_t;

/* Parses and merges one side for renderer rd; 0 or -1 (resp set). A missing query
 * falls back to the other side's (fallback), so "same selection, two ranges" needs
 * one query. */
static int run_side(app_t *a, http_req_t *req, http_resp_t *resp, const renderer_t *rd, const side_keys_t *k,
                    const char *fallback, const filter_args_t *fa, budget_hold_t *mem, side_t *s) {
    hr_err_t err = {0};
    const char *q = http_arg(req, k->query);
    if ((!q || !*q) && fallback && *fallback) q = fallback;
    if (!q || !*q) return http_error(resp, 400, "missing `%s`", k->query), -1;
    catalog_query_t cq = {req->tenant, &s->sel, 0, 0, 0, app_query_deadline(a, req)};
    if (selector_parse(q, &s->sel, &err) || catalog_resolve_type(a->store, &cq, &s->sel, 1, &err))
        return http_error_from(resp, &err), -1;
    if (parse_range(req, k->from, k->until, HOUR_NS, &s->r, resp)) return -1;
    merge_query_t mq = merge_for(rd, a, req, &s->sel, &s->r, 0, NULL, fa, mem);
    if (merge_run(a->store, &mq, &s->m, &err)) return http_error_from(resp, &err), -1;
    return 0;
}

static void run_diff(app_t *a, http_req_t *req, http_resp_t *resp, const side_keys_t *lk, const side_keys_t *rk,
                     const char *shared_query, long long max_nodes) {
    const renderer_t *rd = render_find("diff", RENDER_DIFF);
    int64_t t0 = time_now_ns();
    side_t l = {0}, r = {0};
    const char *lq = http_arg(req, lk->query);
    if (!lq || !*lq) lq = shared_query;
    int rc = -1;
    filter_args_t fa;                                              /* both sides, as pprof -diff_base filters both */
    budget_hold_t hold = {&a->query_budget, 0};                    /* both sides' merges */
    if (!max_nodes) max_nodes = (long long)a->cfg.max_nodes_limit; /* "all", as run_merge takes it */
    if (check_max_nodes(a, max_nodes, resp)) {
        max_nodes = -1; /* nothing parsed to destroy */
    } else if (parse_filter(req, &fa, resp) == 0 && run_side(a, req, resp, rd, lk, shared_query, &fa, &hold, &l) == 0 &&
               run_side(a, req, resp, rd, rk, lq, &fa, &hold, &r) == 0) {
        render_args_t args = {.m = &l.m, .right = &r.m, .max_nodes = (size_t)max_nodes};
        hr_err_t err = {0};
        buf_t out;
        buf_init(&out);
        rc = query_render(rd, &args, &out, &err);
        reply_render(resp, rd, rc, &err, &out);
    }
    side_t *sides[2] = {&l, &r};
    for (int i = 0; i < 2; i++) {
        merge_result_destroy(&sides[i]->m);
        selector_destroy(&sides[i]->sel);
    }
    if (max_nodes >= 0) filter_destroy(&fa);
    budget_hold_release(&hold);
    metrics_query(&a->metrics, (double)(time_now_ns() - t0) / 1e9, rc != 0);
}

void api_diff(app_t *a, http_req_t *req, http_resp_t *resp) {
    side_keys_t l = {"left_query", "left_from", "left_until"}, r = {"right_query", "right_from", "right_until"};
    run_diff(a, req, resp, &l, &r, http_arg(req, "query"), num_arg(req, "max_nodes", RENDER_DEFAULT_MAX_NODES));
}

void api_pyroscope_render_diff(app_t *a, http_req_t *req, http_resp_t *resp) {
    side_keys_t l = {"leftQuery", "leftFrom", "leftUntil"}, r = {"rightQuery", "rightFrom", "rightUntil"};
    run_diff(a, req, resp, &l, &r, NULL, num_arg(req, "maxNodes", num_arg(req, "max-nodes", RENDER_DEFAULT_MAX_NODES)));
}

void api_pyroscope_render(app_t *a, http_req_t *req, http_resp_t *resp) {
    selector_t sel;
    range_t r;
    const char *format = http_arg(req, "format");
    if (format && strcmp(format, "json"))
        return http_error(resp, 400, "format `%s` is not supported (use json)", format);
    long long max_nodes = num_arg(req, "maxNodes", num_arg(req, "max-nodes", RENDER_DEFAULT_MAX_NODES));
    if (max_nodes < 0) return http_error(resp, 400, "`maxNodes` must be a non-negative integer");
    /* Pyroscope 0.x clients (Grafana's old plugin) send the application as `name`. */
    const char *q = http_arg(req, "query");
    if (parse_selector(a, req, q && *q ? "query" : "name", 1, &sel, resp) == 0 &&
        parse_range(req, "from", "until", HOUR_NS, &r, resp) == 0)
        run_merge(a, req, resp, &sel, &r, "flamegraph", max_nodes, 0);
    selector_destroy(&sel);
}

void api_timeseries(app_t *a, http_req_t *req, http_resp_t *resp) {
    selector_t sel;
    range_t r;
    if (parse_selector(a, req, "query", 1, &sel, resp) || parse_range(req, "from", "until", HOUR_NS, &r, resp)) {
        selector_destroy(&sel);
        return;
    }
    int64_t step = auto_step(&r);
    const char *sv = http_arg(req, "step");
    if (sv && *sv) {
        char *end;
        double secs = strtod(sv, &end);
        if (*end ? duration_parse(sv, &step) : (step = (int64_t)(secs * 1e9), secs <= 0)) {
            selector_destroy(&sel);
            return http_error(resp, 400, "bad `step` `%s`: use seconds or a duration like 10s, 1m", sv);
        }
        if (step < 1000000) step = 1000000;
    }
    const renderer_t *rd = render_find("timeseries", RENDER_TOTALS);
    int64_t t0 = time_now_ns();
    filter_args_t fa = {0};
    group_args_t ga = {0};
    long long limit = num_arg(req, "limit", 10);
    if (limit < 0) http_error(resp, 400, "`limit` must be a non-negative integer (0 = every group)");
    if (limit < 0 || parse_filter(req, &fa, resp) || parse_group_by(req, &ga, resp)) {
        filter_destroy(&fa);
        free(ga.copy);
        return selector_destroy(&sel);
    }
    budget_hold_t hold = {&a->query_budget, 0};
    merge_query_t q = merge_for(rd, a, req, &sel, &r, step, NULL, &fa, &hold);
    merge_result_t m;
    render_args_t args = {.m = &m};
    hr_err_t err = {0};
    buf_t out;
    buf_init(&out);
    grouped_t groups;
    int rc = merge_run(a->store, &q, &m, &err);
    if (rc == 0) rc = run_groups(a, &q, &sel, &ga, (size_t)limit, &groups, &args, &err);
    else memset(&groups, 0, sizeof groups);
    if (rc == 0) rc = query_render(rd, &args, &out, &err);
    merge_result_destroy(&m);
    grouped_destroy(&groups);
    filter_destroy(&fa);
    free(ga.copy);
    selector_destroy(&sel);
    metrics_query(&a->metrics, (double)(time_now_ns() - t0) / 1e9, rc != 0);
    reply_render(resp, rd, rc, &err, &out);
    budget_hold_release(&hold);
}

static void reply_json(http_resp_t *resp, json_t *doc) {
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    if (!text) return http_error(resp, 500, "out of memory");
    http_reply_text(resp, 200, "application/json", text);
    free(text);
}

static void add_series(void *ctx, const series_t *s) {
    json_t *labels = json_object();
    for (size_t i = 0; i < s->labels.n; i++)
        json_object_set_new(labels, s->labels.v[i].name, json_string(s->labels.v[i].value));
    json_array_append_new(ctx, json_pack("{s:s,s:o}", "profileType", s->profile_type, "labels", labels));
}

/* Parses the common discovery parameters into q (which points into sel); returns 0
 * or -1 (resp set). Discovery runs under --query-timeout as merges do. */
static int discovery_args(app_t *a, http_req_t *req, selector_t *sel, catalog_query_t *q, http_resp_t *resp) {
    range_t r;
    if (parse_selector(a, req, "query", 0, sel, resp)) return -1;
    if (parse_range(req, "from", "until", 0, &r, resp)) return -1;
    *q = (catalog_query_t){req->tenant, sel, r.ranged, r.from, r.until, app_query_deadline(a, req)};
    return 0;
}

void api_series(app_t *a, http_req_t *req, http_resp_t *resp) {
    selector_t sel;
    catalog_query_t q;
    if (discovery_args(a, req, &sel, &q, resp) == 0) {
        json_t *arr = json_array();
        hr_err_t err = {0};
        if (catalog_series(a->store, &q, add_series, arr, &err)) {
            json_decref(arr);
            http_error_from(resp, &err);
        } else {
            reply_json(resp, json_pack("{s:o}", "series", arr));
        }
    }
    selector_destroy(&sel);
}

static int cmp_str_ptr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A JSON array of the object's keys, sorted. */
static json_t *sorted_keys(json_t *obj) {
    const char **names = malloc((json_object_size(obj) + 1) * sizeof *names);
    json_t *arr = json_array();
    if (!names) return arr;
    size_t n = 0;
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v) names[n++] = k;
    qsort(names, n, sizeof *names, cmp_str_ptr);
    for (size_t i = 0; i < n; i++) json_array_append_new(arr, json_string(names[i]));
    free(names);
    return arr;
}

/* A sorted copy of a JSON array of strings. */
static json_t *sorted_strings(json_t *arr) {
    json_t *set = json_object();
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) json_object_set_new(set, json_string_value(v), json_true());
    json_t *out = sorted_keys(set);
    json_decref(set);
    return out;
}

static json_t *json_strings(const char *const *v, size_t n) {
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(arr, json_string(v[i]));
    return arr;
}

static json_t *json_types(const catalog_types_t *t) {
    json_t *arr = json_array();
    for (size_t i = 0; i < t->n; i++) {
        const ptype_parts_t *p = &t->v[i].parts;
        json_t *o =
            json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "id", t->v[i].id, "name", p->name, "sampleType", p->sample_type,
                      "sampleUnit", p->sample_unit, "periodType", p->period_type, "periodUnit", p->period_unit);
        json_array_append_new(arr, o);
    }
    return arr;
}

/* What a discovery route asks the catalog (query/catalog.h). */
typedef enum { ASK_LABEL_NAMES, ASK_LABEL_VALUES, ASK_APP_NAMES, ASK_PROFILE_TYPES } ask_t;

/* Asks the catalog over the request's discovery selection and encodes the sorted
 * answer as a JSON array (label: ASK_LABEL_VALUES' label); NULL (resp set) on error. */
static json_t *discover(app_t *a, http_req_t *req, http_resp_t *resp, ask_t ask, const char *label) {
    selector_t sel;
    catalog_query_t q;
    catalog_strings_t s = {0};
    catalog_types_t t = {0};
    hr_err_t err = {0};
    json_t *arr = NULL;
    if (discovery_args(a, req, &sel, &q, resp) == 0) {
        int rc = ask == ASK_LABEL_NAMES    ? catalog_label_names(a->store, &q, 1, 0, &s, &err)
                 : ask == ASK_LABEL_VALUES ? catalog_label_values(a->store, &q, 1, label, &s, &err)
                 : ask == ASK_APP_NAMES    ? catalog_app_names(a->store, &q, 1, &s, &err)
                                           : catalog_profile_types(a->store, &q, 1, &t, &err);
        if (rc) http_error_from(resp, &err);
        else arr = ask == ASK_PROFILE_TYPES ? json_types(&t) : json_strings(s.v, s.n);
    }
    free(s.v);
    free(t.v);
    selector_destroy(&sel);
    return arr;
}

void api_profile_types(app_t *a, http_req_t *req, http_resp_t *resp) {
    json_t *arr = discover(a, req, resp, ASK_PROFILE_TYPES, NULL);
    if (arr) reply_json(resp, json_pack("{s:o}", "profileTypes", arr));
}

void api_labels(app_t *a, http_req_t *req, http_resp_t *resp, const char *name) {
    if (name && !*name) return http_error(resp, 400, "missing label name in /api/v1/labels/NAME/values");
    json_t *arr = discover(a, req, resp, name ? ASK_LABEL_VALUES : ASK_LABEL_NAMES, name);
    if (arr) reply_json(resp, json_pack("{s:o}", name ? "values" : "names", arr));
}

void api_pyroscope_label_values(app_t *a, http_req_t *req, http_resp_t *resp) {
    const char *label = http_arg(req, "label");
    if (!label || !*label) return http_error(resp, 400, "missing `label` parameter");
    /* This is Pyroscope 0.x's route, and there __name__ listed applications, each a
     * name its /render takes back (`shop.cpu`); Grafana's old plugin offers them. */
    json_t *arr = discover(a, req, resp, strcmp(label, "__name__") ? ASK_LABEL_VALUES : ASK_APP_NAMES, label);
    if (arr) reply_json(resp, arr);
}

void api_pyroscope_labels(app_t *a, http_req_t *req, http_resp_t *resp) {
    json_t *arr = discover(a, req, resp, ASK_LABEL_NAMES, NULL);
    if (arr) reply_json(resp, arr);
}

/* ---- single profiles: the stored profiles of a selection, newest first; profiles of
 * one instant that differ in labels (one pprof upload split by its sample labels)
 * carry "splitBy", the labels that split them ---- */

static void add_labels_by_id(void *ctx, const series_t *s) {
    char id[16];
    json_t *labels = json_object();
    for (size_t i = 0; i < s->labels.n; i++)
        json_object_set_new(labels, s->labels.v[i].name, json_string(s->labels.v[i].value));
    snprintf(id, sizeof id, "%u", s->id);
    json_object_set_new(ctx, id, labels);
}

/* The labels in which the profiles p[b..e) (one instant) differ, sorted: an upload
 * whose pprof samples carry labels (endpoint, ...) is stored as one series per label
 * set, all at its time, and this names what split it. */
static json_t *split_by(const catalog_profile_t *p, size_t b, size_t e, json_t *labels) {
    json_t *names = json_object();
    for (size_t i = b; i < e; i++) {
        char sid[16];
        snprintf(sid, sizeof sid, "%u", p[i].series);
        const char *k;
        json_t *v, *mine = json_object_get(labels, sid);
        json_object_foreach(mine, k, v) json_object_set_new(names, k, json_true());
    }
    json_t *out = json_array();
    const char *k;
    json_t *v;
    json_object_foreach(names, k, v) {
        const char *first = NULL;
        int differ = 0;
        for (size_t i = b; i < e && !differ; i++) {
            char sid[16];
            snprintf(sid, sizeof sid, "%u", p[i].series);
            const char *val = json_string_value(json_object_get(json_object_get(labels, sid), k));
            if (!val) val = "";
            if (!first) first = val;
            else differ = strcmp(first, val) != 0;
        }
        if (differ) json_array_append_new(out, json_string(k));
    }
    json_decref(names);
    json_t *s = sorted_strings(out);
    json_decref(out);
    return s;
}

static json_t *profiles_json(const catalog_profile_t *p, size_t n, size_t shown, json_t *labels) {
    json_t *arr = json_array();
    for (size_t b = 0, e; b < shown; b = e) {
        for (e = b + 1; e < n && p[e].time_ns == p[b].time_ns;) e++; /* newest first: one instant is a run */
        json_t *split = e - b > 1 ? split_by(p, b, e, labels) : NULL;
        for (size_t i = b; i < e && i < shown; i++) {
            char id[PROFILE_REF_MAX], sid[16];
            profile_ref_format(p[i].series, p[i].time_ns, id);
            snprintf(sid, sizeof sid, "%u", p[i].series);
            json_t *l = json_object_get(labels, sid);
            json_t *row = json_pack("{s:s,s:I,s:I,s:O,s:I}", "id", id, "timestamp",
                                    (json_int_t)(p[i].time_ns / 1000000), "series", (json_int_t)p[i].series, "labels",
                                    l ? l : json_null(), "total", (json_int_t)p[i].total);
            if (split && json_array_size(split)) json_object_set(row, "splitBy", split);
            json_array_append_new(arr, row);
        }
        json_decref(split);
    }
    return arr;
}

void api_profiles(app_t *a, http_req_t *req, http_resp_t *resp) {
    selector_t sel;
    range_t r;
    long long limit = num_arg(req, "limit", 100);
    if (limit <= 0 || limit > 10000) return http_error(resp, 400, "`limit` must be 1..10000");
    if (parse_selector(a, req, "query", 1, &sel, resp) || parse_range(req, "from", "until", HOUR_NS, &r, resp))
        return selector_destroy(&sel);
    catalog_profile_t *p;
    size_t n;
    hr_err_t err = {0};
    json_t *labels = json_object();
    catalog_query_t q = {req->tenant, &sel, 0, r.from, r.until, app_query_deadline(a, req)};
    catalog_query_t all_time = {req->tenant, &sel, 0, 0, 0, q.deadline_ns};
    if (catalog_profiles(a->store, &q, &p, &n, &err) ||
        catalog_series(a->store, &all_time, add_labels_by_id, labels, &err)) {
        free(p); /* NULL when catalog_profiles failed; listed when the deadline passed after it */
        json_decref(labels);
        selector_destroy(&sel);
        return http_error_from(resp, &err);
    }
    size_t shown = n < (size_t)limit ? n : (size_t)limit;
    json_t *doc = json_pack("{s:o,s:I,s:b,s:s}", "profiles", profiles_json(p, n, shown, labels), "count", (json_int_t)n,
                            "truncated", n > shown, "profileType", sel.profile_type);
    free(p);
    json_decref(labels);
    selector_destroy(&sel);
    reply_json(resp, doc);
}
