/* adhoc_api.c - adhocprofiles.v1.AdHocProfileService (Upload, Get, List, Diff):
 * Profiles Drilldown's "upload a profile file to look at it".
 *
 * An upload is stored as an ordinary profile of a tenant's own ad-hoc space, the
 * hidden tenant "<tenant>~adhoc" (a character tenant ids cannot have), under the
 * series label adhoc_id=ID, at the instant it was uploaded: it goes through the same
 * decoders, limits, WAL and blocks as any upload, and Get and Diff are ordinary
 * merges of that series, rendered as /api/v1/query?format=flamegraph renders them.
 * The list of uploads (id, name, time) is a tenant document (tenant_doc.h), so an
 * upload never appears among the tenant's own services. Retention applies to the
 * profiles as to any other: Get answers 404 for an upload it has deleted. */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "common/base64.h"
#include "common/timeparse.h"
#include "query/catalog.h"
#include "query/render.h"
#include "query/selector.h"
#include "server/app.h"
#include "server/connect.h"
#include "server/tenant_doc.h"
#include "wire/adhocprofiles.pb-c.h"

#define ADHOC_MAX 1000          /* uploads listed per tenant */
#define ADHOC_NAME_MAX 100      /* bytes of a name kept in the id */
#define ADHOC_DOC_MAX (1 << 20) /* bytes of the list */
#define ADHOC_SUFFIX "~adhoc"
#define MS 1000000LL

typedef struct {
    app_t *a;
    http_req_t *req;
    arena_t *ar;
    http_resp_t *resp;
    char space[160]; /* the hidden tenant */
} actx_t;

static void *fail(actx_t *c, int status, const char *msg) {
    connect_error(c->resp, status, msg);
    return NULL;
}

static void *fail_err(actx_t *c, const hr_err_t *err) {
    /* an upload that does not decode is the caller's (400), as upstream answers it */
    return fail(c, err->code == HR_EUNPROC ? 400 : hr_http_status(err->code), err->msg);
}

/* [A-Za-z0-9_.-], as upstream keeps names in ids (others become '_'). */
static void sanitize(const char *in, char *out, size_t cap) {
    size_t k = 0;
    for (; in && *in && k + 1 < cap && k < ADHOC_NAME_MAX; in++) {
        char ch = *in;
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
                 ch == '.' || ch == '-';
        out[k++] = ok ? ch : '_';
    }
    out[k] = 0;
}

static int id_valid(const char *id) {
    size_t n = id ? strlen(id) : 0;
    return n > 21 && n < 160 && strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == n;
}

/* The upload's entry in the tenant's list, or NULL (404 sent). *doc is the list. */
static json_t *entry_of(actx_t *c, const char *id, json_t **doc) {
    hr_err_t err = {0};
    if (!id_valid(id)) return fail(c, 400, "bad ad-hoc profile id");
    if (!(*doc = tenant_doc_load(c->a, "adhoc", c->req->tenant, ADHOC_DOC_MAX, &err))) return fail_err(c, &err);
    json_t *e = json_object_get(*doc, id);
    if (!e) return fail(c, 404, "no ad-hoc profile with this id");
    return e;
}

/* The sample type names the upload holds (its profile types' sample types), sorted
 * by type id; *ids the matching type ids. NULL when none (404 sent). */
static char **types_of(actx_t *c, const char *id, char ***ids, size_t *n) {
    selector_t sel;
    hr_err_t err = {0};
    char q[256];
    snprintf(q, sizeof q, "{adhoc_id=\"%s\"}", id);
    if (selector_parse(q, &sel, &err)) return fail_err(c, &err);
    catalog_query_t cq = {.tenant = c->space, .sel = &sel, .deadline_ns = app_query_deadline(c->a, c->req)};
    catalog_types_t t = {0};
    int rc = catalog_profile_types(c->a->store, &cq, 1, &t, &err);
    selector_destroy(&sel);
    char **names = rc == 0 ? arena_alloc(c->ar, (t.n + 1) * sizeof *names) : NULL;
    *ids = rc == 0 ? arena_alloc(c->ar, (t.n + 1) * sizeof **ids) : NULL;
    for (size_t i = 0; names && *ids && i < t.n; i++)
        names[i] = arena_strdup(c->ar, t.v[i].parts.sample_type), (*ids)[i] = arena_strdup(c->ar, t.v[i].id);
    *n = t.n;
    free(t.v);
    if (rc) return fail_err(c, &err);
    if (!names || !*ids || arena_oom(c->ar)) return fail(c, 503, "out of memory");
    if (!t.n) return fail(c, 404, "the ad-hoc profile's data is gone (retention deleted it)");
    return names;
}

/* Which of the upload's types `want` names (a sample type; "" or NULL: the first).
 * -1 (400 sent) when none. */
static long pick_type(actx_t *c, char **names, size_t n, const char *want) {
    for (size_t i = 0; i < n; i++)
        if (!want || !*want || !strcmp(names[i], want)) return (long)i;
    fail(c, 400, "the ad-hoc profile has no such profile type");
    return -1;
}

/* Merges upload id's series of type `type` (uploaded at ms) into m for renderer rd. */
static int merge_upload(actx_t *c, const char *id, const char *type, int64_t at_ms, const renderer_t *rd,
                        budget_hold_t *hold, merge_result_t *m, hr_err_t *err) {
    selector_t sel;
    char q[512];
    snprintf(q, sizeof q, "%s{adhoc_id=\"%s\"}", type, id);
    if (selector_parse(q, &sel, err)) return -1;
    merge_query_t mq = {.tenant = c->space,
                        .sel = &sel,
                        .from = at_ms * MS - MS,
                        .until = at_ms * MS + MS,
                        .want_stacks = (rd->needs & RENDER_STACKS) != 0,
                        .tree = (rd->needs & RENDER_TREE) != 0,
                        .deadline_ns = app_query_deadline(c->a, c->req),
                        .symbolizer = c->a->symbolizer,
                        .mem = hold};
    int rc = merge_run(c->a->store, &mq, m, err);
    selector_destroy(&sel);
    return rc;
}

static size_t max_nodes_of(const actx_t *c, int64_t asked) {
    size_t cap = c->a->cfg.max_nodes_limit;
    return asked > 0 && (size_t)asked < cap ? (size_t)asked : asked > 0 ? cap : RENDER_DEFAULT_MAX_NODES;
}

/* The Get answer for upload id (entry e of the list). */
static ProtobufCMessage *answer(actx_t *c, const char *id, json_t *e, const char *want, int64_t max_nodes) {
    char **ids, **names;
    size_t n;
    if (!(names = types_of(c, id, &ids, &n))) return NULL;
    long k = pick_type(c, names, n, want);
    if (k < 0) return NULL;
    const renderer_t *rd = render_find("flamegraph", RENDER_MERGE);
    int64_t at = json_integer_value(json_object_get(e, "uploadedAt"));
    budget_hold_t hold = {&c->a->query_budget, 0};
    merge_result_t m;
    hr_err_t err = {0};
    buf_t out;
    buf_init(&out);
    int rc = merge_upload(c, id, ids[k], at, rd, &hold, &m, &err);
    render_args_t args = {.m = &m, .max_nodes = max_nodes_of(c, max_nodes)};
    if (rc == 0) rc = query_render(rd, &args, &out, &err), merge_result_destroy(&m);
    budget_hold_release(&hold);
    buf_putc(&out, 0);
    Adhocprofiles__V1__AdHocProfilesGetResponse *r = arena_alloc(c->ar, sizeof *r);
    if (rc || !r || out.oom) {
        buf_free(&out);
        return rc ? fail_err(c, &err) : fail(c, 503, "out of memory");
    }
    adhocprofiles__v1__ad_hoc_profiles_get_response__init(r);
    r->id = arena_strdup(c->ar, id);
    r->name = arena_strdup(c->ar, json_string_value(json_object_get(e, "name")) ?: "");
    r->uploaded_at = at;
    r->profile_type = names[k];
    r->profile_types = names, r->n_profile_types = n;
    r->flamebearer_profile = arena_strdup(c->ar, (const char *)out.data);
    buf_free(&out);
    return arena_oom(c->ar) ? fail(c, 503, "out of memory") : &r->base;
}

static ProtobufCMessage *get(actx_t *c, const ProtobufCMessage *in) {
    const Adhocprofiles__V1__AdHocProfilesGetRequest *q = (const void *)in;
    json_t *doc = NULL, *e = entry_of(c, q->id, &doc);
    ProtobufCMessage *out = e ? answer(c, q->id, e, q->profile_type, q->max_nodes) : NULL;
    json_decref(doc);
    return out;
}

/* pprof (gzipped, or raw protobuf) or collapsed stacks ("a;b;c 12" lines), by content. */
static int format_of(const uint8_t *p, size_t n) {
    if (n >= 2 && p[0] == 0x1f && p[1] == 0x8b) return INGEST_PPROF;
    if (n && (p[0] == '{' || p[0] == '[')) return -1; /* flamebearer JSON: not served */
    for (size_t i = 0; i < n && i < 4096; i++)
        if (p[i] < 0x09 || (p[i] > 0x0d && p[i] < 0x20)) return INGEST_PPROF; /* binary */
    return INGEST_FOLDED;
}

/* A new id: the time in ms and 32 random bits, then the name, so ids sort by time. */
static void new_id(int64_t ms, const char *name, char *out, size_t cap) {
    uint32_t rnd = 0;
    if (getrandom(&rnd, sizeof rnd, 0) != sizeof rnd) rnd = (uint32_t)ms * 2654435761u;
    char clean[ADHOC_NAME_MAX + 1];
    sanitize(name, clean, sizeof clean);
    snprintf(out, cap, "%012" PRIx64 "%08" PRIx32 "-%s", (uint64_t)ms, rnd, clean);
}

/* The tenant's list of ad-hoc profiles, loaded under settings_mu (shared with the
 * settings documents: both are small, rare writes); with add non-NULL the entry is added
 * and the list saved. 0, or -1 with err (HR_EINVAL when the list is full). */
static int adhoc_list_update(actx_t *c, const char *id, json_t *add, hr_err_t *err) {
    pthread_mutex_lock(&c->a->settings_mu);
    json_t *doc = tenant_doc_load(c->a, "adhoc", c->req->tenant, ADHOC_DOC_MAX, err);
    int rc = doc ? 0 : -1;
    if (rc == 0 && json_object_size(doc) >= ADHOC_MAX)
        rc = hr_fail(err, HR_EINVAL, "this tenant has %d ad-hoc profiles, the most Hearth keeps", ADHOC_MAX);
    if (rc == 0 && add && json_object_set(doc, id, add)) rc = hr_fail(err, HR_ENOMEM, "out of memory");
    if (rc == 0 && add) rc = tenant_doc_save(c->a, "adhoc", c->req->tenant, doc, err);
    json_decref(doc);
    pthread_mutex_unlock(&c->a->settings_mu);
    return rc;
}

/* Stores the upload and adds it to the list. The ingest runs outside settings_mu (it
 * may wait on the WAL's fsync), so concurrent uploads may pass ADHOC_MAX by a few. */
static int store_upload(actx_t *c, const char *id, const char *name, int fmt, const uint8_t *p, size_t n, int64_t ms,
                        hr_err_t *err) {
    char series[256];
    snprintf(series, sizeof series, "adhoc{adhoc_id=%s}", id);
    ingest_request_t r = {.tenant = c->space,
                          .name = series,
                          .format = (ingest_format_t)fmt,
                          .has_from = 1,
                          .from_ns = ms * MS,
                          .received_ns = ms * MS,
                          .body = p,
                          .body_len = n};
    if (adhoc_list_update(c, id, NULL, err) || app_submit(c->a, &r, n, err)) return -1;
    json_t *e = json_pack("{s:s, s:I}", "name", name, "uploadedAt", (json_int_t)ms);
    int rc = e ? adhoc_list_update(c, id, e, err) : hr_fail(err, HR_ENOMEM, "out of memory");
    json_decref(e);
    return rc;
}

static ProtobufCMessage *upload(actx_t *c, const ProtobufCMessage *in) {
    const Adhocprofiles__V1__AdHocProfilesUploadRequest *q = (const void *)in;
    uint8_t *p = NULL;
    size_t n = 0;
    if (!q->profile || !*q->profile || base64_decode(q->profile, strlen(q->profile), &p, &n) || !n) {
        free(p);
        return fail(c, 400, "`profile` must be a non-empty base64 profile file");
    }
    int fmt = format_of(p, n);
    if (fmt < 0) {
        free(p);
        return fail(c, 400, "only pprof and collapsed stacks can be uploaded (not flamebearer JSON or perf script)");
    }
    char id[200], name[ADHOC_NAME_MAX + 1];
    sanitize(q->name, name, sizeof name);
    int64_t ms = time_now_ns() / MS;
    new_id(ms, q->name, id, sizeof id);
    hr_err_t err = {0};
    int rc = store_upload(c, id, name, fmt, p, n, ms, &err);
    free(p);
    if (rc) return fail_err(c, &err);
    json_t *e = json_pack("{s:s, s:I}", "name", name, "uploadedAt", (json_int_t)ms);
    ProtobufCMessage *out = e ? answer(c, id, e, NULL, q->max_nodes) : fail(c, 503, "out of memory");
    json_decref(e);
    return out;
}

static int newest_first(const void *a, const void *b) {
    const Adhocprofiles__V1__AdHocProfilesProfileMetadata *x = *(void *const *)a, *y = *(void *const *)b;
    if (x->uploaded_at != y->uploaded_at) return x->uploaded_at < y->uploaded_at ? 1 : -1;
    return strcmp(x->id, y->id);
}

static ProtobufCMessage *list(actx_t *c, const ProtobufCMessage *in) {
    (void)in;
    hr_err_t err = {0};
    json_t *doc = tenant_doc_load(c->a, "adhoc", c->req->tenant, ADHOC_DOC_MAX, &err);
    if (!doc) return fail_err(c, &err);
    size_t n = json_object_size(doc), k = 0;
    Adhocprofiles__V1__AdHocProfilesListResponse *r = arena_alloc(c->ar, sizeof *r);
    Adhocprofiles__V1__AdHocProfilesProfileMetadata **v = arena_alloc(c->ar, (n + 1) * sizeof *v);
    const char *id;
    json_t *e;
    json_object_foreach(doc, id, e) {
        Adhocprofiles__V1__AdHocProfilesProfileMetadata *m = arena_alloc(c->ar, sizeof *m);
        if (!m || !v) break;
        adhocprofiles__v1__ad_hoc_profiles_profile_metadata__init(m);
        m->id = arena_strdup(c->ar, id);
        m->name = arena_strdup(c->ar, json_string_value(json_object_get(e, "name")) ?: "");
        m->uploaded_at = json_integer_value(json_object_get(e, "uploadedAt"));
        v[k++] = m;
    }
    json_decref(doc);
    if (!r || !v || arena_oom(c->ar)) return fail(c, 503, "out of memory");
    qsort(v, k, sizeof *v, newest_first);
    adhocprofiles__v1__ad_hoc_profiles_list_response__init(r);
    r->profiles = v, r->n_profiles = k;
    return &r->base;
}

/* One side of a Diff: the merge of upload id's type `want` ("": the first). */
static int diff_side(actx_t *c, const char *id, const char *want, budget_hold_t *hold, merge_result_t *m, char ***names,
                     size_t *n) {
    json_t *doc = NULL, *e = entry_of(c, id, &doc);
    char **ids;
    long k = -1;
    if (e && (*names = types_of(c, id, &ids, n))) k = pick_type(c, *names, *n, want);
    int64_t at = e ? json_integer_value(json_object_get(e, "uploadedAt")) : 0;
    json_decref(doc);
    if (k < 0) return -1;
    hr_err_t err = {0};
    if (merge_upload(c, id, ids[k], at, render_find("diff", RENDER_DIFF), hold, m, &err)) return fail_err(c, &err), -1;
    return 0;
}

static ProtobufCMessage *diff(actx_t *c, const ProtobufCMessage *in) {
    const Adhocprofiles__V1__AdHocProfilesDiffRequest *q = (const void *)in;
    budget_hold_t hold = {&c->a->query_budget, 0};
    merge_result_t l, r;
    char **ln, **rn;
    size_t nl = 0, nr = 0;
    const char *want = q->profile_type && *q->profile_type ? q->profile_type : NULL;
    int rc = diff_side(c, q->left_id, want, &hold, &l, &ln, &nl);
    /* without a type asked for, the right side takes the left's */
    if (rc == 0 && (rc = diff_side(c, q->right_id, want ? want : ln[0], &hold, &r, &rn, &nr))) merge_result_destroy(&l);
    if (rc) return budget_hold_release(&hold), NULL;
    render_args_t args = {.m = &l, .right = &r, .max_nodes = max_nodes_of(c, q->max_nodes)};
    hr_err_t err = {0};
    buf_t out;
    buf_init(&out);
    rc = query_render(render_find("diff", RENDER_DIFF), &args, &out, &err);
    merge_result_destroy(&l), merge_result_destroy(&r);
    budget_hold_release(&hold);
    buf_putc(&out, 0);
    Adhocprofiles__V1__AdHocProfilesDiffResponse *d = arena_alloc(c->ar, sizeof *d);
    char **common = arena_alloc(c->ar, (nl + 1) * sizeof *common);
    if (rc || !d || !common || out.oom) {
        buf_free(&out);
        return rc ? fail_err(c, &err) : fail(c, 503, "out of memory");
    }
    adhocprofiles__v1__ad_hoc_profiles_diff_response__init(d);
    for (size_t i = 0; i < nl; i++)
        for (size_t j = 0; j < nr; j++)
            if (!strcmp(ln[i], rn[j])) common[d->n_profile_types++] = ln[i];
    d->profile_types = common;
    d->flamebearer_profile = arena_strdup(c->ar, (const char *)out.data);
    buf_free(&out);
    return arena_oom(c->ar) ? fail(c, 503, "out of memory") : &d->base;
}

static const struct {
    const char *name;
    const ProtobufCMessageDescriptor *in;
    ProtobufCMessage *(*fn)(actx_t *c, const ProtobufCMessage *in);
} ADHOC_METHODS[] = {
    {"Upload", &adhocprofiles__v1__ad_hoc_profiles_upload_request__descriptor, upload},
    {"Get", &adhocprofiles__v1__ad_hoc_profiles_get_request__descriptor, get},
    {"List", &adhocprofiles__v1__ad_hoc_profiles_list_request__descriptor, list},
    {"Diff", &adhocprofiles__v1__ad_hoc_profiles_diff_request__descriptor, diff},
};

void api_adhoc(app_t *a, http_req_t *req, http_resp_t *resp) {
    connect_codec_t codec;
    long i = connect_method(req, ADHOC_PREFIX, "adhocprofiles.v1.AdHocProfileService", ADHOC_METHODS,
                            sizeof ADHOC_METHODS / sizeof *ADHOC_METHODS, sizeof *ADHOC_METHODS, &codec, resp);
    if (i < 0) return;
    if (strlen(req->tenant) + strlen(ADHOC_SUFFIX) >= 128)
        return connect_error(resp, 400, "ad-hoc profiles need a tenant id of at most 121 characters");
    actx_t c = {a, req, arena_new(), resp, ""};
    if (!c.ar) return connect_error(resp, 503, "out of memory");
    snprintf(c.space, sizeof c.space, "%s%s", req->tenant, ADHOC_SUFFIX);
    const ProtobufCMessage *in = connect_read(req, codec, ADHOC_METHODS[i].in, a->cfg.max_body_bytes, 1, c.ar, resp);
    ProtobufCMessage *out = in ? ADHOC_METHODS[i].fn(&c, in) : NULL;
    if (out) connect_reply(resp, codec, out);
    arena_free(c.ar);
}
