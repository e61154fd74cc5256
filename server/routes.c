/* routes.c - maps method and path to a handler. */
#include <stdio.h>
#include <string.h>

#include "common/timeparse.h"
#include "common/vec.h"

#include "server/app.h"

static int is(const http_req_t *r, const char *path) { return strcmp(r->url, path) == 0; }

static void health(app_t *a, http_req_t *req, http_resp_t *resp, int readiness) {
    (void)req;
    if (readiness && !atomic_load(&a->ready)) return http_error(resp, 503, "not ready: WAL replay in progress");
    http_reply_text(resp, 200, "text/plain; charset=utf-8", readiness ? "ready\n" : "ok\n");
}

/* Runs compaction until nothing is due (the background thread does the same). */
static void compact(app_t *a, http_req_t *req, http_resp_t *resp) {
    if (strcmp(req->method, "POST")) return http_error(resp, 405, "use POST to compact blocks");
    hr_err_t err = {0};
    int rc, runs = 0;
    while ((rc = store_compact(a->store, &err)) == 1) runs++;
    if (rc < 0) return http_error_from(resp, &err);
    buf_t b;
    buf_init(&b);
    buf_printf(&b, "{\"compactions\":%d}", runs);
    http_reply(resp, 200, "application/json", &b);
}

static void flush(app_t *a, http_req_t *req, http_resp_t *resp) {
    if (strcmp(req->method, "POST")) return http_error(resp, 405, "use POST to flush the head");
    hr_err_t err = {0};
    if (store_cut(a->store, &err)) return http_error_from(resp, &err);
    http_reply_text(resp, 200, "application/json", "{\"status\":\"flushed\"}");
}

/* Fills req->tenant; returns 0, or -1 with resp set. Health, metrics and the UI's
 * static files need no tenant. */
/* The role a path needs: writes, admin actions, or reads. */
static role_t needed_role(const http_req_t *req) {
    if (is(req, "/ingest") || is(req, "/pyroscope/ingest") || is(req, "/push.v1.PusherService/Push") ||
        is(req, "/api/profiles/writeraw"))
        return ROLE_WRITE;
    if (!strncmp(req->url, "/api/v1/admin/", 14)) return ROLE_ADMIN;
    return ROLE_READ;
}

/* With --auth-file: the credential decides the tenant and what it may do. */
static int authenticate(app_t *a, http_req_t *req, http_resp_t *resp) {
    char tenant[129];
    role_t role;
    pthread_rwlock_rdlock(&a->auth_lock);
    int rc = auth_check(a->auth, http_header(req, "Authorization"), tenant, sizeof tenant, &role);
    pthread_rwlock_unlock(&a->auth_lock);
    if (rc) return http_error(resp, 401, "missing or unknown credentials: send Authorization: Bearer TOKEN or Basic"), -1;
    role_t need = needed_role(req);
    if (role != ROLE_ADMIN && role != need)
        return http_error(resp, 403, "this credential has the %s role; %s needs %s", role == ROLE_READ ? "read" : "write",
                          req->url, need == ROLE_WRITE ? "write" : need == ROLE_READ ? "read" : "admin"), -1;
    const char *h = http_header(req, "X-Scope-OrgID");
    if (h && *h && strcmp(h, tenant))
        return http_error(resp, 403, "X-Scope-OrgID does not match the tenant of this credential"), -1;
    snprintf(req->tenant, sizeof req->tenant, "%s", tenant);
    return 0;
}

static int resolve_tenant(app_t *a, http_req_t *req, http_resp_t *resp) {
    snprintf(req->tenant, sizeof req->tenant, "%s", APP_TENANT);
    resp->tenant = req->tenant;
    int data = !strncmp(req->url, "/api/", 5) || !strncmp(req->url, "/pyroscope/", 11) || is(req, "/ingest") ||
               is(req, "/render") || is(req, "/label-values") || is(req, "/labels") ||
               is(req, "/push.v1.PusherService/Push") || !strncmp(req->url, QUERIER_PREFIX, strlen(QUERIER_PREFIX));
    if (!data) return 0;
    if (a->cfg.auth_file[0]) return authenticate(a, req, resp); /* not a->auth: SIGHUP swaps it under auth_lock */
    if (!a->cfg.multitenancy) return 0;
    const char *t = http_header(req, "X-Scope-OrgID");
    if (!t || !*t) return http_error(resp, 401, "missing X-Scope-OrgID header: this server runs with --multitenancy"), -1;
    if (!tenant_id_valid(t))
        return http_error(resp, 400, "bad X-Scope-OrgID: use 1-128 characters of A-Z a-z 0-9 - _ ."), -1;
    snprintf(req->tenant, sizeof req->tenant, "%s", t);
    return 0;
}

/* Token bucket per tenant: refills at --ingest-rate-limit bytes/s up to two seconds'
 * worth. Returns 1 if the request may proceed. */
static int rate_allows(app_t *a, const char *tenant, size_t bytes) {
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
        ok = b->tokens > 0;
        if (ok) b->tokens -= (double)bytes;
    }
    pthread_mutex_unlock(&a->buckets_mu);
    return ok;
}

/* Runs a write handler under the ingest limits. */
static void limited_ingest(app_t *a, http_req_t *req, http_resp_t *resp, void (*fn)(app_t *, http_req_t *, http_resp_t *)) {
    if (!rate_allows(a, req->tenant, req->received)) {
        metrics_refused(&a->metrics, LIMIT_INGEST_RATE);
        metrics_ingest_error(&a->metrics, HR_ELIMIT);
        return http_error(resp, 429, "tenant %s is over its ingest rate (--ingest-rate-limit %zu bytes/s); retry later",
                          req->tenant, a->cfg.ingest_rate_bytes);
    }
    if (atomic_fetch_add(&a->ingests, 1) >= (int)a->cfg.max_concurrent_ingests) {
        atomic_fetch_sub(&a->ingests, 1);
        metrics_refused(&a->metrics, LIMIT_INGEST_CONCURRENCY);
        metrics_ingest_error(&a->metrics, HR_ELIMIT);
        return http_error(resp, 429, "too many concurrent ingests (--max-concurrent-ingests %u); retry later",
                          a->cfg.max_concurrent_ingests);
    }
    fn(a, req, resp);
    atomic_fetch_sub(&a->ingests, 1);
}

static void limited_query(app_t *a, http_req_t *req, http_resp_t *resp, void (*fn)(app_t *, http_req_t *, http_resp_t *)) {
    if (atomic_fetch_add(&a->queries, 1) >= (int)a->cfg.max_concurrent_queries) {
        atomic_fetch_sub(&a->queries, 1);
        metrics_refused(&a->metrics, LIMIT_QUERY_CONCURRENCY);
        return http_error(resp, 429, "too many concurrent queries (--max-concurrent-queries %u); retry later",
                          a->cfg.max_concurrent_queries);
    }
    fn(a, req, resp);
    if (resp->status == 504) metrics_refused(&a->metrics, LIMIT_QUERY_TIMEOUT);
    atomic_fetch_sub(&a->queries, 1);
}

void app_route(void *app, http_req_t *req, http_resp_t *resp) {
    app_t *a = app;
    if (resolve_tenant(a, req, resp)) return;
    if (is(req, "/ingest") || is(req, "/pyroscope/ingest")) return limited_ingest(a, req, resp, api_ingest);
    if (is(req, "/push.v1.PusherService/Push")) return limited_ingest(a, req, resp, api_push);
    if (is(req, "/api/profiles/writeraw")) {
        if (strcmp(req->method, "POST")) return http_error(resp, 405, "use POST for writeraw");
        return limited_ingest(a, req, resp, api_parca_writeraw);
    }
    if (!strncmp(req->url, QUERIER_PREFIX, strlen(QUERIER_PREFIX))) return limited_query(a, req, resp, api_querier);
    int get = !strcmp(req->method, "GET") || !strcmp(req->method, "HEAD");
    if (is(req, "/api/v1/admin/flush")) return flush(a, req, resp);
    if (is(req, "/api/v1/admin/compact")) return compact(a, req, resp);
    if (!get) return http_error(resp, 405, "%s is not allowed on %s", req->method, req->url);
    if (is(req, "/healthz")) return health(a, req, resp, 0);
    if (is(req, "/ready")) return health(a, req, resp, 1);
    if (is(req, "/metrics")) {
        buf_t b;
        buf_init(&b);
        metrics_render(&a->metrics, a->store, &b);
        scraper_t *sc = atomic_load(&a->scraper);
        if (sc) scraper_metrics(sc, &b);
        return http_reply(resp, 200, "text/plain; version=0.0.4", &b);
    }
    if (is(req, "/api/v1/query")) return limited_query(a, req, resp, api_query);
    if (is(req, "/api/v1/targets")) {
        buf_t b;
        buf_init(&b);
        scraper_t *sc = atomic_load(&a->scraper);
        if (sc) scraper_targets_json(sc, &b);
        else buf_printf(&b, "{\"targets\":[]}");
        return http_reply(resp, 200, "application/json", &b);
    }
    if (is(req, "/api/v1/timeseries")) return limited_query(a, req, resp, api_timeseries);
    if (is(req, "/api/v1/diff")) return limited_query(a, req, resp, api_diff);
    if (is(req, "/api/v1/profiles")) return limited_query(a, req, resp, api_profiles);
    if (is(req, "/api/v1/series")) return api_series(a, req, resp);
    if (is(req, "/api/v1/profile-types")) return api_profile_types(a, req, resp);
    if (is(req, "/api/v1/labels")) return api_labels(a, req, resp, NULL);
    const char *pre = "/api/v1/labels/";
    size_t pl = strlen(pre);
    if (!strncmp(req->url, pre, pl)) {
        const char *rest = req->url + pl, *slash = strchr(rest, '/');
        if (slash && !strcmp(slash, "/values")) {
            char name[256];
            size_t n = (size_t)(slash - rest);
            if (n >= sizeof name) return http_error(resp, 400, "label name too long");
            memcpy(name, rest, n);
            name[n] = 0;
            return api_labels(a, req, resp, name);
        }
    }
    if (is(req, "/pyroscope/render") || is(req, "/render")) return limited_query(a, req, resp, api_pyroscope_render);
    if (is(req, "/pyroscope/render-diff") || is(req, "/render-diff"))
        return limited_query(a, req, resp, api_pyroscope_render_diff);
    if (is(req, "/pyroscope/label-values") || is(req, "/label-values")) return api_pyroscope_label_values(a, req, resp);
    if (is(req, "/pyroscope/labels") || is(req, "/labels")) return api_pyroscope_labels(a, req, resp);
    if (!strncmp(req->url, "/api/", 5)) return http_error(resp, 404, "no such endpoint: %s", req->url);
    static_serve(a, req, resp);
}
