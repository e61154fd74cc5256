/* rules.c - see rules.h. A rule is kept as the JSON object the API and the file
 * share: {"id", "metric_name", "matchers": [...], "group_by": [...],
 * "external_labels": {...}, "function_name", "generation"}; the file's also name
 * their "tenant" (default anonymous). */
#include "server/rules.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/regex.h"
#include "common/timeparse.h"
#include "query/groupby.h"
#include "query/selector.h"
#include "query/stackfilter.h"
#include "server/connect.h"
#include "server/remote_write.h"
#include "server/tenant_doc.h"
#include "wire/recording_rules.pb-c.h"

#define CATCH_UP_MAX 60  /* intervals one tick evaluates for one rule */
#define QUEUE_MAX 100000 /* samples waiting for remote write */

typedef struct {
    char key[300]; /* tenant \x1f id */
    int64_t last;  /* the start of the last interval evaluated */
} rule_state_t;

struct rules {
    json_t *provisioned;        /* array of rules, each with its "tenant" */
    remote_write_t *_Atomic rw; /* set by rules_start while /metrics may read it */
    pthread_t thread;
    pthread_mutex_t mu; /* stop flag, and API writes of rule documents */
    pthread_cond_t cv;
    int started, stopping;
    rule_state_t *state;
    size_t nstate, state_cap;
    _Atomic uint64_t evaluations, failures; /* read by /metrics */
};

/* ---- checking a rule ---- */

static int name_ok(const char *s, int colon) {
    if (!s || !*s || (*s >= '0' && *s <= '9')) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_' ||
              (colon && *s == ':')))
            return 0;
    return 1;
}

/* The rule's selector as a query, TYPE{matchers...}, into q; its profile type into
 * type. The matchers are PromQL-style selectors ({...}), one of them naming
 * __profile_type__. 0 or -1 with err (HR_EINVAL). */
int rule_query(const json_t *r, char *type, size_t tcap, char *q, size_t qcap, hr_err_t *err) {
    char inner[4096] = "";
    size_t at = 0, i;
    json_t *m;
    json_array_foreach(json_object_get(r, "matchers"), i, m) {
        const char *s = json_string_value(m);
        size_t n = s ? strlen(s) : 0;
        while (n && (*s == ' ' || *s == '\t')) s++, n--;
        while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
        if (n < 2 || s[0] != '{' || s[n - 1] != '}')
            return hr_fail(err, HR_EINVAL, "a matcher must be a selector in braces, e.g. {service_name=\"x\"}");
        if (n > 2 && at + n + 2 >= sizeof inner) return hr_fail(err, HR_EINVAL, "matchers too long");
        if (n > 2) at += (size_t)snprintf(inner + at, sizeof inner - at, "%s%.*s", at ? "," : "", (int)(n - 2), s + 1);
    }
    selector_t sel;
    char probe[4200];
    snprintf(probe, sizeof probe, "{%s}", inner);
    int rc = selector_parse(probe, &sel, err);
    type[0] = 0;
    for (size_t k = 0; rc == 0 && k < sel.n; k++)
        if (!strcmp(sel.m[k].name, "__profile_type__") && sel.m[k].op == MATCH_EQ)
            snprintf(type, tcap, "%s", sel.m[k].value);
    selector_destroy(&sel);
    if (rc) return -1;
    if (!type[0]) return hr_fail(err, HR_EINVAL, "the matchers must name the profile type: {__profile_type__=\"...\"}");
    snprintf(q, qcap, "%s{%s}", type, inner);
    return 0;
}

int rule_check(const json_t *r, hr_err_t *err) {
    char type[256], q[4500];
    if (!name_ok(json_string_value(json_object_get(r, "metric_name")), 1))
        return hr_fail(err, HR_EINVAL, "`metric_name` must be a Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)");
    size_t i;
    json_t *v;
    json_t *gb = json_object_get(r, "group_by");
    if (json_array_size(gb) > GROUPBY_MAX_LABELS) return hr_fail(err, HR_EINVAL, "at most 8 `group_by` labels");
    json_array_foreach(gb, i, v) if (!name_ok(json_string_value(v), 0)) return hr_fail(err, HR_EINVAL,
                                                                                       "bad `group_by` label name");
    const char *k;
    json_object_foreach(json_object_get(r, "external_labels"), k,
                        v) if (!name_ok(k, 0) || !json_is_string(v) ||
                               !strcmp(k, "__name__")) return hr_fail(err, HR_EINVAL,
                                                                      "bad `external_labels` entry `%s`", k);
    const char *fn = json_string_value(json_object_get(r, "function_name"));
    if (fn && strlen(fn) > 1024) return hr_fail(err, HR_EINVAL, "`function_name` longer than 1024 bytes");
    return rule_query(r, type, sizeof type, q, sizeof q, err);
}

/* ---- evaluating ---- */

static rule_state_t *state_of(struct rules *R, const char *tenant, const char *id, int64_t first) {
    char key[300];
    snprintf(key, sizeof key, "%s\x1f%s", tenant, id);
    for (size_t i = 0; i < R->nstate; i++)
        if (!strcmp(R->state[i].key, key)) return &R->state[i];
    if (R->nstate == R->state_cap) {
        size_t cap = R->state_cap ? 2 * R->state_cap : 16;
        rule_state_t *v = realloc(R->state, cap * sizeof *v);
        if (!v) return NULL;
        R->state = v, R->state_cap = cap;
    }
    rule_state_t *s = &R->state[R->nstate++];
    snprintf(s->key, sizeof s->key, "%s", key);
    s->last = first;
    return s;
}

/* ^name$ with RE2's metacharacters escaped: the frame named exactly so. */
static hr_regex_t *exact(const char *name, hr_err_t *err) {
    char pat[2200];
    size_t k = 0;
    pat[k++] = '^';
    for (; *name && k + 3 < sizeof pat; name++) {
        if (strchr("\\.+*?()|[]{}^$", *name)) pat[k++] = '\\';
        pat[k++] = *name;
    }
    pat[k++] = '$', pat[k] = 0;
    return hr_regex_compile(pat, err);
}

/* Sends one group's sample: __name__, the group's labels (empty ones left out: a
 * series without the label), the rule's constant labels. */
static void emit(struct rules *R, const json_t *r, const char *const *names, const char *const *vals, size_t w,
                 double value, int64_t t_ns) {
    const char *kv[2 * (GROUPBY_MAX_LABELS + 32) + 2];
    size_t n = 0;
    kv[2 * n] = "__name__", kv[2 * n + 1] = json_string_value(json_object_get(r, "metric_name")), n++;
    for (size_t i = 0; i < w; i++)
        if (vals[i] && *vals[i]) kv[2 * n] = names[i], kv[2 * n + 1] = vals[i], n++;
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(r, "external_labels"), k, v) {
        if (n == GROUPBY_MAX_LABELS + 32) break;
        kv[2 * n] = k, kv[2 * n + 1] = json_string_value(v), n++;
    }
    if (remote_write_push(atomic_load(&R->rw), kv, n, value, t_ns / 1000000)) log_warn("rules.oom", "metric=%s", kv[1]);
}

/* Evaluates rule r of tenant over [t, t + step). 0 or -1 with err. */
static int eval_bucket(app_t *a, const char *tenant, const json_t *r, int64_t t, int64_t step, hr_err_t *err) {
    struct rules *R = a->rules;
    char type[256], q[4500];
    if (rule_query(r, type, sizeof type, q, sizeof q, err)) return -1;
    selector_t sel;
    stackfilter_t sf = {0};
    const char *fn = json_string_value(json_object_get(r, "function_name"));
    hr_regex_t *re = fn && *fn ? exact(fn, err) : NULL;
    if ((fn && *fn && !re) || selector_parse(q, &sel, err)) return hr_regex_free(re), -1;
    sf.focus = re;
    merge_query_t mq = {.tenant = tenant,
                        .sel = &sel,
                        .from = t,
                        .until = t + step - 1,
                        .filter = &sf,
                        .deadline_ns = time_now_ns() + 30 * 1000000000LL};
    json_t *gb = json_object_get(r, "group_by");
    size_t w = json_array_size(gb);
    char *names[GROUPBY_MAX_LABELS];
    for (size_t i = 0; i < w; i++) names[i] = (char *)json_string_value(json_array_get(gb, i));
    int rc;
    if (w) {
        grouped_t g;
        rc = groupby_run(a->store, &mq, &sel, names, w, 0, &g, err);
        for (size_t i = 0; rc == 0 && i < g.n; i++)
            if (g.v[i].m.profiles) emit(R, r, (const char *const *)names, g.v[i].vals, w, g.v[i].m.total, t);
        grouped_destroy(&g);
    } else {
        merge_result_t m;
        rc = merge_run(a->store, &mq, &m, err);
        if (rc == 0 && m.profiles) emit(R, r, NULL, NULL, 0, m.total, t);
        if (rc == 0) merge_result_destroy(&m);
    }
    selector_destroy(&sel);
    hr_regex_free(re);
    return rc;
}

/* Evaluates one rule for every interval due since its last, up to `due`. */
static void eval_rule(app_t *a, const char *tenant, const json_t *r, int64_t due, int64_t step) {
    struct rules *R = a->rules;
    const char *id = json_string_value(json_object_get(r, "id"));
    rule_state_t *s = state_of(R, tenant, id ? id : "", due - step);
    for (int n = 0; s && s->last + step <= due && n < CATCH_UP_MAX; n++) {
        hr_err_t err = {0};
        int64_t t = s->last + step;
        if (eval_bucket(a, tenant, r, t, step, &err)) {
            R->failures++;
            log_warn("rules.eval_failed", "tenant=%s rule=%s err=\"%s\"", tenant, id ? id : "", err.msg);
        }
        R->evaluations++;
        s->last = t;
    }
}

typedef struct {
    app_t *a;
    int64_t due, step;
} tick_t;

/* A tenant's API rules, evaluated. */
static int eval_tenant(void *ctx, const char *tenant) {
    tick_t *k = ctx;
    hr_err_t err = {0};
    json_t *doc = tenant_doc_load(k->a, "recording_rules", tenant, RULES_DOC_MAX, &err);
    const char *id;
    json_t *r;
    json_object_foreach(json_object_get(doc, "rules"), id, r) eval_rule(k->a, tenant, r, k->due, k->step);
    if (!doc) log_warn("rules.load_failed", "tenant=%s err=\"%s\"", tenant, err.msg);
    json_decref(doc);
    return 0;
}

static void tick(app_t *a, int64_t now) {
    struct rules *R = a->rules;
    int64_t step = a->cfg.recording_rules_interval_ns;
    tick_t k = {a, (now / step - 2) * step, step}; /* ended one interval ago: its uploads are in */
    size_t i;
    json_t *r;
    json_array_foreach(R->provisioned, i, r) {
        eval_rule(a, json_string_value(json_object_get(r, "tenant")), r, k.due, step);
    }
    hr_err_t err = {0};
    if (tenant_doc_list(a, "recording_rules", eval_tenant, &k, &err))
        log_warn("rules.list_failed", "err=\"%s\"", err.msg);
}

static void *evaluator(void *arg) {
    app_t *a = arg;
    struct rules *R = a->rules;
    int64_t step = a->cfg.recording_rules_interval_ns, nap = step / 4 < 1000000000LL ? step / 4 : 1000000000LL;
    pthread_mutex_lock(&R->mu);
    while (!R->stopping) {
        pthread_mutex_unlock(&R->mu);
        tick(a, time_now_ns());
        pthread_mutex_lock(&R->mu);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t until = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec + nap;
        ts.tv_sec = until / 1000000000LL, ts.tv_nsec = until % 1000000000LL;
        if (!R->stopping) pthread_cond_timedwait(&R->cv, &R->mu, &ts);
    }
    pthread_mutex_unlock(&R->mu);
    return NULL;
}

/* ---- lifecycle ---- */

int rules_load(app_t *a, const char *path, hr_err_t *err) {
    struct rules *R = calloc(1, sizeof *R);
    if (!R) return hr_fail(err, HR_ENOMEM, "out of memory");
    pthread_mutex_init(&R->mu, NULL);
    pthread_cond_init(&R->cv, NULL);
    a->rules = R;
    if (!path || !*path) return (R->provisioned = json_array()) ? 0 : hr_fail(err, HR_ENOMEM, "out of memory");
    json_error_t je;
    R->provisioned = json_load_file(path, 0, &je);
    if (!json_is_array(R->provisioned))
        return hr_fail(err, HR_EINVAL, "--recording-rules %s: not a JSON array of rules (%s, line %d)", path, je.text,
                       je.line);
    size_t i;
    json_t *r;
    json_array_foreach(R->provisioned, i, r) {
        hr_err_t e = {0};
        const char *id = json_string_value(json_object_get(r, "id"));
        if (!json_is_object(r) || !id || !*id || rule_check(r, &e))
            return hr_fail(err, HR_EINVAL, "--recording-rules %s: rule %zu: %s", path, i,
                           e.msg[0] ? e.msg : "needs an `id`");
        if (!json_object_get(r, "tenant")) json_object_set_new(r, "tenant", json_string("anonymous"));
        json_object_set_new(r, "provisioned", json_true());
    }
    return 0;
}

int rules_start(app_t *a, hr_err_t *err) {
    struct rules *R = a->rules;
    if (!a->cfg.remote_write_url[0]) return 0;
    remote_write_t *rw = remote_write_start(a->cfg.remote_write_url, QUEUE_MAX, err);
    if (!rw) return -1;
    atomic_store(&R->rw, rw);
    if (pthread_create(&R->thread, NULL, evaluator, a)) return hr_fail(err, HR_ENOMEM, "cannot start the rules thread");
    R->started = 1;
    return 0;
}

void rules_stop(app_t *a) {
    struct rules *R = a->rules;
    if (!R) return;
    pthread_mutex_lock(&R->mu);
    R->stopping = 1;
    pthread_cond_broadcast(&R->cv);
    pthread_mutex_unlock(&R->mu);
    if (R->started) pthread_join(R->thread, NULL);
    remote_write_stop(atomic_load(&R->rw));
    json_decref(R->provisioned);
    free(R->state);
    pthread_mutex_destroy(&R->mu);
    pthread_cond_destroy(&R->cv);
    free(R);
    a->rules = NULL;
}

const json_t *rules_provisioned(const app_t *a) { return a->rules->provisioned; }
void rules_lock(app_t *a) { pthread_mutex_lock(&a->rules->mu); }
void rules_unlock(app_t *a) { pthread_mutex_unlock(&a->rules->mu); }

void rules_metrics(app_t *a, buf_t *o) {
    struct rules *R = a->rules;
    if (!R) return;
    buf_printf(o,
               "# HELP hearth_recording_rule_evaluations_total Recording rule intervals evaluated.\n"
               "# TYPE hearth_recording_rule_evaluations_total counter\n"
               "hearth_recording_rule_evaluations_total %llu\n"
               "# HELP hearth_recording_rule_evaluation_failures_total Evaluations that failed (logged).\n"
               "# TYPE hearth_recording_rule_evaluation_failures_total counter\n"
               "hearth_recording_rule_evaluation_failures_total %llu\n",
               (unsigned long long)atomic_load(&R->evaluations), (unsigned long long)atomic_load(&R->failures));
    remote_write_t *rw = atomic_load(&R->rw);
    if (!rw) return;
    remote_write_stats_t st;
    remote_write_stats(rw, &st);
    buf_printf(o,
               "# HELP hearth_remote_write_samples_total Recording rule samples by what became of them.\n"
               "# TYPE hearth_remote_write_samples_total counter\n"
               "hearth_remote_write_samples_total{result=\"sent\"} %llu\n"
               "hearth_remote_write_samples_total{result=\"refused\"} %llu\n"
               "hearth_remote_write_samples_total{result=\"dropped\"} %llu\n"
               "# HELP hearth_remote_write_retries_total Remote write requests sent again after a failure.\n"
               "# TYPE hearth_remote_write_retries_total counter\n"
               "hearth_remote_write_retries_total %llu\n"
               "# HELP hearth_remote_write_queued_samples Samples waiting to be sent.\n"
               "# TYPE hearth_remote_write_queued_samples gauge\n"
               "hearth_remote_write_queued_samples %zu\n",
               (unsigned long long)st.sent, (unsigned long long)st.failed, (unsigned long long)st.dropped,
               (unsigned long long)st.retries, st.queued);
}
