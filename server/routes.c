/* routes.c - maps method and path to a handler. */
#include <stdio.h>
#include <string.h>

#include "server/app.h"

static int is(const http_req_t *r, const char *path) { return strcmp(r->url, path) == 0; }

static void health(app_t *a, http_req_t *req, http_resp_t *resp, int readiness) {
    (void)req;
    if (readiness && !atomic_load(&a->ready)) return http_error(resp, 503, "not ready: WAL replay in progress");
    http_reply_text(resp, 200, "text/plain; charset=utf-8", readiness ? "ready\n" : "ok\n");
}

static void flush(app_t *a, http_req_t *req, http_resp_t *resp) {
    if (strcmp(req->method, "POST")) return http_error(resp, 405, "use POST to flush the head");
    hr_err_t err = {0};
    if (store_cut(a->store, &err)) return http_error_from(resp, &err);
    http_reply_text(resp, 200, "application/json", "{\"status\":\"flushed\"}");
}

/* Fills req->tenant; returns 0, or -1 with resp set. Health, metrics and the UI's
 * static files need no tenant. */
static int resolve_tenant(app_t *a, http_req_t *req, http_resp_t *resp) {
    snprintf(req->tenant, sizeof req->tenant, "%s", APP_TENANT);
    resp->tenant = req->tenant;
    if (!a->cfg.multitenancy) return 0;
    const char *t = http_header(req, "X-Scope-OrgID");
    int data = !strncmp(req->url, "/api/", 5) || !strncmp(req->url, "/pyroscope/", 11) || is(req, "/ingest") ||
               is(req, "/render") || is(req, "/label-values") || is(req, "/labels") ||
               is(req, "/push.v1.PusherService/Push");
    if (!data) return 0;
    if (!t || !*t) return http_error(resp, 401, "missing X-Scope-OrgID header: this server runs with --multitenancy"), -1;
    if (!tenant_id_valid(t))
        return http_error(resp, 400, "bad X-Scope-OrgID: use 1-128 characters of A-Z a-z 0-9 - _ ."), -1;
    snprintf(req->tenant, sizeof req->tenant, "%s", t);
    return 0;
}

void app_route(void *app, http_req_t *req, http_resp_t *resp) {
    app_t *a = app;
    if (resolve_tenant(a, req, resp)) return;
    if (is(req, "/ingest") || is(req, "/pyroscope/ingest")) return api_ingest(a, req, resp);
    if (is(req, "/push.v1.PusherService/Push")) return api_push(a, req, resp);
    if (is(req, "/api/profiles/writeraw")) {
        if (strcmp(req->method, "POST")) return http_error(resp, 405, "use POST for writeraw");
        return api_parca_writeraw(a, req, resp);
    }
    int get = !strcmp(req->method, "GET") || !strcmp(req->method, "HEAD");
    if (is(req, "/api/v1/admin/flush")) return flush(a, req, resp);
    if (!get) return http_error(resp, 405, "%s is not allowed on %s", req->method, req->url);
    if (is(req, "/healthz")) return health(a, req, resp, 0);
    if (is(req, "/ready")) return health(a, req, resp, 1);
    if (is(req, "/metrics")) {
        buf_t b;
        buf_init(&b);
        metrics_render(&a->metrics, a->store, &b);
        if (a->scraper) scraper_metrics(a->scraper, &b);
        return http_reply(resp, 200, "text/plain; version=0.0.4", &b);
    }
    if (is(req, "/api/v1/query")) return api_query(a, req, resp);
    if (is(req, "/api/v1/targets")) {
        buf_t b;
        buf_init(&b);
        if (a->scraper) scraper_targets_json(a->scraper, &b);
        else buf_printf(&b, "{\"targets\":[]}");
        return http_reply(resp, 200, "application/json", &b);
    }
    if (is(req, "/api/v1/timeseries")) return api_timeseries(a, req, resp);
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
    if (is(req, "/pyroscope/render") || is(req, "/render")) return api_pyroscope_render(a, req, resp);
    if (is(req, "/pyroscope/label-values") || is(req, "/label-values")) return api_pyroscope_label_values(a, req, resp);
    if (is(req, "/pyroscope/labels") || is(req, "/labels")) return api_pyroscope_labels(a, req, resp);
    if (!strncmp(req->url, "/api/", 5)) return http_error(resp, 404, "no such endpoint: %s", req->url);
    static_serve(a, req, resp);
}
