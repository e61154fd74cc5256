/* debuginfo_api.c - debug file uploads: PUT, DELETE /api/v1/debuginfo/BUILD_ID (and
 * BUILD_ID/sources, the source archive of the source view) and GET /api/v1/debuginfo.
 *
 * An upload is the raw ELF file as the body (`curl -T app.debug`), kept under
 * DATA/debuginfo/BUILD_ID (symbolize/debuginfo.h) and applied by the next query:
 * the symbolizer forgets what it knew about the build ID, including its cached
 * answers, so a better file replaces a worse one. The route rows give PUT the write
 * role, DELETE the admin role and the list the read role. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/timeparse.h"
#include "server/app.h"
#include "server/connect.h"
#include "server/grpc.h"
#include "common/fsutil.h"
#include "wire/debuginfo.pb-c.h"
#include "wire/parca_debuginfo.pb-c.h"

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

/* Keeps n bytes of tenant's upload as id's file of kind: spooled at path (renamed into
 * place, so path is cleared on success), else the bytes p. 0, or -1 with err (HR_ELIMIT
 * when the quota or the disk has no room). */
static int keep(app_t *a, const char *id, debuginfo_kind_t kind, const char *tenant, char *path, const void *p,
                size_t n, hr_err_t *err) {
    if (debuginfo_room(a->debuginfo, n, path != NULL, err)) return -1; /* a spooled body is removed by its owner */
    int rc = path ? debuginfo_store_file(a->debuginfo, id, kind, tenant, path, err)
                  : debuginfo_store(a->debuginfo, id, kind, tenant, p, n, err);
    if (rc) return -1;
    if (path) path[0] = 0;
    if (a->symbolizer && kind == DEBUGINFO_BINARY) symbolizer_invalidate(a->symbolizer, id);
    log_info("debuginfo.uploaded", "build_id=%s kind=%s bytes=%zu", id, kind == DEBUGINFO_SOURCES ? "sources" : "debug",
             n);
    return 0;
}

static void put(app_t *a, http_req_t *req, http_resp_t *resp, const char *id, debuginfo_kind_t kind) {
    if (req->spool_error) return http_error(resp, 507, "the upload could not be written to disk");
    hr_err_t err = {0};
    if (keep(a, id, kind, req->tenant, req->spool_path[0] ? req->spool_path : NULL, req->body.data, req->received,
             &err))
        return err.code == HR_ELIMIT ? http_error(resp, 507, "%s", err.msg) : http_error_from(resp, &err);
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

static int stored(app_t *a, const char *id, debuginfo_kind_t kind) { return debuginfo_has(a->debuginfo, id, kind); }

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
        out.should_initiate_upload = !stored(a, id, DEBUGINFO_BINARY);
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
    } else if (in && !stored(a, in->gnu_build_id, DEBUGINFO_BINARY)) {
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

/* ---- Parca's parca.debuginfo.v1alpha1.DebuginfoService, over gRPC (grpc.h) ----
 *
 * The agent asks ShouldInitiateUpload, then InitiateUpload, which always answers
 * "upload by gRPC" (Hearth signs no URLs), streams the file to Upload (an UploadInfo,
 * then chunks), and calls MarkUploadFinished. As for Pyroscope's flow, Hearth keeps no
 * upload state: the upload id is echoed, not checked, and the file counts once stored.
 * Source maps (DEBUGINFO_TYPE_SOURCE_MAP) are refused: Hearth symbolizes no JavaScript. */

/* The kind of a Parca DebuginfoType; -1 for one Hearth does not keep. */
static int parca_kind(Parca__Debuginfo__V1alpha1__DebuginfoType t) {
    if (t == PARCA__DEBUGINFO__V1ALPHA1__DEBUGINFO_TYPE__DEBUGINFO_TYPE_SOURCES) return DEBUGINFO_SOURCES;
    if (t == PARCA__DEBUGINFO__V1ALPHA1__DEBUGINFO_TYPE__DEBUGINFO_TYPE_SOURCE_MAP) return -1;
    return DEBUGINFO_BINARY; /* unspecified (a debug file) or the executable */
}

/* The build ID and kind of a request into id[cap]; -1 with the refusal in resp. */
static int parca_target(const char *build_id, Parca__Debuginfo__V1alpha1__DebuginfoType t, char *id, size_t cap,
                        debuginfo_kind_t *kind, http_resp_t *resp) {
    int k = parca_kind(t);
    if (k < 0) return connect_error(resp, 400, "source maps are not served: Hearth symbolizes native code"), -1;
    if (!build_id || snprintf(id, cap, "%s", build_id) >= (int)cap || !build_id_valid(id))
        return connect_error(resp, 400, "build_id must be the hex string the profile's mapping carries"), -1;
    *kind = (debuginfo_kind_t)k;
    return 0;
}

/* Decodes a unary call's request; NULL with resp set. */
static const ProtobufCMessage *parca_read(app_t *a, http_req_t *req, http_resp_t *resp,
                                          const ProtobufCMessageDescriptor *d, connect_codec_t *codec,
                                          arena_t **arena) {
    if (connect_codec(req, codec, resp)) return NULL;
    if (!(*arena = arena_new())) return connect_error(resp, 500, "out of memory"), NULL;
    return connect_read(req, *codec, d, a->cfg.max_body_bytes, 0, *arena, resp);
}

void api_parca_should_upload(app_t *a, http_req_t *req, http_resp_t *resp) {
    connect_codec_t codec;
    arena_t *arena = NULL;
    const Parca__Debuginfo__V1alpha1__ShouldInitiateUploadRequest *in = (const void *)parca_read(
        a, req, resp, &parca__debuginfo__v1alpha1__should_initiate_upload_request__descriptor, &codec, &arena);
    char id[300];
    debuginfo_kind_t kind;
    if (in && parca_target(in->build_id, in->type, id, sizeof id, &kind, resp) == 0) {
        Parca__Debuginfo__V1alpha1__ShouldInitiateUploadResponse out =
            PARCA__DEBUGINFO__V1ALPHA1__SHOULD_INITIATE_UPLOAD_RESPONSE__INIT;
        int have = stored(a, id, kind);
        out.should_initiate_upload = !have || in->force;
        out.reason = !have ? "not stored yet" : in->force ? "stored, replaced as forced" : "already stored";
        connect_reply(resp, codec, &out.base);
    }
    arena_free(arena);
}

void api_parca_initiate_upload(app_t *a, http_req_t *req, http_resp_t *resp) {
    connect_codec_t codec;
    arena_t *arena = NULL;
    const Parca__Debuginfo__V1alpha1__InitiateUploadRequest *in = (const void *)parca_read(
        a, req, resp, &parca__debuginfo__v1alpha1__initiate_upload_request__descriptor, &codec, &arena);
    char id[300], upload_id[32];
    debuginfo_kind_t kind;
    if (in && parca_target(in->build_id, in->type, id, sizeof id, &kind, resp) == 0) {
        if (in->size < 0 || (uint64_t)in->size > a->cfg.max_debuginfo_bytes) {
            connect_error(resp, 413, "the file is larger than --max-debuginfo-bytes");
        } else if (stored(a, id, kind) && !in->force) {
            connect_error(resp, 409, "already stored: upload with force to replace it"); /* Parca: AlreadyExists */
        } else {
            Parca__Debuginfo__V1alpha1__UploadInstructions ins = PARCA__DEBUGINFO__V1ALPHA1__UPLOAD_INSTRUCTIONS__INIT;
            Parca__Debuginfo__V1alpha1__InitiateUploadResponse out =
                PARCA__DEBUGINFO__V1ALPHA1__INITIATE_UPLOAD_RESPONSE__INIT;
            snprintf(upload_id, sizeof upload_id, "%llx", (unsigned long long)time_now_ns());
            ins.build_id = id;
            ins.upload_id = upload_id;
            ins.upload_strategy =
                PARCA__DEBUGINFO__V1ALPHA1__UPLOAD_INSTRUCTIONS__UPLOAD_STRATEGY__UPLOAD_STRATEGY_GRPC;
            ins.type = in->type;
            out.upload_instructions = &ins;
            connect_reply(resp, codec, &out.base);
        }
    }
    arena_free(arena);
}

void api_parca_upload_finished(app_t *a, http_req_t *req, http_resp_t *resp) {
    connect_codec_t codec;
    arena_t *arena = NULL;
    const Parca__Debuginfo__V1alpha1__MarkUploadFinishedRequest *in = (const void *)parca_read(
        a, req, resp, &parca__debuginfo__v1alpha1__mark_upload_finished_request__descriptor, &codec, &arena);
    char id[300];
    debuginfo_kind_t kind;
    if (in && parca_target(in->build_id, in->type, id, sizeof id, &kind, resp) == 0) {
        if (!stored(a, id, kind)) {
            connect_error(resp, 412, "nothing was uploaded for this build ID"); /* failed_precondition */
        } else {
            Parca__Debuginfo__V1alpha1__MarkUploadFinishedResponse out =
                PARCA__DEBUGINFO__V1ALPHA1__MARK_UPLOAD_FINISHED_RESPONSE__INIT;
            connect_reply(resp, codec, &out.base);
        }
    }
    arena_free(arena);
}

/* The streamed file's chunks into a new file in the spool folder; the UploadInfo that
 * comes first names it (id, kind). Returns the bytes written, or -1 with err. */
static int64_t parca_unstream(app_t *a, grpc_reader_t *r, int fd, const char *path, char *id, size_t cap,
                              debuginfo_kind_t *kind, hr_err_t *err) {
    buf_t msg;
    buf_init(&msg);
    int64_t total = -1, k;
    for (int first = 1; (k = grpc_reader_next(r, &msg, err)) == 1; first = 0) {
        Parca__Debuginfo__V1alpha1__UploadRequest *m =
            parca__debuginfo__v1alpha1__upload_request__unpack(NULL, msg.len, msg.data);
        int bad = !m || (first != (m->data_case == PARCA__DEBUGINFO__V1ALPHA1__UPLOAD_REQUEST__DATA_INFO)), kd = 0;
        if (!bad && first) {
            kd = parca_kind(m->info->type);
            bad = kd < 0 || !m->info->build_id || snprintf(id, cap, "%s", m->info->build_id) >= (int)cap ||
                  !build_id_valid(id);
            *kind = (debuginfo_kind_t)kd;
            total = 0;
        } else if (!bad) {
            total += (int64_t)m->chunk_data.len;
            if ((uint64_t)total > a->cfg.max_debuginfo_bytes) bad = 2;
            else if (fs_write_all(fd, m->chunk_data.data, m->chunk_data.len, path, err)) bad = 3;
        }
        parca__debuginfo__v1alpha1__upload_request__free_unpacked(m, NULL);
        if (bad == 1)
            k = hr_fail(err, HR_EINVAL,
                        "Upload: the first message is an UploadInfo naming a hex build_id (not a source map), "
                        "the others chunk_data");
        if (bad == 2)
            k = hr_fail(err, HR_ETOOBIG, "the upload exceeds --max-debuginfo-bytes %zu", a->cfg.max_debuginfo_bytes);
        if (bad) break;
    }
    buf_free(&msg);
    if (k == 0 && total < 0) return hr_fail(err, HR_EINVAL, "Upload: the call carried no UploadInfo");
    return k < 0 ? -1 : total;
}

/* parca.debuginfo.v1alpha1.DebuginfoService/Upload: client-streamed. */
void api_parca_upload(app_t *a, http_req_t *req, http_resp_t *resp) {
    grpc_reader_t r;
    hr_err_t err = {0};
    char id[300] = "", path[4400];
    debuginfo_kind_t kind = DEBUGINFO_BINARY;
    if (grpc_reader_open(&r, req, a->cfg.max_body_bytes, &err)) return http_error_from(resp, &err);
    snprintf(path, sizeof path, "%s/.upload-XXXXXX", debuginfo_spool_dir(a->debuginfo));
    int fd = mkostemp(path, O_CLOEXEC);
    int64_t n = fd < 0 ? hr_fail(&err, HR_EIO, "cannot store the upload: %s", strerror(errno))
                       : parca_unstream(a, &r, fd, path, id, sizeof id, &kind, &err);
    grpc_reader_close(&r);
    if (fd >= 0) close(fd);
    if (n >= 0 && keep(a, id, kind, req->tenant, path, NULL, (size_t)n, &err)) n = -1;
    if (fd >= 0 && path[0]) unlink(path);
    if (n < 0) return err.code == HR_ELIMIT ? http_error(resp, 507, "%s", err.msg) : http_error_from(resp, &err);
    Parca__Debuginfo__V1alpha1__UploadResponse out = PARCA__DEBUGINFO__V1ALPHA1__UPLOAD_RESPONSE__INIT;
    out.build_id = id;
    out.size = (uint64_t)n;
    connect_reply(resp, CONNECT_PROTO, &out.base);
}
