/* settings_api.c - settings.v1.SettingsService (Get, Set, Delete): per-tenant UI
 * settings that Grafana's Profiles Drilldown reads when it opens and writes when a
 * user changes one.
 *
 * A tenant's settings are one small JSON document (tenant_doc.h), as Pyroscope keeps
 * them: {"name": {"value": ..., "modifiedAt": ...}}. Writes on one node are serialized (settings_mu); between nodes the last
 * write wins. A write older than the stored one (its modifiedAt) is refused with 409,
 * as upstream answers AlreadyExists. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/app.h"
#include "server/connect.h"
#include "server/tenant_doc.h"
#include "wire/settings.pb-c.h"

#define SETTINGS_MAX 256             /* settings per tenant */
#define SETTING_NAME_MAX 256         /* bytes */
#define SETTING_VALUE_MAX (64 << 10) /* bytes */
#define SETTINGS_DOC_MAX (SETTINGS_MAX * (SETTING_VALUE_MAX / 8))

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t modified_of(const json_t *entry) { return json_integer_value(json_object_get(entry, "modifiedAt")); }

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Get: every setting, by name (json_object_foreach visits keys in no set order). */
static int get_settings(app_t *a, const char *tenant, Settings__V1__GetSettingsResponse *r, arena_t *ar,
                        hr_err_t *err) {
    json_t *doc = tenant_doc_load(a, "settings", tenant, SETTINGS_DOC_MAX, err);
    if (!doc) return -1;
    size_t n = json_object_size(doc), k = 0;
    r->settings = arena_alloc(ar, (n ? n : 1) * sizeof *r->settings);
    Settings__V1__Setting *v = arena_alloc(ar, (n ? n : 1) * sizeof *v);
    const char **names = malloc((n ? n : 1) * sizeof *names);
    if (!r->settings || !v || !names) {
        free(names);
        json_decref(doc);
        return hr_fail(err, HR_ENOMEM, "out of memory");
    }
    const char *name;
    json_t *e;
    json_object_foreach(doc, name, e) names[k++] = name;
    qsort(names, n, sizeof *names, cmp_name);
    for (k = 0; k < n; k++) {
        settings__v1__setting__init(&v[k]);
        e = json_object_get(doc, names[k]);
        v[k].name = arena_strdup(ar, names[k]);
        v[k].value = arena_strdup(ar, json_string_value(json_object_get(e, "value")) ?: "");
        v[k].modifiedat = modified_of(e);
        r->settings[k] = &v[k];
    }
    r->n_settings = n;
    free(names);
    json_decref(doc);
    return 0;
}

/* Set (value non-NULL) or Delete one setting at modified (ms) under settings_mu: 0,
 * 1 when the stored one is newer (nothing written), -1 with err. */
static int put_setting(app_t *a, const char *tenant, const char *name, const char *value, int64_t modified,
                       hr_err_t *err) {
    pthread_mutex_lock(&a->settings_mu);
    json_t *doc = tenant_doc_load(a, "settings", tenant, SETTINGS_DOC_MAX, err),
           *old = doc ? json_object_get(doc, name) : NULL;
    int rc = doc ? 0 : -1;
    if (rc == 0 && old && modified_of(old) > modified) rc = 1;
    if (rc == 0 && value && !old && json_object_size(doc) >= SETTINGS_MAX)
        rc = hr_fail(err, HR_EINVAL, "tenant %s has %d settings, the most Hearth keeps", tenant, SETTINGS_MAX);
    if (rc == 0 && value) {
        json_t *e = json_pack("{s:s, s:I}", "value", value, "modifiedAt", (json_int_t)modified);
        if (!e || json_object_set_new(doc, name, e)) rc = hr_fail(err, HR_ENOMEM, "out of memory");
    }
    if (rc == 0 && !value && old) json_object_del(doc, name);
    if (rc == 0 && (value || old)) rc = tenant_doc_save(a, "settings", tenant, doc, err);
    json_decref(doc);
    pthread_mutex_unlock(&a->settings_mu);
    return rc;
}

/* What a name or value may be: a name of 1-256 bytes, a value up to 64 KiB. */
static const char *bad_setting(const char *name, const char *value) {
    if (!name || !*name) return "no setting name provided";
    if (strlen(name) > SETTING_NAME_MAX) return "setting name longer than 256 bytes";
    if (value && strlen(value) > SETTING_VALUE_MAX) return "setting value longer than 64 KiB";
    return NULL;
}

typedef ProtobufCMessage *(*settings_fn)(app_t *a, const char *tenant, const ProtobufCMessage *in, arena_t *ar,
                                         http_resp_t *resp);

static ProtobufCMessage *reply_error(http_resp_t *resp, const hr_err_t *err) {
    connect_error(resp, err->code == HR_EINVAL ? 400 : err->code == HR_ENOMEM ? 503 : 500, err->msg);
    return NULL;
}

static ProtobufCMessage *get(app_t *a, const char *tenant, const ProtobufCMessage *in, arena_t *ar, http_resp_t *resp) {
    (void)in;
    Settings__V1__GetSettingsResponse *r = arena_alloc(ar, sizeof *r);
    hr_err_t err = {0};
    if (!r) return connect_error(resp, 503, "out of memory"), NULL;
    settings__v1__get_settings_response__init(r);
    return get_settings(a, tenant, r, ar, &err) ? reply_error(resp, &err) : &r->base;
}

static ProtobufCMessage *set(app_t *a, const char *tenant, const ProtobufCMessage *in, arena_t *ar, http_resp_t *resp) {
    const Settings__V1__SetSettingsRequest *q = (const void *)in;
    if (!q->setting) return connect_error(resp, 400, "no setting values provided"), NULL;
    const char *why = bad_setting(q->setting->name, q->setting->value);
    if (why) return connect_error(resp, 400, why), NULL;
    int64_t at = q->setting->modifiedat > 0 ? q->setting->modifiedat : now_ms();
    hr_err_t err = {0};
    int rc = put_setting(a, tenant, q->setting->name, q->setting->value, at, &err);
    if (rc < 0) return reply_error(resp, &err);
    if (rc == 1) return connect_error(resp, 409, "a newer update of this setting is already written"), NULL;
    Settings__V1__SetSettingsResponse *r = arena_alloc(ar, sizeof *r);
    Settings__V1__Setting *v = arena_alloc(ar, sizeof *v);
    if (!r || !v) return connect_error(resp, 503, "out of memory"), NULL;
    settings__v1__set_settings_response__init(r);
    settings__v1__setting__init(v);
    v->name = q->setting->name, v->value = q->setting->value, v->modifiedat = at;
    r->setting = v;
    return &r->base;
}

static ProtobufCMessage *del(app_t *a, const char *tenant, const ProtobufCMessage *in, arena_t *ar, http_resp_t *resp) {
    const Settings__V1__DeleteSettingsRequest *q = (const void *)in;
    const char *why = bad_setting(q->name, NULL);
    if (why) return connect_error(resp, 400, why), NULL;
    hr_err_t err = {0};
    int rc = put_setting(a, tenant, q->name, NULL, now_ms(), &err);
    if (rc < 0) return reply_error(resp, &err);
    if (rc == 1) return connect_error(resp, 409, "a newer update of this setting is already written"), NULL;
    Settings__V1__DeleteSettingsResponse *r = arena_alloc(ar, sizeof *r);
    if (!r) return connect_error(resp, 503, "out of memory"), NULL;
    settings__v1__delete_settings_response__init(r);
    return &r->base;
}

static const struct {
    const char *name;
    const ProtobufCMessageDescriptor *in;
    settings_fn fn;
} SETTINGS_METHODS[] = {
    {"Get", &settings__v1__get_settings_request__descriptor, get},
    {"Set", &settings__v1__set_settings_request__descriptor, set},
    {"Delete", &settings__v1__delete_settings_request__descriptor, del},
};

void api_settings(app_t *a, http_req_t *req, http_resp_t *resp) {
    connect_codec_t codec;
    long i = connect_method(req, SETTINGS_PREFIX, "settings.v1.SettingsService", SETTINGS_METHODS,
                            sizeof SETTINGS_METHODS / sizeof *SETTINGS_METHODS, sizeof *SETTINGS_METHODS, &codec, resp);
    if (i < 0) return;
    arena_t *ar = arena_new();
    if (!ar) return connect_error(resp, 503, "out of memory");
    const ProtobufCMessage *in = connect_read(req, codec, SETTINGS_METHODS[i].in, a->cfg.max_body_bytes, 1, ar, resp);
    ProtobufCMessage *out = in ? SETTINGS_METHODS[i].fn(a, req->tenant, in, ar, resp) : NULL;
    if (out) connect_reply(resp, codec, out);
    arena_free(ar);
}
