/* routes.c - the route table: every path Hearth serves, what it needs, who handles it.
 *
 * One row per path (or path prefix) says which methods it takes, the role a
 * credential needs (none for health, metrics and the UI's static files), which
 * concurrency limiter it runs under and its handler. Admission (app_admit, called by
 * the HTTP layer with the headers only, before any body byte) is driven by the row:
 * tenant, authentication, role, the limiter's slot and, for rows that store profiles,
 * the end of WAL replay all come from it, so a path cannot be served without the
 * checks its row states; a body over the row's size limit is refused once it is in
 * (app_handle), before any handler runs. A path without a row is 404.
 * `hearth --print-routes` prints the table; the integration tests walk it. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "common/timeparse.h"
#include "common/vec.h"

#include "server/app.h"
#include "server/connect.h"
#include "server/rules.h"

static void health(app_t *a, http_req_t *req, http_resp_t *resp, int readiness) {
    (void)req;
    if (readiness && !atomic_load(&a->ready)) return http_error(resp, 503, "not ready: WAL replay in progress");
    http_reply_text(resp, 200, "text/plain; charset=utf-8", readiness ? "ready\n" : "ok\n");
}

/* Runs compaction until nothing is due (the background thread does the same), or
 * until the server is stopping: a store of many services takes minutes, and shutdown
 * must not wait for all of it (a run is atomic; the rest is done after the restart). */
static void compact(app_t *a, http_req_t *req, http_resp_t *resp) {
    (void)req;
    hr_err_t err = {0};
    int rc = 0, runs = 0;
    while (!atomic_load(&a->stopping) && (rc = store_compact(a->store, &err)) == 1) runs++;
    if (rc < 0) return http_error_from(resp, &err);
    buf_t b;
    buf_init(&b);
    buf_printf(&b, "{\"compactions\":%d}", runs);
    http_reply(resp, 200, "application/json", &b);
}

static void flush(app_t *a, http_req_t *req, http_resp_t *resp) {
    (void)req;
    hr_err_t err = {0};
    if (store_cut(a->store, &err)) return http_error_from(resp, &err);
    http_reply_text(resp, 200, "application/json", "{\"status\":\"flushed\"}");
}

/* Token bucket per tenant: refills at --ingest-rate-limit bytes/s up to two seconds'
 * worth, and takes `bytes` from it. With may_refuse, an empty bucket refuses (0) and
 * takes nothing; without, the bytes are taken whatever is left (a body already read).
 * Returns 1 if the request may proceed. */
static int rate_take(app_t *a, const char *tenant, size_t bytes, int may_refuse) {
    if (!a->cfg.ingest_rate_bytes) return 1;
    double rate = (double)a->cfg.ingest_rate_bytes, now = (double)time_now_ns() / 1e9;
    pthread_mutex_lock(&a->buckets_mu);
    struct rate_bucket *b = NULL;
    for (size_t i = 0; i < a->nbuckets && !b; i++)
        if (!strcmp(a->buckets[i].tenant, tenant)) b = &a->buckets[i];
    if (!b && VEC_RESERVE(a->buckets, a->buckets_cap, a->nbuckets + 1) == 0) {
        b = &a->buckets[a->nbuckets++];
        snprintf(b->tenant, sizeof b->tenant, "%s", tenant);
        b->tokens = 2 * rate;
        b->last_ns = time_now_ns();
    }
    int ok = 1;
    if (b) {
        double last = (double)b->last_ns / 1e9;
        b->tokens += (now - last) * rate;
        if (b->tokens > 2 * rate) b->tokens = 2 * rate;
        b->last_ns = time_now_ns();
        ok = !may_refuse || b->tokens > 0;
        if (ok) b->tokens -= (double)bytes;
    }
    pthread_mutex_unlock(&a->buckets_mu);
    return ok;
}

static void healthz(app_t *a, http_req_t *req, http_resp_t *resp) { health(a, req, resp, 0); }
static void ready(app_t *a, http_req_t *req, http_resp_t *resp) { health(a, req, resp, 1); }

static void metrics(app_t *a, http_req_t *req, http_resp_t *resp) {
    (void)req;
    buf_t b;
    buf_init(&b);
    http_server_t *http = atomic_load(&a->http);
    http_stats_t hs = http ? http_stats(http) : (http_stats_t){0};
    metrics_render(&a->metrics, a->store, http ? &hs : NULL, &b);
    scraper_t *sc = atomic_load(&a->scraper);
    if (sc) scraper_metrics(sc, &b);
    rules_metrics(a, &b);
    buf_printf(
        &b,
        "# HELP hearth_limiter_slots_in_use Requests holding a slot of a concurrency limiter "
        "(--max-concurrent-ingests, --max-concurrent-queries).\n"
        "# TYPE hearth_limiter_slots_in_use gauge\n"
        "hearth_limiter_slots_in_use{limiter=\"ingest\"} %d\nhearth_limiter_slots_in_use{limiter=\"query\"} %d\n",
        atomic_load(&a->ingests), atomic_load(&a->queries));
    http_reply(resp, 200, "text/plain; version=0.0.4", &b);
}

static void targets(app_t *a, http_req_t *req, http_resp_t *resp) {
    (void)req;
    buf_t b;
    buf_init(&b);
    scraper_t *sc = atomic_load(&a->scraper);
    if (sc) scraper_targets_json(sc, &b);
    else buf_printf(&b, "{\"targets\":[]}");
    http_reply(resp, 200, "application/json", &b);
}

/* /api/v1/labels/NAME/values */
static void label_values(app_t *a, http_req_t *req, http_resp_t *resp) {
    const char *rest = req->url + strlen("/api/v1/labels/"), *slash = strchr(rest, '/');
    if (!slash || strcmp(slash, "/values")) return http_error(resp, 404, "no such endpoint: %s", req->url);
    char name[256];
    size_t n = (size_t)(slash - rest);
    if (n >= sizeof name) return http_error(resp, 400, "label name too long");
    memcpy(name, rest, n);
    name[n] = 0;
    api_labels(a, req, resp, name);
}

static void labels(app_t *a, http_req_t *req, http_resp_t *resp) { api_labels(a, req, resp, NULL); }

typedef enum { M_GET = 1, M_POST = 2, M_PUT = 4, M_DELETE = 8 } method_t; /* M_GET admits HEAD too */
typedef enum { NEED_NONE = 0, NEED_READ = ROLE_READ, NEED_WRITE = ROLE_WRITE, NEED_ADMIN = ROLE_ADMIN } need_t;
typedef enum { LIM_NONE, LIM_INGEST, LIM_QUERY } limiter_t;
typedef enum { ERR_JSON, ERR_CONNECT } errfmt_t; /* refusals in Hearth's or Connect's error shape */
/* A row's last column: profiles it stores go through the WAL, so they wait for its replay. */
enum { STORES = 1 };

typedef struct route {
    const char *path;
    int prefix; /* path is a prefix of the URL, not the whole of it */
    unsigned methods;
    need_t need;
    size_t max_body; /* 0: --max-body-bytes; else a config_t offset of the row's own limit, for
                      * debug files, whose bodies are spooled to disk (http.h spool_dir) */
    limiter_t limiter;
    errfmt_t errfmt;
    void (*fn)(app_t *a, http_req_t *req, http_resp_t *resp);
    unsigned stores; /* STORES: refused (503) until WAL replay has ended */
} route_t;

/* First match wins; exact rows and prefixes do not overlap. */
static const route_t ROUTES[] = {
    /* Writes: agents and push clients. */
    {"/ingest", 0, M_POST, NEED_WRITE, 0, LIM_INGEST, ERR_JSON, api_ingest, STORES},
    {"/pyroscope/ingest", 0, M_POST, NEED_WRITE, 0, LIM_INGEST, ERR_JSON, api_ingest, STORES},
    {"/push.v1.PusherService/Push", 0, M_POST, NEED_WRITE, 0, LIM_INGEST, ERR_CONNECT, api_push, STORES},
    {"/api/profiles/writeraw", 0, M_POST, NEED_WRITE, 0, LIM_INGEST, ERR_JSON, api_parca_writeraw, STORES},
    {"/parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw", 0, M_POST, NEED_WRITE, 0, LIM_INGEST, ERR_CONNECT,
     api_parca_writeraw_rpc, STORES},
    {"/v1development/profiles", 0, M_POST, NEED_WRITE, 0, LIM_INGEST, ERR_JSON, api_otlp_profiles, STORES},
    {"/otlp/v1development/profiles", 0, M_POST, NEED_WRITE, 0, LIM_INGEST, ERR_JSON, api_otlp_profiles, STORES},
    /* Merges. */
    {QUERIER_PREFIX, 1, M_POST, NEED_READ, 0, LIM_QUERY, ERR_CONNECT, api_querier, 0},
    /* UI settings: whoever may read a tenant's profiles keeps its Drilldown settings. */
    {SETTINGS_PREFIX, 1, M_POST, NEED_READ, 0, LIM_NONE, ERR_CONNECT, api_settings, 0},
    /* Ad-hoc profiles: uploads kept apart from the tenant's services, for whoever reads it. */
    {ADHOC_PREFIX, 1, M_POST, NEED_READ, 0, LIM_QUERY, ERR_CONNECT, api_adhoc, 0},
    {RULES_PREFIX, 1, M_POST, NEED_READ, 0, LIM_NONE, ERR_CONNECT, api_rules, 0},
    {"/api/v1/query", 0, M_GET, NEED_READ, 0, LIM_QUERY, ERR_JSON, api_query, 0},
    {"/api/v1/timeseries", 0, M_GET, NEED_READ, 0, LIM_QUERY, ERR_JSON, api_timeseries, 0},
    {"/api/v1/diff", 0, M_GET, NEED_READ, 0, LIM_QUERY, ERR_JSON, api_diff, 0},
    {"/api/v1/profiles", 0, M_GET, NEED_READ, 0, LIM_QUERY, ERR_JSON, api_profiles, 0},
    /* A peer's share of a split merge (split_api.c). A busy node refuses it at once (429) and
     * the asking node merges that share itself. */
    {"/api/v1/internal/merge-share", 0, M_POST, NEED_READ, 0, LIM_QUERY, ERR_JSON, api_merge_share, 0},
    {"/pyroscope/render", 0, M_GET, NEED_READ, 0, LIM_QUERY, ERR_JSON, api_pyroscope_render, 0},
    {"/render", 0, M_GET, NEED_READ, 0, LIM_QUERY, ERR_JSON, api_pyroscope_render, 0},
    {"/pyroscope/render-diff", 0, M_GET, NEED_READ, 0, LIM_QUERY, ERR_JSON, api_pyroscope_render_diff, 0},
    {"/render-diff", 0, M_GET, NEED_READ, 0, LIM_QUERY, ERR_JSON, api_pyroscope_render_diff, 0},
    /* Discovery: scans the index, so it shares the query limiter. */
    {"/api/v1/series", 0, M_GET, NEED_READ, 0, LIM_QUERY, ERR_JSON, api_series, 0},
    {"/api/v1/profile-types", 0, M_GET, NEED_READ, 0, LIM_QUERY, ERR_JSON, api_profile_types, 0},
    {"/api/v1/labels", 0, M_GET, NEED_READ, 0, LIM_QUERY, ERR_JSON, labels, 0},
    {"/api/v1/labels/", 1, M_GET, NEED_READ, 0, LIM_QUERY, ERR_JSON, label_values, 0},
    {"/pyroscope/labels", 0, M_GET, NEED_READ, 0, LIM_QUERY, ERR_JSON, api_pyroscope_labels, 0},
    {"/labels", 0, M_GET, NEED_READ, 0, LIM_QUERY, ERR_JSON, api_pyroscope_labels, 0},
    {"/pyroscope/label-values", 0, M_GET, NEED_READ, 0, LIM_QUERY, ERR_JSON, api_pyroscope_label_values, 0},
    {"/label-values", 0, M_GET, NEED_READ, 0, LIM_QUERY, ERR_JSON, api_pyroscope_label_values, 0},
    {"/api/v1/targets", 0, M_GET, NEED_READ, 0, LIM_NONE, ERR_JSON, targets, 0},
    /* Debug files for symbolization (debuginfo_api.c). */
    {"/api/v1/debuginfo", 0, M_GET, NEED_READ, 0, LIM_NONE, ERR_JSON, api_debuginfo_list, 0},
    {"/api/v1/debuginfo/", 1, M_PUT, NEED_WRITE, offsetof(config_t, max_debuginfo_bytes), LIM_INGEST, ERR_JSON,
     api_debuginfo, 0},
    {"/api/v1/debuginfo/", 1, M_DELETE, NEED_ADMIN, 0, LIM_NONE, ERR_JSON, api_debuginfo, 0},
    {"/debuginfo.v1alpha1.DebuginfoService/ShouldInitiateUpload", 0, M_POST, NEED_WRITE, 0, LIM_INGEST, ERR_CONNECT,
     api_debuginfo_should_upload, 0},
    {"/debuginfo.v1alpha1.DebuginfoService/UploadFinished", 0, M_POST, NEED_WRITE, 0, LIM_INGEST, ERR_CONNECT,
     api_debuginfo_upload_finished, 0},
    {"/debuginfo.v1alpha1.DebuginfoService/Upload/", 1, M_POST, NEED_WRITE, offsetof(config_t, max_debuginfo_bytes),
     LIM_INGEST, ERR_JSON, api_debuginfo_upload, 0},
    {"/parca.debuginfo.v1alpha1.DebuginfoService/ShouldInitiateUpload", 0, M_POST, NEED_WRITE, 0, LIM_INGEST,
     ERR_CONNECT, api_parca_should_upload, 0},
    {"/parca.debuginfo.v1alpha1.DebuginfoService/InitiateUpload", 0, M_POST, NEED_WRITE, 0, LIM_INGEST, ERR_CONNECT,
     api_parca_initiate_upload, 0},
    {"/parca.debuginfo.v1alpha1.DebuginfoService/MarkUploadFinished", 0, M_POST, NEED_WRITE, 0, LIM_INGEST, ERR_CONNECT,
     api_parca_upload_finished, 0},
    {"/parca.debuginfo.v1alpha1.DebuginfoService/Upload", 0, M_POST, NEED_WRITE,
     offsetof(config_t, max_debuginfo_bytes), LIM_INGEST, ERR_CONNECT, api_parca_upload, 0},
    /* Administration. */
    {"/api/v1/admin/flush", 0, M_POST, NEED_ADMIN, 0, LIM_NONE, ERR_JSON, flush, 0},
    {"/api/v1/admin/compact", 0, M_POST, NEED_ADMIN, 0, LIM_NONE, ERR_JSON, compact, 0},
    /* Probes and the server's own metrics: no tenant, no credential. */
    {"/healthz", 0, M_GET, NEED_NONE, 0, LIM_NONE, ERR_JSON, healthz, 0},
    {"/ready", 0, M_GET, NEED_NONE, 0, LIM_NONE, ERR_JSON, ready, 0},
    {"/metrics", 0, M_GET, NEED_NONE, 0, LIM_NONE, ERR_JSON, metrics, 0},
    /* The web UI's static files (web/): public; the data they show comes from the rows above. */
    {"/", 0, M_GET, NEED_NONE, 0, LIM_NONE, ERR_JSON, static_serve, 0},
    {"/embed", 0, M_GET, NEED_NONE, 0, LIM_NONE, ERR_JSON, static_serve, 0},
    {"/index.html", 0, M_GET, NEED_NONE, 0, LIM_NONE, ERR_JSON, static_serve, 0},
    {"/style.css", 0, M_GET, NEED_NONE, 0, LIM_NONE, ERR_JSON, static_serve, 0},
    {"/favicon.svg", 0, M_GET, NEED_NONE, 0, LIM_NONE, ERR_JSON, static_serve, 0},
    {"/js/", 1, M_GET, NEED_NONE, 0, LIM_NONE, ERR_JSON, static_serve, 0},
};
#define NROUTES (sizeof ROUTES / sizeof *ROUTES)

static const char *NEED_NAMES[] = {"none", "read", "write", "admin"};
static const char *LIMITER_NAMES[] = {"none", "ingest", "query"};

static int route_matches(const route_t *r, const char *url) {
    return r->prefix ? !strncmp(url, r->path, strlen(r->path)) : !strcmp(url, r->path);
}

/* The row for url and method: a path may have a row per method (debug files: PUT needs
 * write, DELETE admin). Without one for the method, the path's first row (for the 405),
 * with *allowed the methods its rows take together. */
static const route_t *route_find(const char *url, unsigned method, unsigned *allowed) {
    const route_t *first = NULL;
    *allowed = 0;
    for (size_t i = 0; i < NROUTES; i++) {
        const route_t *r = &ROUTES[i];
        if (!route_matches(r, url)) continue;
        if (r->methods & method) return r;
        if (!first) first = r;
        *allowed |= r->methods;
    }
    return first;
}

static unsigned method_bit(const char *m) {
    if (!strcmp(m, "GET") || !strcmp(m, "HEAD")) return M_GET;
    if (!strcmp(m, "POST")) return M_POST;
    if (!strcmp(m, "PUT")) return M_PUT;
    if (!strcmp(m, "DELETE")) return M_DELETE;
    return 0;
}

/* The Allow header's text for a set of methods. */
static const char *allow_text(unsigned m) {
    static const char *const TEXT[16] = {
        [M_GET] = "GET, HEAD", [M_POST] = "POST",     [M_PUT | M_DELETE] = "PUT, DELETE",
        [M_PUT] = "PUT",       [M_DELETE] = "DELETE", [M_GET | M_POST] = "GET, HEAD, POST",
    };
    return m < 16 && TEXT[m] ? TEXT[m] : "GET, HEAD";
}

/* A refusal in the row's error shape (Grafana reads Connect's). Returns -1. */
__attribute__((format(printf, 4, 5))) static int refuse(const route_t *rt, http_resp_t *resp, int status,
                                                        const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (rt && rt->errfmt == ERR_CONNECT) connect_error(resp, status, msg);
    else http_error(resp, status, "%s", msg);
    return -1;
}

/* With --auth-file: the credential decides the tenant and what it may do. */
static int authenticate(app_t *a, const route_t *rt, http_req_t *req, http_resp_t *resp) {
    char tenant[129];
    role_t role;
    pthread_rwlock_rdlock(&a->auth_lock); /* not a->auth alone: SIGHUP swaps it under auth_lock */
    int rc = auth_check(a->auth, http_header(req, "Authorization"), tenant, sizeof tenant, &role);
    pthread_rwlock_unlock(&a->auth_lock);
    if (rc) return refuse(rt, resp, 401, "missing or unknown credentials: send Authorization: Bearer TOKEN or Basic");
    if (role != ROLE_ADMIN && (need_t)role != rt->need)
        return refuse(rt, resp, 403, "this credential has the %s role; %s needs %s", NEED_NAMES[role], req->url,
                      NEED_NAMES[rt->need]);
    const char *h = http_header(req, "X-Scope-OrgID");
    if (h && *h && strcmp(h, tenant))
        return refuse(rt, resp, 403, "X-Scope-OrgID does not match the tenant of this credential");
    snprintf(req->tenant, sizeof req->tenant, "%s", tenant);
    return 0;
}

/* Fills req->tenant as the row requires; returns 0, or -1 with resp set. */
static int resolve_tenant(app_t *a, const route_t *rt, http_req_t *req, http_resp_t *resp) {
    snprintf(req->tenant, sizeof req->tenant, "%s", APP_TENANT);
    resp->tenant = req->tenant;
    if (rt->need == NEED_NONE) return 0;
    if (a->cfg.auth_file[0]) return authenticate(a, rt, req, resp);
    if (!a->cfg.multitenancy) return 0;
    const char *t = http_header(req, "X-Scope-OrgID");
    if (!t || !*t) return refuse(rt, resp, 401, "missing X-Scope-OrgID header: this server runs with --multitenancy");
    if (!tenant_id_valid(t))
        return refuse(rt, resp, 400, "bad X-Scope-OrgID: use 1-128 characters of A-Z a-z 0-9 - _ .");
    snprintf(req->tenant, sizeof req->tenant, "%s", t);
    return 0;
}

/* What each limiter counts and how it is named to clients and in /metrics. */
static const struct {
    metrics_limit_t metric;
    const char *what, *flag;
} LIMITERS[] = {
    [LIM_INGEST] = {LIMIT_INGEST_CONCURRENCY, "ingests", "--max-concurrent-ingests"},
    [LIM_QUERY] = {LIMIT_QUERY_CONCURRENCY, "queries", "--max-concurrent-queries"},
};

static atomic_int *limiter_busy(app_t *a, limiter_t l) { return l == LIM_INGEST ? &a->ingests : &a->queries; }

/* Takes a slot of the row's limiter; -1 (429, counted) when all are busy. */
static int limiter_take(app_t *a, const route_t *rt, http_req_t *req, http_resp_t *resp) {
    if (rt->limiter == LIM_NONE) return 0;
    atomic_int *busy = limiter_busy(a, rt->limiter);
    unsigned max = rt->limiter == LIM_INGEST ? a->cfg.max_concurrent_ingests : a->cfg.max_concurrent_queries;
    if (atomic_fetch_add(busy, 1) < (int)max) {
        req->slot = 1;
        return 0;
    }
    atomic_fetch_sub(busy, 1);
    metrics_refused(&a->metrics, LIMITERS[rt->limiter].metric);
    if (rt->limiter == LIM_INGEST) metrics_ingest_error(&a->metrics, HR_ELIMIT);
    return refuse(rt, resp, 429, "too many concurrent %s (%s %u); retry later", LIMITERS[rt->limiter].what,
                  LIMITERS[rt->limiter].flag, max);
}

/* A cluster node serves only its roles' routes (--target): uploads on ingest nodes,
 * queries on query nodes; probes, metrics and administration everywhere. */
static int role_allows(const app_t *a, limiter_t l) {
    config_target_t t = a->cfg.target;
    if (t == TARGET_ALL || l == LIM_NONE) return 1;
    return (l == LIM_INGEST && t == TARGET_INGEST) || (l == LIM_QUERY && t == TARGET_QUERY);
}

/* Gives back the slot limiter_take took, if any. */
static void limiter_give(app_t *a, const route_t *rt, http_req_t *req) {
    if (!req->slot) return;
    req->slot = 0;
    atomic_fetch_sub(limiter_busy(a, rt->limiter), 1);
}

int app_admit(void *app, http_req_t *req, http_resp_t *resp) {
    app_t *a = app;
    unsigned allowed;
    const route_t *rt = route_find(req->url, method_bit(req->method), &allowed);
    if (!rt) return refuse(NULL, resp, 404, "no such endpoint: %s", req->url);
    if (!(method_bit(req->method) & rt->methods)) {
        resp->allow = allow_text(allowed); /* RFC 9110: a 405 names what is allowed */
        return refuse(rt, resp, 405, "%s is not allowed on %s; use %s", req->method, req->url, allow_text(allowed));
    }
    if (!role_allows(a, rt->limiter))
        return refuse(rt, resp, 404, "this node (--target=%s) does not serve %s; send it to a node with the %s role",
                      config_target_name(a->cfg.target), req->url, LIMITER_NAMES[rt->limiter]);
    if (rt->stores && !atomic_load(&a->ready)) return refuse(rt, resp, 503, "starting up: WAL replay in progress");
    if (resolve_tenant(a, rt, req, resp) || limiter_take(a, rt, req, resp)) return -1;
    /* Before the body: a tenant over its rate is refused before sending it. A declared
     * length is charged now; a chunked body when it has arrived (app_handle). */
    if (rt->limiter == LIM_INGEST &&
        !rate_take(a, req->tenant, req->declared == UINT64_MAX ? 0 : (size_t)req->declared, 1)) {
        limiter_give(a, rt, req);
        metrics_refused(&a->metrics, LIMIT_INGEST_RATE);
        metrics_ingest_error(&a->metrics, HR_ELIMIT);
        return refuse(rt, resp, 429, "tenant %s is over its ingest rate (--ingest-rate-limit %zu bytes/s); retry later",
                      req->tenant, a->cfg.ingest_rate_bytes);
    }
    if (rt->max_body) {
        req->max_body = *(const size_t *)(const void *)((const char *)&a->cfg + rt->max_body);
        hr_err_t err = {0};
        /* Before a byte is spooled: a body of unknown length may be as long as allowed. */
        if (a->debuginfo &&
            debuginfo_room(a->debuginfo, req->declared == UINT64_MAX ? req->max_body : req->declared, 0, &err)) {
            limiter_give(a, rt, req);
            return refuse(rt, resp, 507, "%s", err.msg);
        }
        if (a->debuginfo) req->spool_dir = debuginfo_spool_dir(a->debuginfo);
    }
    req->route = rt;
    return 0;
}

void app_handle(void *app, http_req_t *req, http_resp_t *resp) {
    app_t *a = app;
    const route_t *rt = req->route;
    resp->tenant = req->tenant;
    if (rt->limiter == LIM_INGEST && req->declared == UINT64_MAX) rate_take(a, req->tenant, req->received, 0);
    if (req->body_too_big) { /* a body without a Content-Length, past the row's limit */
        if (rt->limiter == LIM_INGEST) metrics_ingest_error(&a->metrics, HR_ETOOBIG);
        refuse(rt, resp, 413, "request body exceeds the limit of %zu bytes (%s)",
               req->max_body ? req->max_body : a->cfg.max_body_bytes,
               req->max_body ? "--max-debuginfo-bytes" : "--max-body-bytes");
        return;
    }
    rt->fn(a, req, resp);
    if (rt->limiter == LIM_QUERY && resp->status == 504) metrics_refused(&a->metrics, LIMIT_QUERY_TIMEOUT);
}

void app_release(void *app, http_req_t *req) { limiter_give(app, req->route, req); }

void app_print_routes(FILE *out) {
    for (size_t i = 0; i < NROUTES; i++) {
        const route_t *r = &ROUTES[i];
        fprintf(out, "%-4s %-6s %-32s role=%s limiter=%s\n", r->methods == M_GET ? "GET" : allow_text(r->methods),
                r->prefix ? "prefix" : "exact", r->path, NEED_NAMES[r->need], LIMITER_NAMES[r->limiter]);
    }
}
