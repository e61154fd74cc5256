/* connect.c - see connect.h. */
#include "server/connect.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/jsonw.h"
#include "common/pbjson.h"
#include "wire/gzip.h"

int connect_codec(const http_req_t *req, connect_codec_t *codec, http_resp_t *resp) {
    const char *ct = http_header(req, "Content-Type");
    if (ct && !req->multipart) {
        if (!strncasecmp(ct, "application/proto", 17) || !strncasecmp(ct, "application/x-protobuf", 22) ||
            !strncasecmp(ct, "application/protobuf", 20))
            return *codec = CONNECT_PROTO, 0;
        if (!strncasecmp(ct, "application/json", 16)) return *codec = CONNECT_JSON, 0;
    }
    connect_error(resp, 415, "Content-Type must be application/proto or application/json");
    return -1;
}

static const char *connect_code(int status) {
    switch (status) {
    case 400:
    case 415:
    case 422: return "invalid_argument";
    case 412: return "failed_precondition";
    case 401: return "unauthenticated";
    case 403: return "permission_denied";
    case 404:
    case 405:
    case 501: return "unimplemented";
    case 413:
    case 429: return "resource_exhausted";
    case 503: return "unavailable";
    case 504: return "deadline_exceeded";
    default: return "internal";
    }
}

void connect_error(http_resp_t *resp, int status, const char *msg) {
    buf_t b;
    buf_init(&b);
    buf_printf(&b, "{\"code\":\"%s\",\"message\":", connect_code(status));
    jsonw_str(&b, msg);
    buf_printf(&b, ",\"error\":");
    jsonw_str(&b, msg);
    buf_putc(&b, '}');
    http_reply(resp, status, "application/json", &b);
    http_set_reason(resp, msg);
}

ProtobufCMessage *connect_read(const http_req_t *req, connect_codec_t codec, const ProtobufCMessageDescriptor *desc,
                               size_t max_bytes, int strict, arena_t *arena, http_resp_t *resp) {
    const uint8_t *p = req->body.data;
    size_t n = req->body.len;
    uint8_t *raw = NULL;
    hr_err_t err = {0};
    const char *enc = http_header(req, "Content-Encoding");
    if (enc && *enc && strcasecmp(enc, "identity")) {
        if (strcasecmp(enc, "gzip")) return connect_error(resp, 400, "Content-Encoding must be gzip or identity"), NULL;
        if (gz_inflate(p, n, max_bytes, &raw, &n, &err))
            return connect_error(resp, err.code == HR_ETOOBIG ? 413 : 400, err.msg), NULL;
        p = raw;
    }
    ProtobufCMessage *m;
    if (codec == CONNECT_PROTO) {
        ProtobufCAllocator al = arena_pb_allocator(arena);
        m = protobuf_c_message_unpack(desc, &al, n, p);
        char which[200];
        if (!m) hr_fail(&err, HR_EINVAL, "the body is not a valid %s message", desc->name);
        else if (strict && pb_unknown_field(m, which, sizeof which))
            m = NULL, hr_fail(&err, HR_EINVAL, "%s is not one Hearth implements (refused, not ignored)", which);
    } else {
        m = pbjson_decode(desc, (const char *)p, n, arena, strict ? PBJSON_STRICT : 0, &err);
    }
    free(raw);
    if (!m) connect_error(resp, err.code == HR_ENOMEM ? 500 : 400, err.msg);
    return m;
}

void connect_reply(http_resp_t *resp, connect_codec_t codec, const ProtobufCMessage *msg) {
    buf_t b;
    buf_init(&b);
    if (codec == CONNECT_PROTO && protobuf_c_message_get_packed_size(msg) == 0)
        return http_reply_text(resp, 200, "application/proto", "");
    if (codec == CONNECT_JSON) {
        pbjson_encode(msg, &b);
    } else if (buf_reserve(&b, protobuf_c_message_get_packed_size(msg)) == 0) {
        b.len = protobuf_c_message_pack(msg, b.data);
    }
    if (b.oom) {
        buf_free(&b);
        return connect_error(resp, 500, "out of memory encoding the response");
    }
    http_reply(resp, 200, codec == CONNECT_JSON ? "application/json" : "application/proto", &b);
}

long connect_method(const http_req_t *req, const char *prefix, const char *service, const void *table, size_t n,
                    size_t stride, connect_codec_t *codec, http_resp_t *resp) {
    const char *method = req->url + strlen(prefix);
    size_t i = 0;
    while (i < n && strcmp(*(const char *const *)(const void *)((const char *)table + i * stride), method)) i++;
    char msg[160];
    snprintf(msg, sizeof msg, "no such method in %s", service);
    if (i == n) return connect_error(resp, 404, msg), -1;
    return connect_codec(req, codec, resp) ? -1 : (long)i;
}
