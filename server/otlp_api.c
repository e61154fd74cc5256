/* otlp_api.c - POST /v1development/profiles (and /otlp/v1development/profiles),
 * OpenTelemetry's profiles export over OTLP/HTTP.
 *
 * The body is an ExportProfilesServiceRequest in binary protobuf
 * (application/x-protobuf) or OTLP JSON (application/json), gzipped when
 * Content-Encoding says so; it is logged and decoded as it came (ingest/otlp.h), so
 * WAL replay reads the same bytes. The answer is an ExportProfilesServiceResponse in
 * the request's encoding, carrying partial_success when some profiles were left
 * out; a request that cannot be stored at all gets Hearth's usual JSON error, as on
 * every ingest route. gRPC is not served (HTTP/1.1 only): an OpenTelemetry
 * Collector in front translates. */
#include <string.h>
#include <strings.h>

#include "common/pbjson.h"
#include "common/timeparse.h"
#include "server/app.h"
#include "wire/gzip.h"
#include "wire/otlp_profiles.pb-c.h"

/* The request's encoding from its Content-Type; -1 (resp set to 415) for another. */
static int otlp_codec(http_req_t *req, ingest_format_t *f, http_resp_t *resp) {
    const char *ct = http_header(req, "Content-Type");
    if (ct && !req->multipart) {
        if (!strncasecmp(ct, "application/x-protobuf", 22) || !strncasecmp(ct, "application/protobuf", 20))
            return *f = INGEST_OTLP_PROTO, 0;
        if (!strncasecmp(ct, "application/json", 16)) return *f = INGEST_OTLP_JSON, 0;
    }
    http_error(resp, 415, "Content-Type must be application/x-protobuf or application/json (OTLP/HTTP)");
    return -1;
}

/* Content-Encoding: none, identity, or gzip with a body that is one (the decoder
 * tells gzip by its magic). -1 with resp set otherwise. */
static int otlp_encoding(http_req_t *req, http_resp_t *resp) {
    const char *enc = http_header(req, "Content-Encoding");
    if (!enc || !*enc || !strcasecmp(enc, "identity")) return 0;
    if (strcasecmp(enc, "gzip")) return http_error(resp, 415, "Content-Encoding must be gzip or identity"), -1;
    if (!gz_is_gzip(req->body.data, req->body.len))
        return http_error(resp, 400, "Content-Encoding is gzip but the body is not a gzip stream"), -1;
    return 0;
}

static void reply(http_resp_t *resp, ingest_format_t f, const ingest_partial_t *part) {
    Otlp__ExportProfilesServiceResponse r = OTLP__EXPORT_PROFILES_SERVICE_RESPONSE__INIT;
    Otlp__ExportProfilesPartialSuccess ps = OTLP__EXPORT_PROFILES_PARTIAL_SUCCESS__INIT;
    char msg[sizeof part->message + 64];
    if (part->rejected) {
        snprintf(msg, sizeof msg, "%zu profile(s) left out; the first: %s", part->rejected, part->message);
        ps.rejected_profiles = (int64_t)part->rejected;
        ps.error_message = msg;
        r.partial_success = &ps;
    }
    buf_t b;
    buf_init(&b);
    if (f == INGEST_OTLP_JSON) {
        pbjson_encode(&r.base, &b);
        return http_reply(resp, 200, "application/json", &b);
    }
    size_t n = otlp__export_profiles_service_response__get_packed_size(&r);
    if (n && buf_reserve(&b, n) == 0) b.len = otlp__export_profiles_service_response__pack(&r, b.data);
    http_reply(resp, 200, "application/x-protobuf", &b);
}

void api_otlp_profiles(app_t *a, http_req_t *req, http_resp_t *resp) {
    ingest_format_t f;
    if (otlp_codec(req, &f, resp) || otlp_encoding(req, resp)) {
        metrics_ingest_error(&a->metrics, hr_code_of_status(resp->status));
        return;
    }
    ingest_partial_t part = {0};
    ingest_request_t r = {.tenant = req->tenant,
                          .name = "",
                          .format = f,
                          .received_ns = time_now_ns(),
                          .body = req->body.data,
                          .body_len = req->body.len,
                          .partial = &part};
    hr_err_t err = {0};
    if (app_submit(a, &r, req->received, &err)) return http_error_from(resp, &err);
    reply(resp, f, &part);
}
