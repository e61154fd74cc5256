/* app.h - the running server: configuration, store, metrics, readiness.
 *
 * One app_t exists per process, created by main and passed to every handler (no
 * globals). Handlers are split by concern: ingest_api.c and push_api.c (writes), query_api.c
 * and querier_api.c (reads: REST and Connect), static.c (web UI files), routes.c (dispatch). */
#ifndef HEARTH_APP_H
#define HEARTH_APP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "ingest/pipeline.h"
#include "query/merge.h"
#include "server/config.h"
#include "server/http.h"
#include "server/auth.h"
#include "server/metrics.h"
#include "server/scrape.h"
#include "remote/objstore.h"
#include "storage/store.h"
#include "symbolize/symbolizer.h"

#define APP_TENANT "anonymous" /* the tenant without --multitenancy, as in Pyroscope */

typedef struct app {
    config_t cfg;
    store_t *store;
    metrics_t metrics;
    ingest_limits_t limits;
    mem_budget_t decode_budget; /* limits.decode_budget points here */
    mem_budget_t query_budget;  /* merges reserve from it (merge_query_t.mem) */
    atomic_int ready;
    atomic_int stopping;           /* set on SIGTERM/SIGINT: long admin loops end after their current step */
    _Atomic(http_server_t *) http; /* set once serving, for /metrics */
    _Atomic(scraper_t *) scraper;  /* NULL without --scrape-config; set after WAL replay while HTTP already serves */
    atomic_int ingests, queries;   /* in flight, for the concurrency limits */
    struct rate_bucket {
        char tenant[129];
        double tokens; /* bytes; may go negative: a large upload is let through, then paid for */
        int64_t last_ns;
    } * buckets;
    size_t nbuckets, buckets_cap;
    pthread_mutex_t buckets_mu;
    auth_t *auth; /* NULL without --auth-file; swapped on SIGHUP under auth_lock */
    pthread_rwlock_t auth_lock;
    debuginfo_t *debuginfo;   /* debug files: uploads, --debuginfo-dir, debuginfod */
    symbolizer_t *symbolizer; /* NULL with --symbolize=false */
    objstore_t *objects;      /* cluster mode: where blocks live (NULL on one node) */
    char node[512];           /* cluster mode: this node's name in the catalog */
    char **peers;             /* cluster mode: the other live query nodes' addresses (split_api.c) */
    size_t npeers;
    pthread_mutex_t peers_mu;
    pthread_mutex_t settings_mu; /* one tenant settings write at a time (settings_api.c) */
    struct rules *rules;         /* recording rules and their sender (rules.h) */
} app_t;

/* The router (routes.c), as the HTTP layer's three callbacks (http.h): admit finds the
 * request's row in the route table and, as the row says, resolves the tenant,
 * authenticates, checks the role and takes the limiter's slot; handle runs the row's
 * handler on the full body; release gives the slot back. */
int app_admit(void *app, http_req_t *req, http_resp_t *resp);
void app_handle(void *app, http_req_t *req, http_resp_t *resp);
void app_release(void *app, http_req_t *req);
/* One line per route: method, exact|prefix, path, role=..., limiter=... (--print-routes). */
void app_print_routes(FILE *out);

/* The wall-clock deadline of a merge for this request (merge_query_t.deadline_ns). */
static inline int64_t app_query_deadline(const app_t *a, const http_req_t *req) {
    return a->cfg.query_timeout_ns ? req->start_ns + a->cfg.query_timeout_ns : 0;
}

/* ingest_submit (ingest/pipeline.h) into the app's store under its limits, counted
 * in the metrics (body_bytes as received). Every write path (/ingest, push,
 * writeraw, scraping) goes through here. */
int app_submit(app_t *a, const ingest_request_t *r, size_t body_bytes, hr_err_t *err);

/* ---- queries split across cluster nodes (split_api.c, query/split.h) ---- */

/* Re-reads the live query peers from the catalog (the background loop, every 2 s). */
void app_peers_refresh(app_t *a);
void app_peers_free(app_t *a);
/* The peers a merge of this request asks for shares, with what it forwards to them
 * (the tenant, the caller's credential, the query text and range). */
typedef struct {
    merge_remote_t rm;
    app_t *a;
    char **peers;
    size_t npeers;
    char *body_head; /* the request JSON up to its "parts" */
    char auth[1024], tenant[160];
    int64_t deadline_ns;
} app_remote_t;
/* Sets up r for a merge of `query` over [from, until] asked by req: 1 when the merge
 * is to be split (cluster mode, --query-split, live peers), else 0 (r unused). */
int app_remote_begin(app_t *a, const http_req_t *req, const char *query, int64_t from, int64_t until, app_remote_t *r);
/* Counts what the split merge m did and frees r's copies. */
void app_remote_end(app_remote_t *r, const merge_result_t *m);
/* POST /api/v1/internal/merge-share: merges a peer's share of a split merge. */
void api_merge_share(app_t *a, http_req_t *req, http_resp_t *resp);

void api_ingest(app_t *a, http_req_t *req, http_resp_t *resp);
void api_push(app_t *a, http_req_t *req, http_resp_t *resp);
void api_parca_writeraw(app_t *a, http_req_t *req, http_resp_t *resp);
/* POST /parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw, binary or JSON (push_api.c). */
void api_parca_writeraw_rpc(app_t *a, http_req_t *req, http_resp_t *resp);
/* POST /v1development/profiles and /otlp/v1development/profiles (otlp_api.c). */
void api_otlp_profiles(app_t *a, http_req_t *req, http_resp_t *resp);
void api_query(app_t *a, http_req_t *req, http_resp_t *resp);
void api_diff(app_t *a, http_req_t *req, http_resp_t *resp);
void api_pyroscope_render_diff(app_t *a, http_req_t *req, http_resp_t *resp);
void api_profiles(app_t *a, http_req_t *req, http_resp_t *resp);
void api_timeseries(app_t *a, http_req_t *req, http_resp_t *resp);
/* POST /querier.v1.QuerierService/<Method> (querier_api.c). */
#define QUERIER_PREFIX "/querier.v1.QuerierService/"
void api_querier(app_t *a, http_req_t *req, http_resp_t *resp);
#define SETTINGS_PREFIX "/settings.v1.SettingsService/"
/* settings.v1.SettingsService: Get, Set, Delete (settings_api.c). */
void api_settings(app_t *a, http_req_t *req, http_resp_t *resp);
#define ADHOC_PREFIX "/adhocprofiles.v1.AdHocProfileService/"
/* adhocprofiles.v1.AdHocProfileService: Upload, Get, List, Diff (adhoc_api.c). */
void api_adhoc(app_t *a, http_req_t *req, http_resp_t *resp);
void api_series(app_t *a, http_req_t *req, http_resp_t *resp);
void api_profile_types(app_t *a, http_req_t *req, http_resp_t *resp);
void api_labels(app_t *a, http_req_t *req, http_resp_t *resp, const char *name);
void api_pyroscope_render(app_t *a, http_req_t *req, http_resp_t *resp);
void api_pyroscope_label_values(app_t *a, http_req_t *req, http_resp_t *resp);
void api_pyroscope_labels(app_t *a, http_req_t *req, http_resp_t *resp);
void static_serve(app_t *a, http_req_t *req, http_resp_t *resp);
/* PUT, DELETE /api/v1/debuginfo/BUILD_ID and GET /api/v1/debuginfo (debuginfo_api.c). */
void api_debuginfo(app_t *a, http_req_t *req, http_resp_t *resp);
void api_debuginfo_list(app_t *a, http_req_t *req, http_resp_t *resp);
/* Pyroscope's debuginfo.v1alpha1.DebuginfoService: ShouldInitiateUpload, UploadFinished
 * (Connect unary) and the raw-body POST .../Upload/{gnu_build_id} (debuginfo_api.c). */
void api_debuginfo_should_upload(app_t *a, http_req_t *req, http_resp_t *resp);
void api_debuginfo_upload_finished(app_t *a, http_req_t *req, http_resp_t *resp);
void api_debuginfo_upload(app_t *a, http_req_t *req, http_resp_t *resp);
/* Parca's parca.debuginfo.v1alpha1.DebuginfoService: ShouldInitiateUpload, InitiateUpload,
 * MarkUploadFinished (unary) and the client-streamed Upload, over gRPC (debuginfo_api.c). */
void api_parca_should_upload(app_t *a, http_req_t *req, http_resp_t *resp);
void api_parca_initiate_upload(app_t *a, http_req_t *req, http_resp_t *resp);
void api_parca_upload_finished(app_t *a, http_req_t *req, http_resp_t *resp);
void api_parca_upload(app_t *a, http_req_t *req, http_resp_t *resp);

#endif
