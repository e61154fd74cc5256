/* scrape.c - see scrape.h.
 *
 * One thread per (target, profile), each on its own schedule: a profile that takes
 * N seconds to fetch (CPU, the ?seconds=N deltas) must not hold back the others, and
 * CPU, profiled back to back, is never paused while something else is fetched. The
 * number of threads is bounded by SCRAPE_MAX_JOBS, checked when the config is read.
 * A fetch in flight gives up when the scraper stops (client_get_bounded's cancel
 * flag), so a stop waits about a second, not for a 10 s CPU profile. */
#include "server/scrape.h"

#include <assert.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/jsonw.h"
#include "common/log.h"
#include "common/timeparse.h"
#include "ingest/pprof_edit.h"
#include "server/app.h"
#include "wire/client.h"

#define SCRAPE_MAX_JOBS 1024    /* (target, profile) pairs, one thread each */
#define SCRAPE_STACK (1u << 20) /* per job thread: a fetch, then the ingest path */
#define SCRAPE_SLACK_S 15       /* timeout past the profile's own duration */

/* What each of Go's net/http/pprof profiles is, and how it is stored. Go's
 * block and mutex profiles have the same sample types (contentions/count,
 * delay/nanoseconds), so only the endpoint tells them apart: the type name is set
 * from it (__name__ of the push, as Pyroscope's agents do). An allocs?seconds=N
 * delta's inuse_* are differences and a heap snapshot's alloc_* count since the
 * process started, so each keeps only the types that mean what they say. */
typedef struct {
    const char *name;      /* as the config names it */
    const char *path;      /* %d: cpu_seconds */
    const char *type_name; /* NAME of its profile types (ptype.h) */
    const char *keep[2];   /* sample types kept; {NULL}: all */
    int continuous;        /* profiled back to back, not every interval */
} profile_kind_t;

static const profile_kind_t KINDS[] = {
    {"cpu", "/debug/pprof/profile?seconds=%d", "process_cpu", {NULL}, 1},
    {"heap", "/debug/pprof/heap", "memory", {"inuse_objects", "inuse_space"}, 0},
    {"allocs", "/debug/pprof/allocs?seconds=%d", "memory", {"alloc_objects", "alloc_space"}, 0},
    {"mutex", "/debug/pprof/mutex?seconds=%d", "mutex", {NULL}, 0},
    {"block", "/debug/pprof/block?seconds=%d", "block", {NULL}, 0},
    {"goroutine", "/debug/pprof/goroutine", "goroutine", {NULL}, 0},
};
#define NKINDS (sizeof KINDS / sizeof *KINDS)

struct target;

typedef struct {
    char name[64], path[512];
    const profile_kind_t *kind; /* NULL: a custom profile named unlike any kind */
    buf_t labels;               /* its series labels, packed for ingest_request_t (series_labels) */
    int64_t period_ns;          /* from one fetch's start to the next */
    struct target *target;
    pthread_t thread;
    int started;
    /* health, guarded by the scraper's mutex */
    int up;
    int64_t last_ns, duration_ns;
    unsigned long long scrapes, failures;
    char error[512];
} job_t;

typedef struct target {
    char job[128], url[512], instance[256], tenant[129];
    labels_t labels;
    int64_t interval_ns;
    long timeout_s; /* per request: the longest profile's duration plus slack */
    job_t *jobs;
    size_t njobs;
    struct scraper *owner;
} target_t;

struct scraper {
    app_t *app;
    target_t *targets;
    size_t ntargets;
    atomic_int stop; /* also the cancel flag of every fetch in flight */
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

static const profile_kind_t *kind_named(const char *n) {
    for (size_t i = 0; i < NKINDS; i++)
        if (!strcmp(KINDS[i].name, n)) return &KINDS[i];
    return NULL;
}

/* A custom {name, path} profile named like a kind is stored as that kind. */
static int profile_path(json_t *p, int cpu_seconds, job_t *j, hr_err_t *err) {
    if (json_is_object(p)) {
        const char *n = json_string_value(json_object_get(p, "name"));
        const char *path = json_string_value(json_object_get(p, "path"));
        if (!n || !path) return hr_fail(err, HR_EINVAL, "scrape config: a custom profile needs name and path");
        snprintf(j->name, sizeof j->name, "%s", n);
        snprintf(j->path, sizeof j->path, "%s", path);
        j->kind = kind_named(n);
        return 0;
    }
    const char *n = json_string_value(p);
    if (!n) return hr_fail(err, HR_EINVAL, "scrape config: profiles are names or {name, path} objects");
    if (!(j->kind = kind_named(n)))
        return hr_fail(err, HR_EINVAL,
                       "scrape config: unknown profile `%s` (cpu, heap, allocs, mutex, block, goroutine, "
                       "or {\"name\", \"path\"})",
                       n);
    snprintf(j->name, sizeof j->name, "%s", n);
    snprintf(j->path, sizeof j->path, j->kind->path, cpu_seconds);
    return 0;
}

static int parse_duration(json_t *v, int64_t def, int64_t *out, const char *what, hr_err_t *err) {
    *out = def;
    if (!v) return 0;
    if (!json_is_string(v) || duration_parse(json_string_value(v), out) || *out < 1000000000LL)
        return hr_fail(err, HR_EINVAL, "scrape config: `%s` must be a duration of at least 1s, like \"15s\"", what);
    return 0;
}

static int parse_labels(json_t *t, target_t *out, hr_err_t *err) {
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(t, "labels"), k, v) {
        if (!json_is_string(v) || !label_name_valid(k))
            return hr_fail(err, HR_EINVAL,
                           "scrape config: target %s: label `%s` must be a valid name with a string value", out->job,
                           k);
        labels_set(&out->labels, k, json_string_value(v));
    }
    labels_set(&out->labels, "job", out->job);
    labels_set(&out->labels, "instance", out->instance);
    if (!labels_get(&out->labels, "service_name")) labels_set(&out->labels, "service_name", out->job);
    return 0;
}

/* The series labels of a job's profiles: the target's (never none: job, instance,
 * service_name), plus __name__ when the kind is known (the profile type's NAME, as
 * Pyroscope's agents push it). */
static int series_labels(job_t *j, hr_err_t *err) {
    labels_t l;
    labels_init(&l);
    int rc = labels_copy(&l, &j->target->labels);
    if (rc == 0 && j->kind) rc = labels_set(&l, "__name__", j->kind->type_name);
    if (rc == 0) ingest_labels_pack(&l, &j->labels);
    labels_destroy(&l);
    if (rc || j->labels.oom) return hr_fail(err, HR_ENOMEM, "out of memory");
    assert(j->labels.len); /* a NULL `labels` would make the request read `name` instead */
    return 0;
}

static int parse_profiles(json_t *t, int cpu_seconds, target_t *out, hr_err_t *err) {
    json_t *profiles = json_object_get(t, "profiles");
    static const char *defaults[] = {"cpu", "heap", "allocs", "mutex", "block", "goroutine"};
    size_t n = profiles ? json_array_size(profiles) : 6;
    if (!n) return hr_fail(err, HR_EINVAL, "scrape config: target %s lists no profiles", out->job);
    out->jobs = calloc(n, sizeof *out->jobs);
    if (!out->jobs) return hr_fail(err, HR_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *p = profiles ? json_array_get(profiles, i) : json_string(defaults[i]);
        job_t *j = &out->jobs[out->njobs++]; /* counted before it can fail: free_targets frees its labels */
        j->target = out;
        buf_init(&j->labels);
        int rc = profile_path(p, cpu_seconds, j, err);
        if (!profiles) json_decref(p);
        if (rc || series_labels(j, err)) return -1;
        /* CPU back to back: one cpu_seconds profile after another, whatever the interval. */
        j->period_ns = j->kind && j->kind->continuous ? cpu_seconds * 1000000000LL : out->interval_ns;
    }
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
        return hr_fail(err, HR_EINVAL, "scrape config: target %s: bad tenant `%s` (1-128 of A-Z a-z 0-9 - _ .)", job,
                       tenant);
    snprintf(out->tenant, sizeof out->tenant, "%s", tenant ? tenant : APP_TENANT);
    snprintf(out->url, sizeof out->url, "%s", url);
    const char *host = strstr(url, "://");
    host = host ? host + 3 : url;
    snprintf(out->instance, sizeof out->instance, "%.*s", (int)strcspn(host, "/"), host);
    labels_init(&out->labels);
    out->timeout_s = cpu_seconds + SCRAPE_SLACK_S;
    if (parse_labels(t, out, err) ||
        parse_duration(json_object_get(t, "interval"), interval, &out->interval_ns, "interval", err))
        return -1;
    return parse_profiles(t, cpu_seconds, out, err);
}

/* Said once at start: a profile that takes longer than the interval cannot be
 * fetched every interval; it is fetched back to back instead. */
static void warn_long_profiles(const target_t *t, int cpu_seconds) {
    if ((int64_t)cpu_seconds * 1000000000LL <= t->interval_ns) return;
    log_warn("scrape.cpu_seconds_over_interval",
             "job=%s cpu_seconds=%d interval_seconds=%lld msg=\"CPU and ?seconds=N delta profiles take longer than the "
             "interval: each is fetched again as soon as the last one returns, every %d s\"",
             t->job, cpu_seconds, (long long)(t->interval_ns / 1000000000), cpu_seconds);
}

/* Stores a fetched pprof under the job's series labels, through the same write
 * path as uploads; the WAL record is the pprof with those labels. */
static int store_profile(const job_t *j, const uint8_t *pprof, size_t n, hr_err_t *err) {
    const target_t *t = j->target;
    ingest_request_t r = {.tenant = t->tenant,
                          .name = "",
                          .format = INGEST_PPROF,
                          .received_ns = time_now_ns(),
                          .body = pprof,
                          .body_len = n,
                          .labels = (const char *)j->labels.data,
                          .labels_len = j->labels.len};
    return app_submit(t->owner->app, &r, n, err);
}

/* Keeps the kind's sample types, then stores. */
static int store_kept(const job_t *j, const buf_t *fetched, hr_err_t *err) {
    const profile_kind_t *k = j->kind;
    if (!k || !k->keep[0]) return store_profile(j, fetched->data, fetched->len, err);
    size_t nkeep = k->keep[1] ? 2 : 1;
    buf_t kept;
    buf_init(&kept);
    int rc = pprof_keep_types(fetched->data, fetched->len, j->target->owner->app->limits.max_decompressed, k->keep,
                              nkeep, &kept, err);
    if (rc == 0) rc = store_profile(j, kept.data, kept.len, err);
    buf_free(&kept);
    return rc;
}

static void scrape_one(job_t *j) {
    target_t *t = j->target;
    scraper_t *s = t->owner;
    char url[1100];
    snprintf(url, sizeof url, "%s%s", t->url, j->path);
    int64_t t0 = time_now_ns();
    client_resp_t r;
    hr_err_t err = {0};
    char why[512] = "";
    if (client_get_bounded(url, t->timeout_s, s->app->cfg.max_body_bytes, &s->stop, &r))
        snprintf(why, sizeof why, "%s", r.error);
    else if (store_kept(j, &r.body, &err)) snprintf(why, sizeof why, "storing: %s", err.msg);
    buf_free(&r.body);
    if (atomic_load(&s->stop)) return; /* a cancelled fetch says nothing about the target */
    pthread_mutex_lock(&s->mu);
    /* Log changes, not states: a target down for a day logs once, then its recovery. */
    int was_up = j->up || j->scrapes == 0, changed = was_up != !why[0] || (j->scrapes == 0 && why[0]);
    j->last_ns = t0;
    j->duration_ns = time_now_ns() - t0;
    j->scrapes++;
    j->up = !why[0];
    if (why[0]) j->failures++;
    snprintf(j->error, sizeof j->error, "%s", why);
    pthread_mutex_unlock(&s->mu);
    if (changed && why[0]) log_warn("scrape.failed", "job=%s profile=%s url=%s err=\"%s\"", t->job, j->name, url, why);
    else if (changed) log_info("scrape.recovered", "job=%s profile=%s url=%s", t->job, j->name, url);
}

/* Sleeps until the wall-clock time at_ns or a stop; returns 1 on a stop. */
static int wait_until(scraper_t *s, int64_t at_ns) {
    struct timespec ts = {(time_t)(at_ns / 1000000000), (long)(at_ns % 1000000000)};
    pthread_mutex_lock(&s->mu);
    while (!atomic_load(&s->stop) && pthread_cond_timedwait(&s->cv, &s->mu, &ts) == 0) {
    }
    pthread_mutex_unlock(&s->mu);
    return atomic_load(&s->stop);
}

/* One (target, profile): fetch, then wait out the rest of the period; a fetch longer
 * than the period is followed at once by the next. */
static void *job_main(void *arg) {
    job_t *j = arg;
    scraper_t *s = j->target->owner;
    while (!atomic_load(&s->stop)) {
        int64_t start = time_now_ns();
        scrape_one(j);
        if (wait_until(s, start + j->period_ns)) break;
    }
    return NULL;
}

static void free_targets(scraper_t *s) {
    for (size_t i = 0; i < s->ntargets; i++) {
        labels_destroy(&s->targets[i].labels);
        for (size_t k = 0; k < s->targets[i].njobs; k++) buf_free(&s->targets[i].jobs[k].labels);
        free(s->targets[i].jobs);
    }
    free(s->targets);
}

static int parse_config(json_t *doc, scraper_t *s, hr_err_t *err) {
    json_t *targets = json_object_get(doc, "targets");
    json_t *cs = json_object_get(doc, "cpu_seconds");
    int cpu_seconds = cs ? (int)json_integer_value(cs) : 10;
    int64_t interval;
    if (!json_is_array(targets) || !json_array_size(targets))
        return hr_fail(err, HR_EINVAL, "scrape config: needs a non-empty \"targets\" array");
    if (cpu_seconds < 1 || cpu_seconds > 3600)
        return hr_fail(err, HR_EINVAL, "scrape config: cpu_seconds must be an integer from 1 to 3600");
    if (parse_duration(json_object_get(doc, "interval"), 15000000000LL, &interval, "interval", err)) return -1;
    if (!(s->targets = calloc(json_array_size(targets), sizeof *s->targets)))
        return hr_fail(err, HR_ENOMEM, "out of memory");
    size_t jobs = 0;
    for (size_t i = 0; i < json_array_size(targets); i++) {
        s->targets[i].owner = s;
        s->ntargets++;
        if (parse_target(json_array_get(targets, i), interval, cpu_seconds, &s->targets[i], err)) return -1;
        if ((jobs += s->targets[i].njobs) > SCRAPE_MAX_JOBS)
            return hr_fail(err, HR_EINVAL, "scrape config: over %d (target, profile) pairs", SCRAPE_MAX_JOBS);
        warn_long_profiles(&s->targets[i], cpu_seconds);
    }
    return 0;
}

static int start_jobs(scraper_t *s, hr_err_t *err) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, SCRAPE_STACK);
    int rc = 0;
    for (size_t i = 0; i < s->ntargets && rc == 0; i++)
        for (size_t k = 0; k < s->targets[i].njobs && rc == 0; k++) {
            job_t *j = &s->targets[i].jobs[k];
            if (pthread_create(&j->thread, &attr, job_main, j))
                rc = hr_fail(err, HR_ENOMEM, "cannot start a scrape thread");
            else j->started = 1;
        }
    pthread_attr_destroy(&attr);
    return rc;
}

static void join_jobs(scraper_t *s) {
    pthread_mutex_lock(&s->mu);
    atomic_store(&s->stop, 1);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    for (size_t i = 0; i < s->ntargets; i++)
        for (size_t k = 0; k < s->targets[i].njobs; k++)
            if (s->targets[i].jobs[k].started) pthread_join(s->targets[i].jobs[k].thread, NULL);
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
    if (!s) {
        json_decref(doc);
        hr_fail(err, HR_ENOMEM, "out of memory");
        return NULL;
    }
    s->app = app;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    int rc = parse_config(doc, s, err);
    json_decref(doc);
    if (rc == 0 && start_jobs(s, err)) {
        join_jobs(s);
        rc = -1;
    }
    if (rc) {
        free_targets(s);
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv);
        free(s);
        return NULL;
    }
    log_info("scrape.started", "targets=%zu config=%s", s->ntargets, path);
    return s;
}

void scraper_stop(scraper_t *s) {
    if (!s) return;
    join_jobs(s);
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
                       !j->scrapes ? "unknown"
                       : j->up     ? "up"
                                   : "down",
                       (long long)(j->last_ns / 1000000000), (double)j->duration_ns / 1e9);
            jsonw_str(out, j->error);
            buf_printf(out, ",\"scrapes\":%llu,\"failures\":%llu}", j->scrapes, j->failures);
        }
    }
    pthread_mutex_unlock(&s->mu);
    buf_printf(out, "]}");
}

/* The scrape metric families: each is written whole (HELP, TYPE, every target's
 * sample) before the next, as the exposition format requires. */
static const struct {
    const char *name, *type, *help;
} SCRAPE_FAMILIES[] = {
    {"hearth_scrape_up", "gauge", "1 if the last scrape of a target's profile succeeded."},
    {"hearth_scrape_duration_seconds", "gauge", "Duration of the last scrape of a target's profile."},
    {"hearth_scrapes_total", "counter", "Scrapes of a target's profile."},
    {"hearth_scrape_failures_total", "counter", "Failed scrapes of a target's profile."},
};

static void scrape_sample(buf_t *o, size_t family, const job_t *j) {
    switch (family) {
    case 0: buf_printf(o, "%d", j->up); break;
    case 1: buf_printf(o, "%.3f", (double)j->duration_ns / 1e9); break;
    case 2: buf_printf(o, "%llu", j->scrapes); break;
    default: buf_printf(o, "%llu", j->failures); break;
    }
}

void scraper_metrics(scraper_t *s, buf_t *o) {
    pthread_mutex_lock(&s->mu);
    for (size_t f = 0; f < sizeof SCRAPE_FAMILIES / sizeof *SCRAPE_FAMILIES; f++) {
        buf_printf(o, "# HELP %s %s\n# TYPE %s %s\n", SCRAPE_FAMILIES[f].name, SCRAPE_FAMILIES[f].help,
                   SCRAPE_FAMILIES[f].name, SCRAPE_FAMILIES[f].type);
        for (size_t i = 0; i < s->ntargets; i++)
            for (size_t k = 0; k < s->targets[i].njobs; k++) {
                const target_t *t = &s->targets[i];
                /* Not job/instance: Prometheus would rename those to exported_* when it
                 * scrapes Hearth, since it sets its own. */
                buf_printf(o, "%s{scrape_job=\"%s\",scrape_instance=\"%s\",profile=\"%s\"} ", SCRAPE_FAMILIES[f].name,
                           t->job, t->instance, t->jobs[k].name);
                scrape_sample(o, f, &t->jobs[k]);
                buf_putc(o, '\n');
            }
    }
    pthread_mutex_unlock(&s->mu);
}
