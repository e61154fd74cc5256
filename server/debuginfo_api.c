/* debuginfo_api.c - debug file uploads: PUT, DELETE /api/v1/debuginfo/BUILD_ID and
 * GET /api/v1/debuginfo.
 *
 * An upload is the raw ELF file as the body (`curl -T app.debug`), kept under
 * DATA/debuginfo/BUILD_ID (symbolize/debuginfo.h) and applied by the next query:
 * the symbolizer forgets what it knew about the build ID, including its cached
 * answers, so a better file replaces a worse one. The route rows give PUT the write
 * role, DELETE the admin role and the list the read role. */
#include <string.h>

#include "server/app.h"

#define PREFIX "/api/v1/debuginfo/"

/* The build ID of the URL, checked; NULL with resp set. */
static const char *url_build_id(const http_req_t *req, http_resp_t *resp) {
    const char *id = req->url + strlen(PREFIX);
    if (!build_id_valid(id)) {
        http_error(resp, 400,
                   "bad build ID `%.80s`: use the hex string the profile's mapping carries (2-256 hex digits)", id);
        return NULL;
    }
    return id;
}

static void put(app_t *a, http_req_t *req, http_resp_t *resp, const char *id) {
    if (req->body_too_big)
        return http_error(resp, 413, "debug file exceeds --max-debuginfo-bytes %zu", a->cfg.max_debuginfo_bytes);
    hr_err_t err = {0};
    if (debuginfo_store(a->debuginfo, id, req->body.data, req->body.len, &err)) return http_error_from(resp, &err);
    if (a->symbolizer) symbolizer_invalidate(a->symbolizer, id);
    log_info("debuginfo.uploaded", "build_id=%s bytes=%zu", id, req->body.len);
    buf_t b;
    buf_init(&b);
    buf_printf(&b, "{\"build_id\":\"%s\",\"size\":%zu}", id, req->body.len);
    http_reply(resp, 200, "application/json", &b);
}

static void del(app_t *a, http_resp_t *resp, const char *id) {
    hr_err_t err = {0};
    if (debuginfo_delete(a->debuginfo, id, &err)) return http_error_from(resp, &err);
    if (a->symbolizer) symbolizer_invalidate(a->symbolizer, id);
    log_info("debuginfo.deleted", "build_id=%s", id);
    http_reply_text(resp, 200, "application/json", "{\"status\":\"deleted\"}");
}

void api_debuginfo(app_t *a, http_req_t *req, http_resp_t *resp) {
    const char *id = url_build_id(req, resp);
    if (!id) return;
    if (!strcmp(req->method, "PUT")) put(a, req, resp, id);
    else del(a, resp, id);
}

void api_debuginfo_list(app_t *a, http_req_t *req, http_resp_t *resp) {
    (void)req;
    buf_t b;
    buf_init(&b);
    hr_err_t err = {0};
    buf_printf(&b, "{\"debuginfo\":");
    if (debuginfo_list_json(a->debuginfo, &b, &err)) {
        buf_free(&b);
        return http_error_from(resp, &err);
    }
    buf_putc(&b, '}');
    http_reply(resp, 200, "application/json", &b);
}
