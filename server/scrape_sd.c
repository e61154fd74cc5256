/* scrape_sd.c - see scrape_sd.h. */
#include "server/scrape_sd.h"

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/timeparse.h"
#include "server/relabel.h"
#include "common/labels.h"
#include "wire/client.h"

#define SD_MAX_BYTES (16u << 20) /* a file or HTTP answer of target groups */
#define SD_HTTP_TIMEOUT_S 30
#define SD_DEFAULT_REFRESH_NS (60 * 1000000000LL)

/* A file or HTTP source, with the groups it last gave. */
typedef struct {
    char *where; /* a glob pattern, or a URL */
    int http;
    json_t *last; /* [{"group": ..., "meta": where it came from}]: the last good read */
} source_t;

struct sd_job {
    char name[128], scheme[16];
    json_t *statics; /* static_configs */
    json_t *common;  /* profiles, interval, tenant: copied into every target */
    source_t *sources;
    size_t nsources;
    int64_t refresh_ns;
    relabel_t relabel;
};

static const char *const JOB_FIELDS[] = {"job",
                                         "scheme",
                                         "profiles",
                                         "interval",
                                         "tenant",
                                         "static_configs",
                                         "file_sd_configs",
                                         "http_sd_configs",
                                         "relabel_configs"};

static int known(const char *k, const char *const *names, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(names[i], k)) return 1;
    return 0;
}

void sd_job_free(sd_job_t *j) {
    if (!j) return;
    for (size_t i = 0; i < j->nsources; i++) {
        free(j->sources[i].where);
        json_decref(j->sources[i].last);
    }
    free(j->sources);
    json_decref(j->statics);
    json_decref(j->common);
    relabel_free(&j->relabel);
    free(j);
}

const char *sd_job_name(const sd_job_t *j) { return j->name; }
int64_t sd_job_refresh_ns(const sd_job_t *j) { return j->nsources ? j->refresh_ns : 0; }

static int add_source(sd_job_t *j, const char *where, int http) {
    source_t *v = realloc(j->sources, (j->nsources + 1) * sizeof *v);
    if (!v) return -1;
    j->sources = v;
    v[j->nsources] = (source_t){strdup(where), http, NULL};
    return v[j->nsources++].where ? 0 : -1;
}

/* file_sd_configs or http_sd_configs: each {"files": [...]} or {"url": ...}, with an
 * optional refresh_interval (the job refreshes at the shortest). */
static int parse_sources(sd_job_t *j, json_t *list, int http, hr_err_t *err) {
    const char *what = http ? "http_sd_configs" : "file_sd_configs";
    if (list && !json_is_array(list)) return hr_fail(err, HR_EINVAL, "scrape job %s: %s is an array", j->name, what);
    size_t i;
    json_t *c;
    json_array_foreach(list, i, c) {
        const char *k;
        json_t *v;
        json_object_foreach(
            c, k, v) if (strcmp(k, "refresh_interval") &&
                         strcmp(k, http ? "url" : "files")) return hr_fail(err, HR_EINVAL,
                                                                           "scrape job %s: %s[%zu]: unknown field `%s`",
                                                                           j->name, what, i, k);
        int64_t every = SD_DEFAULT_REFRESH_NS;
        const char *r = json_string_value(json_object_get(c, "refresh_interval"));
        if (r && (duration_parse(r, &every) || every < 1000000000LL))
            return hr_fail(err, HR_EINVAL, "scrape job %s: %s[%zu]: refresh_interval must be a duration of 1s or more",
                           j->name, what, i);
        if (!j->refresh_ns || every < j->refresh_ns) j->refresh_ns = every;
        json_t *where = http ? json_object_get(c, "url") : json_object_get(c, "files");
        const char *url = json_string_value(where);
        if (http && (!url || strncmp(url, "http", 4)))
            return hr_fail(err, HR_EINVAL, "scrape job %s: http_sd_configs[%zu] needs an http(s) url", j->name, i);
        if (http && add_source(j, url, 1)) return hr_fail(err, HR_ENOMEM, "out of memory");
        if (!http && (!json_is_array(where) || !json_array_size(where)))
            return hr_fail(err, HR_EINVAL, "scrape job %s: file_sd_configs[%zu] needs files: [patterns]", j->name, i);
        for (size_t f = 0; !http && f < json_array_size(where); f++) {
            const char *pat = json_string_value(json_array_get(where, f));
            if (!pat || !*pat) return hr_fail(err, HR_EINVAL, "scrape job %s: files are path patterns", j->name);
            if (add_source(j, pat, 0)) return hr_fail(err, HR_ENOMEM, "out of memory");
        }
    }
    return 0;
}

sd_job_t *sd_job_new(json_t *spec, hr_err_t *err) {
    sd_job_t *j = calloc(1, sizeof *j);
    if (!j) return hr_fail(err, HR_ENOMEM, "out of memory"), NULL;
    const char *name = json_string_value(json_object_get(spec, "job"));
    const char *scheme = json_string_value(json_object_get(spec, "scheme"));
    int rc = 0;
    if (!json_is_object(spec) || !name || !*name || strlen(name) >= sizeof j->name)
        rc = hr_fail(err, HR_EINVAL, "scrape config: every entry of \"jobs\" needs a \"job\" name");
    if (rc == 0) snprintf(j->name, sizeof j->name, "%s", name);
    const char *k;
    json_t *v;
    json_object_foreach(spec, k, v) if (rc == 0 && !known(k, JOB_FIELDS, sizeof JOB_FIELDS / sizeof *JOB_FIELDS)) rc =
        hr_fail(err, HR_EINVAL, "scrape job %s: unknown field `%s`", j->name, k);
    if (rc == 0 && scheme && strcmp(scheme, "http") && strcmp(scheme, "https"))
        rc = hr_fail(err, HR_EINVAL, "scrape job %s: scheme is http or https", j->name);
    snprintf(j->scheme, sizeof j->scheme, "%s", scheme ? scheme : "http");
    json_t *statics = json_object_get(spec, "static_configs");
    if (rc == 0 && statics && !json_is_array(statics))
        rc = hr_fail(err, HR_EINVAL, "scrape job %s: static_configs is an array of target groups", j->name);
    j->statics = statics ? json_incref(statics) : json_array();
    j->common = json_object();
    static const char *const COPIED[] = {"profiles", "interval", "tenant"};
    for (size_t i = 0; i < 3 && j->common; i++)
        if ((v = json_object_get(spec, COPIED[i]))) json_object_set(j->common, COPIED[i], v);
    if (rc == 0 && (!j->statics || !j->common)) rc = hr_fail(err, HR_ENOMEM, "out of memory");
    if (rc == 0) rc = parse_sources(j, json_object_get(spec, "file_sd_configs"), 0, err);
    if (rc == 0) rc = parse_sources(j, json_object_get(spec, "http_sd_configs"), 1, err);
    if (rc == 0 && relabel_parse(json_object_get(spec, "relabel_configs"), &j->relabel, err)) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        rc = hr_fail(err, HR_EINVAL, "scrape job %s: %s", j->name, msg);
    }
    if (rc) {
        sd_job_free(j);
        return NULL;
    }
    return j;
}

/* The target groups a document holds, each tagged with where it came from; NULL
 * when it is not a JSON array of groups. */
static json_t *groups_of(json_t *doc, const char *meta_name, const char *where) {
    if (!json_is_array(doc)) return NULL;
    json_t *out = json_array();
    size_t i;
    json_t *g;
    json_array_foreach(doc, i, g) {
        if (!json_is_object(g) || !json_is_array(json_object_get(g, "targets"))) {
            json_decref(out);
            return NULL;
        }
        json_array_append_new(out, json_pack("{s:O, s:s, s:s}", "group", g, "meta_name", meta_name, "meta", where));
    }
    return out;
}

/* Reads one source again: its groups, or the last good ones when it fails. */
static json_t *read_source(source_t *src, atomic_int *cancel) {
    json_t *now = json_array();
    char why[512] = "";
    if (src->http) {
        client_resp_t r;
        if (client_get_bounded(src->where, SD_HTTP_TIMEOUT_S, SD_MAX_BYTES, cancel, &r)) {
            snprintf(why, sizeof why, "%s", r.error);
        } else {
            json_t *doc = json_loadb((const char *)r.body.data, r.body.len, 0, NULL),
                   *g = groups_of(doc, "__meta_url", src->where);
            if (g) json_array_extend(now, g);
            else snprintf(why, sizeof why, "the answer is not a JSON array of target groups");
            json_decref(g);
            json_decref(doc);
        }
        buf_free(&r.body);
    } else {
        glob_t gl;
        int grc = glob(src->where, 0, NULL, &gl);
        for (size_t i = 0; grc == 0 && i < gl.gl_pathc && !why[0]; i++) {
            json_error_t je;
            json_t *doc = json_load_file(gl.gl_pathv[i], 0, &je),
                   *g = groups_of(doc, "__meta_filepath", gl.gl_pathv[i]);
            if (g) json_array_extend(now, g);
            else snprintf(why, sizeof why, "%s: not a JSON array of target groups (%s)", gl.gl_pathv[i], je.text);
            json_decref(g);
            json_decref(doc);
        }
        if (grc == 0 || grc == GLOB_NOMATCH) globfree(&gl); /* no file yet: no targets */
        else snprintf(why, sizeof why, "cannot list %s", src->where);
    }
    if (why[0]) {
        log_warn("scrape.discovery_failed", "source=%s err=\"%s\" (its last good targets stay)", src->where, why);
        json_decref(now);
        return src->last ? json_incref(src->last) : json_array();
    }
    json_decref(src->last);
    src->last = json_incref(now);
    return now;
}

/* A group's target at addr, relabeled, as a scrape target object; NULL when a rule
 * dropped it or it has no address left. */
static json_t *target_of(sd_job_t *j, json_t *group, const char *addr, const char *meta_name, const char *meta) {
    labels_t l;
    labels_init(&l);
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(group, "labels"), k, v) if (json_is_string(v) && label_name_valid(k))
        labels_set(&l, k, json_string_value(v));
    labels_set(&l, "__address__", addr);
    labels_set(&l, "__scheme__", j->scheme);
    if (!labels_get(&l, "job")) labels_set(&l, "job", j->name);
    if (meta_name) labels_set(&l, meta_name, meta);
    json_t *t = NULL;
    const char *a, *scheme;
    if (relabel_apply(&j->relabel, &l) == 1 && (a = labels_get(&l, "__address__")) && *a &&
        (scheme = labels_get(&l, "__scheme__"))) {
        char url[600];
        snprintf(url, sizeof url, "%s://%s", scheme, a);
        json_t *labels = json_object();
        for (size_t i = 0; labels && i < l.n; i++)
            if (strncmp(l.v[i].name, "__", 2)) json_object_set_new(labels, l.v[i].name, json_string(l.v[i].value));
        if (labels && !json_object_get(labels, "instance")) json_object_set_new(labels, "instance", json_string(a));
        t = json_deep_copy(j->common);
        if (t && labels) {
            json_object_set_new(t, "job", json_string(j->name));
            json_object_set_new(t, "url", json_string(url));
            json_object_set(t, "labels", labels);
        }
        json_decref(labels);
    }
    labels_destroy(&l);
    return t;
}

/* Orders targets by their JSON text, so repeats sit together and lists compare. */
static int cmp_dump(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static json_t *sorted_unique(json_t *targets) {
    size_t n = json_array_size(targets);
    char **texts = calloc(n + 1, sizeof *texts);
    json_t *out = texts ? json_array() : NULL;
    for (size_t i = 0; out && i < n; i++)
        if (!(texts[i] = json_dumps(json_array_get(targets, i), JSON_SORT_KEYS | JSON_COMPACT)))
            json_decref(out), out = NULL; /* out of memory */
    if (out) qsort(texts, n, sizeof *texts, cmp_dump);
    for (size_t i = 0; out && i < n; i++)
        if (i == 0 || strcmp(texts[i], texts[i - 1])) json_array_append_new(out, json_loads(texts[i], 0, NULL));
    for (size_t i = 0; texts && i < n; i++) free(texts[i]);
    free(texts);
    json_decref(targets);
    return out;
}

json_t *sd_job_discover(sd_job_t *j, atomic_int *cancel) {
    json_t *groups = json_array(), *targets = json_array();
    if (!groups || !targets) {
        json_decref(groups);
        json_decref(targets);
        return NULL;
    }
    size_t i;
    json_t *g;
    json_array_foreach(j->statics, i, g) json_array_append_new(groups, json_pack("{s:O}", "group", g));
    for (size_t s = 0; s < j->nsources; s++) {
        json_t *got = read_source(&j->sources[s], cancel);
        json_array_extend(groups, got);
        json_decref(got);
    }
    json_array_foreach(groups, i, g) {
        json_t *group = json_object_get(g, "group"), *a;
        size_t k;
        json_array_foreach(json_object_get(group, "targets"), k, a) {
            json_t *t = json_is_string(a) ? target_of(j, group, json_string_value(a),
                                                      json_string_value(json_object_get(g, "meta_name")),
                                                      json_string_value(json_object_get(g, "meta")))
                                          : NULL;
            if (t) json_array_append_new(targets, t);
        }
    }
    json_decref(groups);
    return sorted_unique(targets);
}
