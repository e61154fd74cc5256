/* serve.c - see serve.h. The process lifecycle: configure, open the store, replay the
 * WAL, serve, cut blocks in the background, and shut down cleanly on SIGINT/SIGTERM
 * (stop accepting, finish in-flight requests, flush the head into a block). */
#include "server/rules.h"
#include "server/serve.h"

#include <errno.h>
#include <libgen.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/timeparse.h"
#include "server/app.h"
#include "server/grpc.h"
#include "server/version.h"

typedef struct {
    app_t *app;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
} cutter_t;

static int clustered(const app_t *a) { return a->cfg.catalog[0] != 0; }

/* A scraping node silent this long (three missed heartbeats) loses its share of the
 * targets to the others. */
#define SCRAPER_MAX_AGE_S 6
/* Compaction, retention and the trash run on nodes with the compact role. */
static int compacts(const app_t *a) { return a->cfg.target == TARGET_ALL || a->cfg.target == TARGET_COMPACT; }

/* Waits up to ms on the thread's condition; 1 when asked to stop. */
static int pause_ms(cutter_t *c, long ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long ns = ts.tv_nsec + ms * 1000000L;
    ts.tv_sec += ns / 1000000000L;
    ts.tv_nsec = ns % 1000000000L;
    pthread_mutex_lock(&c->mu);
    if (!c->stop) pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    int stop = c->stop;
    pthread_mutex_unlock(&c->mu);
    return stop;
}

/* A cluster node's heartbeat (with whether it scrapes), and the scraper's division of
 * the targets among the live scraping nodes. sc: the scraper, or NULL. 0, or -1 when the
 * catalog did not answer (logged; the last division stays). */
static int scrape_shard_refresh(app_t *a, scraper_t *sc) {
    hr_err_t err = {0};
    char **names = NULL;
    size_t n = 0;
    int rc = index_heartbeat(store_index(a->store), a->node, config_target_name(a->cfg.target), a->cfg.listen,
                             sc != NULL, &err);
    if (rc == 0 && sc) rc = index_scrapers(store_index(a->store), SCRAPER_MAX_AGE_S, &names, &n, &err);
    if (rc == 0 && sc) scraper_set_shard(sc, names, n);
    if (rc) log_warn("cluster.heartbeat_failed", "err=\"%s\"", err.msg);
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return rc;
}

/* Tells one background thread to stop, and waits for it. */
static void cutter_stop(cutter_t *c, pthread_t th) {
    pthread_mutex_lock(&c->mu);
    c->stop = 1;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(th, NULL);
}

/* Multipart uploads a crashed node left in the object store are aborted once a day old
 * (no put takes a day), looked for hourly by the nodes that compact. */
#define STALE_UPLOAD_AGE_S (24 * 3600)
#define STALE_UPLOAD_SCAN_NS (3600 * 1000000000LL)

static void abort_stale_uploads(app_t *a, int64_t *last_ns) {
    if (!a->objects || time_mono_ns() - *last_ns < STALE_UPLOAD_SCAN_NS) return;
    *last_ns = time_mono_ns();
    size_t n = 0;
    hr_err_t err = {0};
    if (objstore_abort_stale(a->objects, "", STALE_UPLOAD_AGE_S, &n, &err))
        log_warn("objstore.stale_scan_failed", "err=\"%s\"", err.msg);
    else if (n) log_info("objstore.stale_uploads_aborted", "count=%zu", n);
}

/* The background upkeep every few seconds: on one node, cuts when the head limits
 * are reached; with the compact role, retention, compaction and (a cluster) deleting
 * trashed objects and stale multipart uploads; in a cluster, a heartbeat in the catalog. */
static void *cutter_main(void *arg) {
    cutter_t *c = arg;
    app_t *a = c->app;
    int64_t stale_scan_ns = time_mono_ns() - STALE_UPLOAD_SCAN_NS; /* the first pass scans */
    while (!pause_ms(c, 2000)) {
        hr_err_t err = {0};
        if (!clustered(a) && store_maybe_cut(a->store, &err) < 0) log_error("head.cut_failed", "err=\"%s\"", err.msg);
        if (clustered(a)) scrape_shard_refresh(a, atomic_load(&a->scraper));
        if (clustered(a) && a->cfg.query_split) app_peers_refresh(a);
        if (!compacts(a)) continue;
        if (store_apply_retention(a->store, time_now_ns(), &err) < 0)
            log_error("retention.failed", "err=\"%s\"", err.msg);
        int rc = 0;
        while (!atomic_load(&a->stopping) && (rc = store_compact(a->store, &err)) == 1) {
        }
        if (rc < 0) log_error("compaction.failed", "err=\"%s\"", err.msg);
        if (store_collect_trash(a->store, &err) < 0) log_warn("trash.failed", "err=\"%s\"", err.msg);
        abort_stale_uploads(a, &stale_scan_ns);
    }
    return NULL;
}

/* A cluster node with the ingest role stores its heads every --flush-interval (or
 * once they reach --flush-bytes): the cut that acknowledges the uploads waiting in
 * store_ingest. Checked every 20 ms, so an ack comes at most that much after the
 * interval; after a failure (object store or catalog away) it waits a second. */
static void *flusher_main(void *arg) {
    cutter_t *c = arg;
    long wait = 20;
    while (!pause_ms(c, wait)) {
        hr_err_t err = {0};
        int rc = store_maybe_cut(c->app->store, &err);
        if (rc < 0) log_error("flush.failed", "err=\"%s\" (retrying; uploads wait up to --ack-timeout)", err.msg);
        wait = rc < 0 ? 1000 : 20;
    }
    return NULL;
}

/* SIGHUP: re-reads the auth file; a bad file keeps the credentials in force. */
static void reload_auth(app_t *a) {
    if (!a->cfg.auth_file[0]) {
        log_info("reload.nothing", "%s", "reason=\"no --auth-file\"");
        return;
    }
    hr_err_t err = {0};
    auth_t *fresh = auth_load(a->cfg.auth_file, &err);
    if (!fresh) {
        log_error("auth.reload_failed", "err=\"%s\" kept=previous", err.msg);
        return;
    }
    pthread_rwlock_wrlock(&a->auth_lock);
    auth_t *old = a->auth;
    a->auth = fresh;
    pthread_rwlock_unlock(&a->auth_lock);
    auth_free(old);
    log_info("auth.reloaded", "credentials=%zu", auth_count(fresh));
}

static void default_web_dir(config_t *cfg, const char *argv0) {
    if (cfg->web_dir[0]) return;
    char exe[2048];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) snprintf(exe, sizeof exe, "%s", argv0);
    else exe[n] = 0;
    snprintf(cfg->web_dir, sizeof cfg->web_dir, "%s/web", dirname(exe));
}

/* The debug info sources and the symbolizer (symbolize/), before any thread starts:
 * libdebuginfod reads its settings from the environment, which debuginfo_new sets. */
static int symbolize_start(app_t *a, hr_err_t *err) {
    const char *urls = a->cfg.debuginfod_urls[0] ? a->cfg.debuginfod_urls : getenv("DEBUGINFOD_URLS");
    debuginfo_config_t dc = {.data_dir = a->cfg.data_dir,
                             .local_dir = a->cfg.debuginfo_dir,
                             .debuginfod_urls = urls ? urls : "",
                             .negative_ttl_ns = a->cfg.debuginfod_negative_ttl_ns,
                             .max_bytes = a->cfg.max_debuginfo_bytes,
                             .quota = a->cfg.debuginfo_quota,
                             .keep_free = a->cfg.debuginfo_keep_free,
                             .objects = a->objects};
    if (!(a->debuginfo = debuginfo_new(&dc, err))) return -1;
    if (a->cfg.symbolize && !(a->symbolizer = symbolizer_new(a->debuginfo, a->cfg.data_dir, err))) return -1;
    log_info("symbolize.config", "enabled=%d debuginfo_dir=%s debuginfod_urls=\"%s\"", a->cfg.symbolize,
             a->cfg.debuginfo_dir[0] ? a->cfg.debuginfo_dir : "-", urls ? urls : "");
    return 0;
}

/* Cluster mode: the object store and what the store needs of it. 0, or 1 after
 * printing why not. */
static int cluster_config(app_t *a, store_config_t *sc, char *cache_dir, size_t cap) {
    objstore_config_t oc = {.url = a->cfg.object_store,
                            .multipart_threshold = a->cfg.multipart_threshold,
                            .access_key = a->cfg.s3_access_key[0] ? a->cfg.s3_access_key : NULL,
                            .secret_key = a->cfg.s3_secret_key[0] ? a->cfg.s3_secret_key : NULL};
    hr_err_t err = {0};
    if (!(a->objects = objstore_open(&oc, &err))) {
        fprintf(stderr, "hearth: --object-store: %s\n", err.msg);
        return 1;
    }
    if (a->cfg.cache_dir[0]) snprintf(cache_dir, cap, "%s", a->cfg.cache_dir);
    else snprintf(cache_dir, cap, "%s/cache", a->cfg.data_dir);
    if (!a->cfg.node_name[0]) {
        char host[128] = "node";
        gethostname(host, sizeof host - 1);
        snprintf(a->node, sizeof a->node, "%s/%s", host, a->cfg.listen);
    } else {
        snprintf(a->node, sizeof a->node, "%s", a->cfg.node_name);
    }
    sc->catalog = a->cfg.catalog;
    sc->objects = a->objects;
    sc->cache_dir = cache_dir;
    sc->cache_bytes = a->cfg.cache_bytes;
    sc->trash_delay_ms = a->cfg.trash_delay_ns / 1000000;
    sc->ack_timeout_ns = a->cfg.ack_timeout_ns;
    sc->node = a->node;
    /* A node's head is only the batch being stored: cut every flush interval. */
    sc->block_duration_ns = a->cfg.flush_interval_ns;
    sc->head_max_bytes = a->cfg.flush_bytes;
    log_info("cluster.config", "node=%s target=%s object_store=%s cache_dir=%s flush_interval_ms=%lld", a->node,
             config_target_name(a->cfg.target), a->cfg.object_store, cache_dir,
             (long long)(a->cfg.flush_interval_ns / 1000000));
    return 0;
}

/* The gRPC front end when --grpc-listen names an address: 0 (*out NULL without one), or
 * -1 with err. */
static int start_grpc(app_t *a, const http_router_t *router, grpc_server_t **out, hr_err_t *err) {
    *out = NULL;
    if (!a->cfg.grpc_listen[0]) return 0;
    grpc_config_t gc = {.listen = a->cfg.grpc_listen,
                        .tls_cert = a->cfg.tls_cert[0] ? a->cfg.tls_cert : NULL,
                        .tls_key = a->cfg.tls_key[0] ? a->cfg.tls_key : NULL,
                        .max_conns = a->cfg.max_connections,
                        .max_message = a->cfg.max_body_bytes,
                        .max_inflight = a->cfg.max_inflight_body_bytes,
                        .max_inflated = a->cfg.max_decompressed_bytes,
                        .idle_timeout_ns = a->cfg.idle_timeout_ns};
    if (!(*out = grpc_start(&gc, router, err))) return -1;
    log_info("grpc.listening", "addr=%s", a->cfg.grpc_listen);
    return 0;
}

static int serve(app_t *a) {
    store_config_t sc = {.data_dir = a->cfg.data_dir,
                         .fsync = a->cfg.wal_fsync,
                         .head_max_bytes = a->cfg.head_max_bytes,
                         .block_duration_ns = a->cfg.block_duration_ns,
                         .zstd_level = a->cfg.zstd_level,
                         .block_cache_bytes = a->cfg.block_cache_bytes,
                         .retention_ns = a->cfg.retention_ns,
                         .compact_min_blocks = a->cfg.compact_min_blocks,
                         .compact_max_bytes = a->cfg.compact_max_bytes,
                         .tiers_ns = a->cfg.compact_tiers_ns,
                         .ntiers = a->cfg.ncompact_tiers};
    char cache_dir[2100];
    if (clustered(a) && cluster_config(a, &sc, cache_dir, sizeof cache_dir)) return 1;
    a->decode_budget.cap = a->cfg.max_decode_memory;
    a->decode_budget.flag = "--max-decode-memory", a->decode_budget.work = "decode";
    a->query_budget.cap = a->cfg.max_query_memory;
    a->query_budget.flag = "--max-query-memory", a->query_budget.work = "query";
    a->limits = (ingest_limits_t){a->cfg.max_decompressed_bytes, a->cfg.max_samples, a->cfg.max_labels,
                                  &a->decode_budget, a->cfg.max_label_value_bytes};
    pthread_mutex_init(&a->buckets_mu, NULL);
    pthread_mutex_init(&a->peers_mu, NULL);
    pthread_mutex_init(&a->settings_mu, NULL);
    hr_err_t err = {0};
    if (!(a->store = store_open(&sc, &err))) {
        fprintf(stderr, "hearth: cannot open data dir %s: %s\n", a->cfg.data_dir, err.msg);
        return 1;
    }
    index_set_series_limit(store_index(a->store), a->cfg.max_series_per_tenant);
    if (symbolize_start(a, &err)) {
        fprintf(stderr, "hearth: %s\n", err.msg);
        store_close(a->store);
        return 1;
    }
    pthread_rwlock_init(&a->auth_lock, NULL);
    if (a->cfg.auth_file[0] && !(a->auth = auth_load(a->cfg.auth_file, &err))) {
        fprintf(stderr, "hearth: %s\n", err.msg);
        store_close(a->store);
        return 1;
    }
    if (a->auth) log_info("auth.loaded", "credentials=%zu", auth_count(a->auth));
    if (rules_load(a, a->cfg.recording_rules, &err)) { /* before any request can read them */
        fprintf(stderr, "hearth: %s\n", err.msg);
        rules_stop(a);
        store_close(a->store);
        return 1;
    }

    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL); /* every thread inherits this; main waits */
    signal(SIGPIPE, SIG_IGN);
    unsigned idle_s = (unsigned)((a->cfg.idle_timeout_ns + 999999999) / 1000000000);
    http_config_t hc = {.listen = a->cfg.listen,
                        .tls_cert = a->cfg.tls_cert[0] ? a->cfg.tls_cert : NULL,
                        .tls_key = a->cfg.tls_key[0] ? a->cfg.tls_key : NULL,
                        .max_conns = a->cfg.max_connections,
                        .max_conns_per_ip = a->cfg.max_connections_per_ip,
                        .idle_timeout_s = idle_s,
                        .read_timeout_ns = a->cfg.request_read_timeout_ns,
                        .max_body = a->cfg.max_body_bytes,
                        .max_inflight_body = a->cfg.max_inflight_body_bytes,
                        .budget_refusals = &a->metrics.refused[LIMIT_INFLIGHT_BODY],
                        .read_timeouts = &a->metrics.refused[LIMIT_READ_TIMEOUT]};
    http_router_t router = {app_admit, app_handle, app_release, a};
    http_server_t *http = http_start(&hc, &router, &err);
    if (!http) {
        fprintf(stderr, "hearth: %s\n", err.msg);
        rules_stop(a);
        store_close(a->store);
        return 1;
    }
    atomic_store(&a->http, http);
    log_info("server.listening", "addr=%s tls=%s data_dir=%s version=%s", a->cfg.listen,
             a->cfg.tls_cert[0] ? "on" : "off", a->cfg.data_dir, HEARTH_VERSION);
    wal_scan_t ws;
    int64_t t0 = time(NULL);
    if (ingest_replay_wal(a->store, &a->limits, &ws, &err)) {
        fprintf(stderr, "hearth: WAL replay failed: %s\n", err.msg);
        http_stop(http);
        rules_stop(a);
        store_close(a->store);
        return 1;
    }
    a->metrics.wal_replayed = ws.records;
    a->metrics.wal_replay_skipped = ws.skipped;
    a->metrics.wal_corrupt = ws.corrupt;
    if (ws.corrupt)
        log_error("wal.corruption",
                  "damaged_regions=%zu bytes=%llu (skipped; the records around them were replayed; "
                  "run hearth check)",
                  ws.corrupt, (unsigned long long)ws.corrupt_bytes);
    log_info("wal.replayed", "records=%zu skipped=%zu corrupt=%zu seconds=%lld", ws.records, ws.skipped, ws.corrupt,
             (long long)(time(NULL) - t0));
    if (a->cfg.scrape_config[0]) { /* before ready: /ready then implies /api/v1/targets lists them */
        /* In a cluster, heard of and told its share before the first scrape. */
        char **names = NULL;
        size_t n = 0;
        hr_err_t e = {0};
        int shard = clustered(a),
            known = shard &&
                    index_heartbeat(store_index(a->store), a->node, config_target_name(a->cfg.target), a->cfg.listen, 1,
                                    &e) == 0 &&
                    index_scrapers(store_index(a->store), SCRAPER_MAX_AGE_S, &names, &n, &e) == 0;
        if (shard && !known) log_warn("cluster.heartbeat_failed", "err=\"%s\"", e.msg);
        scrape_shard_t sh = {a->node, names, n};
        scraper_t *sc = scraper_start(a->cfg.scrape_config, a, shard ? &sh : NULL, &err);
        for (size_t i = 0; i < n; i++) free(names[i]);
        free(names);
        if (!sc) {
            fprintf(stderr, "hearth: %s\n", err.msg);
            http_stop(http);
            rules_stop(a);
            store_close(a->store);
            return 1;
        }
        atomic_store(&a->scraper, sc);
    }
    grpc_server_t *grpc = NULL;
    if (rules_start(a, &err) || start_grpc(a, &router, &grpc, &err)) {
        fprintf(stderr, "hearth: %s\n", err.msg);
        http_stop(http);
        scraper_stop(atomic_exchange(&a->scraper, NULL));
        rules_stop(a);
        store_close(a->store);
        return 1;
    }
    atomic_store(&a->ready, 1);
    log_info("server.ready", "url=%s://%s/ data_dir=%s", a->cfg.tls_cert[0] ? "https" : "http", a->cfg.listen,
             a->cfg.data_dir);
    cutter_t cut = {.app = a, .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    cutter_t fl = {.app = a, .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    pthread_t th, flt;
    pthread_create(&th, NULL, cutter_main, &cut);
    int flushing = clustered(a) && pthread_create(&flt, NULL, flusher_main, &fl) == 0;
    int sig;
    while (sigwait(&sigs, &sig) == 0 && sig == SIGHUP) reload_auth(a);
    log_info("server.stopping", "signal=%d", sig);
    atomic_store(&a->stopping, 1);
    cutter_stop(&cut, th);
    /* Every producer of uploads stops before the flusher: in a cluster an upload in flight
     * (a request, a scrape) is answered only once a flush stored it. */
    grpc_stop(grpc);
    http_stop(http); /* waits for in-flight requests, which may read a->scraper (/metrics) */
    scraper_stop(atomic_exchange(&a->scraper, NULL));
    if (flushing) cutter_stop(&fl, flt);
    rules_stop(a); /* after http: the API reads the provisioned rules */
    int rc = 0;
    if (store_cut(a->store, &err)) {
        log_error("head.flush_failed", "err=\"%s\" (the WAL still holds the data)", err.msg);
        rc = 1;
    }
    store_close(a->store);
    objstore_free(a->objects);
    free(a->buckets);
    app_peers_free(a);
    auth_free(a->auth);
    symbolizer_free(a->symbolizer);
    debuginfo_free(a->debuginfo);
    log_info("server.stopped", "%s", "");
    return rc;
}

int serve_main(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--print-routes")) {
            app_print_routes(stdout);
            return 0;
        }
    /* glibc gives each thread that allocates its own arena, up to 8 per core. A head of
     * hundreds of MB is built by many connection threads, freed at a cut and built again:
     * spread over many arenas, the freed memory fragments and the peak RSS creeps up hour
     * after hour (200 services, hourly cuts: 386 MiB after 12 hours, 542 MiB after 7 days).
     * Two arenas, one per core here, keep that memory reused (316 MiB after 12 hours). */
    mallopt(M_ARENA_MAX, 2);
    /* A query allocates and frees tens of MB (its result's symbols and tree, the
     * answer's text). By default glibc maps the large blocks afresh and hands freed
     * memory back to the kernel, so every query paid its page faults and TLB flushes
     * again: a fifth of a warm query's CPU. Kept for reuse instead, a warm 1-day query
     * over 200 services' hourly blocks took 6.9 ms instead of 11.1 (peak RSS 35 MiB
     * either way); building that day's store peaked at 371 MiB instead of 328. */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
    static app_t app; /* large; lives for the process */
    int rc = config_load(&app.cfg, argc, argv, stderr);
    if (rc) return rc > 0 ? 0 : 2;
    log_set_level(app.cfg.log_level);
    log_set_json(app.cfg.log_json);
    default_web_dir(&app.cfg, argv[0]);
    return serve(&app);
}
