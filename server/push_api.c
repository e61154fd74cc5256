/* push_api.c - POST /push.v1.PusherService/Push, Pyroscope's Connect push API.
 *
 * Connect unary over HTTP/1.1: the body is the bare message, binary
 * (application/proto) or JSON (application/json); the reply is an empty
 * PushResponse in the same encoding. Errors carry Connect's {"code", "message"}
 * (plus Hearth's usual "error"). Parca's POST /api/profiles/writeraw (the JSON gateway
 * of ProfileStoreService/WriteRaw) shares the path. */
#include <string.h>
#include <strings.h>

#include "common/jsonw.h"
#include "common/timeparse.h"
#include "server/app.h"

static const char *connect_code(int status) {
    switch (status) {
    case 400: case 422: return "invalid_argument";
    case 413: return "resource_exhausted";
    case 415: return "invalid_argument";
    case 503: return "unavailable";
    default: return "internal";
    }
}

static void connect_error(http_resp_t *resp, int status, const char *msg) {
    buf_t b;
    buf_init(&b);
    buf_printf(&b, "{\"code\":\"%s\",\"message\":", connect_code(status));
    jsonw_str(&b, msg);
    buf_printf(&b, ",\"error\":");
    jsonw_str(&b, msg);
    buf_putc(&b, '}');
    http_reply(resp, status, "application/json", &b);
}

/* Decodes, logs and applies a push-style request; replies in its encoding. */
static void push_body(app_t *a, http_req_t *req, http_resp_t *resp, ingest_format_t f) {
    if (strcmp(req->method, "POST")) return connect_error(resp, 400, "use POST (Connect unary)");
    if (!atomic_load(&a->ready)) return connect_error(resp, 503, "starting up: WAL replay in progress");
    if (req->body_too_big) {
        metrics_ingest_error(&a->metrics, HR_ETOOBIG);
        return connect_error(resp, 413, "request body exceeds --max-body-bytes");
    }
    ingest_request_t r = {.tenant = req->tenant, .name = "", .format = f, .received_ns = time_now_ns(),
                          .body = req->body.data, .body_len = req->body.len};
    hr_err_t err = {0};
    if (app_store_request(a, &r, req->received, &err) == 0) {
        if (f != INGEST_PUSH_PROTO) http_reply_text(resp, 200, "application/json", "{}");
        else http_reply_text(resp, 200, "application/proto", "");
    } else {
        connect_error(resp, hr_http_status(err.code), err.msg);
    }
}

void api_push(app_t *a, http_req_t *req, http_resp_t *resp) {
    const char *ct = http_header(req, "Content-Type");
    if (req->multipart) return connect_error(resp, 415, "Content-Type must be application/proto or application/json");
    if (ct && (!strncasecmp(ct, "application/proto", 17) || !strncasecmp(ct, "application/x-protobuf", 22) ||
               !strncasecmp(ct, "application/protobuf", 20)))
        return push_body(a, req, resp, INGEST_PUSH_PROTO);
    if (ct && !strncasecmp(ct, "application/json", 16)) return push_body(a, req, resp, INGEST_PUSH_JSON);
    connect_error(resp, 415, "Content-Type must be application/proto or application/json");
}

void api_parca_writeraw(app_t *a, http_req_t *req, http_resp_t *resp) {
    if (req->multipart) return connect_error(resp, 415, "writeraw takes a JSON body, not multipart/form-data");
    push_body(a, req, resp, INGEST_PARCA_JSON);
}
