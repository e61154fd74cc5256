/* split_api.c - merges split across cluster nodes (query/split.h): the live peers,
 * asking one for its share, and merging a share a peer asks for.
 *
 * The peers are the catalog's other nodes with the query role and a recent heartbeat,
 * re-read every 2 s by the background loop. A node asking forwards the caller's tenant
 * header and credential, so a peer answers only what the caller may read; the peer's
 * share route needs the read role like any query. Between nodes it is plain HTTP to
 * the peer's --listen address (a cluster with TLS listeners does not split). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "common/log.h"
#include "common/timeparse.h"
#include "query/catalog.h"
#include "query/share.h"
#include "server/app.h"
#include "catalog/index.h"
#include "wire/client.h"

#define PEER_MAX_AGE_S 6 /* three missed heartbeats and a node is not asked */

static void free_list(char **v, size_t n) {
    for (size_t i = 0; v && i < n; i++) free(v[i]);
    free(v);
}

void app_peers_refresh(app_t *a) {
    char **v = NULL;
    size_t n = 0;
    hr_err_t err = {0};
    if (index_peers(store_index(a->store), a->node, PEER_MAX_AGE_S, &v, &n, &err)) {
        log_warn("cluster.peers_failed", "err=\"%s\" (merges are not split until the catalog answers)", err.msg);
        free_list(v, n);
        v = NULL, n = 0;
    }
    pthread_mutex_lock(&a->peers_mu);
    char **old = a->peers;
    size_t nold = a->npeers;
    a->peers = v, a->npeers = n;
    pthread_mutex_unlock(&a->peers_mu);
    a->metrics.peers = n;
    a->metrics.peer_refreshes++; /* after the list is swapped: a reader of both sees the list it counts */
    free_list(old, nold);
}

void app_peers_free(app_t *a) {
    free_list(a->peers, a->npeers);
    a->peers = NULL, a->npeers = 0;
}

/* ---- asking ---- */

static int fetch(void *ctx, size_t peer, const store_part_ref_t *refs, size_t n, const merge_share_ask_t *ask,
                 buf_t *out, hr_err_t *err) {
    app_remote_t *r = ctx;
    buf_t body;
    buf_init(&body);
    buf_printf(&body, "%s,\"functions\":%s,\"totals\":%s,\"step\":%lld,\"parts\":[", r->body_head,
               ask->functions ? "true" : "false", ask->totals ? "true" : "false", (long long)ask->step);
    for (size_t i = 0; i < n; i++) {
        buf_printf(&body, "%s[%lld", i ? "," : "", (long long)refs[i].block);
        buf_printf(&body, refs[i].part == STORE_WHOLE_BLOCK ? "]" : ",%u]", refs[i].part);
    }
    buf_printf(&body, "]}");
    char url[600];
    snprintf(url, sizeof url, "http://%s/api/v1/internal/merge-share", r->peers[peer]);
    const char *headers[3] = {NULL, NULL, NULL};
    size_t h = 0;
    if (r->tenant[0]) headers[h++] = r->tenant;
    if (r->auth[0]) headers[h++] = r->auth;
    /* Three quarters of the time left: a peer that hangs leaves this node time to merge its share. */
    int64_t left = r->deadline_ns ? (r->deadline_ns - time_now_ns()) / 1000000000 * 3 / 4 : 300;
    client_resp_t resp;
    int rc = body.oom ? -1
                      : client_http_headers("POST", url, headers, body.data, body.len, "application/json",
                                            left < 1 ? 1 : (long)left, &resp);
    buf_free(&body);
    if (rc) {
        hr_fail(err, HR_EIO, "peer %s: %s", r->peers[peer], body.oom ? "out of memory" : resp.error);
        buf_free(&resp.body);
        return -1;
    }
    *out = resp.body;
    return 0;
}

int app_remote_begin(app_t *a, const http_req_t *req, const char *query, int64_t from, int64_t until, app_remote_t *r) {
    memset(r, 0, sizeof *r);
    if (!a->objects || !a->cfg.query_split || a->cfg.tls_cert[0] || !query) return 0;
    pthread_mutex_lock(&a->peers_mu);
    size_t n = a->npeers;
    r->peers = n ? calloc(n, sizeof *r->peers) : NULL;
    for (size_t i = 0; r->peers && i < n; i++) r->peers[i] = strdup(a->peers[i]);
    pthread_mutex_unlock(&a->peers_mu);
    r->npeers = r->peers ? n : 0;
    for (size_t i = 0; i < r->npeers; i++)
        if (!r->peers[i]) n = 0; /* out of memory: not split */
    json_t *q = json_string(query);
    char *qs = q ? json_dumps(q, JSON_ENCODE_ANY) : NULL;
    json_decref(q);
    buf_t head;
    buf_init(&head);
    if (qs) buf_printf(&head, "{\"query\":%s,\"from\":%lld,\"until\":%lld", qs, (long long)from, (long long)until);
    free(qs);
    buf_putc(&head, 0);
    r->body_head = head.oom || !head.len ? NULL : (char *)buf_steal(&head, NULL);
    buf_free(&head);
    if (!n || !r->peers || !r->body_head) {
        app_remote_end(r, NULL);
        return 0;
    }
    const char *auth = http_header(req, "Authorization"), *tenant = http_header(req, "X-Scope-OrgID");
    if (auth) snprintf(r->auth, sizeof r->auth, "Authorization: %s", auth);
    if (tenant) snprintf(r->tenant, sizeof r->tenant, "X-Scope-OrgID: %s", tenant);
    r->a = a;
    r->deadline_ns = app_query_deadline(a, req);
    r->rm = (merge_remote_t){n, a->cfg.query_split_min_bytes, fetch, r};
    return 1;
}

void app_remote_end(app_remote_t *r, const merge_result_t *m) {
    if (m && r->a) {
        r->a->metrics.shares_ok += m->split.shares_ok;
        r->a->metrics.shares_failed += m->split.shares_failed;
        if (m->split.parts_sent)
            log_info("query.split",
                     "peers=%zu parts_here=%zu parts_sent=%zu shares_ok=%zu shares_failed=%zu "
                     "peer_parts_decoded=%llu peer_cpu_ms=%llu",
                     r->rm.npeers, m->split.parts_here, m->split.parts_sent, m->split.shares_ok, m->split.shares_failed,
                     (unsigned long long)m->split.peer_parts_decoded,
                     (unsigned long long)(m->split.peer_cpu_us / 1000));
    }
    free_list(r->peers, r->npeers);
    free(r->body_head);
    memset(r, 0, sizeof *r);
}

/* ---- answering ---- */

/* The request's partitions ([block, part], or [block] for the block's every wanted
 * partition), sorted; NULL with a 400 in resp. */
static store_part_ref_t *parse_parts(json_t *v, size_t *n, http_resp_t *resp) {
    *n = json_array_size(v);
    store_part_ref_t *refs = json_is_array(v) ? malloc((*n + 1) * sizeof *refs) : NULL;
    if (!refs) return http_error(resp, json_is_array(v) ? 500 : 400, "`parts` must be an array"), NULL;
    for (size_t i = 0; i < *n; i++) {
        json_t *e = json_array_get(v, i), *b = json_array_get(e, 0), *p = json_array_get(e, 1);
        int whole = json_array_size(e) == 1;
        if (!json_is_integer(b) || json_array_size(e) > 2 ||
            (!whole &&
             (!json_is_integer(p) || json_integer_value(p) < 0 || json_integer_value(p) >= STORE_WHOLE_BLOCK))) {
            free(refs);
            return http_error(resp, 400, "`parts` must list [block id, partition] pairs or [block id]"), NULL;
        }
        refs[i] =
            (store_part_ref_t){json_integer_value(b), whole ? STORE_WHOLE_BLOCK : (uint32_t)json_integer_value(p)};
    }
    store_part_refs_sort(refs, *n);
    return refs;
}

static uint64_t cpu_us(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 +
           (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

void api_merge_share(app_t *a, http_req_t *req, http_resp_t *resp) {
    json_error_t je;
    json_t *doc = json_loadb((const char *)req->body.data, req->body.len, 0, &je);
    const char *qs = json_string_value(json_object_get(doc, "query"));
    json_t *from = json_object_get(doc, "from"), *until = json_object_get(doc, "until");
    json_t *step = json_object_get(doc, "step");
    if (!qs || !json_is_integer(from) || !json_is_integer(until) || (step && !json_is_integer(step))) {
        json_decref(doc);
        return http_error(resp, 400,
                          "a merge share needs `query`, `from` and `until` (ns), `parts` and an integer `step`");
    }
    size_t n;
    store_part_ref_t *refs = parse_parts(json_object_get(doc, "parts"), &n, resp);
    selector_t sel = {0};
    hr_err_t err = {0};
    catalog_query_t cq = {req->tenant, &sel, 0, 0, 0, app_query_deadline(a, req)};
    int rc = refs ? 0 : -1;
    if (rc == 0 && (selector_parse(qs, &sel, &err) || catalog_resolve_type(a->store, &cq, &sel, 1, &err))) rc = -1;
    budget_hold_t hold = {&a->query_budget, 0};
    merge_query_t q = {.tenant = req->tenant,
                       .sel = &sel,
                       .from = json_integer_value(from),
                       .until = json_integer_value(until),
                       .want_stacks = 1,
                       .parts = refs,
                       .nparts = n,
                       .deadline_ns = app_query_deadline(a, req),
                       .step = json_integer_value(step),
                       .share_totals = json_is_true(json_object_get(doc, "totals")),
                       .functions = json_is_true(json_object_get(doc, "functions")),
                       .mem = &hold};
    merge_result_t m;
    memset(&m, 0, sizeof m);
    store_stats_t before, after;
    store_stats(a->store, &before);
    uint64_t cpu0 = cpu_us();
    if (rc == 0) rc = merge_run(a->store, &q, &m, &err);
    buf_t out;
    buf_init(&out);
    if (rc == 0) {
        store_stats(a->store, &after);
        share_encode(&m, q.share_totals, after.part_loads - before.part_loads, cpu_us() - cpu0, &out);
        a->metrics.shares_served++;
        a->metrics.share_parts += n;
        http_reply(resp, 200, "application/octet-stream", &out);
    } else if (refs) {
        http_error_from(resp, &err);
    }
    buf_free(&out);
    merge_result_destroy(&m);
    budget_hold_release(&hold);
    selector_destroy(&sel);
    free(refs);
    json_decref(doc);
}
