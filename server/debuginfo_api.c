/* debuginfo_api.c - debug file uploads: PUT, DELETE /api/v1/debuginfo/BUILD_ID (and
 * BUILD_ID/sources, the source archive of the source view) and GET /api/v1/debuginfo.
 *
 * An upload is the raw ELF file as the body (`curl -T app.debug`), kept under
 * DATA/debuginfo/BUILD_ID (symbolize/debuginfo.h) and applied by the next query:
 * the symbolizer forgets what it knew about the build ID, including its cached
 * answers, so a better file replaces a worse one. The route rows give PUT the write
 * role, DELETE the admin role and the list the read role. */
#include <string.h>
#include <unistd.h>

#include "server/app.h"
#include "server/connect.h"
#include "wire/debuginfo.pb-c.h"

#define PREFIX "/api/v1/debuginfo/"

/* The build ID of the URL (BUILD_ID, or BUILD_ID/sources for its sources archive),
 * checked, into id[cap]; -1 with resp set. */
static int url_build_id(const http_req_t *req, http_resp_t *resp, char *id, size_t cap, debuginfo_kind_t *kind) {
    const char *s = req->url + strlen(PREFIX), *slash = strchr(s, '/');
    size_t n = slash ? (size_t)(slash - s) : strlen(s);
    *kind = slash && !strcmp(slash, "/sources") ? DEBUGINFO_SOURCES : DEBUGINFO_BINARY;
    snprintf(id, cap, "%.*s", (int)(n < cap ? n : cap - 1), s);
    if ((slash && *kind != DEBUGINFO_SOURCES) || n >= cap || !build_id_valid(id)) {
        http_error(resp, 400,
                   "bad URL `%.120s`: use /api/v1/debuginfo/BUILD_ID (the debug file) or /api/v1/debuginfo/"
                   "BUILD_ID/sources (a source archive), with the hex string the profile's mapping carries "
                   "(2-256 hex digits)",
                   req->url);
        return -1;
    }
    return 0;
}

static void put(app_t *a, http_req_t *req, http_resp_t *resp, const char *id, debuginfo_kind_t kind) {
    if (req->body_too_big)
        return http_error(resp, 413, "upload exceeds --max-debuginfo-bytes %zu", a->cfg.max_debuginfo_bytes);
    if (req->spool_error) return http_error(resp, 507, "the upload could not be written to disk");
    hr_err_t err = {0};
    if (debuginfo_room(a->debuginfo, req->received, req->spool_path[0] != 0, &err))
        return http_error(resp, 507, "%s", err.msg); /* the spooled body is removed with the request */
    int rc = req->spool_path[0]
                 ? debuginfo_store_file(a->debuginfo, id, kind, req->tenant, req->spool_path, &err)
                 : debuginfo_store(a->debuginfo, id, kind, req->tenant, req->body.data, req->body.len, &err);
    if (rc) return http_error_from(resp, &err);
    req->spool_path[0] = 0; /* renamed into place */
    if (a->symbolizer && kind == DEBUGINFO_BINARY) symbolizer_invalidate(a->symbolizer, id);
    log_info("debuginfo.uploaded", "build_id=%s kind=%s bytes=%zu", id, kind == DEBUGINFO_SOURCES ? "sources" : "debug",
             req->received);
    buf_t b;
    buf_init(&b);
    buf_printf(&b, "{\"build_id\":\"%s\",\"%s\":%zu}", id, kind == DEBUGINFO_SOURCES ? "sources_size" : "size",
               req->received);
    http_reply(resp, 200, "application/json", &b);
}

static void del(app_t *a, http_req_t *req, http_resp_t *resp, const char *id, debuginfo_kind_t kind) {
    hr_err_t err = {0};
    if (debuginfo_delete(a->debuginfo, id, kind, req->tenant, &err)) return http_error_from(resp, &err);
    if (a->symbolizer && kind == DEBUGINFO_BINARY) symbolizer_invalidate(a->symbolizer, id);
    log_info("debuginfo.deleted", "build_id=%s kind=%s", id, kind == DEBUGINFO_SOURCES ? "sources" : "debug");
    http_reply_text(resp, 200, "application/json", "{\"status\":\"deleted\"}");
}

void api_debuginfo(app_t *a, http_req_t *req, http_resp_t *resp) {
    char id[300];
    debuginfo_kind_t kind;
    if (url_build_id(req, resp, id, sizeof id, &kind)) return;
    if (!strcmp(req->method, "PUT")) put(a, req, resp, id, kind);
    else del(a, req, resp, id, kind);
}

void api_debuginfo_list(app_t *a, http_req_t *req, http_resp_t *resp) {
    buf_t b;
    buf_init(&b);
    hr_err_t err = {0};
    buf_printf(&b, "{\"debuginfo\":");
    if (debuginfo_list_json(a->debuginfo, req->tenant, &b, &err)) {
        buf_free(&b);
        return http_error_from(resp, &err);
    }
    buf_putc(&b, '}');
    http_reply(resp, 200, "application/json", &b);
}

/* ---- Pyroscope's debuginfo.v1alpha1.DebuginfoService, so its tooling uploads here ----
 *
 * ShouldInitiateUpload answers yes when no file is stored for the build ID; the file
 * then arrives as the raw body of POST .../Upload/{gnu_build_id} (stored as a PUT
 * stores it); UploadFinished confirms it is there. Hearth keeps no "uploading" state:
 * an upload without the question first is accepted too, and one whose finish never
 * comes is simply a stored file. */

#define DEBUGINFO_SERVICE "/debuginfo.v1alpha1.DebuginfoService/"

/* The build ID a FileMetadata names: GNU's hex, else the Go build ID hex-encoded (the
 * form agents put in a mapping's build_id). 0, or -1 when neither is usable. */
static int metadata_build_id(const Debuginfo__V1alpha1__FileMetadata *f, char *out, size_t cap) {
    if (f && f->gnu && *f->gnu) return snprintf(out, cap, "%s", f->gnu) < (int)cap && build_id_valid(out) ? 0 : -1;
    if (!f || !f->golang || !*f->golang || strlen(f->golang) * 2 >= cap) return -1;
    for (size_t i = 0; f->golang[i]; i++) snprintf(out + 2 * i, 3, "%02x", (unsigned char)f->golang[i]);
    return build_id_valid(out) ? 0 : -1;
}

static int stored(app_t *a, const char *id) {
    char path[4400];
    snprintf(path, sizeof path, "%s/debuginfo/%s", a->cfg.data_dir, id);
    return access(path, F_OK) == 0;
}

void api_debuginfo_should_upload(app_t *a, http_req_t *req, http_resp_t *resp) {
    connect_codec_t codec;
    if (connect_codec(req, &codec, resp)) return;
    arena_t *arena = arena_new();
    if (!arena) return connect_error(resp, 500, "out of memory");
    const Debuginfo__V1alpha1__ShouldInitiateUploadRequest *in =
        (const void *)connect_read(req, codec, &debuginfo__v1alpha1__should_initiate_upload_request__descriptor,
                                   a->cfg.max_body_bytes, 0, arena, resp);
    char id[300];
    if (in && metadata_build_id(in->file, id, sizeof id)) {
        connect_error(resp, 400, "file.GNU (or file.Golang) must name the build ID, as hex");
    } else if (in) {
        Debuginfo__V1alpha1__ShouldInitiateUploadResponse out =
            DEBUGINFO__V1ALPHA1__SHOULD_INITIATE_UPLOAD_RESPONSE__INIT;
        out.should_initiate_upload = !stored(a, id);
        out.reason = out.should_initiate_upload ? "debuginfo not stored yet" : "debuginfo already stored";
        connect_reply(resp, codec, &out.base);
    }
    arena_free(arena);
}

void api_debuginfo_upload_finished(app_t *a, http_req_t *req, http_resp_t *resp) {
    connect_codec_t codec;
    if (connect_codec(req, &codec, resp)) return;
    arena_t *arena = arena_new();
    if (!arena) return connect_error(resp, 500, "out of memory");
    const Debuginfo__V1alpha1__UploadFinishedRequest *in = (const void *)connect_read(
        req, codec, &debuginfo__v1alpha1__upload_finished_request__descriptor, a->cfg.max_body_bytes, 0, arena, resp);
    if (in && !build_id_valid(in->gnu_build_id)) {
        connect_error(resp, 400, "gnu_build_id must be hex");
    } else if (in && !stored(a, in->gnu_build_id)) {
        connect_error(resp, 412, "nothing was uploaded for this build ID"); /* failed_precondition */
    } else if (in) {
        Debuginfo__V1alpha1__UploadFinishedResponse out = DEBUGINFO__V1ALPHA1__UPLOAD_FINISHED_RESPONSE__INIT;
        connect_reply(resp, codec, &out.base);
    }
    arena_free(arena);
}

/* POST /debuginfo.v1alpha1.DebuginfoService/Upload/{gnu_build_id}: the raw file. */
void api_debuginfo_upload(app_t *a, http_req_t *req, http_resp_t *resp) {
    const char *id = req->url + strlen(DEBUGINFO_SERVICE "Upload/");
    if (!build_id_valid(id)) return http_error(resp, 400, "bad build ID `%.80s`: use hex", id);
    put(a, req, resp, id, DEBUGINFO_BINARY);
}
