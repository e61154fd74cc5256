/* rules_api.c - settings.v1.RecordingRulesService (rules.h): Get, List, Upsert and
 * Delete of a tenant's recording rules, kept in the tenant document
 * "recording_rules" ({"rules": {id: rule}}); provisioned rules (--recording-rules)
 * are listed and read but never changed here. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "common/timeparse.h"
#include "server/connect.h"
#include "server/rules.h"
#include "server/tenant_doc.h"
#include "wire/recording_rules.pb-c.h"

#define RULES_MAX 100 /* per tenant, besides the provisioned ones */

typedef struct {
    app_t *a;
    const char *tenant;
    arena_t *ar;
    http_resp_t *resp;
} rctx_t;

static void *fail(rctx_t *c, int status, const char *msg) {
    connect_error(c->resp, status, msg);
    return NULL;
}

static char **strings(rctx_t *c, const json_t *arr, size_t *n) {
    *n = json_array_size(arr);
    char **v = arena_alloc(c->ar, (*n + 1) * sizeof *v);
    for (size_t i = 0; v && i < *n; i++) v[i] = arena_strdup(c->ar, json_string_value(json_array_get(arr, i)) ?: "");
    return v;
}

/* The API's RecordingRule for rule r. NULL on OOM. */
static Settings__V1__RecordingRule *rule_msg(rctx_t *c, const json_t *r) {
    Settings__V1__RecordingRule *m = arena_alloc(c->ar, sizeof *m);
    char type[256] = "", q[4500];
    hr_err_t err = {0};
    if (!m) return NULL;
    settings__v1__recording_rule__init(m);
    (void)rule_query(r, type, sizeof type, q, sizeof q, &err); /* checked when stored */
    m->id = arena_strdup(c->ar, json_string_value(json_object_get(r, "id")) ?: "");
    m->metric_name = arena_strdup(c->ar, json_string_value(json_object_get(r, "metric_name")) ?: "");
    m->profile_type = arena_strdup(c->ar, type);
    m->matchers = strings(c, json_object_get(r, "matchers"), &m->n_matchers);
    m->group_by = strings(c, json_object_get(r, "group_by"), &m->n_group_by);
    json_t *ext = json_object_get(r, "external_labels");
    m->external_labels = arena_alloc(c->ar, (json_object_size(ext) + 1) * sizeof *m->external_labels);
    const char *k;
    json_t *v;
    json_object_foreach(ext, k, v) {
        Settings__V1__LabelPair *l = arena_alloc(c->ar, sizeof *l);
        if (!l || !m->external_labels) return NULL;
        settings__v1__label_pair__init(l);
        l->name = arena_strdup(c->ar, k), l->value = arena_strdup(c->ar, json_string_value(v) ?: "");
        m->external_labels[m->n_external_labels++] = l;
    }
    m->generation = json_integer_value(json_object_get(r, "generation"));
    m->provisioned = json_is_true(json_object_get(r, "provisioned"));
    const char *fn = json_string_value(json_object_get(r, "function_name"));
    if (fn && *fn) {
        Settings__V1__StacktraceFilter *f = arena_alloc(c->ar, sizeof *f);
        Settings__V1__StacktraceFilterFunctionName *n = arena_alloc(c->ar, sizeof *n);
        if (!f || !n) return NULL;
        settings__v1__stacktrace_filter__init(f);
        settings__v1__stacktrace_filter_function_name__init(n);
        n->function_name = arena_strdup(c->ar, fn);
        f->function_name = n;
        m->stacktrace_filter = f;
    }
    return arena_oom(c->ar) ? NULL : m;
}

/* The tenant's rules: provisioned ones first, then its own by id. *doc holds the
 * latter (caller decrefs). NULL (resp set) on failure. */
static json_t *all_rules(rctx_t *c, json_t **doc) {
    hr_err_t err = {0};
    if (!(*doc = tenant_doc_load(c->a, "recording_rules", c->tenant, RULES_DOC_MAX, &err)))
        return fail(c, hr_http_status(err.code), err.msg);
    json_t *all = json_array();
    size_t i;
    json_t *r;
    json_array_foreach(rules_provisioned(c->a), i, r) {
        if (all && !strcmp(json_string_value(json_object_get(r, "tenant")) ?: "", c->tenant)) json_array_append(all, r);
    }
    const char *id;
    json_object_foreach(json_object_get(*doc, "rules"), id, r) if (all) json_array_append(all, r);
    if (!all) fail(c, 503, "out of memory");
    return all;
}

static json_t *find(json_t *all, const char *id) {
    size_t i;
    json_t *r;
    json_array_foreach(all, i, r) if (!strcmp(json_string_value(json_object_get(r, "id")) ?: "", id ?: "")) return r;
    return NULL;
}

static ProtobufCMessage *list(rctx_t *c, const ProtobufCMessage *in) {
    (void)in;
    json_t *doc, *all = all_rules(c, &doc);
    if (!all) return NULL;
    Settings__V1__ListRecordingRulesResponse *r = arena_alloc(c->ar, sizeof *r);
    size_t n = json_array_size(all);
    Settings__V1__RecordingRule **v = arena_alloc(c->ar, (n + 1) * sizeof *v);
    int ok = r && v;
    for (size_t i = 0; ok && i < n; i++) ok = (v[i] = rule_msg(c, json_array_get(all, i))) != NULL;
    json_decref(all), json_decref(doc);
    if (!ok) return fail(c, 503, "out of memory");
    settings__v1__list_recording_rules_response__init(r);
    r->rules = v, r->n_rules = n;
    return &r->base;
}

static ProtobufCMessage *get(rctx_t *c, const ProtobufCMessage *in) {
    const Settings__V1__GetRecordingRuleRequest *q = (const void *)in;
    json_t *doc, *all = all_rules(c, &doc), *r = all ? find(all, q->id) : NULL;
    Settings__V1__GetRecordingRuleResponse *out = arena_alloc(c->ar, sizeof *out);
    if (out) settings__v1__get_recording_rule_response__init(out);
    if (out && r) out->rule = rule_msg(c, r);
    json_decref(all), json_decref(doc);
    if (!all) return NULL;
    if (!r) return fail(c, 404, "no recording rule with this id");
    return out && out->rule ? &out->base : fail(c, 503, "out of memory");
}

/* The rule an upsert describes, as stored (its id and generation set by the caller). */
static json_t *rule_of(const Settings__V1__UpsertRecordingRuleRequest *q) {
    json_t *r = json_object(), *m = json_array(), *g = json_array(), *e = json_object();
    for (size_t i = 0; m && i < q->n_matchers; i++) json_array_append_new(m, json_string(q->matchers[i]));
    for (size_t i = 0; g && i < q->n_group_by; i++) json_array_append_new(g, json_string(q->group_by[i]));
    for (size_t i = 0; e && i < q->n_external_labels; i++)
        json_object_set_new(e, q->external_labels[i]->name ?: "", json_string(q->external_labels[i]->value ?: ""));
    json_object_set_new(r, "metric_name", json_string(q->metric_name ?: ""));
    json_object_set_new(r, "matchers", m), json_object_set_new(r, "group_by", g);
    json_object_set_new(r, "external_labels", e);
    if (q->stacktrace_filter && q->stacktrace_filter->function_name)
        json_object_set_new(r, "function_name", json_string(q->stacktrace_filter->function_name->function_name ?: ""));
    return r;
}

static ProtobufCMessage *upsert(rctx_t *c, const ProtobufCMessage *in) {
    const Settings__V1__UpsertRecordingRuleRequest *q = (const void *)in;
    hr_err_t err = {0};
    json_t *r = rule_of(q);
    if (!r || rule_check(r, &err)) {
        json_decref(r);
        return fail(c, r ? 400 : 503, r ? err.msg : "out of memory");
    }
    char id[40];
    if (q->id && *q->id) {
        snprintf(id, sizeof id, "%s", q->id);
    } else {
        uint64_t x = 0;
        if (getrandom(&x, sizeof x, 0) != sizeof x) x = (uint64_t)time_now_ns();
        snprintf(id, sizeof id, "%016" PRIx64, x);
    }
    rules_lock(c->a);
    json_t *doc = NULL, *all = all_rules(c, &doc), *old = all ? find(all, id) : NULL;
    const char *why = NULL;
    int status = 0;
    if (all && old && json_is_true(json_object_get(old, "provisioned")))
        why = "a provisioned rule (--recording-rules) cannot be changed through the API", status = 400;
    else if (all && old && json_integer_value(json_object_get(old, "generation")) != q->generation)
        why = "the rule changed since it was read: `generation` does not match the stored one", status = 409;
    else if (all && !old && json_object_size(json_object_get(doc, "rules")) >= RULES_MAX)
        why = "this tenant has 100 recording rules, the most Hearth keeps", status = 400;
    if (all && !why) {
        json_object_set_new(r, "id", json_string(id));
        json_object_set_new(r, "generation", json_integer(old ? q->generation + 1 : 1));
        json_t *rules = json_object_get(doc, "rules");
        if (!rules) json_object_set_new(doc, "rules", rules = json_object());
        json_object_set(rules, id, r);
        if (tenant_doc_save(c->a, "recording_rules", c->tenant, doc, &err))
            why = err.msg, status = hr_http_status(err.code);
    }
    rules_unlock(c->a);
    Settings__V1__UpsertRecordingRuleResponse *out = all && !why ? arena_alloc(c->ar, sizeof *out) : NULL;
    if (out) settings__v1__upsert_recording_rule_response__init(out), out->rule = rule_msg(c, r);
    json_decref(r), json_decref(all), json_decref(doc);
    if (!all) return NULL;
    if (why) return fail(c, status, why);
    return out && out->rule ? &out->base : fail(c, 503, "out of memory");
}

static ProtobufCMessage *del(rctx_t *c, const ProtobufCMessage *in) {
    const Settings__V1__DeleteRecordingRuleRequest *q = (const void *)in;
    hr_err_t err = {0};
    rules_lock(c->a);
    json_t *doc = NULL, *all = all_rules(c, &doc), *old = all ? find(all, q->id) : NULL;
    const char *why = NULL;
    int status = 0;
    if (all && !old) why = "no recording rule with this id", status = 404;
    else if (all && json_is_true(json_object_get(old, "provisioned")))
        why = "a provisioned rule (--recording-rules) cannot be deleted through the API", status = 400;
    if (all && !why) {
        json_object_del(json_object_get(doc, "rules"), q->id);
        if (tenant_doc_save(c->a, "recording_rules", c->tenant, doc, &err))
            why = err.msg, status = hr_http_status(err.code);
    }
    rules_unlock(c->a);
    json_decref(all), json_decref(doc);
    if (!all) return NULL;
    if (why) return fail(c, status, why);
    Settings__V1__DeleteRecordingRuleResponse *out = arena_alloc(c->ar, sizeof *out);
    if (!out) return fail(c, 503, "out of memory");
    settings__v1__delete_recording_rule_response__init(out);
    return &out->base;
}

static const struct {
    const char *name;
    const ProtobufCMessageDescriptor *in;
    ProtobufCMessage *(*fn)(rctx_t *c, const ProtobufCMessage *in);
} RULE_METHODS[] = {
    {"GetRecordingRule", &settings__v1__get_recording_rule_request__descriptor, get},
    {"ListRecordingRules", &settings__v1__list_recording_rules_request__descriptor, list},
    {"UpsertRecordingRule", &settings__v1__upsert_recording_rule_request__descriptor, upsert},
    {"DeleteRecordingRule", &settings__v1__delete_recording_rule_request__descriptor, del},
};

void api_rules(app_t *a, http_req_t *req, http_resp_t *resp) {
    connect_codec_t codec;
    long i = connect_method(req, RULES_PREFIX, "settings.v1.RecordingRulesService", RULE_METHODS,
                            sizeof RULE_METHODS / sizeof *RULE_METHODS, sizeof *RULE_METHODS, &codec, resp);
    if (i < 0) return;
    rctx_t c = {a, req->tenant, arena_new(), resp};
    if (!c.ar) return connect_error(resp, 503, "out of memory");
    const ProtobufCMessage *in = connect_read(req, codec, RULE_METHODS[i].in, a->cfg.max_body_bytes, 1, c.ar, resp);
    ProtobufCMessage *out = in ? RULE_METHODS[i].fn(&c, in) : NULL;
    if (out) connect_reply(resp, codec, out);
    arena_free(c.ar);
}
