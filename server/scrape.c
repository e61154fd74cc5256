/* scrape.c - see scrape.h. */
#include "server/scrape.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/client.h"
#include "common/jsonw.h"
#include "common/log.h"
#include "common/timeparse.h"
#include "common/vec.h"
#include "ingest/push.pb-c.h"
#include "server/app.h"

typedef struct {
    char name[64], path[512];
    /* health, guarded by the scraper's mutex */
    int up;
    int64_t last_ns, duration_ns;
    unsigned long long scrapes, failures;
    char error[512];
} job_t;

typedef struct {
    char job[128], url[512], instance[256], tenant[129];
    labels_t labels;
    int64_t interval_ns;
    long timeout_s; /* per request: the CPU profile's duration plus slack */
    job_t *jobs;
    size_t njobs;
    pthread_t thread;
    struct scraper *owner;
} target_t;

struct scraper {
    app_t *app;
    target_t *targets;
    size_t ntargets;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
};

static int profile_path(json_t *p, int cpu_seconds, job_t *j, hr_err_t *err) {
    static const char *delta[] = {"allocs", "mutex", "block"};
    if (json_is_object(p)) {
        const char *n = json_string_value(json_object_get(p, "name"));
        const char *path = json_string_value(json_object_get(p, "path"));
        if (!n || !path) return hr_fail(err, HR_EINVAL, "scrape config: a custom profile needs name and path");
        snprintf(j->name, sizeof j->name, "%s", n);
        snprintf(j->path, sizeof j->path, "%s", path);
        return 0;
    }
    const char *n = json_string_value(p);
    if (!n) return hr_fail(err, HR_EINVAL, "scrape config: profiles are names or {name, path} objects");
    snprintf(j->name, sizeof j->name, "%s", n);
    if (!strcmp(n, "cpu")) {
        snprintf(j->path, sizeof j->path, "/debug/pprof/profile?seconds=%d", cpu_seconds);
        return 0;
    }
    for (size_t i = 0; i < 3; i++)
        if (!strcmp(n, delta[i])) {
            snprintf(j->path, sizeof j->path, "/debug/pprof/%s?seconds=%d", n, cpu_seconds);
            return 0;
        }
    if (!strcmp(n, "heap") || !strcmp(n, "goroutine")) {
        snprintf(j->path, sizeof j->path, "/debug/pprof/%s", n);
        return 0;
    }
    return hr_fail(err, HR_EINVAL, "scrape config: unknown profile `%s` (cpu, heap, allocs, mutex, block, goroutine, "
                                   "or {\"name\", \"path\"})", n);
}

static int parse_duration(json_t *v, int64_t def, int64_t *out, const char *what, hr_err_t *err) {
    *out = def;
    if (!v) return 0;
    if (!json_is_string(v) || duration_parse(json_string_value(v), out) || *out < 1000000000LL)
        return hr_fail(err, HR_EINVAL, "scrape config: `%s` must be a duration of at least 1s, like \"15s\"", what);
    return 0;
}

static int parse_target(json_t *t, int64_t interval, int cpu_seconds, target_t *out, hr_err_t *err) {
    const char *job = json_string_value(json_object_get(t, "job"));
    const char *url = json_string_value(json_object_get(t, "url"));
    if (!job || !url || strncmp(url, "http", 4))
        return hr_fail(err, HR_EINVAL, "scrape config: every target needs \"job\" and an http(s) \"url\"");
    snprintf(out->job, sizeof out->job, "%s", job);
    const char *tenant = json_string_value(json_object_get(t, "tenant"));
    if (tenant && !tenant_id_valid(tenant))
        return hr_fail(err, HR_EINVAL, "scrape config: target %s: bad tenant `%s` (1-128 of A-Z a-z 0-9 - _ .)", job, tenant);
    snprintf(out->tenant, sizeof out->tenant, "%s", tenant ? tenant : APP_TENANT);
    snprintf(out->url, sizeof out->url, "%s", url);
    const char *host = strstr(url, "://");
    host = host ? host + 3 : url;
    snprintf(out->instance, sizeof out->instance, "%.*s", (int)strcspn(host, "/"), host);
    labels_init(&out->labels);
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(t, "labels"), k, v) {
        if (!json_is_string(v) || !label_name_valid(k))
            return hr_fail(err, HR_EINVAL, "scrape config: target %s: label `%s` must be a valid name with a string value", job, k);
        labels_set(&out->labels, k, json_string_value(v));
    }
    labels_set(&out->labels, "job", job);
    labels_set(&out->labels, "instance", out->instance);
    if (!labels_get(&out->labels, "service_name")) labels_set(&out->labels, "service_name", job);
    if (parse_duration(json_object_get(t, "interval"), interval, &out->interval_ns, "interval", err)) return -1;
    json_t *profiles = json_object_get(t, "profiles");
    static const char *defaults[] = {"cpu", "heap", "allocs", "mutex", "block", "goroutine"};
    size_t n = profiles ? json_array_size(profiles) : 6;
    if (!n) return hr_fail(err, HR_EINVAL, "scrape config: target %s lists no profiles", job);
    out->jobs = calloc(n, sizeof *out->jobs);
    if (!out->jobs) return hr_fail(err, HR_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *p = profiles ? json_array_get(profiles, i) : json_string(defaults[i]);
        int rc = profile_path(p, cpu_seconds, &out->jobs[i], err);
        if (!profiles) json_decref(p);
        if (rc) return -1;
        out->njobs++;
    }
    out->timeout_s = cpu_seconds + 15;
    if ((int64_t)cpu_seconds * 1000000000LL >= out->interval_ns)
        return hr_fail(err, HR_EINVAL, "scrape config: target %s: cpu_seconds must be shorter than the interval", job);
    return 0;
}

/* Wraps a fetched pprof as a push.v1 request so it shares the push write path. */
static int store_profile(target_t *t, const uint8_t *pprof, size_t n, hr_err_t *err) {
    Push__V1__LabelPair *pairs = calloc(t->labels.n, sizeof *pairs), **pp = calloc(t->labels.n, sizeof *pp);
    Push__V1__RawSample sample = PUSH__V1__RAW_SAMPLE__INIT, *sp = &sample;
    Push__V1__RawProfileSeries series = PUSH__V1__RAW_PROFILE_SERIES__INIT, *ser = &series;
    Push__V1__PushRequest req = PUSH__V1__PUSH_REQUEST__INIT;
    if (!pairs || !pp) {
        free(pairs), free(pp);
        return hr_fail(err, HR_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < t->labels.n; i++) {
        push__v1__label_pair__init(&pairs[i]);
        pairs[i].name = t->labels.v[i].name, pairs[i].value = t->labels.v[i].value;
        pp[i] = &pairs[i];
    }
    sample.raw_profile.data = (uint8_t *)pprof, sample.raw_profile.len = n;
    series.n_labels = t->labels.n, series.labels = pp, series.n_samples = 1, series.samples = &sp;
    req.n_series = 1, req.series = &ser;
    size_t len = push__v1__push_request__get_packed_size(&req);
    uint8_t *body = malloc(len ? len : 1);
    int rc = -1;
    if (!body) {
        hr_fail(err, HR_ENOMEM, "out of memory");
    } else {
        push__v1__push_request__pack(&req, body);
        ingest_request_t r = {.tenant = t->tenant, .name = "", .format = INGEST_PUSH_PROTO,
                              .received_ns = time_now_ns(), .body = body, .body_len = len};
        rc = app_store_request(t->owner->app, &r, n, err);
    }
    free(body), free(pairs), free(pp);
    return rc;
}

static void scrape_one(target_t *t, job_t *j) {
    char url[1100];
    snprintf(url, sizeof url, "%s%s", t->url, j->path);
    int64_t t0 = time_now_ns();
    cli_resp_t r;
    hr_err_t err = {0};
    char why[512] = "";
    if (cli_http("GET", url, NULL, 0, NULL, t->timeout_s, &r)) snprintf(why, sizeof why, "%s", r.error);
    else if (store_profile(t, r.body.data, r.body.len, &err)) snprintf(why, sizeof why, "storing: %s", err.msg);
    buf_free(&r.body);
    pthread_mutex_lock(&t->owner->mu);
    j->last_ns = t0;
    j->duration_ns = time_now_ns() - t0;
    j->scrapes++;
    j->up = !why[0];
    if (why[0]) j->failures++;
    snprintf(j->error, sizeof j->error, "%s", why);
    pthread_mutex_unlock(&t->owner->mu);
    if (why[0]) log_warn("scrape.failed", "job=%s profile=%s url=%s err=\"%s\"", t->job, j->name, url, why);
}

static void *target_main(void *arg) {
    target_t *t = arg;
    scraper_t *s = t->owner;
    for (;;) {
        int64_t start = time_now_ns();
        for (size_t i = 0; i < t->njobs; i++) {
            pthread_mutex_lock(&s->mu);
            int stop = s->stop;
            pthread_mutex_unlock(&s->mu);
            if (stop) return NULL;
            scrape_one(t, &t->jobs[i]);
        }
        int64_t next = start + t->interval_ns;
        struct timespec ts = {(time_t)(next / 1000000000), (long)(next % 1000000000)};
        pthread_mutex_lock(&s->mu);
        while (!s->stop && pthread_cond_timedwait(&s->cv, &s->mu, &ts) == 0) {}
        int stop = s->stop;
        pthread_mutex_unlock(&s->mu);
        if (stop) return NULL;
    }
}

static void free_targets(scraper_t *s) {
    for (size_t i = 0; i < s->ntargets; i++) {
        labels_destroy(&s->targets[i].labels);
        free(s->targets[i].jobs);
    }
    free(s->targets);
}

scraper_t *scraper_start(const char *path, app_t *app, hr_err_t *err) {
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    if (!json_is_object(doc)) {
        hr_fail(err, HR_EINVAL, "scrape config %s: %s (line %d)", path, je.text, je.line);
        json_decref(doc);
        return NULL;
    }
    scraper_t *s = calloc(1, sizeof *s);
    json_t *targets = json_object_get(doc, "targets");
    int64_t interval;
    json_t *cs = json_object_get(doc, "cpu_seconds");
    int cpu_seconds = cs ? (int)json_integer_value(cs) : 10;
    if (!s || !json_is_array(targets) || !json_array_size(targets)) {
        hr_fail(err, HR_EINVAL, "scrape config %s: needs a non-empty \"targets\" array", path);
        goto fail;
    }
    if (cpu_seconds < 1) {
        hr_fail(err, HR_EINVAL, "scrape config: cpu_seconds must be a positive integer");
        goto fail;
    }
    if (parse_duration(json_object_get(doc, "interval"), 15000000000LL, &interval, "interval", err)) goto fail;
    s->app = app;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->targets = calloc(json_array_size(targets), sizeof *s->targets);
    if (!s->targets) goto fail;
    for (size_t i = 0; i < json_array_size(targets); i++) {
        s->targets[i].owner = s;
        s->ntargets++;
        if (parse_target(json_array_get(targets, i), interval, cpu_seconds, &s->targets[i], err)) goto fail;
    }
    json_decref(doc);
    for (size_t i = 0; i < s->ntargets; i++) pthread_create(&s->targets[i].thread, NULL, target_main, &s->targets[i]);
    log_info("scrape.started", "targets=%zu config=%s", s->ntargets, path);
    return s;
fail:
    json_decref(doc);
    if (s) free_targets(s);
    free(s);
    return NULL;
}

void scraper_stop(scraper_t *s) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    for (size_t i = 0; i < s->ntargets; i++) pthread_join(s->targets[i].thread, NULL);
    free_targets(s);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

void scraper_targets_json(scraper_t *s, buf_t *out) {
    buf_printf(out, "{\"targets\":[");
    pthread_mutex_lock(&s->mu);
    int first = 1;
    for (size_t i = 0; i < s->ntargets; i++) {
        const target_t *t = &s->targets[i];
        for (size_t k = 0; k < t->njobs; k++, first = 0) {
            const job_t *j = &t->jobs[k];
            buf_printf(out, "%s{\"job\":", first ? "" : ",");
            jsonw_str(out, t->job);
            buf_printf(out, ",\"url\":");
            jsonw_str(out, t->url);
            buf_printf(out, ",\"profile\":");
            jsonw_str(out, j->name);
            buf_printf(out, ",\"labels\":{");
            for (size_t l = 0; l < t->labels.n; l++) {
                if (l) buf_putc(out, ',');
                jsonw_str(out, t->labels.v[l].name);
                buf_putc(out, ':');
                jsonw_str(out, t->labels.v[l].value);
            }
            buf_printf(out, "},\"health\":\"%s\",\"lastScrape\":%lld,\"lastDurationSeconds\":%.3f,\"lastError\":",
                       !j->scrapes ? "unknown" : j->up ? "up" : "down", (long long)(j->last_ns / 1000000000),
                       (double)j->duration_ns / 1e9);
            jsonw_str(out, j->error);
            buf_printf(out, ",\"scrapes\":%llu,\"failures\":%llu}", j->scrapes, j->failures);
        }
    }
    pthread_mutex_unlock(&s->mu);
    buf_printf(out, "]}");
}

void scraper_metrics(scraper_t *s, buf_t *o) {
    buf_printf(o, "# HELP hearth_scrape_up 1 if the last scrape of a target's profile succeeded.\n# TYPE hearth_scrape_up gauge\n");
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->ntargets; i++)
        for (size_t k = 0; k < s->targets[i].njobs; k++) {
            const target_t *t = &s->targets[i];
            const job_t *j = &t->jobs[k];
            const char *lbl = "job=\"%s\",instance=\"%s\",profile=\"%s\"";
            char l[512];
            snprintf(l, sizeof l, lbl, t->job, t->instance, j->name);
            buf_printf(o, "hearth_scrape_up{%s} %d\nhearth_scrape_duration_seconds{%s} %.3f\n"
                          "hearth_scrapes_total{%s} %llu\nhearth_scrape_failures_total{%s} %llu\n",
                       l, j->up, l, (double)j->duration_ns / 1e9, l, j->scrapes, l, j->failures);
        }
    pthread_mutex_unlock(&s->mu);
}
