/* push_api.c - POST /push.v1.PusherService/Push, Pyroscope's Connect push API.
 *
 * Connect unary over HTTP/1.1: the body is the bare message, binary
 * (application/proto) or JSON (application/json); the reply is an empty
 * PushResponse in the same encoding. Errors carry Connect's {"code", "message"}
 * (plus Hearth's usual "error"). Parca's ProfileStoreService/WriteRaw shares the path:
 * POST /parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw in either encoding (the
 * gRPC listener's route for it), and POST /api/profiles/writeraw, its JSON gateway. */
#include <string.h>

#include "common/timeparse.h"
#include "server/app.h"
#include "server/connect.h"

/* Decodes, logs and applies a push-style request; replies in its encoding. */
static void push_body(app_t *a, http_req_t *req, http_resp_t *resp, ingest_format_t f) {
    ingest_request_t r = {.tenant = req->tenant,
                          .name = "",
                          .format = f,
                          .received_ns = time_now_ns(),
                          .body = req->body.data,
                          .body_len = req->body.len};
    hr_err_t err = {0};
    if (app_submit(a, &r, req->received, &err) == 0) {
        if (f != INGEST_PUSH_PROTO && f != INGEST_PARCA_PROTO) http_reply_text(resp, 200, "application/json", "{}");
        else http_reply_text(resp, 200, "application/proto", "");
    } else {
        connect_error(resp, hr_http_status(err.code), err.msg);
    }
}

void api_push(app_t *a, http_req_t *req, http_resp_t *resp) {
    connect_codec_t c;
    if (connect_codec(req, &c, resp) == 0)
        push_body(a, req, resp, c == CONNECT_PROTO ? INGEST_PUSH_PROTO : INGEST_PUSH_JSON);
}

void api_parca_writeraw(app_t *a, http_req_t *req, http_resp_t *resp) {
    if (req->multipart) return connect_error(resp, 415, "writeraw takes a JSON body, not multipart/form-data");
    push_body(a, req, resp, INGEST_PARCA_JSON);
}

void api_parca_writeraw_rpc(app_t *a, http_req_t *req, http_resp_t *resp) {
    connect_codec_t c;
    if (connect_codec(req, &c, resp) == 0)
        push_body(a, req, resp, c == CONNECT_PROTO ? INGEST_PARCA_PROTO : INGEST_PARCA_JSON);
}
