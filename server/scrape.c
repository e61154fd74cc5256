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

#include "common/hash.h"
#include "common/jsonw.h"
#include "common/log.h"
#include "common/timeparse.h"
#include "ingest/pprof_edit.h"
#include "common/vec.h"
#include "server/app.h"
#include "server/scrape_sd.h"
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
    char error[HR_MSG_MAX + 16];
} job_t;

typedef struct target {
    char job[128], url[512], instance[256], tenant[129];
    labels_t labels;
    int64_t interval_ns;
    long timeout_s; /* per request: the longest profile's duration plus slack */
    job_t *jobs;
    size_t njobs;
    struct scraper *owner;
    atomic_int stop; /* the target is going (or the scraper is): also its fetches' cancel flag */
    char *spec;      /* its config object as sorted JSON text: what discovery compares */
    int sd;          /* the discovery job (scraper.sd) it came from; -1 for "targets" */
} target_t;

struct scraper {
    app_t *app;
    target_t **targets; /* added and removed by discovery under mu */
    size_t ntargets, cap;
    size_t njobs; /* (target, profile) pairs running: at most SCRAPE_MAX_JOBS */
    int cpu_seconds;
    int64_t interval_ns;
    sd_job_t **sd; /* the config's "jobs" */
    size_t nsd;
    pthread_t sd_thread;
    int sd_started;
    atomic_int stop; /* the scraper is stopping: discovery's cancel flag */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* a cluster's division of the targets (scrape_shard_t), under mu: self NULL on one node */
    char *self;
    char **nodes;
    size_t nnodes;
};

/* Rendezvous hashing: the weight of node for a target key; the heaviest node takes it. */
static uint64_t shard_weight(const char *node, uint64_t key) {
    return hash_mix(hash_bytes(node, strlen(node), 0x5ca1ab1e), key);
}

/* The node whose share target t is (s->mu held): self, or one of the live nodes. */
static const char *shard_owner(const scraper_t *s, const target_t *t) {
    uint64_t key = hash_mix(hash_bytes(t->job, strlen(t->job), 1), hash_bytes(t->url, strlen(t->url), 2));
    const char *best = s->self;
    uint64_t w = shard_weight(s->self, key);
    for (size_t i = 0; i < s->nnodes; i++) {
        uint64_t x = shard_weight(s->nodes[i], key);
        if (x > w || (x == w && strcmp(s->nodes[i], best) < 0)) best = s->nodes[i], w = x;
    }
    return best;
}

/* 1 when this node scrapes t: always on one node. */
static int shard_mine(scraper_t *s, const target_t *t) {
    pthread_mutex_lock(&s->mu);
    int mine = !s->self || !strcmp(shard_owner(s, t), s->self);
    pthread_mutex_unlock(&s->mu);
    return mine;
}

static void free_names(char **v, size_t n) {
    for (size_t i = 0; v && i < n; i++) free(v[i]);
    free(v);
}

void scraper_set_shard(scraper_t *s, char *const *nodes, size_t n) {
    char **v = calloc(n ? n : 1, sizeof *v);
    size_t k = 0;
    for (size_t i = 0; v && i < n; i++)
        if (!(v[k++] = strdup(nodes[i]))) {
            free_names(v, k);
            v = NULL; /* out of memory: the last division stays */
        }
    if (!v) return;
    pthread_mutex_lock(&s->mu);
    char **old = s->nodes;
    size_t nold = s->nnodes;
    s->nodes = v, s->nnodes = n;
    pthread_mutex_unlock(&s->mu);
    free_names(old, nold);
}

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
    if (!labels_get(&out->labels, "job")) labels_set(&out->labels, "job", out->job);
    if (!labels_get(&out->labels, "instance")) labels_set(&out->labels, "instance", out->instance);
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
    char why[HR_MSG_MAX + 16] = "";
    if (client_get_bounded(url, t->timeout_s, s->app->cfg.max_body_bytes, &t->stop, &r))
        snprintf(why, sizeof why, "%s", r.error);
    else if (store_kept(j, &r.body, &err)) snprintf(why, sizeof why, "storing: %s", err.msg);
    buf_free(&r.body);
    if (atomic_load(&t->stop)) return; /* a cancelled fetch says nothing about the target */
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

/* Sleeps until the wall-clock time at_ns or until *stop is set (and the scraper's cv
 * broadcast); returns 1 on a stop. */
static int wait_until(scraper_t *s, const atomic_int *stop, int64_t at_ns) {
    struct timespec ts = {(time_t)(at_ns / 1000000000), (long)(at_ns % 1000000000)};
    pthread_mutex_lock(&s->mu);
    while (!atomic_load(stop) && pthread_cond_timedwait(&s->cv, &s->mu, &ts) == 0) {
    }
    pthread_mutex_unlock(&s->mu);
    return atomic_load(stop);
}

/* One (target, profile): fetch, then wait out the rest of the period; a fetch longer
 * than the period is followed at once by the next. */
static void *job_main(void *arg) {
    job_t *j = arg;
    target_t *t = j->target;
    while (!atomic_load(&t->stop)) {
        int64_t start = time_now_ns();
        if (shard_mine(t->owner, t)) scrape_one(j);
        if (wait_until(t->owner, &t->stop, start + j->period_ns)) break;
    }
    return NULL;
}

static void target_free(target_t *t) {
    if (!t) return;
    labels_destroy(&t->labels);
    for (size_t k = 0; k < t->njobs; k++) buf_free(&t->jobs[k].labels);
    free(t->jobs);
    free(t->spec);
    free(t);
}

/* A target from its config object (a "targets" entry, or one discovery made); NULL
 * with err on a bad one. */
static target_t *target_new(scraper_t *s, json_t *spec, int sd, hr_err_t *err) {
    target_t *t = calloc(1, sizeof *t);
    if (!t) return hr_fail(err, HR_ENOMEM, "out of memory"), NULL;
    t->owner = s;
    t->sd = sd;
    labels_init(&t->labels);
    if (parse_target(spec, s->interval_ns, s->cpu_seconds, t, err) ||
        !(t->spec = json_dumps(spec, JSON_SORT_KEYS | JSON_COMPACT))) {
        if (!err->code) hr_fail(err, HR_ENOMEM, "out of memory");
        target_free(t);
        return NULL;
    }
    return t;
}

/* Starts t's job threads and lists it; -1 with err when the job cap is reached or a
 * thread cannot start (t is then stopped and not listed: the caller frees it). */
static int target_start(scraper_t *s, target_t *t, hr_err_t *err) {
    pthread_mutex_lock(&s->mu);
    int full = s->njobs + t->njobs > SCRAPE_MAX_JOBS,
        room = !full && (s->ntargets < s->cap || (VEC_RESERVE(s->targets, s->cap, s->ntargets + 1) == 0));
    if (room) s->njobs += t->njobs;
    pthread_mutex_unlock(&s->mu);
    if (full) return hr_fail(err, HR_EINVAL, "scrape config: over %d (target, profile) pairs", SCRAPE_MAX_JOBS);
    if (!room) return hr_fail(err, HR_ENOMEM, "out of memory");
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, SCRAPE_STACK);
    int rc = 0;
    for (size_t k = 0; k < t->njobs && rc == 0; k++) {
        if (pthread_create(&t->jobs[k].thread, &attr, job_main, &t->jobs[k]))
            rc = hr_fail(err, HR_ENOMEM, "cannot start a scrape thread");
        else t->jobs[k].started = 1;
    }
    pthread_attr_destroy(&attr);
    pthread_mutex_lock(&s->mu);
    if (rc == 0) s->targets[s->ntargets++] = t;
    else s->njobs -= t->njobs;
    pthread_mutex_unlock(&s->mu);
    if (rc) {
        atomic_store(&t->stop, 1);
        for (size_t k = 0; k < t->njobs; k++)
            if (t->jobs[k].started) pthread_join(t->jobs[k].thread, NULL);
    }
    return rc;
}

/* Stops t's threads (a fetch in flight is cancelled) and unlists and frees it. */
static void target_stop(scraper_t *s, target_t *t) {
    pthread_mutex_lock(&s->mu);
    atomic_store(&t->stop, 1);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    for (size_t k = 0; k < t->njobs; k++)
        if (t->jobs[k].started) pthread_join(t->jobs[k].thread, NULL);
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->ntargets; i++)
        if (s->targets[i] == t) {
            s->targets[i] = s->targets[--s->ntargets];
            break;
        }
    s->njobs -= t->njobs;
    pthread_mutex_unlock(&s->mu);
    target_free(t);
}

/* Makes discovery job sd's running targets those of list: stops the ones no longer
 * listed, starts the new ones, leaves the rest running. */
static void sync_targets(scraper_t *s, int sd, json_t *list) {
    size_t n = json_array_size(list), added = 0, removed = 0;
    char **want = calloc(n + 1, sizeof *want);
    for (size_t i = 0; want && i < n; i++) want[i] = json_dumps(json_array_get(list, i), JSON_SORT_KEYS | JSON_COMPACT);
    if (!want) return;
    for (;;) { /* one removal at a time: target_stop changes the list */
        target_t *gone = NULL;
        pthread_mutex_lock(&s->mu);
        for (size_t i = 0; i < s->ntargets && !gone; i++) {
            target_t *t = s->targets[i];
            int listed = 0;
            for (size_t k = 0; k < n && !listed; k++) listed = want[k] && !strcmp(want[k], t->spec);
            if (t->sd == sd && !listed) gone = t;
        }
        pthread_mutex_unlock(&s->mu);
        if (!gone) break;
        target_stop(s, gone);
        removed++;
    }
    for (size_t k = 0; k < n; k++) {
        int running = 0;
        pthread_mutex_lock(&s->mu);
        for (size_t i = 0; i < s->ntargets && !running; i++)
            running = s->targets[i]->sd == sd && want[k] && !strcmp(want[k], s->targets[i]->spec);
        pthread_mutex_unlock(&s->mu);
        hr_err_t err = {0};
        target_t *t = running ? NULL : target_new(s, json_array_get(list, k), sd, &err);
        if (t && target_start(s, t, &err)) target_free(t), t = NULL;
        if (t) added++;
        else if (err.code) log_warn("scrape.target_refused", "job=%s err=\"%s\"", sd_job_name(s->sd[sd]), err.msg);
    }
    for (size_t k = 0; k < n; k++) free(want[k]);
    free(want);
    if (added || removed)
        log_info("scrape.discovered", "job=%s targets=%zu added=%zu removed=%zu", sd_job_name(s->sd[sd]), n, added,
                 removed);
}

/* Reads each discovery job's files and endpoints again every refresh interval. */
static void *sd_main(void *arg) {
    scraper_t *s = arg;
    int64_t *next = calloc(s->nsd + 1, sizeof *next);
    while (next && !atomic_load(&s->stop)) {
        int64_t now = time_now_ns(), soonest = now + 3600 * 1000000000LL;
        for (size_t i = 0; i < s->nsd && !atomic_load(&s->stop); i++) {
            int64_t every = sd_job_refresh_ns(s->sd[i]);
            if (!every) continue;
            if (!next[i]) next[i] = now + every; /* the first discovery ran at start */
            if (next[i] <= now) {
                json_t *list = sd_job_discover(s->sd[i], &s->stop);
                if (list) sync_targets(s, (int)i, list);
                json_decref(list);
                next[i] = time_now_ns() + every;
            }
            if (next[i] < soonest) soonest = next[i];
        }
        wait_until(s, &s->stop, soonest);
    }
    free(next);
    return NULL;
}

static void stop_all(scraper_t *s) {
    pthread_mutex_lock(&s->mu);
    atomic_store(&s->stop, 1);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (s->sd_started) pthread_join(s->sd_thread, NULL);
    while (s->ntargets) target_stop(s, s->targets[s->ntargets - 1]);
    free(s->targets);
    for (size_t i = 0; i < s->nsd; i++) sd_job_free(s->sd[i]);
    free(s->sd);
    free(s->self);
    free_names(s->nodes, s->nnodes);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

/* The "targets" list, then each of "jobs" discovered once; their threads start. */
static int parse_config(json_t *doc, scraper_t *s, hr_err_t *err) {
    json_t *targets = json_object_get(doc, "targets"), *jobs = json_object_get(doc, "jobs");
    json_t *cs = json_object_get(doc, "cpu_seconds");
    s->cpu_seconds = cs ? (int)json_integer_value(cs) : 10;
    if ((targets && !json_is_array(targets)) || (jobs && !json_is_array(jobs)) ||
        !(json_array_size(targets) + json_array_size(jobs)))
        return hr_fail(err, HR_EINVAL, "scrape config: needs a non-empty \"targets\" or \"jobs\" array");
    if (s->cpu_seconds < 1 || s->cpu_seconds > 3600)
        return hr_fail(err, HR_EINVAL, "scrape config: cpu_seconds must be an integer from 1 to 3600");
    if (parse_duration(json_object_get(doc, "interval"), 15000000000LL, &s->interval_ns, "interval", err)) return -1;
    for (size_t i = 0; i < json_array_size(targets); i++) {
        target_t *t = target_new(s, json_array_get(targets, i), -1, err);
        if (!t || target_start(s, t, err)) return target_free(t), -1;
        warn_long_profiles(t, s->cpu_seconds);
    }
    if (jobs && !(s->sd = calloc(json_array_size(jobs), sizeof *s->sd)))
        return hr_fail(err, HR_ENOMEM, "out of memory");
    for (size_t i = 0; i < json_array_size(jobs); i++) {
        if (!(s->sd[i] = sd_job_new(json_array_get(jobs, i), err))) return -1;
        s->nsd++;
        json_t *list = sd_job_discover(s->sd[i], &s->stop);
        if (!list) return hr_fail(err, HR_ENOMEM, "out of memory");
        for (size_t k = 0; k < json_array_size(list); k++) { /* a bad static target stops start-up */
            target_t *t = target_new(s, json_array_get(list, k), (int)i, err);
            if (!t || target_start(s, t, err)) {
                json_decref(list);
                return target_free(t), -1;
            }
        }
        json_decref(list);
    }
    return 0;
}

scraper_t *scraper_start(const char *path, app_t *app, const scrape_shard_t *shard, hr_err_t *err) {
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
    int rc = 0;
    if (shard && !(s->self = strdup(shard->self))) rc = hr_fail(err, HR_ENOMEM, "out of memory");
    if (shard && rc == 0) scraper_set_shard(s, shard->nodes, shard->n);
    if (rc == 0) rc = parse_config(doc, s, err);
    json_decref(doc);
    if (rc == 0 && s->nsd) {
        if (pthread_create(&s->sd_thread, NULL, sd_main, s)) rc = hr_fail(err, HR_ENOMEM, "cannot start discovery");
        else s->sd_started = 1;
    }
    if (rc) {
        stop_all(s);
        return NULL;
    }
    log_info("scrape.started", "targets=%zu jobs=%zu config=%s", s->ntargets, s->nsd, path);
    return s;
}

void scraper_stop(scraper_t *s) {
    if (s) stop_all(s);
}

void scraper_targets_json(scraper_t *s, buf_t *out) {
    buf_printf(out, "{\"targets\":[");
    pthread_mutex_lock(&s->mu);
    int first = 1;
    for (size_t i = 0; i < s->ntargets; i++) {
        const target_t *t = s->targets[i];
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
            buf_printf(out, ",\"scrapes\":%llu,\"failures\":%llu", j->scrapes, j->failures);
            if (s->self) buf_printf(out, ",\"scrapedBy\":"), jsonw_str(out, shard_owner(s, t));
            buf_putc(out, '}');
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
            for (size_t k = 0; k < s->targets[i]->njobs; k++) {
                const target_t *t = s->targets[i];
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
